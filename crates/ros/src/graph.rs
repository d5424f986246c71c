//! The publishers edgerec knows of, and what to do when one appears or
//! leaves: subscribe to a new topic, or subscribe again with another QoS
//! when the set of offers changes what can be matched.
//!
//! A topic is a `(name, type)` pair: a name published with two types is
//! two channels, never one (and a warning). A publisher that leaves keeps
//! its topic's reader, so when it comes back its messages continue the
//! same channel. The request is worked out again only when a publisher
//! appears: weakening it then is needed to match the newcomer, and
//! strengthening it (every offer is now reliable, or transient-local) is
//! how a topic seen first with a weaker writer still gets a latched
//! message. When one leaves nothing changes, since a stronger reader made
//! now would receive the remaining writers' history a second time.

use std::collections::{BTreeMap, HashMap};

use crate::overrides::QosOverrides;
use crate::qos::{adapt, QosProfile, RequestQos};
use crate::selection::{Skip, TopicSelection};

/// A DDS GUID: the identity of a writer or participant.
pub type Gid = [u8; 16];

/// A discovered publication (a ROS 2 publisher), in ROS terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publication {
    /// The writer's GUID.
    pub gid: Gid,
    /// Its participant's GUID.
    pub participant: Gid,
    /// The ROS topic (`/imu`).
    pub topic: String,
    /// The ROS type (`sensor_msgs/msg/Imu`).
    pub type_name: String,
    /// What it offers.
    pub qos: QosProfile,
    /// `RIHS01_...` from USER_DATA (Jazzy and later).
    pub type_hash: Option<String>,
}

/// A recorded topic: name and type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicKey {
    /// The ROS topic.
    pub topic: String,
    /// The ROS type.
    pub type_name: String,
}

/// What the backend has to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Start recording a topic: register its channel, create its reader.
    Subscribe {
        /// The topic.
        key: TopicKey,
        /// The QoS to ask for.
        request: RequestQos,
        /// What its publishers offer now (for `offered_qos_profiles`).
        offers: Vec<QosProfile>,
        /// The type hash a publisher announced.
        type_hash: Option<String>,
    },
    /// Make the topic's reader again with another QoS.
    Resubscribe {
        /// The topic.
        key: TopicKey,
        /// The new request.
        request: RequestQos,
    },
    /// Something the operator should know.
    Warn(String),
}

#[derive(Debug)]
struct TopicState {
    request: RequestQos,
    overridden: bool,
}

/// The publishers known, and the topics subscribed.
#[derive(Debug)]
pub struct Graph {
    selection: TopicSelection,
    overrides: QosOverrides,
    writers: HashMap<Gid, Publication>,
    topics: BTreeMap<TopicKey, TopicState>,
    skipped: BTreeMap<TopicKey, Skip>,
}

impl Graph {
    /// An empty graph that records what `selection` selects.
    pub fn new(selection: TopicSelection, overrides: QosOverrides) -> Self {
        Graph {
            selection,
            overrides,
            writers: HashMap::new(),
            topics: BTreeMap::new(),
            skipped: BTreeMap::new(),
        }
    }

    /// A publisher appeared (or announced itself again).
    pub fn add(&mut self, p: Publication) -> Vec<Action> {
        let key = TopicKey {
            topic: p.topic.clone(),
            type_name: p.type_name.clone(),
        };
        let type_hash = p.type_hash.clone();
        let known = self.writers.insert(p.gid, p.clone());
        if known.as_ref() == Some(&p) {
            return Vec::new();
        }
        if let Err(why) = self.selection.decide(&key.topic, &key.type_name) {
            self.skipped.insert(key, why);
            return Vec::new();
        }
        let offers = self.offers(&key);
        let mut actions = Vec::new();
        let (request, overridden) = match self.overrides.get(&key.topic) {
            Some(o) => (o.request(), true),
            None => {
                let (r, warnings) = adapt(&offers);
                for w in warnings {
                    actions.push(Action::Warn(format!("{}: {w}", key.topic)));
                }
                (r, false)
            }
        };
        match self.topics.get_mut(&key) {
            None => {
                let others: Vec<&str> = self
                    .topics
                    .keys()
                    .filter(|k| k.topic == key.topic)
                    .map(|k| k.type_name.as_str())
                    .collect();
                if !others.is_empty() {
                    actions.push(Action::Warn(format!(
                        "{} is published as {} and as {}: recorded as separate channels",
                        key.topic,
                        key.type_name,
                        others.join(", ")
                    )));
                }
                self.topics.insert(
                    key.clone(),
                    TopicState {
                        request,
                        overridden,
                    },
                );
                actions.push(Action::Subscribe {
                    key,
                    request,
                    offers,
                    type_hash,
                });
            }
            Some(state) if !state.overridden && state.request != request => {
                state.request = request;
                actions.push(Action::Resubscribe { key, request });
            }
            Some(_) => {}
        }
        actions
    }

    /// A publisher left. Its topic keeps its reader.
    pub fn remove(&mut self, gid: &Gid) -> Option<Publication> {
        self.writers.remove(gid)
    }

    /// The offers of the topic's publishers present now.
    pub fn offers(&self, key: &TopicKey) -> Vec<QosProfile> {
        let mut v: Vec<(&Gid, QosProfile)> = self
            .writers
            .iter()
            .filter(|(_, w)| w.topic == key.topic && w.type_name == key.type_name)
            .map(|(g, w)| (g, w.qos))
            .collect();
        v.sort_by_key(|(g, _)| **g);
        v.into_iter().map(|(_, q)| q).collect()
    }

    /// Publishers present on a topic.
    pub fn publisher_count(&self, key: &TopicKey) -> usize {
        self.writers
            .values()
            .filter(|w| w.topic == key.topic && w.type_name == key.type_name)
            .count()
    }

    /// The topics subscribed and their current request.
    pub fn subscribed(&self) -> impl Iterator<Item = (&TopicKey, &RequestQos)> {
        self.topics.iter().map(|(k, s)| (k, &s.request))
    }

    /// Topics seen and not recorded, and why.
    pub fn skipped(&self) -> &BTreeMap<TopicKey, Skip> {
        &self.skipped
    }

    /// Topics listed by name that no publisher offers yet.
    pub fn missing_listed(&self) -> Vec<&str> {
        self.selection
            .listed()
            .iter()
            .filter(|t| !self.topics.keys().any(|k| &k.topic == *t))
            .map(String::as_str)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::overrides::QosOverride;
    use crate::qos::{Durability, History, Reliability};
    use crate::selection::SelectionOptions;

    fn graph(all: bool, topics: &[&str]) -> Graph {
        let o = SelectionOptions {
            all,
            topics: topics.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        };
        Graph::new(
            TopicSelection::new(&o, "/", "edgerec").unwrap(),
            QosOverrides::new(),
        )
    }

    fn publ(n: u8, topic: &str, ty: &str, r: Reliability, d: Durability) -> Publication {
        Publication {
            gid: [n; 16],
            participant: [n; 16],
            topic: topic.into(),
            type_name: ty.into(),
            qos: QosProfile {
                history: History::Unknown,
                reliability: r,
                durability: d,
                ..Default::default()
            },
            type_hash: None,
        }
    }

    fn subscribes(a: &[Action]) -> Vec<(&str, &str, Reliability, Durability)> {
        a.iter()
            .filter_map(|a| match a {
                Action::Subscribe { key, request, .. } => Some((
                    key.topic.as_str(),
                    key.type_name.as_str(),
                    request.reliability,
                    request.durability,
                )),
                _ => None,
            })
            .collect()
    }

    use Durability::*;
    use Reliability::*;

    #[test]
    fn a_new_topic_is_subscribed_once_with_the_offered_qos() {
        let mut g = graph(true, &[]);
        let a = g.add(publ(
            1,
            "/tf_static",
            "tf2_msgs/msg/TFMessage",
            Reliable,
            TransientLocal,
        ));
        assert_eq!(
            subscribes(&a),
            [(
                "/tf_static",
                "tf2_msgs/msg/TFMessage",
                Reliable,
                TransientLocal
            )]
        );
        // The same announcement again changes nothing.
        assert!(g
            .add(publ(
                1,
                "/tf_static",
                "tf2_msgs/msg/TFMessage",
                Reliable,
                TransientLocal
            ))
            .is_empty());
    }

    #[test]
    fn a_weaker_newcomer_weakens_the_request_and_a_stronger_set_strengthens_it() {
        let mut g = graph(true, &[]);
        g.add(publ(1, "/x", "a/msg/B", Reliable, TransientLocal));
        let a = g.add(publ(2, "/x", "a/msg/B", BestEffort, Volatile));
        assert!(a.contains(&Action::Resubscribe {
            key: TopicKey {
                topic: "/x".into(),
                type_name: "a/msg/B".into()
            },
            request: RequestQos {
                reliability: BestEffort,
                durability: Volatile,
                depth: crate::qos::DEFAULT_DEPTH
            },
        }));
        assert!(a.iter().any(
            |a| matches!(a, Action::Warn(w) if w.contains("1 of 2 publishers offer reliable"))
        ));
        // The weak one leaves: nothing changes until a publisher appears.
        g.remove(&[2; 16]);
        let a = g.add(publ(3, "/x", "a/msg/B", Reliable, TransientLocal));
        assert!(
            matches!(&a[..], [Action::Resubscribe { request, .. }] if request.durability == TransientLocal)
        );
    }

    #[test]
    fn two_types_on_one_topic_are_two_channels_and_a_warning() {
        let mut g = graph(true, &[]);
        g.add(publ(1, "/x", "a/msg/B", Reliable, Volatile));
        let a = g.add(publ(2, "/x", "a/msg/C", Reliable, Volatile));
        assert_eq!(subscribes(&a), [("/x", "a/msg/C", Reliable, Volatile)]);
        assert!(a
            .iter()
            .any(|a| matches!(a, Action::Warn(w) if w.contains("separate channels"))));
        assert_eq!(g.subscribed().count(), 2);
    }

    #[test]
    fn unselected_topics_are_remembered_not_subscribed() {
        let mut g = graph(false, &["/imu", "/gps"]);
        assert!(g
            .add(publ(1, "/camera", "a/msg/B", Reliable, Volatile))
            .is_empty());
        assert_eq!(g.skipped().len(), 1);
        assert_eq!(g.missing_listed(), ["/imu", "/gps"]);
        g.add(publ(2, "/imu", "a/msg/B", Reliable, Volatile));
        assert_eq!(g.missing_listed(), ["/gps"]);
    }

    #[test]
    fn an_override_fixes_the_request() {
        let o = SelectionOptions {
            all: true,
            ..Default::default()
        };
        let mut ov = QosOverrides::new();
        ov.insert(
            "/x".into(),
            QosOverride {
                reliability: Some(BestEffort),
                ..Default::default()
            },
        );
        let mut g = Graph::new(TopicSelection::new(&o, "/", "n").unwrap(), ov);
        let a = g.add(publ(1, "/x", "a/msg/B", Reliable, TransientLocal));
        assert_eq!(subscribes(&a), [("/x", "a/msg/B", BestEffort, Volatile)]);
        assert!(g
            .add(publ(2, "/x", "a/msg/B", BestEffort, Volatile))
            .is_empty());
    }
}
