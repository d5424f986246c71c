//! One channel's bounded queue: std's `sync_channel` (a lock-free array
//! ring: a push is a CAS and a write, no allocation), in two tiers so that
//! memory follows use. Every channel starts with a ring of
//! [`FIRST_TIER`] slots; the first push that finds it full makes the
//! second, of the remaining `queue_capacity` slots, and from then on
//! pushes go there. A recording may carry hundreds of topics, most of
//! them quiet: they keep their 256 slots (20 KiB), and only a channel that
//! once backed up holds a full ring (80 bytes a slot: 1.3 MiB at the
//! default 16384). The chunker drains the first tier, then the second.
//!
//! (A lock-free list channel under an atomic length bound was tried
//! first: its 31-slot blocks are allocated by the producer and freed by
//! the chunker, and in `scripts/bench --baseline 036f743` its 1 MHz
//! source dropped in 5 of 5 rounds where 036f743's ring per source did in
//! 1 of 5.)

use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::envelope::Envelope;

/// Where a queued message's bytes were charged (see [`crate::budget`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charge {
    /// Bytes charged.
    pub bytes: u64,
    /// True when charged to the channel's share of the reserve.
    pub reserved: bool,
}

/// A message waiting in its channel's queue, with what it was charged.
#[derive(Debug)]
pub struct Queued {
    /// The message.
    pub env: Envelope,
    /// What it holds of the budget until the chunker has copied it.
    pub charge: Charge,
    /// A key unit (a keyframe with its parameter sets): a point a decoder
    /// can start from, where the recorder may cut a segment.
    pub key: bool,
}

/// Slots every channel's queue starts with.
pub const FIRST_TIER: usize = 256;

/// One tier: the sending end for producers, the receiving end for the
/// chunker (behind a mutex only it takes: never contended).
#[derive(Debug)]
struct Tier {
    tx: SyncSender<Queued>,
    rx: Mutex<Receiver<Queued>>,
}

impl Tier {
    fn new(capacity: usize) -> Self {
        let (tx, rx) = sync_channel(capacity.max(1));
        Self {
            tx,
            rx: Mutex::new(rx),
        }
    }

    fn pop_into(&self, out: &mut Vec<Queued>, max: usize) -> usize {
        // A panic while it is held leaves the receiver whole, so a
        // poisoned lock is used as is.
        let rx = self.rx.lock().unwrap_or_else(PoisonError::into_inner);
        let mut n = 0;
        while n < max {
            match rx.try_recv() {
                Ok(q) => {
                    out.push(q);
                    n += 1;
                }
                Err(_) => break,
            }
        }
        n
    }
}

#[derive(Debug)]
pub(crate) struct ChannelQueue {
    first: Tier,
    second: OnceLock<Tier>,
    /// Slots of the second tier (0: it is never made).
    rest: usize,
}

impl ChannelQueue {
    /// A queue of `capacity` slots in all (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        let first = capacity.clamp(1, FIRST_TIER);
        Self {
            first: Tier::new(first),
            second: OnceLock::new(),
            rest: capacity.saturating_sub(first),
        }
    }

    /// Appends `q`, or hands it back when the queue is full.
    #[inline]
    pub(crate) fn push(&self, q: Queued) -> Result<(), Queued> {
        // Once the second tier exists every push goes there, so one
        // producer's messages stay in order.
        let q = match self.second.get() {
            Some(t) => return Self::send(&t.tx, q),
            None => match self.first.tx.try_send(q) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Full(q) | TrySendError::Disconnected(q)) => q,
            },
        };
        if self.rest == 0 {
            return Err(q);
        }
        let second = self.second.get_or_init(|| Tier::new(self.rest));
        Self::send(&second.tx, q)
    }

    #[inline]
    fn send(tx: &SyncSender<Queued>, q: Queued) -> Result<(), Queued> {
        // The receivers live as long as the queue: Disconnected cannot
        // happen, and would hand the message back like Full.
        tx.try_send(q).map_err(|e| match e {
            TrySendError::Full(q) | TrySendError::Disconnected(q) => q,
        })
    }

    /// Moves up to `max` messages, oldest tier first, into `out`; returns
    /// how many.
    #[inline]
    pub(crate) fn pop_into(&self, out: &mut Vec<Queued>, max: usize) -> usize {
        let n = self.first.pop_into(out, max);
        match self.second.get() {
            Some(t) if n < max => n + t.pop_into(out, max - n),
            _ => n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::ChannelId;

    fn q(i: u64) -> Queued {
        Queued {
            env: Envelope {
                channel: ChannelId(1),
                log_time: i,
                publish_time: i,
                payload: Vec::new(),
            },
            charge: Charge {
                bytes: 1,
                reserved: false,
            },
            key: false,
        }
    }

    #[test]
    fn bounded_and_in_order_across_both_tiers() {
        let cap = FIRST_TIER + 4;
        let c = ChannelQueue::new(cap);
        assert!(c.second.get().is_none(), "the second tier waits for a need");
        for i in 0..cap as u64 {
            assert!(c.push(q(i)).is_ok(), "{i}");
        }
        assert!(c.second.get().is_some());
        assert_eq!(c.push(q(999)).unwrap_err().env.log_time, 999);
        let mut out = Vec::new();
        assert_eq!(c.pop_into(&mut out, 10), 10);
        // The first tier has room again, but pushes go on in the second,
        // which is still full: one producer's order is kept.
        assert!(c.push(q(cap as u64)).is_err());
        // The rest of the first tier, then the second's four.
        assert_eq!(c.pop_into(&mut out, FIRST_TIER), FIRST_TIER - 10 + 4);
        assert!(c.push(q(cap as u64)).is_ok());
        while c.pop_into(&mut out, 7) > 0 {}
        let times: Vec<u64> = out.iter().map(|q| q.env.log_time).collect();
        assert!(times.iter().copied().eq(0..=cap as u64), "{times:?}");
        // A capacity within the first tier never makes a second.
        let tiny = ChannelQueue::new(2);
        assert!(tiny.push(q(1)).is_ok());
        assert!(tiny.push(q(2)).is_ok());
        assert!(tiny.push(q(3)).is_err());
        assert!(tiny.second.get().is_none());
    }
}
