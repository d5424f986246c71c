//! One channel's bounded queue.
//!
//! A mutex around a `VecDeque`, not a preallocated ring: a recording may
//! carry hundreds of topics, most of them quiet, and a ring of
//! `queue_capacity` slots per channel would hold its memory (about 1 MiB
//! per channel at the default 16384) whether used or not. Here a queue
//! grows only as far as its channel backs up. The producer holds the lock
//! for one `push_back`; the chunker for one batch of pops. `len` is
//! mirrored in an atomic so the chunker skips empty queues without
//! locking them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

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
}

#[derive(Debug)]
pub(crate) struct ChannelQueue {
    items: Mutex<VecDeque<Queued>>,
    len: AtomicUsize,
    capacity: usize,
}

impl ChannelQueue {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            items: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
            capacity: capacity.max(1),
        }
    }

    /// Appends `q`, or hands it back when the queue is full.
    #[inline]
    pub(crate) fn push(&self, q: Queued) -> Result<(), Queued> {
        // A panic while the lock is held cannot leave the deque half
        // changed (push_back and pop_front are complete or not done), so
        // a poisoned lock is used as it is.
        let mut items = self.items.lock().unwrap_or_else(PoisonError::into_inner);
        if items.len() >= self.capacity {
            return Err(q);
        }
        items.push_back(q);
        self.len.store(items.len(), Ordering::Release);
        Ok(())
    }

    /// Moves up to `max` messages, oldest first, into `out`; returns how
    /// many.
    #[inline]
    pub(crate) fn pop_into(&self, out: &mut Vec<Queued>, max: usize) -> usize {
        if self.len.load(Ordering::Acquire) == 0 {
            return 0;
        }
        let mut items = self.items.lock().unwrap_or_else(PoisonError::into_inner);
        let n = items.len().min(max);
        out.extend(items.drain(..n));
        self.len.store(items.len(), Ordering::Release);
        n
    }

    /// Messages waiting now.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
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
        }
    }

    #[test]
    fn bounded_and_in_order() {
        let c = ChannelQueue::new(3);
        for i in 0..3 {
            assert!(c.push(q(i)).is_ok());
        }
        assert_eq!(c.push(q(9)).unwrap_err().env.log_time, 9);
        let mut out = Vec::new();
        assert_eq!(c.pop_into(&mut out, 2), 2);
        assert_eq!(c.len(), 1);
        assert!(c.push(q(3)).is_ok());
        assert_eq!(c.pop_into(&mut out, 10), 2);
        let times: Vec<u64> = out.iter().map(|q| q.env.log_time).collect();
        assert_eq!(times, [0, 1, 2, 3]);
        assert_eq!(c.pop_into(&mut out, 10), 0);
    }
}
