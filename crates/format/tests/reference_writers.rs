//! Files nobody here wrote: MCAP from Foxglove's Python `mcap` writer (with
//! each of its options), `mcap-ros2-support`'s writer, rosbags' rosbag2
//! writer and the Rust `mcap` crate. `check`, `info` (the summary, filled
//! in from the data section where the writer left parts out), reading
//! messages and `recover` accept every one, with the counts the writer
//! wrote. The spec makes CRCs, message indexes, chunk indexes, statistics
//! and summary offsets optional, and the writers use every choice.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use edgerec_format::info::{inspect, FileState};
use edgerec_format::messages::read_topics;
use edgerec_format::reader::check_file;
use edgerec_format::recover::{recover_file, Outcome};
use edgerec_format::FormatError;

/// Topic -> messages, per file or bag directory, as the writer wrote them.
type Expected = BTreeMap<String, BTreeMap<String, u64>>;

fn python_files(dir: &Path) -> Option<Expected> {
    let Some(py) = edgerec_testkit::python() else {
        edgerec_testkit::skip::skip(
            "the Python readers' venv is missing (scripts/test installs it)",
        );
        return None;
    };
    let script = edgerec_testkit::workspace_root().join("tests/py/write_reference_mcaps.py");
    let out = Command::new(py).arg(&script).arg(dir).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.join("expected.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut expected = Expected::new();
    for (file, topics) in v.as_object().unwrap() {
        let counts = topics
            .as_object()
            .unwrap()
            .iter()
            .map(|(t, n)| (t.clone(), n.as_u64().unwrap()))
            .collect();
        expected.insert(file.clone(), counts);
    }
    Some(expected)
}

/// The Rust `mcap` crate's writer: chunked zstd by default, and unchunked.
fn rust_files(dir: &Path) -> Expected {
    let mut expected = Expected::new();
    for (name, chunked) in [
        ("rust-mcap.mcap", true),
        ("rust-mcap-unchunked.mcap", false),
    ] {
        let f = std::fs::File::create(dir.join(name)).unwrap();
        let mut w = mcap::WriteOptions::new()
            .profile("ros2")
            .use_chunks(chunked)
            .create(std::io::BufWriter::new(f))
            .unwrap();
        let schema = w
            .add_schema("std_msgs/msg/String", "ros2msg", b"string data")
            .unwrap();
        let ch = w
            .add_channel(schema, "/rust", "cdr", &BTreeMap::new())
            .unwrap();
        for i in 0..300u32 {
            let t = 1_700_000_000_000_000_000 + u64::from(i) * 1000;
            w.write_to_known_channel(
                &mcap::records::MessageHeader {
                    channel_id: ch,
                    sequence: i,
                    log_time: t,
                    publish_time: t,
                },
                &[0, 1, 0, 0, 2, 0, 0, 0, b'a', 0],
            )
            .unwrap();
        }
        w.finish().unwrap();
        expected.insert(name.into(), BTreeMap::from([("/rust".into(), 300)]));
    }
    expected
}

fn paths(dir: &Path, name: &str) -> (PathBuf, Vec<PathBuf>) {
    let p = dir.join(name);
    let files = if p.is_dir() {
        let mut v: Vec<_> = std::fs::read_dir(&p)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|f| f.extension().is_some_and(|e| e == "mcap"))
            .collect();
        v.sort();
        v
    } else {
        vec![p.clone()]
    };
    (p, files)
}

/// Every file checks, its summary says what the writer wrote, and its
/// messages read back, per topic.
fn accept_all(dir: &Path, expected: &Expected) {
    for (name, want) in expected {
        let (path, files) = paths(dir, name);
        for f in &files {
            let rep = check_file(f).unwrap_or_else(|e| panic!("check {name}: {e}"));
            assert_eq!(rep.messages, want.values().sum::<u64>(), "check {name}");
        }
        let info = inspect(&path).unwrap_or_else(|e| panic!("info {name}: {e}"));
        for f in &info.files {
            assert!(
                matches!(f.state, FileState::Closed(_)),
                "info {name}: {:?}",
                f.state
            );
        }
        let counts: BTreeMap<String, u64> = info
            .topics
            .iter()
            .map(|(t, totals)| (t.clone(), totals.count))
            .collect();
        assert_eq!(&counts, want, "info {name}");
        assert_eq!(info.messages, want.values().sum::<u64>(), "info {name}");
        let topics: BTreeSet<&str> = want.keys().map(String::as_str).collect();
        let mut read: BTreeMap<String, u64> = BTreeMap::new();
        read_topics::<FormatError, _>(&info, &topics, |ch, _m| {
            *read.entry(ch.topic.clone()).or_default() += 1;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("read {name}: {e}"));
        assert_eq!(&read, want, "messages of {name}");
        for f in &files {
            let r = recover_file(f).unwrap_or_else(|e| panic!("recover {name}: {e}"));
            assert_eq!(r.outcome, Outcome::AlreadyClosed, "recover {name}");
        }
    }
}

#[test]
fn files_of_the_python_writers_are_accepted_with_their_counts() {
    let dir = tempfile::tempdir().unwrap();
    let Some(expected) = python_files(dir.path()) else {
        return;
    };
    // The ones that failed before: summary offsets of empty groups
    // (group_length 0), no message indexes, no statistics, unchunked.
    for name in [
        "mcap-zstd.mcap",
        "mcap-ros2.mcap",
        "mcap-no-index.mcap",
        "mcap-no-statistics.mcap",
        "mcap-unchunked.mcap",
        "rosbags",
    ] {
        assert!(expected.contains_key(name), "{name} not written");
    }
    accept_all(dir.path(), &expected);
}

#[test]
fn files_of_the_rust_mcap_crate_are_accepted_with_their_counts() {
    let dir = tempfile::tempdir().unwrap();
    let expected = rust_files(dir.path());
    accept_all(dir.path(), &expected);
}

/// A Python-written file cut short (a writer killed) is recovered: every
/// message of the chunks before the cut is kept and the result checks.
#[test]
fn a_cut_python_file_is_recovered() {
    let dir = tempfile::tempdir().unwrap();
    let Some(_) = python_files(dir.path()) else {
        return;
    };
    let whole = std::fs::read(dir.path().join("mcap-small-chunks.mcap")).unwrap();
    let cut = dir.path().join("cut.mcap");
    std::fs::write(&cut, &whole[..whole.len() * 2 / 3]).unwrap();
    let r = recover_file(&cut).unwrap();
    assert_eq!(r.outcome, Outcome::Clean, "{r:?}");
    let out = r.output.clone().unwrap();
    let rep = check_file(&out).unwrap();
    assert_eq!(rep.messages, r.messages_kept());
    // 1,000 messages in 4 KiB chunks over 149 KiB: two thirds of the file
    // hold well over half of them.
    assert!(r.messages_kept() > 500, "{r:?}");
}
