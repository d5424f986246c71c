//! The libc calls of the crate outside the PTP ioctls: clock_gettime(2), the
//! kernel's TAI offset from adjtimex(2), and the SIOCETHTOOL query that maps
//! a network interface to its PHC index. Each unsafe block is one call.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `CLOCKFD` from the kernel's posix-timers.h: the low bits of a dynamic
/// (file descriptor) clock id.
const CLOCKFD: u32 = 3;

/// The dynamic clock id of an open posix clock character device such as
/// `/dev/ptp0`: `FD_TO_CLOCKID(fd)` of linux/posix-timers.h.
pub(crate) fn fd_to_clockid(fd: RawFd) -> libc::clockid_t {
    ((!(fd as u32) << 3) | CLOCKFD) as libc::clockid_t
}

/// clock_gettime(2) of `clock`.
pub(crate) fn gettime(clock: libc::clockid_t) -> io::Result<libc::timespec> {
    let mut ts = MaybeUninit::<libc::timespec>::uninit();
    // SAFETY: `ts` is writable memory of the size of a timespec that lives
    // across the call; clock_gettime writes only there.
    let rc = unsafe { libc::clock_gettime(clock, ts.as_mut_ptr()) };
    if rc == 0 {
        // SAFETY: clock_gettime returned 0, so it filled every field of `ts`.
        Ok(unsafe { ts.assume_init() })
    } else {
        Err(io::Error::last_os_error())
    }
}

/// clock_gettime(2) of `clock` in nanoseconds (signed: a PHC nobody set may
/// hold any time).
pub(crate) fn gettime_ns(clock: libc::clockid_t) -> io::Result<i64> {
    gettime(clock).map(|ts| timespec_to_ns(&ts))
}

// time_t and c_long are i64 here but i32 on 32-bit Arm: the conversions
// are only useless on 64-bit targets.
#[allow(clippy::useless_conversion)]
fn timespec_to_ns(ts: &libc::timespec) -> i64 {
    timespec_ns(i64::from(ts.tv_sec), i64::from(ts.tv_nsec))
}

/// Seconds and nanoseconds to nanoseconds, saturating at the i64 range
/// (year 2262) instead of wrapping.
pub(crate) fn timespec_ns(sec: i64, nsec: i64) -> i64 {
    sec.saturating_mul(1_000_000_000).saturating_add(nsec)
}

/// The kernel's TAI-UTC offset in seconds (`struct timex.tai`), which makes
/// CLOCK_TAI = CLOCK_REALTIME + offset. Zero until someone (ptp4l/phc2sys
/// with `-a`/`-w`, chrony's `leapsectz`, ntpd) sets it.
///
/// Read as the difference of the two clocks rounded to whole seconds, not
/// with adjtimex(2): the service's `ProtectClock=yes` forbids adjtimex
/// (systemd's @clock set), even as the read-only query it would be here.
pub(crate) fn kernel_tai_offset() -> io::Result<i32> {
    let real = gettime_ns(libc::CLOCK_REALTIME)?;
    let tai = gettime_ns(libc::CLOCK_TAI)?;
    let diff = tai.saturating_sub(real);
    let secs = diff.saturating_add(500_000_000).div_euclid(1_000_000_000);
    i32::try_from(secs).map_err(|_| {
        io::Error::other(format!(
            "CLOCK_TAI - CLOCK_REALTIME is {diff} ns: not a TAI offset"
        ))
    })
}

/// `ETHTOOL_GET_TS_INFO` from linux/ethtool.h.
const ETHTOOL_GET_TS_INFO: u32 = 0x0000_0041;
/// `SIOCETHTOOL` from linux/sockios.h.
const SIOCETHTOOL: u32 = 0x8946;

/// `struct ethtool_ts_info` of linux/ethtool.h (44 bytes).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct EthtoolTsInfo {
    pub(crate) cmd: u32,
    pub(crate) so_timestamping: u32,
    pub(crate) phc_index: i32,
    pub(crate) tx_types: u32,
    pub(crate) tx_reserved: [u32; 3],
    pub(crate) rx_filters: u32,
    pub(crate) rx_reserved: [u32; 3],
}

/// `struct ifreq` with the `ifr_data` member of its union. The padding
/// makes it at least as large as the kernel's ifreq (40 bytes on LP64,
/// 32 on ILP32), which copies `sizeof(struct ifreq)` from the caller.
#[repr(C)]
pub(crate) struct IfreqData {
    pub(crate) ifr_name: [libc::c_char; libc::IFNAMSIZ],
    pub(crate) ifr_data: *mut libc::c_void,
    pub(crate) pad: [u8; 16],
}

/// Checks a network interface name as the kernel's `dev_valid_name` does.
pub(crate) fn valid_ifname(iface: &str) -> bool {
    !iface.is_empty()
        && iface.len() < libc::IFNAMSIZ
        && iface != "."
        && iface != ".."
        && !iface
            .bytes()
            .any(|b| b == b'/' || b == b':' || b == 0 || b.is_ascii_whitespace())
}

/// The PHC index of a network interface (`ethtool -T`'s "PTP Hardware
/// Clock"), or -1 where it has none. `iface` must pass [`valid_ifname`].
pub(crate) fn ethtool_phc_index(iface: &str) -> io::Result<i32> {
    let socket = ioctl_socket()?;
    let mut info = EthtoolTsInfo {
        cmd: ETHTOOL_GET_TS_INFO,
        ..EthtoolTsInfo::default()
    };
    let mut req = IfreqData {
        ifr_name: [0; libc::IFNAMSIZ],
        ifr_data: (&mut info as *mut EthtoolTsInfo).cast(),
        pad: [0; 16],
    };
    for (dst, src) in req.ifr_name.iter_mut().zip(iface.bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq with a NUL-terminated name (valid_ifname
    // keeps it under IFNAMSIZ bytes) whose ifr_data points at `info`, a
    // writable ethtool_ts_info; both outlive the call. The kernel writes only
    // into `info`.
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), SIOCETHTOOL as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info.phc_index)
}

/// Any socket will do for SIOCETHTOOL; ethtool(8) uses an AF_INET datagram
/// socket, which binds nothing until used.
fn ioctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_clock_id_matches_the_kernel_macro() {
        // FD_TO_CLOCKID(3) = (~3 << 3) | 3 = -29 (as linuxptp computes it).
        assert_eq!(fd_to_clockid(3), -29);
        assert_eq!(fd_to_clockid(0), -5);
        // CLOCKID_TO_FD gives the fd back: ~(id >> 3).
        for fd in [0, 3, 7, 1000, 65535] {
            assert_eq!(!(fd_to_clockid(fd) >> 3), fd);
        }
    }

    #[test]
    fn ethtool_struct_sizes_match_the_kernel() {
        assert_eq!(std::mem::size_of::<EthtoolTsInfo>(), 44);
        assert!(std::mem::size_of::<IfreqData>() >= 32);
        #[cfg(target_pointer_width = "64")]
        assert_eq!(std::mem::size_of::<IfreqData>(), 40);
    }

    #[test]
    fn interface_names_are_checked_like_the_kernel() {
        assert!(valid_ifname("eth0"));
        assert!(valid_ifname("enP5p1s0f0np0"));
        assert!(!valid_ifname(""));
        assert!(!valid_ifname("sixteen-chars-xx"));
        assert!(!valid_ifname("/dev/ptp0"));
        assert!(!valid_ifname("a b"));
        assert!(!valid_ifname(".."));
    }

    #[test]
    fn loopback_has_no_phc() {
        // The kernel answers ETHTOOL_GET_TS_INFO for every device; lo has
        // only software timestamping and phc_index -1.
        match ethtool_phc_index("lo") {
            Ok(index) => assert_eq!(index, -1),
            Err(e) => {
                edgerec_testkit::unsupported_skip_reason("the SIOCETHTOOL ioctl on lo", &e).report()
            }
        }
    }

    /// The kernel's own figure, from adjtimex(2) with modes 0 (a query).
    fn adjtimex_tai() -> i32 {
        // SAFETY: timex is plain integers (and a timeval); all-zero is a
        // valid value, and modes = 0 makes adjtimex a read-only query.
        let mut tx: libc::timex = unsafe { std::mem::zeroed() };
        // SAFETY: `tx` is a valid, writable timex that outlives the call.
        let rc = unsafe { libc::adjtimex(&mut tx) };
        assert!(rc >= 0, "adjtimex: {}", io::Error::last_os_error());
        tx.tai
    }

    #[test]
    fn the_clocks_difference_is_adjtimex_s_tai_offset() {
        assert_eq!(kernel_tai_offset().unwrap(), adjtimex_tai());
    }

    #[test]
    fn realtime_and_tai_differ_by_the_kernel_offset() {
        let tai = adjtimex_tai();
        let rt = gettime_ns(libc::CLOCK_REALTIME).unwrap();
        let t = gettime_ns(libc::CLOCK_TAI).unwrap();
        let diff = t - rt - i64::from(tai) * 1_000_000_000;
        assert!(
            diff.abs() < 50_000_000,
            "TAI - REALTIME - {tai} s = {diff} ns"
        );
    }
}
