//! Wiring of everything around the pipeline when `edgerec run` starts: the
//! recording clock and its monitor, heartbeats and the watchdogs, the LEDs,
//! metrics, the status board and its servers, and the recorder's own
//! topics. Each piece comes from a library crate; this file only connects
//! them in the order the appliance needs (LEDs first, so booting shows;
//! the watchdog before anything slow; the clock before the recorder).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use edgerec_clock::{Clock, ClockMonitor, ClockSource, MonitorOptions};
use edgerec_config::{ClockSourceKind, Config};
use edgerec_health::control::{ChannelCounts, Control, ControlOptions, RecordingView};
use edgerec_health::fault::{self, FaultRecord};
use edgerec_health::heartbeat::Heartbeats;
use edgerec_health::leds::{led_map_from_strings, Leds};
use edgerec_health::metrics::{Collector, MetricsOptions};
use edgerec_health::notify::Notifier;
use edgerec_health::own_topics;
use edgerec_health::state::HealthState;
use edgerec_health::status::{RealtimeStatus, SourceStatus};
use edgerec_health::status::{StatusBoard, StatusServer};
use edgerec_health::watchdog::{LinuxWatchdog, Supervisor, SupervisorOptions, WatchdogDevice};
use edgerec_recorder::{RecorderState, RecorderStatus, StatusHandle, Watch};
use edgerec_source::{RecordingClock, Source};

/// What `run` holds besides the recorder.
pub struct Daemon {
    pub heartbeats: Heartbeats,
    clock: Arc<Clock>,
    monitor: Option<ClockMonitor>,
    pub board: StatusBoard,
    servers: Vec<StatusServer>,
    pub notifier: Option<Notifier>,
    watchdog: Option<Supervisor>,
    leds: Option<Leds>,
    last_fault: Option<FaultRecord>,
    metrics_opts: MetricsOptions,
    stage_deadline: Duration,
    poll_interval: Duration,
    record_status: bool,
    record_clock: bool,
    record_audit: bool,
}

/// Why the daemon could not start; the binary exits 78 for `Config`.
pub enum StartError {
    /// The configuration names a device or address that does not work.
    Config(anyhow::Error),
    /// Anything else.
    Other(anyhow::Error),
}

/// The LEDs `[leds]` names, none when `[leds.states]` is empty; the error
/// names the table.
fn board_leds(cfg: &Config) -> Result<Option<Leds>, String> {
    if cfg.leds.states.is_empty() {
        return Ok(None);
    }
    let map = led_map_from_strings(&cfg.leds.states).map_err(|e| format!("[leds.states]: {e}"))?;
    Ok(Some(Leds::new(cfg.leds.sysfs_root.clone(), map)))
}

/// Shows `state` on the LEDs of `config`'s `[leds]` (or, when `config`
/// does not load, of `fallback`'s) and leaves them so: what
/// `edgerec leds` does. Returns what was shown, where, and from which file;
/// an error when neither file loads, none of the LEDs it names exists, or
/// a write failed. A file that names no LEDs shows nothing, successfully.
pub fn show_on_leds(
    config: &Path,
    fallback: Option<&Path>,
    state: HealthState,
) -> anyhow::Result<String> {
    let (cfg, from) = match Config::load(config) {
        Ok(c) => (c, config.display().to_string()),
        Err(e) => {
            let Some(fb) = fallback else {
                anyhow::bail!(
                    "{}: {e} (--fallback names a file to use instead)",
                    config.display()
                );
            };
            let c = Config::load(fb).map_err(|e2| {
                anyhow::anyhow!(
                    "{}: {e}; and the fallback {}: {e2}",
                    config.display(),
                    fb.display()
                )
            })?;
            (
                c,
                format!("{} ({} did not load: {e})", fb.display(), config.display()),
            )
        }
    };
    let Some(mut leds) = board_leds(&cfg).map_err(|e| anyhow::anyhow!("{from}: {e}"))? else {
        // A board without LEDs (the emulated one): nothing to show is right.
        return Ok(format!(
            "{state}: nothing shown, {from} names no LEDs ([leds.states] is empty)"
        ));
    };
    leds.show(state);
    let st = leds.status();
    if let Some(e) = st.last_error {
        anyhow::bail!("{state} on the LEDs of {from}: {e}");
    }
    if st.present.is_empty() {
        anyhow::bail!(
            "none of the LEDs of {from} exists under {} ({}): check [leds.states]",
            cfg.leds.sysfs_root.display(),
            st.missing.join(", ")
        );
    }
    Ok(format!(
        "{state} shown on {} (missing: {}), LEDs of {from}",
        st.present.join(", "),
        if st.missing.is_empty() {
            "none".to_owned()
        } else {
            st.missing.join(", ")
        }
    ))
}

impl Daemon {
    /// Everything up to (not including) the recorder: LEDs showing
    /// booting, the previous fault reported, the watchdog armed, the clock
    /// open and monitored.
    pub fn start(cfg: &Config) -> Result<Daemon, StartError> {
        let notifier = Notifier::from_env();
        let mut leds = board_leds(cfg).map_err(|e| StartError::Config(anyhow::anyhow!(e)))?;
        if let Some(l) = &mut leds {
            l.show(HealthState::Booting);
        }

        let fault_file = non_empty(&cfg.health.fault_file);
        let last_fault = match fault_file.as_deref().map(fault::take_previous) {
            Some(Ok(Some(f))) => {
                tracing::warn!(
                    "the previous run ended in a watchdog fault: stage {} silent for {} ms \
                     (last progress {}): {}",
                    f.stage,
                    f.silent_for_ms,
                    f.last_progress,
                    f.message
                );
                Some(f)
            }
            Some(Ok(None)) | None => None,
            Some(Err(e)) => {
                tracing::warn!("the previous fault record cannot be read: {e}");
                None
            }
        };

        let heartbeats = Heartbeats::new();
        let device: Option<Box<dyn WatchdogDevice>> = match non_empty(&cfg.health.watchdog) {
            None => None,
            Some(path) => match LinuxWatchdog::open(&path) {
                Ok(w) => Some(Box::new(w)),
                // Recording without the hardware watchdog beats not
                // recording: the fault is logged and shown in the status
                // (no device in the watchdog section), systemd's still
                // applies.
                Err(e) => {
                    tracing::error!(
                        "hardware watchdog unavailable, recording without it: {e} \
                         (set health.watchdog = \"\" to run without one on purpose)"
                    );
                    None
                }
            },
        };
        let watchdog = if device.is_some() || notifier.is_some() || fault_file.is_some() {
            let sup = Supervisor::start(
                SupervisorOptions {
                    device,
                    timeout: cfg.health.watchdog_timeout,
                    ping_period: None,
                    fault_file: fault_file.clone(),
                    // Its own connection to systemd's socket: the
                    // supervisor sends WATCHDOG=1 from its thread.
                    notifier: Notifier::from_env(),
                },
                heartbeats.clone(),
            )
            .map_err(|e| StartError::Other(anyhow::anyhow!("starting the watchdog thread: {e}")))?;
            Some(sup)
        } else {
            None
        };

        // From here on the hardware watchdog is armed: a start-up error must
        // disarm it (where the device allows), or a configuration mistake
        // becomes a board reset every watchdog_timeout, on every boot.
        let (clock, monitor) = match open_clock(cfg, &heartbeats) {
            Ok(v) => v,
            Err(e) => {
                if let Some(w) = watchdog {
                    stop_watchdog(w);
                }
                return Err(e);
            }
        };

        Ok(Daemon {
            heartbeats,
            clock: Arc::new(clock),
            monitor: Some(monitor),
            board: StatusBoard::new(),
            servers: Vec::new(),
            notifier,
            watchdog,
            leds,
            last_fault,
            metrics_opts: MetricsOptions {
                sys_root: cfg.metrics.sys_root.clone(),
                proc_root: cfg.metrics.proc_root.clone(),
                data_dir: cfg.recording.root.clone(),
                nvml: cfg.metrics.nvml,
            },
            stage_deadline: cfg.health.stage_deadline,
            poll_interval: cfg.clock.poll_interval,
            record_status: cfg.health.record_status,
            record_clock: cfg.health.record_clock,
            record_audit: cfg.health.record_audit,
        })
        .and_then(|mut d| match d.serve(cfg) {
            Ok(()) => Ok(d),
            Err(e) => {
                d.finish(None, HealthState::Fault);
                Err(e)
            }
        })
    }

    fn serve(&mut self, cfg: &Config) -> Result<(), StartError> {
        if let Some(path) = non_empty(&cfg.health.status_socket) {
            // Readers as the control socket has them: root, the recorder's
            // user, health.control_group and health.read_group.
            let policy = edgerec_health::access::Policy::from_names(
                &cfg.health.control_group,
                &cfg.health.read_group,
            )
            .map_err(|e| StartError::Config(e.into()))?;
            let server = StatusServer::unix(&path, self.board.clone(), Some(policy))
                .map_err(|e| StartError::Config(anyhow::anyhow!("health.status_socket: {e}")))?;
            self.servers.push(server);
        }
        if !cfg.health.prometheus.is_empty() {
            let addr = cfg
                .health
                .prometheus
                .parse()
                .context("health.prometheus")
                .map_err(StartError::Config)?;
            let server = StatusServer::prometheus(addr, self.board.clone())
                .map_err(|e| StartError::Config(anyhow::anyhow!("health.prometheus: {e}")))?;
            tracing::info!("Prometheus metrics on http://{addr}/metrics");
            self.servers.push(server);
        }
        Ok(())
    }

    /// What the pipeline needs from the health side: heartbeats for the
    /// storage stage and the sources, and the clock's record per segment.
    // The update fills the test-only fault switch when that feature is on.
    #[allow(clippy::needless_update)]
    pub fn watch(&self) -> Watch {
        let handle = self.monitor.as_ref().map(|m| m.handle());
        Watch {
            heartbeats: Some(self.heartbeats.clone()),
            deadline: self.stage_deadline,
            segment_metadata: handle.map(|h| {
                Arc::new(move || {
                    vec![(
                        edgerec_clock::SEGMENT_METADATA_NAME.to_owned(),
                        h.segment_summary(),
                    )]
                }) as edgerec_recorder::SegmentMetadataFn
            }),
            ..Watch::default()
        }
    }

    /// The recording clock, for the recorder.
    pub fn clock(&self) -> Arc<dyn RecordingClock> {
        Arc::new(ConfiguredClock(self.clock.clone()))
    }

    /// The recorder's own topics, as configured; `audit` feeds
    /// `/edgerec/audit`.
    pub fn own_topics(&self, audit: &Arc<own_topics::AuditRecords>) -> Vec<Box<dyn Source>> {
        let mut out: Vec<Box<dyn Source>> = Vec::new();
        if self.record_audit {
            out.push(Box::new(own_topics::audit_topic(
                Duration::from_millis(20),
                audit.clone(),
            )));
        }
        if self.record_status {
            let board = self.board.clone();
            out.push(Box::new(own_topics::status_topic(
                Duration::from_secs(1),
                move || {
                    let json = board.json();
                    (!json.is_empty()).then(|| json.to_string())
                },
            )));
        }
        if let (true, Some(m)) = (self.record_clock, &self.monitor) {
            out.push(Box::new(own_topics::clock_topic(
                self.poll_interval,
                m.handle(),
            )));
        }
        out
    }

    /// The control loop over a started recorder; it takes the watchdog
    /// supervisor and the LEDs until [`finish`](Self::finish).
    pub fn control(
        &mut self,
        recorder: StatusHandle,
        data_dir: &Path,
        cfg: &Config,
        ros: Option<Arc<edgerec_ros::stats::StatsTable>>,
        controls: Option<edgerec_ros::control::ControlSlot>,
        layers: Layers,
    ) -> Control {
        let Layers { offload, remote } = layers;
        let realtime_priority = cfg.storage.realtime_priority;
        let mut control = Control::new(
            ControlOptions {
                data_dir: data_dir.to_path_buf(),
                disk_low_percent: cfg.health.disk_low_percent,
                drops_window: cfg.health.drops_window,
                deadline: self.stage_deadline,
            },
            Box::new(move || {
                let rec = recorder.snapshot();
                let mut view = recording_view(&rec, realtime_priority);
                view.ros = ros.as_deref().map(ros_view);
                view.controls = controls.as_ref().map(controls_view);
                view.offload = offload
                    .as_ref()
                    .map(|a| crate::offload::view(&a.status(), rec.deleted_unsent));
                view.remote = remote.as_ref().map(|h| crate::remote::view(&h.status()));
                view
            }),
            self.heartbeats.clone(),
            self.board.clone(),
        )
        .with_metrics(Collector::probe(self.metrics_opts.clone()))
        .with_last_fault(self.last_fault.clone());
        if let Some(m) = &self.monitor {
            control = control.with_clock(m.handle());
        }
        if let Some(w) = self.watchdog.take() {
            control = control.with_watchdog(w);
        }
        if let Some(l) = self.leds.take() {
            control = control.with_leds(l);
        }
        if let Some(n) = Notifier::from_env() {
            control = control.with_notifier(n);
        }
        control
    }

    /// Shows `state` on the LEDs while no control loop runs.
    pub fn show(&mut self, state: HealthState) {
        if let Some(l) = &mut self.leds {
            l.show(state);
        }
    }

    /// Clean stop: tells systemd, stops the clock monitor and the servers,
    /// shows the final state and disarms the hardware watchdog where the
    /// device allows (else the supervisor keeps it fed until exit).
    pub fn finish(mut self, control: Option<Control>, final_state: HealthState) {
        if let Some(n) = &self.notifier {
            let _ = n.stopping();
        }
        if let Some(c) = control {
            let (w, l) = c.finish();
            if w.is_some() {
                self.watchdog = w;
            }
            if l.is_some() {
                self.leds = l;
            }
        }
        self.show(final_state);
        self.servers.clear();
        if let Some(m) = self.monitor.take() {
            m.stop();
        }
        if let Some(w) = self.watchdog.take() {
            stop_watchdog(w);
        }
    }
}

/// What runs beside the recorder (never in its path) and shows in its
/// status.
#[derive(Default)]
pub struct Layers {
    /// Offload to the fleet's store (`offload.upload`).
    pub offload: Option<edgerec_offload::agent::AgentView>,
    /// The fleet link (`remote.broker`).
    pub remote: Option<edgerec_remote::LinkHandle>,
}

/// The configured clock as the sources see it.
struct ConfiguredClock(Arc<Clock>);

impl RecordingClock for ConfiguredClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        self.0.now_ns()
    }

    fn is_realtime(&self) -> bool {
        *self.0.source() == ClockSource::Realtime
    }
}

/// What the control loop reads of the recorder.
fn recording_view(rec: &RecorderStatus, realtime_priority: u8) -> RecordingView {
    RecordingView {
        recording: matches!(
            rec.state,
            RecorderState::Recording | RecorderState::DiskFull | RecorderState::Fault
        ),
        fault: rec.fault.clone(),
        disk_full: rec.disk_full.clone(),
        backend: rec.backend.clone(),
        fallback_reason: rec.fallback_reason.clone(),
        bytes_written: rec.bytes_written,
        segment_bytes: rec.segment_bytes,
        durable_bytes: rec.durable_bytes,
        session_dir: rec.session_dir.clone(),
        segment: rec.segment.clone(),
        channels: rec
            .channels
            .iter()
            .map(|c| ChannelCounts {
                topic: c.topic.clone(),
                type_name: c.type_name.clone(),
                accepted: c.accepted,
                bytes: c.bytes,
                written: c.written,
                dropped: c.dropped,
                lost: c.lost,
                upstream_lost: c.upstream_lost,
            })
            .collect(),
        sources: rec
            .sources
            .iter()
            .map(|s| SourceStatus {
                name: s.name.clone(),
                state: s.state.as_str().to_owned(),
                restarts: s.restarts,
                last_error: s.last_error.clone(),
            })
            .collect(),
        unknown_channel_pushes: rec.unknown_channel_pushes,
        events: rec.events.as_ref().map(events_view),
        // Filled in by the control loop, which holds the ROS source's
        // stats and the controls.
        ros: None,
        controls: None,
        offload: None,
        remote: None,
        paused: rec.paused.clone(),
        // Read back from /proc each tick: what the kernel gives, not what
        // was asked for.
        realtime: (realtime_priority > 0).then(|| {
            let (fifo, other) = edgerec_storage::storage_stage_scheduling(realtime_priority);
            RealtimeStatus {
                priority: realtime_priority,
                fifo,
                other,
            }
        }),
    }
}

/// The ROS 2 source's graph as the health side shows it.
fn ros_view(stats: &edgerec_ros::stats::StatsTable) -> edgerec_health::status::RosView {
    edgerec_health::status::RosView {
        refused: stats
            .refused()
            .by_reason()
            .into_iter()
            .map(|(k, n)| (k.to_owned(), n))
            .collect(),
        missing: stats.missing(),
        warnings: stats.warnings(),
    }
}

/// The rate limits' refusals as the health side shows them.
fn controls_view(slot: &edgerec_ros::control::ControlSlot) -> edgerec_health::status::ControlsView {
    let limits = slot.limits();
    let refused = slot.refusals();
    edgerec_health::status::ControlsView {
        rate_per_second: limits.per_second,
        burst: limits.burst,
        refused: refused.by_command,
        refused_by: refused.by_requester,
    }
}

/// The events stage's status as the health side shows it.
fn events_view(e: &edgerec_recorder::events::EventsStatus) -> edgerec_health::status::EventsView {
    edgerec_health::status::EventsView {
        preroll_held_bytes: e.ring.held_bytes,
        preroll_budget_bytes: e.ring.budget_bytes,
        preroll_asked_s: e.ring.pre_ns as f64 / 1e9,
        preroll_kept_s: e.ring.covered_ns as f64 / 1e9,
        preroll_shortfall: e.ring_shortfall(),
        clips: e.clips,
        open_clip: e.open_clip.clone(),
        recent: e
            .recent
            .iter()
            .map(|r| edgerec_health::status::EventView {
                rule: r.rule.clone(),
                reason: r.reason.clone(),
                values: r.values.clone(),
                time_unix_ns: r.at_ns,
                clip: r.clip.clone(),
            })
            .collect(),
        rule_errors: e.rule_errors.clone(),
        malformed: e.malformed.clone(),
        lane_dropped: e.lane_dropped,
        clip_errors: e.clip_errors.clone(),
        clip_budget_bytes: e.budget_bytes,
        clip_budget_used_bytes: e.budget_used_bytes,
        clip_budget_refused: e.budget_refused,
        clip_budget_cut: e.budget_cut,
        events_over_cap: e.events_over_cap,
    }
}

/// Stops the supervisor: magic close disarms the hardware watchdog where
/// the driver supports it (else it stays fed until the process exits).
fn stop_watchdog(w: Supervisor) {
    match w.stop() {
        Ok(how) => tracing::info!("watchdog: {how:?}"),
        Err(e) => tracing::warn!("watchdog: clean stop failed: {e}"),
    }
}

/// The recording clock and its monitor thread (which beats the `clock`
/// stage).
fn open_clock(cfg: &Config, heartbeats: &Heartbeats) -> Result<(Clock, ClockMonitor), StartError> {
    let source = match cfg.clock.source {
        ClockSourceKind::Realtime => ClockSource::Realtime,
        ClockSourceKind::Tai => ClockSource::Tai,
        ClockSourceKind::Phc => ClockSource::Phc(cfg.clock.phc.clone()),
    };
    let clock = Clock::open(&source).map_err(|e| {
        StartError::Config(anyhow::anyhow!(
            "clock.source = \"{}\": {e}",
            cfg.clock.source.as_str()
        ))
    })?;
    let clock_beat = heartbeats.register(
        "clock",
        cfg.health.stage_deadline.max(cfg.clock.poll_interval * 3),
    );
    let monitor = ClockMonitor::start(
        MonitorOptions {
            source,
            phc: (!cfg.clock.phc.is_empty()).then(|| cfg.clock.phc.clone()),
            ptp4l_socket: non_empty(&cfg.clock.ptp4l_socket),
            domain: cfg.clock.domain,
            poll_interval: cfg.clock.poll_interval,
            lock_threshold_ns: cfg.clock.lock_threshold.as_nanos() as u64,
            lock_time: cfg.clock.lock_time,
            holdover_max: cfg.clock.holdover_max,
        },
        move || clock_beat.beat(),
    )
    .map_err(|e| StartError::Config(anyhow::anyhow!("clock.phc = \"{}\": {e}", cfg.clock.phc)))?;

    Ok((clock, monitor))
}

fn non_empty(p: &Path) -> Option<PathBuf> {
    (!p.as_os_str().is_empty()).then(|| p.to_path_buf())
}
