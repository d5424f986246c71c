//! Alerts for the fleet, raised and cleared as events on
//! `<prefix>/alerts`, from the recorder's status snapshot (what the health
//! side already judged): a stage fault or a storage failure, a full or
//! low disk, drops that persist, a source restarting or failed, the clock
//! unlocked for longer than a bound, uploads stalled. Each alert has a
//! key (`drops:/camera/raw`); it is raised once its condition has held
//! for the kind's [`Rule::hold`], and cleared once the condition has been
//! gone for [`CLEAR_AFTER`], so a condition that flickers raises one
//! alert, not one a second.
//!
//! Event: `{"alert": key, "kind", "subject", "state": "raised" |
//! "cleared", "reason", "since": unix_ms, "at": unix_ms}`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long a condition must be gone before its alert clears.
pub const CLEAR_AFTER: Duration = Duration::from_secs(10);

/// Uploads count as stalled when files wait, the link is open, and
/// nothing was sent for this long.
pub const UPLOADS_STALLED_AFTER: Duration = Duration::from_secs(600);

/// One kind of alert and how long its condition must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// Its kind in the event (`disk-low`).
    pub kind: &'static str,
    /// Held this long before it is raised.
    pub hold: Duration,
}

/// The kinds, in the order of the health side's reasons.
pub const RULES: [Rule; 9] = [
    Rule {
        kind: "storage-failed",
        hold: Duration::ZERO,
    },
    Rule {
        kind: "stage-stalled",
        hold: Duration::ZERO,
    },
    Rule {
        kind: "disk-full",
        hold: Duration::ZERO,
    },
    Rule {
        kind: "clock-unlocked",
        hold: Duration::from_secs(60),
    },
    Rule {
        kind: "drops",
        hold: Duration::from_secs(30),
    },
    Rule {
        kind: "disk-low",
        hold: Duration::ZERO,
    },
    Rule {
        kind: "source-restarting",
        hold: Duration::from_secs(10),
    },
    Rule {
        kind: "source-failed",
        hold: Duration::ZERO,
    },
    Rule {
        kind: "uploads-stalled",
        hold: Duration::ZERO,
    },
];

fn rule(kind: &str) -> Rule {
    RULES
        .iter()
        .copied()
        .find(|r| r.kind == kind)
        .unwrap_or(Rule {
            kind: "other",
            hold: Duration::ZERO,
        })
}

/// A health reason (`edgerec_health::state::evaluate`'s words) as an
/// alert's kind and subject; `None` for reasons that are not alerts (a
/// pause is a state the status shows; the link's own state cannot be
/// sent over it).
pub fn classify(reason: &str) -> Option<(&'static str, String)> {
    let after = |p: &str| reason.strip_prefix(p).map(str::to_owned);
    if reason.starts_with("storage failed") {
        return Some(("storage-failed", String::new()));
    }
    if let Some(rest) = after("stage ") {
        return rest
            .strip_suffix(" stalled")
            .map(|s| ("stage-stalled", s.to_owned()));
    }
    if reason == "disk full" {
        return Some(("disk-full", String::new()));
    }
    if reason == "disk low" {
        return Some(("disk-low", String::new()));
    }
    if reason == "clock unlocked" {
        return Some(("clock-unlocked", String::new()));
    }
    if let Some(topic) = after("drops rising on ") {
        return Some(("drops", topic));
    }
    if let Some(rest) = after("source ") {
        if let Some(s) = rest.strip_suffix(" restarting") {
            return Some(("source-restarting", s.to_owned()));
        }
        if let Some((s, _)) = rest.split_once(" failed: ") {
            return Some(("source-failed", s.to_owned()));
        }
    }
    None
}

#[derive(Debug)]
struct Tracked {
    kind: &'static str,
    subject: String,
    reason: String,
    /// When the condition was first seen (this time round).
    seen_since: Instant,
    since_ms: i64,
    /// When it was last seen.
    last_seen: Instant,
    raised: bool,
}

/// The alerts' state between snapshots.
#[derive(Debug, Default)]
pub struct Alerts {
    tracked: BTreeMap<String, Tracked>,
    /// Offload: (bytes sent, when they last grew).
    sent: Option<(u64, Instant)>,
}

impl Alerts {
    /// Takes the status snapshot `status` seen at `now` (`now_ms` on the
    /// system clock); returns the events to send.
    pub fn observe(&mut self, status: &Value, now: Instant, now_ms: i64) -> Vec<Value> {
        let mut present: BTreeMap<String, (&'static str, String, String)> = BTreeMap::new();
        for r in status["reasons"].as_array().into_iter().flatten() {
            let Some(text) = r.as_str() else { continue };
            if let Some((kind, subject)) = classify(text) {
                let key = if subject.is_empty() {
                    kind.to_owned()
                } else {
                    format!("{kind}:{subject}")
                };
                present.insert(key, (kind, subject, text.to_owned()));
            }
        }
        if let Some(why) = self.uploads_stalled(&status["offload"], now) {
            present.insert(
                "uploads-stalled".into(),
                ("uploads-stalled", String::new(), why),
            );
        }
        let mut out = Vec::new();
        for (key, (kind, subject, reason)) in present {
            let t = self.tracked.entry(key).or_insert_with(|| Tracked {
                kind,
                subject,
                reason: reason.clone(),
                seen_since: now,
                since_ms: now_ms,
                last_seen: now,
                raised: false,
            });
            t.last_seen = now;
            t.reason = reason;
        }
        let mut gone = Vec::new();
        for (key, t) in &mut self.tracked {
            let absent = now.duration_since(t.last_seen);
            if t.raised {
                if absent >= CLEAR_AFTER {
                    out.push(event(key, t, "cleared", now_ms));
                    gone.push(key.clone());
                }
            } else if absent > Duration::ZERO {
                // Gone before it held long enough: forgotten.
                gone.push(key.clone());
            } else if now.duration_since(t.seen_since) >= rule(t.kind).hold {
                t.raised = true;
                out.push(event(key, t, "raised", now_ms));
            }
        }
        for k in gone {
            self.tracked.remove(&k);
        }
        out
    }

    /// Raised alerts now, by key.
    pub fn active(&self) -> Vec<String> {
        self.tracked
            .iter()
            .filter(|(_, t)| t.raised)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Whether uploads are stalled: files wait, the link is open, and
    /// nothing was sent for [`UPLOADS_STALLED_AFTER`].
    fn uploads_stalled(&mut self, offload: &Value, now: Instant) -> Option<String> {
        let sent = offload["sent_bytes"].as_u64()?;
        let waiting: u64 = offload["queue"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["files"].as_u64())
            .sum();
        let grew = match self.sent {
            Some((before, _)) => sent > before,
            None => true,
        };
        if grew || waiting == 0 {
            self.sent = Some((sent, now));
            return None;
        }
        let since = self.sent.map_or(now, |s| s.1);
        let open = offload["link"].as_str() == Some("open");
        let idle = now.duration_since(since);
        (open && idle >= UPLOADS_STALLED_AFTER).then(|| {
            format!(
                "uploads stalled: {waiting} files wait and nothing was sent for {} s{}",
                idle.as_secs(),
                offload["last_error"]
                    .as_str()
                    .map(|e| format!("; last error: {e}"))
                    .unwrap_or_default()
            )
        })
    }
}

fn event(key: &str, t: &Tracked, state: &str, now_ms: i64) -> Value {
    json!({
        "alert": key,
        "kind": t.kind,
        "subject": t.subject,
        "state": state,
        "reason": t.reason,
        "since": t.since_ms,
        "at": now_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(reasons: &[&str]) -> Value {
        json!({ "reasons": reasons })
    }

    #[test]
    fn reasons_map_to_kinds() {
        assert_eq!(
            classify("drops rising on /cam \"front\""),
            Some(("drops", "/cam \"front\"".into()))
        );
        assert_eq!(
            classify("source lidar restarting"),
            Some(("source-restarting", "lidar".into()))
        );
        assert_eq!(
            classify("source can0 failed: no such device: set the interface"),
            Some(("source-failed", "can0".into()))
        );
        assert_eq!(
            classify("stage storage stalled"),
            Some(("stage-stalled", "storage".into()))
        );
        assert_eq!(
            classify("storage failed: EIO"),
            Some(("storage-failed", String::new()))
        );
        assert_eq!(
            classify("clock unlocked"),
            Some(("clock-unlocked", String::new()))
        );
        assert_eq!(classify("paused by uid 0 (root, pid 1)"), None);
        assert_eq!(classify("fleet link down for 40 s: refused"), None);
    }

    #[test]
    fn raised_after_the_hold_once_and_cleared_after_it_is_gone() {
        let mut a = Alerts::default();
        let t0 = Instant::now();
        let s = |secs: u64| t0 + Duration::from_secs(secs);
        // Disk low raises at once.
        let ev = a.observe(&status(&["disk low"]), s(0), 0);
        assert_eq!(ev.len(), 1);
        assert_eq!(
            (ev[0]["alert"].as_str(), ev[0]["state"].as_str()),
            (Some("disk-low"), Some("raised"))
        );
        // Drops must persist 30 s; a blip is forgotten.
        assert!(a
            .observe(&status(&["disk low", "drops rising on /x"]), s(1), 1000)
            .is_empty());
        assert!(a.observe(&status(&["disk low"]), s(2), 2000).is_empty());
        for i in 3..33 {
            let ev = a.observe(
                &status(&["disk low", "drops rising on /x"]),
                s(i),
                i as i64 * 1000,
            );
            assert!(ev.is_empty(), "at {i}: {ev:?}");
        }
        let ev = a.observe(&status(&["disk low", "drops rising on /x"]), s(33), 33_000);
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!(ev[0]["alert"], "drops:/x");
        assert_eq!(ev[0]["since"], 3000);
        assert_eq!(a.active(), ["disk-low", "drops:/x"]);
        // Gone: cleared 10 s later, once.
        let mut cleared = Vec::new();
        for i in 34..50 {
            cleared.extend(a.observe(&status(&[]), s(i), i as i64 * 1000));
        }
        let keys: Vec<&str> = cleared
            .iter()
            .map(|e| e["alert"].as_str().unwrap())
            .collect();
        assert_eq!(keys, ["disk-low", "drops:/x"]);
        assert!(cleared.iter().all(|e| e["state"] == "cleared"));
        assert!(a.active().is_empty());
    }

    #[test]
    fn uploads_stalled_when_files_wait_on_an_open_link_and_nothing_goes() {
        let mut a = Alerts::default();
        let t0 = Instant::now();
        let off = |sent: u64, files: u64, link: &str| {
            json!({"reasons": [], "offload": {"sent_bytes": sent, "link": link,
                "queue": [{"class": "segments", "files": files}], "last_error": "503"}})
        };
        assert!(a.observe(&off(10, 3, "open"), t0, 0).is_empty());
        assert!(a
            .observe(&off(10, 3, "open"), t0 + Duration::from_secs(599), 0)
            .is_empty());
        let ev = a.observe(&off(10, 3, "open"), t0 + Duration::from_secs(600), 0);
        assert_eq!(ev.len(), 1);
        assert!(
            ev[0]["reason"].as_str().unwrap().contains("3 files wait"),
            "{ev:?}"
        );
        // Sending again clears it.
        let mut later = Vec::new();
        for i in 601..615 {
            later.extend(a.observe(&off(20 + i, 3, "open"), t0 + Duration::from_secs(i), 0));
        }
        assert_eq!(later.len(), 1);
        assert_eq!(later[0]["state"], "cleared");
        // A closed link (outside the windows) is not a stall.
        let mut b = Alerts::default();
        assert!(b
            .observe(&off(1, 2, "closed: outside the windows"), t0, 0)
            .is_empty());
        assert!(b
            .observe(
                &off(1, 2, "closed: outside the windows"),
                t0 + Duration::from_secs(9999),
                0
            )
            .is_empty());
    }
}
