//! The supervisor against sources that fail every way a real one can:
//! an error, a panic, silence past the deadline, an error no restart can
//! cure, an early end; and a source blocked in `poll` on a socket that the
//! stop request must wake. Every wait here is on the event itself (a
//! counter reaching a value) with a generous timeout, not a fixed sleep.

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgerec_source::{
    ChannelSpec, Envelope, Intake, MemoryBudget, Source, SourceError, SourceSink, SourceState,
    Stop, Supervisor, SupervisorOptions, SystemClock,
};

fn spec(topic: &str) -> ChannelSpec {
    ChannelSpec {
        topic: topic.into(),
        type_name: "edgerec_test/msg/Tick".into(),
        message_encoding: "cdr".into(),
        schema_encoding: "ros2msg".into(),
        schema: b"uint64 n\n".to_vec(),
        metadata: BTreeMap::new(),
        latched: false,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Healthy,
    ErrorAfter(u64),
    PanicAfter(u64),
    StallAfter(u64),
    Permanent,
    FinishAfter(u64),
}

/// Pushes a tick every 2 ms; fails as `mode` says after `n` ticks of a run.
struct Ticker {
    topic: String,
    mode: Mode,
    runs: Arc<AtomicU64>,
    ticks: Arc<AtomicU64>,
}

impl Ticker {
    fn new(topic: &str, mode: Mode) -> (Self, Arc<AtomicU64>, Arc<AtomicU64>) {
        let runs = Arc::new(AtomicU64::new(0));
        let ticks = Arc::new(AtomicU64::new(0));
        (
            Ticker {
                topic: topic.into(),
                mode,
                runs: runs.clone(),
                ticks: ticks.clone(),
            },
            runs,
            ticks,
        )
    }
}

impl Source for Ticker {
    fn name(&self) -> String {
        format!("ticker {}", self.topic)
    }
    fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError> {
        let ch = sink.register(spec(&self.topic))?;
        self.runs.fetch_add(1, Ordering::SeqCst);
        let mut n = 0u64;
        while !stop.wait_timeout(Duration::from_millis(2)) {
            match self.mode {
                Mode::ErrorAfter(k) if n == k => {
                    return Err(SourceError::Device {
                        device: "ticker".into(),
                        reason: "it broke".into(),
                    })
                }
                Mode::PanicAfter(k) if n == k => panic!("ticker panics on purpose"),
                Mode::StallAfter(k) if n == k => {
                    // Silent until stopped.
                    stop.wait_timeout(Duration::from_secs(60));
                    return Ok(());
                }
                Mode::Permanent => {
                    return Err(SourceError::Config {
                        reason: "no such device".into(),
                    })
                }
                Mode::FinishAfter(k) if n == k => return Ok(()),
                _ => {}
            }
            let t = sink.now_ns();
            let _ = sink.push(Envelope {
                channel: ch,
                log_time: t,
                publish_time: t,
                payload: n.to_le_bytes().to_vec(),
            });
            self.ticks.fetch_add(1, Ordering::SeqCst);
            n += 1;
        }
        Ok(())
    }
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn intake() -> Arc<Intake> {
    Intake::new(1 << 16, MemoryBudget::new(64 << 20), Arc::new(SystemClock))
}

fn opts() -> SupervisorOptions {
    SupervisorOptions {
        backoff_min: Duration::from_millis(10),
        backoff_max: Duration::from_millis(80),
        deadline: Duration::from_millis(300),
    }
}

#[test]
fn every_kind_of_failure_restarts_while_a_healthy_source_goes_on() {
    let intake = intake();
    let (healthy, _, healthy_ticks) = Ticker::new("/healthy", Mode::Healthy);
    let (err, err_runs, _) = Ticker::new("/error", Mode::ErrorAfter(5));
    let (pan, pan_runs, _) = Ticker::new("/panic", Mode::PanicAfter(5));
    let (stall, stall_runs, _) = Ticker::new("/stall", Mode::StallAfter(5));
    let beats = Arc::new(AtomicU64::new(0));
    let b = beats.clone();
    let sup = Supervisor::start(
        &intake,
        vec![
            Box::new(healthy),
            Box::new(err),
            Box::new(pan),
            Box::new(stall),
        ],
        opts(),
        Box::new(move || {
            b.fetch_add(1, Ordering::Relaxed);
        }),
    )
    .unwrap();
    wait_for("three runs of each failing source", || {
        err_runs.load(Ordering::SeqCst) >= 3
            && pan_runs.load(Ordering::SeqCst) >= 3
            && stall_runs.load(Ordering::SeqCst) >= 3
    });
    let status = sup.status();
    let by = |name: &str| status.iter().find(|s| s.name == name).unwrap().clone();
    assert_eq!(by("ticker /healthy").state, SourceState::Running);
    assert_eq!(by("ticker /healthy").restarts, 0);
    assert!(by("ticker /error").restarts >= 2);
    assert!(
        by("ticker /error").last_error.unwrap().contains("it broke"),
        "{:?}",
        by("ticker /error")
    );
    assert!(by("ticker /panic")
        .last_error
        .unwrap()
        .contains("panicked: ticker panics"));
    assert!(by("ticker /stall")
        .last_error
        .unwrap()
        .contains("silent for"));
    assert!(beats.load(Ordering::Relaxed) > 0, "the beat hook is called");
    // A restarted source gets its channel back: one channel per topic.
    assert_eq!(intake.table().len(), 4);
    let before = healthy_ticks.load(Ordering::SeqCst);
    wait_for("the healthy source to keep ticking", || {
        healthy_ticks.load(Ordering::SeqCst) > before + 20
    });
    let report = sup.stop(Duration::from_secs(5));
    assert!(report.not_stopped.is_empty(), "{report:?}");
}

#[test]
fn a_permanent_error_fails_and_an_early_return_finishes() {
    let intake = intake();
    let (perm, perm_runs, _) = Ticker::new("/perm", Mode::Permanent);
    let (fin, fin_runs, _) = Ticker::new("/fin", Mode::FinishAfter(3));
    let sup = Supervisor::start(
        &intake,
        vec![Box::new(perm), Box::new(fin)],
        opts(),
        Box::new(|| {}),
    )
    .unwrap();
    let view = sup.view();
    wait_for("both settled", || {
        let s = view.status();
        s.len() == 2 && s[0].state == SourceState::Failed && s[1].state == SourceState::Finished
    });
    // Give a wrong restart every chance to happen.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(perm_runs.load(Ordering::SeqCst), 1);
    assert_eq!(fin_runs.load(Ordering::SeqCst), 1);
    let s = view.status();
    assert!(s[0]
        .last_error
        .as_deref()
        .unwrap()
        .contains("no such device"));
    sup.stop(Duration::from_secs(1));
    let s = view.status();
    assert_eq!(s[0].state, SourceState::Failed, "stop keeps failed");
}

#[test]
fn backoff_spaces_the_restarts() {
    let intake = intake();
    let (err, err_runs, _) = Ticker::new("/error", Mode::ErrorAfter(0));
    let o = SupervisorOptions {
        backoff_min: Duration::from_millis(40),
        backoff_max: Duration::from_millis(160),
        deadline: Duration::from_secs(5),
    };
    let t0 = Instant::now();
    let sup = Supervisor::start(&intake, vec![Box::new(err)], o, Box::new(|| {})).unwrap();
    wait_for("five runs", || err_runs.load(Ordering::SeqCst) >= 5);
    // Four waits: 40 + 80 + 160 + 160 ms at least.
    assert!(
        t0.elapsed() >= Duration::from_millis(440),
        "{:?}",
        t0.elapsed()
    );
    sup.stop(Duration::from_secs(1));
}

/// Blocks in poll(2) on a socket that never gets data, and on the stop
/// waker; beats liveness every 100 ms through poll's timeout.
struct Blocked {
    woke: Arc<AtomicU64>,
}

impl Source for Blocked {
    fn name(&self) -> String {
        "blocked".into()
    }
    fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError> {
        let (a, _b) = std::os::unix::net::UnixDatagram::pair().map_err(|e| SourceError::Io {
            context: "socketpair".into(),
            source: e,
        })?;
        let waker = stop.waker().expect("eventfd").as_raw_fd();
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: a.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: waker,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two valid pollfds in a live array.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, 60_000) };
            sink.alive();
            if n > 0 && fds[1].revents & libc::POLLIN != 0 {
                self.woke.fetch_add(1, Ordering::SeqCst);
                return Ok(());
            }
        }
    }
}

#[test]
fn stop_wakes_a_source_blocked_in_poll() {
    let intake = intake();
    let woke = Arc::new(AtomicU64::new(0));
    let o = SupervisorOptions {
        deadline: Duration::from_secs(120),
        ..opts()
    };
    let sup = Supervisor::start(
        &intake,
        vec![Box::new(Blocked { woke: woke.clone() })],
        o,
        Box::new(|| {}),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    let report = sup.stop(Duration::from_secs(10));
    assert!(report.not_stopped.is_empty());
    assert_eq!(
        woke.load(Ordering::SeqCst),
        1,
        "woken by the waker, not a timeout"
    );
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
}
