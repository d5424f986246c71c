//! The ancillary data the kernel hands over with each received packet or
//! frame, parsed in safe code from the bytes `recvmmsg(2)` wrote:
//!
//! - `SCM_TIMESTAMPING` (`SO_TIMESTAMPING`): three timespecs, the software
//!   receive stamp (CLOCK_REALTIME, taken when the driver handed the
//!   packet to the stack), a deprecated one, and the hardware stamp (the
//!   NIC's or CAN controller's own clock, raw), each zero when absent;
//! - `SCM_TIMESTAMPNS` (`SO_TIMESTAMPNS`): the software stamp alone;
//! - `SO_RXQ_OVFL`: the socket's running count of packets the kernel
//!   dropped (receive buffer full) up to this one.
//!
//! Control messages are a `cmsghdr` (`size_t` length, `int` level, `int`
//! type), then the data, each aligned to `size_t`.

/// `size_of::<size_t>()`: cmsg alignment and the length field's size.
const ALIGN: usize = std::mem::size_of::<usize>();
/// `CMSG_LEN(0)`: the header, aligned.
const HEADER: usize = (ALIGN + 4 + 4).div_ceil(ALIGN) * ALIGN;
/// A timespec on the 64-bit targets edgerec builds for.
const TIMESPEC: usize = 16;
const _: () = assert!(std::mem::size_of::<libc::timespec>() == TIMESPEC);

/// What came with one packet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ancillary {
    /// The kernel's software receive stamp, ns since the epoch on
    /// CLOCK_REALTIME.
    pub software_ns: Option<u64>,
    /// The hardware receive stamp, ns on the device's own clock.
    pub hardware_ns: Option<u64>,
    /// The socket's running count of kernel drops (`SO_RXQ_OVFL`).
    pub drops: Option<u32>,
}

fn timespec_ns(b: &[u8]) -> Option<u64> {
    let sec = i64::from_ne_bytes(b.get(0..8)?.try_into().ok()?);
    let nsec = i64::from_ne_bytes(b.get(8..16)?.try_into().ok()?);
    if (sec == 0 && nsec == 0) || sec < 0 || !(0..1_000_000_000).contains(&nsec) {
        return None;
    }
    (sec as u64)
        .checked_mul(1_000_000_000)?
        .checked_add(nsec as u64)
}

/// Parses a message's control bytes; what is malformed or unknown is left
/// out (a truncated list keeps what came before the cut).
pub fn parse(control: &[u8]) -> Ancillary {
    let mut out = Ancillary::default();
    let mut at = 0usize;
    while at + HEADER <= control.len() {
        let len_bytes = &control[at..at + ALIGN];
        let len = match ALIGN {
            8 => u64::from_ne_bytes(len_bytes.try_into().unwrap_or([0; 8])) as usize,
            _ => u32::from_ne_bytes(len_bytes[..4].try_into().unwrap_or([0; 4])) as usize,
        };
        let level = i32::from_ne_bytes(
            control[at + ALIGN..at + ALIGN + 4]
                .try_into()
                .unwrap_or([0; 4]),
        );
        let ty = i32::from_ne_bytes(
            control[at + ALIGN + 4..at + ALIGN + 8]
                .try_into()
                .unwrap_or([0; 4]),
        );
        if len < HEADER || at + len > control.len() {
            break;
        }
        let data = &control[at + HEADER..at + len];
        if level == libc::SOL_SOCKET {
            match ty {
                libc::SCM_TIMESTAMPING if data.len() >= 3 * TIMESPEC => {
                    out.software_ns = timespec_ns(&data[..TIMESPEC]).or(out.software_ns);
                    out.hardware_ns = timespec_ns(&data[2 * TIMESPEC..3 * TIMESPEC]);
                }
                libc::SCM_TIMESTAMPNS if data.len() >= TIMESPEC => {
                    out.software_ns = out.software_ns.or(timespec_ns(data));
                }
                libc::SO_RXQ_OVFL if data.len() >= 4 => {
                    out.drops = data[..4].try_into().ok().map(u32::from_ne_bytes);
                }
                _ => {}
            }
        }
        at += len.div_ceil(ALIGN) * ALIGN;
    }
    out
}

/// Control bytes as the kernel writes them, for tests of the parser and of
/// the sources' stamp handling.
#[cfg(test)]
pub(crate) mod build {
    use super::*;

    /// One control message.
    pub fn cmsg(out: &mut Vec<u8>, level: i32, ty: i32, data: &[u8]) {
        let len = HEADER + data.len();
        match ALIGN {
            8 => out.extend_from_slice(&(len as u64).to_ne_bytes()),
            _ => out.extend_from_slice(&(len as u32).to_ne_bytes()),
        }
        out.extend_from_slice(&level.to_ne_bytes());
        out.extend_from_slice(&ty.to_ne_bytes());
        out.resize(out.len().div_ceil(ALIGN) * ALIGN, 0);
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(ALIGN) * ALIGN, 0);
    }

    /// A timespec's bytes.
    pub fn timespec(ns: u64) -> Vec<u8> {
        let mut v = ((ns / 1_000_000_000) as i64).to_ne_bytes().to_vec();
        v.extend_from_slice(&((ns % 1_000_000_000) as i64).to_ne_bytes());
        v
    }

    /// `SCM_TIMESTAMPING` with a software and a hardware stamp (0 = none).
    pub fn timestamping(out: &mut Vec<u8>, sw: u64, hw: u64) {
        let mut d = timespec(sw);
        d.extend(timespec(0));
        d.extend(timespec(hw));
        cmsg(out, libc::SOL_SOCKET, libc::SCM_TIMESTAMPING, &d);
    }

    /// `SO_RXQ_OVFL`.
    pub fn overflow(out: &mut Vec<u8>, drops: u32) {
        cmsg(
            out,
            libc::SOL_SOCKET,
            libc::SO_RXQ_OVFL,
            &drops.to_ne_bytes(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;

    #[test]
    fn reads_stamps_and_the_drop_count() {
        let mut c = Vec::new();
        timestamping(&mut c, 1_700_000_000_123_456_789, 0);
        overflow(&mut c, 7);
        let a = parse(&c);
        assert_eq!(a.software_ns, Some(1_700_000_000_123_456_789));
        assert_eq!(a.hardware_ns, None);
        assert_eq!(a.drops, Some(7));

        let mut c = Vec::new();
        overflow(&mut c, 0);
        timestamping(&mut c, 5_000_000_001, 9_000_000_002);
        let a = parse(&c);
        assert_eq!(
            (a.software_ns, a.hardware_ns, a.drops),
            (Some(5_000_000_001), Some(9_000_000_002), Some(0))
        );

        let mut c = Vec::new();
        cmsg(
            &mut c,
            libc::SOL_SOCKET,
            libc::SCM_TIMESTAMPNS,
            &timespec(42_000_000_000),
        );
        assert_eq!(parse(&c).software_ns, Some(42_000_000_000));
    }

    #[test]
    fn malformed_control_bytes_give_what_they_can_never_a_panic() {
        let mut c = Vec::new();
        overflow(&mut c, 3);
        timestamping(&mut c, 1_000_000_000, 0);
        for cut in 0..c.len() {
            let a = parse(&c[..cut]);
            if a.software_ns.is_some() {
                assert_eq!(a.drops, Some(3));
            }
        }
        assert_eq!(parse(&c).software_ns, Some(1_000_000_000));
        // A length field claiming more than there is, or less than a header.
        let mut bad = c.clone();
        bad[0] = 0xff;
        assert_eq!(parse(&bad), Ancillary::default());
        let mut bad = c.clone();
        bad[0] = 1;
        assert_eq!(parse(&bad), Ancillary::default());
        // Unknown levels and types are skipped.
        let mut c = Vec::new();
        cmsg(&mut c, libc::IPPROTO_IP, 8, &[1, 2, 3, 4]);
        overflow(&mut c, 9);
        assert_eq!(parse(&c).drops, Some(9));
        // A nanosecond field out of range is no stamp.
        let mut d = timespec(1);
        d[8..16].copy_from_slice(&2_000_000_000i64.to_ne_bytes());
        let mut c = Vec::new();
        cmsg(&mut c, libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &d);
        assert_eq!(parse(&c).software_ns, None);
    }
}
