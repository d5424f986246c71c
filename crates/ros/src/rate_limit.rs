//! Per-requester rate limits on the commands that make work: `trigger`
//! (an event clip) and `split` (a new segment). A requester is who asked:
//! a local user on the control socket (its uid, read from the socket with
//! `SO_PEERCRED`) or a ROS 2 client (the writer of its requests). Each
//! has a token bucket: `burst` commands at once, then `per_second` on
//! average; one more is refused with a reply that says why, counted by
//! command and by requester, and logged (the first refusal of a requester,
//! then at most once per [`WARN_EVERY`] with the count since).
//!
//! The table of requesters is bounded by [`MAX_REQUESTERS`]: a bucket that
//! has refilled is the same as a new one and is let go first; when every
//! slot is busy, the requesters beyond share one bucket, so a flood from
//! many identities is held to one more requester's rate.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use edgerec_ros::rate_limit::{RateLimiter, RateLimits, Requester};
//!
//! let limits = RateLimiter::new(RateLimits { per_second: 1, burst: 2 });
//! let me = Requester::Local { uid: 1000, pid: 42, user: None };
//! let t = Instant::now();
//! assert!(limits.check(&me, "trigger", t).is_ok());
//! assert!(limits.check(&me, "trigger", t).is_ok());
//! assert!(limits.check(&me, "trigger", t).is_err());
//! assert!(limits.check(&me, "split", t + Duration::from_secs(1)).is_ok());
//! assert_eq!(limits.refusals().total(), 1);
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Requesters with a bucket of their own; those beyond share one.
pub const MAX_REQUESTERS: usize = 64;

/// A requester's refusals are logged at most this often (after its first).
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// The key of the bucket the requesters beyond [`MAX_REQUESTERS`] share.
const OTHERS: &str = "other requesters";

/// Who gave a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requester {
    /// A process on this machine, on the control socket.
    Local {
        /// Its user id.
        uid: u32,
        /// Its process id (shown, not keyed on: each `edgerec ctl` is a
        /// new process).
        pid: u32,
        /// Its user's name, where the user database has one (shown).
        user: Option<String>,
    },
    /// A ROS 2 service client: the GUID of the writer of its requests when
    /// discovery knows it, else the writer's local instance handle.
    RosClient {
        /// 16 bytes of GUID as hex, or `handle <hex>`.
        id: String,
    },
    /// The fleet, over the fleet link: the broker it came through, the
    /// command's id, and the operator the command names (not verified:
    /// mutual TLS and the broker's ACL say it came from the fleet).
    Fleet {
        /// `remote.broker`.
        broker: String,
        /// The command's `id`.
        command_id: String,
        /// The command's `issued_by`, if any.
        by: Option<String>,
    },
    /// Nothing says who (a test, an internal caller).
    Unknown,
}

impl Requester {
    /// What its bucket is keyed on: the uid, not the pid.
    pub fn key(&self) -> String {
        match self {
            Requester::Local { uid, .. } => format!("uid {uid}"),
            Requester::RosClient { id } => format!("ROS 2 client {id}"),
            // One bucket for the fleet: its operators share the link.
            Requester::Fleet { .. } => "the fleet".to_owned(),
            Requester::Unknown => "unknown".to_owned(),
        }
    }
}

impl fmt::Display for Requester {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Requester::Local {
                uid,
                pid,
                user: Some(user),
            } => write!(f, "uid {uid} ({user}, pid {pid})"),
            Requester::Local { uid, pid, .. } => write!(f, "uid {uid} (pid {pid})"),
            Requester::Fleet {
                broker,
                command_id,
                by,
            } => {
                write!(f, "the fleet (command {command_id} via {broker}")?;
                if let Some(by) = by {
                    write!(f, ", issued by {by}")?;
                }
                f.write_str(")")
            }
            other => f.write_str(&other.key()),
        }
    }
}

/// How many work-making commands one requester may give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimits {
    /// On average, per second (`health.control_rate`).
    pub per_second: u32,
    /// At once, before the rate applies (`health.control_burst`).
    pub burst: u32,
}

impl Default for RateLimits {
    /// 10 a second, 20 at once: a person or a script marking events, not a
    /// loop.
    fn default() -> Self {
        RateLimits {
            per_second: 10,
            burst: 20,
        }
    }
}

/// A command refused by the rate limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{verb} refused: {who} gave more than {burst} at once or {per_second} a second \
     (health.control_rate, health.control_burst); try again in {retry_ms} ms"
)]
pub struct Refused {
    /// The command's word.
    pub verb: &'static str,
    /// Who gave it.
    pub who: String,
    /// The limits.
    pub per_second: u32,
    /// The limits.
    pub burst: u32,
    /// When the next one would be taken.
    pub retry_ms: u64,
}

/// What the limits refused since the start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Refusals {
    /// By command word (`trigger`, `split`).
    pub by_command: BTreeMap<String, u64>,
    /// By requester key (`uid 1000`, `ROS 2 client …`); those beyond
    /// [`MAX_REQUESTERS`] under `other requesters`.
    pub by_requester: BTreeMap<String, u64>,
}

impl Refusals {
    /// Every refusal.
    pub fn total(&self) -> u64 {
        self.by_command.values().sum()
    }
}

struct Bucket {
    tokens: f64,
    at: Instant,
    /// Refused since the last warning, and when that was.
    unwarned: u64,
    warned: Option<Instant>,
}

struct State {
    buckets: HashMap<String, Bucket>,
    refusals: Refusals,
}

/// The buckets of every requester.
pub struct RateLimiter {
    limits: RateLimits,
    state: Mutex<State>,
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("limits", &self.limits)
            .finish()
    }
}

impl Default for RateLimiter {
    fn default() -> Self {
        RateLimiter::new(RateLimits::default())
    }
}

impl RateLimiter {
    /// Buckets of `limits` (each at least 1).
    pub fn new(limits: RateLimits) -> Self {
        RateLimiter {
            limits: RateLimits {
                per_second: limits.per_second.max(1),
                burst: limits.burst.max(1),
            },
            state: Mutex::new(State {
                buckets: HashMap::new(),
                refusals: Refusals::default(),
            }),
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> RateLimits {
        self.limits
    }

    /// Takes one `verb` from `who`'s bucket at `now`, or says why not.
    pub fn check(&self, who: &Requester, verb: &'static str, now: Instant) -> Result<(), Refused> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let key = self.slot_for(&mut st, who.key(), now);
        let (burst, rate) = (
            f64::from(self.limits.burst),
            f64::from(self.limits.per_second),
        );
        let b = st.buckets.entry(key.clone()).or_insert(Bucket {
            tokens: burst,
            at: now,
            unwarned: 0,
            warned: None,
        });
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate).min(burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return Ok(());
        }
        let retry_ms = ((1.0 - b.tokens) / rate * 1000.0).ceil() as u64;
        b.unwarned += 1;
        let warn = b
            .warned
            .is_none_or(|w| now.saturating_duration_since(w) >= WARN_EVERY);
        let refused = Refused {
            verb,
            who: who.to_string(),
            per_second: self.limits.per_second,
            burst: self.limits.burst,
            retry_ms,
        };
        if warn {
            tracing::warn!("{refused} ({} refused since the last warning)", b.unwarned);
            b.warned = Some(now);
            b.unwarned = 0;
        }
        *st.refusals.by_command.entry(verb.to_owned()).or_default() += 1;
        *st.refusals.by_requester.entry(key).or_default() += 1;
        Err(refused)
    }

    /// The bucket key `key` uses: its own when it has one or a slot is
    /// free (a refilled bucket is let go to make one), else the shared
    /// one.
    fn slot_for(&self, st: &mut State, key: String, now: Instant) -> String {
        if st.buckets.contains_key(&key) || st.buckets.len() < MAX_REQUESTERS {
            return key;
        }
        let (burst, rate) = (
            f64::from(self.limits.burst),
            f64::from(self.limits.per_second),
        );
        let full = st
            .buckets
            .iter()
            .find(|(k, b)| {
                k.as_str() != OTHERS
                    && b.tokens + now.saturating_duration_since(b.at).as_secs_f64() * rate >= burst
            })
            .map(|(k, _)| k.clone());
        match full {
            Some(k) => {
                st.buckets.remove(&k);
                key
            }
            None => OTHERS.to_owned(),
        }
    }

    /// What was refused since the start.
    pub fn refusals(&self) -> Refusals {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .refusals
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(uid: u32) -> Requester {
        Requester::Local {
            uid,
            pid: 1,
            user: None,
        }
    }

    #[test]
    fn a_burst_then_the_rate() {
        let l = RateLimiter::new(RateLimits {
            per_second: 10,
            burst: 20,
        });
        let t = Instant::now();
        let ok = (0..1000)
            .filter(|_| l.check(&local(0), "trigger", t).is_ok())
            .count();
        assert_eq!(ok, 20);
        // 1 s later: 10 more, not 20.
        let t1 = t + Duration::from_secs(1);
        let ok = (0..1000)
            .filter(|_| l.check(&local(0), "trigger", t1).is_ok())
            .count();
        assert_eq!(ok, 10);
        let r = l.refusals();
        assert_eq!(r.total(), 1970);
        assert_eq!(r.by_command["trigger"], 1970);
        assert_eq!(r.by_requester["uid 0"], 1970);
        let e = l.check(&local(0), "split", t1).unwrap_err();
        assert_eq!(e.retry_ms, 100);
        assert!(e.to_string().contains("health.control_rate"), "{e}");
        assert!(
            e.to_string().starts_with("split refused: uid 0 (pid 1)"),
            "{e}"
        );
    }

    #[test]
    fn requesters_have_their_own_buckets_keyed_on_uid_not_pid() {
        let l = RateLimiter::new(RateLimits {
            per_second: 1,
            burst: 1,
        });
        let t = Instant::now();
        assert!(l.check(&local(1000), "trigger", t).is_ok());
        assert!(l
            .check(
                &Requester::Local {
                    uid: 1000,
                    pid: 2,
                    user: None
                },
                "trigger",
                t
            )
            .is_err());
        assert!(l.check(&local(1001), "trigger", t).is_ok());
        let ros = Requester::RosClient { id: "ab".into() };
        assert!(l.check(&ros, "split", t).is_ok());
        assert!(l.check(&ros, "split", t).is_err());
        assert_eq!(l.refusals().by_requester["ROS 2 client ab"], 1);
    }

    #[test]
    fn many_identities_share_one_bucket_beyond_the_cap() {
        let l = RateLimiter::new(RateLimits {
            per_second: 1,
            burst: 2,
        });
        let t = Instant::now();
        // Each of 10,000 identities takes one (its bucket stays below
        // full): the first MAX_REQUESTERS have theirs, the rest share one
        // of 2.
        let ok = (0..10_000u32)
            .filter(|i| l.check(&local(*i), "trigger", t).is_ok())
            .count();
        assert_eq!(ok, MAX_REQUESTERS + 2);
        let r = l.refusals();
        assert_eq!(r.by_requester.len(), 1);
        assert_eq!(r.by_requester[OTHERS], 10_000 - MAX_REQUESTERS as u64 - 2);
        assert!(l.state.lock().unwrap().buckets.len() <= MAX_REQUESTERS + 1);
        // Once their buckets refill, new identities get their own again.
        let later = t + Duration::from_secs(5);
        assert!(l.check(&local(20_000), "trigger", later).is_ok());
        assert!(l.check(&local(20_000), "trigger", later).is_ok());
        assert!(l.check(&local(20_000), "trigger", later).is_err());
        assert_eq!(l.refusals().by_requester["uid 20000"], 1);
    }
}
