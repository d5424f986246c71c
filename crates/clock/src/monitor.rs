//! The clock monitor: a thread named `edgerec-clock` that polls once per
//! `poll_interval` what ptp4l says (over its management socket) and what the
//! PHC-to-system offset is, feeds the [`QualityMachine`], calls the
//! caller's progress hook (the watchdog heartbeat), and keeps a status and
//! per-segment offset statistics that [`ClockHandle`]s read.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::clock::{Clock, ClockSource};
use crate::error::ClockError;
use crate::phc::{self, PhcDevice, PhcOffset};
use crate::pmc::{PmcClient, Ptp4lStatus, DEFAULT_PTP4L_SOCKET};
use crate::quality::{
    phc2sys_residual_ns, ClockQuality, ClockState, OffsetStats, Ptp4lSync, QualityConfig,
    QualityMachine, SyncInput,
};

/// The name of the per-segment MCAP Metadata record that
/// [`ClockHandle::segment_summary`] fills.
pub const SEGMENT_METADATA_NAME: &str = "edgerec.clock";

/// What the monitor watches and how it judges.
#[derive(Debug, Clone, PartialEq)]
pub struct MonitorOptions {
    /// The recording clock.
    pub source: ClockSource,
    /// For a realtime or TAI source: the PHC (device path or interface)
    /// phc2sys copies into CLOCK_REALTIME, whose offset to the system clock
    /// then counts toward the quality. A PHC source measures its own
    /// offset to the system clock for the status only.
    pub phc: Option<String>,
    /// ptp4l's management socket (its `uds_address`); `None` when no ptp4l
    /// is expected. A socket that does not exist is a state (logged once),
    /// not an error. Default `/var/run/ptp4l`.
    pub ptp4l_socket: Option<PathBuf>,
    /// ptp4l's domainNumber.
    pub domain: u8,
    /// How often to poll. Default 1 s.
    pub poll_interval: Duration,
    /// An offset is good below this absolute value, ns. Default 1000.
    pub lock_threshold_ns: u64,
    /// Good offsets needed this long to lock. Default 10 s.
    pub lock_time: Duration,
    /// Holdover lasts this long after sync is lost. Default 60 s.
    pub holdover_max: Duration,
}

impl Default for MonitorOptions {
    fn default() -> Self {
        let q = QualityConfig::default();
        MonitorOptions {
            source: ClockSource::Realtime,
            phc: None,
            ptp4l_socket: Some(PathBuf::from(DEFAULT_PTP4L_SOCKET)),
            domain: 0,
            poll_interval: Duration::from_secs(1),
            lock_threshold_ns: q.lock_threshold_ns,
            lock_time: q.lock_time,
            holdover_max: q.holdover_max,
        }
    }
}

/// The clock's status after the last poll.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClockStatus {
    /// The recording clock, as [`Clock::describe`] says.
    pub source: String,
    /// The recording clock's PHC device, for a PHC source.
    pub device: Option<String>,
    /// The quality.
    pub state: ClockState,
    /// When the state began, ns on the recording clock.
    pub since_ns: u64,
    /// Why.
    pub reason: String,
    /// Whether data stamped now is flagged as not synchronised
    /// ([`ClockState::flags_data`]).
    pub unlocked: bool,
    /// The offset that decided the quality, ns.
    pub last_offset_ns: Option<i64>,
    /// Where `last_offset_ns` comes from, e.g. `ptp4l master_offset` or
    /// `PHC-system via PTP_SYS_OFFSET_EXTENDED`.
    pub offset_origin: Option<String>,
    /// The PHC whose offset to the system clock is measured.
    pub phc_device: Option<String>,
    /// The last PHC-to-system measurement (PHC minus system).
    pub phc_offset: Option<PhcOffset>,
    /// Why the PHC-to-system measurement failed, if it did.
    pub phc_error: Option<String>,
    /// ptp4l's answer at the last poll.
    pub ptp4l: Option<Ptp4lStatus>,
    /// Why ptp4l did not answer, if it did not (socket missing, timeout).
    pub ptp4l_error: Option<String>,
    /// The kernel's TAI-UTC offset, s, for a TAI source.
    pub tai_offset_s: Option<i32>,
    /// A remark on the TAI offset (e.g. that nobody set it).
    pub tai_note: Option<String>,
    /// Polls since start.
    pub polls: u64,
}

/// What the thread and the handles share.
#[derive(Debug)]
struct Shared {
    status: ClockStatus,
    /// Offsets since the last segment summary.
    stats: OffsetStats,
    /// The worst state since the last segment summary.
    worst: ClockState,
    polls: u64,
    flagged_polls: u64,
    /// ptp4l's last answer at any time, for the summary's grandmaster.
    last_ptp4l: Option<Ptp4lStatus>,
}

/// A cheap, cloneable view of a running monitor.
#[derive(Debug, Clone)]
pub struct ClockHandle {
    shared: Arc<Mutex<Shared>>,
}

impl ClockHandle {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        // The data stays consistent even if a poll panicked mid-way: each
        // field is replaced whole.
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The status after the last poll.
    pub fn status(&self) -> ClockStatus {
        self.lock().status.clone()
    }

    /// The key/values of the [`SEGMENT_METADATA_NAME`] Metadata record for
    /// the segment that ends now, and a fresh window for the next one:
    /// `source`, `device`, `state`, `reason`, `worst_state` (the worst
    /// state of any poll in the window), `polls` and `flagged_polls`,
    /// `offset_origin`, `offset_count` and, with samples,
    /// `offset_{min,max,mean,rms}_ns`; with ptp4l: `gm_identity`,
    /// `gm_present`, `port_state`, `steps_removed`, `clock_identity`;
    /// `ptp4l_error` when ptp4l did not answer; `tai_offset_s` for TAI.
    pub fn segment_summary(&self) -> BTreeMap<String, String> {
        let mut guard = self.lock();
        let sh = &mut *guard;
        let stats = sh.stats.take();
        let s = &sh.status;
        let mut m = BTreeMap::new();
        let mut put = |k: &str, v: String| {
            m.insert(k.to_string(), v);
        };
        put("source", s.source.clone());
        if let Some(d) = &s.device {
            put("device", d.clone());
        }
        put("state", s.state.to_string());
        put("reason", s.reason.clone());
        put("worst_state", sh.worst.to_string());
        put("polls", sh.polls.to_string());
        put("flagged_polls", sh.flagged_polls.to_string());
        if let Some(o) = &s.offset_origin {
            put("offset_origin", o.clone());
        }
        put("offset_count", stats.count().to_string());
        if let (Some(min), Some(max), Some(mean), Some(rms)) = (
            stats.min_ns(),
            stats.max_ns(),
            stats.mean_ns(),
            stats.rms_ns(),
        ) {
            put("offset_min_ns", min.to_string());
            put("offset_max_ns", max.to_string());
            put("offset_mean_ns", format!("{mean:.1}"));
            put("offset_rms_ns", format!("{rms:.1}"));
        }
        if let Some(p) = &sh.last_ptp4l {
            put("gm_identity", p.gm_identity.clone());
            put("gm_present", p.gm_present.to_string());
            put("port_state", p.port_state.to_string());
            put("steps_removed", p.steps_removed.to_string());
            put("clock_identity", p.clock_identity.clone());
        }
        if let Some(e) = &s.ptp4l_error {
            put("ptp4l_error", e.clone());
        }
        if let Some(t) = s.tai_offset_s {
            put("tai_offset_s", t.to_string());
        }
        sh.worst = sh.status.state;
        sh.polls = 0;
        sh.flagged_polls = 0;
        m
    }
}

/// The running monitor. [`ClockMonitor::stop`] (or drop) ends the thread.
#[derive(Debug)]
pub struct ClockMonitor {
    handle: ClockHandle,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ClockMonitor {
    /// Opens the clocks, polls once (so that [`ClockHandle::status`] is
    /// meaningful at once), then starts the `edgerec-clock` thread, which
    /// polls every `poll_interval` and calls `on_progress` after each poll.
    /// Fails when the source or the configured PHC cannot be opened, not
    /// when ptp4l is absent.
    pub fn start(
        opts: MonitorOptions,
        on_progress: impl Fn() + Send + 'static,
    ) -> Result<ClockMonitor, ClockError> {
        let mut poller = Poller::new(&opts)?;
        let shared = Arc::new(Mutex::new(Shared {
            status: poller.initial_status(),
            stats: OffsetStats::new(),
            worst: ClockState::Locked,
            polls: 0,
            flagged_polls: 0,
            last_ptp4l: None,
        }));
        let handle = ClockHandle { shared };
        poller.poll(&handle);
        on_progress();

        let (stop, stopped) = mpsc::channel::<()>();
        let interval = opts.poll_interval.max(Duration::from_millis(10));
        let thread_handle = handle.clone();
        let thread = std::thread::Builder::new()
            .name("edgerec-clock".to_string())
            .spawn(move || {
                let mut next = Instant::now() + interval;
                loop {
                    let wait = next.saturating_duration_since(Instant::now());
                    match stopped.recv_timeout(wait) {
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                    }
                    poller.poll(&thread_handle);
                    on_progress();
                    let now = Instant::now();
                    next += interval;
                    if next < now {
                        next = now + interval; // a poll overran: do not burst
                    }
                }
            })
            .map_err(ClockError::Spawn)?;
        Ok(ClockMonitor {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// A handle to read the status and segment summaries from any thread.
    pub fn handle(&self) -> ClockHandle {
        self.handle.clone()
    }

    /// Stops the thread and waits for it (at most one poll).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the edgerec-clock thread panicked");
            }
        }
    }
}

impl Drop for ClockMonitor {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The thread's state between polls.
struct Poller {
    clock: Clock,
    /// The PHC phc2sys follows, for a realtime or TAI source.
    sys_phc: Option<PhcDevice>,
    socket: Option<PathBuf>,
    domain: u8,
    timeout: Duration,
    client: Option<PmcClient>,
    machine: QualityMachine,
    t0: Instant,
    /// What was last logged, to log each problem once.
    ptp4l_problem: Option<String>,
    phc_problem: Option<String>,
    /// Whether ptp4l ever answered.
    ptp4l_answered: bool,
    /// The machine's `since` (monotonic) and the same on the recording clock.
    since_mono: u64,
    since_clock: u64,
}

impl Poller {
    fn new(opts: &MonitorOptions) -> Result<Poller, ClockError> {
        let clock = Clock::open(&opts.source)?;
        let sys_phc = match (&opts.source, &opts.phc) {
            (ClockSource::Phc(_), _) | (_, None) => None,
            (_, Some(name)) => Some(PhcDevice::open(&phc::resolve(name)?.0)?),
        };
        let config = QualityConfig {
            lock_threshold_ns: opts.lock_threshold_ns,
            lock_time: opts.lock_time,
            holdover_max: opts.holdover_max,
        };
        let since_clock = clock.now_ns();
        Ok(Poller {
            clock,
            sys_phc,
            socket: opts.ptp4l_socket.clone(),
            domain: opts.domain,
            // One poll makes five requests; a stuck ptp4l fails the first.
            timeout: (opts.poll_interval / 2)
                .clamp(Duration::from_millis(20), Duration::from_millis(500)),
            client: None,
            machine: QualityMachine::new(config, 0),
            t0: Instant::now(),
            ptp4l_problem: None,
            phc_problem: None,
            ptp4l_answered: false,
            since_mono: 0,
            since_clock,
        })
    }

    /// The PHC whose offset to the system clock is measured.
    fn measured_phc(&self) -> Option<&PhcDevice> {
        self.sys_phc.as_ref().or(self.clock.phc())
    }

    fn initial_status(&self) -> ClockStatus {
        let q = self.machine.quality();
        ClockStatus {
            source: self.clock.describe(),
            device: self.clock.device().map(|p| p.display().to_string()),
            state: q.state,
            since_ns: self.since_clock,
            reason: q.reason.clone(),
            unlocked: q.state.flags_data(),
            last_offset_ns: None,
            offset_origin: None,
            phc_device: self.measured_phc().map(|d| d.path().display().to_string()),
            phc_offset: None,
            phc_error: None,
            ptp4l: None,
            ptp4l_error: None,
            tai_offset_s: self.clock.tai_offset_s(),
            tai_note: None,
            polls: 0,
        }
    }

    fn poll(&mut self, handle: &ClockHandle) {
        let mono = u64::try_from(self.t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut input = SyncInput::default();
        let clock_now = match self.clock.try_now_ns() {
            Ok(ns) => ns,
            Err(e) => {
                input.fault = Some(format!("{e}; messages are stamped with CLOCK_REALTIME"));
                self.clock.now_ns()
            }
        };

        let (phc_offset, phc_error) = match self.measured_phc().map(PhcDevice::offset) {
            Some(Ok(o)) => (Some(o), None),
            Some(Err(e)) => (None, Some(e.to_string())),
            None => (None, None),
        };
        log_change(&mut self.phc_problem, &phc_error, "PHC offset", |e| {
            tracing::warn!("{e}")
        });
        if self.sys_phc.is_some() {
            input.phc_offset_ns = phc_offset.map(|o| phc2sys_residual_ns(o.offset_ns));
        }

        let (ptp4l, ptp4l_error) = self.query_ptp4l();
        input.ptp4l = ptp4l.as_ref().map(Ptp4lSync::from);

        let before = self.machine.quality().state;
        let q: ClockQuality = self.machine.update(mono, &input).clone();
        if q.state != before {
            if q.state.flags_data() && !before.flags_data() {
                tracing::warn!(
                    "clock {}: {} -> {}: {}",
                    self.clock.describe(),
                    before,
                    q.state,
                    q.reason
                );
            } else {
                tracing::info!(
                    "clock {}: {} -> {}: {}",
                    self.clock.describe(),
                    before,
                    q.state,
                    q.reason
                );
            }
        }
        if q.since_ns != self.since_mono {
            self.since_mono = q.since_ns;
            self.since_clock = clock_now.saturating_sub(mono.saturating_sub(q.since_ns));
        }

        // ptp4l's offset means something only with a grandmaster to be
        // offset from.
        let (offset, origin) = match (ptp4l.as_ref().filter(|p| p.gm_present), phc_offset) {
            (Some(p), _) => (
                Some(p.master_offset_ns),
                Some("ptp4l master_offset".to_string()),
            ),
            (None, Some(o)) if self.sys_phc.is_some() => (
                Some(phc2sys_residual_ns(o.offset_ns)),
                Some(format!(
                    "PHC-system via {} (beyond whole seconds)",
                    o.method
                )),
            ),
            (None, Some(o)) => (
                Some(o.offset_ns),
                Some(format!("PHC-system via {}", o.method)),
            ),
            (None, None) => (None, None),
        };
        let tai_offset_s = self.clock.tai_offset_s();
        let tai_note = (tai_offset_s == Some(0)).then(|| {
            "the kernel's TAI offset is 0: nobody set it, so CLOCK_TAI equals CLOCK_REALTIME \
             (phc2sys or chrony's leapsectz set it)"
                .to_string()
        });

        let mut guard = handle.lock();
        let sh = &mut *guard;
        sh.polls += 1;
        if q.state.flags_data() {
            sh.flagged_polls += 1;
        }
        sh.worst = sh.worst.max(q.state);
        if let Some(o) = offset {
            sh.stats.push(o);
        }
        if ptp4l.is_some() {
            sh.last_ptp4l.clone_from(&ptp4l);
        }
        let polls = sh.status.polls + 1;
        sh.status = ClockStatus {
            source: self.clock.describe(),
            device: self.clock.device().map(|p| p.display().to_string()),
            state: q.state,
            since_ns: self.since_clock,
            reason: q.reason,
            unlocked: q.state.flags_data(),
            last_offset_ns: offset,
            offset_origin: origin,
            phc_device: self.measured_phc().map(|d| d.path().display().to_string()),
            phc_offset,
            phc_error,
            ptp4l,
            ptp4l_error,
            tai_offset_s,
            tai_note,
            polls,
        };
    }

    /// ptp4l's status, or why there is none.
    fn query_ptp4l(&mut self) -> (Option<Ptp4lStatus>, Option<String>) {
        let Some(path) = &self.socket else {
            return (None, None);
        };
        let result = match self.client.as_mut() {
            Some(client) => client.status(),
            None => PmcClient::open(path, self.domain).and_then(|mut client| {
                client.set_timeout(self.timeout);
                let status = client.status();
                self.client = Some(client);
                status
            }),
        };
        let (status, error) = match result {
            Ok(s) => (Some(s), None),
            Err(e) => {
                if matches!(
                    e,
                    ClockError::Ptp4lSocketMissing { .. } | ClockError::Ptp4lNotListening { .. }
                ) {
                    // Rebind when ptp4l is back; removes our socket file meanwhile.
                    self.client = None;
                }
                (None, Some(e.to_string()))
            }
        };
        // Where ptp4l never answered, its absence may be the design (no PTP
        // on this unit): say so once, quietly. Losing it later is a warning.
        let quiet = !self.ptp4l_answered;
        self.ptp4l_answered |= status.is_some();
        log_change(&mut self.ptp4l_problem, &error, "ptp4l", |e| {
            if quiet {
                tracing::info!("{e}; the clock quality goes without ptp4l until it answers")
            } else {
                tracing::warn!("{e}")
            }
        });
        (status, error)
    }
}

/// Logs `now` with `log` when it differs from `last`, and a recovery line
/// when a problem went away; remembers `now`.
fn log_change(last: &mut Option<String>, now: &Option<String>, what: &str, log: impl Fn(&str)) {
    if last == now {
        return;
    }
    match now {
        Some(e) => log(e),
        None => tracing::info!("{what}: answering again"),
    }
    last.clone_from(now);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn quick(socket: Option<PathBuf>) -> MonitorOptions {
        MonitorOptions {
            ptp4l_socket: socket,
            poll_interval: Duration::from_millis(20),
            ..MonitorOptions::default()
        }
    }

    #[test]
    fn without_ptp_it_is_free_running_and_beats() {
        let beats = Arc::new(AtomicUsize::new(0));
        let b = beats.clone();
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("ptp4l");
        let monitor = ClockMonitor::start(quick(Some(missing.clone())), move || {
            b.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        let handle = monitor.handle();
        let first = handle.status();
        assert_eq!(first.polls, 1, "start polls once");
        assert_eq!(first.state, ClockState::FreeRunning);
        assert!(first.unlocked);
        let err = first.ptp4l_error.unwrap();
        assert!(
            err.contains(&missing.display().to_string()) && err.contains("not running"),
            "{err}"
        );
        std::thread::sleep(Duration::from_millis(150));
        let polls = handle.status().polls;
        assert!(polls >= 3, "{polls} polls");
        monitor.stop();
        let after = beats.load(Ordering::Relaxed);
        assert!(after as u64 >= polls, "{after} beats, {polls} polls");
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(beats.load(Ordering::Relaxed), after, "stopped");

        let summary = handle.segment_summary();
        assert_eq!(summary["source"], "realtime");
        assert_eq!(summary["state"], "free_running");
        assert_eq!(summary["worst_state"], "free_running");
        assert_eq!(summary["offset_count"], "0");
        assert!(summary.contains_key("ptp4l_error"));
        assert!(!summary.contains_key("gm_identity"));
        assert_eq!(
            handle.segment_summary()["polls"],
            "0",
            "the window restarts"
        );
    }

    #[test]
    fn tai_source_reports_the_kernel_offset() {
        let monitor = ClockMonitor::start(
            MonitorOptions {
                source: ClockSource::Tai,
                ..quick(None)
            },
            || {},
        )
        .unwrap();
        let status = monitor.handle().status();
        let offset = status.tai_offset_s.unwrap();
        assert_eq!(status.source, "tai");
        assert_eq!(status.tai_note.is_some(), offset == 0);
        assert_eq!(
            monitor.handle().segment_summary()["tai_offset_s"],
            offset.to_string()
        );
    }

    #[test]
    fn a_missing_phc_fails_start() {
        let err = ClockMonitor::start(
            MonitorOptions {
                phc: Some("/dev/ptp-edgerec-none".into()),
                ..quick(None)
            },
            || {},
        )
        .unwrap_err();
        assert!(err.to_string().contains("/dev/ptp-edgerec-none"), "{err}");
    }
}
