//! The watchdog supervisor against `FakeWatchdog` and a unix datagram
//! socket playing systemd: pings while every stage beats, none once one
//! stalls (with the fault file written), the clean stop with and without
//! magic close, and an opt-in run on a real `/dev/watchdog`.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use edgerec_health::fault::FaultRecord;
use edgerec_health::heartbeat::{Heartbeat, Heartbeats};
use edgerec_health::notify::Notifier;
use edgerec_health::watchdog::{
    FakeOp, FakeWatchdog, LinuxWatchdog, Stopped, Supervisor, SupervisorOptions, WatchdogDevice,
};

const PERIOD: Duration = Duration::from_millis(100);
const DEADLINE: Duration = Duration::from_millis(300);
/// Slack for the coarse clock's tick and a loaded test machine.
const SLACK: Duration = Duration::from_millis(40);

/// A stage that beats every 20 ms on its own thread until dropped.
struct Beater {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn beat_in_background(heartbeat: Heartbeat) -> Beater {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let thread = thread::spawn(move || {
        let mut progress = 0;
        while !flag.load(Ordering::Relaxed) {
            progress += 1;
            heartbeat.beat_progress(progress);
            thread::sleep(Duration::from_millis(20));
        }
    });
    Beater {
        stop,
        thread: Some(thread),
    }
}

impl Drop for Beater {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

fn options(fake: FakeWatchdog) -> SupervisorOptions {
    SupervisorOptions {
        device: Some(Box::new(fake)),
        timeout: Duration::from_secs(10),
        ping_period: Some(PERIOD),
        ..SupervisorOptions::default()
    }
}

#[test]
fn healthy_stages_get_pings_at_the_period() {
    let fake = FakeWatchdog::new(true);
    let log = fake.log();
    let heartbeats = Heartbeats::new();
    let _storage = beat_in_background(heartbeats.register("storage", DEADLINE));
    let _imu = beat_in_background(heartbeats.register("source /imu", DEADLINE));
    let supervisor = Supervisor::start(options(fake), heartbeats.clone()).unwrap();
    thread::sleep(Duration::from_secs(1));

    let status = supervisor.status();
    let pings = log.keepalives();
    assert_eq!(
        log.ops()[0],
        FakeOp::SetTimeout(10),
        "the timeout is set first"
    );
    // One ping at start, then one per 100 ms: 10 or 11 in a second.
    assert!(
        (8..=12).contains(&pings.len()),
        "{} pings in 1 s at a 100 ms period",
        pings.len()
    );
    let intervals: Vec<Duration> = pings.windows(2).map(|w| w[1] - w[0]).collect();
    for interval in &intervals {
        // Each ping is scheduled one period after the previous one.
        assert!(
            *interval >= PERIOD - Duration::from_millis(5),
            "interval {interval:?}"
        );
    }
    let mean = intervals.iter().sum::<Duration>() / intervals.len() as u32;
    assert!(mean <= PERIOD + SLACK, "mean interval {mean:?}");

    assert_eq!(status.device.as_deref(), Some("edgerec fake watchdog"));
    assert_eq!(status.timeout_s, Some(10));
    assert_eq!(status.ping_period_ms, 100);
    assert!(status.magic_close);
    assert!(status.stalled.is_empty());
    assert!(status.pings >= 8);
    assert!(status.last_ping_age_ms.unwrap() <= 150);
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["timeout_s"], 10);

    assert_eq!(supervisor.stop().unwrap(), Stopped::Disarmed);
}

#[test]
fn a_stalled_stage_stops_the_pings_and_writes_the_fault() {
    let dir = tempfile::tempdir().unwrap();
    let fault_file = dir.path().join("state/last-fault.json");
    let fake = FakeWatchdog::new(true);
    let log = fake.log();
    let heartbeats = Heartbeats::new();
    let _storage = beat_in_background(heartbeats.register("storage", DEADLINE));
    let camera = heartbeats.register("source /camera/raw", DEADLINE);
    let opts = SupervisorOptions {
        fault_file: Some(fault_file.clone()),
        ..options(fake)
    };
    let supervisor = Supervisor::start(opts, heartbeats.clone()).unwrap();

    // The camera works for a while, then stops.
    for i in 1..=15 {
        camera.beat_progress(i * 10);
        thread::sleep(Duration::from_millis(20));
    }
    camera.beat_progress(777);
    let last_beat = Instant::now();
    thread::sleep(DEADLINE + PERIOD + Duration::from_millis(300));

    let pings = log.keepalives();
    let last_ping = *pings.last().unwrap();
    assert!(
        last_ping.saturating_duration_since(last_beat) <= DEADLINE + PERIOD + SLACK,
        "last ping {:?} after the last beat",
        last_ping.saturating_duration_since(last_beat)
    );
    // No pings while it stays stalled, though storage keeps beating.
    thread::sleep(Duration::from_millis(400));
    assert_eq!(log.keepalives().len(), pings.len(), "pinged while stalled");

    let status = supervisor.status();
    assert_eq!(status.stalled.len(), 1, "{:?}", status.stalled);
    assert_eq!(status.stalled[0].name, "source /camera/raw");
    assert_eq!(status.stalled[0].last_progress, 777);

    let text = std::fs::read_to_string(&fault_file).expect("fault file written");
    let record: FaultRecord = serde_json::from_str(&text).unwrap();
    assert_eq!(record.stage, "source /camera/raw");
    assert_eq!(record.last_progress, 777);
    assert_eq!(record.deadline_ms, 300);
    // Past the deadline, in whole ms (300.4 ms reads 300).
    assert!(record.silent_for_ms >= 300, "{}", record.silent_for_ms);
    assert_eq!(record.pid, std::process::id());
    assert!(
        record.message.contains("resets the board within 10 s"),
        "{}",
        record.message
    );

    // The camera comes back before the reset: pings resume.
    let resumed = Instant::now();
    while resumed.elapsed() < Duration::from_millis(400) {
        camera.beat();
        thread::sleep(Duration::from_millis(20));
    }
    assert!(
        log.keepalives().len() >= pings.len() + 2,
        "pings did not resume"
    );
    assert!(supervisor.status().stalled.is_empty());
    assert_eq!(supervisor.stop().unwrap(), Stopped::Disarmed);
}

#[test]
fn clean_stop_disarms_with_magic_close() {
    let fake = FakeWatchdog::new(true);
    let log = fake.log();
    let heartbeats = Heartbeats::new();
    let _storage = beat_in_background(heartbeats.register("storage", DEADLINE));
    let supervisor = Supervisor::start(options(fake), heartbeats.clone()).unwrap();
    thread::sleep(Duration::from_millis(250));
    assert_eq!(supervisor.stop().unwrap(), Stopped::Disarmed);

    let ops = log.ops();
    assert_eq!(ops.last(), Some(&FakeOp::MagicClose));
    assert!(!log.contains(FakeOp::Close));
    thread::sleep(Duration::from_millis(250));
    assert_eq!(log.ops().len(), ops.len(), "nothing after the magic close");
}

#[test]
fn clean_stop_without_magic_close_keeps_pinging_until_exit() {
    let fake = FakeWatchdog::new(false);
    let log = fake.log();
    let heartbeats = Heartbeats::new();
    let storage = beat_in_background(heartbeats.register("storage", DEADLINE));
    let supervisor = Supervisor::start(options(fake), heartbeats.clone()).unwrap();
    thread::sleep(Duration::from_millis(250));
    assert!(!supervisor.status().magic_close);
    assert_eq!(supervisor.stop().unwrap(), Stopped::PingingUntilExit);

    // The stage ends normally (its heartbeat is dropped): the device is
    // still pinged, never closed armed while the process lives.
    drop(storage);
    let before = log.keepalives().len();
    thread::sleep(Duration::from_millis(350));
    assert!(log.keepalives().len() >= before + 2, "pinging stopped");
    assert!(!log.contains(FakeOp::MagicClose));
    assert!(!log.contains(FakeOp::Close));
}

#[test]
fn systemd_watchdog_is_fed_only_while_healthy() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("notify");
    let systemd = UnixDatagram::bind(&socket).unwrap();
    systemd
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let received: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let received = Arc::clone(&received);
        let done = Arc::clone(&done);
        thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while !done.load(Ordering::Relaxed) {
                if let Ok(n) = systemd.recv(&mut buf) {
                    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                    received.lock().unwrap().push((Instant::now(), text));
                }
            }
        })
    };

    let notifier = Notifier::new(&socket)
        .unwrap()
        .with_watchdog_interval(Some(Duration::from_millis(200)));
    let heartbeats = Heartbeats::new();
    let control = heartbeats.register("control", DEADLINE);
    let opts = SupervisorOptions {
        notifier: Some(notifier),
        ..SupervisorOptions::default()
    };
    let supervisor = Supervisor::start(opts, heartbeats.clone()).unwrap();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(500) {
        control.beat();
        thread::sleep(Duration::from_millis(20));
    }
    control.beat();
    let last_beat = Instant::now();
    thread::sleep(Duration::from_millis(900));
    done.store(true, Ordering::Relaxed);
    reader.join().unwrap();

    let received = received.lock().unwrap().clone();
    let pings: Vec<Instant> = received
        .iter()
        .filter(|(_, text)| text == "WATCHDOG=1")
        .map(|(at, _)| *at)
        .collect();
    // WATCHDOG=1 every half of the 200 ms interval while healthy.
    let healthy = pings.iter().filter(|at| **at <= last_beat).count();
    assert!(
        (3..=7).contains(&healthy),
        "{healthy} pings in 500 ms: {received:?}"
    );
    let late: Vec<Duration> = pings
        .iter()
        .map(|at| at.saturating_duration_since(last_beat))
        .filter(|after| *after > DEADLINE + SLACK)
        .collect();
    assert!(late.is_empty(), "WATCHDOG=1 after the stall: {late:?}");
    let status = received
        .iter()
        .find(|(_, text)| text.starts_with("STATUS=stalled"))
        .map(|(_, text)| text.clone())
        .expect("a STATUS line about the stall");
    assert!(status.contains("control"), "{status}");
    assert!(supervisor.status().systemd_pings >= 3);
    assert_eq!(supervisor.stop().unwrap(), Stopped::NoDevice);
}

/// Arms a real watchdog: only where asked (the QEMU board sets
/// EDGEREC_TEST_REAL_WATCHDOG=1), as root, with a device present. Uses
/// EDGEREC_TEST_WATCHDOG_DEVICE, else /dev/watchdog0, else /dev/watchdog.
#[test]
fn real_watchdog_device() {
    if std::env::var("EDGEREC_TEST_REAL_WATCHDOG").as_deref() != Ok("1") {
        edgerec_testkit::skip::skip_allowed(
            edgerec_testkit::skip::Allowed::OptIn,
            "set EDGEREC_TEST_REAL_WATCHDOG=1 to arm a real /dev/watchdog (the machine \
             resets if the test dies while it is armed)",
        );
        return;
    }
    let path = match std::env::var_os("EDGEREC_TEST_WATCHDOG_DEVICE") {
        Some(path) => PathBuf::from(path),
        None => match ["/dev/watchdog0", "/dev/watchdog"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
        {
            Some(path) => path,
            None => {
                edgerec_testkit::skip::skip("no /dev/watchdog0 or /dev/watchdog");
                return;
            }
        },
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        edgerec_testkit::skip::skip(format!("needs root to open {}", path.display()));
        return;
    }

    let mut device = LinuxWatchdog::open(&path).unwrap();
    let info = device.support().unwrap();
    println!(
        "{}: `{}` options {:#06x} magic close {}",
        path.display(),
        info.identity,
        info.options,
        info.magic_close
    );
    let accepted = device.set_timeout(30).unwrap();
    println!("timeout: asked 30 s, accepted {accepted} s");
    assert!(accepted > 0);
    assert_eq!(device.timeout().unwrap(), accepted);
    for _ in 0..3 {
        device.keepalive().unwrap();
        thread::sleep(Duration::from_millis(100));
    }
    match device.time_left() {
        Ok(left) => {
            println!("time left: {left} s");
            assert!(left <= accepted);
        }
        Err(err) => println!("time left not available: {err}"),
    }

    let heartbeats = Heartbeats::new();
    let _stage = beat_in_background(heartbeats.register("stage", Duration::from_secs(5)));
    let opts = SupervisorOptions {
        device: Some(Box::new(device)),
        timeout: Duration::from_secs(30),
        ping_period: Some(Duration::from_millis(200)),
        ..SupervisorOptions::default()
    };
    let supervisor = Supervisor::start(opts, heartbeats.clone()).unwrap();
    thread::sleep(Duration::from_secs(1));
    let status = supervisor.status();
    println!("{}", serde_json::to_string(&status).unwrap());
    assert!(status.pings >= 3);
    let stopped = supervisor.stop().unwrap();
    println!("stopped: {stopped:?}");
    if info.magic_close {
        assert_eq!(stopped, Stopped::Disarmed);
    } else {
        assert_eq!(stopped, Stopped::PingingUntilExit);
    }
}
