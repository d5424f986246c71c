//! The fleet's commands as they arrive on `<prefix>/cmd`: one JSON object
//! (`docs/remote-commands.schema.json`), bounded before it is parsed,
//! every field checked, anything else refused with the reason (never
//! guessed at). What it asks is a [`Command`] of the one command model the
//! control socket and the ROS 2 services share.
//!
//! ```json
//! {"id": "c-0193", "command": "trigger", "issued_at": "2026-12-07T10:02:00Z",
//!  "expires_at": "2026-12-07T10:07:00Z", "issued_by": "ops/alice",
//!  "reason": "near miss at gate 3", "pre": "30s", "post": "10s"}
//! ```

use std::time::Duration;

use edgerec_ros::control::{parse_window, Command, Window};
use serde_json::{Map, Value};

/// A command payload larger than this is refused unread.
pub const MAX_COMMAND: usize = 16 << 10;

/// A command without `expires_at` expires this long after `issued_at`
/// (one without either never does).
pub const DEFAULT_TTL: Duration = Duration::from_secs(600);

/// The fields every command may have.
pub const COMMON: [&str; 5] = ["id", "command", "issued_at", "expires_at", "issued_by"];

/// The fields `trigger` adds.
pub const TRIGGER: [&str; 4] = ["reason", "name", "pre", "post"];

/// One command from the fleet, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteCommand {
    /// The fleet's id for it: what a redelivery repeats.
    pub id: String,
    /// Its name in the JSON (`trigger`, `status`, ...).
    pub name: &'static str,
    /// What it asks, in the shared command model.
    pub command: Command,
    /// When the fleet issued it, ms since the Unix epoch.
    pub issued_at_ms: Option<i64>,
    /// When it stops being valid, ms since the Unix epoch.
    pub expires_at_ms: Option<i64>,
    /// The operator it names (shown in the audit trail, not verified).
    pub issued_by: Option<String>,
}

/// A payload refused before anything ran, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Rejected {
    /// Its `id`, when it had a usable one (the reply carries it).
    pub id: Option<String>,
    /// Its `command`, when it had one.
    pub command: Option<String>,
    /// Why, and what would be right.
    pub reason: String,
}

impl RemoteCommand {
    /// Why it may no longer run at `now_ms` (past `expires_at`, or
    /// [`DEFAULT_TTL`] after `issued_at` without one).
    pub fn expired(&self, now_ms: i64) -> Option<String> {
        let ttl = DEFAULT_TTL.as_millis() as i64;
        let (until, how) = match (self.expires_at_ms, self.issued_at_ms) {
            (Some(e), _) => (e, "its expires_at"),
            (None, Some(i)) => (i.saturating_add(ttl), "10 minutes after its issued_at"),
            (None, None) => return None,
        };
        (now_ms > until).then(|| {
            format!(
                "expired: valid until {} ({how}), the vehicle's clock says {}",
                stamp(until),
                stamp(now_ms)
            )
        })
    }
}

fn stamp(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| format!("{ms} ms"))
}

/// Parses one payload of `<prefix>/cmd`.
pub fn parse(payload: &[u8]) -> Result<RemoteCommand, Rejected> {
    let reject = |id: Option<&str>, command: Option<&str>, reason: String| Rejected {
        id: id.map(str::to_owned),
        command: command.map(str::to_owned),
        reason,
    };
    if payload.len() > MAX_COMMAND {
        return Err(reject(
            None,
            None,
            format!(
                "a command of {} bytes: at most {MAX_COMMAND} (not read)",
                payload.len()
            ),
        ));
    }
    let v: Value = serde_json::from_slice(payload).map_err(|e| {
        reject(
            None,
            None,
            format!("not JSON: {e}; a command is one JSON object"),
        )
    })?;
    let Value::Object(o) = v else {
        return Err(reject(
            None,
            None,
            "not a JSON object; a command is one JSON object".into(),
        ));
    };
    let id = match o.get("id") {
        Some(Value::String(s)) if valid_id(s) => s.as_str(),
        Some(_) => {
            return Err(reject(
                None,
                None,
                "`id` must be a string of 1 to 64 letters, digits, `.`, `_`, `:` and `-`".into(),
            ))
        }
        None => return Err(reject(None, None, "no `id`: every command has one".into())),
    };
    let name = match o.get("command") {
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err(reject(Some(id), None, "`command` must be a string".into())),
        None => return Err(reject(Some(id), None, "no `command`".into())),
    };
    let Some(&known) = edgerec_config::remote::REMOTE_COMMANDS
        .iter()
        .find(|c| **c == name)
    else {
        return Err(reject(
            Some(id),
            Some(&truncated(name)),
            format!(
                "unknown command `{}`; the commands are {}",
                truncated(name),
                edgerec_config::remote::REMOTE_COMMANDS.join(", ")
            ),
        ));
    };
    let fail = |reason: String| reject(Some(id), Some(known), reason);
    for key in o.keys() {
        let ok = COMMON.contains(&key.as_str())
            || (known == "trigger" && TRIGGER.contains(&key.as_str()));
        if !ok {
            let mut fields: Vec<&str> = COMMON.to_vec();
            if known == "trigger" {
                fields.extend(TRIGGER);
            }
            return Err(fail(format!(
                "`{known}` takes no field `{}` (its fields: {})",
                truncated(key),
                fields.join(", ")
            )));
        }
    }
    let issued_at_ms = time(&o, "issued_at").map_err(fail)?;
    let expires_at_ms = time(&o, "expires_at").map_err(fail)?;
    let issued_by = match o.get("issued_by") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.len() <= 128 && !s.chars().any(char::is_control) => {
            Some(s.clone())
        }
        Some(_) => {
            return Err(fail(
                "`issued_by` must be a string of at most 128 bytes without control characters"
                    .into(),
            ))
        }
    };
    let command = match known {
        "pause" => Command::Pause,
        "resume" => Command::Resume,
        "split" => Command::Split,
        "status" => Command::Status,
        "list" => Command::List,
        _ => trigger(&o).map_err(fail)?,
    };
    Ok(RemoteCommand {
        id: id.to_owned(),
        name: known,
        command,
        issued_at_ms,
        expires_at_ms,
        issued_by,
    })
}

/// An id: 1 to 64 of `[A-Za-z0-9._:-]`.
fn valid_id(s: &str) -> bool {
    (1..=64).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'))
}

/// At most 64 characters of `s`, for a message.
fn truncated(s: &str) -> String {
    s.chars().take(64).collect()
}

/// `key` as ms since the Unix epoch: an RFC 3339 string or a number of
/// seconds; absent or null is `None`.
fn time(o: &Map<String, Value>, key: &str) -> Result<Option<i64>, String> {
    let bad = || {
        format!("`{key}` must be an RFC 3339 time (\"2026-12-07T10:02:00Z\") or seconds since 1970")
    };
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => s
            .parse::<jiff::Timestamp>()
            .map(|t| Some(t.as_millisecond()))
            .map_err(|_| bad()),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(secs) if secs.is_finite() && (0.0..4e11).contains(&secs) => {
                Ok(Some((secs * 1000.0) as i64))
            }
            _ => Err(bad()),
        },
        Some(_) => Err(bad()),
    }
}

/// `trigger`'s fields: `reason` and `name` strings, `pre` and `post` as
/// `"20s"` or seconds.
fn trigger(o: &Map<String, Value>) -> Result<Command, String> {
    let text = |key: &str, max: usize| -> Result<String, String> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) if s.len() <= max => Ok(s.clone()),
            Some(_) => Err(format!("`{key}` must be a string of at most {max} bytes")),
        }
    };
    let reason = text("reason", 512)?;
    let name = text("name", 64)?;
    let window_part =
        |key: &'static str, option: &'static str| -> Result<Option<Duration>, String> {
            match o.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if s.len() <= 32 => {
                    parse_window(option, s).map(Some).map_err(|e| e.to_string())
                }
                Some(Value::Number(n)) => match n.as_f64() {
                    Some(secs) if secs.is_finite() && secs >= 0.0 => {
                        let d = Duration::from_secs_f64(secs.min(1e9));
                        parse_window(option, &format!("{}ms", d.as_millis()))
                            .map(Some)
                            .map_err(|e| e.to_string())
                    }
                    _ => Err(format!("`{key}` must be a duration (\"20s\") or seconds")),
                },
                Some(_) => Err(format!("`{key}` must be a duration (\"20s\") or seconds")),
            }
        };
    let window = Window {
        pre: window_part("pre", "--pre")?,
        post: window_part("post", "--post")?,
    };
    Command::windowed_trigger(&name, &reason, window).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> RemoteCommand {
        parse(text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn err(text: &str) -> Rejected {
        parse(text.as_bytes()).expect_err(text)
    }

    #[test]
    fn every_command_parses() {
        for (name, want) in [
            ("pause", Command::Pause),
            ("resume", Command::Resume),
            ("split", Command::Split),
            ("status", Command::Status),
            ("list", Command::List),
        ] {
            let c = ok(&format!(r#"{{"id":"a-1","command":"{name}"}}"#));
            assert_eq!((c.name, c.command), (name, want));
        }
        let c = ok(
            r#"{"id":"c:0193","command":"trigger","issued_at":"2026-12-07T10:02:00Z",
            "expires_at":1796638020.5,"issued_by":"ops/alice","reason":"near miss",
            "name":"gate3","pre":"30s","post":10}"#,
        );
        assert_eq!(
            c.command,
            Command::Trigger {
                name: "gate3".into(),
                reason: "near miss".into(),
                window: Window {
                    pre: Some(Duration::from_secs(30)),
                    post: Some(Duration::from_secs(10)),
                },
            }
        );
        assert_eq!(c.issued_at_ms, Some(1_796_637_720_000));
        assert_eq!(c.expires_at_ms, Some(1_796_638_020_500));
        assert_eq!(c.issued_by.as_deref(), Some("ops/alice"));
    }

    #[test]
    fn refusals_say_why_and_keep_the_id_they_can() {
        let e = err("{");
        assert!(e.id.is_none() && e.reason.starts_with("not JSON"), "{e:?}");
        let e = err("[1]");
        assert!(e.reason.contains("not a JSON object"), "{e:?}");
        let e = err(r#"{"command":"pause"}"#);
        assert!(e.reason.contains("no `id`"), "{e:?}");
        let e = err(r#"{"id":"a b","command":"pause"}"#);
        assert!(e.id.is_none() && e.reason.contains("`id`"), "{e:?}");
        let e = err(r#"{"id":"x","command":"reboot"}"#);
        assert_eq!(e.id.as_deref(), Some("x"));
        assert!(
            e.reason.contains("unknown command `reboot`") && e.reason.contains("trigger, pause"),
            "{e:?}"
        );
        let e = err(r#"{"id":"x","command":"pause","reason":"why"}"#);
        assert!(
            e.reason.contains("`pause` takes no field `reason`"),
            "{e:?}"
        );
        let e = err(r#"{"id":"x","command":"trigger","pre":"2h"}"#);
        assert!(e.reason.contains("--pre"), "{e:?}");
        let e = err(r#"{"id":"x","command":"trigger","name":"a/b"}"#);
        assert!(e.reason.contains("--name"), "{e:?}");
        let e = err(r#"{"id":"x","command":"trigger","reason":"a\nb"}"#);
        assert!(e.reason.contains("line break"), "{e:?}");
        let e = err(r#"{"id":"x","command":"pause","issued_at":"yesterday"}"#);
        assert!(e.reason.contains("RFC 3339"), "{e:?}");
        let big = format!(
            r#"{{"id":"x","command":"trigger","reason":"{}"}}"#,
            "a".repeat(MAX_COMMAND)
        );
        let e = err(&big);
        assert!(e.id.is_none() && e.reason.contains("at most"), "{e:?}");
    }

    #[test]
    fn expiry() {
        let c = ok(r#"{"id":"x","command":"pause","issued_at":100,"expires_at":200}"#);
        assert_eq!(c.expired(150_000), None);
        assert!(c
            .expired(200_001)
            .unwrap()
            .starts_with("expired: valid until 1970-01-01T00:03:20Z"));
        let c = ok(r#"{"id":"x","command":"pause","issued_at":100}"#);
        assert_eq!(c.expired(100_000 + 599_000), None);
        assert!(c.expired(100_000 + 601_000).is_some());
        assert_eq!(
            ok(r#"{"id":"x","command":"pause"}"#).expired(i64::MAX),
            None
        );
    }
}
