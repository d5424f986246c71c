//! `metadata.yaml` written from names a hostile peer or file could bring
//! (`edgerec_format::bag::BagMetadata::to_yaml`, libyaml's emitter): the
//! input, split at NUL bytes, gives topic names, type names, QoS text and
//! file paths (any bytes, as lossy UTF-8). Both metadata versions must
//! write, parse back (serde_norway, libyaml's parser) and give every name
//! back exactly as it was.
#![no_main]

use edgerec_format::bag::{BagMetadata, FileInfo, MetadataVersion, TopicInfo};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let parts: Vec<String> = data
        .split(|&b| b == 0)
        .take(16)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let get = |i: usize| parts.get(i % parts.len()).cloned().unwrap_or_default();
    for version in [MetadataVersion::Humble, MetadataVersion::Jazzy] {
        let m = BagMetadata {
            version,
            topics: (0..parts.len().min(4))
                .map(|i| TopicInfo {
                    name: get(i),
                    type_name: get(i + 1),
                    serialization_format: "cdr".into(),
                    offered_qos_profiles: get(i + 2),
                    message_count: i as u64,
                })
                .collect(),
            files: (0..parts.len().min(3))
                .map(|i| FileInfo {
                    path: get(i + 3),
                    starting_time_ns: u64::MAX - i as u64,
                    duration_ns: 0,
                    message_count: 1,
                })
                .collect(),
        };
        let text = m.to_yaml().expect("metadata of short names writes");
        let doc: serde_norway::Value =
            serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"));
        let info = &doc["rosbag2_bagfile_information"];
        for (i, t) in m.topics.iter().enumerate() {
            let meta = &info["topics_with_message_count"][i]["topic_metadata"];
            assert_eq!(meta["name"].as_str(), Some(t.name.as_str()), "{text}");
            assert_eq!(meta["type"].as_str(), Some(t.type_name.as_str()), "{text}");
            if version == MetadataVersion::Humble {
                assert_eq!(
                    meta["offered_qos_profiles"].as_str(),
                    Some(t.offered_qos_profiles.as_str()),
                    "{text}"
                );
            } else {
                assert!(meta["offered_qos_profiles"].is_sequence(), "{text}");
            }
        }
        for (i, f) in m.files.iter().enumerate() {
            assert_eq!(info["files"][i]["path"].as_str(), Some(f.path.as_str()), "{text}");
            assert_eq!(
                info["relative_file_paths"][i].as_str(),
                Some(f.path.as_str()),
                "{text}"
            );
        }
        assert_eq!(BagMetadata::version_of(&text), version);
    }
});
