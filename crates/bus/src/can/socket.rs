//! A `CAN_RAW` socket bound to one interface, set up as the CAN source
//! reads it: CAN FD frames when asked (`CAN_RAW_FD_FRAMES`), the kernel's
//! id filters (`CAN_RAW_FILTER`), error frames (`CAN_RAW_ERR_FILTER`),
//! the receive buffer, receive timestamps and the drop count.

use std::io;

use edgerec_config::{CanConfig, CanFilter};

use crate::stamp::{self, StampMode};
use crate::sys::{self, Socket};

/// `CAN_ERR_MASK`: every error class.
const CAN_ERR_MASK: u32 = 0x1FFF_FFFF;

/// What went wrong opening the socket, by step, for the source's error.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// `socket(PF_CAN)` answered EAFNOSUPPORT: no SocketCAN in this kernel.
    #[error(
        "this kernel has no SocketCAN (socket(AF_CAN): {0}); load the can and can-raw modules"
    )]
    NoCan(io::Error),
    /// The interface does not exist (yet: a USB adapter not plugged in).
    #[error("no interface {interface} ({source}); check `ip link show type can`")]
    NoInterface {
        /// The interface.
        interface: String,
        /// The OS error.
        source: io::Error,
    },
    /// The kernel refused CAN FD frames on this socket.
    #[error("{interface}: the kernel refuses CAN FD frames (CAN_RAW_FD_FRAMES: {source})")]
    NoFd {
        /// The interface.
        interface: String,
        /// The OS error.
        source: io::Error,
    },
    /// Another step failed.
    #[error("{interface}: {step}: {source}")]
    Step {
        /// The interface.
        interface: String,
        /// What was being done.
        step: &'static str,
        /// The OS error.
        source: io::Error,
    },
}

/// An open, bound `CAN_RAW` socket.
#[derive(Debug)]
pub struct CanSocket {
    pub(crate) socket: Socket,
    /// How its frames are stamped.
    pub stamps: StampMode,
    /// The kernel adds its drop count to every frame (`SO_RXQ_OVFL`).
    pub overflow_count: bool,
    /// The receive buffer the kernel granted.
    pub receive_buffer: u64,
}

/// The kernel filters for `filters`; none means every frame (one filter
/// that matches anything, the kernel's default).
pub fn kernel_filters(filters: &[CanFilter]) -> Vec<libc::can_filter> {
    if filters.is_empty() {
        return vec![libc::can_filter {
            can_id: 0,
            can_mask: 0,
        }];
    }
    filters
        .iter()
        .map(|f| libc::can_filter {
            can_id: if f.inverted {
                f.id | libc::CAN_INV_FILTER
            } else {
                f.id
            },
            can_mask: f.mask,
        })
        .collect()
}

impl CanSocket {
    /// Opens and binds a socket for `cfg`'s interface.
    pub fn open(cfg: &CanConfig) -> Result<CanSocket, OpenError> {
        let iface = &cfg.interface;
        let step = |step: &'static str| {
            move |source| OpenError::Step {
                interface: iface.clone(),
                step,
                source,
            }
        };
        let socket = Socket::open(libc::AF_CAN, libc::SOCK_RAW, libc::CAN_RAW).map_err(|e| {
            if e.raw_os_error() == Some(libc::EAFNOSUPPORT) {
                OpenError::NoCan(e)
            } else {
                OpenError::Step {
                    interface: iface.clone(),
                    step: "socket(AF_CAN, SOCK_RAW, CAN_RAW)",
                    source: e,
                }
            }
        })?;
        let index = sys::interface_index(iface).map_err(|source| OpenError::NoInterface {
            interface: iface.clone(),
            source,
        })?;
        if cfg.fd {
            socket
                .set(
                    libc::SOL_CAN_RAW,
                    libc::CAN_RAW_FD_FRAMES,
                    &1 as &libc::c_int,
                )
                .map_err(|source| OpenError::NoFd {
                    interface: iface.clone(),
                    source,
                })?;
        }
        socket
            .set_slice(
                libc::SOL_CAN_RAW,
                libc::CAN_RAW_FILTER,
                &kernel_filters(&cfg.filters),
            )
            .map_err(step("setsockopt(CAN_RAW_FILTER)"))?;
        let err_mask: u32 = if cfg.error_frames { CAN_ERR_MASK } else { 0 };
        socket
            .set(libc::SOL_CAN_RAW, libc::CAN_RAW_ERR_FILTER, &err_mask)
            .map_err(step("setsockopt(CAN_RAW_ERR_FILTER)"))?;
        let receive_buffer = socket
            .set_receive_buffer(cfg.receive_buffer)
            .map_err(step("setsockopt(SO_RCVBUF)"))?;
        let (stamps, overflow_count) = stamp::enable(&socket);
        // SAFETY: sockaddr_can is integers and a union of integers; all
        // zero is valid, and the fields that matter are set below.
        let mut addr: libc::sockaddr_can = unsafe { std::mem::zeroed() };
        addr.can_family = libc::AF_CAN as libc::sa_family_t;
        addr.can_ifindex = index as libc::c_int;
        socket.bind(&addr).map_err(step("bind"))?;
        Ok(CanSocket {
            socket,
            stamps,
            overflow_count,
            receive_buffer,
        })
    }
}

/// Whether this kernel has SocketCAN: `Err` says why not (the tests that
/// need a CAN socket print it and skip).
pub fn can_unsupported() -> Option<String> {
    match Socket::open(libc::AF_CAN, libc::SOCK_RAW, libc::CAN_RAW) {
        Ok(_) => None,
        Err(e) => Some(format!(
            "socket(AF_CAN, SOCK_RAW, CAN_RAW) fails here ({e}): this kernel has no SocketCAN"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_reach_the_kernel_as_candump_sets_them() {
        let all = kernel_filters(&[]);
        assert_eq!((all.len(), all[0].can_id, all[0].can_mask), (1, 0, 0));
        let f = kernel_filters(&[
            CanFilter {
                id: 0x123,
                mask: 0x7ff,
                inverted: false,
            },
            CanFilter {
                id: 0x200,
                mask: 0x700,
                inverted: true,
            },
        ]);
        assert_eq!((f[0].can_id, f[0].can_mask), (0x123, 0x7ff));
        assert_eq!((f[1].can_id, f[1].can_mask), (0x200 | 0x2000_0000, 0x700));
        assert_eq!(std::mem::size_of::<libc::can_filter>(), 8);
        assert_eq!(std::mem::size_of::<libc::sockaddr_can>(), 24);
    }

    #[test]
    fn without_socketcan_the_error_says_so() {
        match can_unsupported() {
            Some(why) => {
                edgerec_testkit::skip::skip_allowed(
                    edgerec_testkit::skip::Allowed::NoHardware,
                    format!("opening a CAN socket: {why}"),
                );
                let e = CanSocket::open(&CanConfig::new("vcan0")).unwrap_err();
                assert!(matches!(e, OpenError::NoCan(_)), "{e}");
                assert!(e.to_string().contains("load the can and can-raw modules"));
            }
            None => {
                let e = CanSocket::open(&CanConfig::new("no-such-can9")).unwrap_err();
                assert!(matches!(e, OpenError::NoInterface { .. }), "{e}");
            }
        }
    }
}
