//! A camera that gives frames and then stops without a word on the bus
//! (an encoder or driver that stalls: seen with x265enc starved of CPU at
//! 1080p) is found stalled and restarted by the supervisor: here a
//! pipeline source whose `identity sleep-time` holds every frame 1.5 s,
//! against a stall wait of 1 s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use edgerec_camera::{missing_elements, CameraSource};
use edgerec_config::{CameraConfig, CameraSourceKind, EncoderChoice};
use edgerec_source::{Intake, MemoryBudget, Supervisor, SupervisorOptions, SystemClock};

#[test]
fn a_camera_that_stops_delivering_is_restarted() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    if let Some(q) = edgerec_testkit::qemu_user() {
        edgerec_testkit::skip::skip_allowed(
            edgerec_testkit::skip::Allowed::QemuUser,
            format!("{q}: x265enc cannot keep time under emulation"),
        );
        return;
    }
    match missing_elements(&[
        "videotestsrc",
        "identity",
        "x265enc",
        "h265parse",
        "appsink",
    ]) {
        Ok(m) if m.is_empty() => {}
        other => {
            edgerec_testkit::skip::skip(format!("GStreamer lacks {other:?}"));
            return;
        }
    }
    let mut cfg = CameraConfig::test("stuck");
    cfg.source = CameraSourceKind::Pipeline;
    cfg.pipeline = "videotestsrc is-live=true ! identity sleep-time=1500000".into();
    cfg.width = 160;
    cfg.height = 120;
    cfg.encoder = EncoderChoice::X265Enc;
    cfg.bitrate = 200_000;
    let cam = CameraSource::new(&cfg, None)
        .unwrap()
        .with_stall_wait(Duration::from_secs(1));
    let intake = Intake::new(1024, MemoryBudget::new(64 << 20), Arc::new(SystemClock));
    let sup = Supervisor::start(
        &intake,
        vec![Box::new(cam)],
        SupervisorOptions::default(),
        Box::new(|| {}),
    )
    .unwrap();
    let t = Instant::now();
    let mut seen = None;
    while t.elapsed() < Duration::from_secs(15) {
        if let Some(s) = sup.status().into_iter().find(|s| s.restarts >= 1) {
            seen = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    sup.stop(Duration::from_secs(5));
    let s = seen.expect("the stalled camera was never restarted");
    let why = s.last_error.unwrap_or_default();
    assert!(why.contains("stalled"), "{why}");
    println!("restarted after {:?}: {why}", t.elapsed());
}
