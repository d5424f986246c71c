//! One topic delivered by two subscriptions at once, while a new one (its
//! QoS adapted again) replaces the old: each message is kept once. The old
//! one stays until the new one is surely matched, so nothing published in
//! between is missed. The DDS backend tells the copies apart by writer and
//! source timestamp; r2r's raw subscriptions discard both, so here they
//! are told apart by their bytes: each occurrence of a payload is kept
//! from whichever subscription delivers it first, and a payload published
//! twice is kept twice.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

/// How long the old subscription keeps delivering next to the new one: a
/// local match takes milliseconds, a loaded board's discovery much longer.
pub const OLD_KEPT: Duration = Duration::from_secs(1);

/// How long payloads are compared at most: after the old subscription is
/// gone, the new one may still deliver what the old one already did.
pub const COMPARED_AT_MOST: Duration = Duration::from_secs(3);

/// Payloads remembered at most; past it the comparison ends early (a flood
/// of distinct messages, where a duplicate is the lesser harm).
const MAX_PAYLOADS: usize = 1 << 16;

/// Which subscription delivered a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The one being replaced.
    Old,
    /// The replacement.
    New,
}

/// The payloads both subscriptions delivered since the replacement began.
#[derive(Debug)]
pub struct Overlap {
    started: Instant,
    /// Per payload hash: occurrences delivered by the old and by the new.
    seen: HashMap<u64, [u32; 2]>,
    /// Occurrences the old delivered that the new has not (yet).
    ahead: usize,
}

impl Overlap {
    /// A replacement that began at `now`.
    pub fn new(now: Instant) -> Self {
        Overlap {
            started: now,
            seen: HashMap::new(),
            ahead: 0,
        }
    }

    /// Whether to keep `payload` delivered by `side`: true for the first
    /// delivery of each occurrence, false for the other subscription's copy.
    pub fn keep(&mut self, side: Side, payload: &[u8]) -> bool {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        payload.hash(&mut h);
        let counts = self.seen.entry(h.finish()).or_insert([0, 0]);
        let (me, other) = match side {
            Side::Old => (0, 1),
            Side::New => (1, 0),
        };
        counts[me] = counts[me].saturating_add(1);
        let first = counts[me] > counts[other];
        match (side, first) {
            (Side::Old, true) => self.ahead += 1,
            (Side::New, false) => self.ahead = self.ahead.saturating_sub(1),
            _ => {}
        }
        first
    }

    /// Whether the old subscription can go now.
    pub fn old_can_go(&self, now: Instant) -> bool {
        now.duration_since(self.started) >= OLD_KEPT
    }

    /// Whether comparing can stop: the old one is gone and the new one
    /// has delivered everything the old did, or time (or room) is up.
    pub fn done(&self, now: Instant, old_gone: bool) -> bool {
        (old_gone && self.ahead == 0)
            || now.duration_since(self.started) >= COMPARED_AT_MOST
            || self.seen.len() >= MAX_PAYLOADS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_occurrence_is_kept_once_whichever_side_delivers_it_first() {
        let mut o = Overlap::new(Instant::now());
        // The old one delivers a, b; the new one, matched late, b then c.
        assert!(o.keep(Side::Old, b"a"));
        assert!(o.keep(Side::Old, b"b"));
        assert!(!o.keep(Side::New, b"b"));
        assert!(o.keep(Side::New, b"c"));
        assert!(!o.keep(Side::Old, b"c"));
        // `a` was never delivered by the new one.
        assert_eq!(o.ahead, 1);
        // The same payload published twice is kept twice.
        assert!(o.keep(Side::New, b"z"));
        assert!(o.keep(Side::New, b"z"));
        assert!(!o.keep(Side::Old, b"z"));
        assert!(!o.keep(Side::Old, b"z"));
        assert!(o.keep(Side::Old, b"z"));
        assert!(!o.keep(Side::New, b"z"));
    }

    #[test]
    fn the_old_one_goes_after_a_while_and_comparing_ends_when_caught_up() {
        let t0 = Instant::now();
        let mut o = Overlap::new(t0);
        assert!(!o.old_can_go(t0));
        assert!(o.old_can_go(t0 + OLD_KEPT));
        o.keep(Side::Old, b"a");
        assert!(!o.done(t0 + OLD_KEPT, true));
        o.keep(Side::New, b"a");
        assert!(o.done(t0 + OLD_KEPT, true));
        assert!(!o.done(t0 + OLD_KEPT, false));
        assert!(o.done(t0 + COMPARED_AT_MOST, false));
    }
}
