//! The supervisor: runs every source on a thread of its own, watches it,
//! and starts it again when it fails, while every other source goes on.
//!
//! A run fails when it returns an error, panics (caught at the thread
//! boundary), or goes silent (no push and no [`SourceSink::alive`]) for
//! longer than the deadline; a silent run is asked to stop through its
//! [`Stop`] and restarted once it returns. Restarts wait an exponential
//! [`Backoff`]. The supervisor's own loop calls a beat hook every tick, so
//! the health side can watch the supervisor as one stage; a source's
//! failure is the supervisor's business and shows in the status (state
//! `restarting`, the last error, the restart count), not as a stalled
//! stage that would stop the watchdog.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::backoff::Backoff;
use crate::error::SourceError;
use crate::intake::Intake;
use crate::sink::{Liveness, SourceSink};
use crate::source::Source;
use crate::stop::Stop;

/// How the supervisor treats failures.
#[derive(Debug, Clone, Copy)]
pub struct SupervisorOptions {
    /// First restart delay (`sources.restart_backoff_min`).
    pub backoff_min: Duration,
    /// Longest restart delay (`sources.restart_backoff_max`).
    pub backoff_max: Duration,
    /// A run silent for longer is stopped and restarted
    /// (`health.stage_deadline`).
    pub deadline: Duration,
}

impl Default for SupervisorOptions {
    fn default() -> Self {
        Self {
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(30),
            deadline: Duration::from_secs(5),
        }
    }
}

/// Where a source stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceState {
    /// A run is going.
    Running,
    /// The last run failed; the next starts after the backoff (or once
    /// the stalled run has returned).
    Restarting,
    /// Ended with an error a restart cannot cure; left alone.
    Failed,
    /// Returned before stop was requested: nothing more to give.
    Finished,
    /// Stopped with the recording.
    Stopped,
}

impl SourceState {
    /// Lower-case name, as in the status.
    pub fn as_str(&self) -> &'static str {
        match self {
            SourceState::Running => "running",
            SourceState::Restarting => "restarting",
            SourceState::Failed => "failed",
            SourceState::Finished => "finished",
            SourceState::Stopped => "stopped",
        }
    }
}

/// What the supervisor says about one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceStatus {
    /// [`Source::name`].
    pub name: String,
    /// Where it stands.
    pub state: SourceState,
    /// Runs started after a failure.
    pub restarts: u64,
    /// Why the last failed run failed.
    pub last_error: Option<String>,
}

/// What [`Supervisor::stop`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StopReport {
    /// Sources whose run had not returned within the grace period; their
    /// threads are left to end on their own.
    pub not_stopped: Vec<String>,
}

struct Shared {
    status: Mutex<Vec<SourceStatus>>,
    stop: Stop,
    grace: Mutex<Duration>,
}

/// Reads the sources' status from any thread.
#[derive(Clone)]
pub struct SupervisorView(Arc<Shared>);

impl std::fmt::Debug for SupervisorView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SupervisorView")
            .field(&self.status())
            .finish()
    }
}

impl SupervisorView {
    /// Every source, in the order given to [`Supervisor::start`].
    pub fn status(&self) -> Vec<SourceStatus> {
        self.0
            .status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The running supervisor.
pub struct Supervisor {
    thread: Option<JoinHandle<StopReport>>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor").finish_non_exhaustive()
    }
}

/// The beat hook: called every supervisor tick.
pub type BeatFn = Box<dyn FnMut() + Send>;

impl Supervisor {
    /// Starts every source and the supervisor thread.
    pub fn start(
        intake: &Arc<Intake>,
        sources: Vec<Box<dyn Source>>,
        opts: SupervisorOptions,
        beat: BeatFn,
    ) -> std::io::Result<Supervisor> {
        let shared = Arc::new(Shared {
            status: Mutex::new(Vec::new()),
            stop: Stop::new(),
            grace: Mutex::new(Duration::from_secs(5)),
        });
        let slots: Vec<Slot> = sources.into_iter().map(|s| Slot::new(s, &opts)).collect();
        let sink = intake.sink();
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("edgerec-sources".into())
                .spawn(move || supervise(slots, &shared, opts, beat, &sink))?
        };
        Ok(Supervisor {
            thread: Some(thread),
            shared,
        })
    }

    /// A handle that reads the status.
    pub fn view(&self) -> SupervisorView {
        SupervisorView(self.shared.clone())
    }

    /// Every source's status.
    pub fn status(&self) -> Vec<SourceStatus> {
        self.view().status()
    }

    /// Stops every source and waits up to `grace` for their runs to
    /// return.
    pub fn stop(mut self, grace: Duration) -> StopReport {
        *self
            .shared
            .grace
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = grace;
        self.shared.stop.request();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => {
                tracing::error!("the source supervisor panicked");
                StopReport {
                    not_stopped: self.status().into_iter().map(|s| s.name).collect(),
                }
            }
            None => StopReport::default(),
        }
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.shared.stop.request();
    }
}

enum Outcome {
    Returned(Result<(), SourceError>),
    Panicked(String),
}

struct Run {
    handle: JoinHandle<(Box<dyn Source>, Outcome)>,
    stop: Stop,
    live: Arc<Liveness>,
    started: Instant,
    /// Why the supervisor asked this run to stop (it went silent).
    stalled: Option<String>,
    /// Said once: the stalled run still has not returned.
    stuck_logged: bool,
}

struct Slot {
    source: Option<Box<dyn Source>>,
    run: Option<Run>,
    backoff: Backoff,
    restart_at: Option<Instant>,
    status: SourceStatus,
}

impl Slot {
    fn new(source: Box<dyn Source>, opts: &SupervisorOptions) -> Self {
        Slot {
            status: SourceStatus {
                name: source.name(),
                state: SourceState::Running,
                restarts: 0,
                last_error: None,
            },
            source: Some(source),
            run: None,
            backoff: Backoff::new(opts.backoff_min, opts.backoff_max),
            restart_at: None,
        }
    }

    fn start(&mut self, sink: &SourceSink, now: Instant) {
        let Some(mut src) = self.source.take() else {
            return;
        };
        let stop = Stop::new();
        let live = Arc::new(Liveness::new());
        let run_sink = sink.with_liveness(live.clone());
        let run_stop = stop.clone();
        let spawned = std::thread::Builder::new()
            .name(thread_name(&self.status.name))
            .spawn(move || {
                let r = catch_unwind(AssertUnwindSafe(|| src.run(&run_sink, &run_stop)));
                let outcome = match r {
                    Ok(res) => Outcome::Returned(res),
                    Err(p) => Outcome::Panicked(panic_message(&*p)),
                };
                (src, outcome)
            });
        match spawned {
            Ok(handle) => {
                self.run = Some(Run {
                    handle,
                    stop,
                    live,
                    started: now,
                    stalled: None,
                    stuck_logged: false,
                });
                self.restart_at = None;
                self.status.state = SourceState::Running;
            }
            // The closure, and the source in it, is gone with the error.
            Err(e) => {
                tracing::error!("source {}: cannot start its thread: {e}", self.status.name);
                self.status.state = SourceState::Failed;
                self.status.last_error = Some(format!("cannot start its thread: {e}"));
            }
        }
    }

    /// One supervisor tick.
    fn poll(&mut self, sink: &SourceSink, opts: &SupervisorOptions, now: Instant) {
        if let Some(run) = &mut self.run {
            if run.handle.is_finished() {
                self.reap(now);
            } else if run.stalled.is_none() {
                let silent = run.live.age();
                if silent > opts.deadline {
                    let why = format!(
                        "silent for {} ms (deadline {} ms)",
                        silent.as_millis(),
                        opts.deadline.as_millis()
                    );
                    tracing::warn!(
                        "source {}: {why}; stopping it to restart it",
                        self.status.name
                    );
                    run.stop.request();
                    run.stalled = Some(why.clone());
                    self.status.state = SourceState::Restarting;
                    self.status.last_error = Some(why);
                }
            } else if !run.stuck_logged && run.live.age() > opts.deadline * 2 {
                run.stuck_logged = true;
                tracing::error!(
                    "source {}: its stalled run has not returned {} ms after the stop request; \
                     it restarts when it does",
                    self.status.name,
                    opts.deadline.as_millis()
                );
            }
        } else if self.status.state == SourceState::Restarting
            && self.restart_at.is_some_and(|t| now >= t)
        {
            self.status.restarts += 1;
            tracing::info!(
                "source {}: restart {}",
                self.status.name,
                self.status.restarts
            );
            self.start(sink, now);
        }
    }

    /// Collects a run that has returned and decides what comes next.
    fn reap(&mut self, now: Instant) {
        let Some(run) = self.run.take() else { return };
        let ran = now.saturating_duration_since(run.started);
        let (src, outcome) = match run.handle.join() {
            Ok(x) => x,
            Err(_) => {
                self.status.state = SourceState::Failed;
                self.status.last_error =
                    Some("its thread died while unwinding a panic; not restarted".into());
                tracing::error!(
                    "source {}: {}",
                    self.status.name,
                    "its thread died while unwinding"
                );
                return;
            }
        };
        self.source = Some(src);
        let failure = match (outcome, run.stalled) {
            (Outcome::Returned(Ok(())), Some(why)) => why,
            (Outcome::Returned(Ok(())), None) => {
                tracing::info!("source {} finished", self.status.name);
                self.status.state = SourceState::Finished;
                return;
            }
            (Outcome::Returned(Err(e)), _) if e.is_permanent() => {
                tracing::error!("source {} failed for good: {e}", self.status.name);
                self.status.state = SourceState::Failed;
                self.status.last_error = Some(e.to_string());
                return;
            }
            (Outcome::Returned(Err(e)), _) => e.to_string(),
            (Outcome::Panicked(msg), _) => format!("panicked: {msg}"),
        };
        let delay = self.backoff.after_failure(ran);
        tracing::warn!(
            "source {} failed after {:.1} s: {failure}; restart {} in {} ms",
            self.status.name,
            ran.as_secs_f64(),
            self.status.restarts + 1,
            delay.as_millis()
        );
        self.status.state = SourceState::Restarting;
        self.status.last_error = Some(failure);
        self.restart_at = Some(now + delay);
    }
}

fn supervise(
    mut slots: Vec<Slot>,
    shared: &Shared,
    opts: SupervisorOptions,
    mut beat: BeatFn,
    sink: &SourceSink,
) -> StopReport {
    let tick = (opts.deadline / 10).clamp(Duration::from_millis(10), Duration::from_millis(100));
    let publish = |slots: &[Slot]| {
        *shared.status.lock().unwrap_or_else(PoisonError::into_inner) =
            slots.iter().map(|s| s.status.clone()).collect();
    };
    let now = Instant::now();
    for s in &mut slots {
        s.start(sink, now);
    }
    publish(&slots);
    while !shared.stop.wait_timeout(tick) {
        beat();
        let now = Instant::now();
        for s in &mut slots {
            s.poll(sink, &opts, now);
        }
        publish(&slots);
    }
    // Stop: every run at once, then wait for them together.
    for s in &slots {
        if let Some(r) = &s.run {
            r.stop.request();
        }
    }
    let grace = *shared.grace.lock().unwrap_or_else(PoisonError::into_inner);
    let until = Instant::now() + grace;
    loop {
        beat();
        let now = Instant::now();
        for s in &mut slots {
            if s.run.as_ref().is_some_and(|r| r.handle.is_finished()) {
                let stalled = s.run.as_ref().and_then(|r| r.stalled.clone());
                let Some(run) = s.run.take() else { continue };
                match run.handle.join() {
                    Ok((src, Outcome::Returned(Err(e)))) => {
                        s.source = Some(src);
                        tracing::warn!(
                            "source {} ended with an error while stopping: {e}",
                            s.status.name
                        );
                        s.status.last_error = Some(e.to_string());
                    }
                    Ok((src, Outcome::Panicked(msg))) => {
                        s.source = Some(src);
                        tracing::warn!("source {} panicked while stopping: {msg}", s.status.name);
                        s.status.last_error = Some(format!("panicked: {msg}"));
                    }
                    Ok((src, Outcome::Returned(Ok(())))) => {
                        s.source = Some(src);
                        if let Some(why) = stalled {
                            s.status.last_error = Some(why);
                        }
                    }
                    Err(_) => {}
                }
            }
        }
        if slots.iter().all(|s| s.run.is_none()) || now >= until {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut report = StopReport::default();
    for s in &mut slots {
        if s.run.is_some() {
            tracing::error!(
                "source {} did not stop within {} ms; its thread is left behind",
                s.status.name,
                grace.as_millis()
            );
            report.not_stopped.push(s.status.name.clone());
        }
        if matches!(
            s.status.state,
            SourceState::Running | SourceState::Restarting
        ) {
            s.status.state = SourceState::Stopped;
        }
    }
    publish(&slots);
    report
}

/// Linux keeps 15 bytes of a thread's name; no spaces, so tools that
/// split `/proc/*/task/*/stat` on whitespace still find its fields.
fn thread_name(source: &str) -> String {
    let mut n: String = format!("src-{source}")
        .chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect();
    while n.len() > 15 {
        n.pop();
    }
    n
}

/// The text of a panic's payload (`panic!("...")` gives a `&str` or a
/// `String`), for logs and the status.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic whose payload is not text".to_owned()
    }
}
