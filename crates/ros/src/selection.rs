//! Which topics to record, as `ros2 bag record` decides it: a list of
//! topics, a regular expression that must match the whole name, or all;
//! then exclusions by name (regular expression) and by type; hidden topics
//! only when asked for.

use regex::Regex;

use crate::names;
use crate::RosError;

/// What the user asked for (`[ros]` in the config, or `edgerec record`'s
/// flags).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectionOptions {
    /// Every topic (`-a`).
    pub all: bool,
    /// These topics (positional), fully qualified or relative to the
    /// namespace.
    pub topics: Vec<String>,
    /// Topics whose whole name matches (`-e`).
    pub regex: Option<String>,
    /// Leave out topics whose whole name matches (`-x`, `--exclude-regex`).
    pub exclude: Option<String>,
    /// Leave out these types (`--exclude-topic-types`), `pkg/msg/Type`.
    pub exclude_types: Vec<String>,
    /// Record topics with a token starting with `_` too.
    pub include_hidden: bool,
}

/// The compiled selection.
#[derive(Debug, Clone)]
pub struct TopicSelection {
    all: bool,
    topics: Vec<String>,
    regex: Option<Regex>,
    exclude: Option<Regex>,
    exclude_types: Vec<String>,
    include_hidden: bool,
}

/// Why a topic is not recorded (for the status and `--verbose`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Not in the list, does not match the regex, and not `all`.
    NotSelected,
    /// Matches the exclude expression.
    Excluded,
    /// Its type is excluded.
    TypeExcluded,
    /// Hidden, and hidden topics are not included.
    Hidden,
}

fn full_match(what: &str, re: &str) -> Result<Regex, RosError> {
    Regex::new(&format!("^(?:{re})$")).map_err(|e| RosError::Selection {
        what: what.to_owned(),
        reason: e.to_string(),
    })
}

impl TopicSelection {
    /// Compiles the options; relative topic names are expanded in
    /// `namespace` for the node `node`. Errors name the option and what is
    /// wrong with it.
    pub fn new(opts: &SelectionOptions, namespace: &str, node: &str) -> Result<Self, RosError> {
        if !opts.all && opts.topics.is_empty() && opts.regex.is_none() {
            return Err(RosError::Selection {
                what: "topics".into(),
                reason: "nothing selected: give topics, a regex (-e) or all (-a)".into(),
            });
        }
        let mut topics = Vec::with_capacity(opts.topics.len());
        for t in &opts.topics {
            let full = names::expand_topic(t, namespace, node);
            names::validate_topic(&full).map_err(|reason| RosError::Selection {
                what: format!("topic {t:?}"),
                reason,
            })?;
            if !topics.contains(&full) {
                topics.push(full);
            }
        }
        let regex = opts
            .regex
            .as_deref()
            .map(|r| full_match("regex", r))
            .transpose()?;
        let exclude = opts
            .exclude
            .as_deref()
            .map(|r| full_match("exclude", r))
            .transpose()?;
        let mut exclude_types = Vec::new();
        for t in &opts.exclude_types {
            let canonical = canonical_type(t).ok_or_else(|| RosError::Selection {
                what: format!("exclude_types {t:?}"),
                reason: "a type is written pkg/msg/Type (or pkg/Type)".into(),
            })?;
            exclude_types.push(canonical);
        }
        Ok(TopicSelection {
            all: opts.all,
            topics,
            regex,
            exclude,
            exclude_types,
            include_hidden: opts.include_hidden,
        })
    }

    /// Whether `topic` of type `type_name` (`pkg/msg/Type`) is recorded,
    /// and if not, why. A topic named explicitly is recorded even when it is
    /// hidden, like rosbag2 does.
    pub fn decide(&self, topic: &str, type_name: &str) -> Result<(), Skip> {
        let listed = self.topics.iter().any(|t| t == topic);
        let matched = self.regex.as_ref().is_some_and(|r| r.is_match(topic));
        if !(self.all || listed || matched) {
            return Err(Skip::NotSelected);
        }
        if !listed {
            if self.exclude.as_ref().is_some_and(|r| r.is_match(topic)) {
                return Err(Skip::Excluded);
            }
            if !self.include_hidden && names::is_hidden(topic) {
                return Err(Skip::Hidden);
            }
        }
        if canonical_type(type_name).is_some_and(|t| self.exclude_types.contains(&t)) {
            return Err(Skip::TypeExcluded);
        }
        Ok(())
    }

    /// The topics named explicitly (after expansion): the status lists
    /// those not yet seen on the graph.
    pub fn listed(&self) -> &[String] {
        &self.topics
    }
}

/// `pkg/Type` and `pkg/msg/Type` to `pkg/msg/Type`.
fn canonical_type(t: &str) -> Option<String> {
    let parts: Vec<&str> = t.split('/').collect();
    match parts.as_slice() {
        [p, k, ty] if !p.is_empty() && !k.is_empty() && !ty.is_empty() => Some(t.to_owned()),
        [p, ty] if !p.is_empty() && !ty.is_empty() => Some(format!("{p}/msg/{ty}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(f: impl FnOnce(&mut SelectionOptions)) -> TopicSelection {
        let mut o = SelectionOptions::default();
        f(&mut o);
        TopicSelection::new(&o, "/", "edgerec").unwrap()
    }

    #[test]
    fn an_explicit_list_records_only_those() {
        let s = sel(|o| o.topics = vec!["/imu".into(), "camera".into()]);
        assert_eq!(s.decide("/imu", "sensor_msgs/msg/Imu"), Ok(()));
        assert_eq!(s.decide("/camera", "sensor_msgs/msg/Image"), Ok(()));
        assert_eq!(
            s.decide("/imu2", "sensor_msgs/msg/Imu"),
            Err(Skip::NotSelected)
        );
        assert_eq!(s.listed(), ["/imu", "/camera"]);
    }

    #[test]
    fn the_regex_must_match_the_whole_name() {
        let s = sel(|o| o.regex = Some("/sensors/.*".into()));
        assert_eq!(s.decide("/sensors/imu", "a/msg/B"), Ok(()));
        assert_eq!(
            s.decide("/robot/sensors/imu", "a/msg/B"),
            Err(Skip::NotSelected)
        );
        let s = sel(|o| o.regex = Some("imu|gps".into()));
        assert_eq!(s.decide("/imu", "a/msg/B"), Err(Skip::NotSelected));
    }

    #[test]
    fn all_with_exclusions_and_hidden_topics() {
        let s = sel(|o| {
            o.all = true;
            o.exclude = Some("/camera/.*".into());
            o.exclude_types = vec!["sensor_msgs/Image".into()];
        });
        assert_eq!(s.decide("/imu", "sensor_msgs/msg/Imu"), Ok(()));
        assert_eq!(s.decide("/camera/raw", "x/msg/Y"), Err(Skip::Excluded));
        assert_eq!(
            s.decide("/image", "sensor_msgs/msg/Image"),
            Err(Skip::TypeExcluded)
        );
        assert_eq!(s.decide("/_private/x", "x/msg/Y"), Err(Skip::Hidden));
        let s = sel(|o| {
            o.all = true;
            o.include_hidden = true;
        });
        assert_eq!(s.decide("/_private/x", "x/msg/Y"), Ok(()));
    }

    #[test]
    fn a_listed_topic_is_recorded_even_if_hidden_or_matching_exclude() {
        let s = sel(|o| {
            o.topics = vec!["/_debug".into()];
            o.all = true;
            o.exclude = Some("/_debug".into());
        });
        assert_eq!(s.decide("/_debug", "x/msg/Y"), Ok(()));
    }

    #[test]
    fn bad_options_are_clear_errors() {
        let e = TopicSelection::new(&SelectionOptions::default(), "/", "n").unwrap_err();
        assert!(e.to_string().contains("nothing selected"), "{e}");
        let o = SelectionOptions {
            regex: Some("(".into()),
            ..Default::default()
        };
        let e = TopicSelection::new(&o, "/", "n").unwrap_err();
        assert!(e.to_string().contains("regex"), "{e}");
        let o = SelectionOptions {
            topics: vec!["/a b".into()],
            ..Default::default()
        };
        let e = TopicSelection::new(&o, "/", "n").unwrap_err();
        assert!(e.to_string().contains("not allowed"), "{e}");
        let o = SelectionOptions {
            all: true,
            exclude_types: vec!["Image".into()],
            ..Default::default()
        };
        assert!(TopicSelection::new(&o, "/", "n").is_err());
    }
}
