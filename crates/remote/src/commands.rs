//! What happens to one command from the fleet: parsed, checked against
//! `remote.allow`, its expiry and the journal of ids already received,
//! then run through the one command model (the binary's [`Commands`]),
//! each step answered on `<prefix>/reply` and every outcome, run or
//! refused, in the audit trail with the fleet link as its surface.
//!
//! Replies: `{"id", "status": "accepted" | "rejected" | "done" | "failed",
//! "reason", "result"}`; a command that runs gets `accepted`, then `done`
//! or `failed`; one refused gets `rejected` only; a repeat of an id
//! already received gets its first final answer again with
//! `"duplicate": true` (and does not run).

use edgerec_ros::control::{Command, Reply};
use edgerec_ros::rate_limit::Requester;
use serde_json::{json, Value};

use crate::command::{parse, RemoteCommand};
use crate::journal::Journal;

/// What the commands act on, as the binary wires it: the one command
/// model, with its audit trail and rate limits.
pub trait Commands: Send + Sync {
    /// Carries out `command` for `who` (and audits it).
    fn run(&self, command: &Command, who: &Requester) -> Reply;
    /// Audits a command refused before it ran: `command` when it was
    /// understood, else `text` (what it said it was, or `?`).
    fn refused(&self, command: Option<&Command>, text: &str, who: &Requester, reason: &str);
}

/// The link's side of command handling: the allow list and the journal.
pub struct Handler {
    /// Where the commands run.
    pub commands: std::sync::Arc<dyn Commands>,
    /// `remote.allow`.
    pub allow: Vec<String>,
    /// The ids received.
    pub journal: Journal,
    /// `remote.broker`, for the requester.
    pub broker: String,
}

/// Counts of what came in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Commands run.
    pub run: u64,
    /// Commands refused (malformed, unknown, not allowed, expired,
    /// repeated).
    pub rejected: u64,
}

fn reply(id: Option<&str>, status: &str) -> Value {
    json!({"id": id, "status": status})
}

/// A command's answer as JSON: its text parsed when it is JSON (`status`,
/// `list`), else the text.
fn result_value(message: &str) -> Value {
    match serde_json::from_str::<Value>(message) {
        Ok(v @ (Value::Object(_) | Value::Array(_))) => v,
        _ => Value::String(message.to_owned()),
    }
}

impl Handler {
    /// Handles one payload; `send` publishes each reply in order. Returns
    /// once the outcome is durable (the caller then acknowledges the
    /// message to the broker).
    pub fn handle(&mut self, payload: &[u8], counts: &mut Counts, send: &mut dyn FnMut(Value)) {
        let fleet = |c: Option<&RemoteCommand>, id: Option<&str>| Requester::Fleet {
            broker: self.broker.clone(),
            command_id: id.unwrap_or("").to_owned(),
            by: c.and_then(|c| c.issued_by.clone()),
        };
        let c = match parse(payload) {
            Ok(c) => c,
            Err(rej) => {
                counts.rejected += 1;
                let who = fleet(None, rej.id.as_deref());
                self.commands.refused(
                    None,
                    rej.command.as_deref().unwrap_or("?"),
                    &who,
                    &rej.reason,
                );
                let mut r = reply(rej.id.as_deref(), "rejected");
                r["reason"] = rej.reason.into();
                send(r);
                return;
            }
        };
        let who = fleet(Some(&c), Some(&c.id));
        let refuse = |this: &Self, counts: &mut Counts, reason: String, extra: Option<Value>| {
            counts.rejected += 1;
            this.commands
                .refused(Some(&c.command), c.name, &who, &reason);
            let mut r = extra.unwrap_or_else(|| reply(Some(&c.id), "rejected"));
            r["reason"] = reason.into();
            r
        };
        if let Some(seen) = self.journal.get(&c.id) {
            let when = jiff::Timestamp::from_millisecond(seen.at_ms)
                .map(|t| t.to_string())
                .unwrap_or_default();
            let (first, reason) = match &seen.reply {
                Some(first) => (
                    first.clone(),
                    format!("a repeat of {} received at {when}: not run again; its answer then follows", c.id),
                ),
                None => (
                    reply(Some(&c.id), "failed"),
                    format!(
                        "a repeat of {} received at {when}, which the vehicle stopped while running: not run again",
                        c.id
                    ),
                ),
            };
            let mut r = refuse(self, counts, reason, Some(first));
            r["duplicate"] = true.into();
            send(r);
            return;
        }
        if !self.allow.iter().any(|a| a == c.name) {
            let reason = format!(
                "`{}` is not in remote.allow on this vehicle (it takes: {})",
                c.name,
                if self.allow.is_empty() {
                    "nothing".to_owned()
                } else {
                    self.allow.join(", ")
                }
            );
            send(refuse(self, counts, reason, None));
            return;
        }
        let now = crate::unix_ms();
        if let Some(why) = c.expired(now) {
            send(refuse(self, counts, why, None));
            return;
        }
        if let Err(e) = self.journal.begin(&c.id, c.name, now) {
            let reason = format!(
                "the command journal (remote.journal) cannot be written ({e}): not run, so that it \
                 cannot run twice"
            );
            let mut r = refuse(self, counts, reason, Some(reply(Some(&c.id), "failed")));
            r["status"] = "failed".into();
            send(r);
            return;
        }
        send(reply(Some(&c.id), "accepted"));
        let out = self.commands.run(&c.command, &who);
        counts.run += 1;
        let mut last = reply(Some(&c.id), if out.ok { "done" } else { "failed" });
        if out.ok {
            last["result"] = result_value(&out.message);
        } else {
            last["reason"] = out.message.into();
        }
        last["paused"] = out.paused.into();
        if let Err(e) = self.journal.finish(&c.id, &last) {
            tracing::warn!(id = %c.id, "fleet link: the command journal: {e}; a repeat of this id is still refused (its start is durable)");
        }
        send(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[derive(Default)]
    struct Fake {
        ran: Mutex<Vec<String>>,
        refused: Mutex<Vec<String>>,
    }

    impl Commands for Fake {
        fn run(&self, command: &Command, _: &Requester) -> Reply {
            self.ran.lock().unwrap().push(command.to_string());
            Reply {
                ok: true,
                paused: false,
                message: match command {
                    Command::Status => r#"{"state":"recording"}"#.to_owned(),
                    _ => "ok".to_owned(),
                },
            }
        }
        fn refused(&self, _: Option<&Command>, text: &str, who: &Requester, reason: &str) {
            self.refused
                .lock()
                .unwrap()
                .push(format!("{text} by {who}: {reason}"));
        }
    }

    fn handler(fake: &Arc<Fake>, journal: Journal, allow: &[&str]) -> Handler {
        Handler {
            commands: fake.clone(),
            allow: allow.iter().map(|s| s.to_string()).collect(),
            journal,
            broker: "mqtts://b:8883".into(),
        }
    }

    fn run(h: &mut Handler, payload: &str) -> Vec<Value> {
        let mut out = Vec::new();
        let mut counts = Counts::default();
        h.handle(payload.as_bytes(), &mut counts, &mut |v| out.push(v));
        out
    }

    #[test]
    fn a_command_runs_once_and_its_repeat_gets_the_first_answer() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("j.jsonl");
        let fake = Arc::new(Fake::default());
        let mut h = handler(&fake, Journal::open(&path).unwrap(), &["trigger", "status"]);
        let r = run(
            &mut h,
            r#"{"id":"t1","command":"trigger","reason":"x","issued_by":"ops"}"#,
        );
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(
            (r[0]["id"].as_str(), r[0]["status"].as_str()),
            (Some("t1"), Some("accepted"))
        );
        assert_eq!(
            (r[1]["status"].as_str(), r[1]["result"].as_str()),
            (Some("done"), Some("ok"))
        );
        // The same id again, even after a restart: not run, first answer.
        drop(h);
        let mut h = handler(&fake, Journal::open(&path).unwrap(), &["trigger", "status"]);
        let again = run(&mut h, r#"{"id":"t1","command":"trigger","reason":"x"}"#);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0]["status"], "done");
        assert_eq!(again[0]["duplicate"], true);
        assert!(again[0]["reason"]
            .as_str()
            .unwrap()
            .contains("not run again"));
        assert_eq!(fake.ran.lock().unwrap().len(), 1);
        // JSON results are JSON.
        let s = run(&mut h, r#"{"id":"s1","command":"status"}"#);
        assert_eq!(s[1]["result"]["state"], "recording");
    }

    #[test]
    fn refusals_run_nothing_and_are_audited() {
        let fake = Arc::new(Fake::default());
        let mut h = handler(&fake, Journal::in_memory(), &["status"]);
        for (payload, id, says) in [
            ("not json", None, "not JSON"),
            (
                r#"{"id":"u1","command":"reboot"}"#,
                Some("u1"),
                "unknown command",
            ),
            (
                r#"{"id":"p1","command":"pause"}"#,
                Some("p1"),
                "not in remote.allow",
            ),
            (
                r#"{"id":"e1","command":"status","expires_at":1000}"#,
                Some("e1"),
                "expired",
            ),
        ] {
            let r = run(&mut h, payload);
            assert_eq!(r.len(), 1, "{payload}: {r:?}");
            assert_eq!(r[0]["status"], "rejected", "{payload}");
            assert_eq!(r[0]["id"].as_str(), id, "{payload}");
            assert!(
                r[0]["reason"].as_str().unwrap().contains(says),
                "{payload}: {r:?}"
            );
        }
        assert!(fake.ran.lock().unwrap().is_empty());
        let refused = fake.refused.lock().unwrap();
        assert_eq!(refused.len(), 4);
        assert!(
            refused[2].starts_with("pause by the fleet (command p1 via mqtts://b:8883)"),
            "{refused:?}"
        );
    }
}
