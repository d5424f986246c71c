//! ROS 1 bags written by Debian's rosbag (`tests/py/make_ros1_bags.py`),
//! for the tests of `edgerec-rosbag1` and `edgerec-tools`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Debian's python, where python3-rosbag is installed (not a venv's).
pub const PYTHON: &str = "/usr/bin/python3";
/// Debian's `rosbag` command.
pub const ROSBAG: &str = "/usr/bin/rosbag";
/// The chunk compressions the generated bags use, one bag each.
pub const COMPRESSIONS: [&str; 3] = ["none", "bz2", "lz4"];

/// Writes the generated bags into `dir` (made anew): `{none,bz2,lz4}.bag`
/// with their `.json` oracles and `encrypted.bag`. `Err` says why it
/// cannot (Debian's rosbag or its message packages missing), for the
/// caller to give as its skip reason; a generator that fails panics.
pub fn make_bags(dir: &Path) -> Result<(), String> {
    let probe = Command::new(PYTHON)
        .args([
            "-c",
            "import rosbag, std_msgs.msg, sensor_msgs.msg, geometry_msgs.msg, tf2_msgs.msg",
        ])
        .output()
        .map_err(|e| format!("{PYTHON} does not run: {e}"))?;
    if !probe.status.success() {
        return Err(format!(
            "{PYTHON} cannot import Debian's rosbag and message packages (apt-get install python3-rosbag python3-std-msgs python3-sensor-msgs python3-geometry-msgs python3-tf2-msgs): {}",
            String::from_utf8_lossy(&probe.stderr).trim()
        ));
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let out = Command::new(PYTHON)
        .arg(crate::workspace_root().join("tests/py/make_ros1_bags.py"))
        .arg("make")
        .arg(dir)
        .output()
        .map_err(|e| e.to_string())?;
    assert!(
        out.status.success(),
        "make_ros1_bags.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
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
