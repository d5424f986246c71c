//! A pcap file of UDP packets: the classic libpcap format (magic
//! `a1b2c3d4`, microsecond timestamps, link type Ethernet) that tshark,
//! Wireshark, VeloView and Ouster Studio open, each recorded datagram
//! framed again as Ethernet / IPv4 / UDP with its receive time.
//!
//! What the recording does not hold is filled in plainly: MAC addresses
//! are locally administered constants (`02:00:00:00:00:01` the sender,
//! `:02` the receiver), the IPv4 header has a TTL of 64, "don't fragment"
//! and an identification counting up, and both checksums are computed.
//! The destination is the stream's multicast group, else its bound
//! address; a stream bound to 0.0.0.0 (every address) did not learn which
//! one a packet was sent to, and its packets say 0.0.0.0.

use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddrV4};

/// Largest UDP payload that fits an IPv4 datagram.
pub const MAX_UDP_PAYLOAD: usize = 65_535 - 20 - 8;
/// The capture length in the header: a whole datagram with its framing.
const SNAPLEN: u32 = 65_535 + 14;
const ETH_SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const ETH_DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

/// Writes packets to a pcap stream.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    ip_id: u16,
    frame: Vec<u8>,
    /// Packets written.
    pub packets: u64,
}

/// RFC 1071 one's complement sum, folded; the checksum is its complement.
fn ones_complement_sum(mut sum: u32, bytes: &[u8]) -> u32 {
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header.
    pub fn new(mut out: W) -> io::Result<PcapWriter<W>> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        h.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        h.extend_from_slice(&SNAPLEN.to_le_bytes());
        h.extend_from_slice(&1u32.to_le_bytes()); // LINKTYPE_ETHERNET
        out.write_all(&h)?;
        Ok(PcapWriter {
            out,
            ip_id: 0,
            frame: Vec::with_capacity(2048),
            packets: 0,
        })
    }

    /// Writes one datagram from `src` to `dst` received at `time_ns`.
    pub fn write(
        &mut self,
        time_ns: u64,
        src: SocketAddrV4,
        dst: SocketAddrV4,
        payload: &[u8],
    ) -> io::Result<()> {
        if payload.len() > MAX_UDP_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a {}-byte payload does not fit an IPv4 UDP datagram ({MAX_UDP_PAYLOAD} at most)",
                    payload.len()
                ),
            ));
        }
        let udp_len = 8 + payload.len();
        let ip_len = 20 + udp_len;
        let f = &mut self.frame;
        f.clear();
        f.extend_from_slice(&ETH_DST);
        f.extend_from_slice(&ETH_SRC);
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        let ip_at = f.len();
        f.extend_from_slice(&[0x45, 0]);
        f.extend_from_slice(&(ip_len as u16).to_be_bytes());
        f.extend_from_slice(&self.ip_id.to_be_bytes());
        f.extend_from_slice(&0x4000u16.to_be_bytes());
        f.extend_from_slice(&[64, 17, 0, 0]);
        f.extend_from_slice(&src.ip().octets());
        f.extend_from_slice(&dst.ip().octets());
        let ip_sum = !(ones_complement_sum(0, &f[ip_at..ip_at + 20]) as u16);
        f[ip_at + 10..ip_at + 12].copy_from_slice(&ip_sum.to_be_bytes());
        let udp_at = f.len();
        f.extend_from_slice(&src.port().to_be_bytes());
        f.extend_from_slice(&dst.port().to_be_bytes());
        f.extend_from_slice(&(udp_len as u16).to_be_bytes());
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(payload);
        // The UDP checksum covers a pseudo-header of the addresses, the
        // protocol and the length; 0 means "none", so a sum of 0 is sent
        // as 0xffff.
        let mut pseudo = Vec::with_capacity(12);
        pseudo.extend_from_slice(&src.ip().octets());
        pseudo.extend_from_slice(&dst.ip().octets());
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&(udp_len as u16).to_be_bytes());
        let sum = ones_complement_sum(ones_complement_sum(0, &pseudo), &f[udp_at..]);
        let udp_sum = match !(sum as u16) {
            0 => 0xffff,
            s => s,
        };
        f[udp_at + 6..udp_at + 8].copy_from_slice(&udp_sum.to_be_bytes());
        self.ip_id = self.ip_id.wrapping_add(1);

        let us = time_ns / 1_000;
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&((us / 1_000_000) as u32).to_le_bytes());
        rec[4..8].copy_from_slice(&((us % 1_000_000) as u32).to_le_bytes());
        rec[8..12].copy_from_slice(&(f.len() as u32).to_le_bytes());
        rec[12..16].copy_from_slice(&(f.len() as u32).to_le_bytes());
        self.out.write_all(&rec)?;
        self.out.write_all(f)?;
        self.packets += 1;
        Ok(())
    }

    /// Flushes and returns the stream.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// The destination a stream's packets are written with: its multicast
/// group, else its bound address (0.0.0.0 when bound to every address).
pub fn destination(bind: SocketAddrV4, multicast: Option<Ipv4Addr>) -> SocketAddrV4 {
    SocketAddrV4::new(multicast.unwrap_or(*bind.ip()), bind.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_and_checksums_are_what_a_reader_expects() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        let src: SocketAddrV4 = "192.168.1.201:7502".parse().unwrap();
        let dst: SocketAddrV4 = "192.168.1.100:7502".parse().unwrap();
        w.write(1_700_000_000_123_456_789, src, dst, b"hello")
            .unwrap();
        w.write(1_700_000_001_000_000_000, src, dst, &[]).unwrap();
        let b = w.finish().unwrap();
        assert_eq!(&b[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 1);
        let rec = &b[24..];
        assert_eq!(
            u32::from_le_bytes(rec[0..4].try_into().unwrap()),
            1_700_000_000
        );
        assert_eq!(u32::from_le_bytes(rec[4..8].try_into().unwrap()), 123_456);
        let len = u32::from_le_bytes(rec[8..12].try_into().unwrap()) as usize;
        assert_eq!(len, 14 + 20 + 8 + 5);
        let frame = &rec[16..16 + len];
        let ip = &frame[14..34];
        // A header whose checksum is right sums to 0xffff.
        assert_eq!(ones_complement_sum(0, ip), 0xffff);
        assert_eq!(&ip[12..16], &[192, 168, 1, 201]);
        let udp = &frame[34..];
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&ip[12..20]);
        pseudo.extend_from_slice(&[0, 17, 0, 13]);
        assert_eq!(
            ones_complement_sum(ones_complement_sum(0, &pseudo), udp),
            0xffff
        );
        assert_eq!(&udp[8..], b"hello");
        assert_eq!(u16::from_be_bytes([udp[0], udp[1]]), 7502);
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        assert!(w.write(0, src, dst, &vec![0; MAX_UDP_PAYLOAD + 1]).is_err());
        assert_eq!(
            destination(
                "0.0.0.0:2368".parse().unwrap(),
                Some(Ipv4Addr::new(239, 1, 1, 1))
            ),
            "239.1.1.1:2368".parse().unwrap()
        );
    }
}
