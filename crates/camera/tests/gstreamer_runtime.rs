//! The GStreamer this crate links finds its plugins and runs a pipeline:
//! natively, and as an aarch64 binary under user-mode QEMU
//! (`scripts/test-aarch64`), where libgstreamer and the plugins are
//! Debian's arm64 multiarch packages. It checks the build and run-time
//! set-up, not the camera code; an element that is not installed is
//! a skip naming its package (a failure under scripts/test, which
//! installs them).

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;

/// The elements edgerec's pipelines and tests use, with the Debian
/// package that has each.
const ELEMENTS: &[(&str, &str)] = &[
    ("videotestsrc", "gstreamer1.0-plugins-base"),
    ("videoconvert", "gstreamer1.0-plugins-base"),
    ("videoscale", "gstreamer1.0-plugins-base"),
    ("videorate", "gstreamer1.0-plugins-base"),
    ("appsrc", "gstreamer1.0-plugins-base"),
    ("appsink", "gstreamer1.0-plugins-base"),
    ("h265parse", "gstreamer1.0-plugins-bad"),
    ("x265enc", "gstreamer1.0-plugins-bad"),
    ("avdec_h265", "gstreamer1.0-libav"),
    ("mp4mux", "gstreamer1.0-plugins-good"),
];

/// Skips ([`edgerec_testkit::skip::skip`]) for each missing element of
/// `names` and says whether all are there.
fn have(test: &str, names: &[&str]) -> bool {
    let mut all = true;
    for name in names {
        if gst::ElementFactory::find(name).is_none() {
            let package = ELEMENTS
                .iter()
                .find(|(e, _)| e == name)
                .map_or("?", |(_, p)| p);
            edgerec_testkit::skip::skip(format!(
                "{test}: GStreamer has no {name} (Debian package {package})"
            ));
            all = false;
        }
    }
    all
}

/// Runs `description` (ending in an appsink named `sink`) to EOS and
/// returns the buffers' flags.
fn run(description: &str) -> Vec<gst::BufferFlags> {
    let pipeline = gst::parse::launch(description)
        .expect("pipeline")
        .downcast::<gst::Pipeline>()
        .expect("a pipeline");
    let sink = pipeline
        .by_name("sink")
        .expect("sink")
        .downcast::<gst_app::AppSink>()
        .expect("an appsink");
    pipeline.set_state(gst::State::Playing).expect("playing");
    let mut flags = Vec::new();
    // Generous: emulated x265 is slow on a loaded 2-core machine.
    while let Some(sample) = sink.try_pull_sample(gst::ClockTime::from_seconds(120)) {
        flags.push(sample.buffer().expect("buffer").flags());
    }
    let eos = sink.is_eos();
    let bus = pipeline.bus().expect("bus");
    let error = bus
        .pop_filtered(&[gst::MessageType::Error])
        .map(|m| format!("{m:?}"));
    pipeline.set_state(gst::State::Null).expect("null");
    assert!(eos, "no EOS from {description}: {error:?}");
    flags
}

#[test]
fn lists_the_elements() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    gst::init().expect("gst::init");
    println!("GStreamer {}", gst::version_string());
    let names: Vec<&str> = ELEMENTS.iter().map(|(e, _)| *e).collect();
    have("lists_the_elements", &names);
}

#[test]
fn raw_video_reaches_an_appsink() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    gst::init().expect("gst::init");
    if !have("raw_video_reaches_an_appsink", &["videotestsrc", "appsink"]) {
        return;
    }
    let flags = run(
        "videotestsrc num-buffers=3 ! video/x-raw,width=64,height=48 \
                     ! appsink name=sink sync=false",
    );
    assert_eq!(flags.len(), 3);
}

#[test]
fn x265_access_units_start_with_a_keyframe() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    gst::init().expect("gst::init");
    let needed = [
        "videotestsrc",
        "videoconvert",
        "x265enc",
        "h265parse",
        "appsink",
    ];
    if !have("x265_access_units_start_with_a_keyframe", &needed) {
        return;
    }
    let flags = run(
        "videotestsrc num-buffers=3 ! video/x-raw,width=64,height=48,framerate=30/1 \
         ! videoconvert ! video/x-raw,format=I420 ! x265enc speed-preset=ultrafast \
         ! h265parse ! video/x-h265,stream-format=byte-stream,alignment=au \
         ! appsink name=sink sync=false",
    );
    assert_eq!(flags.len(), 3);
    assert!(
        !flags[0].contains(gst::BufferFlags::DELTA_UNIT),
        "{flags:?}"
    );
}
