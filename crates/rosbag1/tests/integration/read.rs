//! Reading rosbag's own bags: messages, connections and summary agree with
//! what Debian's rosbag reads, through the index and by a scan.

use std::collections::BTreeSet;

use edgerec_rosbag1::{Bag, Compression, Filter, Indexing, Time};

use crate::support::{generated, oracle, to_msgs, COMPRESSIONS};

#[test]
fn every_message_equals_rosbags_read_messages_for_each_compression() {
    let Some(dir) = generated() else { return };
    for c in COMPRESSIONS {
        let want = oracle(dir, c);
        let path = dir.join(format!("{c}.bag"));

        let mut bag = Bag::open(&path).unwrap();
        assert!(matches!(bag.indexing(), Indexing::Index), "{c}");
        assert_eq!(bag.header().index_pos, want.index_pos, "{c}");
        assert!(bag.chunks_in_time_order(), "{c}");
        assert_eq!(bag.chunks().len(), want.chunk_positions.len(), "{c}");
        let got = to_msgs(&mut bag, &Filter::default());
        assert_eq!(got.len(), want.messages.len(), "{c}");
        for (i, (g, w)) in got.iter().zip(&want.messages).enumerate() {
            assert_eq!(g, w, "{c}: message {i}");
        }

        // The sequential scan (no index) finds the same messages.
        let mut scanned = Bag::scan(&path).unwrap();
        let report = scanned.scan_report().unwrap();
        assert_eq!(report.chunks as usize, want.chunk_positions.len(), "{c}");
        assert_eq!(report.messages as usize, want.messages.len(), "{c}");
        assert!(report.stop_error.is_none(), "{c}: {:?}", report.stop_error);
        assert!(report.cut_chunk.is_none());
        assert_eq!(
            to_msgs(&mut scanned, &Filter::default()),
            want.messages,
            "{c}"
        );
    }
}

#[test]
fn connections_match_rosbags() {
    let Some(dir) = generated() else { return };
    for c in COMPRESSIONS {
        let want = oracle(dir, c);
        for bag in [
            Bag::open(dir.join(format!("{c}.bag"))).unwrap(),
            Bag::scan(dir.join(format!("{c}.bag"))).unwrap(),
        ] {
            let got = bag.connections();
            assert_eq!(got.len(), want.connections.len(), "{c}");
            for w in &want.connections {
                let g = &got[&(w["id"].as_u64().unwrap() as u32)];
                assert_eq!(g.topic, w["topic"].as_str().unwrap());
                assert_eq!(g.msg_type, w["type"].as_str().unwrap());
                assert_eq!(g.md5sum, w["md5sum"].as_str().unwrap());
                assert_eq!(
                    g.message_definition,
                    w["message_definition"].as_str().unwrap()
                );
                assert_eq!(g.callerid.as_deref(), w["callerid"].as_str());
                assert_eq!(g.latching, w["latching"].as_bool().unwrap(), "{}", g.topic);
            }
        }
    }
    // The generator's two publishers on /chatter and the latched /tf_static.
    let bag = Bag::open(dir.join("none.bag")).unwrap();
    let chatter: BTreeSet<_> = bag
        .connections()
        .values()
        .filter(|c| c.topic == "/chatter")
        .map(|c| c.callerid.clone().unwrap())
        .collect();
    assert_eq!(
        chatter,
        BTreeSet::from(["/talker_a".into(), "/talker_b".into()])
    );
    assert!(bag
        .connections()
        .values()
        .any(|c| c.topic == "/tf_static" && c.latching));
}

#[test]
fn summary_agrees_with_rosbags_topic_info() {
    let Some(dir) = generated() else { return };
    for c in COMPRESSIONS {
        let want = oracle(dir, c);
        let path = dir.join(format!("{c}.bag"));
        for mut bag in [Bag::open(&path).unwrap(), Bag::scan(&path).unwrap()] {
            let s = bag.summary().unwrap();
            assert_eq!(s.messages as usize, want.messages.len(), "{c}");
            assert_eq!(s.chunks as usize, want.chunk_positions.len());
            assert_eq!(s.file_len, std::fs::metadata(&path).unwrap().len());
            let kind = match c {
                "none" => Compression::None,
                "bz2" => Compression::Bz2,
                _ => Compression::Lz4,
            };
            assert_eq!(s.compression.len(), 1);
            assert_eq!(
                s.compression[&kind].chunks as usize,
                want.chunk_positions.len()
            );
            let first = want.messages.iter().map(|m| m.time_ns).min();
            let last = want.messages.iter().map(|m| m.time_ns).max();
            assert_eq!(s.start.map(Time::as_nanos), first);
            assert_eq!(s.end.map(Time::as_nanos), last);
            assert_eq!(s.topics.len(), want.topics.len());
            for t in &s.topics {
                let w = &want.topics[&t.topic];
                assert_eq!(t.msg_type, w["type"].as_str().unwrap());
                assert_eq!(
                    t.messages,
                    w["messages"].as_u64().unwrap(),
                    "{c} {}",
                    t.topic
                );
                assert_eq!(u64::from(t.connections), w["connections"].as_u64().unwrap());
                let times: Vec<u64> = want
                    .messages
                    .iter()
                    .filter(|m| m.topic == t.topic)
                    .map(|m| m.time_ns)
                    .collect();
                assert_eq!(
                    t.first.map(Time::as_nanos),
                    times.iter().copied().min(),
                    "{}",
                    t.topic
                );
                assert_eq!(
                    t.last.map(Time::as_nanos),
                    times.iter().copied().max(),
                    "{}",
                    t.topic
                );
            }
        }
    }
}

#[test]
fn topic_and_time_filters_select_what_rosbag_has_in_that_window() {
    let Some(dir) = generated() else { return };
    let want = oracle(dir, "lz4");
    let start = want.messages[want.messages.len() / 4].time_ns;
    let end = want.messages[want.messages.len() / 2].time_ns;
    let filter = Filter {
        start: Some(Time::from_nanos(start)),
        end: Some(Time::from_nanos(end)),
        ..Filter::topics(["/imu", "/camera/image"])
    };
    let mut bag = Bag::open(dir.join("lz4.bag")).unwrap();
    let got = to_msgs(&mut bag, &filter);
    let expected: Vec<_> = want
        .messages
        .iter()
        .filter(|m| {
            (m.topic == "/imu" || m.topic == "/camera/image") && (start..=end).contains(&m.time_ns)
        })
        .cloned()
        .collect();
    assert!(expected.len() > 100);
    assert_eq!(got, expected);
}
