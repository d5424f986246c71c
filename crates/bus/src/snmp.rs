//! The kernel's UDP counters in `/proc/net/snmp` (per network namespace):
//! `RcvbufErrors` counts datagrams dropped because a socket's receive
//! buffer was full, `InErrors` every datagram dropped on receive. They
//! cover every UDP socket of the namespace, so the source reports how
//! they rose during its run beside its own socket's exact count
//! (`SO_RXQ_OVFL`, `SO_MEMINFO`).

use std::path::Path;

/// The receive-side UDP counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpCounters {
    /// `InDatagrams`: delivered to a socket.
    pub in_datagrams: u64,
    /// `InErrors`: dropped on receive, for any reason.
    pub in_errors: u64,
    /// `RcvbufErrors`: dropped because a receive buffer was full.
    pub rcvbuf_errors: u64,
}

/// The `Udp:` counters of an snmp file's text (a header line of names,
/// then a line of values); `None` when the text has no such pair.
pub fn parse(text: &str) -> Option<UdpCounters> {
    let mut lines = text.lines().filter(|l| l.starts_with("Udp: "));
    let names: Vec<&str> = lines.next()?.split_whitespace().skip(1).collect();
    let values: Vec<&str> = lines.next()?.split_whitespace().skip(1).collect();
    if names.len() != values.len() {
        return None;
    }
    let get = |name: &str| -> Option<u64> {
        let i = names.iter().position(|n| *n == name)?;
        values[i].parse().ok()
    };
    Some(UdpCounters {
        in_datagrams: get("InDatagrams")?,
        in_errors: get("InErrors")?,
        rcvbuf_errors: get("RcvbufErrors").unwrap_or(0),
    })
}

/// `/proc/net/snmp` of this network namespace, read now.
pub fn read() -> Option<UdpCounters> {
    read_from(Path::new("/proc/net/snmp"))
}

/// An snmp file at `path`.
pub fn read_from(path: &Path) -> Option<UdpCounters> {
    parse(&std::fs::read_to_string(path).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    // From a Debian 12 host (Linux 6.1).
    const SNMP: &str = "Ip: Forwarding DefaultTTL InReceives\nIp: 1 64 123\n\
        Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
        Udp: 1000 2 37 900 35 0 2 0 0\n\
        UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n\
        UdpLite: 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn reads_the_udp_line_not_udplite() {
        assert_eq!(
            parse(SNMP),
            Some(UdpCounters {
                in_datagrams: 1000,
                in_errors: 37,
                rcvbuf_errors: 35
            })
        );
        assert_eq!(parse("Ip: a\nIp: 1\n"), None);
        assert_eq!(parse("Udp: InDatagrams InErrors\nUdp: 1\n"), None);
    }

    #[test]
    fn datagrams_received_here_are_counted() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let before = read().expect("/proc/net/snmp has a Udp line");
        for _ in 0..3 {
            tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
        }
        let mut buf = [0u8; 4];
        for _ in 0..3 {
            rx.recv_from(&mut buf).unwrap();
        }
        let after = read().unwrap();
        // Other sockets of this namespace may add to it, never take away.
        assert!(
            after.in_datagrams >= before.in_datagrams + 3,
            "{before:?} {after:?}"
        );
    }
}
