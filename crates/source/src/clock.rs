//! The recording clock as sources see it.
//!
//! The PTP-disciplined clock and its quality live in `edgerec-clock`; a
//! source needs only "now" in ns since the Unix epoch, and the binary
//! hands it the configured clock behind this trait.

/// A source of log times.
pub trait RecordingClock: Send + Sync + 'static {
    /// Now, in ns since the Unix epoch.
    fn now_ns(&self) -> u64;
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
