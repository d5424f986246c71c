//! `edgerec record -a -o DIR -d 8` in a network namespace of its own with
//! real DDS peers (Python `cyclonedds` publishing as rmw_cyclonedds does):
//! every message published is in the bag, in order, byte-identical; the
//! latched message published before edgerec started is there, in every
//! split; a topic that appears mid-recording is there; a type with no
//! definition is recorded with an empty schema; `edgerec check` and two
//! independent readers accept the bag.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use edgerec_testkit::netns::{self, Netns};

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

fn publisher(ns: &Netns, args: &[&str], record: &Path) -> Child {
    ns.command(netns::python())
        .arg(netns::ros2peer())
        .arg("publish")
        .args(args)
        .arg("--record")
        .arg(record)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn ros2peer")
}

fn wait_ok(mut c: Child, what: &str, limit: Duration) {
    let t = Instant::now();
    loop {
        if let Some(st) = c.try_wait().expect("wait") {
            let mut out = String::new();
            if let Some(mut o) = c.stdout.take() {
                let _ = std::io::Read::read_to_string(&mut o, &mut out);
            }
            assert!(st.success(), "{what} failed ({st}): {out}");
            println!("{what}: {}", out.trim());
            return;
        }
        if t.elapsed() > limit {
            let _ = c.kill();
            panic!("{what} did not finish in {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn record_all_from_live_publishers() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    if let Some(why) = netns::skip_reason() {
        why.report();
        return;
    }
    let Some(py) = edgerec_testkit::python() else {
        edgerec_testkit::skip::skip("no Python readers (.venv)");
        return;
    };
    let ns = Netns::new();
    let tmp = tempfile::tempdir().unwrap();
    let bag = tmp.path().join("bag");
    let rec = |n: &str| tmp.path().join(format!("{n}.jsonl"));

    // A latched message published before the recorder starts (rosbag2
    // issue 967 loses it), kept alive through the recording.
    let tf = publisher(
        &ns,
        &[
            "--topic",
            "/tf_static",
            "--type",
            "tf2_msgs/msg/TFMessage",
            "--count",
            "1",
            "--durability",
            "transient_local",
            "--depth",
            "1",
            "--linger",
            "14",
        ],
        &rec("tf_static"),
    );
    std::thread::sleep(Duration::from_millis(800));

    let edgerec = ns
        .command(BIN)
        .args(["record", "-a", "-o"])
        .arg(&bag)
        .args(["-d", "8", "--quiet", "-p", "50"])
        .env("EDGEREC_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // The recorder's own health on ROS 2, as a ROS tool would see it.
    let subscribe = |topic: &str, ty: &str, out: &Path| {
        ns.command(netns::python())
            .arg(netns::ros2peer())
            .args([
                "subscribe",
                "--topic",
                topic,
                "--type",
                ty,
                "--duration",
                "8",
                "--out",
            ])
            .arg(out)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let diag_out = tmp.path().join("diagnostics.jsonl");
    let status_out = tmp.path().join("status_topic.jsonl");
    let diag = subscribe(
        "/diagnostics",
        "diagnostic_msgs/msg/DiagnosticArray",
        &diag_out,
    );
    let status_sub = subscribe("/edgerec/status", "std_msgs/msg/String", &status_out);

    // Reliable IMU at 100 Hz for 10 s, waiting for edgerec's reader first.
    let imu = publisher(
        &ns,
        &[
            "--topic",
            "/imu",
            "--type",
            "sensor_msgs/msg/Imu",
            "--rate",
            "100",
            "--count",
            "1000",
            "--wait-readers",
            "1",
            "--wait-timeout",
            "20",
            "--depth",
            "0",
            "--linger",
            "1",
        ],
        &rec("imu"),
    );
    // Best effort, waiting a moment after the match so the first samples
    // are not lost to a reader that has not matched the writer yet.
    let scan = publisher(
        &ns,
        &[
            "--topic",
            "/status",
            "--type",
            "std_msgs/msg/String",
            "--rate",
            "20",
            "--count",
            "150",
            "--reliability",
            "best_effort",
            "--wait-readers",
            "1",
            "--wait-timeout",
            "20",
            "--start-delay",
            "0.5",
            "--linger",
            "1",
        ],
        &rec("status"),
    );
    // A topic that appears mid-recording, and a type no definition exists for.
    std::thread::sleep(Duration::from_secs(3));
    let late = publisher(
        &ns,
        &[
            "--topic",
            "/late",
            "--type",
            "std_msgs/msg/String",
            "--rate",
            "50",
            "--count",
            "100",
            "--wait-readers",
            "1",
            "--wait-timeout",
            "20",
            "--depth",
            "0",
            "--linger",
            "1",
        ],
        &rec("late"),
    );
    let custom = publisher(
        &ns,
        &[
            "--topic",
            "/custom",
            "--type",
            "edgerec_test_msgs/msg/Custom",
            "--rate",
            "20",
            "--count",
            "40",
            "--wait-readers",
            "1",
            "--wait-timeout",
            "20",
            "--depth",
            "0",
            "--linger",
            "1",
        ],
        &rec("custom"),
    );
    for (c, what) in [
        (imu, "imu"),
        (scan, "status"),
        (late, "late"),
        (custom, "custom"),
        (diag, "/diagnostics subscriber"),
        (status_sub, "/edgerec/status subscriber"),
    ] {
        wait_ok(c, what, Duration::from_secs(60));
    }
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: kill(2) on our child's pid.
    unsafe { libc::kill(edgerec.id() as i32, libc::SIGINT) };
    let out = edgerec.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!(
        "edgerec: {}\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(out.status.success(), "edgerec record: {}", out.status);
    assert!(
        stderr.contains("empty schema"),
        "the unknown type is reported"
    );
    wait_ok(tf, "tf_static", Duration::from_secs(30));

    // /diagnostics at 1 Hz: over the subscriber's 8 s, at least 6 arrays
    // (the first can come a second after the subscriber starts), about a
    // second apart, each with the recorder's own status.
    let lines = |p: &Path| -> Vec<serde_json::Value> {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let diag = lines(&diag_out);
    assert!(diag.len() >= 6, "{} /diagnostics arrays in 8 s", diag.len());
    let t: Vec<f64> = diag
        .iter()
        .map(|d| d["recv_ns"].as_f64().unwrap() / 1e9)
        .collect();
    let mut gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_by(f64::total_cmp);
    let median = gaps[gaps.len() / 2];
    assert!((0.8..=1.2).contains(&median), "median gap {median:.2} s");
    let first = diag[0]["decoded"].to_string();
    assert!(first.contains("edgerec: recorder"), "{first}");
    let status = lines(&status_out);
    assert!(
        status.len() >= 6,
        "{} /edgerec/status messages",
        status.len()
    );
    let json: serde_json::Value =
        serde_json::from_str(status[0]["decoded"]["data"].as_str().unwrap()).unwrap();
    assert!(json["state"].is_string(), "{json}");
    println!(
        "/diagnostics: {} arrays, median gap {median:.2} s; /edgerec/status: {} messages",
        diag.len(),
        status.len()
    );

    let check = Command::new(BIN).arg("check").arg(&bag).output().unwrap();
    assert!(
        check.status.success(),
        "edgerec check: {}",
        String::from_utf8_lossy(&check.stdout)
    );
    let segments = std::fs::read_dir(&bag)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "mcap")
        })
        .count();
    assert!(
        segments >= 2,
        "-d 8 splits a recording of more than 8 s ({segments} segments)"
    );

    let mut v = Command::new(py);
    v.arg(edgerec_testkit::workspace_root().join("tests/py/verify_ros_bag.py"))
        .arg(&bag);
    for t in ["tf_static", "imu", "status", "late", "custom"] {
        v.arg(format!("/{t}={}", rec(t).display()));
    }
    v.args(["--latched", "/tf_static", "--undecodable", "/custom"]);
    let out = v.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "verify_ros_bag.py failed");
}
