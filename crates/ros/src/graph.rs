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
//!
//! What discovery brings is a peer's word: a publication is refused, and
//! counted by reason ([`Refused`]), when its topic or type is not a valid
//! ROS name (or is longer than DDS allows), when its topic is edgerec's
//! own (`/edgerec/...`) or one another source records, when the recorded
//! topics reached their cap, or when the publishers known reached theirs.
//! Nothing is kept for a refused publication, so a flood of announcements
//! costs a counter, not memory.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::names;
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

/// The topics recorded from the graph unless configured otherwise
/// (`ros.max_topics`).
pub const DEFAULT_MAX_TOPICS: usize = 1000;
/// Publishers known per recorded topic, on average, before new ones are
/// refused.
pub const PUBLISHERS_PER_TOPIC: usize = 16;
/// Topics seen and not recorded that are remembered (for the status).
pub const MAX_SKIPPED: usize = 1024;
/// edgerec's own topics: never recorded from the graph.
pub const OWN_NAMESPACE: &str = "/edgerec";

/// What the graph keeps at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphLimits {
    /// Topics recorded.
    pub max_topics: usize,
    /// Publishers known.
    pub max_publishers: usize,
}

impl GraphLimits {
    /// `max_topics` topics and [`PUBLISHERS_PER_TOPIC`] publishers each.
    pub fn topics(max_topics: usize) -> Self {
        GraphLimits {
            max_topics,
            max_publishers: max_topics.saturating_mul(PUBLISHERS_PER_TOPIC).max(64),
        }
    }
}

impl Default for GraphLimits {
    fn default() -> Self {
        GraphLimits::topics(DEFAULT_MAX_TOPICS)
    }
}

/// Why a discovered publication was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Its topic or type is not a valid ROS name.
    BadName,
    /// It publishes on one of edgerec's own topics.
    Own,
    /// Its topic is recorded by another source.
    OtherSource,
    /// The recorded topics reached their cap.
    TopicCap,
    /// The publishers known reached their cap.
    PublisherCap,
}

impl Refusal {
    /// Why, in words.
    pub fn what(self) -> &'static str {
        match self {
            Refusal::BadName => "not a valid ROS topic or type name",
            Refusal::Own => {
                "one of edgerec's own topics (/edgerec/...), never recorded from the graph"
            }
            Refusal::OtherSource => "recorded by another source of this recorder",
            Refusal::TopicCap => "the recorded topics reached their cap (ros.max_topics)",
            Refusal::PublisherCap => {
                "the publishers known reached their cap (16 per ros.max_topics)"
            }
        }
    }
}

/// Publications refused, by reason.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// [`Refusal::BadName`].
    pub bad_name: u64,
    /// [`Refusal::Own`].
    pub own: u64,
    /// [`Refusal::OtherSource`].
    pub other_source: u64,
    /// [`Refusal::TopicCap`].
    pub topic_cap: u64,
    /// [`Refusal::PublisherCap`].
    pub publisher_cap: u64,
}

impl Refused {
    fn count(&mut self, r: Refusal) -> u64 {
        let c = match r {
            Refusal::BadName => &mut self.bad_name,
            Refusal::Own => &mut self.own,
            Refusal::OtherSource => &mut self.other_source,
            Refusal::TopicCap => &mut self.topic_cap,
            Refusal::PublisherCap => &mut self.publisher_cap,
        };
        *c = c.saturating_add(1);
        *c
    }

    /// Each count with the name the status gives it.
    pub fn by_reason(&self) -> [(&'static str, u64); 5] {
        [
            ("bad_name", self.bad_name),
            ("own", self.own),
            ("other_source", self.other_source),
            ("topic_cap", self.topic_cap),
            ("publisher_cap", self.publisher_cap),
        ]
    }

    /// Every refusal.
    pub fn total(&self) -> u64 {
        self.by_reason()
            .iter()
            .fold(0u64, |a, (_, n)| a.saturating_add(*n))
    }
}

/// A name from a peer as a log shows it: quoted and escaped, cut at 80
/// characters.
fn shown(name: &str) -> String {
    let cut: String = name.chars().take(80).collect();
    if cut.len() < name.len() {
        format!("{cut:?} ({} bytes)", name.len())
    } else {
        format!("{cut:?}")
    }
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
    limits: GraphLimits,
    reserved: BTreeSet<String>,
    refused: Refused,
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
            limits: GraphLimits::default(),
            reserved: BTreeSet::new(),
            refused: Refused::default(),
        }
    }

    /// The same graph with these limits, and `reserved` topics (those other
    /// sources record) never taken from discovery.
    pub fn with_limits(
        mut self,
        limits: GraphLimits,
        reserved: impl IntoIterator<Item = String>,
    ) -> Self {
        self.limits = limits;
        self.reserved = reserved.into_iter().collect();
        self
    }

    /// The publications refused so far.
    pub fn refused(&self) -> Refused {
        self.refused
    }

    /// Whether a publisher is known (it was announced and not refused).
    pub fn knows(&self, gid: &Gid) -> bool {
        self.writers.contains_key(gid)
    }

    /// Why `p` cannot be taken, if it cannot (the topic cap is checked
    /// after the selection).
    fn refusal(&self, p: &Publication) -> Option<Refusal> {
        if names::validate_graph_topic(&p.topic).is_err()
            || names::validate_type(&p.type_name).is_err()
        {
            return Some(Refusal::BadName);
        }
        if p.topic == OWN_NAMESPACE
            || p.topic
                .strip_prefix(OWN_NAMESPACE)
                .is_some_and(|rest| rest.starts_with('/'))
        {
            return Some(Refusal::Own);
        }
        if self.reserved.contains(&p.topic) {
            return Some(Refusal::OtherSource);
        }
        if !self.writers.contains_key(&p.gid) && self.writers.len() >= self.limits.max_publishers {
            return Some(Refusal::PublisherCap);
        }
        None
    }

    /// Counts a refusal; warns at its 1st, 10th, 100th, ... time.
    fn refuse(&mut self, r: Refusal, p: &Publication) -> Vec<Action> {
        let n = self.refused.count(r);
        let mut m = n;
        while m % 10 == 0 {
            m /= 10;
        }
        if m != 1 {
            return Vec::new();
        }
        vec![Action::Warn(format!(
            "a publisher of {} ({}) is not recorded: {} ({n} refused for this so far)",
            shown(&p.topic),
            shown(&p.type_name),
            r.what()
        ))]
    }

    /// A publisher appeared (or announced itself again).
    pub fn add(&mut self, p: Publication) -> Vec<Action> {
        if self.writers.get(&p.gid) == Some(&p) {
            return Vec::new();
        }
        if let Some(r) = self.refusal(&p) {
            return self.refuse(r, &p);
        }
        let key = TopicKey {
            topic: p.topic.clone(),
            type_name: p.type_name.clone(),
        };
        if let Err(why) = self.selection.decide(&key.topic, &key.type_name) {
            if self.skipped.len() < MAX_SKIPPED || self.skipped.contains_key(&key) {
                self.skipped.insert(key, why);
            }
            return Vec::new();
        }
        if !self.topics.contains_key(&key) && self.topics.len() >= self.limits.max_topics {
            return self.refuse(Refusal::TopicCap, &p);
        }
        let type_hash = p.type_hash.clone();
        self.writers.insert(p.gid, p);
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

    fn warnings(a: &[Action]) -> Vec<&str> {
        a.iter()
            .filter_map(|a| match a {
                Action::Warn(w) => Some(w.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn names_that_are_not_ros_names_are_refused_counted_and_not_kept() {
        let mut g = graph(true, &[]);
        let long = format!("/{}", "x".repeat(300));
        let bad = [
            ("/a b", "pkg/msg/T"),
            ("/a\nb", "pkg/msg/T"),
            ("/ok", "pkg/msg/T\"quote"),
            ("/ok", "pkg/T"),
            ("/ok", "1pkg/msg/T"),
            (long.as_str(), "pkg/msg/T"),
            ("/ok", "pkg/msg/T: x"),
        ];
        for (i, (topic, ty)) in bad.iter().enumerate() {
            let a = g.add(publ(i as u8, topic, ty, Reliable, Volatile));
            assert!(subscribes(&a).is_empty(), "{topic:?} {ty:?}");
            assert!(!g.knows(&[i as u8; 16]));
        }
        assert_eq!(g.refused().bad_name, bad.len() as u64);
        assert_eq!(g.subscribed().count(), 0);
        // A good one still is recorded.
        let a = g.add(publ(99, "/ok", "pkg/msg/T", Reliable, Volatile));
        assert_eq!(subscribes(&a).len(), 1);
    }

    #[test]
    fn edgerecs_own_topics_and_other_sources_topics_are_never_taken() {
        let mut g = graph(true, &[]).with_limits(GraphLimits::default(), ["/imu".to_string()]);
        for (n, t) in [
            (1, "/edgerec"),
            (2, "/edgerec/status"),
            (3, "/edgerec/clock"),
        ] {
            assert!(
                subscribes(&g.add(publ(n, t, "std_msgs/msg/String", Reliable, Volatile)))
                    .is_empty()
            );
        }
        let a = g.add(publ(4, "/imu", "sensor_msgs/msg/Imu", Reliable, Volatile));
        assert!(subscribes(&a).is_empty());
        assert!(
            warnings(&a)[0].contains("recorded by another source"),
            "{a:?}"
        );
        assert_eq!(g.refused().own, 3);
        assert_eq!(g.refused().other_source, 1);
        // Only the namespace itself: /edgerecx is anybody's.
        let a = g.add(publ(
            5,
            "/edgerecx",
            "std_msgs/msg/String",
            Reliable,
            Volatile,
        ));
        assert_eq!(subscribes(&a).len(), 1);
    }

    #[test]
    fn the_topic_cap_refuses_new_topics_not_new_publishers_of_known_ones() {
        let mut g = graph(true, &[]).with_limits(GraphLimits::topics(2), []);
        g.add(publ(1, "/a", "p/msg/T", Reliable, Volatile));
        g.add(publ(2, "/b", "p/msg/T", Reliable, Volatile));
        let a = g.add(publ(3, "/c", "p/msg/T", Reliable, Volatile));
        assert!(subscribes(&a).is_empty());
        assert!(warnings(&a)[0].contains("ros.max_topics"), "{a:?}");
        assert_eq!(g.refused().topic_cap, 1);
        assert!(!g.knows(&[3; 16]));
        // Another publisher of /a is taken.
        g.add(publ(4, "/a", "p/msg/T", Reliable, Volatile));
        assert!(g.knows(&[4; 16]));
        assert_eq!(g.subscribed().count(), 2);
    }

    #[test]
    fn the_publisher_cap_bounds_what_a_flood_of_announcements_keeps() {
        let mut g = graph(true, &[]).with_limits(
            GraphLimits {
                max_topics: 10,
                max_publishers: 3,
            },
            [],
        );
        let mut warned = 0;
        for n in 0..200u8 {
            let a = g.add(publ(n, "/a", "p/msg/T", Reliable, Volatile));
            warned += warnings(&a)
                .iter()
                .filter(|w| w.contains("publishers known"))
                .count();
        }
        assert_eq!(
            g.publisher_count(&TopicKey {
                topic: "/a".into(),
                type_name: "p/msg/T".into()
            }),
            3
        );
        assert_eq!(g.refused().publisher_cap, 197);
        // Warned at the 1st, 10th and 100th refusal only.
        assert_eq!(warned, 3);
        // A known publisher announcing itself again is still itself.
        assert!(g
            .add(publ(0, "/a", "p/msg/T", Reliable, Volatile))
            .is_empty());
        assert!(g.knows(&[0; 16]));
    }

    #[test]
    fn topics_not_selected_are_remembered_up_to_a_bound() {
        let mut g = graph(false, &["/wanted"]);
        for n in 0..(MAX_SKIPPED + 500) {
            let mut p = publ(0, &format!("/t{n}"), "p/msg/T", Reliable, Volatile);
            p.gid[..8].copy_from_slice(&(n as u64).to_le_bytes());
            g.add(p);
        }
        assert_eq!(g.skipped().len(), MAX_SKIPPED);
        assert_eq!(g.refused().total(), 0);
    }

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
