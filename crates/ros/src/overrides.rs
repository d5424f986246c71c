//! Per-topic QoS overrides: `[[ros.qos]]` in the config and rosbag2's
//! `--qos-profile-overrides-path` YAML, which maps a topic to its policies:
//!
//! ```yaml
//! /tf_static:
//!   reliability: reliable
//!   durability: transient_local
//!   history: keep_last
//!   depth: 1
//! ```
//!
//! An override replaces the adaptation for its topic; a policy it leaves
//! out (or sets to `system_default`) keeps rosbag2's default (reliable,
//! volatile). Durations (`deadline`, `lifespan`,
//! `liveliness_lease_duration`, as `{sec, nsec}`) and `liveliness` are
//! accepted and checked but do not change what a recorder receives.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde::Deserialize;

use crate::qos::{Durability, Reliability, RequestQos, DEFAULT_DEPTH};
use crate::RosError;

/// One topic's override.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QosOverride {
    /// Reliability, if set.
    pub reliability: Option<Reliability>,
    /// Durability, if set.
    pub durability: Option<Durability>,
    /// History depth (keep last), if set.
    pub depth: Option<u32>,
    /// `history: keep_all` (the reader keeps everything it has not taken).
    pub keep_all: bool,
}

impl QosOverride {
    /// The request this override makes.
    pub fn request(&self) -> RequestQos {
        let base = RequestQos::initial();
        RequestQos {
            reliability: self.reliability.unwrap_or(base.reliability),
            durability: self.durability.unwrap_or(base.durability),
            depth: self.depth.filter(|d| *d > 0).unwrap_or(DEFAULT_DEPTH),
        }
    }

    /// Sets one policy from its rosbag2 name and value; the error says what
    /// is allowed.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "reliability" => {
                self.reliability = match value {
                    "reliable" => Some(Reliability::Reliable),
                    "best_effort" => Some(Reliability::BestEffort),
                    "system_default" => None,
                    _ => return Err(format!("reliability {value:?}: use reliable, best_effort or system_default")),
                }
            }
            "durability" => {
                self.durability = match value {
                    "volatile" => Some(Durability::Volatile),
                    "transient_local" => Some(Durability::TransientLocal),
                    "system_default" => None,
                    _ => return Err(format!("durability {value:?}: use volatile, transient_local or system_default")),
                }
            }
            "history" => match value {
                "keep_last" | "system_default" => self.keep_all = false,
                "keep_all" => self.keep_all = true,
                _ => return Err(format!("history {value:?}: use keep_last, keep_all or system_default")),
            },
            "depth" => {
                self.depth = Some(value.parse().map_err(|_| {
                    format!("depth {value:?}: a whole number of messages (0 to 4294967295)")
                })?)
            }
            "liveliness" => match value {
                "automatic" | "manual_by_topic" | "system_default" => {}
                _ => return Err(format!("liveliness {value:?}: use automatic, manual_by_topic or system_default")),
            },
            "avoid_ros_namespace_conventions" => match value {
                "true" | "false" => {}
                _ => return Err(format!("avoid_ros_namespace_conventions {value:?}: true or false")),
            },
            _ => {
                return Err(format!(
                    "unknown policy {key:?}: use history, depth, reliability, durability, deadline, \
                     lifespan, liveliness, liveliness_lease_duration or avoid_ros_namespace_conventions"
                ))
            }
        }
        Ok(())
    }
}

/// Overrides by topic.
pub type QosOverrides = BTreeMap<String, QosOverride>;

/// The largest override file read: a line per policy of a few thousand
/// topics. A bigger file is refused before it is read.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// Reads a rosbag2 QoS override file. Errors name the file, the line and
/// the fix.
pub fn read_overrides_file(path: &Path) -> Result<QosOverrides, RosError> {
    let err = |line: usize, reason: String| RosError::Overrides {
        path: path.display().to_string(),
        line,
        reason,
    };
    let file = std::fs::File::open(path).map_err(|e| err(0, format!("cannot read it: {e}")))?;
    let len = file
        .metadata()
        .map_err(|e| err(0, format!("cannot read it: {e}")))?
        .len();
    if len > MAX_FILE_BYTES {
        return Err(err(
            0,
            format!(
                "{len} bytes is more than an override file can be ({MAX_FILE_BYTES}); \
                 list only the topics whose QoS must differ"
            ),
        ));
    }
    let mut text = String::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| err(0, format!("cannot read it as UTF-8 text: {e}")))?;
    parse_overrides(&text).map_err(|(line, reason)| err(line, reason))
}

/// One topic's policies as rosbag2's override files spell them. The
/// durations, `liveliness` and `avoid_ros_namespace_conventions` are
/// checked but do not change what a recorder's reader asks for.
#[derive(Debug, Default, Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "the topic's policies (history, depth, reliability, durability, ...) on the lines below, indented"
)]
#[allow(dead_code)]
struct PolicyFile {
    #[serde(default, deserialize_with = "history")]
    history: Option<String>,
    #[serde(default, deserialize_with = "whole_u32")]
    depth: Option<u32>,
    #[serde(default, deserialize_with = "reliability")]
    reliability: Option<String>,
    #[serde(default, deserialize_with = "durability")]
    durability: Option<String>,
    deadline: Option<DurationFile>,
    lifespan: Option<DurationFile>,
    #[serde(default, deserialize_with = "liveliness")]
    liveliness: Option<String>,
    liveliness_lease_duration: Option<DurationFile>,
    avoid_ros_namespace_conventions: Option<bool>,
}

/// A policy's value, checked where it is read (so an error carries its
/// line) by [`QosOverride::set`], which says what each policy allows.
fn policy<'de, D: serde::Deserializer<'de>>(d: D, key: &str) -> Result<Option<String>, D::Error> {
    let v = String::deserialize(d)?;
    QosOverride::default()
        .set(key, &v)
        .map_err(serde::de::Error::custom)?;
    Ok(Some(v))
}

fn history<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    policy(d, "history")
}

fn reliability<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    policy(d, "reliability")
}

fn durability<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    policy(d, "durability")
}

fn liveliness<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    policy(d, "liveliness")
}

/// `{sec, nsec}`.
#[derive(Debug, Deserialize)]
#[allow(dead_code)]
#[serde(
    deny_unknown_fields,
    expecting = "a duration: `sec:` and `nsec:` on the lines below, indented"
)]
struct DurationFile {
    #[serde(deserialize_with = "whole_u64")]
    sec: u64,
    #[serde(deserialize_with = "whole_u64")]
    nsec: u64,
}

/// A topic name key: fully qualified.
struct TopicKey(String);

impl<'de> Deserialize<'de> for TopicKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if !s.starts_with('/') {
            return Err(serde::de::Error::custom(format!(
                "topic {s:?}: topics are fully qualified (start with '/')"
            )));
        }
        Ok(TopicKey(s))
    }
}

/// The file's topics in order.
struct Topics(Vec<(String, Option<PolicyFile>)>);

impl<'de> Deserialize<'de> for Topics {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Topics;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("topics, each with its policies on the lines below, indented")
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Topics, E> {
                Ok(Topics(Vec::new()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Topics, A::Error> {
                let mut out: Vec<(String, Option<PolicyFile>)> = Vec::new();
                // Bounded by the file's size; duplicates are found after.
                while let Some(TopicKey(topic)) = m.next_key()? {
                    out.push((topic, m.next_value()?));
                }
                Ok(Topics(out))
            }
        }
        d.deserialize_any(V)
    }
}

fn whole<'de, D: serde::Deserializer<'de>>(d: D, max: u64, what: &str) -> Result<u64, D::Error> {
    struct V<'a>(u64, &'a str);
    impl serde::de::Visitor<'_> for V<'_> {
        type Value = u64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            let what = if self.1.is_empty() {
                String::new()
            } else {
                format!(" {}", self.1)
            };
            write!(f, "a whole number{what} (0 to {})", self.0)
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
            if v > self.0 {
                return Err(E::invalid_value(serde::de::Unexpected::Unsigned(v), &self));
            }
            Ok(v)
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
            match u64::try_from(v) {
                Ok(v) => self.visit_u64(v),
                Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(v), &self)),
            }
        }
    }
    d.deserialize_u64(V(max, what))
}

fn whole_u32<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let v = whole(d, u64::from(u32::MAX), "of messages")?;
    Ok(u32::try_from(v).ok())
}

fn whole_u64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    whole(d, u64::MAX, "")
}

/// Parses the override YAML with a YAML parser (serde_norway: libyaml's,
/// translated to Rust; anchors, flow style and quoting as rosbag2's
/// yaml-cpp reads them). Errors are `(line, reason)`, line 0 where the
/// parser cannot say.
pub fn parse_overrides(text: &str) -> Result<QosOverrides, (usize, String)> {
    // libyaml's message for a tab in indentation does not say so.
    for (i, line) in text.lines().enumerate() {
        if line[..line.len() - line.trim_start().len()].contains('\t') {
            return Err((
                i + 1,
                "tabs are not allowed in YAML indentation; use spaces".into(),
            ));
        }
    }
    let parsed: Option<Topics> = serde_norway::from_str(text).map_err(|e| {
        let line = e.location().map_or(0, |l| l.line());
        (line, without_location(&e.to_string()))
    })?;
    let mut out = QosOverrides::new();
    for (topic, policies) in parsed.map(|t| t.0).unwrap_or_default() {
        if out.contains_key(&topic) {
            return Err((
                line_of(text, &topic, 2),
                format!("topic {topic} is listed twice (a duplicate key); keep one entry"),
            ));
        }
        let p = policies.unwrap_or_default();
        let line = line_of(text, &topic, 1);
        let mut o = QosOverride::default();
        let words = [
            ("history", &p.history),
            ("reliability", &p.reliability),
            ("durability", &p.durability),
            ("liveliness", &p.liveliness),
        ];
        for (key, value) in words {
            if let Some(v) = value {
                o.set(key, v).map_err(|r| (line, format!("{topic}: {r}")))?;
            }
        }
        o.depth = p.depth;
        out.insert(topic, o);
    }
    Ok(out)
}

/// serde_norway's message without its trailing ` at line L column C` (the
/// line is reported on its own).
fn without_location(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// The line where `topic` is a key the `nth` time (for errors found after
/// parsing), 0 when it cannot be told.
fn line_of(text: &str, topic: &str, nth: usize) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let l = l.trim_start_matches(['"', '\'']);
            l.strip_prefix(topic)
                .is_some_and(|rest| rest.trim_start_matches(['"', '\'']).starts_with(':'))
        })
        .nth(nth.saturating_sub(1))
        .map_or(0, |(i, _)| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rosbag2_override_file_parses() {
        let y = "# overrides\n/tf_static:\n  history: keep_last\n  depth: 1\n  reliability: reliable\n  durability: transient_local\n  deadline:\n    sec: 0\n    nsec: 0\n  liveliness: automatic\n\"/camera/image\":\n  reliability: best_effort   # lossy link\n";
        let o = parse_overrides(y).unwrap();
        let tf = &o["/tf_static"];
        assert_eq!(
            tf.request(),
            RequestQos {
                reliability: Reliability::Reliable,
                durability: Durability::TransientLocal,
                depth: 1
            }
        );
        let cam = &o["/camera/image"];
        assert_eq!(cam.request().reliability, Reliability::BestEffort);
        assert_eq!(cam.request().durability, Durability::Volatile);
    }

    #[test]
    fn mistakes_name_the_line() {
        let cases = [
            ("/a:\n  reliability: sometimes\n", 2, "best_effort"),
            ("/a:\n  depth: -1\n", 2, "whole number of messages"),
            ("/a:\n  depth: 4294967296\n", 2, "whole number of messages"),
            ("a:\n  depth: 1\n", 1, "start with '/'"),
            (
                "/a:\n  colour: red\n",
                2,
                "unknown field `colour`, expected one of `history`",
            ),
            ("/a:\n  deadline: 5\n", 2, "`sec:` and `nsec:`"),
            ("/a:\n  deadline:\n    sec: x\n", 3, "whole number"),
            ("/a:\n\treliability: reliable\n", 2, "tabs"),
            ("  depth: 1\n", 1, "start with '/'"),
            ("/a:\n  depth: 1\n/a:\n  depth: 2\n", 3, "duplicate"),
            ("/a: [1, 2\n", 1, "the topic's policies"),
            ("/a:\n  depth: 1\n - x\n", 3, "did not find expected key"),
            ("- /a\n", 1, "topics, each with its policies"),
        ];
        for (y, line, want) in cases {
            let (l, reason) = parse_overrides(y).unwrap_err();
            assert_eq!(l, line, "{y:?}: {reason}");
            assert!(reason.contains(want), "{y:?}: {reason}");
            assert!(!reason.contains(" at line "), "{y:?}: {reason}");
        }
    }

    #[test]
    fn flow_style_quoting_an_empty_topic_and_an_empty_file_are_yaml_too() {
        let o = parse_overrides("\"/a\": {reliability: best_effort, depth: 3}\n'/b':\n").unwrap();
        assert_eq!(o["/a"].request().reliability, Reliability::BestEffort);
        assert_eq!(o["/a"].request().depth, 3);
        assert_eq!(o["/b"], QosOverride::default());
        assert!(parse_overrides("").unwrap().is_empty());
        assert!(parse_overrides("# nothing\n").unwrap().is_empty());
    }

    #[test]
    fn alias_bombs_and_deep_nesting_are_refused_at_their_first_value() {
        // A billion laughs: each level ten aliases of the one before. The
        // reader wants a topic's policies, so it stops at the first
        // sequence instead of expanding it.
        let mut bomb = String::from("/a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..9 {
            let prev = if i == 0 {
                "a".to_string()
            } else {
                format!("b{}", i - 1)
            };
            bomb.push_str(&format!(
                "/b{i}: &b{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
            ));
        }
        let (line, reason) = parse_overrides(&bomb).unwrap_err();
        assert_eq!(line, 1, "{reason}");
        // The same aliases where a policy's value goes.
        bomb.push_str("/c:\n  depth: *b8\n");
        assert!(parse_overrides(&bomb).is_err());
        let deep = format!("/a: {}{}\n", "[".repeat(10_000), "]".repeat(10_000));
        assert!(parse_overrides(&deep).is_err());
        let deep = format!(
            "/a:\n  deadline: {}{}\n",
            "{s: ".repeat(10_000),
            "}".repeat(10_000)
        );
        assert!(parse_overrides(&deep).is_err());
    }

    #[test]
    fn a_file_over_the_limit_is_refused_before_it_is_read() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.yaml");
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(MAX_FILE_BYTES + 1).unwrap();
        let e = read_overrides_file(&p).unwrap_err().to_string();
        assert!(e.contains("more than an override file can be"), "{e}");
    }
}
