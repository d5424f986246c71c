//! The recording clock as sources see it.
//!
//! The PTP-disciplined clock and its quality live in `edgerec-clock`; a
//! source needs only "now" in ns since the Unix epoch, and the binary
//! hands it the configured clock behind this trait.

/// A source of log times.
pub trait RecordingClock: Send + Sync + 'static {
    /// Now, in ns since the Unix epoch.
    fn now_ns(&self) -> u64;

    /// True when this clock is CLOCK_REALTIME itself, so that a kernel
    /// timestamp on CLOCK_REALTIME (a socket's receive time) is already on
    /// it and needs no offset (see [`ClockMap`]).
    fn is_realtime(&self) -> bool {
        false
    }
}

/// CLOCK_REALTIME: on the appliance phc2sys disciplines it to the PHC.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl RecordingClock for SystemClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    }

    fn is_realtime(&self) -> bool {
        true
    }
}

impl std::fmt::Debug for dyn RecordingClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecordingClock")
    }
}

/// Nanoseconds on `CLOCK_MONOTONIC_COARSE`: a vDSO read of the last tick's
/// time, several times cheaper than `Instant::now()`, cheap enough to stamp
/// every push with, precise enough (one kernel tick, 1 to 10 ms) for
/// liveness deadlines of hundreds of milliseconds. Heartbeats use it too.
#[inline]
pub fn coarse_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable timespec for the whole call;
    // clock_gettime only writes it. CLOCK_MONOTONIC_COARSE exists on every
    // Linux since 2.6.32.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// A kernel clock that timestamps arrive on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelClock {
    /// CLOCK_MONOTONIC: GStreamer's system clock, V4L2 buffers.
    Monotonic,
    /// CLOCK_REALTIME: socket receive timestamps (`SO_TIMESTAMPNS`,
    /// `SO_TIMESTAMPING` software stamps).
    Realtime,
}

impl KernelClock {
    fn id(self) -> libc::clockid_t {
        match self {
            KernelClock::Monotonic => libc::CLOCK_MONOTONIC,
            KernelClock::Realtime => libc::CLOCK_REALTIME,
        }
    }

    /// Now on this clock, in ns (0 if the clock cannot be read).
    #[inline]
    pub fn now_ns(self) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a live, writable timespec for the whole call;
        // clock_gettime only writes it.
        let rc = unsafe { libc::clock_gettime(self.id(), &mut ts) };
        if rc != 0 {
            return 0;
        }
        (ts.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec as u64)
    }
}

/// The offset from a kernel clock to the recording clock, sampled: a
/// source that gets its stamps from the kernel (a camera driver's
/// CLOCK_MONOTONIC, a socket's CLOCK_REALTIME) carries them to the
/// recording clock (realtime, TAI or a PHC) with an offset taken close to
/// when it reads them, so steps and slews of the recording clock are
/// followed within one sample.
///
/// How far off it can be: the recording clock is read between two reads
/// of the kernel clock, so the offset's error is at most half that bracket
/// ([`ClockMap::error_ns`], typically under a microsecond), plus whatever
/// the two clocks drift apart between the stamp and the sample. When the
/// recording clock is CLOCK_REALTIME and the stamps are too, the map is
/// exact (offset 0).
#[derive(Debug, Clone, Copy, Default)]
pub struct ClockMap {
    offset_ns: i128,
    error_ns: u64,
}

impl ClockMap {
    /// Samples the offset from `base` to the clock `recording_now` reads.
    /// `recording_is_realtime` ([`RecordingClock::is_realtime`]) with a
    /// realtime base gives the exact identity.
    pub fn sample(
        base: KernelClock,
        recording_is_realtime: bool,
        recording_now: impl FnOnce() -> u64,
    ) -> Self {
        if base == KernelClock::Realtime && recording_is_realtime {
            return ClockMap::default();
        }
        let m1 = base.now_ns();
        let r = recording_now();
        let m2 = base.now_ns();
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

    /// The recording-clock time of an instant on the base clock.
    #[inline]
    pub fn to_recording(&self, base_ns: u64) -> u64 {
        (i128::from(base_ns) + self.offset_ns).clamp(0, i128::from(u64::MAX)) as u64
    }

    /// At most this far off, from the sampling alone.
    pub fn error_ns(&self) -> u64 {
        self.error_ns
    }
}

/// Keeps one channel's timestamps strictly increasing, across restarts: a
/// stamp not after the last one becomes the last plus 1 ns (and is
/// counted, since it means the clock behind it went back or two stamps
/// were equal).
#[derive(Debug, Clone, Copy, Default)]
pub struct Monotone {
    last: u64,
    /// Stamps that had to be moved forward.
    pub corrected: u64,
}

impl Monotone {
    /// The stamp to record for `t`.
    #[inline]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_carries_a_kernel_clock_to_the_recording_clock() {
        let base = KernelClock::Monotonic;
        let m = ClockMap::sample(base, false, || 5_000_000_000_000 + base.now_ns());
        let now = base.now_ns();
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
    fn realtime_stamps_on_a_realtime_clock_are_exact() {
        let m = ClockMap::sample(KernelClock::Realtime, true, || unreachable!());
        assert_eq!(
            m.to_recording(1_700_000_000_123_456_789),
            1_700_000_000_123_456_789
        );
        assert_eq!(m.error_ns(), 0);
        assert!(SystemClock.is_realtime());
        // Not the realtime clock (TAI, a PHC): sampled.
        let tai = 37_000_000_000u64;
        let m = ClockMap::sample(KernelClock::Realtime, false, || {
            KernelClock::Realtime.now_ns() + tai
        });
        let now = KernelClock::Realtime.now_ns();
        assert!(m.to_recording(now).abs_diff(now + tai) <= m.error_ns() + 1_000_000);
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
}
