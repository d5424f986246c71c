//! One channel's bounded queue.
//!
//! std's unbounded channel (a lock-free list of 31-slot blocks, allocated
//! as messages arrive and freed as they are taken) under a length counter
//! that bounds it, not a preallocated ring: a recording may carry
//! hundreds of topics, most of them quiet, and a ring of `queue_capacity`
//! slots per channel would hold its memory (about 1 MiB per channel at the
//! default 16384) whether used or not. A push is a `fetch_add` and a
//! lock-free `send`: a producer pre-empted mid-push (two loaded cores, a
//! 1 MHz source) cannot make another producer or the chunker wait, as it
//! could while holding a mutex. The receiving end is taken only by the
//! chunker; its mutex is never contended.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
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
    tx: Sender<Queued>,
    rx: Mutex<Receiver<Queued>>,
    len: AtomicUsize,
    capacity: usize,
}

impl ChannelQueue {
    pub(crate) fn new(capacity: usize) -> Self {
        let (tx, rx) = channel();
        Self {
            tx,
            rx: Mutex::new(rx),
            len: AtomicUsize::new(0),
            capacity: capacity.max(1),
        }
    }

    /// Appends `q`, or hands it back when the queue is full.
    #[inline]
    pub(crate) fn push(&self, q: Queued) -> Result<(), Queued> {
        // Claim a place first: at most `capacity` claims succeed.
        if self.len.fetch_add(1, Ordering::AcqRel) >= self.capacity {
            self.len.fetch_sub(1, Ordering::AcqRel);
            return Err(q);
        }
        // The receiver lives as long as the queue: send cannot fail.
        self.tx.send(q).map_err(|e| {
            self.len.fetch_sub(1, Ordering::AcqRel);
            e.0
        })
    }

    /// Moves up to `max` messages, oldest first, into `out`; returns how
    /// many.
    #[inline]
    pub(crate) fn pop_into(&self, out: &mut Vec<Queued>, max: usize) -> usize {
        if self.len.load(Ordering::Acquire) == 0 {
            return 0;
        }
        // Only the chunker takes: never contended. A panic while it is
        // held leaves the receiver whole, so a poisoned lock is used as is.
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
        self.len.fetch_sub(n, Ordering::AcqRel);
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
