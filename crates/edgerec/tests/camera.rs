//! Cameras end to end, through `edgerec run` and GStreamer's x265enc, with
//! every check made by readers that share no code with edgerec
//! (tests/py/verify_video.py: `mcap` + `mcap-ros2-support` to read,
//! ffprobe/ffmpeg's libavcodec to decode, GStreamer's videotestsrc to
//! render the reference pictures).
//!
//! - A 640x480 30 fps test camera for 9 s with `segment.max_duration =
//!   "3s"`: three segments, the middle one of 90 +/- 3 frames (the first
//!   starts before the camera's first frame, the last ends with the
//!   recording; neither holds more than 93); each decodes on its own to as
//!   many frames as it has messages; each starts on an IRAP with VPS, SPS
//!   and PPS; capture times strictly increase 33.3 +/- 5 ms apart; the
//!   pictures are the videotestsrc `ball` frames, frame for frame (luma
//!   PSNR).
//! - Two cameras, the synthetic IMU and a third camera whose pipeline
//!   fails every 45 frames (GStreamer's `identity error-after`): the third
//!   is restarted and resumes on a keyframe each time; every other channel
//!   records with no drop and no gap.

use std::path::{Path, PathBuf};
use std::process::Command;

use edgerec_testkit::skip::{Allowed, Skip};

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

/// One camera test at a time: each runs x265 encoders in real time, and
/// two at once on a 2-core machine starve them (frames dropped before the
/// encoder, which the tests count but would rather not see).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The frames a camera lost before its encoder, as edgerec counted them
/// (the channel's `upstream_lost`), must be what the gaps in the capture
/// times show: no frame goes missing uncounted.
fn assert_losses_counted(c: &serde_json::Value, v: &serde_json::Value) {
    let counted = c["upstream_lost"].as_u64().unwrap();
    let seen = v["missing_frames"].as_u64().unwrap();
    assert_eq!(
        counted, seen,
        "frames lost before the encoder: counted {counted}, gaps show {seen}\n{c}\n{v}"
    );
    if counted > 0 {
        println!(
            "{}: {counted} frames lost before the encoder (machine loaded), counted",
            c["topic"]
        );
    }
}

/// Why this machine cannot run the camera tests, if it cannot.
fn skip_reason() -> Option<Skip> {
    // x265 emulated instruction by instruction cannot encode in real time:
    // the live cameras would lose most frames, and the checks are of real
    // time (frame counts, spacing).
    if let Some(q) = edgerec_testkit::qemu_user() {
        return Some(Skip::allowed(
            Allowed::QemuUser,
            format!("{q}: x265enc cannot keep a live camera's real time under emulation"),
        ));
    }
    if let Some(r) = edgerec_testkit::exec_skip_reason(BIN) {
        return Some(Skip::missing(r));
    }
    let need = [
        "videotestsrc",
        "x265enc",
        "h265parse",
        "appsink",
        "identity",
    ];
    match edgerec_camera::missing_elements(&need) {
        Ok(m) if m.is_empty() => {}
        Ok(m) => {
            return Some(Skip::missing(format!(
                "GStreamer lacks {} (gstreamer1.0-plugins-base and -bad)",
                m.join(", ")
            )))
        }
        Err(e) => return Some(Skip::missing(format!("GStreamer does not start: {e}"))),
    }
    for (tool, flag) in [
        ("ffprobe", "-version"),
        ("ffmpeg", "-version"),
        ("gst-launch-1.0", "--version"),
    ] {
        let ok = Command::new(tool)
            .arg(flag)
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            return Some(Skip::missing(format!(
                "{tool} is not installed (apt-get install ffmpeg gstreamer1.0-tools)"
            )));
        }
    }
    if edgerec_testkit::python().is_none() {
        return Some(Skip::missing(
            "no Python virtual environment (set EDGEREC_PYTHON or run scripts/test)",
        ));
    }
    None
}

fn config(d: &Path, body: &str) -> PathBuf {
    let cfg = d.join("edgerec.toml");
    let text = format!(
        "[recording]\nroot = \"{root}\"\nsession_prefix = \"cam\"\n\n\
         [health]\nwatchdog = \"\"\nfault_file = \"{root}/last-fault.json\"\n\
         status_socket = \"{root}/edgerec.sock\"\n\n{body}",
        root = d.join("data").display()
    );
    std::fs::write(&cfg, text).unwrap();
    cfg
}

/// Runs `edgerec run` for `secs` and returns the report.
fn record(cfg: &Path, secs: u32) -> serde_json::Value {
    let report = cfg.with_file_name("report.json");
    let o = Command::new(BIN)
        .args(["run", "--config", cfg.to_str().unwrap()])
        .args(["--duration", &format!("{secs}s")])
        .args(["--report-json", report.to_str().unwrap()])
        .env("EDGEREC_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "edgerec run: {:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap()
}

fn channel<'a>(r: &'a serde_json::Value, topic: &str) -> &'a serde_json::Value {
    r["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["topic"] == topic)
        .unwrap_or_else(|| panic!("no channel {topic} in {r:#}"))
}

/// tests/py/verify_video.py on `topic`; its JSON report.
fn verify(session: &str, topic: &str, args: &[&str]) -> serde_json::Value {
    let py = edgerec_testkit::python().unwrap();
    let o = Command::new(py)
        .arg(edgerec_testkit::workspace_root().join("tests/py/verify_video.py"))
        .args([session, "--topic", topic])
        .args(args)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "verify_video.py {topic}: {out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_str(out.trim()).unwrap()
}

/// Foxglove's own readers (`@mcap/core` and its ROS 2 deserializer,
/// tests/js/verify_foxglove.mjs) open the bag and decode `n` video messages
/// on `topic`; skipped, saying why, without Node or the npm packages
/// (scripts/test installs them).
fn foxglove(session: &str, topic: &str, n: u64) {
    let js = edgerec_testkit::workspace_root().join("tests/js");
    let node_ok = Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !node_ok || !js.join("node_modules/@mcap/core").exists() {
        edgerec_testkit::skip::skip(
            "Foxglove reader: no node or no tests/js/node_modules (run scripts/test, which installs them)",
        );
        return;
    }
    let o = Command::new("node")
        .arg(js.join("verify_foxglove.mjs"))
        .args([session, "--topic", topic, "--expect", &n.to_string()])
        .output()
        .unwrap();
    if o.status.code() == Some(77) {
        // Its own skip: a Node older than its packages need (20).
        edgerec_testkit::skip::skip(String::from_utf8_lossy(&o.stdout).trim());
        return;
    }
    assert!(
        o.status.success(),
        "verify_foxglove.mjs: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["video_messages"].as_u64(), Some(n), "{v}");
    assert_eq!(
        v["topics"][topic]["schema"],
        "foxglove_msgs/msg/CompressedVideo"
    );
}

fn check(session: &str) {
    let o = Command::new(BIN).args(["check", session]).output().unwrap();
    assert!(
        o.status.success(),
        "edgerec check: {}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn nine_seconds_in_three_second_segments_each_decodes_alone_with_the_right_pictures() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    if let Some(why) = skip_reason() {
        why.report();
        return;
    }
    let _one = serial();
    let d = tempfile::tempdir().unwrap();
    let cfg = config(
        d.path(),
        "[segment]\nmax_duration = \"3s\"\n\n\
         [[camera]]\nname = \"front\"\nsource = \"test\"\npattern = \"ball\"\n\
         width = 640\nheight = 480\nfps = 30\nencoder = \"x265enc\"\nbitrate = \"2M\"\n",
    );
    let r = record(&cfg, 9);
    let session = r["session_dir"].as_str().unwrap();
    check(session);
    let c = channel(&r, "/camera/front/h265");
    assert_eq!(c["dropped"], 0, "{c}");
    assert_eq!(c["lost"], 0, "{c}");
    let written = c["written"].as_u64().unwrap();
    let v = verify(
        session,
        "/camera/front/h265",
        &[
            "--fps",
            "30",
            "--allow-gaps",
            "--per-segment",
            "90",
            "--pattern",
            "ball",
            "--width",
            "640",
            "--height",
            "480",
            "--expect-frames",
            &written.to_string(),
        ],
    );
    assert_losses_counted(c, &v);
    let segs = v["segments"].as_array().unwrap();
    assert!(segs.len() >= 3, "{v:#}");
    for s in segs {
        assert_eq!(s["decoded"], s["messages"], "{s}");
        assert_eq!(
            (s["width"].as_u64(), s["height"].as_u64()),
            (Some(640), Some(480))
        );
    }
    foxglove(session, "/camera/front/h265", written);
    // About 9 s of 30 fps, less the camera's start.
    let made = written + c["upstream_lost"].as_u64().unwrap();
    assert!((240..=275).contains(&made), "{made} frames in 9 s");
    println!("{v}");
}

#[test]
fn a_failing_camera_restarts_on_a_keyframe_and_nothing_else_drops() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    if let Some(why) = skip_reason() {
        why.report();
        return;
    }
    let _one = serial();
    let d = tempfile::tempdir().unwrap();
    let cam = |name: &str, pattern: &str| {
        format!(
            "[[camera]]\nname = \"{name}\"\nsource = \"test\"\npattern = \"{pattern}\"\n\
             width = 320\nheight = 240\nfps = 30\nencoder = \"x265enc\"\nbitrate = \"1M\"\n\n"
        )
    };
    let cfg = config(
        d.path(),
        &format!(
            "[sources]\nrestart_backoff_min = \"300ms\"\n\n\
             [segment]\nmax_duration = \"2s\"\n\n\
             [[sources.synthetic]]\ntopic = \"/imu\"\ntype = \"sensor_msgs/msg/Imu\"\nrate = 400\n\n\
             {}{}\
             [[camera]]\nname = \"flaky\"\nsource = \"pipeline\"\n\
             pipeline = \"videotestsrc is-live=true pattern=snow ! identity error-after=45\"\n\
             width = 320\nheight = 240\nfps = 30\nencoder = \"x265enc\"\nbitrate = \"1M\"\n",
            cam("left", "ball"),
            cam("right", "smpte")
        ),
    );
    let r = record(&cfg, 7);
    let session = r["session_dir"].as_str().unwrap();
    check(session);
    let flaky = r["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("camera flaky"))
        })
        .unwrap_or_else(|| panic!("no flaky camera in {r:#}"))
        .clone();
    assert!(flaky["restarts"].as_u64().unwrap() >= 2, "{flaky}");
    assert!(
        flaky["last_error"]
            .as_str()
            .unwrap_or("")
            .contains("GstIdentity"),
        "{flaky}"
    );
    for s in r["sources"].as_array().unwrap() {
        if s["name"] != flaky["name"] {
            assert_eq!(s["restarts"], 0, "{s}");
        }
    }
    for c in r["channels"].as_array().unwrap() {
        assert_eq!(c["dropped"], 0, "{c}");
        assert_eq!(c["lost"], 0, "{c}");
        assert!(c["written"].as_u64().unwrap() > 0, "{c}");
    }
    for topic in ["/camera/left/h265", "/camera/right/h265"] {
        let c = channel(&r, topic);
        let written = c["written"].as_u64().unwrap();
        let v = verify(
            session,
            topic,
            &[
                "--fps",
                "30",
                "--allow-gaps",
                "--expect-frames",
                &written.to_string(),
            ],
        );
        assert_losses_counted(c, &v);
        assert!(v["segments"].as_array().unwrap().len() >= 3, "{v:#}");
    }
    let v = verify(
        session,
        "/camera/flaky/h265",
        &["--keyframe-after-gap-ms", "250"],
    );
    assert!(v["resumed_after_gaps"].as_u64().unwrap() >= 1, "{v:#}");
    println!("{v}");
}
