//! `edgerec export video` and the video line of `edgerec info`, end to end:
//! a 6 s test camera (640x480, 30 fps, x265enc, a keyframe a second) in two
//! 3 s segments is recorded by the binary, exported to MP4 and to raw
//! H.265, and the files are checked with ffprobe (libavformat/libavcodec,
//! sharing no code with edgerec) against the messages as the `mcap` crate
//! reads them. Skips, saying why, without ffprobe or the GStreamer
//! elements (x265enc, h265parse, mp4mux).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use edgerec_testkit::skip::{Allowed, Skip};

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");
const TOPIC: &str = "/camera/front/h265";
const FPS: f64 = 30.0;

fn config(root: &Path) -> String {
    format!(
        r#"
[recording]
root = "{root}/rec"
session_prefix = "cam"

[health]
watchdog = ""
fault_file = "{root}/last-fault.json"
status_socket = "{root}/edgerec.sock"

[retention]
# Tests must not depend on how full the machine's disk is.
min_free_bytes = 0
min_free_percent = 0

[segment]
max_duration = "3s"

[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 400

[[camera]]
name = "front"
source = "test"
pattern = "ball"
width = 640
height = 480
fps = 30
encoder = "x265enc"
bitrate = "2M"
"#,
        root = root.display()
    )
}

fn edgerec(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("EDGEREC_LOG", "warn")
        .output()
        .expect("run edgerec")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Why this machine cannot run these tests, if it cannot.
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
    if let Some(why) = edgerec_testkit::exec_skip_reason(BIN) {
        return Some(Skip::missing(why));
    }
    if Command::new("ffprobe").arg("-version").output().is_err() {
        return Some(Skip::missing("no ffprobe (apt install ffmpeg)"));
    }
    if let Err(e) = edgerec_camera::mux::available(edgerec_camera::mux::element::MP4) {
        return Some(Skip::missing(e.to_string()));
    }
    let x265 = Command::new("gst-inspect-1.0")
        .args(["--exists", "x265enc"])
        .status();
    if !x265.is_ok_and(|s| s.success()) {
        return Some(Skip::missing(
            "GStreamer has no x265enc (gstreamer1.0-plugins-bad with libx265)",
        ));
    }
    None
}

/// The recording all tests here share, made once.
struct Recording {
    /// The bag directory.
    bag: PathBuf,
    /// Where exports go.
    out: PathBuf,
    /// Capture timestamps of the topic's messages, in order.
    stamps: Vec<u64>,
    /// Bytes of their access units.
    data_bytes: u64,
}

fn recording() -> Option<&'static Recording> {
    static REC: OnceLock<Result<Recording, Skip>> = OnceLock::new();
    let r = REC.get_or_init(|| {
        if let Some(why) = skip_reason() {
            return Err(why);
        }
        Ok(record())
    });
    match r {
        Ok(r) => Some(r),
        Err(why) => {
            why.report();
            None
        }
    }
}

fn record() -> Recording {
    // Shared by the tests of this binary, so not a TempDir (a static is
    // never dropped): a fixed directory under cargo's scratch space,
    // emptied first.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("export_video");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("cam.toml");
    std::fs::write(&cfg, config(&dir)).unwrap();
    let o = edgerec(&["run", "--config", cfg.to_str().unwrap(), "--duration", "6s"]);
    assert!(o.status.success(), "{}", text(&o));
    let sessions: Vec<PathBuf> = std::fs::read_dir(dir.join("rec"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let bag = sessions[0].clone();
    let segments = edgerec_format::bag::segment_files(&bag).unwrap();
    assert!(segments.len() >= 2, "{segments:?}");
    // The messages as an independent MCAP reader sees them.
    let mut stamps = Vec::new();
    let mut data_bytes = 0;
    for s in &segments {
        let rb = edgerec_testkit::mcap_readback(s).unwrap();
        for m in rb.messages.iter().filter(|m| m.topic == TOPIC) {
            let f = edgerec_camera::message::decode(&m.data).unwrap();
            stamps.push(f.stamp_ns);
            data_bytes += f.data.len() as u64;
        }
    }
    assert!(stamps.len() > 150, "{} frames in 6 s", stamps.len());
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    Recording {
        bag,
        out,
        stamps,
        data_bytes,
    }
}

/// ffprobe's figures of a file: (frames decoded, duration in s).
fn ffprobe(path: &Path) -> (u64, Option<f64>) {
    let o = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-count_frames",
            "-select_streams",
            "v:0",
            "-show_entries",
            "stream=codec_name,width,height,nb_read_frames:format=duration",
            "-of",
            "default=noprint_wrappers=1",
        ])
        .arg(path)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success() && o.stderr.is_empty(),
        "ffprobe {}: {}",
        path.display(),
        text(&o)
    );
    let get = |k: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k} in {out}"))
            .to_owned()
    };
    assert_eq!(get("codec_name"), "hevc", "{out}");
    assert_eq!((get("width"), get("height")), ("640".into(), "480".into()));
    (
        get("nb_read_frames").parse().unwrap(),
        get("duration").parse().ok(),
    )
}

fn export(r: &Recording, topic: &str, name: &str) -> (Output, PathBuf) {
    let out = r.out.join(name);
    let o = edgerec(&[
        "export",
        "video",
        r.bag.to_str().unwrap(),
        "--topic",
        topic,
        "-o",
        out.to_str().unwrap(),
    ]);
    (o, out)
}

#[test]
fn mp4_and_raw_exports_hold_every_frame_at_the_recorded_timing() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    let Some(r) = recording() else { return };
    let frames = r.stamps.len() as u64;
    let span = (r.stamps[frames as usize - 1] - r.stamps[0]) as f64 / 1e9;

    let (o, mp4) = export(r, TOPIC, "front.mp4");
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains(&format!("exported {frames} frames of {TOPIC}"))
            && stdout.contains("front.mp4"),
        "{stdout}"
    );
    // Every segment starts on a keyframe: nothing skipped.
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("skipped"),
        "{}",
        text(&o)
    );
    let (decoded, duration) = ffprobe(&mp4);
    assert_eq!(decoded, frames, "frames in the MP4 vs messages recorded");
    let duration = duration.expect("the MP4 states its duration");
    // The capture span plus the last frame's own duration.
    assert!(
        (duration - span).abs() <= 1.0 / FPS + 1e-3,
        "MP4 lasts {duration:.4} s, the recording spans {span:.4} s"
    );
    assert!(!part(&mp4).exists());

    let (o, raw) = export(r, TOPIC, "front.h265");
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::metadata(&raw).unwrap().len(), r.data_bytes);
    let (decoded, _) = ffprobe(&raw);
    assert_eq!(decoded, frames, "frames in the raw stream");
}

fn part(p: &Path) -> PathBuf {
    edgerec_camera::export::part_path(p)
}

#[test]
fn info_shows_the_measured_picture_rate_and_keyframe_interval() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    let Some(r) = recording() else { return };
    let o = edgerec(&["info", r.bag.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains(&format!("Topic: {TOPIC} ")))
        .unwrap_or_else(|| panic!("{out}"));
    let video = lines[at + 1];
    assert!(video.contains("| Video: 640x480 |"), "{video}");
    let field = |name: &str| -> f64 {
        let rest = video
            .split(name)
            .nth(1)
            .unwrap_or_else(|| panic!("{video}"));
        rest.split_whitespace().next().unwrap().parse().unwrap()
    };
    let fps = field("Frame rate: ");
    assert!((fps - FPS).abs() < 1.0, "{video}");
    let key = field("Keyframe interval: ");
    assert!((key - 30.0).abs() <= 1.0, "{video}");
    assert!(field("Bitrate: ") > 0.0, "{video}");
    // Only video topics get the line.
    assert!(!lines[at + 2].contains("Video:"), "{out}");
}

#[test]
fn wrong_topics_are_refused_with_the_video_topics_listed() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    let Some(r) = recording() else { return };
    let (o, out) = export(r, "/nope", "nope.mp4");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no topic /nope in the bag; its video topics: /camera/front/h265"),
        "{err}"
    );
    assert!(!out.exists() && !part(&out).exists());

    let (o, out) = export(r, "/imu", "imu.mp4");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("/imu is sensor_msgs/msg/Imu, not foxglove_msgs/msg/CompressedVideo"),
        "{err}"
    );
    assert!(!out.exists() && !part(&out).exists());

    let (o, _) = export(r, TOPIC, "front.avi");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let (o, _) = export(r, TOPIC, "no/such/dir/front.mp4");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("cannot write the output"),
        "{}",
        text(&o)
    );
}
