//! PTP hardware clocks (`/dev/ptpN`): opening one by path or by network
//! interface, reading it, and measuring its offset to the system clock
//! (CLOCK_REALTIME) with the best method the driver offers:
//! `PTP_SYS_OFFSET_PRECISE` (a hardware cross-timestamp), else
//! `PTP_SYS_OFFSET_EXTENDED` (the driver reads the system clock right before
//! and after the PHC), else plain alternating clock_gettime(2) reads.
//!
//! Sign convention everywhere in this crate: **offset = PHC minus system**.
//! A PHC in the PTP (TAI) timescale that phc2sys copies into CLOCK_REALTIME
//! shows an offset of about +37 s (TAI-UTC) plus the residual phc2sys leaves.
//!
//! The kernel structs below mirror linux/ptp_clock.h; the ioctl numbers use
//! the asm-generic `_IOWR` encoding of x86-64, aarch64, arm and riscv.

use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

use serde::Serialize;

use crate::error::ClockError;
use crate::sys;

/// `struct ptp_clock_time` of linux/ptp_clock.h.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PtpClockTime {
    pub(crate) sec: i64,
    pub(crate) nsec: u32,
    pub(crate) reserved: u32,
}

impl PtpClockTime {
    fn ns(self) -> i64 {
        sys::timespec_ns(self.sec, i64::from(self.nsec))
    }
}

/// `struct ptp_sys_offset_precise` of linux/ptp_clock.h.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct PtpSysOffsetPrecise {
    pub(crate) device: PtpClockTime,
    pub(crate) sys_realtime: PtpClockTime,
    pub(crate) sys_monoraw: PtpClockTime,
    pub(crate) rsv: [u32; 4],
}

/// `PTP_MAX_SAMPLES` of linux/ptp_clock.h.
pub(crate) const PTP_MAX_SAMPLES: usize = 25;

/// `struct ptp_sys_offset_extended` of linux/ptp_clock.h. `clockid` was
/// `rsv[0]` before Linux 6.12; zero means CLOCK_REALTIME on every kernel.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct PtpSysOffsetExtended {
    pub(crate) n_samples: u32,
    pub(crate) clockid: i32,
    pub(crate) rsv: [u32; 2],
    /// Per sample: system time before, PHC time, system time after.
    pub(crate) ts: [[PtpClockTime; 3]; PTP_MAX_SAMPLES],
}

impl Default for PtpSysOffsetExtended {
    fn default() -> Self {
        PtpSysOffsetExtended {
            n_samples: 0,
            clockid: 0,
            rsv: [0; 2],
            ts: [[PtpClockTime::default(); 3]; PTP_MAX_SAMPLES],
        }
    }
}

/// `_IOWR(ty, nr, size)` in the asm-generic encoding: direction read|write
/// (3) in bits 30-31, the argument size in bits 16-29, type and number below.
pub(crate) const fn iowr(ty: u8, nr: u8, size: usize) -> u32 {
    (3 << 30) | (((size as u32) & 0x3fff) << 16) | ((ty as u32) << 8) | nr as u32
}

/// `PTP_CLK_MAGIC` of linux/ptp_clock.h.
const PTP_CLK_MAGIC: u8 = b'=';
/// `PTP_SYS_OFFSET_PRECISE`: `_IOWR('=', 8, struct ptp_sys_offset_precise)`.
pub(crate) const PTP_SYS_OFFSET_PRECISE: u32 =
    iowr(PTP_CLK_MAGIC, 8, std::mem::size_of::<PtpSysOffsetPrecise>());
/// `PTP_SYS_OFFSET_EXTENDED`: `_IOWR('=', 9, struct ptp_sys_offset_extended)`.
pub(crate) const PTP_SYS_OFFSET_EXTENDED: u32 = iowr(
    PTP_CLK_MAGIC,
    9,
    std::mem::size_of::<PtpSysOffsetExtended>(),
);

/// Samples asked of `PTP_SYS_OFFSET_EXTENDED` (phc2sys uses 5 by default;
/// more samples make it likelier that one has a short window).
const EXTENDED_SAMPLES: u32 = 9;
/// Rounds of the plain-reads method.
const READ_ROUNDS: usize = 9;

/// How a PHC-to-system offset was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum OffsetMethod {
    /// `PTP_SYS_OFFSET_PRECISE`: the NIC latched both clocks at one instant
    /// (PCIe PTM or an ART cross-timestamp); the window is zero.
    Precise,
    /// `PTP_SYS_OFFSET_EXTENDED`: the driver read the system clock right
    /// before and after the PHC; the shortest of the windows is the bound.
    Extended,
    /// Alternating clock_gettime(2) of system clock, PHC, system clock; the
    /// shortest of several windows, which include two syscalls.
    Reads,
}

impl OffsetMethod {
    /// The name used in status and logs: the ioctl, or `clock_gettime reads`.
    pub fn name(self) -> &'static str {
        match self {
            OffsetMethod::Precise => "PTP_SYS_OFFSET_PRECISE",
            OffsetMethod::Extended => "PTP_SYS_OFFSET_EXTENDED",
            OffsetMethod::Reads => "clock_gettime reads",
        }
    }

    fn code(self) -> u8 {
        match self {
            OffsetMethod::Precise => 1,
            OffsetMethod::Extended => 2,
            OffsetMethod::Reads => 3,
        }
    }
}

impl fmt::Display for OffsetMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One PHC-to-system offset measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PhcOffset {
    /// PHC minus system clock, in ns, at the middle of the window.
    pub offset_ns: i64,
    /// The width of the system-clock window around the PHC read, in ns: the
    /// uncertainty of `offset_ns` is at most half of it. Zero for
    /// [`OffsetMethod::Precise`].
    pub window_ns: u64,
    /// How it was measured.
    pub method: OffsetMethod,
}

/// An open PTP hardware clock.
#[derive(Debug)]
pub struct PhcDevice {
    file: File,
    path: PathBuf,
    /// The method that worked last ([`OffsetMethod::code`]), 0 before the
    /// first measurement: drivers do not change what they support.
    method: AtomicU8,
}

impl PhcDevice {
    /// Opens a PHC device such as `/dev/ptp0`, read-only: reading the clock
    /// and the offset ioctls need no write access.
    pub fn open(path: &Path) -> Result<PhcDevice, ClockError> {
        let file = File::open(path).map_err(|source| ClockError::PhcOpen {
            path: path.to_path_buf(),
            source,
        })?;
        let dev = PhcDevice {
            file,
            path: path.to_path_buf(),
            method: AtomicU8::new(0),
        };
        // A regular file or another character device opens fine but is no
        // posix clock: one read tells.
        dev.now_ns().map_err(|e| ClockError::PhcOpen {
            path: path.to_path_buf(),
            source: io::Error::new(
                e.kind(),
                format!("not a PTP clock (clock_gettime on it failed: {e})"),
            ),
        })?;
        Ok(dev)
    }

    /// The device path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The dynamic clock id for clock_gettime(2), valid while `self` lives.
    pub fn clockid(&self) -> libc::clockid_t {
        sys::fd_to_clockid(self.file.as_raw_fd())
    }

    /// The PHC's time in ns since its epoch (the Unix epoch when something
    /// set it; PTP runs PHCs in TAI).
    pub fn now_ns(&self) -> io::Result<i64> {
        sys::gettime_ns(self.clockid())
    }

    /// Measures PHC minus CLOCK_REALTIME with the best method the driver
    /// supports, remembering it for the next call.
    pub fn offset(&self) -> Result<PhcOffset, ClockError> {
        let err = |source| ClockError::PhcOffset {
            path: self.path.clone(),
            source,
        };
        let known = self.method.load(Ordering::Relaxed);
        if known <= OffsetMethod::Precise.code() {
            match sys_offset_precise(&self.file) {
                Ok(o) => return self.remember(o),
                Err(e) if unsupported(&e) => {}
                Err(e) => return Err(err(e)),
            }
        }
        if known <= OffsetMethod::Extended.code() {
            match sys_offset_extended(&self.file, EXTENDED_SAMPLES) {
                Ok(o) => return self.remember(o),
                Err(e) if unsupported(&e) => {}
                Err(e) => return Err(err(e)),
            }
        }
        offset_by_reads(self.clockid(), libc::CLOCK_REALTIME, READ_ROUNDS)
            .map_err(err)
            .and_then(|o| self.remember(o))
    }

    fn remember(&self, o: PhcOffset) -> Result<PhcOffset, ClockError> {
        self.method.store(o.method.code(), Ordering::Relaxed);
        Ok(o)
    }
}

/// Errors by which a driver or kernel says it lacks an offset ioctl.
fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EOPNOTSUPP | libc::ENOTTY | libc::ENOSYS | libc::EINVAL)
    )
}

/// `PTP_SYS_OFFSET_PRECISE` on an open PHC.
fn sys_offset_precise(file: &File) -> io::Result<PhcOffset> {
    let mut req = PtpSysOffsetPrecise::default();
    // SAFETY: `req` is a ptp_sys_offset_precise (the layout and size the
    // request number encodes) that outlives the call; the kernel writes only
    // into it.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), PTP_SYS_OFFSET_PRECISE as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(PhcOffset {
        offset_ns: req.device.ns().saturating_sub(req.sys_realtime.ns()),
        window_ns: 0,
        method: OffsetMethod::Precise,
    })
}

/// `PTP_SYS_OFFSET_EXTENDED` with `n_samples` samples on an open PHC.
fn sys_offset_extended(file: &File, n_samples: u32) -> io::Result<PhcOffset> {
    let mut req = PtpSysOffsetExtended {
        n_samples: n_samples.min(PTP_MAX_SAMPLES as u32),
        ..PtpSysOffsetExtended::default()
    };
    // SAFETY: `req` is a ptp_sys_offset_extended (the layout and size the
    // request number encodes) with n_samples <= PTP_MAX_SAMPLES and the
    // reserved fields zero; it outlives the call and the kernel writes only
    // into it.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), PTP_SYS_OFFSET_EXTENDED as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let samples = req
        .ts
        .iter()
        .take(req.n_samples as usize)
        .map(|[before, phc, after]| (before.ns(), phc.ns(), after.ns()));
    best_sample(samples, OffsetMethod::Extended).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "PTP_SYS_OFFSET_EXTENDED returned no sample",
        )
    })
}

/// Measures `clock` minus `system` by `rounds` alternating clock_gettime(2)
/// reads (system, clock, system), keeping the round with the shortest
/// window. This is the fallback for PHCs whose driver has no offset ioctl,
/// and works for any two clocks (e.g. CLOCK_TAI against CLOCK_REALTIME).
pub fn offset_by_reads(
    clock: libc::clockid_t,
    system: libc::clockid_t,
    rounds: usize,
) -> io::Result<PhcOffset> {
    let mut samples = Vec::with_capacity(rounds.max(1));
    for _ in 0..rounds.max(1) {
        let before = sys::gettime_ns(system)?;
        let reading = sys::gettime_ns(clock)?;
        let after = sys::gettime_ns(system)?;
        samples.push((before, reading, after));
    }
    best_sample(samples, OffsetMethod::Reads).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "the system clock went backwards in every round",
        )
    })
}

/// The sample (system before, clock, system after) with the shortest
/// non-negative window, as offset = clock - midpoint of the window. A
/// negative window (the system clock stepped back mid-sample) is skipped.
pub(crate) fn best_sample(
    samples: impl IntoIterator<Item = (i64, i64, i64)>,
    method: OffsetMethod,
) -> Option<PhcOffset> {
    samples
        .into_iter()
        .filter_map(|(before, reading, after)| {
            let window = after.checked_sub(before)?;
            (window >= 0).then(|| PhcOffset {
                offset_ns: reading.saturating_sub(before.saturating_add(window / 2)),
                window_ns: window as u64,
                method,
            })
        })
        .min_by_key(|o| o.window_ns)
}

/// Resolves a [`crate::ClockSource::Phc`] name: a path (anything with a
/// `/`) is taken as the device; anything else is a network interface whose
/// PHC index `SIOCETHTOOL`/`ETHTOOL_GET_TS_INFO` gives, as `/dev/ptp<index>`.
/// Returns the device and the interface, if one was named.
pub fn resolve(name: &str) -> Result<(PathBuf, Option<String>), ClockError> {
    if name.contains('/') {
        return Ok((PathBuf::from(name), None));
    }
    phc_of_interface(name).map(|path| (path, Some(name.to_string())))
}

/// The PHC device of a network interface, like `ethtool -T <iface>`.
pub fn phc_of_interface(iface: &str) -> Result<PathBuf, ClockError> {
    if !sys::valid_ifname(iface) {
        return Err(ClockError::BadInterfaceName {
            iface: iface.to_string(),
        });
    }
    let index = sys::ethtool_phc_index(iface).map_err(|source| ClockError::InterfaceQuery {
        iface: iface.to_string(),
        source,
    })?;
    if index < 0 {
        return Err(ClockError::NoPhc {
            iface: iface.to_string(),
        });
    }
    Ok(PathBuf::from(format!("/dev/ptp{index}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    #[test]
    fn kernel_struct_sizes() {
        assert_eq!(size_of::<PtpClockTime>(), 16);
        assert_eq!(size_of::<PtpSysOffsetPrecise>(), 3 * 16 + 4 * 4);
        assert_eq!(size_of::<PtpSysOffsetExtended>(), 16 + 25 * 3 * 16);
    }

    #[test]
    fn ioctl_numbers_match_linux() {
        // Values of the kernel headers' macros on x86-64 and aarch64.
        assert_eq!(PTP_SYS_OFFSET_PRECISE, 0xC040_3D08);
        assert_eq!(PTP_SYS_OFFSET_EXTENDED, 0xC4C0_3D09);
        // The encoding against another well-known _IOWR: FS_IOC_FIEMAP =
        // _IOWR('f', 11, struct fiemap) with sizeof(struct fiemap) = 32.
        assert_eq!(iowr(b'f', 11, 32), 0xC020_660B);
    }

    #[test]
    fn best_sample_takes_the_shortest_window() {
        let samples = [
            (1_000, 1_600, 1_400),   // window 400, mid 1200, offset 400
            (2_000, 2_540, 2_100),   // window 100, mid 2050, offset 490
            (3_000, 3_000, 2_900),   // negative window: skipped
            (4_000, 100_000, 4_300), // window 300
        ];
        let best = best_sample(samples, OffsetMethod::Extended).unwrap();
        assert_eq!(best.window_ns, 100);
        assert_eq!(best.offset_ns, 490);
        assert_eq!(best.method, OffsetMethod::Extended);
        assert!(best_sample([(5, 0, 4)], OffsetMethod::Reads).is_none());
    }

    #[test]
    fn reads_between_realtime_and_itself_give_zero() {
        let o = offset_by_reads(libc::CLOCK_REALTIME, libc::CLOCK_REALTIME, 9).unwrap();
        // The clock read sits inside the window, so |offset| <= window / 2.
        assert!(o.offset_ns.unsigned_abs() <= o.window_ns / 2 + 1, "{o:?}");
        assert!(o.window_ns < 10_000_000, "{o:?}");
        assert_eq!(o.method, OffsetMethod::Reads);
    }

    #[test]
    fn reads_between_tai_and_realtime_give_the_kernel_tai_offset() {
        let tai = sys::kernel_tai_offset().unwrap();
        let o = offset_by_reads(libc::CLOCK_TAI, libc::CLOCK_REALTIME, 9).unwrap();
        let error = o.offset_ns - i64::from(tai) * 1_000_000_000;
        println!(
            "CLOCK_TAI - CLOCK_REALTIME = {} ns (window {} ns), kernel TAI offset {tai} s",
            o.offset_ns, o.window_ns
        );
        assert!(
            error.unsigned_abs() <= o.window_ns / 2 + 1,
            "{o:?}, tai {tai}"
        );
    }

    #[test]
    fn reads_see_monotonic_behind_realtime() {
        // CLOCK_MONOTONIC counts from boot, so MONOTONIC - REALTIME is about
        // minus the boot time: negative, and stable between two measurements.
        let a = offset_by_reads(libc::CLOCK_MONOTONIC, libc::CLOCK_REALTIME, 9).unwrap();
        let b = offset_by_reads(libc::CLOCK_MONOTONIC, libc::CLOCK_REALTIME, 9).unwrap();
        assert!(a.offset_ns < 0);
        let drift = (a.offset_ns - b.offset_ns).unsigned_abs();
        assert!(
            drift <= (a.window_ns + b.window_ns) / 2 + 1_000_000,
            "{a:?} {b:?}"
        );
    }

    #[test]
    fn interfaces_resolve_with_clear_errors() {
        assert_eq!(
            resolve("/dev/ptp7").unwrap(),
            (PathBuf::from("/dev/ptp7"), None)
        );
        match resolve("lo") {
            Err(ClockError::NoPhc { iface }) => {
                assert_eq!(iface, "lo");
                let msg = ClockError::NoPhc { iface }.to_string();
                assert!(
                    msg.contains("network interface lo has no PTP hardware clock"),
                    "{msg}"
                );
            }
            Err(ClockError::InterfaceQuery { source, .. }) => {
                edgerec_testkit::unsupported_skip_reason("the SIOCETHTOOL ioctl", &source).report()
            }
            other => panic!("lo: {other:?}"),
        }
        match resolve("edgerec-none0") {
            Err(ClockError::InterfaceQuery { iface, source }) => {
                assert_eq!(iface, "edgerec-none0");
                if source.raw_os_error() == Some(libc::ENOSYS)
                    && edgerec_testkit::qemu_user().is_some()
                {
                    // QEMU refuses the ioctl before the kernel could say
                    // the interface is missing.
                    edgerec_testkit::unsupported_skip_reason("the SIOCETHTOOL ioctl", &source)
                        .report();
                } else {
                    assert_eq!(source.raw_os_error(), Some(libc::ENODEV));
                }
            }
            other => panic!("missing interface: {other:?}"),
        }
        assert!(matches!(
            resolve("much-too-long-interface"),
            Err(ClockError::BadInterfaceName { .. })
        ));
    }

    #[test]
    fn opening_something_that_is_no_phc_fails_clearly() {
        let err = PhcDevice::open(Path::new("/dev/null")).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("/dev/null") && msg.contains("not a PTP clock"),
            "{msg}"
        );
        let err = PhcDevice::open(Path::new("/dev/ptp-edgerec-missing")).unwrap_err();
        assert!(err.to_string().contains("ls /dev/ptp*"), "{err}");
    }

    /// Runs against a real PHC where the machine has one.
    #[test]
    fn real_phc_offset_where_present() {
        let Some(path) = (0..8)
            .map(|i| PathBuf::from(format!("/dev/ptp{i}")))
            .find(|p| p.exists())
        else {
            edgerec_testkit::skip::skip_allowed(
                edgerec_testkit::skip::Allowed::NoHardware,
                "no /dev/ptp* on this machine",
            );
            return;
        };
        let dev = match PhcDevice::open(&path) {
            Ok(d) => d,
            Err(e) => {
                edgerec_testkit::skip::skip(e);
                return;
            }
        };
        let first = dev.offset().unwrap();
        let second = dev.offset().unwrap();
        println!("{}: {first:?}, then {second:?}", path.display());
        assert_eq!(first.method, second.method);
        if first.method != OffsetMethod::Precise {
            assert!(first.window_ns > 0);
        }
    }
}
