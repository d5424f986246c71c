//! Cross-checks the whole-message decoders (`cdr_decode`, `ros1_decode`)
//! and the JSON printer against Python `rosbags`, an implementation that
//! shares no code with edgerec.
//!
//! `tests/py/msgvalue_check.py gen` serializes known messages of common
//! types (Imu, Image, PointCloud2, LaserScan, DiagnosticArray, TFMessage,
//! String with non-ASCII text) with rosbags: ROS 2 Humble CDR (two of them
//! big endian) and ROS 1 Noetic with the `message_definition` rosbags
//! generates. This test decodes each, ROS 2 with the Humble definitions
//! edgerec embeds, ROS 1 with rosbags' definition text, prints the tree as
//! a JSON line, and `msgvalue_check.py check` compares it field by field,
//! in order, with the message rosbags serialized. The interpreter is
//! `$EDGEREC_PYTHON` or the workspace's `.venv/bin/python`; with neither
//! (or without rosbags) the test prints why and skips.

use std::path::{Path, PathBuf};
use std::process::Command;

use edgerec_format::msgtype::{Dialect, TypeTable};
use edgerec_format::{cdr_decode, msgdefs, print, ros1_decode};

/// Exit status msgvalue_check.py uses for "rosbags not importable".
const SKIP_STATUS: i32 = 77;

/// `$EDGEREC_PYTHON` (a path, or a bare name looked up in `PATH`), else the
/// workspace's `.venv/bin/python`; `Err` says why neither is there.
fn python() -> Result<PathBuf, String> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    let from_env = match std::env::var_os("EDGEREC_PYTHON") {
        Some(p) => {
            let p = PathBuf::from(p);
            if p.components().count() == 1 || p.exists() {
                return Ok(p);
            }
            format!("EDGEREC_PYTHON={} does not exist", p.display())
        }
        None => "EDGEREC_PYTHON is not set".to_owned(),
    };
    if venv.exists() {
        return Ok(venv);
    }
    Err(format!("{from_env} and {} does not exist", venv.display()))
}

/// Runs the script; `None` when it says the reference is missing.
fn run(python: &Path, step: &str, dir: &Path) -> Option<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/py/msgvalue_check.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(step)
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.code() == Some(SKIP_STATUS) {
        edgerec_testkit::skip::skip(format!("{}: {report}", python.display()));
        return None;
    }
    assert!(
        out.status.success(),
        "msgvalue_check.py {step} failed ({}); inputs kept in {}:\n{report}",
        out.status,
        dir.display()
    );
    Some(report)
}

#[test]
fn decoded_messages_match_rosbags_field_by_field() {
    let python = match python() {
        Ok(p) => p,
        Err(why) => {
            edgerec_testkit::skip::skip(why);
            return;
        }
    };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("msgvalue_rosbags-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    if run(&python, "gen", &dir).is_none() {
        return;
    }
    let index = std::fs::read_to_string(dir.join("samples.tsv")).unwrap();
    let mut counts = [0usize; 2];
    for line in index.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        let [id, dialect, type_name, bin, msg] = cols[..] else {
            panic!("bad index line {line:?}");
        };
        let payload = std::fs::read(dir.join(bin)).unwrap();
        let (types, ros1) = if dialect == "ros1" {
            let text = std::fs::read_to_string(dir.join(msg)).unwrap();
            let t = TypeTable::parse_with(type_name, &text, Dialect::Ros1)
                .unwrap_or_else(|e| panic!("{id}: {e}"));
            (t, true)
        } else {
            let def = msgdefs::lookup(type_name).unwrap_or_else(|| panic!("{type_name}"));
            (TypeTable::parse(def.name, def.text()).unwrap(), false)
        };
        let value = if ros1 {
            ros1_decode::decode(&types, &payload)
        } else {
            cdr_decode::decode(&types, &payload)
        }
        .unwrap_or_else(|e| panic!("{id}: {e}"));
        counts[usize::from(ros1)] += 1;
        // Where there is a header, its stamp leads the CSV columns.
        let columns = print::flatten(&value);
        if value.get("header").is_some() {
            assert!(
                columns[0].0.starts_with("header.stamp.s"),
                "{id}: {columns:?}"
            );
        }
        std::fs::write(dir.join(format!("{id}.json")), print::json_line(&value)).unwrap();
    }
    assert!(counts[0] >= 9 && counts[1] >= 9, "{counts:?}");
    let Some(report) = run(&python, "check", &dir) else {
        return;
    };
    println!("{report}");
    let _ = std::fs::remove_dir_all(&dir);
}
