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
use std::path::Path;

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

const DURATIONS: &[&str] = &["deadline", "lifespan", "liveliness_lease_duration"];

/// Reads a rosbag2 QoS override file. Errors name the file, the line and
/// the fix.
pub fn read_overrides_file(path: &Path) -> Result<QosOverrides, RosError> {
    let text = std::fs::read_to_string(path).map_err(|e| RosError::Overrides {
        path: path.display().to_string(),
        line: 0,
        reason: format!("cannot read it: {e}"),
    })?;
    parse_overrides(&text).map_err(|(line, reason)| RosError::Overrides {
        path: path.display().to_string(),
        line,
        reason,
    })
}

/// Parses the override YAML (block mappings only, as rosbag2's files are
/// written). Errors are `(line, reason)`.
pub fn parse_overrides(text: &str) -> Result<QosOverrides, (usize, String)> {
    let mut out = QosOverrides::new();
    let mut topic: Option<(String, usize)> = None; // name, indent of its policies
    let mut duration: Option<(String, usize)> = None; // policy, indent of sec/nsec
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = strip_comment(raw);
        if line.trim().is_empty() || line.trim() == "---" {
            continue;
        }
        if line.contains('\t') {
            return Err((
                n,
                "tabs are not allowed in YAML indentation; use spaces".into(),
            ));
        }
        let indent = line.len() - line.trim_start().len();
        let (key, value) = split_key(line.trim())
            .ok_or((n, format!("expected `key: value`, found {:?}", line.trim())))?;
        if indent == 0 {
            duration = None;
            if !value.is_empty() {
                return Err((
                    n,
                    format!("topic {key:?} needs its policies on the lines below, indented"),
                ));
            }
            if !key.starts_with('/') {
                return Err((
                    n,
                    format!("topic {key:?}: topics are fully qualified (start with '/')"),
                ));
            }
            out.entry(key.clone()).or_default();
            topic = Some((key, 0));
            continue;
        }
        let Some((name, policy_indent)) = topic.as_mut() else {
            return Err((n, "a policy before any topic".into()));
        };
        if *policy_indent == 0 {
            *policy_indent = indent;
        }
        if let Some((policy, sub)) = duration.as_ref() {
            if indent > *policy_indent && (*sub == 0 || indent == *sub) {
                if !matches!(key.as_str(), "sec" | "nsec") {
                    return Err((n, format!("{policy}: expected sec and nsec, found {key:?}")));
                }
                value
                    .parse::<u64>()
                    .map_err(|_| (n, format!("{policy}.{key} {value:?}: a whole number")))?;
                let sub_indent = indent;
                duration = Some((policy.clone(), sub_indent));
                continue;
            }
            duration = None;
        }
        if indent != *policy_indent {
            return Err((
                n,
                format!(
                    "indentation: policies of {name} start at column {}",
                    *policy_indent + 1
                ),
            ));
        }
        if DURATIONS.contains(&key.as_str()) {
            if !value.is_empty() {
                return Err((
                    n,
                    format!(
                        "{key}: a duration is written as `sec:` and `nsec:` on the lines below"
                    ),
                ));
            }
            duration = Some((key, 0));
            continue;
        }
        let entry = out.entry(name.clone()).or_default();
        entry
            .set(&key, &value)
            .map_err(|r| (n, format!("{name}: {r}")))?;
    }
    Ok(out)
}

/// The line without a trailing `# comment` (a `#` at the start or after
/// whitespace, outside quotes).
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && prev.is_whitespace() => return &line[..i],
            None => {}
        }
        prev = c;
    }
    line
}

/// `key: value` (the key may be quoted) into unquoted parts.
fn split_key(s: &str) -> Option<(String, String)> {
    let (key, rest) = if let Some(q) = s.chars().next().filter(|c| *c == '"' || *c == '\'') {
        let end = s[1..].find(q)? + 1;
        (s[1..end].to_owned(), s[end + 1..].trim_start())
    } else {
        let colon = s.find(':')?;
        (s[..colon].trim().to_owned(), &s[colon..])
    };
    let rest = rest.strip_prefix(':')?;
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    let v = rest.trim();
    let v = v
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(v);
    (!key.is_empty()).then(|| (key, v.to_owned()))
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
            ("/a:\n  depth: -1\n", 2, "whole number"),
            ("a:\n  depth: 1\n", 1, "start with '/'"),
            ("/a:\n  colour: red\n", 2, "unknown policy"),
            ("/a:\n  deadline: 5\n", 2, "sec"),
            ("/a:\n  deadline:\n    sec: x\n", 3, "whole number"),
            ("/a:\n\treliability: reliable\n", 2, "tabs"),
            ("  depth: 1\n", 1, "before any topic"),
            ("/a: {reliability: reliable}\n", 1, "lines below"),
        ];
        for (y, line, want) in cases {
            let (l, reason) = parse_overrides(y).unwrap_err();
            assert_eq!(l, line, "{y:?}: {reason}");
            assert!(reason.contains(want), "{y:?}: {reason}");
        }
    }
}
