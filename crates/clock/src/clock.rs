//! The recording clock: which clock stamps messages, and reading it.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::ClockError;
use crate::phc::{self, PhcDevice};
use crate::sys;

/// Which clock stamps recorded messages.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum ClockSource {
    /// CLOCK_REALTIME (UTC). On the appliance phc2sys disciplines it to
    /// the PTP hardware clock.
    #[default]
    Realtime,
    /// CLOCK_TAI: CLOCK_REALTIME plus the kernel's TAI-UTC offset, which is
    /// 0 (so TAI equals realtime) until someone sets it.
    Tai,
    /// A PTP hardware clock, by device path (`/dev/ptp0`) or by network
    /// interface (`eth0`, resolved to the interface's PHC).
    Phc(String),
}

impl fmt::Display for ClockSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClockSource::Realtime => f.write_str("realtime"),
            ClockSource::Tai => f.write_str("tai"),
            ClockSource::Phc(name) => write!(f, "phc:{name}"),
        }
    }
}

/// Parses `realtime`, `tai`, `phc:<device or interface>`, or a device path
/// starting with `/dev/` (the forms [`ClockSource`]'s Display writes).
impl FromStr for ClockSource {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        match s.to_ascii_lowercase().as_str() {
            "realtime" => return Ok(ClockSource::Realtime),
            "tai" => return Ok(ClockSource::Tai),
            _ => {}
        }
        if let Some(name) = s.strip_prefix("phc:").filter(|n| !n.is_empty()) {
            return Ok(ClockSource::Phc(name.to_string()));
        }
        if s.starts_with("/dev/") {
            return Ok(ClockSource::Phc(s.to_string()));
        }
        Err(format!(
            "unknown clock {s:?}: expected realtime, tai, phc:<interface> (e.g. phc:eth0) or a \
             PHC device path (e.g. /dev/ptp0)"
        ))
    }
}

/// An open recording clock. `Send + Sync`; [`Clock::now_ns`] is one
/// clock_gettime(2) (a vDSO call for realtime and TAI, a syscall for a PHC).
#[derive(Debug)]
pub struct Clock {
    source: ClockSource,
    clockid: libc::clockid_t,
    /// Keeps the PHC's file descriptor, and so `clockid`, valid.
    phc: Option<PhcDevice>,
    interface: Option<String>,
    /// Set after the first failed read, so that it is logged once.
    read_failed: AtomicBool,
}

impl Clock {
    /// Opens the clock of `source`: resolves a PHC interface to its
    /// device, opens the device, and reads the clock once.
    pub fn open(source: &ClockSource) -> Result<Clock, ClockError> {
        let (clockid, phc, interface) = match source {
            ClockSource::Realtime => (libc::CLOCK_REALTIME, None, None),
            ClockSource::Tai => (libc::CLOCK_TAI, None, None),
            ClockSource::Phc(name) => {
                let (path, interface) = phc::resolve(name)?;
                let dev = PhcDevice::open(&path)?;
                (dev.clockid(), Some(dev), interface)
            }
        };
        let clock = Clock {
            source: source.clone(),
            clockid,
            phc,
            interface,
            read_failed: AtomicBool::new(false),
        };
        clock.try_now_ns()?;
        Ok(clock)
    }

    /// What was asked for.
    pub fn source(&self) -> &ClockSource {
        &self.source
    }

    /// The PHC device, for a PHC source.
    pub fn device(&self) -> Option<&Path> {
        self.phc.as_ref().map(|d| d.path())
    }

    /// The open PHC, for a PHC source.
    pub fn phc(&self) -> Option<&PhcDevice> {
        self.phc.as_ref()
    }

    /// `realtime`, `tai`, or `phc /dev/ptp0 (eth0)`.
    pub fn describe(&self) -> String {
        match (&self.phc, &self.interface) {
            (Some(dev), Some(iface)) => format!("phc {} ({iface})", dev.path().display()),
            (Some(dev), None) => format!("phc {}", dev.path().display()),
            _ => self.source.to_string(),
        }
    }

    /// The kernel's TAI-UTC offset in seconds, for a TAI source (0 means
    /// nobody set it and CLOCK_TAI equals CLOCK_REALTIME).
    pub fn tai_offset_s(&self) -> Option<i32> {
        match self.source {
            ClockSource::Tai => sys::kernel_tai_offset().ok(),
            _ => None,
        }
    }

    /// The time in ns since the Unix epoch (since the PHC's epoch for a
    /// PHC, which PTP runs in TAI). Times before the epoch read as 0.
    pub fn try_now_ns(&self) -> Result<u64, ClockError> {
        sys::gettime_ns(self.clockid)
            .map(|ns| ns.max(0) as u64)
            .map_err(|source| ClockError::ReadClock {
                clock: self.describe(),
                source,
            })
    }

    /// The time in ns since the Unix epoch, for stamping messages. A clock
    /// that cannot be read (a PHC whose NIC went away) is replaced by
    /// CLOCK_REALTIME, logged once; [`crate::ClockMonitor`] reports the
    /// clock unlocked while that lasts.
    pub fn now_ns(&self) -> u64 {
        match self.try_now_ns() {
            Ok(ns) => ns,
            Err(e) => {
                if !self.read_failed.swap(true, Ordering::Relaxed) {
                    tracing::error!("{e}; stamping with CLOCK_REALTIME instead");
                }
                sys::gettime_ns(libc::CLOCK_REALTIME)
                    .map(|ns| ns.max(0) as u64)
                    .unwrap_or(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn clock_is_send_and_sync() {
        assert_send_sync::<Clock>();
    }

    #[test]
    fn realtime_reads_the_unix_epoch() {
        let clock = Clock::open(&ClockSource::Realtime).unwrap();
        let a = clock.now_ns();
        let sys = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        let b = clock.now_ns();
        assert!(
            a <= sys + 1_000_000 && sys <= b + 1_000_000,
            "{a} {sys} {b}"
        );
        assert_eq!(clock.describe(), "realtime");
        assert_eq!(clock.device(), None);
        assert_eq!(clock.tai_offset_s(), None);
    }

    #[test]
    fn tai_is_realtime_plus_the_kernel_offset() {
        let rt = Clock::open(&ClockSource::Realtime).unwrap();
        let tai = Clock::open(&ClockSource::Tai).unwrap();
        let offset = tai.tai_offset_s().unwrap();
        let diff = tai.now_ns() as i64 - rt.now_ns() as i64 - i64::from(offset) * 1_000_000_000;
        assert!(
            diff.abs() < 50_000_000,
            "diff {diff} ns, kernel offset {offset} s"
        );
        println!("kernel TAI offset on this machine: {offset} s");
    }

    #[test]
    fn sources_parse_and_print() {
        for (text, source) in [
            ("realtime", ClockSource::Realtime),
            ("TAI", ClockSource::Tai),
            ("phc:eth0", ClockSource::Phc("eth0".into())),
            ("/dev/ptp1", ClockSource::Phc("/dev/ptp1".into())),
        ] {
            assert_eq!(text.parse::<ClockSource>().unwrap(), source);
        }
        assert_eq!(ClockSource::Phc("eth0".into()).to_string(), "phc:eth0");
        assert!("eth0"
            .parse::<ClockSource>()
            .unwrap_err()
            .contains("phc:<interface>"));
        assert_eq!(ClockSource::default(), ClockSource::Realtime);
    }

    #[test]
    fn phc_sources_fail_with_the_name_in_the_error() {
        let err = Clock::open(&ClockSource::Phc("/dev/ptp-none".into())).unwrap_err();
        assert!(err.to_string().contains("/dev/ptp-none"), "{err}");
        let err = Clock::open(&ClockSource::Phc("edgerec-none0".into())).unwrap_err();
        assert!(err.to_string().contains("edgerec-none0"), "{err}");
    }
}
