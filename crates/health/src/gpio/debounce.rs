//! Debounce by the kernel's event timestamps: a mechanical switch bounces
//! for a few milliseconds, and each bounce is an edge.

use std::time::Duration;

/// Accepts an edge only when at least the debounce period has passed since
/// the last accepted one (a lock-out: a switch that keeps bouncing cannot
/// push the next accepted edge out indefinitely).
#[derive(Debug, Clone)]
pub struct Debouncer {
    period_ns: u64,
    last_ns: Option<u64>,
}

impl Debouncer {
    /// A debouncer with this period; zero accepts every edge.
    pub fn new(period: Duration) -> Self {
        Debouncer {
            period_ns: u64::try_from(period.as_nanos()).unwrap_or(u64::MAX),
            last_ns: None,
        }
    }

    /// Whether the edge at `timestamp_ns` (the kernel's monotonic stamp)
    /// counts; an accepted edge starts a new lock-out.
    pub fn accept(&mut self, timestamp_ns: u64) -> bool {
        let ok = match self.last_ns {
            // A stamp older than the last accepted one (another clock, or
            // reordering) is not a bounce of it: accept it.
            Some(last) if timestamp_ns >= last => timestamp_ns - last >= self.period_ns,
            _ => true,
        };
        if ok {
            self.last_ns = Some(timestamp_ns);
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn bounces_within_the_period_are_dropped() {
        let mut d = Debouncer::new(Duration::from_millis(50));
        let stamps = [
            1000 * MS,
            1001 * MS,
            1003 * MS,
            1049 * MS,
            1050 * MS,
            1051 * MS,
            1200 * MS,
        ];
        let accepted: Vec<u64> = stamps.into_iter().filter(|&t| d.accept(t)).collect();
        assert_eq!(accepted, [1000 * MS, 1050 * MS, 1200 * MS]);
    }

    #[test]
    fn a_long_bounce_train_cannot_starve_the_next_press() {
        let mut d = Debouncer::new(Duration::from_millis(50));
        // Bounces every 10 ms for 200 ms: one accepted per 50 ms lock-out.
        let n = (0..20).filter(|i| d.accept(i * 10 * MS)).count();
        assert_eq!(n, 4);
    }

    #[test]
    fn zero_accepts_everything() {
        let mut d = Debouncer::new(Duration::ZERO);
        assert!((0..5).all(|_| d.accept(7)));
    }
}
