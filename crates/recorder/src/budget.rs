//! The memory budget shared by every queued envelope and chunk in flight.

use std::sync::atomic::{AtomicU64, Ordering};

/// A byte budget that sources reserve from without ever blocking.
#[derive(Debug)]
pub struct MemoryBudget {
    limit: u64,
    used: AtomicU64,
    peak: AtomicU64,
}

impl MemoryBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Self {
            limit,
            used: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        }
    }

    /// Takes `n` bytes if they fit; false (and nothing taken) otherwise.
    #[inline]
    pub fn try_reserve(&self, n: u64) -> bool {
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            let next = cur.saturating_add(n);
            if next > self.limit {
                return false;
            }
            match self
                .used
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    if next > self.peak.load(Ordering::Relaxed) {
                        self.peak.fetch_max(next, Ordering::Relaxed);
                    }
                    return true;
                }
                Err(actual) => cur = actual,
            }
        }
    }

    /// Takes `n` bytes even past the limit: for memory the pipeline already
    /// holds (a chunk buffer) and cannot refuse. Sources then see less room.
    #[inline]
    pub fn force_reserve(&self, n: u64) {
        let next = self.used.fetch_add(n, Ordering::AcqRel) + n;
        self.peak.fetch_max(next, Ordering::Relaxed);
    }

    /// Gives `n` bytes back.
    #[inline]
    pub fn release(&self, n: u64) {
        let prev = self.used.fetch_sub(n, Ordering::AcqRel);
        debug_assert!(prev >= n, "budget released more than reserved");
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
}
