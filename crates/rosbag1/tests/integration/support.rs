//! The generated bags and rosbag's reading of them (the oracle).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use edgerec_rosbag1::{Bag, Filter};
use serde_json::Value;

pub use edgerec_testkit::ros1::{active_copy, rosbag_reindex, COMPRESSIONS, PYTHON};

fn generator() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/py/make_ros1_bags.py")
}

/// The directory of generated bags, made once per test process; `None`
/// (after a skip saying why) where Debian's rosbag is missing.
pub fn generated() -> Option<&'static Path> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("rosbag1-bags");
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
