//! The status snapshot: one struct that says everything an operator asks
//! of a running recorder (its health and why, the clock, storage, every
//! source, the metrics and where each came from), rebuilt once a second
//! and published three ways from the same JSON text: on a local Unix socket
//! (`edgerec status`), into the recording as `/edgerec/status`, and,
//! optionally, as Prometheus text on a localhost port. [`StatusSnapshot::
//! diagnostics`] gives the same content in the shape of
//! `diagnostic_msgs/DiagnosticArray`, for the ROS 2 status topic.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use edgerec_clock::ClockStatus;
use serde::Serialize;
use serde_json::Value;

use crate::access::{Need, Policy};
use crate::ctl::{json_string, user_name, Peer};
use crate::fault::FaultRecord;
use crate::heartbeat::StageSnapshot;
use crate::leds::LedsStatus;
use crate::metrics::Metric;
use crate::state::HealthState;
use crate::watchdog::WatchdogStatus;

/// Version of the snapshot's JSON shape; raised when a field changes
/// meaning or goes away (adding one does not). 2: `sources` lists the
/// sources (state, restarts, last error); the per-topic entries that
/// schema 1 called `sources` are `channels`.
pub const SCHEMA: u32 = 2;

/// Everything the status says, at one instant.
#[derive(Debug, Clone, Serialize)]
pub struct StatusSnapshot {
    /// [`SCHEMA`].
    pub schema: u32,
    /// edgerec's version.
    pub version: String,
    /// When the snapshot was taken, ns since the Unix epoch (system clock).
    pub time_unix_ns: u64,
    /// Seconds since the recorder started.
    pub uptime_s: f64,
    /// The health state shown on the LEDs.
    pub state: HealthState,
    /// Why the state is not plain `recording`/`idle`, most severe first.
    pub reasons: Vec<String>,
    /// The recording clock and its quality; `None` before the monitor runs.
    pub clock: Option<ClockStatus>,
    /// Where the data goes and how fast.
    pub storage: StorageStatus,
    /// The session and segment being written.
    pub session: Option<SessionStatus>,
    /// Every source under the supervisor.
    pub sources: Vec<SourceStatus>,
    /// Every recorded channel (topic).
    pub channels: Vec<ChannelStatus>,
    /// Pushes refused because no channel had their id (a source's bug).
    pub unknown_channel_pushes: u64,
    /// GPU, thermal, CPU, memory, disk and NVMe figures, each with its
    /// origin.
    pub metrics: Vec<Metric>,
    /// Where each metric family comes from, or why it is missing.
    pub metric_sources: Vec<MetricSource>,
    /// The stages the watchdog watches.
    pub stages: Vec<StageSnapshot>,
    /// The hardware and systemd watchdogs.
    pub watchdog: Option<WatchdogStatus>,
    /// The LEDs.
    pub leds: Option<LedsStatus>,
    /// The stall that reset the board before this start, if any.
    pub last_fault: Option<FaultRecord>,
    /// Event triggers, the pre-roll ring and the recent events; absent in
    /// `continuous` mode.
    pub events: Option<EventsView>,
    /// What the ROS 2 source found on the graph and did not record;
    /// absent without a ROS 2 source.
    pub ros: Option<RosView>,
    /// The operator's commands (control socket, ROS 2 services) refused
    /// by the per-requester rate limits.
    pub controls: Option<ControlsView>,
    /// Offload to the fleet's store; absent with `offload.upload = "none"`.
    pub offload: Option<OffloadView>,
    /// The fleet link (MQTT); absent without `remote.broker`.
    pub remote: Option<RemoteView>,
    /// The operator's pause: who and since when; absent while recording.
    pub pause: Option<PauseStatus>,
}

/// An operator's pause, in the snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PauseStatus {
    /// Who asked: `uid N (user, pid P)` on the control socket, `ROS 2 client
    /// GUID` from a ROS 2 service.
    pub by: String,
    /// When, ns since the Unix epoch (system clock).
    pub since_unix_ns: u64,
}

/// The fleet link, in the snapshot; read back from the JSON by `edgerec
/// status` (a field an older or newer recorder lacks takes its default).
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct RemoteView {
    /// `remote.broker`.
    pub broker: String,
    /// The topic prefix.
    pub prefix: String,
    /// Connected to the broker.
    pub connected: bool,
    /// Seconds in that state.
    pub for_s: f64,
    /// Connections made since the start.
    pub connects: u64,
    /// Connections lost since the start.
    pub disconnects: u64,
    /// Messages handed to the connection.
    pub published: u64,
    /// Messages waiting for the link.
    pub queued: u64,
    /// Messages dropped (the oldest, when too many waited).
    pub dropped: u64,
    /// Why the last connection failed or ended.
    pub last_error: Option<String>,
    /// Set while the link has been down longer than its keepalive (a
    /// degraded reason).
    pub down: Option<String>,
    /// The fleet's commands run.
    pub commands_run: u64,
    /// The fleet's commands refused.
    pub commands_rejected: u64,
}

/// Offload inside the running recorder, in the snapshot.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OffloadView {
    /// `open`, `metered (IFACE)`, `closed: why`, `paused (by who)`.
    pub link: String,
    /// Bytes per second handed to the connections lately.
    pub rate_bytes_per_s: u64,
    /// `offload.max_rate` (0: none).
    pub max_rate_bytes_per_s: u64,
    /// The queue by class (`clips`, `event_segments`, `segments`).
    pub queue: Vec<OffloadClass>,
    /// Files sent (or found at the store) since the start.
    pub sent_files: u64,
    /// Their bytes.
    pub sent_bytes: u64,
    /// Event clips at the store.
    pub clips: u64,
    /// Session manifests at the store.
    pub manifests: u64,
    /// Tries that failed (each file is tried again).
    pub failures: u64,
    /// Segments kept on the vehicle (`upload = "events"`).
    pub held: u64,
    /// Segments and clips retention deleted before they were sent.
    pub deleted_unsent: u64,
    /// The last failure.
    pub last_error: Option<String>,
}

/// One class of the offload queue.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct OffloadClass {
    /// `clips`, `event_segments` or `segments`.
    pub class: String,
    /// Files waiting.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// How long the oldest has waited, s.
    pub oldest_s: f64,
}

/// The operator's commands the rate limits refused since the start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ControlsView {
    /// `health.control_rate`: commands a second per requester.
    pub rate_per_second: u32,
    /// `health.control_burst`: commands at once per requester.
    pub burst: u32,
    /// Refused, by command (`trigger`, `split`).
    pub refused: BTreeMap<String, u64>,
    /// Refused, by requester (`uid 1000`, `ROS 2 client <GUID>`, `other
    /// requesters` beyond the 64 tracked one by one).
    pub refused_by: BTreeMap<String, u64>,
}

/// What the ROS 2 source found on the graph and did not record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RosView {
    /// Publications refused, by reason: `bad_name` (not a ROS name),
    /// `own` (edgerec's own topics), `other_source` (a topic another
    /// source records), `topic_cap` (`ros.max_topics` reached),
    /// `publisher_cap` (too many publishers known).
    pub refused: BTreeMap<String, u64>,
    /// Topics named in the selection that no publisher offers yet.
    pub missing: Vec<String>,
    /// The latest warnings (refusals, QoS mismatches, unknown types).
    pub warnings: Vec<String>,
}

/// Event triggers in the snapshot.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EventsView {
    /// Bytes the pre-roll ring holds.
    pub preroll_held_bytes: u64,
    /// `triggers.memory_budget`.
    pub preroll_budget_bytes: u64,
    /// The pre-roll asked (the longest of the rules'), s.
    pub preroll_asked_s: f64,
    /// The pre-roll kept now, s.
    pub preroll_kept_s: f64,
    /// Set when the budget cannot hold the pre-roll at the rates seen:
    /// how much it holds, and the fix.
    pub preroll_shortfall: Option<String>,
    /// Clips finished since the start.
    pub clips: u64,
    /// The clip being written.
    pub open_clip: Option<PathBuf>,
    /// The most recent events, newest last.
    pub recent: Vec<EventView>,
    /// Rules that cannot run, with why.
    pub rule_errors: BTreeMap<String, String>,
    /// Per rule, payloads that did not decode (never fired).
    pub malformed: BTreeMap<String, u64>,
    /// Messages of clip channels the events stage could not take in time.
    pub lane_dropped: u64,
    /// Clips that could not be written, and why.
    pub clip_errors: Vec<String>,
    /// `triggers.disk_budget`, bytes.
    pub clip_budget_bytes: u64,
    /// What the clips on disk take of it, bytes.
    pub clip_budget_used_bytes: u64,
    /// Events that got no clip because the budget was spent.
    pub clip_budget_refused: u64,
    /// Clips that ended early because the budget was spent.
    pub clip_budget_cut: u64,
    /// Events that overlapped a clip already listing the most one lists
    /// (256): counted, not listed, not extending it.
    pub events_over_cap: u64,
}

/// One event in the snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EventView {
    /// The rule (`ctl` for `edgerec ctl trigger` without a name).
    pub rule: String,
    /// Why.
    pub reason: String,
    /// The values that fired it.
    pub values: String,
    /// Trigger time, ns since the epoch.
    pub time_unix_ns: u64,
    /// The clip it is in.
    pub clip: PathBuf,
}

/// Storage in the snapshot.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StorageStatus {
    /// `io_uring+O_DIRECT`, `pwrite+O_DIRECT` or `buffered`.
    pub backend: String,
    /// Why a slower backend is used, when it is.
    pub fallback_reason: Option<String>,
    /// Bytes written into segments since the start.
    pub bytes_written: u64,
    /// Write rate over the last snapshot interval, MB/s (10^6 bytes).
    pub write_mb_s: f64,
    /// Bytes handed to storage but not yet known durable: what a power cut
    /// now would lose beyond the data still in memory.
    pub durable_lag_bytes: u64,
    /// Free bytes on the recordings' file system.
    pub free_bytes: Option<u64>,
    /// Size of that file system.
    pub total_bytes: Option<u64>,
    /// Why recording is paused for space, when it is.
    pub disk_full: Option<String>,
    /// The storage failure being recovered from, when there is one.
    pub fault: Option<String>,
    /// Storage failures since the start.
    pub errors: u64,
    /// `storage.realtime_priority` and what the kernel gives the storage
    /// stage's threads; absent when it is 0 (normal scheduling).
    pub realtime: Option<RealtimeStatus>,
}

/// The storage stage's real-time scheduling as the kernel reports it
/// (`/proc/self/task/*/stat`), not as it was asked for.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RealtimeStatus {
    /// The configured `SCHED_FIFO` priority.
    pub priority: u8,
    /// Storage threads under `SCHED_FIFO` at that priority: name and count
    /// (io_uring's workers as `iou-wrk`).
    pub fifo: Vec<(String, u32)>,
    /// Storage threads under any other policy or priority: where
    /// `SCHED_FIFO` was refused (the log says why).
    pub other: Vec<(String, u32)>,
}

/// The session in the snapshot.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SessionStatus {
    /// The bag directory.
    pub dir: PathBuf,
    /// The segment being written (`.mcap.active`).
    pub segment: PathBuf,
}

/// One source in the snapshot, as its supervisor sees it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SourceStatus {
    /// The source's name (`synthetic /imu`, `ros2`).
    pub name: String,
    /// `running`, `restarting`, `failed`, `finished` or `stopped`.
    pub state: String,
    /// Runs started after a failure.
    pub restarts: u64,
    /// Why the last failed run failed.
    pub last_error: Option<String>,
}

/// One channel in the snapshot.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ChannelStatus {
    /// ROS 2 topic name.
    pub topic: String,
    /// ROS 2 type name.
    pub type_name: String,
    /// Messages accepted per second over the last interval.
    pub rate_hz: f64,
    /// Payload MB/s over the last interval.
    pub mb_s: f64,
    /// Messages accepted since the start.
    pub accepted: u64,
    /// Messages in whole chunks handed to storage.
    pub written: u64,
    /// Messages dropped before the pipeline (queue full, budget, paused).
    pub dropped: u64,
    /// Accepted messages lost with a storage failure.
    pub lost: u64,
    /// Messages lost before they reached edgerec, as the source's transport
    /// reports it (DDS `SAMPLE_LOST` and `SAMPLE_REJECTED`): not edgerec's
    /// drops, but missing from the recording all the same.
    pub upstream_lost: u64,
}

/// A metric family's origin, or why it has none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetricSource {
    /// `gpu load`, `thermal`, `disk`, ...
    pub family: String,
    /// A path, an NVML call, or the reason it is missing.
    pub origin: String,
}

/// One entry of a `diagnostic_msgs/DiagnosticArray`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// `OK` 0, `WARN` 1, `ERROR` 2, `STALE` 3.
    pub level: u8,
    /// `edgerec: storage`, `edgerec: source /imu`, ...
    pub name: String,
    /// One line.
    pub message: String,
    /// The device or file it is about.
    pub hardware_id: String,
    /// Key/value pairs.
    pub values: Vec<(String, String)>,
}

/// diagnostic_msgs/DiagnosticStatus levels.
pub mod level {
    /// Nothing wrong.
    pub const OK: u8 = 0;
    /// Degraded.
    pub const WARN: u8 = 1;
    /// Fault.
    pub const ERROR: u8 = 2;
}

impl StatusSnapshot {
    /// The snapshot as `diagnostic_msgs/DiagnosticStatus` entries: the
    /// recorder, the clock, storage, then one per source and one with the
    /// metrics.
    pub fn diagnostics(&self) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        let recorder_level = match self.state {
            HealthState::Fault => level::ERROR,
            HealthState::Degraded | HealthState::DiskFull | HealthState::Paused => level::WARN,
            _ => level::OK,
        };
        let mut values = vec![
            ("state".to_owned(), self.state.name().to_owned()),
            ("uptime_s".to_owned(), format!("{:.0}", self.uptime_s)),
            ("version".to_owned(), self.version.clone()),
        ];
        if let Some(p) = &self.pause {
            values.push(("paused_by".to_owned(), p.by.clone()));
            values.push((
                "paused_since_unix_ns".to_owned(),
                p.since_unix_ns.to_string(),
            ));
        }
        for s in &self.stages {
            values.push((
                format!("stage {}", s.name),
                format!(
                    "{} ms ago{}",
                    s.age.as_millis(),
                    if s.stalled { " STALLED" } else { "" }
                ),
            ));
        }
        out.push(Diagnostic {
            level: recorder_level,
            name: "edgerec: recorder".to_owned(),
            message: if self.reasons.is_empty() {
                self.state.name().to_owned()
            } else {
                format!("{}: {}", self.state.name(), self.reasons.join("; "))
            },
            hardware_id: String::new(),
            values,
        });
        if let Some(c) = &self.clock {
            let v = serde_json::to_value(c).unwrap_or(Value::Null);
            let state = format!("{}: {}", c.state, c.reason);
            out.push(Diagnostic {
                level: if c.unlocked { level::WARN } else { level::OK },
                name: "edgerec: clock".to_owned(),
                message: state,
                hardware_id: v
                    .get("device")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                values: flatten(&v),
            });
        }
        let st = &self.storage;
        let rt_refused = st.realtime.as_ref().is_some_and(|r| !r.other.is_empty());
        out.push(Diagnostic {
            level: if st.fault.is_some() {
                level::ERROR
            } else if st.disk_full.is_some() || rt_refused {
                level::WARN
            } else {
                level::OK
            },
            name: "edgerec: storage".to_owned(),
            message: st
                .fault
                .clone()
                .or_else(|| st.disk_full.clone())
                .unwrap_or_else(|| {
                    format!(
                        "{} at {:.1} MB/s{}",
                        st.backend,
                        st.write_mb_s,
                        if rt_refused {
                            "; SCHED_FIFO refused for storage threads"
                        } else {
                            ""
                        }
                    )
                }),
            hardware_id: self
                .session
                .as_ref()
                .map(|s| s.dir.display().to_string())
                .unwrap_or_default(),
            values: flatten(&serde_json::to_value(st).unwrap_or(Value::Null)),
        });
        for s in &self.sources {
            out.push(Diagnostic {
                level: match s.state.as_str() {
                    "failed" => level::ERROR,
                    "restarting" => level::WARN,
                    _ => level::OK,
                },
                name: format!("edgerec: source {}", s.name),
                message: match &s.last_error {
                    Some(e) => format!("{}, {} restarts; last error: {e}", s.state, s.restarts),
                    None => format!("{}, {} restarts", s.state, s.restarts),
                },
                hardware_id: String::new(),
                values: flatten(&serde_json::to_value(s).unwrap_or(Value::Null)),
            });
        }
        for s in &self.channels {
            out.push(Diagnostic {
                level: if s.dropped + s.lost > 0 {
                    level::WARN
                } else {
                    level::OK
                },
                name: format!("edgerec: topic {}", s.topic),
                message: if s.upstream_lost > 0 {
                    // Lost before edgerec: the transport's losses, or input
                    // a source refused (a malformed image).
                    format!(
                        "{:.1} Hz, {} dropped, {} lost upstream",
                        s.rate_hz,
                        s.dropped + s.lost,
                        s.upstream_lost
                    )
                } else {
                    format!("{:.1} Hz, {} dropped", s.rate_hz, s.dropped + s.lost)
                },
                hardware_id: s.type_name.clone(),
                values: flatten(&serde_json::to_value(s).unwrap_or(Value::Null)),
            });
        }
        if let Some(r) = &self.remote {
            out.push(Diagnostic {
                level: if r.down.is_some() {
                    level::WARN
                } else {
                    level::OK
                },
                name: "edgerec: fleet link".to_owned(),
                message: remote_line(r),
                hardware_id: r.broker.clone(),
                values: flatten(&serde_json::to_value(r).unwrap_or(Value::Null)),
            });
        }
        if let Some(o) = &self.offload {
            let waiting: u64 = o.queue.iter().map(|c| c.files).sum();
            out.push(Diagnostic {
                level: if o.deleted_unsent > 0 || o.link.starts_with("closed") {
                    level::WARN
                } else {
                    level::OK
                },
                name: "edgerec: offload".to_owned(),
                message: format!(
                    "link {}; {waiting} files waiting; {:.1} MB/s{}",
                    o.link,
                    o.rate_bytes_per_s as f64 / 1e6,
                    match o.deleted_unsent {
                        0 => String::new(),
                        n => format!("; {n} deleted before they were sent"),
                    }
                ),
                hardware_id: String::new(),
                values: flatten(&serde_json::to_value(o).unwrap_or(Value::Null)),
            });
        }
        out.push(Diagnostic {
            level: level::OK,
            name: "edgerec: metrics".to_owned(),
            message: format!("{} metrics", self.metrics.len()),
            hardware_id: String::new(),
            values: self
                .metrics
                .iter()
                .map(|m| {
                    (
                        m.name.clone(),
                        format!("{} {} ({})", m.value, m.unit, m.origin),
                    )
                })
                .collect(),
        });
        out
    }

    /// Prometheus text exposition (format 0.0.4) of the numbers in the
    /// snapshot.
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        let mut gauge = |name: &str, help: &str, samples: &[(String, f64)]| {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
            for (labels, value) in samples {
                out.push_str(&format!("{name}{labels} {value}\n"));
            }
        };
        let states: Vec<(String, f64)> = HealthState::ALL
            .iter()
            .map(|s| {
                (
                    format!("{{state=\"{}\"}}", s.name()),
                    if *s == self.state { 1.0 } else { 0.0 },
                )
            })
            .collect();
        gauge("edgerec_state", "1 for the current health state", &states);
        gauge(
            "edgerec_uptime_seconds",
            "seconds since the recorder started",
            &[(String::new(), self.uptime_s)],
        );
        let st = &self.storage;
        gauge(
            "edgerec_bytes_written",
            "bytes written into segments",
            &[(String::new(), st.bytes_written as f64)],
        );
        gauge(
            "edgerec_write_bytes_per_second",
            "write rate over the last second",
            &[(String::new(), st.write_mb_s * 1e6)],
        );
        gauge(
            "edgerec_durable_lag_bytes",
            "bytes handed to storage not yet known durable",
            &[(String::new(), st.durable_lag_bytes as f64)],
        );
        if let Some(free) = st.free_bytes {
            gauge(
                "edgerec_disk_free_bytes",
                "free bytes on the recordings' file system",
                &[(String::new(), free as f64)],
            );
        }
        let per_source = |f: fn(&SourceStatus) -> f64| -> Vec<(String, f64)> {
            self.sources
                .iter()
                .map(|s| (format!("{{source=\"{}\"}}", escape_label(&s.name)), f(s)))
                .collect()
        };
        gauge(
            "edgerec_source_restarts",
            "runs of a source started after a failure",
            &per_source(|s| s.restarts as f64),
        );
        gauge(
            "edgerec_source_running",
            "1 while a source's run is going",
            &per_source(|s| if s.state == "running" { 1.0 } else { 0.0 }),
        );
        let per_topic = |f: fn(&ChannelStatus) -> f64| -> Vec<(String, f64)> {
            self.channels
                .iter()
                .map(|s| (format!("{{topic=\"{}\"}}", escape_label(&s.topic)), f(s)))
                .collect()
        };
        gauge(
            "edgerec_topic_rate_hz",
            "messages per second",
            &per_topic(|s| s.rate_hz),
        );
        gauge(
            "edgerec_topic_written",
            "messages written",
            &per_topic(|s| s.written as f64),
        );
        gauge(
            "edgerec_topic_dropped",
            "messages dropped or lost",
            &per_topic(|s| (s.dropped + s.lost) as f64),
        );
        gauge(
            "edgerec_topic_upstream_lost",
            "messages lost before edgerec (the transport's losses, input a source refused)",
            &per_topic(|s| s.upstream_lost as f64),
        );
        if let Some(c) = &self.clock {
            if let Some(offset) = c.last_offset_ns {
                gauge(
                    "edgerec_clock_offset_ns",
                    "offset of the recording clock from its reference",
                    &[(String::new(), offset as f64)],
                );
            }
            gauge(
                "edgerec_clock_unlocked",
                "1 while data is recorded with an unlocked clock",
                &[(String::new(), if c.unlocked { 1.0 } else { 0.0 })],
            );
        }
        let metrics: Vec<(String, f64)> = self
            .metrics
            .iter()
            .map(|m| {
                (
                    format!(
                        "{{name=\"{}\",unit=\"{}\",origin=\"{}\"}}",
                        escape_label(&m.name),
                        escape_label(m.unit),
                        escape_label(&m.origin)
                    ),
                    m.value,
                )
            })
            .collect();
        gauge(
            "edgerec_metric",
            "board metrics, by name and origin",
            &metrics,
        );
        if let Some(r) = &self.remote {
            gauge(
                "edgerec_remote_connected",
                "1 while the fleet link is connected to the broker",
                &[(String::new(), if r.connected { 1.0 } else { 0.0 })],
            );
            gauge(
                "edgerec_remote_queued",
                "messages waiting for the fleet link",
                &[(String::new(), r.queued as f64)],
            );
            gauge(
                "edgerec_remote_dropped",
                "messages the fleet link dropped (the oldest, when too many waited)",
                &[(String::new(), r.dropped as f64)],
            );
        }
        if let Some(o) = &self.offload {
            let by_class = |f: &dyn Fn(&OffloadClass) -> f64| -> Vec<(String, f64)> {
                o.queue
                    .iter()
                    .map(|c| (format!("{{class=\"{}\"}}", escape_label(&c.class)), f(c)))
                    .collect()
            };
            gauge(
                "edgerec_offload_queue_files",
                "files waiting to be sent, by class",
                &by_class(&|c| c.files as f64),
            );
            gauge(
                "edgerec_offload_queue_bytes",
                "bytes waiting to be sent, by class",
                &by_class(&|c| c.bytes as f64),
            );
            gauge(
                "edgerec_offload_queue_oldest_seconds",
                "how long the oldest waiting file has waited, by class",
                &by_class(&|c| c.oldest_s),
            );
            gauge(
                "edgerec_offload_rate_bytes_per_second",
                "bytes per second handed to the store's connections lately",
                &[(String::new(), o.rate_bytes_per_s as f64)],
            );
            gauge(
                "edgerec_offload_link_open",
                "1 while offload may send everything, 0.5 metered, 0 closed or paused",
                &[(
                    String::new(),
                    if o.link == "open" {
                        1.0
                    } else if o.link.starts_with("metered") {
                        0.5
                    } else {
                        0.0
                    },
                )],
            );
            gauge(
                "edgerec_offload_sent_bytes",
                "bytes sent to the store since the start",
                &[(String::new(), o.sent_bytes as f64)],
            );
            gauge(
                "edgerec_offload_deleted_unsent",
                "segments and clips retention deleted before they were sent",
                &[(String::new(), o.deleted_unsent as f64)],
            );
        }
        out
    }
}

/// One line of the fleet link's state.
fn remote_line(r: &RemoteView) -> String {
    let state = if r.connected {
        format!("connected to {} for {:.0} s", r.broker, r.for_s)
    } else {
        format!(
            "not connected to {} ({:.0} s){}",
            r.broker,
            r.for_s,
            r.last_error
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        )
    };
    format!(
        "{state}; {} published under {}/, {} waiting, {} dropped, {} reconnects; commands: {} run, {} refused",
        r.published,
        r.prefix,
        r.queued,
        r.dropped,
        r.connects.saturating_sub(1),
        r.commands_run,
        r.commands_rejected
    )
}

fn escape_label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A JSON object's leaves as dotted key/value strings.
fn flatten(v: &Value) -> Vec<(String, String)> {
    fn walk(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, v, out);
                }
            }
            Value::Null => {}
            Value::String(s) => out.push((prefix.to_owned(), s.clone())),
            other => out.push((prefix.to_owned(), other.to_string())),
        }
    }
    let mut out = Vec::new();
    walk("", v, &mut out);
    out
}

/// The latest snapshot, as the texts the servers hand out. Cloning is
/// cheap; every clone sees the same texts.
#[derive(Clone, Default)]
pub struct StatusBoard {
    inner: Arc<RwLock<Published>>,
}

#[derive(Default)]
struct Published {
    json: Arc<str>,
    prometheus: Arc<str>,
    diagnostics: Arc<[Diagnostic]>,
}

impl StatusBoard {
    /// A board with nothing published yet.
    pub fn new() -> StatusBoard {
        StatusBoard::default()
    }

    /// Publishes `snapshot`; returns its JSON.
    pub fn publish(&self, snapshot: &StatusSnapshot) -> Arc<str> {
        let json: Arc<str> = match serde_json::to_string(snapshot) {
            Ok(s) => s.into(),
            Err(e) => format!("{{\"error\":\"cannot serialize the status: {e}\"}}").into(),
        };
        let prometheus: Arc<str> = snapshot.prometheus().into();
        let diagnostics: Arc<[Diagnostic]> = snapshot.diagnostics().into();
        let mut p = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        p.json = json.clone();
        p.prometheus = prometheus;
        p.diagnostics = diagnostics;
        json
    }

    /// The last snapshot's diagnostics (`/diagnostics`); empty before the
    /// first.
    pub fn diagnostics(&self) -> Arc<[Diagnostic]> {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .diagnostics
            .clone()
    }

    /// The last snapshot's JSON; empty before the first.
    pub fn json(&self) -> Arc<str> {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .json
            .clone()
    }

    /// The last snapshot as Prometheus text.
    pub fn prometheus(&self) -> Arc<str> {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .prometheus
            .clone()
    }
}

/// Why a status server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Another process answers on the socket: a second recorder.
    #[error("{path}: another edgerec is already serving its status here; stop it, or give this one another health.status_socket")]
    InUse {
        /// The socket path.
        path: PathBuf,
    },
    /// Something other than a socket is at the socket's path. It is never
    /// removed: only a socket left by a crash is replaced.
    #[error("{path} is {kind}, not a socket; edgerec replaces only a socket left by an earlier run: move it away, or give the socket another path in [health]", path = .path.display())]
    NotASocket {
        /// The socket path.
        path: PathBuf,
        /// What is there.
        kind: &'static str,
    },
    /// The socket or port could not be set up.
    #[error(
        "{what}: {source}; check the path or address in the configuration and its permissions"
    )]
    Io {
        /// The socket path or address.
        what: String,
        /// The error.
        #[source]
        source: io::Error,
    },
}

/// What the socket answers before the first snapshot: the recorder is
/// still recovering unfinished segments and opening its sources.
const BOOTING: &str = r#"{"schema":2,"state":"booting","reasons":["starting: recovering unfinished segments and opening sources"]}"#;

/// A thread answering every connection with the board's JSON (and a
/// newline), then closing it. Stopped and its socket file removed on drop.
pub struct StatusServer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    cleanup: Option<PathBuf>,
    wake: Wake,
}

enum Wake {
    Unix(PathBuf),
    Tcp(SocketAddr),
}

/// Binds a Unix socket at `path` (its directory is created). A stale
/// socket file left by a crash is replaced; one a live process answers on
/// is [`ServeError::InUse`].
pub(crate) fn bind_unix(path: &Path) -> Result<UnixListener, ServeError> {
    let io_err = |source| ServeError::Io {
        what: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io_err)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if UnixStream::connect(path).is_ok() {
                return Err(ServeError::InUse {
                    path: path.to_path_buf(),
                });
            }
            std::fs::remove_file(path).map_err(io_err)?;
        }
        // A file, a directory or a link (the path may be on the data
        // partition, which someone with the drive in hand can write):
        // never removed, never followed.
        Ok(meta) => {
            return Err(ServeError::NotASocket {
                path: path.to_path_buf(),
                kind: crate::file_kind::describe(&meta.file_type()),
            })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(e)),
    }
    UnixListener::bind(path).map_err(io_err)
}

/// Removes the socket file at `path` when it is still a socket (what a
/// server leaves on stop); anything else put there since is left alone.
pub(crate) fn remove_socket(path: &Path) {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        let _ = std::fs::remove_file(path);
    }
}

/// The reply for a peer `policy` does not let read the status, logged in
/// the audit trail; `None` when it may.
fn refused(policy: &Policy, s: &UnixStream) -> Option<String> {
    let error = match Peer::of(s) {
        Ok(peer) => {
            let refusal = policy.check(&peer, Need::Read, "status").err()?;
            tracing::info!(
                target: "edgerec::audit",
                surface = "status socket",
                uid = peer.uid,
                pid = peer.pid,
                user = user_name(peer.uid).unwrap_or_default(),
                command = "status",
                accepted = false,
                result = %refusal,
                "status refused"
            );
            refusal
        }
        Err(e) => format!("cannot tell who is asking (SO_PEERCRED): {e}"),
    };
    Some(format!(
        "{{\"ok\":false,\"error\":{}}}\n",
        json_string(&error)
    ))
}

impl StatusServer {
    /// Serves `board` on the Unix socket at `path` (its directory is
    /// created). A stale socket file left by a crash is replaced; one a
    /// live process answers on is an error. With a `policy`, any local
    /// user may connect (mode 0666) and each is answered by who the kernel
    /// says it is: those the policy lets read get the status, the others
    /// `{"ok":false,"error":...}` naming the group to join. Without one the
    /// socket keeps the mode the umask gives it.
    pub fn unix(
        path: &Path,
        board: StatusBoard,
        policy: Option<Policy>,
    ) -> Result<StatusServer, ServeError> {
        let io_err = |source| ServeError::Io {
            what: path.display().to_string(),
            source,
        };
        let listener = bind_unix(path)?;
        if policy.is_some() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))
                .map_err(io_err)?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("edgerec-status".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if flag.load(Ordering::Acquire) {
                        break;
                    }
                    if let Ok(mut s) = conn {
                        let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                        if let Some(refusal) = policy.as_ref().and_then(|p| refused(p, &s)) {
                            let _ = s.write_all(refusal.as_bytes());
                            continue;
                        }
                        let json = board.json();
                        let json: &str = if json.is_empty() { BOOTING } else { &json };
                        let _ = s
                            .write_all(json.as_bytes())
                            .and_then(|_| s.write_all(b"\n"));
                    }
                }
            })
            .map_err(io_err)?;
        Ok(StatusServer {
            stop,
            thread: Some(thread),
            cleanup: Some(path.to_path_buf()),
            wake: Wake::Unix(path.to_path_buf()),
        })
    }

    /// Serves `board` as Prometheus text over HTTP on `addr` (meant for
    /// localhost: there is no authentication).
    pub fn prometheus(addr: SocketAddr, board: StatusBoard) -> Result<StatusServer, ServeError> {
        let io_err = |source| ServeError::Io {
            what: addr.to_string(),
            source,
        };
        let listener = TcpListener::bind(addr).map_err(io_err)?;
        let local = listener.local_addr().map_err(io_err)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("edgerec-prom".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if flag.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(mut s) = conn else { continue };
                    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                    let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                    // The request line is enough: every path gets the
                    // metrics.
                    let mut request = [0u8; 1024];
                    let _ = s.read(&mut request);
                    let body = board.prometheus();
                    let head = format!(
                        "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = s
                        .write_all(head.as_bytes())
                        .and_then(|_| s.write_all(body.as_bytes()));
                }
            })
            .map_err(io_err)?;
        Ok(StatusServer {
            stop,
            thread: Some(thread),
            cleanup: None,
            wake: Wake::Tcp(local),
        })
    }

    /// The TCP address actually bound (port 0 picks one), for a Prometheus
    /// server.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self.wake {
            Wake::Tcp(a) => Some(a),
            Wake::Unix(_) => None,
        }
    }
}

impl Drop for StatusServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the blocking accept with a connection of our own.
        match &self.wake {
            Wake::Unix(p) => drop(UnixStream::connect(p)),
            Wake::Tcp(a) => drop(std::net::TcpStream::connect_timeout(
                a,
                Duration::from_secs(1),
            )),
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(p) = self.cleanup.take() {
            remove_socket(&p);
        }
    }
}

/// Reads the status JSON from the socket at `path`.
pub fn fetch(path: &Path, timeout: Duration) -> io::Result<String> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(timeout))?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    Ok(text)
}

/// The status JSON as the lines `edgerec status` prints: state and
/// reasons, clock, storage, session, sources (state, restarts, last
/// error), channels, metrics with their origins, stages and the watchdog. Works from the JSON alone, so an older or
/// newer recorder's snapshot still prints what both know.
pub fn render_text(v: &Value) -> String {
    let s = |p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("-")
            .to_owned()
    };
    let n = |p: &str| v.pointer(p).and_then(Value::as_f64);
    let u = |p: &str| v.pointer(p).and_then(Value::as_u64);
    let mut out = String::new();
    let mut line = |l: String| {
        out.push_str(&l);
        out.push('\n');
    };
    let reasons: Vec<&str> = v
        .get("reasons")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    line(format!(
        "state:     {}{} (edgerec {}, up {:.0} s)",
        s("/state"),
        if reasons.is_empty() {
            String::new()
        } else {
            format!(": {}", reasons.join("; "))
        },
        s("/version"),
        n("/uptime_s").unwrap_or(0.0)
    ));
    if let Some(p) = v.get("pause").filter(|p| !p.is_null()) {
        let since = p.get("since_unix_ns").and_then(Value::as_u64).unwrap_or(0);
        let ago = u("/time_unix_ns").unwrap_or(since).saturating_sub(since) / 1_000_000_000;
        line(format!(
            "paused:    by {}, {ago} s ago: nothing is written until `edgerec ctl resume`",
            p.get("by").and_then(Value::as_str).unwrap_or("-"),
        ));
    }
    if let Some(f) = v.get("last_fault").filter(|f| !f.is_null()) {
        line(format!(
            "last fault: {} (stage {}, silent {} ms)",
            f.get("message").and_then(Value::as_str).unwrap_or("-"),
            f.get("stage").and_then(Value::as_str).unwrap_or("-"),
            f.get("silent_for_ms").and_then(Value::as_u64).unwrap_or(0)
        ));
    }
    match v.get("clock").filter(|c| !c.is_null()) {
        Some(c) => {
            let cs = |p: &str| {
                c.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or("-")
                    .to_owned()
            };
            let offset = c
                .get("last_offset_ns")
                .and_then(Value::as_i64)
                .map(|o| format!("offset {o} ns ({})", cs("/offset_origin")))
                .unwrap_or_else(|| "no offset measured".to_owned());
            line(format!(
                "clock:     {}, {} ({}); {}{}",
                cs("/source"),
                cs("/state"),
                cs("/reason"),
                offset,
                if c.get("unlocked").and_then(Value::as_bool) == Some(true) {
                    "; data flagged unlocked"
                } else {
                    ""
                }
            ));
            if let Some(e) = c.get("ptp4l_error").and_then(Value::as_str) {
                line(format!("           ptp4l: {e}"));
            }
            if let Some(p) = c.get("ptp4l").filter(|p| !p.is_null()) {
                let ps = |k: &str| p.get(k).map(|x| x.to_string().trim_matches('"').to_owned());
                line(format!(
                    "           ptp4l: port {}, master offset {} ns, path delay {} ns, grandmaster {} (present {})",
                    ps("port_state").unwrap_or_default(),
                    ps("master_offset_ns").unwrap_or_default(),
                    ps("mean_path_delay_ns").unwrap_or_default(),
                    ps("gm_identity").unwrap_or_default(),
                    ps("gm_present").unwrap_or_default()
                ));
            }
        }
        None => line("clock:     (no clock monitor)".to_owned()),
    }
    let gib = |b: Option<u64>| {
        b.map(|b| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64))
            .unwrap_or_else(|| "-".to_owned())
    };
    line(format!(
        "storage:   {}, {:.1} MB/s, {:.1} MB written, durable lag {:.1} MB, free {} of {}{}",
        s("/storage/backend"),
        n("/storage/write_mb_s").unwrap_or(0.0),
        u("/storage/bytes_written").unwrap_or(0) as f64 / 1e6,
        u("/storage/durable_lag_bytes").unwrap_or(0) as f64 / 1e6,
        gib(u("/storage/free_bytes")),
        gib(u("/storage/total_bytes")),
        v.pointer("/storage/fallback_reason")
            .and_then(Value::as_str)
            .map(|r| format!(" (fallback: {r})"))
            .unwrap_or_default()
    ));
    if let Some(rt) = v.pointer("/storage/realtime").filter(|r| !r.is_null()) {
        let names = |k: &str| {
            rt.get(k)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|e| {
                            let name = e.get(0)?.as_str()?;
                            Some(match e.get(1)?.as_u64()? {
                                1 => name.to_owned(),
                                n => format!("{name} x{n}"),
                            })
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default()
        };
        let prio = rt.get("priority").and_then(Value::as_u64).unwrap_or(0);
        let (fifo, other) = (names("fifo"), names("other"));
        line(if other.is_empty() {
            format!("realtime:  SCHED_FIFO {prio} on {fifo}")
        } else {
            format!(
                "realtime:  SCHED_FIFO {prio} asked for; at normal priority: {other} (refused: see the log){}",
                if fifo.is_empty() { String::new() } else { format!("; SCHED_FIFO on {fifo}") }
            )
        });
    }
    if v.get("session").is_some_and(|x| !x.is_null()) {
        line(format!("session:   {}", s("/session/dir")));
        line(format!("segment:   {}", s("/session/segment")));
    }
    let sources = v.get("sources").and_then(Value::as_array);
    line(format!(
        "sources:   {}",
        sources.map(|a| a.len()).unwrap_or(0)
    ));
    for src in sources.into_iter().flatten() {
        let g = |k: &str| src.get(k);
        line(format!(
            "  {:<28} {:<10} restarts {:>4}{}",
            g("name").and_then(Value::as_str).unwrap_or("-"),
            g("state").and_then(Value::as_str).unwrap_or("-"),
            g("restarts").and_then(Value::as_u64).unwrap_or(0),
            g("last_error")
                .and_then(Value::as_str)
                .map(|e| format!("  last error: {e}"))
                .unwrap_or_default()
        ));
    }
    let channels = v.get("channels").and_then(Value::as_array);
    line(format!(
        "channels:  {}{}",
        channels.map(|a| a.len()).unwrap_or(0),
        match u("/unknown_channel_pushes") {
            Some(n) if n > 0 => format!(" ({n} pushes to unknown channel ids refused)"),
            _ => String::new(),
        }
    ));
    for ch in channels.into_iter().flatten() {
        let g = |k: &str| ch.get(k);
        line(format!(
            "  {:<28} {:>9.1} Hz {:>8.2} MB/s  written {:>9}  dropped {:>6}  lost {:>4}  upstream {:>4}  {}",
            g("topic").and_then(Value::as_str).unwrap_or("-"),
            g("rate_hz").and_then(Value::as_f64).unwrap_or(0.0),
            g("mb_s").and_then(Value::as_f64).unwrap_or(0.0),
            g("written").and_then(Value::as_u64).unwrap_or(0),
            g("dropped").and_then(Value::as_u64).unwrap_or(0),
            g("lost").and_then(Value::as_u64).unwrap_or(0),
            g("upstream_lost").and_then(Value::as_u64).unwrap_or(0),
            g("type_name").and_then(Value::as_str).unwrap_or("")
        ));
    }
    let metrics = v.get("metrics").and_then(Value::as_array);
    line(format!(
        "metrics:   {}",
        metrics.map(|a| a.len()).unwrap_or(0)
    ));
    for m in metrics.into_iter().flatten() {
        line(format!(
            "  {:<28} {:>14.1} {:<8} {}",
            m.get("name").and_then(Value::as_str).unwrap_or("-"),
            m.get("value").and_then(Value::as_f64).unwrap_or(f64::NAN),
            m.get("unit").and_then(Value::as_str).unwrap_or(""),
            m.get("origin").and_then(Value::as_str).unwrap_or("")
        ));
    }
    for ms in v
        .get("metric_sources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        line(format!(
            "  source of {:<18} {}",
            ms.get("family").and_then(Value::as_str).unwrap_or("-"),
            ms.get("origin").and_then(Value::as_str).unwrap_or("-")
        ));
    }
    let stages = v.get("stages").and_then(Value::as_array);
    let listed: Vec<String> = stages
        .into_iter()
        .flatten()
        .map(|st| {
            format!(
                "{} {} ms{}",
                st.get("name").and_then(Value::as_str).unwrap_or("-"),
                st.get("age_ms").and_then(Value::as_u64).unwrap_or(0),
                if st.get("stalled").and_then(Value::as_bool) == Some(true) {
                    " STALLED"
                } else {
                    ""
                }
            )
        })
        .collect();
    line(format!("stages:    {}", listed.join(", ")));
    match v.get("watchdog").filter(|w| !w.is_null()) {
        Some(w) => line(format!(
            "watchdog:  {}, timeout {} s, {} pings; systemd {}",
            w.get("device")
                .and_then(Value::as_str)
                .unwrap_or("no hardware watchdog"),
            w.get("timeout_s")
                .and_then(Value::as_u64)
                .map(|t| t.to_string())
                .unwrap_or_else(|| "-".to_owned()),
            w.get("pings").and_then(Value::as_u64).unwrap_or(0),
            w.get("systemd_interval_ms")
                .and_then(Value::as_u64)
                .map(|ms| format!("every {ms} ms"))
                .unwrap_or_else(|| "not watching".to_owned())
        )),
        None => line("watchdog:  off".to_owned()),
    }
    if let Some(r) = v.get("ros").filter(|r| !r.is_null()) {
        let refused: Vec<String> = r
            .get("refused")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, n)| n.as_u64().filter(|n| *n > 0).map(|n| format!("{k} {n}")))
            .collect();
        let missing: Vec<&str> = r
            .get("missing")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        line(format!(
            "ros:       refused from the graph: {}; listed, not offered yet: {}",
            if refused.is_empty() {
                "none".to_owned()
            } else {
                refused.join(", ")
            },
            if missing.is_empty() {
                "none".to_owned()
            } else {
                missing.join(", ")
            }
        ));
    }
    if let Some(c) = v.get("controls").filter(|c| !c.is_null()) {
        let by: Vec<String> = c
            .get("refused_by")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, n)| n.as_u64().map(|n| format!("{k} {n}")))
            .collect();
        if !by.is_empty() {
            line(format!(
                "controls:  refused over the rate limit ({} a second, {} at once): {}",
                c.get("rate_per_second")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                c.get("burst").and_then(Value::as_u64).unwrap_or(0),
                by.join(", ")
            ));
        }
    }
    if let Some(r) = v.get("remote").filter(|r| !r.is_null()) {
        match serde_json::from_value::<RemoteView>(r.clone()) {
            Ok(r) => line(format!("remote:    {}", remote_line(&r))),
            Err(_) => line("remote:    (unreadable)".to_owned()),
        }
    }
    if let Some(o) = v.get("offload").filter(|o| !o.is_null()) {
        let n = |k: &str| o.get(k).and_then(Value::as_u64).unwrap_or(0);
        let queue: Vec<String> = o
            .get("queue")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| {
                format!(
                    "{} {} ({:.1} MB, oldest {:.0} s)",
                    c.get("class").and_then(Value::as_str).unwrap_or(""),
                    c.get("files").and_then(Value::as_u64).unwrap_or(0),
                    c.get("bytes").and_then(Value::as_u64).unwrap_or(0) as f64 / 1e6,
                    c.get("oldest_s").and_then(Value::as_f64).unwrap_or(0.0)
                )
            })
            .collect();
        line(format!(
            "offload:   link {}; {:.1} MB/s{}; sent {} files ({:.1} MB), {} clips; waiting: {}",
            o.get("link").and_then(Value::as_str).unwrap_or(""),
            n("rate_bytes_per_s") as f64 / 1e6,
            match n("max_rate_bytes_per_s") {
                0 => String::new(),
                m => format!(" (cap {:.1})", m as f64 / 1e6),
            },
            n("sent_files"),
            n("sent_bytes") as f64 / 1e6,
            n("clips"),
            queue.join(", ")
        ));
        if n("deleted_unsent") > 0 {
            line(format!(
                "  {} segments or clips were deleted before they were sent (retention)",
                n("deleted_unsent")
            ));
        }
        if let Some(e) = o.get("last_error").and_then(Value::as_str) {
            line(format!("  last error: {e}"));
        }
    }
    if let Some(e) = v.get("events").filter(|e| !e.is_null()) {
        let f = |k: &str| e.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        line(format!(
            "events:    {} clips; pre-roll {:.1} of {:.1} s kept ({} MiB of {} MiB){}",
            e.get("clips").and_then(Value::as_u64).unwrap_or(0),
            f("preroll_kept_s"),
            f("preroll_asked_s"),
            e.get("preroll_held_bytes")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                >> 20,
            e.get("preroll_budget_bytes")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                >> 20,
            e.get("open_clip")
                .and_then(Value::as_str)
                .map(|c| format!("; writing {c}"))
                .unwrap_or_default()
        ));
        if let Some(s) = e.get("preroll_shortfall").and_then(Value::as_str) {
            line(format!("  {s}"));
        }
        let n = |k: &str| e.get(k).and_then(Value::as_u64).unwrap_or(0);
        line(format!(
            "  clips take {} MiB of their {} MiB disk budget{}{}",
            n("clip_budget_used_bytes") >> 20,
            n("clip_budget_bytes") >> 20,
            match (n("clip_budget_refused"), n("clip_budget_cut")) {
                (0, 0) => String::new(),
                (r, c) => format!(
                    "; spent: {r} events got no clip, {c} clips ended early (triggers.disk_budget)"
                ),
            },
            match n("events_over_cap") {
                0 => String::new(),
                k => format!("; {k} events past a clip's 256 not listed"),
            }
        ));
        for ev in e
            .get("recent")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let s = |k: &str| ev.get(k).and_then(Value::as_str).unwrap_or("");
            line(format!(
                "  event {} {}{}: {}",
                s("rule"),
                s("reason"),
                if s("values").is_empty() {
                    String::new()
                } else {
                    format!(" ({})", s("values"))
                },
                s("clip")
            ));
        }
        for (rule, why) in e
            .get("rule_errors")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            line(format!(
                "  rule {rule} is off: {}",
                why.as_str().unwrap_or("")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgerec_clock::ClockState;

    fn snapshot() -> StatusSnapshot {
        StatusSnapshot {
            schema: SCHEMA,
            version: "0.1.0".into(),
            time_unix_ns: 1,
            uptime_s: 12.0,
            state: HealthState::Degraded,
            reasons: vec!["drops rising on /cam \"front\"".into()],
            clock: Some(ClockStatus {
                source: "realtime".into(),
                device: None,
                state: ClockState::Unlocked,
                since_ns: 0,
                reason: "offset 5 us above 1 us".into(),
                unlocked: true,
                last_offset_ns: Some(5000),
                offset_origin: Some("ptp4l master_offset".into()),
                phc_device: None,
                phc_offset: None,
                phc_error: None,
                ptp4l: None,
                ptp4l_error: None,
                tai_offset_s: None,
                tai_note: None,
                polls: 3,
            }),
            storage: StorageStatus {
                backend: "io_uring+O_DIRECT".into(),
                write_mb_s: 41.5,
                bytes_written: 1_000_000,
                free_bytes: Some(1 << 30),
                total_bytes: Some(4 << 30),
                ..StorageStatus::default()
            },
            session: Some(SessionStatus {
                dir: "/data/s".into(),
                segment: "/data/s/s_0.mcap.active".into(),
            }),
            sources: vec![SourceStatus {
                name: "camera front".into(),
                state: "restarting".into(),
                restarts: 3,
                last_error: Some("panicked: boom".into()),
            }],
            channels: vec![ChannelStatus {
                topic: "/cam \"front\"".into(),
                type_name: "sensor_msgs/msg/Image".into(),
                rate_hz: 30.0,
                dropped: 2,
                upstream_lost: 3,
                ..ChannelStatus::default()
            }],
            unknown_channel_pushes: 0,
            metrics: vec![Metric {
                name: "cpu.load".into(),
                value: 12.5,
                unit: "percent",
                origin: "/proc/stat".into(),
            }],
            metric_sources: vec![],
            stages: vec![],
            watchdog: None,
            leds: None,
            last_fault: None,
            events: None,
            ros: None,
            controls: None,
            offload: None,
            remote: None,
            pause: None,
        }
    }

    #[test]
    fn diagnostics_have_levels_and_values() {
        let d = snapshot().diagnostics();
        let names: Vec<&str> = d.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "edgerec: recorder",
                "edgerec: clock",
                "edgerec: storage",
                "edgerec: source camera front",
                "edgerec: topic /cam \"front\"",
                "edgerec: metrics"
            ]
        );
        assert_eq!(d[0].level, level::WARN);
        assert_eq!(d[0].message, "degraded: drops rising on /cam \"front\"");
        assert_eq!(d[1].level, level::WARN);
        assert!(d[1]
            .values
            .contains(&("last_offset_ns".to_owned(), "5000".to_owned())));
        assert_eq!(d[2].level, level::OK);
        assert_eq!(d[2].message, "io_uring+O_DIRECT at 41.5 MB/s");
        assert_eq!(d[3].level, level::WARN);
        assert_eq!(
            d[3].message,
            "restarting, 3 restarts; last error: panicked: boom"
        );
        assert_eq!(d[4].level, level::WARN);
        assert_eq!(
            d[5].values,
            vec![(
                "cpu.load".to_owned(),
                "12.5 percent (/proc/stat)".to_owned()
            )]
        );
    }

    #[test]
    fn prometheus_text_escapes_labels() {
        let p = snapshot().prometheus();
        assert!(p.contains("edgerec_state{state=\"degraded\"} 1\n"), "{p}");
        assert!(p.contains("edgerec_state{state=\"recording\"} 0\n"));
        assert!(
            p.contains("edgerec_topic_dropped{topic=\"/cam \\\"front\\\"\"} 2\n"),
            "{p}"
        );
        assert!(
            p.contains("edgerec_topic_upstream_lost{topic=\"/cam \\\"front\\\"\"} 3\n"),
            "{p}"
        );
        assert!(p.contains("edgerec_clock_offset_ns 5000\n"));
        assert!(
            p.contains("edgerec_source_restarts{source=\"camera front\"} 3\n"),
            "{p}"
        );
        assert!(
            p.contains("edgerec_source_running{source=\"camera front\"} 0\n"),
            "{p}"
        );
        assert!(p.contains("# TYPE edgerec_metric gauge\n"));
    }

    #[test]
    fn socket_serves_booting_then_the_snapshot_and_replaces_a_stale_file() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("run/edgerec.sock");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        // A socket file left by a crash: nobody listens on it.
        drop(UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let board = StatusBoard::new();
        let server = StatusServer::unix(&path, board.clone(), None).unwrap();
        let first: Value =
            serde_json::from_str(&fetch(&path, Duration::from_secs(2)).unwrap()).unwrap();
        assert_eq!(first["state"], "booting");
        board.publish(&snapshot());
        let v: Value =
            serde_json::from_str(&fetch(&path, Duration::from_secs(2)).unwrap()).unwrap();
        assert_eq!(v["state"], "degraded");
        assert_eq!(v["clock"]["state"], "unlocked");
        // A second server on a live socket is refused, naming the path.
        let err = StatusServer::unix(&path, StatusBoard::new(), None)
            .err()
            .unwrap();
        assert!(matches!(err, ServeError::InUse { .. }), "{err}");
        drop(server);
        assert!(!path.exists(), "the socket file is removed on stop");
    }

    #[test]
    fn what_is_not_a_socket_at_the_path_is_refused_and_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("shadow");
        std::fs::write(&victim, b"keep").unwrap();
        let file = d.path().join("file.sock");
        std::fs::write(&file, b"data").unwrap();
        let link = d.path().join("link.sock");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let dir = d.path().join("dir.sock");
        std::fs::create_dir(&dir).unwrap();
        for (path, kind) in [
            (&file, "a regular file"),
            (&link, "a symbolic link"),
            (&dir, "a directory"),
        ] {
            let err = StatusServer::unix(path, StatusBoard::new(), None)
                .err()
                .unwrap();
            assert!(matches!(err, ServeError::NotASocket { .. }), "{err}");
            let text = err.to_string();
            assert!(
                text.contains(kind) && text.contains("move it away"),
                "{text}"
            );
        }
        assert_eq!(std::fs::read(&file).unwrap(), b"data");
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(dir.is_dir());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    }

    #[test]
    fn text_names_what_the_operator_asks() {
        let v = serde_json::to_value(snapshot()).unwrap();
        let t = render_text(&v);
        assert!(
            t.starts_with("state:     degraded: drops rising on /cam \"front\""),
            "{t}"
        );
        assert!(t.contains("clock:     realtime, unlocked (offset 5 us above 1 us); offset 5000 ns (ptp4l master_offset); data flagged unlocked"), "{t}");
        assert!(t.contains("storage:   io_uring+O_DIRECT, 41.5 MB/s"), "{t}");
        assert!(!t.contains("realtime:"), "no line when it is off: {t}");
        assert!(t.contains("cpu.load"), "{t}");
        assert!(
            t.contains("  camera front                 restarting restarts    3  last error: panicked: boom\n"),
            "{t}"
        );
        assert!(t.contains("channels:  1\n"), "{t}");
        assert!(t.contains("/proc/stat"), "{t}");
        assert!(t.contains("watchdog:  off"), "{t}");
        // The booting answer renders too.
        let b: Value = serde_json::from_str(BOOTING).unwrap();
        assert!(render_text(&b).starts_with("state:     booting: starting"));
    }

    #[test]
    fn a_pause_says_who_in_the_text_the_json_and_the_diagnostics() {
        let mut snap = snapshot();
        snap.state = HealthState::Paused;
        snap.reasons = vec!["paused by uid 1000 (pid 42)".into()];
        snap.time_unix_ns = 1_765_000_000_000_000_000;
        snap.pause = Some(PauseStatus {
            by: "uid 1000 (pid 42)".into(),
            since_unix_ns: snap.time_unix_ns - 90_000_000_000,
        });
        let v = serde_json::to_value(&snap).unwrap();
        assert_eq!(v["state"], "paused");
        assert_eq!(v["pause"]["by"], "uid 1000 (pid 42)");
        let t = render_text(&v);
        assert!(
            t.starts_with("state:     paused: paused by uid 1000 (pid 42)"),
            "{t}"
        );
        assert!(
            t.contains("paused:    by uid 1000 (pid 42), 90 s ago: nothing is written until `edgerec ctl resume`\n"),
            "{t}"
        );
        let rec = snap
            .diagnostics()
            .into_iter()
            .find(|d| d.name == "edgerec: recorder")
            .expect("recorder diagnostic");
        assert_eq!(rec.level, level::WARN);
        assert!(
            rec.message.contains("paused by uid 1000"),
            "{}",
            rec.message
        );
        assert!(rec
            .values
            .contains(&("paused_by".to_owned(), "uid 1000 (pid 42)".to_owned())));
        // Recording: no pause, no line.
        snap.pause = None;
        snap.state = HealthState::Degraded;
        let t = render_text(&serde_json::to_value(&snap).unwrap());
        assert!(!t.contains("\npaused:"), "{t}");
    }

    #[test]
    fn realtime_scheduling_shows_what_the_kernel_gives() {
        let mut snap = snapshot();
        snap.storage.realtime = Some(RealtimeStatus {
            priority: 10,
            fifo: vec![
                ("edgerec-io".into(), 1),
                ("edgerec-seq".into(), 1),
                ("iou-wrk".into(), 3),
            ],
            other: vec![],
        });
        let t = render_text(&serde_json::to_value(&snap).unwrap());
        assert!(
            t.contains("realtime:  SCHED_FIFO 10 on edgerec-io, edgerec-seq, iou-wrk x3\n"),
            "{t}"
        );
        let storage = |s: &StatusSnapshot| {
            s.diagnostics()
                .into_iter()
                .find(|d| d.name == "edgerec: storage")
                .expect("storage diagnostic")
        };
        assert_eq!(storage(&snap).level, level::OK);

        // Refused (no CAP_SYS_NICE): said in the text and the diagnostic.
        snap.storage.realtime = Some(RealtimeStatus {
            priority: 10,
            fifo: vec![],
            other: vec![("edgerec-io".into(), 1), ("edgerec-seq".into(), 1)],
        });
        let t = render_text(&serde_json::to_value(&snap).unwrap());
        assert!(
            t.contains("realtime:  SCHED_FIFO 10 asked for; at normal priority: edgerec-io, edgerec-seq (refused: see the log)\n"),
            "{t}"
        );
        let d = storage(&snap);
        assert_eq!(d.level, level::WARN);
        assert!(
            d.message
                .ends_with("SCHED_FIFO refused for storage threads"),
            "{}",
            d.message
        );
    }

    #[test]
    fn prometheus_endpoint_answers_http() {
        let board = StatusBoard::new();
        board.publish(&snapshot());
        let server = StatusServer::prometheus("127.0.0.1:0".parse().unwrap(), board).unwrap();
        let addr = server.local_addr().unwrap();
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).unwrap();
        assert!(body.starts_with("HTTP/1.0 200 OK\r\n"), "{body}");
        assert!(body.contains("Content-Type: text/plain; version=0.0.4"));
        assert!(body.contains("edgerec_uptime_seconds 12"));
    }
}
