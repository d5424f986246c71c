//! `metadata.yaml` with names a hostile peer or file could bring (quotes,
//! `: `, newlines, YAML's indicators and keywords, control characters,
//! Unicode line breaks, 4 KB of text) reads back as written with the
//! readers ROS tools use: PyYAML's `yaml.safe_load` and rosbags' rosbag2
//! Reader, which also reads every message of the MCAP segment
//! (`tests/py/check_metadata_yaml.py`). Both metadata versions.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::Command;

use edgerec_format::bag::{qos_profile_yaml, rewrite_metadata, BagMetadata, MetadataVersion};
use edgerec_format::chunk::{ChunkBuilder, ChunkCompressor, Compression};
use edgerec_format::records::{Channel, Schema};
use edgerec_format::writer::{McapWriter, PROFILE_ROS2};
use edgerec_testkit::skip::skip;

fn hostile_names() -> Vec<String> {
    let mut v: Vec<String> = [
        "/imu",
        "/it's \"quoted\"",
        "/a: b",
        "- item",
        "/line one\nline two",
        "/trailing newline\n",
        " /leading and trailing ",
        "#comment",
        "&anchor *alias !tag %directive @at `tick` |pipe >fold",
        "{flow: [map]}",
        "null",
        "~",
        "yes",
        "0x1F",
        "1e3",
        "/control \u{1}\u{7}\u{8}\u{b}\u{c}\u{1b}\u{7f} characters",
        "/unicode breaks \u{85}\u{2028}\u{2029}, bom \u{feff}, C1 \u{80}\u{9f}",
        "/tab\there\r\n",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(format!("/{}", "x".repeat(4096)));
    v
}

/// One segment with a std_msgs/msg/String channel per name, `i + 1`
/// messages on the i-th.
fn write_segment(path: &Path, names: &[String]) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = McapWriter::new(std::io::BufWriter::new(f), PROFILE_ROS2, "edgerec-test").unwrap();
    w.add_schema(&Schema {
        id: 1,
        name: "std_msgs/msg/String".into(),
        encoding: "ros2msg".into(),
        data: b"string data".to_vec(),
    })
    .unwrap();
    let mut b = ChunkBuilder::new(1 << 20);
    let mut z = ChunkCompressor::new(Compression::None).unwrap();
    // CDR of std_msgs/String "hi".
    let hi = [0u8, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0, 0];
    let mut t = 1_700_000_000_000_000_000u64;
    for (i, name) in names.iter().enumerate() {
        let id = u16::try_from(i + 1).unwrap();
        w.add_channel(&Channel {
            id,
            schema_id: 1,
            topic: name.clone(),
            message_encoding: "cdr".into(),
            metadata: BTreeMap::from([(
                "offered_qos_profiles".to_string(),
                qos_profile_yaml(true, false, 10),
            )]),
        })
        .unwrap();
        for seq in 0..=u32::try_from(i).unwrap() {
            t += 1000;
            b.push(id, seq, t, t, &hi);
        }
    }
    w.write_chunk(&b.take().seal(&mut z)).unwrap();
    let (mut sink, _) = w.finish().unwrap();
    sink.flush().unwrap();
}

fn python() -> Option<std::path::PathBuf> {
    edgerec_testkit::python()
}

#[test]
fn hostile_topic_names_read_back_as_written_with_pyyaml_and_rosbags() {
    let Some(python) = python() else {
        skip("no Python readers: EDGEREC_PYTHON or .venv (scripts/test installs them)");
        return;
    };
    let script = edgerec_testkit::workspace_root().join("tests/py/check_metadata_yaml.py");
    let names = hostile_names();
    for version in [MetadataVersion::Humble, MetadataVersion::Jazzy] {
        let d = tempfile::tempdir().unwrap();
        let bag = d.path().join("bag");
        std::fs::create_dir(&bag).unwrap();
        write_segment(&bag.join("bag_0.mcap"), &names);
        // rewrite_metadata keeps the version of the file it replaces.
        BagMetadata {
            version,
            ..Default::default()
        }
        .write_atomic(&bag)
        .unwrap();
        let meta = rewrite_metadata(&bag).unwrap();
        assert_eq!(meta.version, version);
        assert_eq!(meta.topics.len(), names.len());

        let want = serde_json::json!({
            "topics": names.iter().enumerate()
                .map(|(i, n)| serde_json::json!([n, "std_msgs/msg/String", i + 1]))
                .collect::<Vec<_>>(),
            "files": ["bag_0.mcap"],
        });
        let expected = d.path().join("expected.json");
        std::fs::write(&expected, want.to_string()).unwrap();
        let out = Command::new(&python)
            .arg(&script)
            .arg(&bag)
            .arg(&expected)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.code() == Some(77) {
            skip(format!("{}: {report}", python.display()));
            return;
        }
        assert!(
            out.status.success(),
            "{version:?}: {} failed:\n{report}\nmetadata.yaml:\n{}",
            script.display(),
            std::fs::read_to_string(bag.join("metadata.yaml")).unwrap()
        );
    }
}
