//! Receive times: the kernel's stamp of each packet or frame, carried to
//! the recording clock.
//!
//! Both sources ask for `SO_TIMESTAMPING` with software and raw hardware
//! receive stamps (falling back to `SO_TIMESTAMPNS` on a kernel that
//! refuses it). A packet's log time is then, in this order:
//!
//! 1. its **hardware** stamp, when there is one and it lies within
//!    [`HARDWARE_WINDOW_NS`] of the software stamp, which says the
//!    device's clock runs on CLOCK_REALTIME's timescale (a NIC's PHC that
//!    phc2sys keeps on the system clock; a CAN controller that stamps on
//!    it). A hardware clock on another timescale (a PHC on TAI, a free
//!    running counter) fails that test and is not used;
//! 2. its **software** stamp: CLOCK_REALTIME when the driver handed the
//!    packet to the network stack, before any queueing in the socket or
//!    in edgerec;
//! 3. with neither (a kernel that gives none), the recording clock read
//!    right after `recvmmsg` returned, counted as `receive`-stamped.
//!
//! Stamps on CLOCK_REALTIME are carried to the recording clock by a
//! [`ClockMap`] sampled once per batch: exact when the recording clock is
//! realtime (the default), else off by at most the map's error (half a
//! bracket of two clock reads, under a microsecond) plus how far the two
//! clocks move apart within one batch.

use edgerec_source::ClockMap;

use crate::ancillary::Ancillary;
use crate::sys::Socket;

/// Farthest a hardware stamp may be from the software stamp and still be
/// taken as being on CLOCK_REALTIME's timescale: 10 ms, far more than a
/// driver's interrupt and NAPI latency, far less than TAI's 37 s.
pub const HARDWARE_WINDOW_NS: u64 = 10_000_000;

/// What the kernel was asked to stamp with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StampMode {
    /// `SO_TIMESTAMPING`: software and raw hardware receive stamps.
    Timestamping,
    /// `SO_TIMESTAMPNS`: software stamps only.
    Nanoseconds,
    /// The kernel refused both: receive times are read after `recvmmsg`.
    None,
}

impl StampMode {
    /// How the status and logs name it.
    pub fn as_str(&self) -> &'static str {
        match self {
            StampMode::Timestamping => {
                "SO_TIMESTAMPING (software, hardware where the device gives it)"
            }
            StampMode::Nanoseconds => "SO_TIMESTAMPNS (software)",
            StampMode::None => "none (time of recvmmsg)",
        }
    }
}

/// Asks the kernel for receive stamps and for the drop count with every
/// packet (`SO_RXQ_OVFL`); the second value says whether the drop count
/// was granted (user-mode QEMU refuses it: the drops are then read with
/// `SO_MEMINFO` only, where that answers).
pub(crate) fn enable(socket: &Socket) -> (StampMode, bool) {
    let flags = (libc::SOF_TIMESTAMPING_RX_SOFTWARE
        | libc::SOF_TIMESTAMPING_SOFTWARE
        | libc::SOF_TIMESTAMPING_RX_HARDWARE
        | libc::SOF_TIMESTAMPING_RAW_HARDWARE) as libc::c_int;
    let mode = if socket
        .set(libc::SOL_SOCKET, libc::SO_TIMESTAMPING, &flags)
        .is_ok()
    {
        StampMode::Timestamping
    } else if socket
        .set(libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, &1 as &libc::c_int)
        .is_ok()
    {
        StampMode::Nanoseconds
    } else {
        StampMode::None
    };
    let overflow = socket
        .set(libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &1 as &libc::c_int)
        .is_ok();
    (mode, overflow)
}

/// Which stamp a receive time came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StampKind {
    /// The device's hardware stamp.
    Hardware,
    /// The kernel's software stamp.
    Software,
    /// None: the recording clock after `recvmmsg`.
    Receive,
}

/// How many receive times came from each kind of stamp.
#[derive(Debug, Default)]
pub struct StampCounts {
    /// Hardware stamps.
    pub hardware: std::sync::atomic::AtomicU64,
    /// Software stamps.
    pub software: std::sync::atomic::AtomicU64,
    /// No stamp.
    pub receive: std::sync::atomic::AtomicU64,
}

impl StampCounts {
    /// Counts one.
    #[inline]
    pub fn count(&self, kind: StampKind) {
        let c = match kind {
            StampKind::Hardware => &self.hardware,
            StampKind::Software => &self.software,
            StampKind::Receive => &self.receive,
        };
        c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The log time of a packet whose ancillary data is `a`: see the module's
/// docs. `map` carries CLOCK_REALTIME to the recording clock; `received_at`
/// is the recording clock just after the batch was read.
#[inline]
pub fn receive_time(a: &Ancillary, map: &ClockMap, received_at: u64) -> (u64, StampKind) {
    match (a.hardware_ns, a.software_ns) {
        (Some(hw), Some(sw)) if hw.abs_diff(sw) <= HARDWARE_WINDOW_NS => {
            (map.to_recording(hw), StampKind::Hardware)
        }
        (_, Some(sw)) => (map.to_recording(sw), StampKind::Software),
        _ => (received_at, StampKind::Receive),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardware_on_the_realtime_scale_first_then_software_then_receive() {
        let exact = ClockMap::default();
        let sw = 1_700_000_000_500_000_000;
        let a = |hw: Option<u64>, sw: Option<u64>| Ancillary {
            software_ns: sw,
            hardware_ns: hw,
            drops: None,
        };
        assert_eq!(
            receive_time(&a(Some(sw - 30_000), Some(sw)), &exact, 9),
            (sw - 30_000, StampKind::Hardware)
        );
        // A PHC on TAI (37 s ahead) is not CLOCK_REALTIME's scale.
        assert_eq!(
            receive_time(&a(Some(sw + 37_000_000_000), Some(sw)), &exact, 9),
            (sw, StampKind::Software)
        );
        // A free-running counter neither.
        assert_eq!(
            receive_time(&a(Some(123_456), Some(sw)), &exact, 9),
            (sw, StampKind::Software)
        );
        assert_eq!(
            receive_time(&a(None, Some(sw)), &exact, 9),
            (sw, StampKind::Software)
        );
        assert_eq!(
            receive_time(&a(Some(sw), None), &exact, 9),
            (9, StampKind::Receive)
        );
        assert_eq!(
            receive_time(&a(None, None), &exact, 9),
            (9, StampKind::Receive)
        );
        // A recording clock on TAI: the map adds its offset.
        let tai = ClockMap::with_offset(37_000_000_000);
        assert_eq!(
            receive_time(&a(None, Some(sw)), &tai, 9).0,
            sw + 37_000_000_000
        );
    }
}
