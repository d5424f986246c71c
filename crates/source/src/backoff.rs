//! Exponential backoff between restarts of a failed source.

use std::time::Duration;

/// Restart delays: `min`, doubling after each failure up to `max`; a run
/// that lasted at least `max` before it failed starts again from `min`
/// (it was healthy for longer than the longest wait, so its failure is
/// new, not the same one repeating).
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// Delays from `min` to `max` (`max` is raised to `min` if below).
    pub fn new(min: Duration, max: Duration) -> Self {
        Self {
            min,
            max: max.max(min),
            next: min,
        }
    }

    /// The delay before restarting a run that failed after `ran` for.
    pub fn after_failure(&mut self, ran: Duration) -> Duration {
        if ran >= self.max {
            self.next = self.min;
        }
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_max_and_resets_after_a_long_run() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(100), ms(1000));
        let quick = ms(10);
        let delays: Vec<_> = (0..6).map(|_| b.after_failure(quick)).collect();
        assert_eq!(
            delays,
            [ms(100), ms(200), ms(400), ms(800), ms(1000), ms(1000)]
        );
        assert_eq!(b.after_failure(ms(1000)), ms(100));
        assert_eq!(b.after_failure(quick), ms(200));
        assert_eq!(Backoff::new(ms(50), ms(10)).after_failure(quick), ms(50));
    }
}
