//! Capture time: the pipeline runs on GStreamer's system clock, which is
//! CLOCK_MONOTONIC, so a buffer's `base_time + running_time(pts)` is the
//! monotonic instant it was captured (v4l2src takes it from the driver's
//! timestamp, videotestsrc and nvarguscamerasrc from when the frame was
//! made). [`ClockMap`] carries it to the recording clock (realtime, TAI or
//! a PHC) with an offset sampled at every frame, so steps and slews of the
//! recording clock are followed within a frame.
//!
//! How far off it can be: the offset is read between two monotonic reads,
//! so its error is at most half the bracket ([`ClockMap::error_ns`],
//! typically under a microsecond), plus whatever error the camera's own
//! timestamp has (the driver's, or the moment a frame was pushed).

pub use edgerec_source::clock::{ClockMap, Monotone};

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    edgerec_source::clock::KernelClock::Monotonic.now_ns()
}

/// Frames lost between two captures of a fixed-rate camera: a gap of
/// more than 1.5 frame periods between presentation times is
/// `round(gap / period) - 1` lost frames (dropped by the leaky queue in
/// front of the encoder, or by the camera itself).
#[derive(Debug, Clone, Copy)]
pub struct FrameGaps {
    period_ns: u64,
    last: Option<u64>,
    /// Frames lost so far.
    pub lost: u64,
}

impl FrameGaps {
    /// For a camera at `fps`.
    pub fn new(fps: u32) -> Self {
        FrameGaps {
            period_ns: 1_000_000_000 / u64::from(fps.max(1)),
            last: None,
            lost: 0,
        }
    }

    /// Forgets the last frame (a new pipeline starts its own clock).
    pub fn reset(&mut self) {
        self.last = None;
    }

    /// Looks at the next frame's time; returns the frames lost before it.
    pub fn observe(&mut self, t_ns: u64) -> u64 {
        let lost = match self.last {
            Some(prev) if t_ns > prev => {
                let gap = t_ns - prev;
                if gap * 2 > self.period_ns * 3 {
                    ((gap + self.period_ns / 2) / self.period_ns).saturating_sub(1)
                } else {
                    0
                }
            }
            _ => 0,
        };
        self.last = Some(t_ns);
        self.lost += lost;
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_count_missing_frames() {
        let p = 33_333_333;
        let mut g = FrameGaps::new(30);
        assert_eq!(g.observe(0), 0);
        assert_eq!(g.observe(p), 0);
        // Jitter of 40 % is not a loss.
        assert_eq!(g.observe(2 * p + p * 4 / 10), 0);
        assert_eq!(g.observe(5 * p), 2);
        assert_eq!(g.observe(6 * p), 0);
        assert_eq!(g.lost, 2);
        g.reset();
        assert_eq!(g.observe(100 * p), 0);
    }
}
