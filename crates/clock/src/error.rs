//! The one error type of the crate. Every variant names the device, interface
//! or socket it concerns and, where there is one, the fix.

use std::io;
use std::path::PathBuf;

/// What went wrong opening or reading a clock, measuring an offset or talking
/// to ptp4l.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClockError {
    /// A PTP hardware clock device could not be opened.
    #[error(
        "cannot open PTP hardware clock {path}: {source}; check that the device exists \
         (ls /dev/ptp*) and that edgerec may read it"
    )]
    PhcOpen {
        /// The device, e.g. `/dev/ptp0`.
        path: PathBuf,
        /// The error from open(2).
        source: io::Error,
    },
    /// The network interface exists but has no PTP hardware clock.
    #[error(
        "network interface {iface} has no PTP hardware clock (`ethtool -T {iface}` shows \
         \"PTP Hardware Clock: none\"); record on a NIC with hardware timestamping, name the \
         /dev/ptpN device directly, or use the realtime clock"
    )]
    NoPhc {
        /// The interface name.
        iface: String,
    },
    /// The timestamping capabilities of an interface could not be read.
    #[error(
        "cannot read the timestamping capabilities of network interface {iface} \
         (SIOCETHTOOL ETHTOOL_GET_TS_INFO): {source}; check the name with `ip link`"
    )]
    InterfaceQuery {
        /// The interface name.
        iface: String,
        /// The error from socket(2) or ioctl(2).
        source: io::Error,
    },
    /// A string that cannot be a Linux interface name.
    #[error(
        "{iface:?} is not a network interface name (1 to 15 bytes, no '/', NUL or blank); \
         name a PHC device as a path like /dev/ptp0"
    )]
    BadInterfaceName {
        /// The rejected name.
        iface: String,
    },
    /// clock_gettime(2) failed on the recording clock.
    #[error("cannot read clock {clock}: {source}")]
    ReadClock {
        /// Which clock, as [`crate::Clock::describe`] says.
        clock: String,
        /// The error from clock_gettime(2).
        source: io::Error,
    },
    /// No method could measure the PHC-to-system offset.
    #[error(
        "cannot measure the offset of PTP hardware clock {path} to the system clock: {source}"
    )]
    PhcOffset {
        /// The PHC device.
        path: PathBuf,
        /// The error of the last method tried.
        source: io::Error,
    },
    /// ptp4l's management socket does not exist.
    #[error(
        "ptp4l management socket {path} does not exist: ptp4l is not running, or its \
         `uds_address` (ptp4l -f <file>, [global] section) names another path"
    )]
    Ptp4lSocketMissing {
        /// The socket path that was tried.
        path: PathBuf,
    },
    /// The socket file exists but no process listens on it.
    #[error(
        "ptp4l management socket {path} exists but nobody listens on it: ptp4l stopped and left \
         the file behind; start ptp4l (systemctl start ptp4l)"
    )]
    Ptp4lNotListening {
        /// The socket path.
        path: PathBuf,
    },
    /// Not allowed to send to ptp4l's socket.
    #[error(
        "not allowed to talk to ptp4l management socket {path}: {source}; run edgerec as root \
         or as a member of the socket's group (ptp4l's `uds_file_mode`)"
    )]
    Ptp4lPermission {
        /// The socket path.
        path: PathBuf,
        /// The error from sendto(2).
        source: io::Error,
    },
    /// The client's own datagram socket could not be created or bound.
    #[error(
        "cannot create the management client socket {path}: {source}; the directory must be \
         writable and the path shorter than 108 bytes"
    )]
    ClientSocket {
        /// The path the client tried to bind.
        path: PathBuf,
        /// The error from socket(2) or bind(2).
        source: io::Error,
    },
    /// Sending to or receiving from ptp4l failed for another reason.
    #[error("management I/O on ptp4l socket {path}: {source}")]
    Ptp4lIo {
        /// The ptp4l socket path.
        path: PathBuf,
        /// The error from sendto(2) or recv(2).
        source: io::Error,
    },
    /// ptp4l did not answer in time.
    #[error(
        "ptp4l at {path} did not answer GET {what} within {timeout_ms} ms: ptp4l is stuck, or \
         its domainNumber differs from {domain} (the client's domain)"
    )]
    Ptp4lTimeout {
        /// The ptp4l socket path.
        path: PathBuf,
        /// The management id asked for, as pmc names it.
        what: &'static str,
        /// How long the client waited.
        timeout_ms: u64,
        /// The domainNumber the request carried.
        domain: u8,
    },
    /// ptp4l answered with a MANAGEMENT_ERROR_STATUS TLV.
    #[error("ptp4l at {path} refused GET {what}: {error}{display}")]
    ManagementError {
        /// The ptp4l socket path.
        path: PathBuf,
        /// The management id asked for.
        what: &'static str,
        /// The managementErrorId as pmc names it (e.g. NO_SUCH_ID).
        error: String,
        /// The displayData text, prefixed with ": " when present.
        display: String,
    },
    /// A reply that does not parse as a PTP management message.
    #[error("malformed management message from ptp4l at {path}: {reason}")]
    Malformed {
        /// The ptp4l socket path.
        path: PathBuf,
        /// What was wrong with it.
        reason: String,
    },
    /// The monitor thread could not be started.
    #[error("cannot start the clock monitor thread: {0}")]
    Spawn(#[source] io::Error),
}
