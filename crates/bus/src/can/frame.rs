//! One CAN frame: read from the bytes a `CAN_RAW` socket delivers
//! (`struct can_frame`, 16 bytes, or `struct canfd_frame`, 72), written as
//! the ROS messages users decode, and read back from them.
//!
//! - Classic, remote and error frames are `can_msgs/msg/Frame`: `id`
//!   without SocketCAN's flag bits (for an error frame its `CAN_ERR_*`
//!   class bits), `is_rtr`, `is_extended`, `is_error`, `dlc` (the data
//!   length, or a raw DLC of 9 to 15 that a controller in
//!   `CC_LEN8_DLC` mode reports for an 8-byte frame) and `data` padded
//!   to 8 bytes.
//! - CAN FD frames are `ros2_socketcan_msgs/msg/FdFrame`: `id`,
//!   `is_extended`, `is_error`, `len` and `data`. FdFrame has no field for
//!   the FD flags (BRS, ESI, and FDF, which newer kernels set on every FD
//!   frame), so they follow the interface name in `header.frame_id`:
//!   `"can0"`, `"can0 brs"`, `"can0 brs fdf"`. Nothing candump shows is
//!   lost.
//!
//! `header.stamp` is the frame's receive time, equal to its log time.

use edgerec_format::cdr::{msg, CanFrameSpec, FdFrameSpec, Time};
use edgerec_ros::cdr_reader::{CdrError, CdrReader};

/// `CAN_EFF_FLAG`: a 29-bit identifier.
pub const CAN_EFF_FLAG: u32 = 0x8000_0000;
/// `CAN_RTR_FLAG`: a remote transmission request.
pub const CAN_RTR_FLAG: u32 = 0x4000_0000;
/// `CAN_ERR_FLAG`: an error frame.
pub const CAN_ERR_FLAG: u32 = 0x2000_0000;
/// `CAN_SFF_MASK`: an 11-bit identifier.
pub const CAN_SFF_MASK: u32 = 0x0000_07FF;
/// `CAN_EFF_MASK`: a 29-bit identifier (and the error class bits).
pub const CAN_EFF_MASK: u32 = 0x1FFF_FFFF;
/// `CAN_MTU`: bytes of a classic `struct can_frame`.
pub const CAN_MTU: usize = 16;
/// `CANFD_MTU`: bytes of a `struct canfd_frame`.
pub const CANFD_MTU: usize = 72;

/// The message type of classic frames.
pub const FRAME_TYPE: &str = "can_msgs/msg/Frame";
/// The message type of CAN FD frames.
pub const FD_FRAME_TYPE: &str = "ros2_socketcan_msgs/msg/FdFrame";

/// The FD flags as `header.frame_id` words, by bit (`CANFD_BRS` 1,
/// `CANFD_ESI` 2, `CANFD_FDF` 4, and bit 3 which no kernel sets yet).
const FLAG_WORDS: [(u8, &str); 4] = [(0x01, "brs"), (0x02, "esi"), (0x04, "fdf"), (0x08, "flag8")];

/// A frame as the kernel gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CanFrame {
    /// `can_id`: the identifier with SocketCAN's EFF, RTR and ERR bits.
    pub can_id: u32,
    /// Data length in bytes (for a remote frame, the length asked for).
    pub len: u8,
    /// CAN FD: `canfd_frame.flags`; classic: 0.
    pub flags: u8,
    /// Classic: a raw DLC of 9 to 15 for an 8-byte frame (`len8_dlc`), else 0.
    pub len8_dlc: u8,
    /// A CAN FD frame (72 bytes from the kernel).
    pub fd: bool,
    data: [u8; 64],
}

/// Why bytes are not a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The kernel delivered a length that is neither `CAN_MTU` nor
    /// `CANFD_MTU` (a CAN XL frame, which a raw socket only sends when
    /// asked).
    #[error("a {0}-byte read is neither a CAN frame (16) nor a CAN FD frame (72)")]
    Size(usize),
    /// A length past what the frame can hold.
    #[error("length {len} is more than a {kind} frame holds ({max})")]
    Length {
        /// The length.
        len: usize,
        /// `classic` or `FD`.
        kind: &'static str,
        /// Its largest length.
        max: usize,
    },
    /// The message does not decode.
    #[error(transparent)]
    Cdr(#[from] CdrError),
    /// `header.frame_id` names no interface, or flags it does not know.
    #[error("header.frame_id `{0}` is not an interface name with FD flag words (brs, esi, fdf)")]
    FrameId(String),
}

impl CanFrame {
    /// A frame from its parts; `data` is at most 8 bytes for a classic
    /// frame and 64 for an FD one.
    pub fn new(can_id: u32, data: &[u8], fd: bool, flags: u8) -> Result<CanFrame, FrameError> {
        let max = if fd { 64 } else { 8 };
        if data.len() > max {
            return Err(FrameError::Length {
                len: data.len(),
                kind: if fd { "FD" } else { "classic" },
                max,
            });
        }
        let mut d = [0u8; 64];
        d[..data.len()].copy_from_slice(data);
        Ok(CanFrame {
            can_id,
            len: data.len() as u8,
            flags: if fd { flags } else { 0 },
            len8_dlc: 0,
            fd,
            data: d,
        })
    }

    /// A remote request for `len` (0 to 8) bytes.
    pub fn remote(can_id: u32, len: u8) -> CanFrame {
        CanFrame {
            can_id: can_id | CAN_RTR_FLAG,
            len: len.min(8),
            flags: 0,
            len8_dlc: 0,
            fd: false,
            data: [0; 64],
        }
    }

    /// The frame in `bytes`, as a `CAN_RAW` socket returned them:
    /// `struct can_frame` (`can_id`, `len`, pad, res, `len8_dlc`, 8 data
    /// bytes) or `struct canfd_frame` (`can_id`, `len`, `flags`, 2 res, 64
    /// data bytes), in the host's byte order.
    pub fn from_kernel(bytes: &[u8]) -> Result<CanFrame, FrameError> {
        let fd = match bytes.len() {
            CAN_MTU => false,
            CANFD_MTU => true,
            n => return Err(FrameError::Size(n)),
        };
        let can_id = u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let len = bytes[4] as usize;
        let max = if fd { 64 } else { 8 };
        if len > max {
            return Err(FrameError::Length {
                len,
                kind: if fd { "FD" } else { "classic" },
                max,
            });
        }
        let mut data = [0u8; 64];
        // A remote frame's len is the length asked for; it carries no data.
        let carried = if !fd && can_id & CAN_RTR_FLAG != 0 {
            0
        } else {
            len
        };
        data[..carried].copy_from_slice(&bytes[8..8 + carried]);
        let len8_dlc = if !fd && len == 8 && (9..=15).contains(&bytes[7]) {
            bytes[7]
        } else {
            0
        };
        Ok(CanFrame {
            can_id,
            len: len as u8,
            flags: if fd { bytes[5] } else { 0 },
            len8_dlc,
            fd,
            data,
        })
    }

    /// The data bytes (none for a remote frame).
    pub fn data(&self) -> &[u8] {
        if self.is_rtr() {
            &[]
        } else {
            &self.data[..self.len as usize]
        }
    }

    /// A 29-bit identifier.
    pub fn is_extended(&self) -> bool {
        self.can_id & CAN_EFF_FLAG != 0
    }

    /// A remote transmission request (classic frames only).
    pub fn is_rtr(&self) -> bool {
        !self.fd && self.can_id & CAN_RTR_FLAG != 0
    }

    /// An error frame.
    pub fn is_error(&self) -> bool {
        self.can_id & CAN_ERR_FLAG != 0
    }

    /// The identifier without flag bits; for an error frame, its class
    /// bits.
    pub fn ident(&self) -> u32 {
        if self.is_error() || self.is_extended() {
            self.can_id & CAN_EFF_MASK
        } else {
            self.can_id & CAN_SFF_MASK
        }
    }

    /// The classic frame's DLC as `can_msgs/msg/Frame` keeps it.
    pub fn dlc(&self) -> u8 {
        if self.len8_dlc > 8 {
            self.len8_dlc
        } else {
            self.len
        }
    }

    /// Appends the frame's message (Frame or FdFrame) to `buf` (cleared
    /// first) and returns it; `interface` names it in `header.frame_id`.
    pub fn encode_into(&self, mut buf: Vec<u8>, stamp_ns: u64, interface: &str) -> Vec<u8> {
        buf.clear();
        let stamp = Time::from(stamp_ns);
        if self.fd {
            let id = frame_id_with_flags(interface, self.flags);
            msg::fd_frame_into(
                &mut buf,
                stamp,
                &id,
                &FdFrameSpec {
                    id: self.ident(),
                    is_extended: self.is_extended(),
                    is_error: self.is_error(),
                    data: self.data(),
                },
            );
        } else {
            msg::can_frame_into(
                &mut buf,
                stamp,
                interface,
                &CanFrameSpec {
                    id: self.ident(),
                    is_rtr: self.is_rtr(),
                    is_extended: self.is_extended(),
                    is_error: self.is_error(),
                    dlc: self.dlc(),
                    data: self.data(),
                },
            );
        }
        buf
    }
}

/// `interface`, then the words of the FD flags that are set.
pub fn frame_id_with_flags(interface: &str, flags: u8) -> String {
    let mut s = interface.to_owned();
    for (bit, word) in FLAG_WORDS {
        if flags & bit != 0 {
            s.push(' ');
            s.push_str(word);
        }
    }
    s
}

/// The interface and FD flags a `header.frame_id` holds.
pub fn split_frame_id(frame_id: &str) -> Result<(&str, u8), FrameError> {
    let mut words = frame_id.split(' ');
    let interface = words.next().unwrap_or("");
    if interface.is_empty() {
        return Err(FrameError::FrameId(frame_id.to_owned()));
    }
    let mut flags = 0u8;
    for w in words {
        let Some((bit, _)) = FLAG_WORDS.iter().find(|(_, word)| *word == w) else {
            return Err(FrameError::FrameId(frame_id.to_owned()));
        };
        flags |= bit;
    }
    Ok((interface, flags))
}

/// A frame read back from a message, with its stamp and interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The frame.
    pub frame: CanFrame,
    /// `header.stamp`, ns since the epoch.
    pub stamp_ns: u64,
    /// The interface `header.frame_id` names.
    pub interface: String,
}

fn stamp(r: &mut CdrReader<'_>) -> Result<u64, CdrError> {
    let sec = r.i32("header.stamp.sec")?;
    let nanosec = r.u32("header.stamp.nanosec")?;
    Ok((i64::from(sec) * 1_000_000_000 + i64::from(nanosec)).max(0) as u64)
}

/// Reads a `can_msgs/msg/Frame`.
pub fn decode_frame(payload: &[u8]) -> Result<Decoded, FrameError> {
    let mut r = CdrReader::new(payload)?;
    let stamp_ns = stamp(&mut r)?;
    let interface = r.string("header.frame_id")?.to_owned();
    let id = r.u32("id")?;
    let is_rtr = r.bool("is_rtr")?;
    let is_extended = r.bool("is_extended")?;
    let is_error = r.bool("is_error")?;
    let dlc = r.u8("dlc")?;
    let data = r.bytes("data", 8)?;
    r.finish()?;
    if dlc > 15 {
        return Err(FrameError::Length {
            len: dlc as usize,
            kind: "classic",
            max: 15,
        });
    }
    let mut can_id = id;
    if is_error {
        can_id = (id & CAN_EFF_MASK) | CAN_ERR_FLAG;
    } else if is_extended {
        can_id = (id & CAN_EFF_MASK) | CAN_EFF_FLAG;
    } else {
        can_id &= CAN_SFF_MASK;
    }
    let len = dlc.min(8);
    let mut frame = if is_rtr {
        CanFrame::remote(can_id, len)
    } else {
        CanFrame::new(can_id, &data[..len as usize], false, 0)?
    };
    if dlc > 8 {
        frame.len8_dlc = dlc;
    }
    Ok(Decoded {
        frame,
        stamp_ns,
        interface,
    })
}

/// Reads a `ros2_socketcan_msgs/msg/FdFrame`.
pub fn decode_fd_frame(payload: &[u8]) -> Result<Decoded, FrameError> {
    let mut r = CdrReader::new(payload)?;
    let stamp_ns = stamp(&mut r)?;
    let frame_id = r.string("header.frame_id")?;
    let id = r.u32("id")?;
    let is_extended = r.bool("is_extended")?;
    let is_error = r.bool("is_error")?;
    let len = r.u8("len")?;
    let n = r.sequence_len("data", 1)?;
    let data = r.bytes("data", n)?;
    r.finish()?;
    if n != len as usize {
        return Err(FrameError::Length {
            len: n,
            kind: "FD",
            max: len as usize,
        });
    }
    let (interface, flags) = split_frame_id(frame_id)?;
    let can_id = if is_error {
        (id & CAN_EFF_MASK) | CAN_ERR_FLAG
    } else if is_extended {
        (id & CAN_EFF_MASK) | CAN_EFF_FLAG
    } else {
        id & CAN_SFF_MASK
    };
    Ok(Decoded {
        frame: CanFrame::new(can_id, data, true, flags)?,
        stamp_ns,
        interface: interface.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classic(can_id: u32, len: u8, len8: u8, data: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; CAN_MTU];
        b[..4].copy_from_slice(&can_id.to_ne_bytes());
        b[4] = len;
        b[7] = len8;
        b[8..8 + data.len()].copy_from_slice(data);
        b
    }

    fn fd(can_id: u32, flags: u8, data: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; CANFD_MTU];
        b[..4].copy_from_slice(&can_id.to_ne_bytes());
        b[4] = data.len() as u8;
        b[5] = flags;
        b[8..8 + data.len()].copy_from_slice(data);
        b
    }

    #[test]
    fn kernel_bytes_decode_to_frames() {
        let f = CanFrame::from_kernel(&classic(0x123, 4, 0, &[0xde, 0xad, 0xbe, 0xef])).unwrap();
        assert!(!f.fd && !f.is_extended() && !f.is_rtr() && !f.is_error());
        assert_eq!(
            (f.ident(), f.data(), f.dlc()),
            (0x123, &[0xde, 0xad, 0xbe, 0xef][..], 4)
        );

        let f =
            CanFrame::from_kernel(&classic(0x1234_5678 | CAN_EFF_FLAG, 8, 0xE, &[1; 8])).unwrap();
        assert!(f.is_extended());
        assert_eq!((f.ident(), f.dlc(), f.len8_dlc), (0x1234_5678, 14, 14));

        let f = CanFrame::from_kernel(&classic(0x7ff | CAN_RTR_FLAG, 5, 0, &[9; 5])).unwrap();
        assert!(f.is_rtr());
        assert_eq!(
            (f.len, f.data()),
            (5, &[][..]),
            "a remote frame carries no data"
        );

        let f = CanFrame::from_kernel(&classic(
            0x40 | CAN_ERR_FLAG,
            8,
            0,
            &[0, 0, 0, 0, 0, 0, 0x80, 0x7f],
        ))
        .unwrap();
        assert!(f.is_error());
        assert_eq!(f.ident(), 0x40);

        let data: Vec<u8> = (0..48).collect();
        let f = CanFrame::from_kernel(&fd(0x1abc_def0 | CAN_EFF_FLAG, 0x05, &data)).unwrap();
        assert!(f.fd && f.is_extended() && !f.is_rtr());
        assert_eq!((f.flags, f.data()), (0x05, &data[..]));

        assert_eq!(CanFrame::from_kernel(&[0; 15]), Err(FrameError::Size(15)));
        assert!(matches!(
            CanFrame::from_kernel(&classic(1, 9, 0, &[])),
            Err(FrameError::Length { len: 9, .. })
        ));
        let mut too_long = fd(1, 0, &[]);
        too_long[4] = 65;
        assert!(CanFrame::from_kernel(&too_long).is_err());
    }

    #[test]
    fn frames_round_trip_through_their_messages() {
        let cases = [
            CanFrame::from_kernel(&classic(0x123, 3, 0, &[1, 2, 3])).unwrap(),
            CanFrame::from_kernel(&classic(0x100, 0, 0, &[])).unwrap(),
            CanFrame::from_kernel(&classic(0x0abc_dead | CAN_EFF_FLAG, 8, 0, &[7; 8])).unwrap(),
            CanFrame::from_kernel(&classic(0x321, 8, 0xB, &[1, 2, 3, 4, 5, 6, 7, 8])).unwrap(),
            CanFrame::from_kernel(&classic(0x55 | CAN_RTR_FLAG, 6, 0, &[])).unwrap(),
            CanFrame::from_kernel(&classic(0x1 | CAN_EFF_FLAG | CAN_RTR_FLAG, 0, 0, &[])).unwrap(),
            CanFrame::from_kernel(&classic(
                0x4 | CAN_ERR_FLAG,
                8,
                0,
                &[0, 4, 0, 0, 0, 0, 0x60, 0],
            ))
            .unwrap(),
        ];
        for f in cases {
            let m = f.encode_into(Vec::new(), 1_700_000_000_000_001_000, "can0");
            let d = decode_frame(&m).unwrap();
            assert_eq!(d.frame, f, "{f:?}");
            assert_eq!(
                (d.stamp_ns, d.interface.as_str()),
                (1_700_000_000_000_001_000, "can0")
            );
        }
        let long: Vec<u8> = (0..64).collect();
        for (id, flags, n) in [
            (0x123, 0u8, 0usize),
            (0x7ff, 1, 12),
            (0x1fff_ffff | CAN_EFF_FLAG, 5, 64),
            (0x10, 7, 3),
        ] {
            let f = CanFrame::from_kernel(&fd(id, flags, &long[..n])).unwrap();
            let m = f.encode_into(Vec::new(), 5, "vcan1");
            let d = decode_fd_frame(&m).unwrap();
            assert_eq!(d.frame, f);
            assert_eq!(d.interface, "vcan1");
        }
        // The wrong decoder for a message is an error, never a panic.
        let m = cases_fd_message();
        assert!(decode_frame(&m).is_err());
        for cut in 0..m.len() {
            assert!(decode_fd_frame(&m[..cut]).is_err(), "cut at {cut}");
        }
    }

    fn cases_fd_message() -> Vec<u8> {
        CanFrame::new(0x123, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], true, 1)
            .unwrap()
            .encode_into(Vec::new(), 1, "can0")
    }

    #[test]
    fn fd_flags_live_in_the_frame_id() {
        assert_eq!(frame_id_with_flags("can0", 0), "can0");
        assert_eq!(frame_id_with_flags("can0", 0x05), "can0 brs fdf");
        assert_eq!(frame_id_with_flags("can0", 0x0f), "can0 brs esi fdf flag8");
        for flags in 0..16u8 {
            assert_eq!(
                split_frame_id(&frame_id_with_flags("vcan0", flags)).unwrap(),
                ("vcan0", flags)
            );
        }
        assert!(split_frame_id("").is_err());
        assert!(split_frame_id("can0 fast").is_err());
    }
}
