//! Vehicle buses and raw sensor packets, read from the sockets by edgerec
//! itself into the same files and onto the same clock as everything else.
//!
//! - [`can`]: a `[[can]]` interface through SocketCAN (`CAN_RAW`, classic
//!   and FD, error frames kept, the kernel's id filters), every frame a
//!   `can_msgs/msg/Frame` or `ros2_socketcan_msgs/msg/FdFrame` message;
//! - [`udp`]: a `[[udp]]` stream (a lidar's or radar's packets), every
//!   datagram an `edgerec_msgs/msg/Packet`, byte for byte;
//! - both read in `recvmmsg` batches beside the stop's eventfd
//!   ([`reader`]), stamped with the kernel's receive time carried to the
//!   recording clock ([`stamp`], [`ancillary`]), with the kernel's drops
//!   counted as the channel's `upstream_lost` ([`snmp`] for the
//!   namespace's counters); every `unsafe` is in [`sys`];
//! - back out for the field's tools: [`candump`] logs and [`pcap`] files
//!   ([`export`]), and candump logs in.
//!
//! Raw `libc` rather than the `socketcan` crate (3.6 reads one frame per
//! `recvmsg`, with no `SO_RXQ_OVFL` drop count, and is CAN only): the UDP
//! source needs the same `recvmmsg` batches with `SO_TIMESTAMPING` and
//! `SO_RXQ_OVFL` control messages, so one small FFI module serves both
//! sockets, and it adds no crate to the image's list.
//!
//! ```
//! use edgerec_bus::can::CanFrame;
//! use edgerec_bus::candump;
//!
//! let line = candump::parse_line("(1436509052.249713) can0 123#DEADBEEF")?.unwrap();
//! assert_eq!(line.frame.ident(), 0x123);
//! assert_eq!(line.frame.data(), &[0xde, 0xad, 0xbe, 0xef]);
//!
//! // As the CAN source records it: can_msgs/msg/Frame in CDR.
//! let msg = line.frame.encode_into(Vec::new(), line.time_ns, &line.interface);
//! let back = edgerec_bus::can::frame::decode_frame(&msg)?;
//! let mut text = String::new();
//! candump::format_line(back.stamp_ns, &back.interface, &back.frame, &mut text);
//! assert_eq!(text, "(1436509052.249713) can0 123#DEADBEEF");
//!
//! let fd = CanFrame::new(0x7ff, &[1, 2, 3], true, 0x01)?;
//! text.clear();
//! candump::format_frame(&fd, &mut text);
//! assert_eq!(text, "7FF##1010203");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod ancillary;
pub mod can;
pub mod candump;
pub(crate) mod drops;
pub mod export;
pub mod pcap;
pub(crate) mod reader;
pub mod snmp;
pub mod stamp;
pub(crate) mod sys;
pub mod udp;

pub use can::{can_unsupported, CanSource};
pub use export::{
    export_candump, export_pcap, import_candump, ExportError, ExportSummary, ImportSummary,
};
pub use udp::UdpSource;
