//! Per-topic counts for the status, shared by both backends: messages
//! received, and lost or rejected upstream where the middleware reports it
//! (DDS does; r2r does not, so its topics show zero there); the latest
//! warnings; and the listed topics no publisher offers yet.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::graph::{Refused, TopicKey};

/// Counts of one topic.
#[derive(Debug, Default)]
pub struct TopicCounters {
    /// Messages taken from the middleware (before the sink; the sink
    /// counts its drops on the channel).
    pub received: AtomicU64,
    /// Samples DDS reports lost before they reached edgerec's reader
    /// (`SAMPLE_LOST`: a gap in a reliable stream, or a best-effort
    /// fragment missing). The r2r backend cannot see it and leaves it 0.
    pub lost: AtomicU64,
    /// Samples DDS refused for the reader's resource limits
    /// (`SAMPLE_REJECTED`); 0 under r2r.
    pub rejected: AtomicU64,
    /// Messages received a second time while a reader or subscription
    /// was replaced, and skipped (DDS tells them by writer and source
    /// timestamp, r2r by payload: see [`crate::overlap`]).
    pub duplicates: AtomicU64,
}

/// A snapshot of one topic's counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicStats {
    /// The topic.
    pub topic: String,
    /// Its type.
    pub type_name: String,
    /// Samples received.
    pub received: u64,
    /// Lost upstream (DDS `SAMPLE_LOST`).
    pub lost_upstream: u64,
    /// Rejected upstream (DDS `SAMPLE_REJECTED`).
    pub rejected_upstream: u64,
}

/// Every topic's counts, the warnings and the listed topics not seen yet.
#[derive(Debug, Default)]
pub struct StatsTable {
    topics: Mutex<BTreeMap<TopicKey, Arc<TopicCounters>>>,
    warnings: Mutex<Vec<String>>,
    missing: Mutex<Vec<String>>,
    refused: Mutex<Refused>,
}

impl StatsTable {
    #[cfg_attr(not(any(feature = "dds", feature = "r2r")), allow(dead_code))]
    pub(crate) fn counters(&self, key: &TopicKey) -> Arc<TopicCounters> {
        let mut t = self.topics.lock().unwrap_or_else(|p| p.into_inner());
        t.entry(key.clone()).or_default().clone()
    }

    pub(crate) fn warn(&self, w: String) {
        let mut v = self.warnings.lock().unwrap_or_else(|p| p.into_inner());
        if !v.contains(&w) {
            if v.len() >= 32 {
                v.remove(0);
            }
            v.push(w);
        }
    }

    pub(crate) fn set_missing(&self, m: Vec<String>) {
        *self.missing.lock().unwrap_or_else(|p| p.into_inner()) = m;
    }

    pub(crate) fn set_refused(&self, r: Refused) {
        *self.refused.lock().unwrap_or_else(|p| p.into_inner()) = r;
    }

    /// Publications the graph refused so far, by reason.
    pub fn refused(&self) -> Refused {
        *self.refused.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every topic's counts.
    pub fn snapshot(&self) -> Vec<TopicStats> {
        let t = self.topics.lock().unwrap_or_else(|p| p.into_inner());
        t.iter()
            .map(|(k, c)| TopicStats {
                topic: k.topic.clone(),
                type_name: k.type_name.clone(),
                received: c.received.load(Ordering::Relaxed),
                lost_upstream: c.lost.load(Ordering::Relaxed),
                rejected_upstream: c.rejected.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// The latest warnings (QoS mismatches, unknown types, two types on a
    /// topic), oldest first.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Topics named in the selection that no publisher offers yet.
    pub fn missing(&self) -> Vec<String> {
        self.missing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
