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

/// The offset from CLOCK_MONOTONIC to the recording clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClockMap {
    offset_ns: i128,
    error_ns: u64,
}

/// CLOCK_MONOTONIC in ns.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec for the whole call;
    // clock_gettime only writes it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

impl ClockMap {
    /// Samples the offset now: `recording_now` read between two monotonic
    /// reads.
    pub fn sample(recording_now: impl FnOnce() -> u64) -> Self {
        let m1 = monotonic_ns();
        let r = recording_now();
        let m2 = monotonic_ns();
        let mid = m1 / 2 + m2 / 2;
        ClockMap {
            offset_ns: i128::from(r) - i128::from(mid),
            error_ns: (m2.saturating_sub(m1)).div_ceil(2),
        }
    }

    /// A map with a known offset (tests).
    pub fn with_offset(offset_ns: i128) -> Self {
        ClockMap {
            offset_ns,
            error_ns: 0,
        }
    }

    /// The recording-clock time of a monotonic instant.
    pub fn to_recording(&self, monotonic_ns: u64) -> u64 {
        (i128::from(monotonic_ns) + self.offset_ns).clamp(0, i128::from(u64::MAX)) as u64
    }

    /// At most this far off, from the sampling alone.
    pub fn error_ns(&self) -> u64 {
        self.error_ns
    }
}

/// Keeps one camera's timestamps strictly increasing, across restarts: a
/// stamp not after the last one becomes the last plus 1 ns (and is
/// counted, since it means the camera's clock went back).
#[derive(Debug, Clone, Copy, Default)]
pub struct Monotone {
    last: u64,
    /// Stamps that had to be moved forward.
    pub corrected: u64,
}

impl Monotone {
    /// The stamp to record for `t`.
    pub fn next(&mut self, t: u64) -> u64 {
        let t = if t <= self.last {
            self.corrected += 1;
            self.last + 1
        } else {
            t
        };
        self.last = t;
        t
    }
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
    fn the_offset_carries_monotonic_to_the_recording_clock() {
        let m = ClockMap::sample(|| 5_000_000_000_000 + monotonic_ns());
        let now = monotonic_ns();
        let r = m.to_recording(now);
        let want = 5_000_000_000_000 + now;
        assert!(
            r.abs_diff(want) <= m.error_ns() + 1_000_000,
            "{r} {want} {}",
            m.error_ns()
        );
        assert!(m.error_ns() < 50_000_000);
        assert_eq!(ClockMap::with_offset(-10).to_recording(5), 0);
    }

    #[test]
    fn stamps_strictly_increase() {
        let mut m = Monotone::default();
        assert_eq!(m.next(10), 10);
        assert_eq!(m.next(10), 11);
        assert_eq!(m.next(5), 12);
        assert_eq!(m.next(20), 20);
        assert_eq!(m.corrected, 2);
    }

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
