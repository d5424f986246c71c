//! The GStreamer pipeline of one camera, as a gst-launch description: a
//! pure function of the configuration and the chosen encoder, so every
//! source and encoder combination is tested here, the Jetson ones too.
//!
//! ```text
//! <source> ! <leaky queue> ! <conversion> ! <encoder> name=enc
//!          ! h265parse config-interval=-1
//!          ! video/x-h265,stream-format=byte-stream,alignment=au
//!          ! appsink name=sink
//! ```
//!
//! The leaky queue in front of the encoder holds at most three frames: a
//! live camera never waits for a slow encoder; a frame it drops shows as a
//! gap in the timestamps (or argus frame numbers) and is counted.

use edgerec_config::gst_chain::{self, quote, ChainError};
use edgerec_config::{CameraConfig, CameraSourceKind};

use crate::encoder::{properties, EncodeSettings, Encoder};

/// Name of the encoder element in the pipeline.
pub const ENCODER_NAME: &str = "enc";
/// Name of the appsink.
pub const SINK_NAME: &str = "sink";
/// Name of the appsrc a `topic` camera is fed through.
pub const INPUT_NAME: &str = "input";
/// Name of the source element of an `argus` camera (its pad is probed
/// for the sensor timestamps).
pub const CAMERA_NAME: &str = "camsrc";

/// Caps of what the appsink takes: one access unit per buffer, Annex B.
pub const H265_CAPS: &str = "video/x-h265,stream-format=byte-stream,alignment=au";

/// `video/x-raw,width=W,height=H,framerate=F/1`.
fn raw_caps(cfg: &CameraConfig, memory: &str, format: Option<&str>) -> String {
    let mut caps = format!("video/x-raw{memory}");
    if let Some(f) = format {
        caps.push_str(&format!(",format={f}"));
    }
    caps.push_str(&format!(
        ",width={},height={},framerate={}/1",
        cfg.width, cfg.height, cfg.fps
    ));
    caps
}

/// The source part, ending in raw video (system memory, or NVMM for argus).
fn source(cfg: &CameraConfig) -> Result<String, ChainError> {
    // Scaled and rate-converted to the configured picture, for sources
    // whose own picture is not asked for.
    let fit = format!(
        "videoconvert ! videoscale ! videorate ! {}",
        raw_caps(cfg, "", None)
    );
    Ok(match cfg.source {
        CameraSourceKind::Test => format!(
            "videotestsrc is-live=true pattern={} ! {}",
            quote(&cfg.pattern),
            raw_caps(cfg, "", Some("I420"))
        ),
        CameraSourceKind::V4l2 => {
            let device = quote(&cfg.device.to_string_lossy());
            match cfg.format.as_str() {
                "MJPG" | "MJPEG" | "JPEG" => format!(
                    "v4l2src device={device} ! image/jpeg,width={},height={},framerate={}/1 ! jpegdec",
                    cfg.width, cfg.height, cfg.fps
                ),
                "" => format!("v4l2src device={device} ! {}", raw_caps(cfg, "", None)),
                f => format!("v4l2src device={device} ! {}", raw_caps(cfg, "", Some(f))),
            }
        }
        CameraSourceKind::Argus => {
            let mut s = format!(
                "nvarguscamerasrc name={CAMERA_NAME} sensor-id={}",
                cfg.sensor_id
            );
            if cfg.sensor_mode >= 0 {
                s.push_str(&format!(" sensor-mode={}", cfg.sensor_mode));
            }
            format!("{s} ! {}", raw_caps(cfg, "(memory:NVMM)", Some("NV12")))
        }
        CameraSourceKind::Rtsp => format!(
            "rtspsrc location={} latency=100 ! decodebin ! {fit}",
            quote(&cfg.url)
        ),
        // Built from the chain as parsed, never from the text as given.
        CameraSourceKind::Pipeline => {
            format!("{} ! {fit}", gst_chain::parse(&cfg.pipeline)?.describe())
        }
        // The caps are set on the appsrc from the first image.
        CameraSourceKind::Topic => format!(
            "appsrc name={INPUT_NAME} is-live=true format=time do-timestamp=false \
             max-bytes=0 block=false ! videoconvert ! videoscale ! {}",
            // Images come as they come: no framerate on the caps.
            format_args!("video/x-raw,width={},height={}", cfg.width, cfg.height)
        ),
    })
}

/// From the source's raw video to what the encoder takes.
fn conversion(cfg: &CameraConfig, encoder: Encoder) -> &'static str {
    let nvmm = cfg.source == CameraSourceKind::Argus;
    match (encoder, nvmm) {
        (Encoder::NvV4l2H265, true) => "",
        (Encoder::NvV4l2H265, false) => "nvvidconv ! video/x-raw(memory:NVMM),format=NV12 ! ",
        (Encoder::NvH265, true) => "nvvidconv ! video/x-raw,format=NV12 ! ",
        (Encoder::NvH265, false) => "videoconvert ! video/x-raw,format=NV12 ! ",
        (Encoder::X265, true) => "nvvidconv ! video/x-raw,format=I420 ! ",
        (Encoder::X265, false) => "videoconvert ! video/x-raw,format=I420 ! ",
    }
}

/// The whole description; a `pipeline` camera's chain is refused unless
/// [`gst_chain::parse`] accepts it.
pub fn describe(
    cfg: &CameraConfig,
    encoder: Encoder,
    settings: &EncodeSettings,
) -> Result<String, ChainError> {
    let props: Vec<String> = properties(encoder, settings)
        .into_iter()
        .map(|(k, v)| format!("{k}={}", quote(&v)))
        .collect();
    Ok(format!(
        "{} ! queue max-size-buffers=3 max-size-bytes=0 max-size-time=0 leaky=downstream ! \
         {}{} name={ENCODER_NAME} {} ! h265parse config-interval=-1 ! {H265_CAPS} ! \
         appsink name={SINK_NAME}",
        source(cfg)?,
        conversion(cfg, encoder),
        encoder.element(),
        props.join(" ")
    ))
}

/// The elements a description needs besides the encoder's, each with what
/// provides it: checked before the pipeline is made, so a missing plugin
/// is one clear error and not a parse failure.
pub fn needed_elements(cfg: &CameraConfig) -> Vec<(&'static str, &'static str)> {
    let base = "gstreamer1.0-plugins-base";
    let good = "gstreamer1.0-plugins-good";
    let bad = "gstreamer1.0-plugins-bad";
    let mut v = vec![
        ("queue", "libgstreamer1.0-0 (core)"),
        ("h265parse", bad),
        ("appsink", base),
    ];
    match cfg.source {
        CameraSourceKind::Test => v.extend([("videotestsrc", base), ("videoconvert", base)]),
        CameraSourceKind::V4l2 => {
            v.extend([("v4l2src", good), ("videoconvert", base)]);
            if matches!(cfg.format.as_str(), "MJPG" | "MJPEG" | "JPEG") {
                v.push(("jpegdec", good));
            }
        }
        CameraSourceKind::Argus => v.push((
            "nvarguscamerasrc",
            "JetPack's nvidia-l4t-gstreamer (gstreamer1.0-plugins-nvarguscamerasrc)",
        )),
        CameraSourceKind::Rtsp => v.extend([
            ("rtspsrc", good),
            ("decodebin", base),
            ("videoconvert", base),
            ("videoscale", base),
            ("videorate", base),
        ]),
        CameraSourceKind::Pipeline => v.extend([
            ("videoconvert", base),
            ("videoscale", base),
            ("videorate", base),
        ]),
        CameraSourceKind::Topic => v.extend([
            ("appsrc", base),
            ("videoconvert", base),
            ("videoscale", base),
        ]),
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgerec_config::RateControl;

    fn settings() -> EncodeSettings {
        EncodeSettings {
            bitrate: 4_000_000,
            rate_control: RateControl::Cbr,
            keyframe_frames: 30,
            preset: String::new(),
        }
    }

    fn cam(source: CameraSourceKind) -> CameraConfig {
        let mut c = CameraConfig::test("front");
        c.source = source;
        c.width = 1280;
        c.height = 720;
        c
    }

    #[test]
    fn test_camera_through_x265() {
        let d = describe(&cam(CameraSourceKind::Test), Encoder::X265, &settings()).unwrap();
        assert_eq!(
            d,
            "videotestsrc is-live=true pattern=smpte ! \
             video/x-raw,format=I420,width=1280,height=720,framerate=30/1 ! \
             queue max-size-buffers=3 max-size-bytes=0 max-size-time=0 leaky=downstream ! \
             videoconvert ! video/x-raw,format=I420 ! x265enc name=enc bitrate=4000 \
             key-int-max=30 speed-preset=ultrafast tune=zerolatency \
             option-string=\"open-gop=0:scenecut=0:min-keyint=30:bframes=0:repeat-headers=1:\
             vbv-maxrate=4000:vbv-bufsize=4000\" ! \
             h265parse config-interval=-1 ! \
             video/x-h265,stream-format=byte-stream,alignment=au ! appsink name=sink"
        );
    }

    #[test]
    fn argus_feeds_nvenc_in_nvmm_and_others_through_nvvidconv() {
        let mut c = cam(CameraSourceKind::Argus);
        c.sensor_id = 2;
        let d = describe(&c, Encoder::NvV4l2H265, &settings()).unwrap();
        assert!(
            d.starts_with(
                "nvarguscamerasrc name=camsrc sensor-id=2 ! \
             video/x-raw(memory:NVMM),format=NV12,width=1280,height=720,framerate=30/1 ! queue"
            ),
            "{d}"
        );
        assert!(
            d.contains("leaky=downstream ! nvv4l2h265enc name=enc bitrate=4000000"),
            "{d}"
        );
        c.sensor_mode = 3;
        let d = describe(&c, Encoder::X265, &settings()).unwrap();
        assert!(d.contains("sensor-id=2 sensor-mode=3 !"), "{d}");
        assert!(
            d.contains("nvvidconv ! video/x-raw,format=I420 ! x265enc"),
            "{d}"
        );
    }

    #[test]
    fn v4l2_asks_for_its_format_and_nvenc_gets_nvmm() {
        let mut c = cam(CameraSourceKind::V4l2);
        c.format = "YUY2".into();
        let d = describe(&c, Encoder::NvV4l2H265, &settings()).unwrap();
        assert!(d.starts_with(
            "v4l2src device=/dev/video0 ! video/x-raw,format=YUY2,width=1280,height=720,framerate=30/1"
        ), "{d}");
        assert!(
            d.contains("nvvidconv ! video/x-raw(memory:NVMM),format=NV12 ! nvv4l2h265enc"),
            "{d}"
        );
        c.format = "MJPG".into();
        let d = describe(&c, Encoder::NvH265, &settings()).unwrap();
        assert!(
            d.contains("image/jpeg,width=1280,height=720,framerate=30/1 ! jpegdec"),
            "{d}"
        );
        assert!(
            d.contains("videoconvert ! video/x-raw,format=NV12 ! nvh265enc"),
            "{d}"
        );
        assert!(needed_elements(&c).iter().any(|(e, _)| *e == "jpegdec"));
    }

    #[test]
    fn rtsp_pipeline_and_topic_are_fitted_to_the_picture() {
        let mut c = cam(CameraSourceKind::Rtsp);
        c.url = "rtsp://10.0.0.5:8554/cam a".into();
        let d = describe(&c, Encoder::X265, &settings()).unwrap();
        assert!(d.starts_with("rtspsrc location=\"rtsp://10.0.0.5:8554/cam a\" latency=100 ! decodebin ! videoconvert ! videoscale ! videorate ! video/x-raw,width=1280,height=720,framerate=30/1"), "{d}");
        let mut c = cam(CameraSourceKind::Pipeline);
        c.pipeline = " v4l2src device=/dev/video2 ! videoflip method=rotate-180 ".into();
        let d = describe(&c, Encoder::X265, &settings()).unwrap();
        assert!(
            d.starts_with(
                "v4l2src device=/dev/video2 ! videoflip method=rotate-180 ! videoconvert"
            ),
            "{d}"
        );
        let c = cam(CameraSourceKind::Topic);
        let d = describe(&c, Encoder::X265, &settings()).unwrap();
        assert!(
            d.starts_with("appsrc name=input is-live=true format=time"),
            "{d}"
        );
        assert!(
            d.contains("videoscale ! video/x-raw,width=1280,height=720 ! queue"),
            "{d}"
        );
    }

    #[test]
    fn quoting() {
        assert_eq!(quote("/dev/video0"), "/dev/video0");
        assert_eq!(quote("a b"), "\"a b\"");
        assert_eq!(quote("x\"y"), "\"x\\\"y\"");
        assert_eq!(quote(""), "\"\"");
    }
}
