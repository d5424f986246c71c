//! Generated bags, the oracles and the binary under test.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use serde_json::Value;

pub use edgerec_testkit::ros1::{active_copy, rosbag_reindex, COMPRESSIONS, PYTHON, ROSBAG};

pub fn repo() -> PathBuf {
    edgerec_testkit::workspace_root()
}

/// Runs `edgerec-tools ARGS`.
pub fn tools<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_edgerec-tools"))
        .args(args)
        .output()
        .unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The directory of generated bags, made once per test process; `None`
/// (after a skip saying why) where Debian's rosbag is missing.
pub fn generated() -> Option<&'static Path> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tools-bags");
        edgerec_testkit::ros1::make_bags(&dir)?;
        Ok(dir)
    });
    match dir {
        Ok(d) => Some(d),
        Err(why) => {
            edgerec_testkit::skip::skip(why);
            None
        }
    }
}

/// The chunk positions rosbag wrote in the generated bag `<compression>.bag`
/// (its oracle JSON).
pub fn chunk_positions(dir: &Path, compression: &str) -> Vec<u64> {
    let oracle: Value =
        serde_json::from_slice(&std::fs::read(dir.join(format!("{compression}.json"))).unwrap())
            .unwrap();
    oracle["chunk_positions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap())
        .collect()
}

/// The venv with Foxglove's and rosbags' readers; `None` (after a skip) when
/// it is missing.
pub fn venv() -> Option<PathBuf> {
    let py = edgerec_testkit::python();
    if py.is_none() {
        edgerec_testkit::skip::skip(
            "the Python readers' venv is missing (scripts/test installs it)",
        );
    }
    py
}

/// A scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("tools-scratch")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One decoded message: topic, log time, type and the message as JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub topic: String,
    pub log_time: u64,
    pub type_name: String,
    pub message: Value,
}

fn decoded(v: &Value) -> Decoded {
    Decoded {
        topic: v["topic"].as_str().unwrap().to_owned(),
        log_time: v["log_time"].as_u64().unwrap(),
        type_name: v["type"].as_str().unwrap().to_owned(),
        message: v["message"].clone(),
    }
}

fn load_dump(json: &Path) -> Vec<Decoded> {
    let v: Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(decoded)
        .collect()
}

/// A file for one dump of `of`: tests run in parallel on the same bags.
fn unique_json(of: &Path, what: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tools-dumps");
    std::fs::create_dir_all(&dir).unwrap();
    let name = of.file_name().unwrap().to_string_lossy();
    dir.join(format!(
        "{name}.{what}.{}.{}.json",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// What Debian's rosbag decodes from `bag` (`ros2`: in the mapping a ROS 2
/// conversion should give).
pub fn rosbag_decodes(bag: &Path, ros2: bool) -> Vec<Decoded> {
    let json = unique_json(bag, if ros2 { "oracle2" } else { "oracle1" });
    let mut cmd = Command::new(PYTHON);
    cmd.arg(repo().join("tests/py/ros1_oracle.py"));
    if ros2 {
        cmd.arg("--ros2");
    }
    let out = cmd.arg(bag).arg(&json).output().unwrap();
    assert!(
        out.status.success(),
        "ros1_oracle.py cannot read {}: {}",
        bag.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    load_dump(&json)
}

/// What a reference reader decodes from a converted file (`kind`:
/// `mcap-ros1`, `rosbags`, `mcap-ros2`).
pub fn reader_decodes(py: &Path, kind: &str, path: &Path) -> Vec<Decoded> {
    let json = unique_json(path, kind);
    let out = Command::new(py)
        .arg(repo().join("tests/py/read_converted.py"))
        .arg(kind)
        .arg(path)
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{kind} cannot read {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    load_dump(&json)
}

/// `edgerec-tools cat --json` of `bag`.
pub fn cat_json(bag: &Path) -> Vec<Decoded> {
    let out = tools(["cat".as_ref(), bag.as_os_str(), "--json".as_ref()]);
    assert!(
        out.status.success(),
        "cat --json {}: {}",
        bag.display(),
        stderr(&out)
    );
    stdout(&out)
        .lines()
        .map(|l| decoded(&serde_json::from_str(l).unwrap()))
        .collect()
}

/// Messages per topic, in order: readers agree on the order within a
/// topic (time order), not on how topics interleave at equal times.
pub fn by_topic(msgs: &[Decoded]) -> BTreeMap<String, Vec<Decoded>> {
    let mut out: BTreeMap<String, Vec<Decoded>> = BTreeMap::new();
    for m in msgs {
        out.entry(m.topic.clone()).or_default().push(m.clone());
    }
    out
}

/// Asserts that two readings hold the same messages, topic by topic, in
/// order, naming the first difference.
pub fn assert_same(ours: &[Decoded], theirs: &[Decoded], what: &str) {
    let (a, b) = (by_topic(ours), by_topic(theirs));
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "{what}: topics"
    );
    for (topic, mine) in &a {
        let other = &b[topic];
        assert_eq!(mine.len(), other.len(), "{what}: {topic} message count");
        for (i, (x, y)) in mine.iter().zip(other).enumerate() {
            assert_eq!(
                x.log_time, y.log_time,
                "{what}: {topic} message {i} log time"
            );
            assert_eq!(x.type_name, y.type_name, "{what}: {topic} message {i} type");
            assert_eq!(
                x.message, y.message,
                "{what}: {topic} message {i} at {} ns differs",
                x.log_time
            );
        }
    }
}
