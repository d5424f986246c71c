//! systemd's readiness and watchdog protocol (`sd_notify(3)`), spoken
//! natively: one datagram per message to the unix socket named by
//! `$NOTIFY_SOCKET`, so the recorder needs no libsystemd on the image and
//! tests can play systemd with a socket bound in a temporary directory.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// A connection to the service manager's notification socket.
#[derive(Debug)]
pub struct Notifier {
    socket: UnixDatagram,
    addr: SocketAddr,
    /// The socket as given (`/run/systemd/notify`, `@abstract`), for errors.
    name: String,
    watchdog_interval: Option<Duration>,
}

impl Notifier {
    /// The notifier systemd asked for, if any: `$NOTIFY_SOCKET` (a path, or
    /// an abstract name when it starts with `@`) and, with `WatchdogSec=`,
    /// `$WATCHDOG_USEC`, ignored when `$WATCHDOG_PID` names another
    /// process. `None` when not started by systemd (or with `Type=simple`
    /// and no `NotifyAccess`); a socket that is set but unusable is logged
    /// as a warning and also gives `None`.
    pub fn from_env() -> Option<Notifier> {
        let socket = std::env::var_os("NOTIFY_SOCKET")?;
        if socket.is_empty() {
            return None;
        }
        let usec = std::env::var("WATCHDOG_USEC").ok();
        let pid = std::env::var("WATCHDOG_PID").ok();
        let interval =
            match watchdog_interval_from(usec.as_deref(), pid.as_deref(), std::process::id()) {
                Ok(interval) => interval,
                Err(why) => {
                    tracing::warn!("systemd watchdog not used: {why}");
                    None
                }
            };
        match Notifier::new(&socket) {
            Ok(notifier) => Some(notifier.with_watchdog_interval(interval)),
            Err(err) => {
                tracing::warn!("NOTIFY_SOCKET is set but cannot be used: {err}");
                None
            }
        }
    }

    /// A notifier sending to `socket`: a file system path, or an abstract
    /// socket name when it starts with `@`. No watchdog interval is set;
    /// see [`with_watchdog_interval`](Notifier::with_watchdog_interval).
    pub fn new(socket: impl AsRef<OsStr>) -> io::Result<Notifier> {
        let socket = socket.as_ref();
        let name = socket.to_string_lossy().into_owned();
        let addr = match socket.as_bytes().strip_prefix(b"@") {
            Some(abstract_name) => abstract_addr(abstract_name),
            None => SocketAddr::from_pathname(socket),
        }
        .map_err(|err| io::Error::new(err.kind(), format!("notify socket `{name}`: {err}")))?;
        let datagram = UnixDatagram::unbound()?;
        // A full socket queue must not stall the watchdog thread: systemd
        // drains it promptly, and a lost WATCHDOG=1 is resent next period.
        datagram.set_nonblocking(true)?;
        Ok(Notifier {
            socket: datagram,
            addr,
            name,
            watchdog_interval: None,
        })
    }

    /// Sets the interval systemd's watchdog expects keepalives within
    /// (`$WATCHDOG_USEC`); `WATCHDOG=1` should go out every half of it.
    pub fn with_watchdog_interval(mut self, interval: Option<Duration>) -> Notifier {
        self.watchdog_interval = interval.filter(|i| !i.is_zero());
        self
    }

    /// systemd's watchdog interval, when `WatchdogSec=` is set for us.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog_interval
    }

    /// `READY=1`: start-up is complete (for `Type=notify` services).
    pub fn ready(&self) -> io::Result<()> {
        self.send("READY=1")
    }

    /// `STOPPING=1`: a clean shutdown has begun.
    pub fn stopping(&self) -> io::Result<()> {
        self.send("STOPPING=1")
    }

    /// `STATUS=line`, shown by `systemctl status`. Line breaks are replaced
    /// by spaces: the protocol is one assignment per line.
    pub fn status(&self, line: &str) -> io::Result<()> {
        let line = line.replace(['\n', '\r'], " ");
        self.send(&format!("STATUS={line}"))
    }

    /// `WATCHDOG=1`: the service is alive.
    pub fn watchdog(&self) -> io::Result<()> {
        self.send("WATCHDOG=1")
    }

    /// Sends `message` (newline-separated `KEY=value` assignments) as one
    /// datagram.
    pub fn send(&self, message: &str) -> io::Result<()> {
        self.socket
            .send_to_addr(message.as_bytes(), &self.addr)
            .map(|_| ())
            .map_err(|err| {
                io::Error::new(err.kind(), format!("sd_notify to `{}`: {err}", self.name))
            })
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn abstract_addr(name: &[u8]) -> io::Result<SocketAddr> {
    #[cfg(target_os = "android")]
    use std::os::android::net::SocketAddrExt;
    #[cfg(target_os = "linux")]
    use std::os::linux::net::SocketAddrExt;
    SocketAddr::from_abstract_name(name)
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn abstract_addr(_name: &[u8]) -> io::Result<SocketAddr> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "abstract unix sockets exist only on Linux",
    ))
}

/// `$WATCHDOG_USEC` as a duration, unless `$WATCHDOG_PID` names a process
/// other than `our_pid` (then the watchdog is meant for someone else).
fn watchdog_interval_from(
    usec: Option<&str>,
    pid: Option<&str>,
    our_pid: u32,
) -> Result<Option<Duration>, String> {
    let Some(usec) = usec.map(str::trim).filter(|u| !u.is_empty()) else {
        return Ok(None);
    };
    if let Some(pid) = pid.map(str::trim).filter(|p| !p.is_empty()) {
        let pid: u32 = pid
            .parse()
            .map_err(|_| format!("WATCHDOG_PID=`{pid}` is not a process id"))?;
        if pid != our_pid {
            return Ok(None);
        }
    }
    let usec: u64 = usec
        .parse()
        .map_err(|_| format!("WATCHDOG_USEC=`{usec}` is not a number of microseconds"))?;
    Ok((usec > 0).then(|| Duration::from_micros(usec)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_interval_rules() {
        assert_eq!(watchdog_interval_from(None, None, 7), Ok(None));
        assert_eq!(
            watchdog_interval_from(Some("2000000"), None, 7),
            Ok(Some(Duration::from_secs(2)))
        );
        assert_eq!(
            watchdog_interval_from(Some("2000000"), Some("7"), 7),
            Ok(Some(Duration::from_secs(2)))
        );
        assert_eq!(
            watchdog_interval_from(Some("2000000"), Some("8"), 7),
            Ok(None)
        );
        assert_eq!(watchdog_interval_from(Some("0"), None, 7), Ok(None));
        assert!(watchdog_interval_from(Some("2s"), None, 7).is_err());
        assert!(watchdog_interval_from(Some("1"), Some("me"), 7).is_err());
    }

    #[test]
    fn messages_reach_a_bound_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let systemd = UnixDatagram::bind(&path).unwrap();
        let notifier = Notifier::new(&path).unwrap();
        notifier.ready().unwrap();
        notifier.status("recording\n2 sources").unwrap();
        notifier.watchdog().unwrap();
        notifier.stopping().unwrap();
        let mut buf = [0u8; 256];
        let mut got = Vec::new();
        for _ in 0..4 {
            let n = systemd.recv(&mut buf).unwrap();
            got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        assert_eq!(
            got,
            [
                "READY=1",
                "STATUS=recording 2 sources",
                "WATCHDOG=1",
                "STOPPING=1"
            ]
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("edgerec-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let systemd = UnixDatagram::bind_addr(&addr).unwrap();
        let notifier = Notifier::new(format!("@{name}")).unwrap();
        notifier.watchdog().unwrap();
        let mut buf = [0u8; 64];
        let n = systemd.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"WATCHDOG=1");
    }

    #[test]
    fn missing_socket_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent");
        let notifier = Notifier::new(&path).unwrap();
        let err = notifier.ready().unwrap_err();
        assert!(err.to_string().contains("absent"), "{err}");
    }
}
