//! `[[can]]` and `[[udp]]`: what the entries accept, and the errors (line,
//! column, key, message, hint) for what cannot work.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;

use edgerec_config::{CanFilter, Config, ConfigError, PacketDecoder};

fn parse(text: &str) -> Result<Config, Box<ConfigError>> {
    Config::parse(text, Path::new("edgerec.toml")).map_err(Box::new)
}

#[track_caller]
fn error(text: &str) -> ConfigError {
    match parse(text) {
        Ok(c) => panic!("accepted {text:?} as {:?} {:?}", c.can, c.udp),
        Err(err) => *err,
    }
}

#[test]
fn a_can_interface_takes_the_defaults() {
    let cfg = parse("[[can]]\ninterface = \"can0\"\n").unwrap();
    let c = &cfg.can[0];
    assert_eq!(c.classic_topic(), "/can/can0");
    assert_eq!(c.fd_topic(), "/can/can0/fd");
    assert_eq!(c.topics(), vec!["/can/can0".to_owned()]);
    assert!(!c.fd && c.error_frames && c.filters.is_empty());
    assert_eq!(c.receive_buffer, 4 << 20);
}

#[test]
fn every_can_key_reads() {
    let cfg = parse(
        r#"[[can]]
interface = "vcan1"
topic = "/vehicle/can"
fd = true
filters = ["123:7FF", "18FF0000:1FFF0000", "200~700"]
error_frames = false
receive_buffer = "1MiB"
"#,
    )
    .unwrap();
    let c = &cfg.can[0];
    assert_eq!(c.topics(), vec!["/vehicle/can", "/vehicle/can/fd"]);
    assert_eq!(
        c.filters,
        vec![
            CanFilter {
                id: 0x123,
                mask: 0x7FF,
                inverted: false
            },
            CanFilter {
                id: 0x98FF_0000,
                mask: 0x1FFF_0000,
                inverted: false
            },
            CanFilter {
                id: 0x200,
                mask: 0x700,
                inverted: true
            },
        ]
    );
    assert!(!c.error_frames);
}

#[test]
fn a_can_entry_without_interface_or_with_a_bad_filter_names_the_fix() {
    let err = error("[[can]]\nfd = true\n");
    assert_eq!(err.key.as_deref(), Some("can[0].interface"), "{err}");
    assert!(err
        .hint
        .as_deref()
        .unwrap()
        .contains("interface = \"can0\""));
    let err = error("[[can]]\ninterface = \"can0\"\nfilters = [\"123/7FF\"]\n");
    assert_eq!(
        (err.line, err.column, err.key.as_deref()),
        (Some(3), Some(11), Some("can[0].filters"))
    );
    assert_eq!(err.message, "`123/7FF` is not a filter");
    assert!(
        err.hint.as_deref().unwrap().contains("\"123:7FF\""),
        "{err}"
    );
    let err = error("[[can]]\ninterface = \"a very long name\"\n");
    assert!(err.message.contains("15 bytes"), "{err}");
}

#[test]
fn two_entries_for_one_interface_or_topic_are_refused() {
    let err = error("[[can]]\ninterface = \"can0\"\n\n[[can]]\ninterface = \"can0\"\n");
    assert_eq!(
        (err.line, err.key.as_deref()),
        (Some(5), Some("can[1].interface"))
    );
    assert_eq!(err.message, "interface `can0` is recorded twice");
    assert!(
        err.hint.as_deref().unwrap().starts_with("can[0] (line 2)"),
        "{err}"
    );
    let err = error(
        "[[can]]\ninterface = \"can0\"\nfd = true\n\n[[can]]\ninterface = \"can1\"\ntopic = \"/can/can0/fd\"\n",
    );
    assert_eq!(err.message, "duplicate topic `/can/can0/fd`");
    let err = error(
        "[[can]]\ninterface = \"can0\"\n\n[[udp]]\ntopic = \"/can/can0\"\nbind = \"0.0.0.0:7502\"\n",
    );
    assert_eq!(
        (err.line, err.key.as_deref()),
        (Some(5), Some("udp[0].topic"))
    );
    assert_eq!(err.message, "`/can/can0` is also a [[can]] topic");
}

#[test]
fn a_udp_stream_reads_every_key() {
    let cfg = parse(
        r#"[[udp]]
topic = "/lidar/packets"
bind = "0.0.0.0:7502"
multicast = "239.255.0.1"
interface = "eth0"
max_packet = 24896
sources = ["192.168.1.201", "192.168.1.202:7502"]
decoder = "ouster"
receive_buffer = "64MiB"
"#,
    )
    .unwrap();
    let u = &cfg.udp[0];
    assert_eq!(u.bind, SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7502));
    assert_eq!(u.multicast, Some(Ipv4Addr::new(239, 255, 0, 1)));
    assert_eq!(u.interface, "eth0");
    assert_eq!(u.max_packet, 24896);
    assert_eq!(u.sources.len(), 2);
    assert_eq!(u.sources[1].to_string(), "192.168.1.202:7502");
    assert_eq!(u.decoder, PacketDecoder::Ouster);
    assert_eq!(u.receive_buffer, 64 << 20);
    let d = parse("[[udp]]\ntopic = \"/r\"\nbind = \"127.0.0.1:2368\"\n").unwrap();
    assert_eq!(d.udp[0].max_packet, 65535);
    assert_eq!(d.udp[0].decoder, PacketDecoder::None);
    assert!(d.udp[0].multicast.is_none() && d.udp[0].sources.is_empty());
}

#[test]
fn udp_mistakes_point_at_the_key() {
    let err = error("[[udp]]\ntopic = \"/l\"\n");
    assert_eq!(err.key.as_deref(), Some("udp[0].bind"), "{err}");
    let err = error("[[udp]]\ntopic = \"/l\"\nbind = \"7502\"\n");
    assert_eq!((err.line, err.column), (Some(3), Some(8)), "{err}");
    assert_eq!(err.message, "`7502` is not an IPv4 address and port");
    let err = error("[[udp]]\ntopic = \"/l\"\nbind = \"[::]:7502\"\n");
    assert_eq!(err.message, "`[::]:7502`: IPv6 is not supported yet");
    let err = error("[[udp]]\ntopic = \"/l\"\nbind = \"0.0.0.0:0\"\n");
    assert!(err.message.contains("port 0"), "{err}");
    let err = error("[[udp]]\ntopic = \"/l\"\nbind = \"0.0.0.0:1\"\nmulticast = \"10.0.0.1\"\n");
    assert_eq!(
        err.message,
        "`10.0.0.1` is not a multicast group (224.0.0.0/4)"
    );
    let err = error("[[udp]]\ntopic = \"/l\"\nbind = \"0.0.0.0:1\"\ninterface = \"eth0\"\n");
    assert_eq!(
        (err.line, err.key.as_deref()),
        (Some(4), Some("udp[0].interface"))
    );
    let err = error("[[udp]]\ntopic = \"/l\"\nbind = \"10.0.0.2:1\"\nmulticast = \"239.1.1.1\"\n");
    assert_eq!(err.key.as_deref(), Some("udp[0].bind"));
    assert_eq!(
        err.hint.as_deref(),
        Some("bind to \"0.0.0.0:1\" or \"239.1.1.1:1\"")
    );
    let err = error("[[udp]]\ntopic = \"/l\"\nbind = \"0.0.0.0:1\"\nsources = [\"host:1\"]\n");
    assert_eq!(
        err.message,
        "`host:1` is not an IPv4 address or address:port"
    );
    let err = error("[[udp]]\ntopic = \"/l\"\nbind = \"0.0.0.0:1\"\nmax_packet = 70000\n");
    assert_eq!(err.key.as_deref(), Some("udp[0].max_packet"));
    let err = error("[[udp]]\ntopic = \"/l\"\nbind = \"0.0.0.0:1\"\ndecoder = \"sick\"\n");
    assert!(err.hint.as_deref().unwrap().contains("ouster"), "{err}");
    let err = error(
        "[[udp]]\ntopic = \"/a\"\nbind = \"0.0.0.0:1\"\n\n[[udp]]\ntopic = \"/b\"\nbind = \"0.0.0.0:1\"\n",
    );
    assert_eq!(
        (err.line, err.key.as_deref()),
        (Some(7), Some("udp[1].bind"))
    );
    assert_eq!(err.message, "`0.0.0.0:1` is received twice");
}
