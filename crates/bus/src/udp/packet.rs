//! `edgerec_msgs/msg/Packet`: one datagram as it arrived,
//!
//! ```text
//! builtin_interfaces/Time stamp   # the kernel's receive time, on the recording clock
//! string source                   # the sender, "address:port"
//! uint8[] data                    # the UDP payload
//! ```
//!
//! and the channel a `[[udp]]` stream records on, whose metadata tells
//! the tools what the packets are (`decoder`) and where they were
//! received (`bind`, `multicast`).

use std::collections::BTreeMap;
use std::net::SocketAddrV4;

use edgerec_config::UdpConfig;
use edgerec_format::bag::qos_profile_yaml;
use edgerec_format::cdr::{msg, Time};
use edgerec_ros::cdr_reader::{CdrError, CdrReader};
use edgerec_source::ChannelSpec;

/// The message type of every packet.
pub const PACKET_TYPE: &str = "edgerec_msgs/msg/Packet";

/// The channel of a stream.
pub fn channel_spec(cfg: &UdpConfig) -> ChannelSpec {
    let schema = edgerec_format::msgdefs::lookup(PACKET_TYPE)
        .map(|d| d.text().as_bytes().to_vec())
        .unwrap_or_default();
    let mut metadata = BTreeMap::from([
        ("decoder".to_owned(), cfg.decoder.as_str().to_owned()),
        ("bind".to_owned(), cfg.bind.to_string()),
        ("max_packet".to_owned(), cfg.max_packet.to_string()),
        (
            // Sensor data: best effort, as the packet drivers publish it.
            "offered_qos_profiles".to_owned(),
            qos_profile_yaml(false, false, 10),
        ),
    ]);
    if let Some(g) = cfg.multicast {
        metadata.insert("multicast".to_owned(), g.to_string());
    }
    if !cfg.sources.is_empty() {
        let s: Vec<String> = cfg.sources.iter().map(ToString::to_string).collect();
        metadata.insert("sources".to_owned(), s.join(","));
    }
    ChannelSpec {
        topic: cfg.topic.clone(),
        type_name: PACKET_TYPE.to_owned(),
        message_encoding: "cdr".to_owned(),
        schema_encoding: "ros2msg".to_owned(),
        schema,
        metadata,
        latched: false,
    }
}

/// Writes one packet's message into `buf` (cleared first) and returns it.
pub fn encode_into(mut buf: Vec<u8>, stamp_ns: u64, source: &str, data: &[u8]) -> Vec<u8> {
    buf.clear();
    msg::packet_into(&mut buf, Time::from(stamp_ns), source, data);
    buf
}

/// A packet read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<'a> {
    /// `stamp`, ns since the epoch.
    pub stamp_ns: u64,
    /// `source`, as recorded.
    pub source: &'a str,
    /// The sender, when `source` is an IPv4 `address:port`.
    pub from: Option<SocketAddrV4>,
    /// The payload.
    pub data: &'a [u8],
}

/// Reads an `edgerec_msgs/msg/Packet`.
pub fn decode(payload: &[u8]) -> Result<Packet<'_>, CdrError> {
    let mut r = CdrReader::new(payload)?;
    let sec = r.i32("stamp.sec")?;
    let nanosec = r.u32("stamp.nanosec")?;
    let source = r.string("source")?;
    let n = r.sequence_len("data", 1)?;
    let data = r.bytes("data", n)?;
    r.finish()?;
    Ok(Packet {
        stamp_ns: (i64::from(sec) * 1_000_000_000 + i64::from(nanosec)).max(0) as u64,
        source,
        from: source.parse().ok(),
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn packets_round_trip_and_the_channel_says_what_they_are() {
        let data: Vec<u8> = (0..24_896u32).map(|i| (i % 253) as u8).collect();
        let m = encode_into(
            Vec::new(),
            1_700_000_000_123_456_789,
            "192.168.1.201:7502",
            &data,
        );
        let p = decode(&m).unwrap();
        assert_eq!(p.stamp_ns, 1_700_000_000_123_456_789);
        assert_eq!(p.from, Some("192.168.1.201:7502".parse().unwrap()));
        assert_eq!(p.data, &data[..]);
        for cut in [0, 3, 4, 11, 16, 40, m.len() - 1] {
            assert!(decode(&m[..cut]).is_err(), "cut at {cut}");
        }
        let mut cfg = UdpConfig::new(
            "/lidar/packets",
            SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7502),
        );
        cfg.decoder = edgerec_config::PacketDecoder::Ouster;
        cfg.multicast = Some(Ipv4Addr::new(239, 255, 0, 1));
        let c = channel_spec(&cfg);
        assert_eq!(c.type_name, PACKET_TYPE);
        assert_eq!(c.metadata["decoder"], "ouster");
        assert_eq!(c.metadata["bind"], "0.0.0.0:7502");
        assert_eq!(c.metadata["multicast"], "239.255.0.1");
        assert!(String::from_utf8(c.schema)
            .unwrap()
            .contains("uint8[] data"));
    }
}
