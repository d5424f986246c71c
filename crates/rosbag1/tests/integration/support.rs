//! The generated bags and rosbag's reading of them (the oracle).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use edgerec_rosbag1::{Bag, Filter};
use serde_json::Value;

/// Debian's python, where python3-rosbag is installed (not a venv's).
pub const PYTHON: &str = "/usr/bin/python3";
/// Debian's `rosbag` command.
pub const ROSBAG: &str = "/usr/bin/rosbag";
pub const COMPRESSIONS: [&str; 3] = ["none", "bz2", "lz4"];

fn generator() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/py/make_ros1_bags.py")
}

/// The directory of generated bags, made once per test process; `None`
/// (after printing SKIP and why) where Debian's rosbag is missing.
pub fn generated() -> Option<&'static Path> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let probe = Command::new(PYTHON)
            .args(["-c", "import rosbag, std_msgs.msg, sensor_msgs.msg, geometry_msgs.msg, tf2_msgs.msg"])
            .output()
            .map_err(|e| format!("{PYTHON} does not run: {e}"))?;
        if !probe.status.success() {
            return Err(format!(
                "{PYTHON} cannot import Debian's rosbag and message packages (apt-get install python3-rosbag python3-std-msgs python3-sensor-msgs python3-geometry-msgs python3-tf2-msgs): {}",
                String::from_utf8_lossy(&probe.stderr).trim()
            ));
        }
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("rosbag1-bags");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let out = Command::new(PYTHON)
            .arg(generator())
            .arg("make")
            .arg(&dir)
            .output()
            .map_err(|e| e.to_string())?;
        assert!(
            out.status.success(),
            "make_ros1_bags.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(dir)
    });
    match dir {
        Ok(d) => Some(d),
        Err(why) => {
            println!("SKIP: {why}");
            None
        }
    }
}

/// A scratch directory for one test under the generated bags.
pub fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("rosbag1-scratch")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One message as rosbag's `read_messages()` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg {
    pub topic: String,
    pub time_ns: u64,
    pub callerid: Option<String>,
    pub data: Vec<u8>,
}

/// What rosbag reads from a bag.
#[derive(Debug)]
pub struct Oracle {
    pub messages: Vec<Msg>,
    pub connections: Vec<Value>,
    pub chunk_positions: Vec<u64>,
    pub index_pos: u64,
    pub topics: serde_json::Map<String, Value>,
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

pub fn load(json: &Path) -> Oracle {
    let v: Value = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    Oracle {
        messages: v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| Msg {
                topic: m["topic"].as_str().unwrap().to_owned(),
                time_ns: m["time_ns"].as_u64().unwrap(),
                callerid: m["callerid"].as_str().map(str::to_owned),
                data: hex(m["data"].as_str().unwrap()),
            })
            .collect(),
        connections: v["connections"].as_array().unwrap().clone(),
        chunk_positions: v["chunk_positions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_u64().unwrap())
            .collect(),
        index_pos: v["index_pos"].as_u64().unwrap(),
        topics: v["topics"].as_object().unwrap().clone(),
    }
}

/// The oracle of a generated bag (`none`, `bz2`, `lz4`).
pub fn oracle(dir: &Path, compression: &str) -> Oracle {
    load(&dir.join(format!("{compression}.json")))
}

/// What Debian's rosbag reads from any bag.
pub fn rosbag_reads(bag: &Path) -> Oracle {
    let json = bag.with_extension("rosbag.json");
    let out = Command::new(PYTHON)
        .arg(generator())
        .arg("dump")
        .arg(bag)
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rosbag cannot read {}: {}",
        bag.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    load(&json)
}

/// What edgerec-rosbag1 reads, in the oracle's terms.
pub fn to_msgs(bag: &mut Bag<impl std::io::Read + std::io::Seek>, filter: &Filter) -> Vec<Msg> {
    bag.messages(filter)
        .map(|m| {
            let m = m.unwrap();
            Msg {
                topic: m.topic().to_owned(),
                time_ns: m.time_ns(),
                callerid: m.connection.callerid.clone(),
                data: m.data,
            }
        })
        .collect()
}

/// A copy of `bag[..cut]` that looks like a `.bag.active` of rosbag
/// record: the bag header's index_pos, conn_count and chunk_count are 0,
/// as rosbag writes them when it opens a bag. Patched by field name, not
/// through edgerec's parser.
pub fn active_copy(bag: &[u8], cut: usize) -> Vec<u8> {
    let mut out = bag[..cut].to_vec();
    for (name, width) in [
        (&b"index_pos="[..], 8),
        (&b"conn_count="[..], 4),
        (&b"chunk_count="[..], 4),
    ] {
        let at = out[..4109]
            .windows(name.len())
            .position(|w| w == name)
            .unwrap()
            + name.len();
        out[at..at + width].fill(0);
    }
    out
}

/// Runs Debian's `rosbag reindex` on a copy of `src` in `dir`; returns the
/// reindexed file.
pub fn rosbag_reindex(src: &Path, dir: &Path) -> PathBuf {
    let out = Command::new(ROSBAG)
        .args(["reindex", "-q", "--output-dir"])
        .arg(dir)
        .arg(src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "rosbag reindex failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join(src.file_name().unwrap())
}
