//! What a peer on the graph announces cannot take over the recorder's own
//! topics or another source's channel. Real DDS peers (Python cyclonedds in
//! a network namespace, as rmw_cyclonedds) publish, while `edgerec run`
//! records every topic (`ros.all`) beside a synthetic `/imu`:
//! `sensor_msgs/msg/Imu` on `/imu` (the synthetic source's topic) and
//! `std_msgs/msg/String` on `/edgerec/status` (edgerec's own), and an
//! ordinary `/chatter` (`std_msgs/msg/Header`). The peers' `/imu` and `/edgerec/status` are refused
//! and logged; no byte of theirs is in the bag, whose `/imu` is the
//! synthetic source's alone; `/chatter` is recorded whole; the run exits 0.

use std::path::Path;
use std::process::{Command, Stdio};

use edgerec_testkit::netns::{self, Netns};

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `cdr_hex` of every sample in a ros2peer record file.
fn recorded_payloads(record: &Path) -> Vec<String> {
    std::fs::read_to_string(record)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["cdr_hex"].as_str().unwrap().to_string()
        })
        .collect()
}

/// A publisher of `count` samples at 50 Hz; with `matched`, it waits for
/// edgerec's reader first (a topic edgerec refuses never gets one).
fn peer(ns: &Netns, topic: &str, ty: &str, record: &Path, matched: bool) -> Command {
    let mut c = ns.command(netns::python());
    c.arg(netns::ros2peer())
        .args(["publish", "--topic", topic, "--type", ty])
        .args(["--rate", "50", "--count", "100"])
        .args(["--reliability", "reliable", "--start-delay", "1.5"])
        .arg("--record")
        .arg(record)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if matched {
        c.args(["--wait-readers", "1", "--wait-timeout", "20"]);
    }
    c
}

#[test]
fn peers_cannot_publish_into_edgerecs_own_topics_or_another_sources_channel() {
    // DDS peers and the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    if let Some(why) = netns::skip_reason() {
        why.report();
        return;
    }
    let _dds = netns::dds_serial();
    let ns = Netns::new();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let cfg = tmp.path().join("edgerec.toml");
    std::fs::write(
        &cfg,
        format!(
            "[recording]\nroot = \"{r}\"\n\n[health]\nwatchdog = \"\"\n\
             fault_file = \"{r}/last-fault.json\"\nstatus_socket = \"{r}/edgerec.sock\"\n\n\
             [ros]\nenabled = true\nall = true\n\n\
             [[sources.synthetic]]\ntopic = \"/imu\"\ntype = \"sensor_msgs/msg/Imu\"\nrate = 200\n",
            r = data.display()
        ),
    )
    .unwrap();
    let report = tmp.path().join("report.json");
    let edgerec = ns
        .command(BIN)
        .args(["run", "--config", cfg.to_str().unwrap(), "--duration", "7s"])
        .args(["--report-json", report.to_str().unwrap()])
        .env("EDGEREC_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let records = [
        tmp.path().join("imu.jsonl"),
        tmp.path().join("status.jsonl"),
        tmp.path().join("chatter.jsonl"),
    ];
    let peers = [
        peer(&ns, "/imu", "sensor_msgs/msg/Imu", &records[0], false)
            .spawn()
            .unwrap(),
        peer(
            &ns,
            "/edgerec/status",
            "std_msgs/msg/String",
            &records[1],
            false,
        )
        .spawn()
        .unwrap(),
        // Another type than the /edgerec/status peer's, so that no two
        // peers send the same bytes.
        peer(&ns, "/chatter", "std_msgs/msg/Header", &records[2], true)
            .spawn()
            .unwrap(),
    ];
    for p in peers {
        let o = p.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "publisher: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // The status, asked while the recorder runs, counts the refusals.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let status = ns
        .command(BIN)
        .args(["status", "--json", "--socket"])
        .arg(data.join("edgerec.sock"))
        .output()
        .unwrap();
    let out = edgerec.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        status.status.success(),
        "edgerec status: {}\n{stderr}",
        String::from_utf8_lossy(&status.stderr)
    );
    let snapshot: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let refused = &snapshot["ros"]["refused"];
    assert!(refused["own"].as_u64() >= Some(1), "{snapshot:#}");
    assert!(refused["other_source"].as_u64() >= Some(1), "{snapshot:#}");
    assert_eq!(refused["bad_name"], 0, "{snapshot:#}");
    assert!(
        out.status.success(),
        "edgerec run: {:?}\n{stderr}",
        out.status
    );
    for want in [
        "\"/imu\" (\"sensor_msgs/msg/Imu\") is not recorded: recorded by another source",
        "\"/edgerec/status\" (\"std_msgs/msg/String\") is not recorded: one of edgerec's own topics",
    ] {
        assert!(stderr.contains(want), "{want} not in\n{stderr}");
    }

    // Every message of the session, as an independent MCAP reader sees it.
    let session = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir() && p.file_name().is_some_and(|n| n != "events"))
        .expect("a session directory");
    let mut by_topic: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for seg in edgerec_format::bag::segment_files(&session).unwrap() {
        for m in edgerec_testkit::mcap_readback(&seg).unwrap().messages {
            by_topic.entry(m.topic).or_default().push(hex(&m.data));
        }
    }
    let peer_imu = recorded_payloads(&records[0]);
    let peer_status = recorded_payloads(&records[1]);
    let chatter = recorded_payloads(&records[2]);
    assert_eq!(peer_imu.len(), 100);
    let imu = by_topic.get("/imu").expect("/imu recorded");
    // 200 Hz for about 7 s, from the synthetic source only.
    assert!(imu.len() > 1000, "{} /imu messages", imu.len());
    assert!(
        imu.iter().all(|m| !peer_imu.contains(m)),
        "a peer's /imu message is in the synthetic source's channel"
    );
    // The peer's /edgerec/status went nowhere (edgerec's own status
    // channel, if recorded, holds edgerec's JSON, never the peer's bytes).
    for (topic, msgs) in &by_topic {
        assert!(
            msgs.iter().all(|m| !peer_status.contains(m)),
            "a peer's /edgerec/status message is in {topic}"
        );
    }
    // The ordinary topic is recorded whole and byte for byte.
    assert_eq!(by_topic.get("/chatter"), Some(&chatter), "/chatter");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    assert_eq!(r["drops"].as_u64(), Some(0), "{r}");
}
