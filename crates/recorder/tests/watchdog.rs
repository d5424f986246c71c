//! The recorder's stages feed the watchdog, and a hung source does not:
//! a real recording (every stage beating through `Watch`) keeps a fake
//! watchdog device fed at its period; when one source hangs (stops
//! pushing and stops saying it is alive), its supervisor stops and
//! restarts it, the watchdog stays fed (a source is not a reason to reset
//! the board), no fault is written, and the other source's data and the
//! files are unharmed.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgerec_format::bag::MetadataVersion;
use edgerec_format::chunk::Compression;
use edgerec_format::msgdefs;
use edgerec_health::heartbeat::Heartbeats;
use edgerec_health::watchdog::{FakeWatchdog, Supervisor, SupervisorOptions};
use edgerec_recorder::{Recorder, RecorderOptions, SplitPolicy, Watch};
use edgerec_source::{
    ChannelSpec, Envelope, Source, SourceError, SourceSink, SourceState, Stop, SystemClock,
};
use edgerec_storage::WriterOptions;

const PERIOD: Duration = Duration::from_millis(100);
const DEADLINE: Duration = Duration::from_millis(400);

/// Pushes a small message every 10 ms; after `hang_after` (if any) in
/// its first run hangs: no pushes, no `alive()`, until stop.
struct Sensor {
    topic: &'static str,
    hang_after: Option<Duration>,
    hung: Arc<AtomicBool>,
}

impl Source for Sensor {
    fn name(&self) -> String {
        self.topic.to_owned()
    }

    fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError> {
        let def = msgdefs::lookup("std_msgs/msg/String").unwrap();
        let channel = sink.register(ChannelSpec {
            topic: self.topic.to_owned(),
            type_name: def.name.to_owned(),
            message_encoding: "cdr".into(),
            schema_encoding: def.encoding.into(),
            schema: def.text().as_bytes().to_vec(),
            metadata: Default::default(),
            latched: false,
        })?;
        let start = Instant::now();
        while !stop.is_requested() {
            if self.hang_after.is_some_and(|h| start.elapsed() >= h) {
                self.hang_after = None;
                self.hung.store(true, Ordering::Release);
                // Hung: a driver call that only the stop request ends.
                while !stop.is_requested() {
                    std::thread::sleep(Duration::from_millis(10));
                }
                break;
            }
            let now = sink.now_ns();
            let _ = sink.push(Envelope {
                channel,
                log_time: now,
                publish_time: now,
                payload: edgerec_format::cdr::msg::string("reading"),
            });
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }
}

// The update fills the test-only fault switch when that feature is on.
#[allow(clippy::needless_update)]
fn options(root: &Path, heartbeats: &Heartbeats) -> RecorderOptions {
    RecorderOptions {
        root: root.to_path_buf(),
        session_prefix: "wd".into(),
        session_dir: None,
        metadata_version: MetadataVersion::Humble,
        storage: WriterOptions {
            preallocate: 0,
            sync_interval: Duration::from_millis(100),
            ..WriterOptions::default()
        },
        chunk_size: 64 << 10,
        compression: Compression::None,
        chunk_max_age: Duration::from_millis(50),
        memory_budget: 64 << 20,
        compressor_threads: 1,
        queue_capacity: 1024,
        library: "edgerec watchdog test".into(),
        split: SplitPolicy::default(),
        retention: None,
        supervisor: edgerec_source::SupervisorOptions {
            backoff_min: Duration::from_millis(50),
            backoff_max: Duration::from_secs(1),
            deadline: DEADLINE,
        },
        triggers: None,
        watch: Watch {
            heartbeats: Some(heartbeats.clone()),
            deadline: DEADLINE,
            ..Watch::default()
        },
    }
}

#[test]
fn a_hung_source_is_restarted_and_the_watchdog_stays_fed() {
    let d = tempfile::tempdir().unwrap();
    let fault_file = d.path().join("last-fault.json");
    let heartbeats = Heartbeats::new();
    let fake = FakeWatchdog::new(true);
    let log = fake.log();
    let supervisor = Supervisor::start(
        SupervisorOptions {
            device: Some(Box::new(fake)),
            timeout: Duration::from_secs(10),
            ping_period: Some(PERIOD),
            fault_file: Some(fault_file.clone()),
            notifier: None,
        },
        heartbeats.clone(),
    )
    .unwrap();

    let hung = Arc::new(AtomicBool::new(false));
    let sources: Vec<Box<dyn Source>> = vec![
        Box::new(Sensor {
            topic: "/imu",
            hang_after: None,
            hung: Arc::new(AtomicBool::new(false)),
        }),
        Box::new(Sensor {
            topic: "/can",
            hang_after: Some(Duration::from_millis(1500)),
            hung: hung.clone(),
        }),
    ];
    let rec = Recorder::start(
        options(&d.path().join("rec"), &heartbeats),
        sources,
        Arc::new(SystemClock),
    )
    .unwrap();
    // Every stage of the pipeline is watched.
    let names: Vec<String> = heartbeats.snapshot().into_iter().map(|s| s.name).collect();
    for want in ["chunker", "compressor 0", "storage", "closer", "sources"] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }

    // Healthy: pings at the period while every stage beats.
    std::thread::sleep(Duration::from_millis(1200));
    let healthy = log.keepalives();
    assert!(
        (9..=14).contains(&healthy.len()),
        "{} pings in 1.2 s at a 100 ms period",
        healthy.len()
    );

    // /can hangs at 1.5 s; the supervisor restarts it after its deadline.
    let t0 = Instant::now();
    while !hung.load(Ordering::Acquire) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the source never hung"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let hung_at = Instant::now();
    let can = |rec: &Recorder| {
        rec.status()
            .sources
            .into_iter()
            .find(|s| s.name == "/can")
            .unwrap()
    };
    while can(&rec).restarts == 0 || can(&rec).state != SourceState::Running {
        assert!(
            hung_at.elapsed() < Duration::from_secs(10),
            "not restarted: {:?}",
            can(&rec)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let restarted = hung_at.elapsed();
    assert!(
        restarted >= DEADLINE && restarted < DEADLINE * 4,
        "restarted {restarted:?} after the hang (deadline {DEADLINE:?})"
    );
    assert!(can(&rec).last_error.unwrap().contains("silent for"));

    // The watchdog never stopped: pings went on through the hang, and no
    // fault was written.
    std::thread::sleep(PERIOD * 5);
    let pings = log.keepalives();
    let gaps = pings.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(gaps < PERIOD * 3, "a ping gap of {gaps:?}");
    assert!(!fault_file.exists(), "a source's hang is not a board fault");
    assert!(supervisor.status().stalled.is_empty());

    // The recording is unharmed: /imu kept going, /can came back, the
    // files close cleanly.
    let before = rec
        .status()
        .channels
        .iter()
        .find(|c| c.topic == "/can")
        .unwrap()
        .accepted;
    std::thread::sleep(Duration::from_millis(200));
    let after = rec
        .status()
        .channels
        .iter()
        .find(|c| c.topic == "/can")
        .unwrap()
        .accepted;
    assert!(after > before, "/can pushes again after its restart");
    let report = rec.stop().unwrap();
    let imu = report
        .status
        .channels
        .iter()
        .find(|c| c.topic == "/imu")
        .unwrap();
    assert!(imu.written > 200, "{imu:?}");
    assert_eq!(imu.dropped, 0);
    assert_eq!(report.segments.len(), 1);
    edgerec_testkit::mcap_readback(&report.segments[0].path).unwrap();
    // Every stage ended with the stop and unregistered.
    assert!(heartbeats.check(Instant::now()).is_empty());
    assert!(heartbeats.is_empty(), "{:?}", heartbeats.snapshot());
    drop(supervisor);
}
