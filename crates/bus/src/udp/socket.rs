//! The UDP socket of a `[[udp]]` stream: bound to its address and port
//! (`SO_REUSEADDR`, so a restarted run binds again at once), joined to its
//! multicast group on its interface where one is set, with the receive
//! buffer, receive timestamps and the drop count asked for.

use std::io;
use std::net::Ipv4Addr;

use edgerec_config::UdpConfig;

use crate::stamp::{self, StampMode};
use crate::sys::{self, Socket};

/// An open, bound UDP socket.
#[derive(Debug)]
pub struct UdpSocket {
    pub(crate) socket: Socket,
    /// How its packets are stamped.
    pub stamps: StampMode,
    /// The kernel adds its drop count to every packet (`SO_RXQ_OVFL`).
    pub overflow_count: bool,
    /// The receive buffer the kernel granted.
    pub receive_buffer: u64,
}

/// A step that failed, with the OS error.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {source}")]
pub struct OpenError {
    /// What was being done (`bind 10.0.0.2:7502`).
    pub step: String,
    /// The OS error.
    pub source: io::Error,
}

impl UdpSocket {
    /// Opens, sets up and binds the socket for `cfg`.
    pub fn open(cfg: &UdpConfig) -> Result<UdpSocket, OpenError> {
        let step = |step: String| move |source| OpenError { step, source };
        let socket = Socket::open(libc::AF_INET, libc::SOCK_DGRAM, 0)
            .map_err(step("socket(AF_INET, SOCK_DGRAM)".into()))?;
        socket
            .set(libc::SOL_SOCKET, libc::SO_REUSEADDR, &1 as &libc::c_int)
            .map_err(step("setsockopt(SO_REUSEADDR)".into()))?;
        let receive_buffer = socket
            .set_receive_buffer(cfg.receive_buffer)
            .map_err(step("setsockopt(SO_RCVBUF)".into()))?;
        let (stamps, overflow_count) = stamp::enable(&socket);
        socket
            .bind(&sys::sockaddr_in(cfg.bind))
            .map_err(step(format!("bind {}", cfg.bind)))?;
        if let Some(group) = cfg.multicast {
            // Only this group's packets: by default a socket bound to
            // 0.0.0.0:port also gets the groups other sockets joined.
            socket
                .set(libc::IPPROTO_IP, libc::IP_MULTICAST_ALL, &0 as &libc::c_int)
                .map_err(step("setsockopt(IP_MULTICAST_ALL)".into()))?;
            let ifindex = if cfg.interface.is_empty() {
                0
            } else {
                sys::interface_index(&cfg.interface)
                    .map_err(step(format!("interface {}", cfg.interface)))?
            };
            let req = libc::ip_mreqn {
                imr_multiaddr: libc::in_addr {
                    s_addr: u32::from(group).to_be(),
                },
                imr_address: libc::in_addr {
                    s_addr: u32::from(Ipv4Addr::UNSPECIFIED).to_be(),
                },
                imr_ifindex: ifindex as libc::c_int,
            };
            socket
                .set(libc::IPPROTO_IP, libc::IP_ADD_MEMBERSHIP, &req)
                .map_err(step(format!(
                    "join {group} on {}",
                    if cfg.interface.is_empty() {
                        "the default interface"
                    } else {
                        &cfg.interface
                    }
                )))?;
        }
        Ok(UdpSocket {
            socket,
            stamps,
            overflow_count,
            receive_buffer,
        })
    }
}
