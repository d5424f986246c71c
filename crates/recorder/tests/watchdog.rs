//! The recorder's own stages feed the watchdog: a real recording (storage
//! and sources beating through `Watch`) keeps a fake watchdog device fed
//! at its period; when one source hangs (stops pushing and stops saying
//! it is alive), the pings stop within its deadline, the fault file names
//! that source, and the recording itself goes on and closes cleanly.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgerec_format::bag::MetadataVersion;
use edgerec_format::chunk::Compression;
use edgerec_format::msgdefs;
use edgerec_health::fault::FaultRecord;
use edgerec_health::heartbeat::Heartbeats;
use edgerec_health::watchdog::{FakeWatchdog, Supervisor, SupervisorOptions};
use edgerec_recorder::pipeline::SplitPolicy;
use edgerec_recorder::source::{ChannelSpec, SourceError, SourceSink, StopFlag};
use edgerec_recorder::{
    ChannelId, Envelope, Recorder, RecorderOptions, Source, SystemClock, Watch,
};
use edgerec_storage::WriterOptions;

const PERIOD: Duration = Duration::from_millis(100);
const DEADLINE: Duration = Duration::from_millis(400);

/// Pushes a small message every 10 ms; after `hang_after` (if any) hangs:
/// no pushes, no `alive()`, until stop.
struct Sensor {
    topic: &'static str,
    hang_after: Option<Duration>,
    hung: Arc<AtomicBool>,
    channel: Option<ChannelId>,
}

impl Source for Sensor {
    fn name(&self) -> String {
        self.topic.to_owned()
    }

    fn register(&mut self, sink: &mut SourceSink) -> Result<(), SourceError> {
        let def = msgdefs::lookup("std_msgs/msg/String").unwrap();
        self.channel = Some(sink.register(ChannelSpec {
            topic: self.topic.to_owned(),
            type_name: def.name.to_owned(),
            message_encoding: "cdr".into(),
            schema_encoding: def.encoding.into(),
            schema: def.text().as_bytes().to_vec(),
            metadata: Default::default(),
            latched: false,
        })?);
        Ok(())
    }

    fn run(self: Box<Self>, sink: SourceSink, stop: StopFlag) -> Result<(), SourceError> {
        let start = Instant::now();
        let channel = self.channel.unwrap();
        while !stop.is_set() {
            if self.hang_after.is_some_and(|h| start.elapsed() >= h) {
                self.hung.store(true, Ordering::Release);
                // Hung: a driver call that never returns, say.
                while !stop.is_set() {
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
        watch: Watch {
            heartbeats: Some(heartbeats.clone()),
            deadline: DEADLINE,
            ..Watch::default()
        },
    }
}

#[test]
fn a_hung_source_stops_the_watchdog_and_is_named() {
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
            channel: None,
        }),
        Box::new(Sensor {
            topic: "/can",
            hang_after: Some(Duration::from_millis(1500)),
            hung: hung.clone(),
            channel: None,
        }),
    ];
    let rec = Recorder::start(
        options(&d.path().join("rec"), &heartbeats),
        sources,
        Arc::new(SystemClock),
    )
    .unwrap();
    let names: Vec<String> = heartbeats.snapshot().into_iter().map(|s| s.name).collect();
    for want in ["storage", "source /imu", "source /can"] {
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

    // /can hangs at 1.5 s; the pings stop within its deadline (plus one
    // period for the check, plus slack for a loaded machine).
    let t0 = Instant::now();
    while !hung.load(Ordering::Acquire) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the source never hung"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let hung_at = Instant::now();
    std::thread::sleep(DEADLINE + PERIOD * 6);
    let last = *log.keepalives().last().unwrap();
    let fed_for = last.saturating_duration_since(hung_at);
    assert!(
        fed_for <= DEADLINE + PERIOD + Duration::from_millis(60),
        "the watchdog was fed {fed_for:?} after the source hung (deadline {DEADLINE:?})"
    );
    let after = log.keepalives().len();
    std::thread::sleep(PERIOD * 3);
    assert_eq!(log.keepalives().len(), after, "pings resumed while hung");

    // The fault file names the hung source; storage and /imu were fine.
    let fault: FaultRecord =
        serde_json::from_str(&std::fs::read_to_string(&fault_file).unwrap()).unwrap();
    assert_eq!(fault.stage, "source /can", "{fault:?}");
    assert!(fault.silent_for_ms >= DEADLINE.as_millis() as u64);
    let status = supervisor.status();
    assert_eq!(status.stalled.len(), 1, "{status:?}");
    assert_eq!(status.stalled[0].name, "source /can");

    // The recording is unharmed by the hang: /imu kept going, the files
    // close cleanly.
    let report = rec.stop().unwrap();
    let imu = report
        .status
        .channels
        .iter()
        .find(|c| c.topic == "/imu")
        .unwrap();
    assert!(imu.written > 200, "{imu:?}");
    assert_eq!(report.segments.len(), 1);
    edgerec_testkit::mcap_readback(&report.segments[0].path).unwrap();
    // The hung source ended with the stop and unregistered: nothing is
    // stalled any more.
    assert!(heartbeats.check(Instant::now()).is_empty());
    drop(supervisor);
}
