//! The control loop's once-a-second work: read the recorder, the clock,
//! the watchdog and the metrics; decide the health state and its reasons;
//! show it on the LEDs; publish the status snapshot (socket, recording,
//! Prometheus) and systemd's one-line `STATUS=`. The loop itself is the
//! binary's main thread, which is also a watched stage: [`Control::tick`]
//! beats its heartbeat.
//!
//! Health knows the recorder only through a [`RecordingView`] that the
//! binary builds from the recorder's status each tick: the recorder knows
//! nothing of LEDs or watchdogs, and health nothing of the pipeline.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use edgerec_clock::ClockHandle;

use crate::fault::FaultRecord;
use crate::heartbeat::{Heartbeat, Heartbeats};
use crate::leds::Leds;
use crate::metrics::Collector;
use crate::notify::Notifier;
use crate::state::{evaluate, DropTrend, HealthInputs, HealthState};
use crate::status::{
    ChannelStatus, MetricSource, RealtimeStatus, SessionStatus, SourceStatus, StatusBoard,
    StatusSnapshot, StorageStatus, SCHEMA,
};
use crate::watchdog::Supervisor;

/// What the control loop reads from the recorder, once a tick.
#[derive(Debug, Clone, Default)]
pub struct RecordingView {
    /// A session is being recorded (also while paused for space or after
    /// a storage failure).
    pub recording: bool,
    /// The storage failure, or the stage that died.
    pub fault: Option<String>,
    /// Why recording is paused for space.
    pub disk_full: Option<String>,
    /// The storage backend.
    pub backend: String,
    /// Why a slower backend is used.
    pub fallback_reason: Option<String>,
    /// Bytes handed to storage since the start.
    pub bytes_written: u64,
    /// Bytes of the current segment handed to storage.
    pub segment_bytes: u64,
    /// Bytes of the current segment known durable.
    pub durable_bytes: u64,
    /// The bag directory.
    pub session_dir: PathBuf,
    /// The segment being written.
    pub segment: PathBuf,
    /// Every channel's counters.
    pub channels: Vec<ChannelCounts>,
    /// Every source, from its supervisor.
    pub sources: Vec<SourceStatus>,
    /// Pushes refused because no channel had their id.
    pub unknown_channel_pushes: u64,
    /// The storage threads' scheduling, when `storage.realtime_priority`
    /// is set.
    pub realtime: Option<RealtimeStatus>,
    /// Event triggers; `None` in `continuous` mode.
    pub events: Option<crate::status::EventsView>,
    /// The ROS 2 source's graph; `None` without one.
    pub ros: Option<crate::status::RosView>,
    /// The operator's commands refused; `None` without a way in.
    pub controls: Option<crate::status::ControlsView>,
    /// Offload; `None` when it is off.
    pub offload: Option<crate::status::OffloadView>,
    /// The fleet link; `None` without one.
    pub remote: Option<crate::status::RemoteView>,
    /// The operator's pause; `None` while recording.
    pub paused: Option<crate::status::PauseStatus>,
}

/// One channel's counters since the start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChannelCounts {
    /// Topic.
    pub topic: String,
    /// `pkg/msg/Type`.
    pub type_name: String,
    /// Accepted into the pipeline.
    pub accepted: u64,
    /// Payload bytes accepted.
    pub bytes: u64,
    /// Written into a file.
    pub written: u64,
    /// Refused at the sink.
    pub dropped: u64,
    /// Lost to a storage failure.
    pub lost: u64,
    /// Lost before reaching edgerec, as the transport reports it.
    pub upstream_lost: u64,
}

/// Reads the recorder; see [`RecordingView`].
pub type ReadRecording = Box<dyn FnMut() -> RecordingView + Send>;

/// What the control loop judges by.
#[derive(Debug, Clone)]
pub struct ControlOptions {
    /// The recordings' directory: its file system is the one whose free
    /// space counts.
    pub data_dir: PathBuf,
    /// Free space below this percentage is "disk low" (degraded).
    pub disk_low_percent: u8,
    /// Drops within this window are "drops rising" (degraded).
    pub drops_window: Duration,
    /// The control loop's own heartbeat deadline.
    pub deadline: Duration,
}

/// The parts the control loop reads and drives; every one but the
/// recorder's status and the board is optional.
pub struct Control {
    opts: ControlOptions,
    recorder: ReadRecording,
    clock: Option<ClockHandle>,
    metrics: Option<Collector>,
    heartbeats: Heartbeats,
    beat: Heartbeat,
    watchdog: Option<Supervisor>,
    leds: Option<Leds>,
    notifier: Option<Notifier>,
    board: StatusBoard,
    last_fault: Option<FaultRecord>,
    drops: BTreeMap<String, DropTrend>,
    previous: Option<(Instant, RecordingView)>,
    started: Instant,
    storage_errors: u64,
    snapshot: Option<StatusSnapshot>,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

impl Control {
    /// A control loop over `recorder`, publishing on `board`; registers
    /// its own heartbeat (`control`) in `heartbeats`.
    pub fn new(
        opts: ControlOptions,
        recorder: ReadRecording,
        heartbeats: Heartbeats,
        board: StatusBoard,
    ) -> Control {
        let beat = heartbeats.register("control", opts.deadline);
        Control {
            opts,
            recorder,
            clock: None,
            metrics: None,
            heartbeats,
            beat,
            watchdog: None,
            leds: None,
            notifier: None,
            board,
            last_fault: None,
            drops: BTreeMap::new(),
            previous: None,
            started: Instant::now(),
            storage_errors: 0,
            snapshot: None,
        }
    }

    /// Reads the clock monitor.
    pub fn with_clock(mut self, clock: ClockHandle) -> Control {
        self.clock = Some(clock);
        self
    }

    /// Collects metrics each tick.
    pub fn with_metrics(mut self, metrics: Collector) -> Control {
        self.metrics = Some(metrics);
        self
    }

    /// Shows the watchdog supervisor's state; [`finish`](Self::finish)
    /// hands it back for the clean stop.
    pub fn with_watchdog(mut self, watchdog: Supervisor) -> Control {
        self.watchdog = Some(watchdog);
        self
    }

    /// Drives these LEDs.
    pub fn with_leds(mut self, leds: Leds) -> Control {
        self.leds = Some(leds);
        self
    }

    /// Sends `STATUS=` lines to systemd.
    pub fn with_notifier(mut self, notifier: Notifier) -> Control {
        self.notifier = Some(notifier);
        self
    }

    /// Reports the stall that reset the board before this start.
    pub fn with_last_fault(mut self, fault: Option<FaultRecord>) -> Control {
        self.last_fault = fault;
        self
    }

    /// The last snapshot taken.
    pub fn snapshot(&self) -> Option<&StatusSnapshot> {
        self.snapshot.as_ref()
    }

    /// Beats the control loop's heartbeat between ticks: the loop calls it
    /// every time it wakes (every 100 ms), so a stage deadline shorter
    /// than the 1 s tick does not make a healthy loop look stalled.
    pub fn alive(&self) {
        self.beat.beat();
    }

    /// Checks the heartbeats at once (see
    /// [`Supervisor::check_now`]): the binary calls it when a stage died,
    /// so the fault file names the stage before the process ends.
    pub fn check_watchdog_now(&self) {
        if let Some(w) = &self.watchdog {
            w.check_now();
        }
    }

    /// Storage failures seen so far (the binary reports them at the end).
    pub fn note_storage_errors(&mut self, n: u64) {
        self.storage_errors = n;
    }

    /// One round: beat, read everything, judge, show, publish. Returns the
    /// new snapshot.
    pub fn tick(&mut self) -> &StatusSnapshot {
        self.beat.beat();
        let now = Instant::now();
        let rec = (self.recorder)();
        let clock = self.clock.as_ref().map(|c| c.status());
        let metrics = self
            .metrics
            .as_mut()
            .map(|m| m.collect())
            .unwrap_or_default();
        let metric_sources = self
            .metrics
            .as_ref()
            .map(|m| {
                m.sources()
                    .into_iter()
                    .map(|(family, origin)| MetricSource {
                        family: family.to_owned(),
                        origin,
                    })
                    .collect()
            })
            .unwrap_or_default();
        let (free, total) = fs_space(&self.opts.data_dir);
        let stalled: Vec<String> = self
            .heartbeats
            .check(now)
            .into_iter()
            .map(|s| s.name)
            .collect();

        let mut rising = Vec::new();
        for c in &rec.channels {
            let trend = self
                .drops
                .entry(c.topic.clone())
                .or_insert_with(|| DropTrend::new(self.opts.drops_window));
            trend.sample(now, c.dropped + c.lost);
            if trend.is_rising(now) {
                rising.push(c.topic.clone());
            }
        }
        let disk_low = match (free, total) {
            (Some(f), Some(t)) if t > 0 => {
                (f as f64) < (t as f64) * f64::from(self.opts.disk_low_percent) / 100.0
            }
            _ => false,
        };
        let inputs = HealthInputs {
            booting: false,
            recording: rec.recording,
            storage_fault: rec.fault.clone(),
            disk_full: rec.disk_full.is_some(),
            paused_by: rec.paused.as_ref().map(|p| p.by.clone()),
            clock_unlocked: clock.as_ref().is_some_and(|c| c.unlocked),
            drops_rising: rising,
            disk_low,
            sources_restarting: rec
                .sources
                .iter()
                .filter(|s| s.state == "restarting")
                .map(|s| s.name.clone())
                .collect(),
            sources_failed: rec
                .sources
                .iter()
                .filter(|s| s.state == "failed")
                .map(|s| (s.name.clone(), s.last_error.clone().unwrap_or_default()))
                .collect(),
            stalled,
            link_down: rec.remote.as_ref().and_then(|r| r.down.clone()),
        };
        let (state, reasons) = evaluate(&inputs);
        if let Some(leds) = &mut self.leds {
            leds.show(state);
        }

        let interval = self
            .previous
            .as_ref()
            .map(|(t, _)| now.duration_since(*t).as_secs_f64())
            .filter(|s| *s > 0.0);
        let prev = self.previous.as_ref().map(|(_, p)| p);
        let rate = |new: u64, old: Option<u64>| match (interval, old) {
            (Some(secs), Some(old)) => new.saturating_sub(old) as f64 / secs,
            _ => 0.0,
        };
        let channels = rec
            .channels
            .iter()
            .map(|c| {
                let old = prev.and_then(|p| p.channels.iter().find(|o| o.topic == c.topic));
                ChannelStatus {
                    topic: c.topic.clone(),
                    type_name: c.type_name.clone(),
                    rate_hz: rate(c.accepted, old.map(|o| o.accepted)),
                    mb_s: rate(c.bytes, old.map(|o| o.bytes)) / 1e6,
                    accepted: c.accepted,
                    written: c.written,
                    dropped: c.dropped,
                    lost: c.lost,
                    upstream_lost: c.upstream_lost,
                }
            })
            .collect();
        let storage = StorageStatus {
            backend: rec.backend.clone(),
            fallback_reason: rec.fallback_reason.clone(),
            bytes_written: rec.bytes_written,
            write_mb_s: rate(rec.bytes_written, prev.map(|p| p.bytes_written)) / 1e6,
            durable_lag_bytes: rec.segment_bytes.saturating_sub(rec.durable_bytes),
            free_bytes: free,
            total_bytes: total,
            disk_full: rec.disk_full.clone(),
            fault: rec.fault.clone(),
            errors: self.storage_errors,
            realtime: rec.realtime.clone(),
        };
        let snapshot = StatusSnapshot {
            schema: SCHEMA,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            time_unix_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0),
            uptime_s: self.started.elapsed().as_secs_f64(),
            state,
            reasons,
            clock,
            storage,
            session: Some(SessionStatus {
                dir: rec.session_dir.clone(),
                segment: rec.segment.clone(),
            }),
            sources: rec.sources.clone(),
            channels,
            unknown_channel_pushes: rec.unknown_channel_pushes,
            metrics,
            metric_sources,
            stages: self.heartbeats.snapshot(),
            watchdog: self.watchdog.as_ref().map(|w| w.status()),
            leds: self.leds.as_ref().map(|l| l.status()),
            last_fault: self.last_fault.clone(),
            events: rec.events.clone(),
            ros: rec.ros.clone(),
            controls: rec.controls.clone(),
            offload: rec.offload.clone(),
            remote: rec.remote.clone(),
            pause: rec.paused.clone(),
        };
        self.board.publish(&snapshot);
        if let Some(n) = &self.notifier {
            let _ = n.status(&one_line(&snapshot));
        }
        self.previous = Some((now, rec));
        self.snapshot.insert(snapshot)
    }

    /// Shows `state` on the LEDs outside the normal ticks (booting at
    /// start, fault when the recorder cannot start).
    pub fn show(&mut self, state: HealthState) {
        if let Some(leds) = &mut self.leds {
            leds.show(state);
        }
    }

    /// Ends the loop; hands back the watchdog supervisor for the clean
    /// stop and the LEDs to show the final state.
    pub fn finish(self) -> (Option<Supervisor>, Option<Leds>) {
        (self.watchdog, self.leds)
    }
}

/// systemd's `STATUS=` line: state, rate, drops, clock.
pub fn one_line(s: &StatusSnapshot) -> String {
    let drops: u64 = s.channels.iter().map(|c| c.dropped + c.lost).sum();
    let clock = s.clock.as_ref().map(|c| c.state.name()).unwrap_or("-");
    let mut line = format!(
        "{}: {:.1} MB/s, {} topics, {} dropped, clock {}",
        s.state.name(),
        s.storage.write_mb_s,
        s.channels.len(),
        drops,
        clock
    );
    if !s.reasons.is_empty() {
        line.push_str(&format!(" ({})", s.reasons.join("; ")));
    }
    line
}

/// Free and total bytes of the file system holding `dir` (or its nearest
/// existing parent).
fn fs_space(dir: &std::path::Path) -> (Option<u64>, Option<u64>) {
    let mut p = dir;
    loop {
        if p.exists() {
            break;
        }
        match p.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => p = parent,
            _ => return (None, None),
        }
    }
    match crate::metrics::disk::statvfs(p) {
        Ok(s) => (Some(s.free), Some(s.total)),
        Err(_) => (None, None),
    }
}
