//! The hardware watchdog and the supervisor that feeds it: the board resets
//! if the recorder hangs, but only then. The [`Supervisor`] thread pings the
//! device (and systemd's watchdog) only while every stage's [`Heartbeats`]
//! are fresh; when one stalls it stops pinging, names the stage in the log
//! and writes the fault file before the reset comes. The device is behind
//! the [`WatchdogDevice`] trait: [`LinuxWatchdog`] speaks the kernel's
//! `/dev/watchdog` ioctls, [`FakeWatchdog`] records what it is asked for
//! tests.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::fault::{write_fault, FaultRecord};
use crate::heartbeat::{Heartbeats, Stalled};
use crate::notify::Notifier;

/// `WDIOF_SETTIMEOUT`: the driver can change its timeout.
pub const WDIOF_SETTIMEOUT: u32 = 0x0080;
/// `WDIOF_MAGICCLOSE`: writing `'V'` before closing disarms the watchdog.
pub const WDIOF_MAGICCLOSE: u32 = 0x0100;
/// `WDIOF_KEEPALIVEPING`: the driver answers `WDIOC_KEEPALIVE`.
pub const WDIOF_KEEPALIVEPING: u32 = 0x8000;

/// `linux/watchdog.h`'s `struct watchdog_info`, as `WDIOC_GETSUPPORT`
/// fills it.
#[repr(C)]
struct RawWatchdogInfo {
    options: u32,
    firmware_version: u32,
    identity: [u8; 32],
}

const _: () = assert!(std::mem::size_of::<RawWatchdogInfo>() == 40);

/// ioctl numbers as `asm-generic/ioctl.h` builds them: direction in bits
/// 30-31, argument size in 16-29, type in 8-15, number in 0-7. This is the
/// layout of x86, arm, arm64 and riscv; powerpc, mips, sparc and alpha use
/// another, which [`LinuxWatchdog::open`] refuses.
mod ioc {
    const WRITE: u32 = 1;
    const READ: u32 = 2;

    const fn ioc(dir: u32, ty: u8, nr: u8, size: usize) -> u32 {
        (dir << 30) | ((size as u32 & 0x3fff) << 16) | ((ty as u32) << 8) | nr as u32
    }

    /// `_IOR(ty, nr, T)`: the kernel writes a `T` of `size` bytes.
    pub(super) const fn ior(ty: u8, nr: u8, size: usize) -> u32 {
        ioc(READ, ty, nr, size)
    }

    /// `_IOWR(ty, nr, T)`: the kernel reads and writes a `T`.
    pub(super) const fn iowr(ty: u8, nr: u8, size: usize) -> u32 {
        ioc(READ | WRITE, ty, nr, size)
    }

    /// Whether this target uses the generic layout above.
    pub(super) const GENERIC_LAYOUT: bool = !cfg!(any(
        target_arch = "powerpc",
        target_arch = "powerpc64",
        target_arch = "mips",
        target_arch = "mips64",
        target_arch = "sparc",
        target_arch = "sparc64"
    ));
}

const INT: usize = std::mem::size_of::<libc::c_int>();
/// `WDIOC_GETSUPPORT`: fills a `struct watchdog_info`.
const WDIOC_GETSUPPORT: u32 = ioc::ior(b'W', 0, std::mem::size_of::<RawWatchdogInfo>());
/// `WDIOC_KEEPALIVE`: pings the watchdog.
const WDIOC_KEEPALIVE: u32 = ioc::ior(b'W', 5, INT);
/// `WDIOC_SETTIMEOUT`: sets the timeout in seconds, returns what was set.
const WDIOC_SETTIMEOUT: u32 = ioc::iowr(b'W', 6, INT);
/// `WDIOC_GETTIMEOUT`: the timeout in seconds.
const WDIOC_GETTIMEOUT: u32 = ioc::ior(b'W', 7, INT);
/// `WDIOC_GETTIMELEFT`: seconds until the reset.
const WDIOC_GETTIMELEFT: u32 = ioc::ior(b'W', 10, INT);

/// What a watchdog driver says about itself (`WDIOC_GETSUPPORT`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WatchdogInfo {
    /// `WDIOF_*` capability bits.
    pub options: u32,
    /// The driver's firmware version, often 0.
    pub firmware_version: u32,
    /// The driver's name for the device, e.g. `"Software Watchdog"`,
    /// `"Tegra WDT"`, `"i6300ESB timer"`.
    pub identity: String,
    /// Whether [`WatchdogDevice::magic_close`] disarms it: the driver sets
    /// `WDIOF_MAGICCLOSE` and, where the kernel says, `nowayout` is off.
    pub magic_close: bool,
}

/// A watchdog device. Opening one arms it (each implementation's
/// constructor opens); from then on it must be pinged within its timeout or
/// the machine resets. Implementations: [`LinuxWatchdog`], [`FakeWatchdog`].
pub trait WatchdogDevice: Send {
    /// Sets the timeout to `secs` seconds; returns what the driver accepted
    /// (drivers round to what their hardware can count).
    fn set_timeout(&mut self, secs: u32) -> io::Result<u32>;

    /// The current timeout, in seconds.
    fn timeout(&self) -> io::Result<u32>;

    /// Seconds left before the reset, where the driver can tell.
    fn time_left(&self) -> io::Result<u32> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this watchdog cannot tell the time left",
        ))
    }

    /// The driver's capabilities and name.
    fn support(&self) -> io::Result<WatchdogInfo>;

    /// Pings the watchdog: the timeout starts again.
    fn keepalive(&mut self) -> io::Result<()>;

    /// Disarms and closes: writes `'V'`, then closes. Only drivers with
    /// `WDIOF_MAGICCLOSE` (and without `nowayout`) disarm; on the others it
    /// returns [`io::ErrorKind::Unsupported`] after a plain close. If the
    /// write fails the device is closed armed and resets the machine after
    /// its timeout.
    fn magic_close(self: Box<Self>) -> io::Result<()>;

    /// Closes without disarming. Drivers with `WDIOF_MAGICCLOSE` stay armed
    /// (the kernel logs "watchdog did not stop!") and reset the machine
    /// after the timeout unless the device is opened and pinged again.
    fn close(self: Box<Self>);
}

/// Why a watchdog device could not be used.
#[derive(Debug, thiserror::Error)]
pub enum WatchdogError {
    /// `open(2)` failed.
    #[error("watchdog {path}: cannot open: {source}; {hint}", path = .path.display())]
    Open {
        /// The device path.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
        /// What to do about it.
        hint: String,
    },
    /// The path is not a character device (a file, a FIFO, a directory):
    /// never written to.
    #[error("watchdog {path} is {kind}, not a watchdog device; name the board's device node (health.watchdog = \"/dev/watchdog0\"), or \"\" for none", path = .path.display())]
    NotADevice {
        /// The configured path.
        path: PathBuf,
        /// What is there.
        kind: &'static str,
    },
    /// An ioctl or write on the open device failed.
    #[error("watchdog {path}: {op}: {source}", path = .path.display())]
    Device {
        /// The device path.
        path: PathBuf,
        /// The operation, e.g. `"WDIOC_SETTIMEOUT"`.
        op: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// This CPU architecture numbers ioctls differently; not supported.
    #[error("watchdog {path}: this CPU architecture's ioctl numbering is not supported; set health.watchdog = \"\"", path = .path.display())]
    UnsupportedArch {
        /// The device path.
        path: PathBuf,
    },
}

/// A Linux watchdog device node (`/dev/watchdog0`), driven with the ioctls
/// of `linux/watchdog.h`.
#[derive(Debug)]
pub struct LinuxWatchdog {
    file: File,
    path: PathBuf,
    /// Read once at open; the driver's capabilities do not change.
    info: Option<WatchdogInfo>,
}

impl LinuxWatchdog {
    /// Opens `path` for writing, which arms the watchdog: start the
    /// [`Supervisor`] promptly. Errors name the device and what to do
    /// (load the driver, run as root, free the device, or turn the
    /// watchdog off in the configuration).
    pub fn open(path: impl AsRef<Path>) -> Result<LinuxWatchdog, WatchdogError> {
        let path = path.as_ref();
        if !ioc::GENERIC_LAYOUT {
            return Err(WatchdogError::UnsupportedArch {
                path: path.to_path_buf(),
            });
        }
        // Only a character device: the keepalive writes a byte at the
        // start of what it opened, so `watchdog = "/etc/shadow"` in a
        // configuration someone edited must never open a file. Asked
        // before opening (a FIFO would block the open) and of the open
        // file (the path may have changed in between).
        let not_a_device = |meta: &std::fs::Metadata| WatchdogError::NotADevice {
            path: path.to_path_buf(),
            kind: crate::file_kind::describe(&meta.file_type()),
        };
        if let Ok(meta) = std::fs::metadata(path) {
            if !meta.file_type().is_char_device() {
                return Err(not_a_device(&meta));
            }
        }
        // std opens with O_CLOEXEC, so a spawned helper cannot inherit (and
        // keep armed) the device.
        let file = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(|source| WatchdogError::Open {
                path: path.to_path_buf(),
                hint: open_hint(&source),
                source,
            })?;
        match file.metadata() {
            Ok(meta) if meta.file_type().is_char_device() => {}
            Ok(meta) => return Err(not_a_device(&meta)),
            Err(source) => {
                return Err(WatchdogError::Open {
                    path: path.to_path_buf(),
                    hint: open_hint(&source),
                    source,
                })
            }
        }
        let mut watchdog = LinuxWatchdog {
            file,
            path: path.to_path_buf(),
            info: None,
        };
        match watchdog.query_support() {
            Ok(info) => watchdog.info = Some(info),
            Err(err) => tracing::warn!("{err}; assuming no magic close"),
        }
        Ok(watchdog)
    }

    /// The device path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn error(&self, op: &'static str, source: io::Error) -> io::Error {
        let kind = source.kind();
        io::Error::new(
            kind,
            WatchdogError::Device {
                path: self.path.clone(),
                op,
                source,
            },
        )
    }

    /// Runs an ioctl whose argument is one `int`, retrying on `EINTR`; the
    /// error is the bare OS error.
    fn raw_ioctl_int(&self, request: u32, value: libc::c_int) -> io::Result<libc::c_int> {
        let mut arg = value;
        loop {
            // SAFETY: the fd is open for the life of `self.file`; `arg` is a
            // live, writable c_int and every request passed here is declared
            // with an `int` argument in linux/watchdog.h, so the kernel reads
            // and writes at most size_of::<c_int>() bytes through the pointer.
            let rc = unsafe {
                libc::ioctl(
                    self.file.as_raw_fd(),
                    request as libc::Ioctl,
                    &mut arg as *mut libc::c_int,
                )
            };
            if rc >= 0 {
                return Ok(arg);
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }

    /// [`raw_ioctl_int`](Self::raw_ioctl_int), with the device and `op` in
    /// the error.
    fn ioctl_int(
        &self,
        op: &'static str,
        request: u32,
        value: libc::c_int,
    ) -> io::Result<libc::c_int> {
        self.raw_ioctl_int(request, value)
            .map_err(|err| self.error(op, err))
    }

    fn query_support(&self) -> io::Result<WatchdogInfo> {
        let mut raw = RawWatchdogInfo {
            options: 0,
            firmware_version: 0,
            identity: [0; 32],
        };
        loop {
            // SAFETY: the fd is open; `raw` is a live, writable
            // `struct watchdog_info` (#[repr(C)], 40 bytes, checked at
            // compile time), exactly what WDIOC_GETSUPPORT's size encodes.
            let rc = unsafe {
                libc::ioctl(
                    self.file.as_raw_fd(),
                    WDIOC_GETSUPPORT as libc::Ioctl,
                    &mut raw as *mut RawWatchdogInfo,
                )
            };
            if rc >= 0 {
                break;
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(self.error("WDIOC_GETSUPPORT", err));
            }
        }
        let len = raw
            .identity
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(raw.identity.len());
        let identity = String::from_utf8_lossy(&raw.identity[..len]).into_owned();
        let nowayout = nowayout(&self.path);
        if nowayout == Some(true) {
            tracing::info!(
                "watchdog {}: nowayout is set; it cannot be disarmed, only kept pinged",
                self.path.display()
            );
        }
        Ok(WatchdogInfo {
            options: raw.options,
            firmware_version: raw.firmware_version,
            identity,
            magic_close: raw.options & WDIOF_MAGICCLOSE != 0 && nowayout != Some(true),
        })
    }
}

/// The kernel's `nowayout` flag for the device at `dev`, from
/// `/sys/class/watchdog/<name>/nowayout` (kernels since 4.10); `/dev/watchdog`
/// is the legacy alias of `watchdog0`. `None` where sysfs does not say.
fn nowayout(dev: &Path) -> Option<bool> {
    let canonical = std::fs::canonicalize(dev).unwrap_or_else(|_| dev.to_path_buf());
    let name = canonical.file_name()?.to_str()?;
    let name = if name == "watchdog" {
        "watchdog0"
    } else {
        name
    };
    let text = std::fs::read_to_string(format!("/sys/class/watchdog/{name}/nowayout")).ok()?;
    Some(text.trim() == "1")
}

/// What to do when the device cannot be opened.
fn open_hint(err: &io::Error) -> String {
    const OFF: &str = "or set health.watchdog = \"\" to run without a hardware watchdog";
    match err.raw_os_error() {
        Some(libc::ENOENT) => format!(
            "no such device: the watchdog driver is not loaded (on a test machine \
             `modprobe softdog` provides one), {OFF}"
        ),
        Some(libc::ENODEV) | Some(libc::ENXIO) => {
            format!("the device node exists but no driver is bound to it, {OFF}")
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            format!("permission denied: run edgerec as root (its systemd unit does), {OFF}")
        }
        Some(libc::EBUSY) => format!(
            "another process holds it (a second edgerec, watchdog(8), or systemd's \
             RuntimeWatchdogSec=); only one may, {OFF}"
        ),
        _ => OFF.trim_start_matches("or ").to_owned(),
    }
}

impl WatchdogDevice for LinuxWatchdog {
    fn set_timeout(&mut self, secs: u32) -> io::Result<u32> {
        let secs = libc::c_int::try_from(secs).unwrap_or(libc::c_int::MAX);
        let accepted = self.ioctl_int("WDIOC_SETTIMEOUT", WDIOC_SETTIMEOUT, secs)?;
        Ok(u32::try_from(accepted).unwrap_or(0))
    }

    fn timeout(&self) -> io::Result<u32> {
        let secs = self.ioctl_int("WDIOC_GETTIMEOUT", WDIOC_GETTIMEOUT, 0)?;
        Ok(u32::try_from(secs).unwrap_or(0))
    }

    fn time_left(&self) -> io::Result<u32> {
        let secs = self.ioctl_int("WDIOC_GETTIMELEFT", WDIOC_GETTIMELEFT, 0)?;
        Ok(u32::try_from(secs).unwrap_or(0))
    }

    fn support(&self) -> io::Result<WatchdogInfo> {
        match &self.info {
            Some(info) => Ok(info.clone()),
            None => self.query_support(),
        }
    }

    fn keepalive(&mut self) -> io::Result<()> {
        match self.raw_ioctl_int(WDIOC_KEEPALIVE, 0) {
            Ok(_) => Ok(()),
            // Drivers without WDIOF_KEEPALIVEPING refuse the ioctl; any
            // write pings every driver. A NUL byte, never 'V', so the
            // write cannot count as a magic close.
            Err(err)
                if matches!(
                    err.raw_os_error(),
                    Some(libc::EOPNOTSUPP) | Some(libc::ENOTTY) | Some(libc::EINVAL)
                ) =>
            {
                (&self.file)
                    .write_all(b"\0")
                    .map_err(|e| self.error("write (keepalive)", e))
            }
            Err(err) => Err(self.error("WDIOC_KEEPALIVE", err)),
        }
    }

    fn magic_close(self: Box<Self>) -> io::Result<()> {
        let supported = self.info.as_ref().is_some_and(|info| info.magic_close);
        if !supported {
            let path = self.path.display().to_string();
            drop(self);
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("watchdog {path}: no magic close (WDIOF_MAGICCLOSE unset or nowayout); closed armed"),
            ));
        }
        (&self.file)
            .write_all(b"V")
            .map_err(|e| self.error("write (magic close)", e))
        // The file closes here; the kernel stops the timer on release.
    }

    fn close(self: Box<Self>) {}
}

/// One operation a [`FakeWatchdog`] was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FakeOp {
    /// `set_timeout(secs)`, with what was asked.
    SetTimeout(u32),
    /// `keepalive()`, when it came.
    Keepalive(Instant),
    /// `magic_close()` on a fake that supports it.
    MagicClose,
    /// The device was closed (plain close, or a magic close it does not
    /// support).
    Close,
}

/// The shared record of a [`FakeWatchdog`]'s operations; clones share it.
#[derive(Debug, Clone, Default)]
pub struct FakeLog(Arc<Mutex<Vec<FakeOp>>>);

impl FakeLog {
    /// Every operation so far, in order.
    pub fn ops(&self) -> Vec<FakeOp> {
        self.lock().clone()
    }

    /// The instants of every keepalive so far.
    pub fn keepalives(&self) -> Vec<Instant> {
        self.lock()
            .iter()
            .filter_map(|op| match op {
                FakeOp::Keepalive(at) => Some(*at),
                _ => None,
            })
            .collect()
    }

    /// Whether `op` was recorded (for `Keepalive`, any keepalive).
    pub fn contains(&self, op: FakeOp) -> bool {
        self.lock().iter().any(|seen| match (seen, op) {
            (FakeOp::Keepalive(_), FakeOp::Keepalive(_)) => true,
            _ => *seen == op,
        })
    }

    fn push(&self, op: FakeOp) {
        self.lock().push(op);
    }

    fn lock(&self) -> MutexGuard<'_, Vec<FakeOp>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A test double for [`WatchdogDevice`]: arms nothing, records every
/// operation in a [`FakeLog`] and, optionally, appends one line per
/// operation to a file or FIFO (`set-timeout 10`, `keepalive <ns since the
/// fake was made>`, `magic-close`, `close`) so another process can watch.
/// For tests of this crate and of the binary; never use it on a device.
#[derive(Debug)]
pub struct FakeWatchdog {
    log: FakeLog,
    magic_close: bool,
    timeout: u32,
    max_timeout: u32,
    last_keepalive: Instant,
    created: Instant,
    mirror: Option<File>,
}

impl FakeWatchdog {
    /// A fake with a 60 s timeout that supports magic close if
    /// `magic_close`.
    pub fn new(magic_close: bool) -> FakeWatchdog {
        let now = Instant::now();
        FakeWatchdog {
            log: FakeLog::default(),
            magic_close,
            timeout: 60,
            max_timeout: u32::MAX,
            last_keepalive: now,
            created: now,
            mirror: None,
        }
    }

    /// The log this fake writes (clone it before boxing the fake).
    pub fn log(&self) -> FakeLog {
        self.log.clone()
    }

    /// Caps the timeout the fake accepts, like hardware with a short
    /// counter (`set_timeout` then returns the cap).
    pub fn with_max_timeout(mut self, secs: u32) -> FakeWatchdog {
        self.max_timeout = secs.max(1);
        self
    }

    /// Also appends a line per operation to `path` (created if missing).
    /// Opening a FIFO blocks until a reader has it open.
    pub fn mirror_to(mut self, path: impl AsRef<Path>) -> io::Result<FakeWatchdog> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path.as_ref())?;
        self.mirror = Some(file);
        Ok(self)
    }

    fn record(&mut self, op: FakeOp) {
        self.log.push(op);
        if let Some(mirror) = &mut self.mirror {
            let line = match op {
                FakeOp::SetTimeout(secs) => format!("set-timeout {secs}\n"),
                FakeOp::Keepalive(at) => format!(
                    "keepalive {}\n",
                    at.saturating_duration_since(self.created).as_nanos()
                ),
                FakeOp::MagicClose => "magic-close\n".to_owned(),
                FakeOp::Close => "close\n".to_owned(),
            };
            // An observer that went away must not fail the device.
            let _ = mirror.write_all(line.as_bytes());
        }
    }
}

impl WatchdogDevice for FakeWatchdog {
    fn set_timeout(&mut self, secs: u32) -> io::Result<u32> {
        self.record(FakeOp::SetTimeout(secs));
        self.timeout = secs.clamp(1, self.max_timeout);
        Ok(self.timeout)
    }

    fn timeout(&self) -> io::Result<u32> {
        Ok(self.timeout)
    }

    fn time_left(&self) -> io::Result<u32> {
        let elapsed = u32::try_from(self.last_keepalive.elapsed().as_secs()).unwrap_or(u32::MAX);
        Ok(self.timeout.saturating_sub(elapsed))
    }

    fn support(&self) -> io::Result<WatchdogInfo> {
        let mut options = WDIOF_SETTIMEOUT | WDIOF_KEEPALIVEPING;
        if self.magic_close {
            options |= WDIOF_MAGICCLOSE;
        }
        Ok(WatchdogInfo {
            options,
            firmware_version: 0,
            identity: "edgerec fake watchdog".to_owned(),
            magic_close: self.magic_close,
        })
    }

    fn keepalive(&mut self) -> io::Result<()> {
        let now = Instant::now();
        self.last_keepalive = now;
        self.record(FakeOp::Keepalive(now));
        Ok(())
    }

    fn magic_close(mut self: Box<Self>) -> io::Result<()> {
        if self.magic_close {
            self.record(FakeOp::MagicClose);
            Ok(())
        } else {
            self.record(FakeOp::Close);
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "fake watchdog without magic close: closed armed",
            ))
        }
    }

    fn close(mut self: Box<Self>) {
        self.record(FakeOp::Close);
    }
}

/// How the [`Supervisor`] runs.
pub struct SupervisorOptions {
    /// The hardware watchdog, already open (armed); `None` = none.
    pub device: Option<Box<dyn WatchdogDevice>>,
    /// The hardware timeout to set, rounded up to whole seconds (at least
    /// 1). Default 10 s.
    pub timeout: Duration,
    /// How often heartbeats are checked and the device pinged. `None`: a
    /// quarter of the timeout the driver accepted (or of systemd's
    /// interval without a device; 1 s with neither). A quarter keeps the
    /// worst case (the stall noticed one period after the deadline, the
    /// last ping one period before it) at half the timeout, which leaves
    /// time to write the fault file before the reset.
    pub ping_period: Option<Duration>,
    /// Where the fault record goes when a stage stalls; `None` = nowhere.
    pub fault_file: Option<PathBuf>,
    /// systemd's notification socket; with a watchdog interval set on it,
    /// `WATCHDOG=1` goes out every half interval under the same rule as
    /// the hardware pings.
    pub notifier: Option<Notifier>,
}

impl Default for SupervisorOptions {
    fn default() -> Self {
        SupervisorOptions {
            device: None,
            timeout: Duration::from_secs(10),
            ping_period: None,
            fault_file: None,
            notifier: None,
        }
    }
}

impl fmt::Debug for SupervisorOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SupervisorOptions")
            .field("device", &self.device.as_ref().map(|_| "..."))
            .field("timeout", &self.timeout)
            .field("ping_period", &self.ping_period)
            .field("fault_file", &self.fault_file)
            .field("notifier", &self.notifier)
            .finish()
    }
}

/// The supervisor's state for the status snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WatchdogStatus {
    /// The driver's identity; `None` without a hardware watchdog.
    pub device: Option<String>,
    /// The timeout the driver accepted, in seconds.
    pub timeout_s: Option<u32>,
    /// Whether a clean stop can disarm the device.
    pub magic_close: bool,
    /// How often heartbeats are checked and the device pinged, in ms.
    pub ping_period_ms: u64,
    /// Keepalives sent to the device so far.
    pub pings: u64,
    /// Time since the last keepalive, in ms; `None` before the first.
    pub last_ping_age_ms: Option<u64>,
    /// Keepalives the device refused.
    pub keepalive_errors: u64,
    /// systemd's watchdog interval, in ms; `None` when it is not watching.
    pub systemd_interval_ms: Option<u64>,
    /// `WATCHDOG=1` messages sent so far.
    pub systemd_pings: u64,
    /// The stalled stages, longest silent first; empty while all are fresh
    /// (and the watchdogs are fed).
    pub stalled: Vec<Stalled>,
    /// Whether the hardware device has been disarmed by a clean stop.
    pub disarmed: bool,
}

/// What [`Supervisor::stop`] did with the hardware watchdog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Magic close written: the watchdog is off.
    Disarmed,
    /// There was no hardware watchdog.
    NoDevice,
    /// The device cannot be disarmed (no magic close, or `nowayout`): the
    /// supervisor thread keeps pinging it, under the heartbeat rule, until
    /// the process exits.
    PingingUntilExit,
}

struct Shared {
    /// Pending requests to the worker.
    requests: Mutex<Requests>,
    wake: Condvar,
    status: Mutex<StatusInner>,
}

#[derive(Default)]
struct Requests {
    /// Disarm, with where to send the result.
    disarm: Option<mpsc::SyncSender<io::Result<()>>>,
    /// Check the heartbeats now, and say when done.
    check: Vec<mpsc::SyncSender<()>>,
}

/// Why the worker woke.
enum Wake {
    /// Its next tick is due.
    Due,
    /// [`Supervisor::stop`].
    Disarm(mpsc::SyncSender<io::Result<()>>),
    /// [`Supervisor::check_now`].
    Check(Vec<mpsc::SyncSender<()>>),
}

struct StatusInner {
    device: Option<String>,
    timeout_s: Option<u32>,
    magic_close: bool,
    ping_period: Duration,
    pings: u64,
    last_ping: Option<Instant>,
    keepalive_errors: u64,
    systemd_interval: Option<Duration>,
    systemd_pings: u64,
    stalled: Vec<Stalled>,
    disarmed: bool,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here leaves its data whole, so a panic in
    // another thread must not also stop the watchdog logic.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Feeds the hardware and systemd watchdogs from a thread named
/// `edgerec-watchdog`, for as long as every registered heartbeat is fresh.
///
/// Dropping a `Supervisor` without [`stop`](Supervisor::stop) leaves the
/// thread running until the process exits, still under the heartbeat rule:
/// the safe default when a shutdown path forgets it.
pub struct Supervisor {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    has_device: bool,
    magic_close: bool,
    systemd: bool,
}

impl fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Supervisor")
            .field("status", &self.status())
            .finish()
    }
}

impl Supervisor {
    /// Sets the device's timeout (logging what the driver accepted) and
    /// starts the supervising thread, which pings at once. Fails only if the thread
    /// cannot be started; the device, if any, is then closed armed.
    pub fn start(opts: SupervisorOptions, heartbeats: Heartbeats) -> io::Result<Supervisor> {
        let SupervisorOptions {
            mut device,
            timeout,
            ping_period,
            fault_file,
            notifier,
        } = opts;
        let mut identity = None;
        let mut magic_close = false;
        let mut accepted = None;
        if let Some(device) = device.as_mut() {
            match device.support() {
                Ok(info) => {
                    magic_close = info.magic_close;
                    identity = Some(info.identity);
                }
                Err(err) => {
                    tracing::warn!("{err}");
                    identity = Some("unknown watchdog".to_owned());
                }
            }
            accepted = Some(set_timeout(device.as_mut(), timeout));
        }
        let systemd_interval = notifier.as_ref().and_then(Notifier::watchdog_interval);
        let period = ping_period_for(ping_period, accepted, systemd_interval);
        if let (Some(name), Some(secs)) = (&identity, accepted) {
            tracing::info!(
                "watchdog `{name}` armed: timeout {secs} s, pinged every {} ms while all stages beat{}",
                period.as_millis(),
                if magic_close { "" } else { "; it cannot be disarmed (no magic close)" }
            );
        }
        let reset_note = match (&identity, accepted, systemd_interval) {
            (Some(_), Some(secs), _) => {
                format!("the hardware watchdog resets the board within {secs} s")
            }
            (None, _, Some(interval)) => {
                format!(
                    "systemd stops the service within {} ms",
                    interval.as_millis()
                )
            }
            _ => "no watchdog is armed; the stage stays stuck".to_owned(),
        };
        let shared = Arc::new(Shared {
            requests: Mutex::new(Requests::default()),
            wake: Condvar::new(),
            status: Mutex::new(StatusInner {
                device: identity,
                timeout_s: accepted,
                magic_close,
                ping_period: period,
                pings: 0,
                last_ping: None,
                keepalive_errors: 0,
                systemd_interval,
                systemd_pings: 0,
                stalled: Vec::new(),
                disarmed: false,
            }),
        });
        let has_device = device.is_some();
        let worker = Worker {
            device,
            notifier,
            heartbeats,
            shared: Arc::clone(&shared),
            period,
            systemd_every: systemd_interval.map(|i| i / 2),
            fault_file,
            reset_note,
            keepalive_failing: false,
            notify_failing: false,
        };
        let thread = std::thread::Builder::new()
            .name("edgerec-watchdog".to_owned())
            .spawn(move || worker.run())?;
        Ok(Supervisor {
            shared,
            thread: Some(thread),
            has_device,
            magic_close,
            systemd: systemd_interval.is_some(),
        })
    }

    /// The supervisor's state now.
    pub fn status(&self) -> WatchdogStatus {
        let s = lock(&self.shared.status);
        WatchdogStatus {
            device: s.device.clone(),
            timeout_s: s.timeout_s,
            magic_close: s.magic_close,
            ping_period_ms: millis(s.ping_period),
            pings: s.pings,
            last_ping_age_ms: s.last_ping.map(|at| millis(at.elapsed())),
            keepalive_errors: s.keepalive_errors,
            systemd_interval_ms: s.systemd_interval.map(millis),
            systemd_pings: s.systemd_pings,
            stalled: s.stalled.clone(),
            disarmed: s.disarmed,
        }
    }

    /// Checks the heartbeats now instead of at the next period, and
    /// returns once done: a stage found stalled or dead has its fault
    /// written (and the pings stopped) before this returns. The binary
    /// calls it when the recorder reports a dead stage, before it stops,
    /// so the fault file names the stage even when the process ends
    /// sooner than the next period. Waits at most a second.
    pub fn check_now(&self) {
        let (reply, done) = mpsc::sync_channel(1);
        lock(&self.shared.requests).check.push(reply);
        self.shared.wake.notify_all();
        let _ = done.recv_timeout(Duration::from_secs(1));
    }

    /// Clean shutdown, after the recording is finished.
    ///
    /// A device with magic close is disarmed (`'V'`, then close) and
    /// [`Stopped::Disarmed`] returned; an error means the write failed and
    /// the device was closed armed, so the board resets after its timeout.
    ///
    /// A device without magic close (or with `nowayout`) cannot be turned
    /// off, and closing it would leave it counting down while the process
    /// may still be finishing. So it is not closed: the thread goes on
    /// pinging it, still only while the remaining stages beat, until the
    /// process exits; the kernel then closes it (drivers without
    /// `WDIOF_MAGICCLOSE` stop on that close; with `nowayout` the board
    /// resets after the timeout unless the next start opens it first, which
    /// is what `nowayout` asks for). [`Stopped::PingingUntilExit`] says so.
    ///
    /// systemd keeps enforcing `WatchdogSec=` while a service stops, so
    /// with a notifier `WATCHDOG=1` also goes on, under the same rule,
    /// until the process exits.
    pub fn stop(mut self) -> io::Result<Stopped> {
        if self.has_device && !self.magic_close {
            tracing::info!(
                "the watchdog cannot be disarmed (no magic close); it is pinged until the process exits"
            );
            return Ok(Stopped::PingingUntilExit);
        }
        let (reply, result) = mpsc::sync_channel(1);
        lock(&self.shared.requests).disarm = Some(reply);
        self.shared.wake.notify_all();
        result.recv().map_err(|_| {
            io::Error::other("the watchdog thread ended before it could be stopped")
        })??;
        if !self.systemd {
            // The thread ends after replying; nothing is left to feed.
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
        Ok(if self.has_device {
            Stopped::Disarmed
        } else {
            Stopped::NoDevice
        })
    }
}

/// Sets the timeout and returns the seconds in force.
fn set_timeout(device: &mut dyn WatchdogDevice, timeout: Duration) -> u32 {
    let wanted = timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0);
    let wanted = u32::try_from(wanted.max(1)).unwrap_or(u32::MAX);
    match device.set_timeout(wanted) {
        Ok(accepted) if accepted > 0 => {
            if accepted != wanted {
                tracing::warn!(
                    "the watchdog driver accepted a timeout of {accepted} s, not {wanted} s"
                );
            }
            accepted
        }
        Ok(_) | Err(_) => {
            let current = device.timeout().ok().filter(|&secs| secs > 0);
            tracing::warn!(
                "the watchdog's timeout cannot be set to {wanted} s; it stays at {}",
                current.map_or_else(|| "an unknown value".to_owned(), |s| format!("{s} s"))
            );
            current.unwrap_or(wanted)
        }
    }
}

/// The check-and-ping period (see [`SupervisorOptions::ping_period`]).
fn ping_period_for(
    asked: Option<Duration>,
    hardware_secs: Option<u32>,
    systemd: Option<Duration>,
) -> Duration {
    let hardware = hardware_secs.map(|s| Duration::from_secs(u64::from(s)));
    let quarter = hardware
        .or(systemd)
        .map_or(Duration::from_secs(1), |t| t / 4);
    match asked.filter(|p| !p.is_zero()) {
        None => quarter,
        Some(asked) => {
            let shortest = [hardware, systemd].into_iter().flatten().min();
            match shortest {
                Some(limit) if asked.saturating_mul(2) >= limit => {
                    tracing::warn!(
                        "a ping period of {} ms is too long for a watchdog of {} ms \
                         (the fault would not be written before the reset); using {} ms",
                        asked.as_millis(),
                        limit.as_millis(),
                        (limit / 4).as_millis()
                    );
                    limit / 4
                }
                _ => asked,
            }
        }
    }
}

struct Worker {
    device: Option<Box<dyn WatchdogDevice>>,
    notifier: Option<Notifier>,
    heartbeats: Heartbeats,
    shared: Arc<Shared>,
    period: Duration,
    systemd_every: Option<Duration>,
    fault_file: Option<PathBuf>,
    /// What happens now that pings stopped, for the log and fault file.
    reset_note: String,
    keepalive_failing: bool,
    notify_failing: bool,
}

impl Worker {
    fn run(mut self) {
        let start = Instant::now();
        let mut next_tick = start;
        let mut next_notify = start;
        let mut stall_episode = false;
        loop {
            let due = match self.systemd_every {
                Some(_) if self.notifier.is_some() => next_tick.min(next_notify),
                _ => next_tick,
            };
            let reply = match self.wait_until(due) {
                Wake::Due => None,
                Wake::Disarm(reply) => Some(reply),
                Wake::Check(replies) => {
                    let stalled = self.heartbeats.check(Instant::now());
                    if !stalled.is_empty() && !stall_episode {
                        self.on_stall(&stalled);
                        stall_episode = true;
                    }
                    lock(&self.shared.status).stalled = stalled;
                    for r in replies {
                        let _ = r.send(());
                    }
                    continue;
                }
            };
            if let Some(reply) = reply {
                let had_device = self.device.is_some();
                let result = match self.device.take() {
                    Some(device) => device.magic_close(),
                    None => Ok(()),
                };
                if had_device && result.is_ok() {
                    lock(&self.shared.status).disarmed = true;
                }
                let _ = reply.send(result);
                if self.systemd_every.is_none() || self.notifier.is_none() {
                    return;
                }
                continue;
            }
            let now = Instant::now();
            let stalled = self.heartbeats.check(now);
            let healthy = stalled.is_empty();
            if healthy && stall_episode {
                tracing::info!("every stage beats again; the watchdogs are fed again");
                stall_episode = false;
            } else if !healthy && !stall_episode {
                self.on_stall(&stalled);
                stall_episode = true;
            }
            let mut pinged = None;
            let mut notified = false;
            if now >= next_tick {
                if healthy {
                    pinged = self.ping_device();
                }
                // Scheduled from this wake, not from the last due time: a
                // late wake must not be followed by a burst of pings.
                next_tick = now + self.period;
            }
            if let Some(every) = self.systemd_every {
                if now >= next_notify {
                    if healthy {
                        notified = self.ping_systemd();
                    }
                    next_notify = now + every;
                }
            }
            let mut status = lock(&self.shared.status);
            match pinged {
                Some(true) => {
                    status.pings += 1;
                    status.last_ping = Some(now);
                }
                Some(false) => status.keepalive_errors += 1,
                None => {}
            }
            if notified {
                status.systemd_pings += 1;
            }
            status.stalled = stalled;
        }
    }

    /// Sleeps until `due`; returns early with a request.
    fn wait_until(&self, due: Instant) -> Wake {
        let mut request = lock(&self.shared.requests);
        loop {
            if let Some(reply) = request.disarm.take() {
                return Wake::Disarm(reply);
            }
            if !request.check.is_empty() {
                return Wake::Check(std::mem::take(&mut request.check));
            }
            let now = Instant::now();
            if now >= due {
                return Wake::Due;
            }
            request = match self.shared.wake.wait_timeout(request, due - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Pings the device: `None` without one, else whether it worked.
    fn ping_device(&mut self) -> Option<bool> {
        let device = self.device.as_mut()?;
        Some(match device.keepalive() {
            Ok(()) => {
                if self.keepalive_failing {
                    tracing::info!("watchdog keepalives work again");
                    self.keepalive_failing = false;
                }
                true
            }
            Err(err) => {
                if !self.keepalive_failing {
                    tracing::error!("watchdog keepalive failed: {err}");
                    self.keepalive_failing = true;
                }
                false
            }
        })
    }

    fn ping_systemd(&mut self) -> bool {
        let Some(notifier) = &self.notifier else {
            return false;
        };
        match notifier.watchdog() {
            Ok(()) => {
                self.notify_failing = false;
                true
            }
            Err(err) => {
                if !self.notify_failing {
                    tracing::warn!("systemd watchdog ping failed: {err}");
                    self.notify_failing = true;
                }
                false
            }
        }
    }

    /// The first check of a stall episode: say which stage, write the fault
    /// file, tell systemd. Pings have already stopped by then (this check
    /// found the stall), so this runs before the reset.
    fn on_stall(&self, stalled: &[Stalled]) {
        let Some(first) = stalled.first() else {
            return;
        };
        let others: Vec<&str> = stalled[1..].iter().map(|s| s.name.as_str()).collect();
        let also = if others.is_empty() {
            String::new()
        } else {
            format!("; also stalled: {}", others.join(", "))
        };
        let message = format!("{first}{also}; watchdog pings stopped: {}", self.reset_note);
        tracing::error!(stage = %first.name, "{message}");
        if let Some(path) = &self.fault_file {
            let record = FaultRecord::from_stalled(first, message.clone());
            // write_fault logs its own failure; nothing else can be done.
            if write_fault(path, &record).is_ok() {
                tracing::info!("fault written to {}", path.display());
            }
        }
        if let Some(notifier) = &self.notifier {
            let _ = notifier.status(&format!("stalled: {message}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_the_kernel_header() {
        assert_eq!(WDIOC_GETSUPPORT, 0x8028_5700);
        assert_eq!(WDIOC_KEEPALIVE, 0x8004_5705);
        assert_eq!(WDIOC_SETTIMEOUT, 0xC004_5706);
        assert_eq!(WDIOC_GETTIMEOUT, 0x8004_5707);
        assert_eq!(WDIOC_GETTIMELEFT, 0x8004_570A);
    }

    #[test]
    fn what_is_not_a_device_is_refused_and_never_written() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("shadow");
        std::fs::write(&file, b"root:x:0:0\n").unwrap();
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path for the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for (path, kind) in [
            (&file, "a regular file"),
            (&fifo, "a FIFO"),
            (&d.path().to_path_buf(), "a directory"),
        ] {
            let err = LinuxWatchdog::open(path).unwrap_err();
            assert!(matches!(err, WatchdogError::NotADevice { .. }), "{err}");
            let text = err.to_string();
            assert!(
                text.contains(kind) && text.contains("/dev/watchdog0"),
                "{text}"
            );
        }
        assert_eq!(std::fs::read(&file).unwrap(), b"root:x:0:0\n");
    }

    #[test]
    fn open_errors_name_the_device_and_the_fix() {
        let err = LinuxWatchdog::open("/nonexistent/watchdog9").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("/nonexistent/watchdog9"), "{text}");
        assert!(text.contains("modprobe softdog"), "{text}");
        assert!(text.contains("health.watchdog = \"\""), "{text}");
        let busy = open_hint(&io::Error::from_raw_os_error(libc::EBUSY));
        assert!(busy.contains("another process"), "{busy}");
        let denied = open_hint(&io::Error::from_raw_os_error(libc::EACCES));
        assert!(denied.contains("root"), "{denied}");
    }

    #[test]
    fn default_ping_period_is_a_quarter() {
        assert_eq!(
            ping_period_for(None, Some(10), None),
            Duration::from_millis(2500)
        );
        assert_eq!(
            ping_period_for(None, None, Some(Duration::from_secs(2))),
            Duration::from_millis(500)
        );
        assert_eq!(ping_period_for(None, None, None), Duration::from_secs(1));
        assert_eq!(
            ping_period_for(Some(Duration::from_millis(100)), Some(1), None),
            Duration::from_millis(100)
        );
        // Too long for the timeout: a quarter instead.
        assert_eq!(
            ping_period_for(Some(Duration::from_secs(6)), Some(10), None),
            Duration::from_millis(2500)
        );
    }

    #[test]
    fn fake_accepts_up_to_its_cap_and_mirrors_lines() {
        let dir = tempfile::tempdir().unwrap();
        let mirror = dir.path().join("ops");
        let fake = FakeWatchdog::new(true)
            .with_max_timeout(30)
            .mirror_to(&mirror)
            .unwrap();
        let log = fake.log();
        let mut device: Box<dyn WatchdogDevice> = Box::new(fake);
        assert_eq!(
            set_timeout(device.as_mut(), Duration::from_millis(60_500)),
            30
        );
        device.keepalive().unwrap();
        assert!(device.time_left().unwrap() <= 30);
        device.magic_close().unwrap();
        let ops = log.ops();
        assert_eq!(ops[0], FakeOp::SetTimeout(61));
        assert!(matches!(ops[1], FakeOp::Keepalive(_)));
        assert_eq!(ops[2], FakeOp::MagicClose);
        let text = std::fs::read_to_string(&mirror).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], "set-timeout 61");
        assert!(lines[1].starts_with("keepalive "));
        assert_eq!(lines[2], "magic-close");
    }
}
