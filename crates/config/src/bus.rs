//! `[[can]]` and `[[udp]]`: vehicle buses and raw sensor packets read from
//! sockets (`edgerec-bus`). The rows, the readers of the values only these
//! tables have (interface names, candump-style filters, IPv4 addresses,
//! sender filters) and the checks across their entries.

use std::net::{Ipv4Addr, SocketAddrV4};

use crate::document::{Cx, Field, Table};
use crate::readers;
use crate::schema::{boolean, choice, int, read, section, size, Result, KIB, MIB};

/// Linux keeps interface names in `IFNAMSIZ` (16) bytes with the NUL.
const IFNAME_MAX: usize = 15;

/// `CAN_EFF_FLAG`: the extended-frame bit of a SocketCAN id.
const CAN_EFF_FLAG: u32 = 0x8000_0000;
/// `CAN_ERR_FLAG`: the error-frame bit of a SocketCAN id.
const CAN_ERR_FLAG: u32 = 0x2000_0000;

/// One kernel receive filter of a `[[can]]` interface, as candump writes
/// it: `<id>:<mask>` passes a frame when `frame_id & mask == id & mask`,
/// `<id>~<mask>` when it does not (`CAN_INV_FILTER`). Hex digits; an id
/// written with 8 digits is an extended one (`CAN_EFF_FLAG` set), as in
/// candump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CanFilter {
    /// `can_filter.can_id`, with `CAN_EFF_FLAG` for an 8-digit id.
    pub id: u32,
    /// `can_filter.can_mask`, without `CAN_ERR_FLAG` (as candump clears it).
    pub mask: u32,
    /// `~`: pass what does not match.
    pub inverted: bool,
}

/// What a `[[udp]]` stream's packets are, for the tools that decode them
/// later (`udp[].decoder`); edgerec records the bytes as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketDecoder {
    /// No hint (the default).
    None,
    /// Ouster lidar packets (Ouster Studio, ouster-sdk).
    Ouster,
    /// Velodyne lidar packets (VeloView, velodyne_driver).
    Velodyne,
    /// Hesai lidar packets (PandarView, HesaiLidar_ROS_2.0).
    Hesai,
}

impl PacketDecoder {
    /// Every hint, in the order the TOML spellings are listed.
    pub const ALL: [PacketDecoder; 4] = [
        PacketDecoder::None,
        PacketDecoder::Ouster,
        PacketDecoder::Velodyne,
        PacketDecoder::Hesai,
    ];

    /// The TOML spelling, also the channel metadata's `decoder` value.
    pub fn as_str(&self) -> &'static str {
        match self {
            PacketDecoder::None => "none",
            PacketDecoder::Ouster => "ouster",
            PacketDecoder::Velodyne => "velodyne",
            PacketDecoder::Hesai => "hesai",
        }
    }
}

/// A sender a `[[udp]]` stream records (`udp[].sources`): an address, and
/// a port or any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketSender {
    /// The sender's IPv4 address.
    pub ip: Ipv4Addr,
    /// Its UDP port; `None` = any.
    pub port: Option<u16>,
}

impl PacketSender {
    /// True when a packet from `from` is this sender's.
    pub fn matches(&self, from: SocketAddrV4) -> bool {
        *from.ip() == self.ip && self.port.is_none_or(|p| p == from.port())
    }
}

impl std::fmt::Display for PacketSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(p) => write!(f, "{}:{p}", self.ip),
            None => write!(f, "{}", self.ip),
        }
    }
}

section! {
    /// One `[[can]]`: a SocketCAN interface, every frame it receives
    /// recorded as `can_msgs/msg/Frame` (classic, remote and error frames)
    /// and, with `fd`, CAN FD frames as `ros2_socketcan_msgs/msg/FdFrame`.
    /// The bitrate is the interface's (systemd-networkd, `board/`), not
    /// edgerec's.
    #[derive(Debug, Clone, PartialEq)]
    pub struct CanConfig {
        /// The interface (`can0`, `vcan0`). Required.
        interface: String = String::new(), read(interface_name),
            required "add interface = \"can0\" (see `ip link show type can`)";
        /// The topic of its classic frames; empty = `/can/<interface>`
        /// (default). CAN FD frames go on `<topic>/fd`.
        topic: String = String::new(), read(readers::topic_or_empty);
        /// Also receive CAN FD frames (`CAN_RAW_FD_FRAMES`), on
        /// `<topic>/fd`. Default false.
        fd: bool = false, boolean();
        /// Kernel filters, candump's syntax: `"<id>:<mask>"` or
        /// `"<id>~<mask>"` (inverted), hex. Empty = every frame (default).
        filters: Vec<CanFilter> = Vec::new(), read(can_filters);
        /// Record error frames (every `CAN_ERR_*` class: bus-off, error
        /// passive, lost arbitration, ...). Default true.
        error_frames: bool = true, boolean();
        /// The socket's receive buffer (`SO_RCVBUF`); 64 KiB to 256 MiB.
        /// Default 4 MiB (about 4,000 frames).
        receive_buffer: u64 = 4 * MIB, size(64 * KIB..=256 * MIB);
    }
}

impl CanConfig {
    /// The topic of its classic frames.
    pub fn classic_topic(&self) -> String {
        if self.topic.is_empty() {
            format!("/can/{}", self.interface)
        } else {
            self.topic.clone()
        }
    }

    /// The topic of its CAN FD frames.
    pub fn fd_topic(&self) -> String {
        format!("{}/fd", self.classic_topic())
    }

    /// Its topics: the classic one, and the FD one with `fd`.
    pub fn topics(&self) -> Vec<String> {
        let mut t = vec![self.classic_topic()];
        if self.fd {
            t.push(self.fd_topic());
        }
        t
    }

    /// An entry for `interface` with every other key at its default.
    pub fn new(interface: impl Into<String>) -> Self {
        CanConfig {
            interface: interface.into(),
            ..Self::seed()
        }
    }
}

section! {
    /// One `[[udp]]`: a UDP port (and optionally a multicast group), each
    /// datagram recorded as one `edgerec_msgs/msg/Packet`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct UdpConfig {
        /// The topic its packets are recorded on. Required.
        topic: String = String::new(), read(readers::topic),
            required "add topic = \"/lidar/packets\"";
        /// The local IPv4 address and port to receive on (`"0.0.0.0:7502"`:
        /// every address). Required.
        bind: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), read(socket_address),
            required "add bind = \"0.0.0.0:7502\" (address:port; 0.0.0.0 = every address)";
        /// A multicast group to join (`"239.255.0.1"`); empty = none
        /// (default).
        multicast: Option<Ipv4Addr> = None, read(multicast_group);
        /// `multicast`: the interface to join it on (`eth0`); empty = the
        /// one the routing table picks (default).
        interface: String = String::new(), read(interface_name_or_empty);
        /// Longest datagram recorded whole; 64 to 65535 bytes. Default 65535
        /// (every UDP datagram). A longer one is cut by the kernel: counted
        /// as lost and logged, never recorded cut.
        max_packet: u32 = 65535, int(64..=65535);
        /// Record only packets from these senders, `"ip"` or `"ip:port"`;
        /// empty = every sender (default). Others are counted and ignored.
        sources: Vec<PacketSender> = Vec::new(), read(packet_senders);
        /// What the packets are, for the tools that decode them: `none`
        /// (default), `ouster`, `velodyne`, `hesai`; in the channel's
        /// metadata.
        decoder: PacketDecoder = PacketDecoder::None,
            choice(&PacketDecoder::ALL, PacketDecoder::as_str);
        /// The socket's receive buffer (`SO_RCVBUF`); 64 KiB to 1 GiB.
        /// Default 32 MiB (about 1 s of an Ouster OS1-128 at 2048x10). The
        /// kernel caps it at `net.core.rmem_max` unless edgerec may force
        /// it (CAP_NET_ADMIN); the board raises the cap.
        receive_buffer: u64 = 32 * MIB, size(64 * KIB..=1024 * MIB);
    }
    check udp_consistent;
}

impl UdpConfig {
    /// A stream on `topic` bound to `bind`, every other key at its default.
    pub fn new(topic: impl Into<String>, bind: SocketAddrV4) -> Self {
        UdpConfig {
            topic: topic.into(),
            bind,
            ..Self::seed()
        }
    }
}

/// A network interface name as Linux allows it: 1 to 15 bytes, no `/`,
/// no whitespace, not `.` or `..`.
fn check_interface(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("an interface name must not be empty".to_owned());
    }
    if name.len() > IFNAME_MAX {
        return Err(format!(
            "`{name}` is longer than the {IFNAME_MAX} bytes Linux allows an interface name"
        ));
    }
    if name == "." || name == ".." || name.contains('/') || name.contains(char::is_whitespace) {
        return Err(format!("`{name}` is not an interface name"));
    }
    Ok(())
}

fn interface_name(cx: &Cx, field: &Field) -> Result<String> {
    let name = cx.string(field)?;
    check_interface(name).map_err(|m| {
        cx.at(
            field,
            m,
            Some("write the name `ip link` shows (can0, vcan0)".to_owned()),
        )
    })?;
    Ok(name.to_owned())
}

fn interface_name_or_empty(cx: &Cx, field: &Field) -> Result<String> {
    let name = cx.string(field)?;
    if name.is_empty() {
        return Ok(String::new());
    }
    interface_name(cx, field)
}

/// `"123:7FF"`, `"12345678:1FFFFFFF"`, `"123~7FF"`: candump's filter
/// syntax (candump.c: 8 id digits set `CAN_EFF_FLAG`; the mask loses
/// `CAN_ERR_FLAG`, error frames being chosen by `error_frames`).
pub(crate) fn parse_can_filter(text: &str) -> std::result::Result<CanFilter, String> {
    let (id, mask, inverted) = if let Some((i, m)) = text.split_once(':') {
        (i, m, false)
    } else if let Some((i, m)) = text.split_once('~') {
        (i, m, true)
    } else {
        return Err(format!("`{text}` is not a filter"));
    };
    let hex = |s: &str, what: &str| {
        if s.is_empty() || s.len() > 8 || !s.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!(
                "`{text}`: the {what} `{s}` is not 1 to 8 hex digits"
            ));
        }
        u32::from_str_radix(s, 16).map_err(|e| format!("`{text}`: {e}"))
    };
    let mut id_v = hex(id, "id")?;
    let mask_v = hex(mask, "mask")? & !CAN_ERR_FLAG;
    if id.len() == 8 {
        id_v |= CAN_EFF_FLAG;
    }
    Ok(CanFilter {
        id: id_v,
        mask: mask_v,
        inverted,
    })
}

fn can_filters(cx: &Cx, field: &Field) -> Result<Vec<CanFilter>> {
    let list = readers::string_list(cx, field)?;
    // The kernel takes at most CAN_RAW_FILTER_MAX (512) filters.
    if list.len() > 512 {
        return Err(cx.at(
            field,
            format!("{} filters, more than the kernel's 512", list.len()),
            Some("merge filters with a wider mask".to_owned()),
        ));
    }
    list.iter()
        .map(|t| {
            parse_can_filter(t).map_err(|m| {
                cx.at(
                    field,
                    m,
                    Some(
                        "write \"<id>:<mask>\" in hex as candump does (\"123:7FF\" passes id \
                         0x123; 8 id digits for an extended id; \"~\" for the inverse)"
                            .to_owned(),
                    ),
                )
            })
        })
        .collect()
}

fn socket_address(cx: &Cx, field: &Field) -> Result<SocketAddrV4> {
    let text = cx.string(field)?;
    let hint = Some("write bind = \"0.0.0.0:7502\" (an IPv4 address and a port)".to_owned());
    let addr: SocketAddrV4 = text.parse().map_err(|_| {
        let v6 = text.starts_with('[') || text.matches(':').count() > 1;
        let message = if v6 {
            format!("`{text}`: IPv6 is not supported yet")
        } else {
            format!("`{text}` is not an IPv4 address and port")
        };
        cx.at(field, message, hint.clone())
    })?;
    if addr.port() == 0 {
        return Err(cx.at(
            field,
            format!("`{text}`: port 0 picks a random port no sensor sends to"),
            Some("give the port the sensor sends to (Ouster: 7502, Velodyne: 2368)".to_owned()),
        ));
    }
    Ok(addr)
}

fn multicast_group(cx: &Cx, field: &Field) -> Result<Option<Ipv4Addr>> {
    let text = cx.string(field)?;
    if text.is_empty() {
        return Ok(None);
    }
    let ip: Ipv4Addr = text.parse().map_err(|_| {
        cx.at(
            field,
            format!("`{text}` is not an IPv4 address"),
            Some("write multicast = \"239.255.0.1\"".to_owned()),
        )
    })?;
    if !ip.is_multicast() {
        return Err(cx.at(
            field,
            format!("`{ip}` is not a multicast group (224.0.0.0/4)"),
            Some("leave multicast out to receive unicast and broadcast packets".to_owned()),
        ));
    }
    Ok(Some(ip))
}

fn packet_senders(cx: &Cx, field: &Field) -> Result<Vec<PacketSender>> {
    let list = readers::string_list(cx, field)?;
    list.iter()
        .map(|t| {
            let parsed = if let Ok(a) = t.parse::<SocketAddrV4>() {
                Some(PacketSender {
                    ip: *a.ip(),
                    port: Some(a.port()),
                })
            } else {
                t.parse::<Ipv4Addr>()
                    .ok()
                    .map(|ip| PacketSender { ip, port: None })
            };
            parsed.ok_or_else(|| {
                cx.at(
                    field,
                    format!("`{t}` is not an IPv4 address or address:port"),
                    Some("write sources = [\"192.168.1.201\", \"192.168.1.202:7502\"]".to_owned()),
                )
            })
        })
        .collect()
}

/// `interface` needs `multicast`; a stream joining a group binds to the
/// group or to every address.
fn udp_consistent(cx: &Cx, table: &Table, config: &UdpConfig) -> Result<()> {
    if !config.interface.is_empty() && config.multicast.is_none() {
        if let Some(field) = table.field("interface") {
            return Err(cx.at(
                &field,
                "`interface` is where a multicast group is joined, and no `multicast` is set",
                Some(
                    "add multicast = \"239.255.0.1\", or remove interface (bind to the \
                     interface's address instead)"
                        .to_owned(),
                ),
            ));
        }
    }
    if let Some(group) = config.multicast {
        let ip = *config.bind.ip();
        if ip != Ipv4Addr::UNSPECIFIED && ip != group {
            if let Some(field) = table.field("bind") {
                return Err(cx.at(
                    &field,
                    format!(
                        "bound to {ip}, a multicast packet for {group} is addressed to the group \
                         and would not arrive"
                    ),
                    Some(format!(
                        "bind to \"0.0.0.0:{port}\" or \"{group}:{port}\"",
                        port = config.bind.port()
                    )),
                ));
            }
        }
    }
    Ok(())
}

/// Each interface once, each topic once; the newest entry is checked
/// against those before it.
pub(crate) fn unique_can(cx: &Cx, entries: &[Table], cans: &[CanConfig]) -> Result<()> {
    let (Some(new), Some((entry, earlier))) = (cans.last(), entries.split_last()) else {
        return Ok(());
    };
    let len = cans.len() - 1;
    let clash = |what: String, first: usize, key: &str, fix: &str| -> Result<()> {
        let Some(field) = entry.field(key).or_else(|| entry.field("interface")) else {
            return Ok(());
        };
        let line = earlier
            .get(first)
            .and_then(|e| cx.line(e.field("interface").and_then(|f| f.span())))
            .map_or(String::new(), |line| format!(" (line {line})"));
        Err(cx.at(
            &field,
            what,
            Some(format!("can[{first}]{line} already has it; {fix}")),
        ))
    };
    if let Some(first) = cans[..len]
        .iter()
        .position(|c| c.interface == new.interface)
    {
        return clash(
            format!("interface `{}` is recorded twice", new.interface),
            first,
            "interface",
            "one entry per interface",
        );
    }
    for topic in new.topics() {
        if let Some(first) = cans[..len].iter().position(|c| c.topics().contains(&topic)) {
            return clash(
                format!("duplicate topic `{topic}`"),
                first,
                "topic",
                "give each interface its own topic",
            );
        }
    }
    Ok(())
}

/// Each topic once, and each (bind, multicast) once: two entries on the
/// same socket would share its packets.
pub(crate) fn unique_udp(cx: &Cx, entries: &[Table], udps: &[UdpConfig]) -> Result<()> {
    let (Some(new), Some((entry, earlier))) = (udps.last(), entries.split_last()) else {
        return Ok(());
    };
    let len = udps.len() - 1;
    let clash = |what: String, first: usize, key: &str, fix: &str| -> Result<()> {
        let Some(field) = entry.field(key).or_else(|| entry.field("topic")) else {
            return Ok(());
        };
        let line = earlier
            .get(first)
            .and_then(|e| cx.line(e.field(key).and_then(|f| f.span())))
            .map_or(String::new(), |line| format!(" (line {line})"));
        Err(cx.at(
            &field,
            what,
            Some(format!("udp[{first}]{line} already has it; {fix}")),
        ))
    };
    if let Some(first) = udps[..len].iter().position(|u| u.topic == new.topic) {
        return clash(
            format!("duplicate topic `{}`", new.topic),
            first,
            "topic",
            "give each stream its own topic",
        );
    }
    if let Some(first) = udps[..len]
        .iter()
        .position(|u| u.bind == new.bind && u.multicast == new.multicast)
    {
        return clash(
            format!("`{}` is received twice", new.bind),
            first,
            "bind",
            "one entry per port (use `sources` to tell senders apart)",
        );
    }
    Ok(())
}

/// No topic of a `[[udp]]` is also a `[[can]]` topic.
pub(crate) fn bus_topics_distinct(cx: &Cx, root: &Table, config: &crate::Config) -> Result<()> {
    let can_topics: Vec<String> = config.can.iter().flat_map(CanConfig::topics).collect();
    let Some(i) = config
        .udp
        .iter()
        .position(|u| can_topics.contains(&u.topic))
    else {
        return Ok(());
    };
    let entries = match root.field("udp") {
        Some(f) => f.entries(cx, "stream")?,
        None => return Ok(()),
    };
    match entries.get(i).and_then(|e| e.field("topic")) {
        Some(field) => Err(cx.at(
            &field,
            format!("`{}` is also a [[can]] topic", config.udp[i].topic),
            Some("give the UDP stream a topic of its own".to_owned()),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_read_as_candump_reads_them() {
        assert_eq!(
            parse_can_filter("123:7FF").unwrap(),
            CanFilter {
                id: 0x123,
                mask: 0x7FF,
                inverted: false
            }
        );
        assert_eq!(
            parse_can_filter("12345678:1fffffff").unwrap(),
            CanFilter {
                id: 0x9234_5678,
                mask: 0x1FFF_FFFF,
                inverted: false
            }
        );
        let f = parse_can_filter("100~E0000700").unwrap();
        assert!(f.inverted);
        assert_eq!(f.mask, 0xC000_0700, "CAN_ERR_FLAG leaves the mask");
        for bad in ["123", "xyz:7FF", "123:", "123456789:1", ":7FF"] {
            assert!(parse_can_filter(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn interface_names_as_linux_allows() {
        assert!(check_interface("can0").is_ok());
        assert!(check_interface("vcan-fd").is_ok());
        for bad in ["", ".", "..", "a/b", "a b", "sixteen_chars_xx"] {
            assert!(check_interface(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn senders_match_address_and_port() {
        let any = PacketSender {
            ip: Ipv4Addr::new(10, 0, 0, 5),
            port: None,
        };
        let one = PacketSender {
            port: Some(7502),
            ..any
        };
        let from = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 5), 7502);
        assert!(any.matches(from) && one.matches(from));
        assert!(!one.matches(SocketAddrV4::new(*from.ip(), 7503)));
        assert!(!any.matches(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 6), 7502)));
        assert_eq!(one.to_string(), "10.0.0.5:7502");
    }
}
