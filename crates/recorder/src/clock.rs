//! The recording clock as the pipeline sees it.
//!
//! The PTP-disciplined clock and its quality live in `edgerec-clock`; the
//! pipeline needs only "now" in ns since the Unix epoch.

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

/// The configured clock (realtime, TAI or a PTP hardware clock) from
/// `edgerec-clock`.
impl RecordingClock for edgerec_clock::Clock {
    #[inline]
    fn now_ns(&self) -> u64 {
        edgerec_clock::Clock::now_ns(self)
    }
}
