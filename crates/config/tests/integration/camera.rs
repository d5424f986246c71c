//! `[[camera]]`: what a camera entry accepts, and the errors (line, column,
//! message, hint) for the combinations that cannot work.

use std::path::Path;
use std::time::Duration;

use edgerec_config::{CameraSourceKind, Config, ConfigError, EncoderChoice, RateControl};

fn parse(text: &str) -> Result<Config, Box<ConfigError>> {
    Config::parse(text, Path::new("edgerec.toml")).map_err(Box::new)
}

#[track_caller]
fn error(text: &str) -> ConfigError {
    match parse(text) {
        Ok(config) => panic!("accepted {text:?} as {:?}", config.camera),
        Err(err) => *err,
    }
}

#[test]
fn a_test_camera_takes_the_defaults() {
    let cfg = parse("[[camera]]\nname = \"front\"\nsource = \"test\"\n").unwrap();
    let cam = &cfg.camera[0];
    assert_eq!(cam.video_topic(), "/camera/front/h265");
    assert_eq!(cam.frame(), "front");
    assert_eq!((cam.width, cam.height, cam.fps), (1920, 1080, 30));
    assert_eq!(cam.encoder, EncoderChoice::Auto);
    assert_eq!(cam.bitrate, 8_000_000);
    assert_eq!(cam.rate_control, RateControl::Cbr);
    assert_eq!(cam.keyframe_interval, Duration::from_secs(1));
    assert_eq!(cam.source, CameraSourceKind::Test);
}

#[test]
fn every_key_reads() {
    let cfg = parse(
        r#"[[camera]]
name = "left"
topic = "/cams/left/video"
frame_id = "left_optical"
source = "v4l2"
device = "/dev/video4"
format = "YUY2"
width = 1280
height = 720
fps = 60
encoder = "x265enc"
bitrate = "12.5M"
rate_control = "vbr"
keyframe_interval = "500ms"
preset = "superfast"
"#,
    )
    .unwrap();
    let cam = &cfg.camera[0];
    assert_eq!(cam.video_topic(), "/cams/left/video");
    assert_eq!(cam.frame(), "left_optical");
    assert_eq!(cam.device, Path::new("/dev/video4"));
    assert_eq!(cam.bitrate, 12_500_000);
    assert_eq!(cam.rate_control, RateControl::Vbr);
    assert_eq!(cam.keyframe_interval, Duration::from_millis(500));
    for (text, bps) in [
        ("800000", 800_000),
        ("\"800k\"", 800_000),
        ("\"4Mbit/s\"", 4_000_000),
    ] {
        let cfg = parse(&format!(
            "[[camera]]\nname = \"a\"\nsource = \"test\"\nbitrate = {text}\n"
        ))
        .unwrap();
        assert_eq!(cfg.camera[0].bitrate, bps, "{text}");
    }
}

#[test]
fn a_source_without_what_it_needs_is_an_error_at_the_source() {
    let err = error("[[camera]]\nname = \"a\"\nsource = \"rtsp\"\n");
    assert_eq!((err.line, err.column), (Some(3), Some(10)), "{err}");
    assert_eq!(err.message, "source = \"rtsp\" needs `url`");
    assert_eq!(
        err.hint.as_deref(),
        Some("add url = \"rtsp://host:8554/stream\"")
    );
    let err = error("[[camera]]\nname = \"a\"\nsource = \"topic\"\n");
    assert_eq!(err.message, "source = \"topic\" needs `input_topic`");
    let err = error("[[camera]]\nname = \"a\"\nsource = \"pipeline\"\npipeline = \" \"\n");
    assert_eq!((err.line, err.column), (Some(4), Some(12)), "{err}");
    assert_eq!(err.message, "source = \"pipeline\" needs `pipeline`");
    let err = error("[[camera]]\nname = \"a\"\nsource = \"rtsp\"\nurl = \"http://x/\"\n");
    assert_eq!(err.message, "`http://x/` is not an RTSP URL");
}

#[test]
fn bad_values_name_the_key_and_the_fix() {
    let err = error("[[camera]]\nname = \"a\"\nsource = \"test\"\nwidth = 641\n");
    assert_eq!(
        (err.line, err.key.as_deref()),
        (Some(4), Some("camera[0].width"))
    );
    assert_eq!(err.message, "must be even for 4:2:0 video, got 641");
    assert_eq!(err.hint.as_deref(), Some("use 640 or 642"));
    let err = error("[[camera]]\nname = \"front-left\"\nsource = \"test\"\n");
    assert_eq!(err.message, "`front-left` is not a camera name");
    let err = error("[[camera]]\nname = \"a\"\nsource = \"usb\"\n");
    assert_eq!((err.line, err.column), (Some(3), Some(10)), "{err}");
    let err = error("[[camera]]\nname = \"a\"\nsource = \"test\"\nbitrate = \"fast\"\n");
    assert_eq!(err.message, "expected a bitrate");
    let err = error("[[camera]]\nname = \"a\"\nsource = \"test\"\nbitrate = \"900M\"\n");
    assert_eq!(
        err.message,
        "must be from 50000 to 400000000 bit/s, got 900000000"
    );
    let err = error(
        "[[camera]]\nname = \"a\"\nsource = \"test\"\nfps = 5\nkeyframe_interval = \"100ms\"\n",
    );
    assert_eq!(err.key.as_deref(), Some("camera[0].keyframe_interval"));
    assert_eq!(
        err.message,
        "a keyframe interval of 100ms holds no frame at 5 fps"
    );
    let err = error("[[camera]]\nsource = \"test\"\n");
    assert!(err.message.contains("name"), "{err}");
}

#[test]
fn two_cameras_cannot_share_a_name_or_a_topic() {
    let err = error(
        "[[camera]]\nname = \"a\"\nsource = \"test\"\n\n[[camera]]\nname = \"a\"\nsource = \"test\"\n",
    );
    assert_eq!(
        (err.line, err.key.as_deref()),
        (Some(6), Some("camera[1].name"))
    );
    assert_eq!(err.message, "duplicate camera name `a`");
    assert_eq!(
        err.hint.as_deref(),
        Some("camera[0] (line 2) already has it; give each camera its own name")
    );
    let err = error(
        "[[camera]]\nname = \"a\"\nsource = \"test\"\n\n[[camera]]\nname = \"b\"\nsource = \"test\"\ntopic = \"/camera/a/h265\"\n",
    );
    assert_eq!(
        (err.line, err.key.as_deref()),
        (Some(8), Some("camera[1].topic"))
    );
    assert_eq!(err.message, "duplicate camera topic `/camera/a/h265`");
}

#[test]
fn a_pipeline_that_reaches_past_the_camera_is_refused_at_its_part() {
    let err = error(
        "[[camera]]\nname = \"a\"\nsource = \"pipeline\"\n\
         pipeline = \"videotestsrc ! filesink location=/data/x\"\n",
    );
    assert_eq!(
        (err.line, err.key.as_deref()),
        (Some(4), Some("camera[0].pipeline"))
    );
    assert!(err.message.contains("`filesink` is a sink"), "{err}");
    assert!(
        err.message.contains("(at `filesink location=/data/x`)"),
        "{err}"
    );
    assert!(err.hint.is_some(), "{err}");
    let err = error(
        "[[camera]]\nname = \"a\"\nsource = \"pipeline\"\n\
         pipeline = \"videotestsrc ! videoconvert videotestsrc\"\n",
    );
    assert!(err.message.contains("second chain"), "{err}");
    let err = error(
        "[[camera]]\nname = \"a\"\nsource = \"pipeline\"\n\
         pipeline = \"v4l2src device=/dev/video2 name=t ! videoconvert\"\n",
    );
    assert!(err.message.contains("`name`"), "{err}");
    let cfg = parse(
        "[[camera]]\nname = \"a\"\nsource = \"pipeline\"\n\
         pipeline = \"v4l2src device=/dev/video2 ! videoflip method=rotate-180\"\n",
    )
    .unwrap();
    assert_eq!(
        cfg.camera[0].pipeline,
        "v4l2src device=/dev/video2 ! videoflip method=rotate-180"
    );
}

#[test]
fn values_put_into_the_pipeline_are_words() {
    for (key, value, says) in [
        ("format", "YUY2,width=1 ! filesink", "pixel format"),
        ("device", "/etc/shadow", "V4L2 capture node"),
        ("pattern", "ball ! filesink", "letters, digits"),
        ("preset", "fast name=x", "letters, digits"),
    ] {
        let err = error(&format!(
            "[[camera]]\nname = \"a\"\nsource = \"v4l2\"\n{key} = \"{value}\"\n"
        ));
        assert_eq!(
            err.key.as_deref(),
            Some(format!("camera[0].{key}").as_str())
        );
        assert!(err.message.contains(says), "{key}: {err}");
    }
}
