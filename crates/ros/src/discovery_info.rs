//! `ros_discovery_info`: how DDS-based RMWs tell each other which node
//! owns which reader and writer. DDS discovery knows participants and
//! endpoints but not nodes; every ROS 2 context publishes one
//! `rmw_dds_common/msg/ParticipantEntitiesInfo` for its participant,
//! listing its nodes and each node's reader and writer GIDs, and `ros2
//! node list` (and the node column of `ros2 topic info -v`) comes from
//! those samples. edgerec publishes its own so that its node shows up;
//! [`decode`] reads the others' (which node a recorded publisher is in).
//!
//! ```
//! use edgerec_ros::discovery_info::{decode, encode, GidWire, NodeEntities};
//!
//! let participant = [1; 16];
//! let writer = [2; 16];
//! let node = NodeEntities { namespace: "/", name: "edgerec", readers: &[], writers: &[writer] };
//! let cdr = encode(&participant, &[node], GidWire::Bytes24);
//! let info = decode(&cdr, GidWire::Bytes24).unwrap();
//! assert_eq!(info.gid, participant);
//! assert_eq!(info.nodes[0].name, "edgerec");
//! assert_eq!(info.nodes[0].writers, vec![writer]);
//! ```

// Verified in the sources (search index, ros2 organisation):
// - rmw_dds_common `msg/Gid.idl` (dc92e86) and `msg/Gid.msg` (5ab4f59),
//   CHANGELOG: `char[24] data` up to 1.x (Humble); `char[16] data` since
//   2.0.0 (2023-02-13, PR 68, with ros2/rmw PR 345 making
//   `RMW_GID_STORAGE_SIZE` 16): Iron, Jazzy and later. rosbags' type stores
//   agree (24 in `ROS2_HUMBLE`, 16 in `ROS2_IRON` and
//   `ROS2_JAZZY`). The two layouts do not interoperate: pick the peers'.
// - `NodeEntitiesInfo`: `string<=256 node_namespace`, `string<=256
//   node_name`, `Gid[] reader_gid_seq`, `Gid[] writer_gid_seq`: readers
//   first, as rosidl's generated code and rosbags' stores have it (an early
//   `msg/NodeEntitiesInfo.idl`, 2847f8d, lists the writers first).
//   `ParticipantEntitiesInfo`: `Gid gid`, `NodeEntitiesInfo[]
//   node_entities_info_seq`.
// - rmw_cyclonedds `rmw_node.cpp`, `rmw_context_impl_s::init`: the
//   publisher on `ros_discovery_info` is reliable, transient-local, keep
//   last 1 (the rest `rmw_qos_profile_default`); the subscription the same
//   but keep all, ignoring local publications. `convert_guid_to_gid`
//   zeroes the `rmw_gid_t` and copies the 16-byte DDS GUID to its front;
//   rmw_dds_common `convert_gid_to_msg` copies all `RMW_GID_STORAGE_SIZE`
//   bytes, so in Humble a GID is the GUID and 8 zero bytes.
// - A service's request reader and reply writer (a client's request
//   writer and reply reader) are listed under its node too
//   (`rmw_create_service` calls `associate_writer` and
//   `associate_reader`).

use edgerec_format::cdr::CdrWriter;

use crate::cdr_reader::{CdrError, CdrReader};
use crate::graph::Gid;
use crate::qos::{Durability, History, Liveliness, QosProfile, Reliability};

/// The DDS topic (no `rt/` prefix: it is not a ROS topic).
pub const TOPIC: &str = "ros_discovery_info";

/// The DDS type.
pub const DDS_TYPE: &str = "rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_";

/// The ROS type.
pub const ROS_TYPE: &str = "rmw_dds_common/msg/ParticipantEntitiesInfo";

/// The QoS rmw_cyclonedds publishes with: the latest sample of each
/// participant stays available to late joiners.
pub const WRITER_QOS: QosProfile = QosProfile {
    history: History::KeepLast(1),
    reliability: Reliability::Reliable,
    durability: Durability::TransientLocal,
    deadline: None,
    lifespan: None,
    liveliness: Liveliness::Automatic,
    liveliness_lease: None,
};

/// The QoS rmw_cyclonedds subscribes with (it also ignores its own
/// participant's samples).
pub const READER_QOS: QosProfile = QosProfile {
    history: History::KeepAll,
    ..WRITER_QOS
};

/// How many bytes a `rmw_dds_common/msg/Gid` takes on the wire; it depends
/// on the peers' ROS distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GidWire {
    /// Humble and earlier: `char[24]`, the 16-byte GUID then 8 zero bytes.
    Bytes24,
    /// Iron and later: `char[16]`, the GUID.
    Bytes16,
}

impl GidWire {
    /// Bytes of one GID.
    pub const fn size(self) -> usize {
        match self {
            GidWire::Bytes24 => 24,
            GidWire::Bytes16 => 16,
        }
    }
}

/// One node of the participant, for [`encode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeEntities<'a> {
    /// The node's namespace (`/`).
    pub namespace: &'a str,
    /// The node's name (`edgerec`).
    pub name: &'a str,
    /// GUIDs of the node's DDS readers (subscriptions, service request
    /// readers).
    pub readers: &'a [Gid],
    /// GUIDs of the node's DDS writers (publishers, service reply
    /// writers).
    pub writers: &'a [Gid],
}

/// A decoded `ParticipantEntitiesInfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParticipantEntitiesInfo {
    /// The participant's GUID (the first 16 bytes of its GID).
    pub gid: Gid,
    /// Its nodes.
    pub nodes: Vec<NodeEntitiesInfo>,
}

/// A decoded `NodeEntitiesInfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEntitiesInfo {
    /// The node's namespace.
    pub namespace: String,
    /// The node's name.
    pub name: String,
    /// Its readers' GUIDs.
    pub readers: Vec<Gid>,
    /// Its writers' GUIDs.
    pub writers: Vec<Gid>,
}

fn write_gid(w: &mut CdrWriter, gid: &Gid, wire: GidWire) {
    for &b in gid {
        w.u8(b);
    }
    for _ in gid.len()..wire.size() {
        w.u8(0);
    }
}

/// The `ParticipantEntitiesInfo` for `participant` (its DDS GUID) and its
/// `nodes`, each GID laid out as `wire` says.
pub fn encode(participant: &Gid, nodes: &[NodeEntities<'_>], wire: GidWire) -> Vec<u8> {
    let gids: usize = nodes
        .iter()
        .map(|n| {
            24 + n.namespace.len()
                + n.name.len()
                + 8
                + (n.readers.len() + n.writers.len()) * wire.size()
        })
        .sum();
    let mut w = CdrWriter::with_capacity(8 + wire.size() + gids);
    write_gid(&mut w, participant, wire);
    w.sequence_len(nodes.len());
    for n in nodes {
        w.string(n.namespace).string(n.name);
        for list in [n.readers, n.writers] {
            w.sequence_len(list.len());
            for gid in list {
                write_gid(&mut w, gid, wire);
            }
        }
    }
    w.finish()
}

fn read_gid(r: &mut CdrReader<'_>, what: &'static str, wire: GidWire) -> Result<Gid, CdrError> {
    let bytes = r.bytes(what, wire.size())?;
    let mut gid = Gid::default();
    gid.copy_from_slice(&bytes[..16]);
    Ok(gid)
}

fn read_gids(
    r: &mut CdrReader<'_>,
    what: &'static str,
    wire: GidWire,
) -> Result<Vec<Gid>, CdrError> {
    let n = r.sequence_len(what, wire.size())?;
    (0..n).map(|_| read_gid(r, what, wire)).collect()
}

/// Reads a sample taken from `ros_discovery_info` whose GIDs are laid out
/// as `wire` says. The bytes after a 24-byte GID's GUID are not looked at.
pub fn decode(bytes: &[u8], wire: GidWire) -> Result<ParticipantEntitiesInfo, CdrError> {
    let mut r = CdrReader::new(bytes)?;
    let gid = read_gid(&mut r, "gid", wire)?;
    // Two empty strings and two empty sequences: 16 bytes at the least.
    let count = r.sequence_len("node_entities_info_seq", 16)?;
    let mut nodes = Vec::with_capacity(count);
    for _ in 0..count {
        nodes.push(NodeEntitiesInfo {
            namespace: r.string("node_namespace")?.to_owned(),
            name: r.string("node_name")?.to_owned(),
            readers: read_gids(&mut r, "reader_gid_seq", wire)?,
            writers: read_gids(&mut r, "writer_gid_seq", wire)?,
        });
    }
    r.finish()?;
    Ok(ParticipantEntitiesInfo { gid, nodes })
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: Gid = [
        0x01, 0x10, 0x2a, 0x3b, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 1, 0xc1,
    ];

    fn gid(n: u8) -> Gid {
        let mut g = P;
        g[12..].copy_from_slice(&[0, 0, n, 0x04]);
        g
    }

    #[test]
    fn one_node_hand_checked() {
        let node = NodeEntities {
            namespace: "/",
            name: "edgerec",
            readers: &[gid(1)],
            writers: &[],
        };
        for wire in [GidWire::Bytes24, GidWire::Bytes16] {
            let b = encode(&P, &[node], wire);
            let pad = vec![0; wire.size() - 16];
            #[rustfmt::skip]
            let expected: Vec<u8> = [
                &[0, 1, 0, 0][..],
                &P, &pad,                             // gid (24: 8 zero bytes)
                &[1, 0, 0, 0],                        // one node
                &[2, 0, 0, 0, b'/', 0], &[0, 0],      // namespace, pad
                &[8, 0, 0, 0], b"edgerec", &[0],      // name
                &[1, 0, 0, 0], &gid(1), &pad,         // one reader
                &[0, 0, 0, 0],                        // no writers
            ]
            .concat();
            assert_eq!(b, expected, "{wire:?}");
            let info = decode(&b, wire).unwrap();
            assert_eq!(info.gid, P);
            assert_eq!(
                info.nodes,
                vec![NodeEntitiesInfo {
                    namespace: "/".into(),
                    name: "edgerec".into(),
                    readers: vec![gid(1)],
                    writers: vec![],
                }]
            );
        }
    }

    #[test]
    fn no_nodes_is_the_gid_and_a_zero_count() {
        let b = encode(&P, &[], GidWire::Bytes16);
        assert_eq!(b, [&[0, 1, 0, 0][..], &P, &[0, 0, 0, 0]].concat());
        assert!(decode(&b, GidWire::Bytes16).unwrap().nodes.is_empty());
    }

    #[test]
    fn round_trip_with_odd_lengths() {
        let readers: Vec<Gid> = (0..5).map(gid).collect();
        let writers: Vec<Gid> = (5..8).map(gid).collect();
        let nodes = [
            NodeEntities {
                namespace: "/robot",
                name: "edgerec",
                readers: &readers,
                writers: &writers,
            },
            NodeEntities {
                namespace: "/a/b",
                name: "n",
                readers: &[],
                writers: &writers[..1],
            },
        ];
        for wire in [GidWire::Bytes24, GidWire::Bytes16] {
            let info = decode(&encode(&P, &nodes, wire), wire).unwrap();
            assert_eq!(info.nodes.len(), 2);
            for (got, want) in info.nodes.iter().zip(&nodes) {
                assert_eq!(got.namespace, want.namespace);
                assert_eq!(got.name, want.name);
                assert_eq!(got.readers, want.readers);
                assert_eq!(got.writers, want.writers);
            }
        }
    }

    #[test]
    fn malformed_samples_are_errors() {
        let node = NodeEntities {
            namespace: "/",
            name: "edgerec",
            readers: &[gid(1)],
            writers: &[gid(2)],
        };
        let good = encode(&P, &[node], GidWire::Bytes24);
        for n in 0..good.len() {
            assert!(decode(&good[..n], GidWire::Bytes24).is_err(), "prefix {n}");
        }
        // The other distro's layout does not read as this one.
        assert!(decode(&good, GidWire::Bytes16).is_err());
        // A node count no sample can hold.
        let mut absurd = good.clone();
        absurd[28..32].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode(&absurd, GidWire::Bytes24),
            Err(CdrError::SequenceLength {
                what: "node_entities_info_seq",
                ..
            })
        ));
        // A reader count past the end.
        let mut absurd = good;
        absurd[52..56].copy_from_slice(&0x1000_0000u32.to_le_bytes());
        assert!(matches!(
            decode(&absurd, GidWire::Bytes24),
            Err(CdrError::SequenceLength {
                what: "reader_gid_seq",
                ..
            })
        ));
    }

    #[test]
    fn qos_is_what_rmw_cyclonedds_uses() {
        assert_eq!(WRITER_QOS.history, History::KeepLast(1));
        assert_eq!(WRITER_QOS.durability, Durability::TransientLocal);
        assert_eq!(READER_QOS.history, History::KeepAll);
        assert_eq!(READER_QOS.reliability, Reliability::Reliable);
    }
}
