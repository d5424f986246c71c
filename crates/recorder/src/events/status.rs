//! What the status shows of triggers: the ring, the rules' troubles and
//! the recent events.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;

use super::ring::RingStats;

/// Events kept for the status.
pub const RECENT_EVENTS: usize = 20;

/// One event, as the status lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSummary {
    /// The rule (`ctl` for a manual trigger).
    pub rule: String,
    /// Why.
    pub reason: String,
    /// The values that fired it.
    pub values: String,
    /// Trigger time, ns since the epoch.
    pub at_ns: u64,
    /// The clip it went into.
    pub clip: PathBuf,
}

/// The events stage's status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventsStatus {
    /// The pre-roll ring.
    pub ring: RingStats,
    /// The most recent events, newest last.
    pub recent: VecDeque<EventSummary>,
    /// The clip being written.
    pub open_clip: Option<PathBuf>,
    /// Clips finished.
    pub clips: u64,
    /// Rules that cannot run, with why (a field the type lacks, found
    /// when the topic's type was discovered).
    pub rule_errors: BTreeMap<String, String>,
    /// Per rule, payloads that did not decode (never fire).
    pub malformed: BTreeMap<String, u64>,
    /// Messages the lane refused (the stage fell behind).
    pub lane_dropped: u64,
    /// Clip write failures.
    pub clip_errors: Vec<String>,
    /// `triggers.disk_budget`, bytes.
    pub budget_bytes: u64,
    /// What the clips on disk take of it, bytes.
    pub budget_used_bytes: u64,
    /// Events that got no clip because the budget was spent.
    pub budget_refused: u64,
    /// Clips that ended early because the budget was spent.
    pub budget_cut: u64,
    /// Events that overlapped a clip already listing the most it lists
    /// (counted, not listed, not extending it).
    pub events_over_cap: u64,
}

impl EventsStatus {
    /// One line when the ring cannot hold the pre-roll asked: how much
    /// it holds.
    pub fn ring_shortfall(&self) -> Option<String> {
        let r = &self.ring;
        (r.evicted_early > 0 && r.covered_ns < r.pre_ns).then(|| {
            format!(
                "pre-roll holds {:.1} s of the {:.1} s asked: raise triggers.memory_budget \
                 (now {} MiB)",
                r.covered_ns as f64 / 1e9,
                r.pre_ns as f64 / 1e9,
                r.budget_bytes >> 20
            )
        })
    }

    pub(crate) fn push_event(&mut self, e: EventSummary) {
        if self.recent.len() == RECENT_EVENTS {
            self.recent.pop_front();
        }
        self.recent.push_back(e);
    }
}
