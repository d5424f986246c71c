//! The memory budget that every queued message and every chunk in flight
//! is charged to, and how it is shared between channels.
//!
//! The budget has two areas. The **shared area** (`limit - reserve`) is
//! first come, first served: any channel may fill it, and what the
//! pipeline must hold (its chunk buffers, compressor output) is forced
//! into it. The **reserve** is split evenly between the channels known at
//! the time of a push: a channel whose message does not fit in the shared
//! area may still queue it while its own bytes in the reserve stay within
//! `reserve / channels`. A channel flooding past the disk's speed fills the
//! shared area and its own share, then drops; every other channel still
//! has its share. The reserve is never forced into, so what channels hold
//! in it never exceeds `reserve`, and the budget as a whole never exceeds
//! `limit` except by what the pipeline forces (compressor output).

use std::sync::atomic::{AtomicU64, Ordering};

/// A byte budget that sources reserve from without ever blocking.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: u64,
    reserve: u64,
    used: AtomicU64,
    peak: AtomicU64,
}

impl MemoryBudget {
    /// A budget of `limit` bytes, all of it shared.
    pub fn new(limit: u64) -> Self {
        Self::with_reserve(limit, 0)
    }

    /// A budget of `limit` bytes of which `reserve` is kept for the
    /// channels' guaranteed shares (clamped to `limit`).
    pub fn with_reserve(limit: u64, reserve: u64) -> Self {
        Self {
            limit,
            reserve: reserve.min(limit),
            used: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        }
    }

    /// Takes `n` bytes of the shared area if they fit; false (and nothing
    /// taken) otherwise.
    #[inline]
    pub fn try_reserve(&self, n: u64) -> bool {
        let cap = self.limit - self.reserve;
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            let next = cur.saturating_add(n);
            if next > cap {
                return false;
            }
            match self
                .used
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.note_peak(next);
                    return true;
                }
                Err(actual) => cur = actual,
            }
        }
    }

    /// Takes `n` bytes of the reserve. The caller has checked the
    /// channel's share (see [`crate::sink`]), which is what bounds the
    /// reserve in use.
    #[inline]
    pub(crate) fn take_reserved(&self, n: u64) {
        let next = self.used.fetch_add(n, Ordering::AcqRel) + n;
        self.note_peak(next);
    }

    /// Takes `n` bytes even past the limit: for memory the pipeline already
    /// holds (a chunk buffer) and cannot refuse. Sources then see less room.
    #[inline]
    pub fn force_reserve(&self, n: u64) {
        let next = self.used.fetch_add(n, Ordering::AcqRel) + n;
        self.note_peak(next);
    }

    /// Gives `n` bytes back.
    #[inline]
    pub fn release(&self, n: u64) {
        let prev = self.used.fetch_sub(n, Ordering::AcqRel);
        debug_assert!(prev >= n, "budget released more than reserved");
    }

    #[inline]
    fn note_peak(&self, now: u64) {
        if now > self.peak.load(Ordering::Relaxed) {
            self.peak.fetch_max(now, Ordering::Relaxed);
        }
    }

    /// Bytes in use now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }
    /// Highest use seen.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }
    /// The part of the limit kept for the channels' guaranteed shares.
    pub fn reserve(&self) -> u64 {
        self.reserve
    }
    /// True when `n` more bytes fit in the shared area now.
    pub fn has_room(&self, n: u64) -> bool {
        self.used().saturating_add(n) <= self.limit - self.reserve
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_refuses_past_the_limit_and_release_returns() {
        let b = MemoryBudget::new(100);
        assert!(b.try_reserve(60));
        assert!(!b.try_reserve(41));
        assert!(b.try_reserve(40));
        assert_eq!(b.used(), 100);
        b.release(60);
        assert!(b.try_reserve(50));
        assert_eq!(b.peak(), 100);
    }

    #[test]
    fn the_shared_area_stops_below_the_reserve() {
        let b = MemoryBudget::with_reserve(100, 30);
        assert!(b.try_reserve(70));
        assert!(!b.try_reserve(1));
        assert!(!b.has_room(1));
        b.take_reserved(30);
        assert_eq!(b.used(), 100);
        assert_eq!(b.peak(), 100);
        assert_eq!(MemoryBudget::with_reserve(10, 50).reserve(), 10);
    }
}
