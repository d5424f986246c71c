//! A ROS 2 image topic transcoded to H.265: a Python `cyclonedds` peer (as
//! rmw_cyclonedds publishes) sends 150 rgb8 `sensor_msgs/msg/Image`s of
//! 320x240 at 30 Hz in a network namespace of its own; `edgerec run` with a
//! `source = "topic"` camera (and `[ros]` off: the camera's input is the
//! only topic it subscribes to) records them as H.265, and the raw topic
//! too (`record_raw_input`). Every image received is either a frame of the
//! video or counted as lost before the encoder; the video decodes
//! (ffprobe) to as many frames as it has messages, each message's
//! publish_time is its image's header.stamp, and each decoded picture is
//! the published one (luma PSNR against tests/py/pictures.py's frame,
//! converted by GStreamer).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use edgerec_testkit::netns::{self, Netns};

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

/// Whether DDS peers, the Python readers and GStreamer's elements are here
/// (a skip saying what is missing where not).
fn prerequisites() -> bool {
    if let Some(why) = netns::skip_reason() {
        why.report();
        return false;
    }
    if edgerec_testkit::python().is_none() {
        edgerec_testkit::skip::skip("no Python readers (.venv)");
        return false;
    }
    match edgerec_camera::missing_elements(&["appsrc", "x265enc", "h265parse", "rawvideoparse"]) {
        Ok(m) if m.is_empty() => true,
        other => {
            edgerec_testkit::skip::skip(format!("GStreamer lacks {other:?}"));
            false
        }
    }
}

/// Writes `edgerec.toml` in `dir`: recordings under `dir/data`, `extra`
/// (more sources), and a 320x240 topic camera on `/camera/image_raw` that
/// also records the raw topic.
fn write_config(dir: &Path, extra: &str) -> PathBuf {
    let cfg = dir.join("edgerec.toml");
    std::fs::write(
        &cfg,
        format!(
            "[recording]\nroot = \"{r}\"\n\n[health]\nwatchdog = \"\"\n\
             fault_file = \"{r}/last-fault.json\"\nstatus_socket = \"{r}/edgerec.sock\"\n\n\
             {extra}\
             [[camera]]\nname = \"front\"\nsource = \"topic\"\n\
             input_topic = \"/camera/image_raw\"\nrecord_raw_input = true\n\
             width = 320\nheight = 240\nfps = 30\nencoder = \"x265enc\"\nbitrate = \"2M\"\n",
            r = dir.join("data").display()
        ),
    )
    .unwrap();
    cfg
}

/// A channel's entry in `--report-json`'s report.
fn channel(report: &serde_json::Value, topic: &str) -> serde_json::Value {
    report["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["topic"] == topic)
        .unwrap_or_else(|| panic!("no {topic} in {report:#}"))
        .clone()
}

#[test]
fn an_image_topic_is_transcoded_frame_for_frame() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    if !prerequisites() {
        return;
    }
    let Some(py) = edgerec_testkit::python() else {
        return;
    };
    let _dds = netns::dds_serial();
    let ns = Netns::new();
    let tmp = tempfile::tempdir().unwrap();
    let cfg = write_config(tmp.path(), "");
    let report = tmp.path().join("report.json");
    let edgerec = ns
        .command(BIN)
        .args([
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--duration",
            "12s",
        ])
        .args(["--report-json", report.to_str().unwrap()])
        .env("EDGEREC_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let record = tmp.path().join("images.jsonl");
    let publisher = ns
        .command(netns::python())
        .arg(netns::ros2peer())
        .args([
            "publish",
            "--topic",
            "/camera/image_raw",
            "--type",
            "sensor_msgs/msg/Image",
            "--rgb8",
            "320x240",
            "--rate",
            "30",
            "--count",
            "150",
            "--reliability",
            "reliable",
            "--wait-readers",
            "1",
            "--wait-timeout",
            "20",
            "--start-delay",
            "0.5",
        ])
        .arg("--record")
        .arg(&record)
        .output()
        .unwrap();
    assert!(
        publisher.status.success(),
        "publisher: {}{}",
        String::from_utf8_lossy(&publisher.stdout),
        String::from_utf8_lossy(&publisher.stderr)
    );
    println!(
        "publisher: {}",
        String::from_utf8_lossy(&publisher.stdout).trim()
    );
    let t = Instant::now();
    let out = edgerec.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "edgerec run: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(t.elapsed() < Duration::from_secs(30));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let ch = |topic: &str| channel(&r, topic);
    let raw = ch("/camera/image_raw");
    let video = ch("/camera/front/h265");
    assert_eq!(
        raw["written"], 150,
        "every image received and recorded raw: {raw}"
    );
    for c in [&raw, &video] {
        assert_eq!(c["dropped"], 0, "{c}");
        assert_eq!(c["lost"], 0, "{c}");
    }
    let frames = video["written"].as_u64().unwrap();
    let before_encoder = video["upstream_lost"].as_u64().unwrap();
    assert_eq!(
        frames + before_encoder,
        150,
        "each image is a frame or counted lost before the encoder: {video}"
    );
    // How many make it through depends on the CPU x265enc gets: 140+ of
    // 150 on an idle 2-core machine, 118 with two other builds running
    // (the leaky queue before the encoder holds three frames). The exact
    // accounting above is the invariant; this only says most got through.
    assert!(frames >= 100, "{frames} of 150 images transcoded: {video}");
    let session = r["session_dir"].as_str().unwrap();
    let o = Command::new(py)
        .arg(edgerec_testkit::workspace_root().join("tests/py/verify_video.py"))
        .args([session, "--topic", "/camera/front/h265", "--rgb8-record"])
        .arg(&record)
        .args(["--width", "320", "--height", "240", "--expect-frames"])
        .arg(frames.to_string())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "verify_video.py: {text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    println!("{}", text.trim());
    let check = Command::new(BIN).args(["check", session]).output().unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
}

/// The attack a ROS 2 peer can send: a `sensor_msgs/msg/Image` on a topic
/// camera's input claiming 200000x200000 rgb8 with 16 bytes of data (it
/// once aborted edgerec allocating 120 GB). From a real DDS peer, three of
/// 60 images are that: each is refused and counted as lost before the
/// encoder, logged, the good images around them are encoded, the IMU beside
/// the camera records through the whole run, and edgerec exits 0.
#[test]
fn a_hostile_image_is_refused_counted_and_every_source_keeps_recording() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    if !prerequisites() {
        return;
    }
    let _dds = netns::dds_serial();
    let ns = Netns::new();
    let tmp = tempfile::tempdir().unwrap();
    let cfg = write_config(
        tmp.path(),
        "[[sources.synthetic]]\ntopic = \"/imu\"\ntype = \"sensor_msgs/msg/Imu\"\nrate = 200\n\n",
    );
    let report = tmp.path().join("report.json");
    let edgerec = ns
        .command(BIN)
        .args(["run", "--config", cfg.to_str().unwrap(), "--duration", "8s"])
        .args(["--report-json", report.to_str().unwrap()])
        .env("EDGEREC_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let publisher = ns
        .command(netns::python())
        .arg(netns::ros2peer())
        .args(["publish", "--topic", "/camera/image_raw"])
        .args(["--type", "sensor_msgs/msg/Image", "--rgb8", "320x240"])
        .args(["--hostile", "10,11,40", "--rate", "30", "--count", "60"])
        .args(["--reliability", "reliable", "--wait-readers", "1"])
        .args(["--wait-timeout", "20", "--start-delay", "0.5"])
        .output()
        .unwrap();
    assert!(
        publisher.status.success(),
        "publisher: {}{}",
        String::from_utf8_lossy(&publisher.stdout),
        String::from_utf8_lossy(&publisher.stderr)
    );
    let out = edgerec.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "edgerec run: {:?}\n{stderr}",
        out.status
    );
    // Logged once for the publisher (within the minute), naming the sizes.
    let refusals: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("is refused"))
        .collect();
    assert_eq!(refusals.len(), 1, "{stderr}");
    assert!(
        refusals[0].contains("200000x200000 rgb8 with step 600000 holds 16 bytes"),
        "{stderr}"
    );
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let ch = |topic: &str| channel(&r, topic);
    let raw = ch("/camera/image_raw");
    let video = ch("/camera/front/h265");
    let imu = ch("/imu");
    assert_eq!(
        raw["written"], 60,
        "every image received, recorded raw: {raw}"
    );
    let frames = video["written"].as_u64().unwrap();
    let lost = video["upstream_lost"].as_u64().unwrap();
    assert_eq!(frames + lost, 60, "a frame or counted lost: {video}");
    assert!(lost >= 3, "the three refused images are counted: {video}");
    // The camera keeps encoding after the attack. x265 on a loaded 2-core
    // machine lets its leaky queue drop frames (counted in upstream_lost):
    // 29 of 57 with two builds beside the test, 50+ on a quiet machine.
    assert!(frames >= 20, "{frames} of 57 good images encoded: {video}");
    for c in [&raw, &video, &imu] {
        assert_eq!(c["dropped"], 0, "{c}");
        assert_eq!(c["lost"], 0, "{c}");
    }
    // The IMU recorded through the attack: 200 Hz for the whole 8 s.
    let written = imu["written"].as_u64().unwrap();
    assert!(
        written >= 1400,
        "{written} IMU messages in 8 s at 200 Hz: {imu}"
    );
    let session = r["session_dir"].as_str().unwrap();
    let check = Command::new(BIN).args(["check", session]).output().unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
}
