//! Wakes the chunker when it sleeps on empty queues.
//!
//! A Dekker-style handshake: a source sets `pending` then reads
//! `sleeping`; the chunker sets `sleeping` then reads `pending`. With both
//! pairs sequentially consistent, at least one side sees the other, so a
//! push can never be left waiting for the park timeout. (Without `pending`,
//! a push between the chunker's last empty poll and its `sleeping` store
//! waited out the whole timeout: 20 ms, more than a 1 MHz source's 16384
//! queue slots, and the bench saw drops.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::thread::Thread;

/// The handshake between every producer and the one consumer.
#[derive(Debug, Default)]
pub struct Doorbell {
    sleeping: AtomicBool,
    pending: AtomicBool,
    thread: OnceLock<Thread>,
}

impl Doorbell {
    /// Names the consumer thread that [`ring`](Self::ring) unparks; set
    /// once, by the consumer, before it first sleeps.
    pub fn set_consumer(&self, t: Thread) {
        let _ = self.thread.set(t);
    }

    /// Called by a producer after each successful push.
    #[inline]
    pub fn ring(&self) {
        // Mostly a read: the store only happens once per consumer poll.
        if !self.pending.load(Ordering::Relaxed) {
            self.pending.store(true, Ordering::SeqCst);
        }
        if self.sleeping.load(Ordering::SeqCst) {
            self.wake();
        }
    }

    /// Unparks the consumer whatever it is doing (stop, abort).
    pub fn wake(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Called by the consumer before it polls the queues.
    #[inline]
    pub fn clear(&self) {
        if self.pending.load(Ordering::Relaxed) {
            self.pending.store(false, Ordering::SeqCst);
        }
    }

    /// Called by the consumer when its poll found nothing: true when it may
    /// park (no push arrived since [`clear`](Self::clear)); it must then
    /// call [`awake`](Self::awake) after parking.
    #[inline]
    pub fn may_sleep(&self) -> bool {
        self.sleeping.store(true, Ordering::SeqCst);
        if self.pending.load(Ordering::SeqCst) {
            self.sleeping.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// The consumer is running again.
    #[inline]
    pub fn awake(&self) {
        self.sleeping.store(false, Ordering::SeqCst);
    }
}
