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

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use edgerec_testkit::netns::{self, Netns};

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

#[test]
fn an_image_topic_is_transcoded_frame_for_frame() {
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
    match edgerec_camera::missing_elements(&["appsrc", "x265enc", "h265parse", "rawvideoparse"]) {
        Ok(m) if m.is_empty() => {}
        other => {
            edgerec_testkit::skip::skip(format!("GStreamer lacks {other:?}"));
            return;
        }
    }
    let _dds = netns::dds_serial();
    let ns = Netns::new();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("data");
    let cfg = tmp.path().join("edgerec.toml");
    std::fs::write(
        &cfg,
        format!(
            "[recording]\nroot = \"{r}\"\n\n[health]\nwatchdog = \"\"\n\
             fault_file = \"{r}/last-fault.json\"\nstatus_socket = \"{r}/edgerec.sock\"\n\n\
             [[camera]]\nname = \"front\"\nsource = \"topic\"\n\
             input_topic = \"/camera/image_raw\"\nrecord_raw_input = true\n\
             width = 320\nheight = 240\nfps = 30\nencoder = \"x265enc\"\nbitrate = \"2M\"\n",
            r = root.display()
        ),
    )
    .unwrap();
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
    let ch = |topic: &str| {
        r["channels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["topic"] == topic)
            .unwrap_or_else(|| panic!("no {topic} in {r:#}"))
            .clone()
    };
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
