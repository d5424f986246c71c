//! What DDS discovery hands edgerec from any peer: a DDS topic and type
//! name, USER_DATA and a `ros_discovery_info` sample. The first byte picks
//! the GID layout and QoS, the rest splits at NUL bytes into announcements
//! (topic, type, user_data), each given to one graph with small caps, and
//! the whole input is decoded as a `ros_discovery_info` sample. Never a
//! panic; the graph subscribes only to valid ROS names outside `/edgerec`,
//! and keeps no more than its caps.
#![no_main]

use edgerec_ros::channels::type_hash_from_user_data;
use edgerec_ros::discovery_info::{decode, GidWire};
use edgerec_ros::graph::{Action, Graph, GraphLimits, Publication};
use edgerec_ros::names;
use edgerec_ros::overrides::QosOverrides;
use edgerec_ros::qos::{Durability, QosProfile, Reliability};
use edgerec_ros::{SelectionOptions, TopicSelection};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let wire = if pick & 1 == 0 { GidWire::Bytes24 } else { GidWire::Bytes16 };
    let _ = decode(rest, wire);

    let selection = TopicSelection::new(
        &SelectionOptions {
            all: true,
            ..Default::default()
        },
        "/",
        "edgerec",
    )
    .expect("-a is a selection");
    let limits = GraphLimits {
        max_topics: 4,
        max_publishers: 6,
    };
    let mut graph = Graph::new(selection, QosOverrides::new()).with_limits(limits, ["/imu".into()]);
    let parts: Vec<&[u8]> = rest.split(|&b| b == 0).collect();
    for (i, chunk) in parts.chunks(3).enumerate() {
        let text = |k: usize| String::from_utf8_lossy(chunk.get(k).copied().unwrap_or(&[])).into_owned();
        let (Some(topic), Some(type_name)) = (names::ros_topic(&text(0)), names::ros_type(&text(1)))
        else {
            continue;
        };
        let mut gid = [0u8; 16];
        gid[0] = (i % 9) as u8; // some announcements repeat a publisher
        let qos = QosProfile {
            reliability: if pick & 2 == 0 { Reliability::Reliable } else { Reliability::BestEffort },
            durability: if pick & 4 == 0 { Durability::Volatile } else { Durability::TransientLocal },
            ..Default::default()
        };
        let actions = graph.add(Publication {
            gid,
            participant: gid,
            topic,
            type_name,
            qos,
            type_hash: type_hash_from_user_data(chunk.get(2).copied().unwrap_or(&[])),
        });
        for a in actions {
            if let Action::Subscribe { key, type_hash, .. } = a {
                assert!(names::validate_graph_topic(&key.topic).is_ok(), "{key:?}");
                assert!(names::validate_type(&key.type_name).is_ok(), "{key:?}");
                assert!(!key.topic.starts_with("/edgerec/") && key.topic != "/edgerec", "{key:?}");
                assert_ne!(key.topic, "/imu");
                if let Some(h) = type_hash {
                    assert!(h.len() <= 80 && h.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{h:?}");
                }
            }
        }
        if i % 5 == 4 {
            graph.remove(&gid);
        }
    }
    assert!(graph.subscribed().count() <= limits.max_topics);
});
