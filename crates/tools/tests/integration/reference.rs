//! `cat` and `info` read every MCAP file the reference writers wrote
//! (Foxglove's Python `mcap` with each option, `mcap-ros2-support`,
//! rosbags), with the counts the writers wrote. The raw writer's `/blob`
//! topic carries bytes that are not the CDR its schema says: `cat` names
//! each such message on stderr, prints the rest, and exits 1.

use std::collections::BTreeMap;
use std::process::Command;

use crate::support::*;

#[test]
fn cat_and_info_read_every_reference_writers_file() {
    let Some(py) = venv() else { return };
    let work = scratch("reference");
    let out = Command::new(&py)
        .arg(repo().join("tests/py/write_reference_mcaps.py"))
        .arg(&work)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("expected.json")).unwrap())
            .unwrap();
    let mut files = 0;
    for (name, topics) in expected.as_object().unwrap() {
        let path = work.join(name);
        let info = tools(["info", path.to_str().unwrap()]);
        assert!(
            info.status.success(),
            "info {name}: {}{}",
            stdout(&info),
            stderr(&info)
        );
        let r = tools(["cat", path.to_str().unwrap(), "--json"]);
        let blobs = topics.get("/blob").and_then(|n| n.as_u64()).unwrap_or(0);
        if blobs == 0 {
            assert!(r.status.success(), "cat {name}: {}", stderr(&r));
        } else {
            assert_eq!(r.status.code(), Some(1), "cat {name}");
            let e = stderr(&r);
            assert_eq!(
                e.matches("/blob message at").count() as u64,
                blobs,
                "{name}: {e}"
            );
            assert!(
                e.contains(&format!("{blobs} message(s) did not decode")),
                "{e}"
            );
        }
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for l in stdout(&r).lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            *counts
                .entry(v["topic"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
        let want: BTreeMap<String, u64> = topics
            .as_object()
            .unwrap()
            .iter()
            .map(|(t, n)| (t.clone(), n.as_u64().unwrap()))
            .filter(|(t, n)| *n > 0 && t != "/blob")
            .collect();
        assert_eq!(counts, want, "cat {name}");
        files += 1;
    }
    assert!(files >= 5, "{files} reference files");
}
