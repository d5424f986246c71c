//! Starting and stopping a recording: the session, the first segment,
//! every stage and the source supervisor; the status while it runs; the
//! report when it ends.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use edgerec_format::chunk::ChunkCompressor;
use edgerec_health::status::PauseStatus;
use edgerec_source::{
    Intake, MemoryBudget, RecordingClock, Source, Supervisor, SupervisorView, SystemClock,
};

use crate::chunker::{ChunkLimits, Chunker};
use crate::closer::{CloseJob, Closer, CloserOutput};
use crate::compressor::Sealed;
use crate::counters::PipelineCounters;
use crate::events::lane::Lane;
use crate::events::plan::EVENTS_TOPIC;
use crate::events::rules::Rules;
use crate::events::stage::EventsStage;
use crate::events::EventsStatus;
use crate::segment::{ClosedSegment, Session};
use crate::sequencer::{Sequencer, SequencerOutput, SequencerState, MAX_CHUNKS_IN_FLIGHT};
use crate::stage::{spawn_stage, StageBeat, StageHandle, Stages, Stuck, WorkQueue};
use crate::status::{ChannelStatus, RecorderState, RecorderStatus};
use crate::{RecorderError, RecorderOptions};

/// Width of the bins of [`RecordingReport::bytes_per_bin`]: fine enough
/// to place a split inside a second and compare it with its neighbours.
pub const THROUGHPUT_BIN: Duration = Duration::from_millis(100);

/// Memory the reserve keeps for the channels' guaranteed shares: a
/// quarter of what the chunk buffer pool leaves (see
/// `edgerec_source::budget`).
const RESERVE_FRACTION: u64 = 4;

/// What a finished recording produced.
#[derive(Debug, Clone)]
pub struct RecordingReport {
    /// The bag directory.
    pub session_dir: PathBuf,
    /// Closed segments.
    pub segments: Vec<ClosedSegment>,
    /// The final status.
    pub status: RecorderStatus,
    /// Bytes handed to storage in each [`THROUGHPUT_BIN`] since the start
    /// (the last one partial): how a split shows in the throughput.
    pub bytes_per_bin: Vec<u64>,
    /// Seconds since the start at which segments were split.
    pub split_at_seconds: Vec<f64>,
    /// Storage failures during the recording (the segment was closed at
    /// its last good chunk and recovered; recording went on in a new one).
    pub storage_errors: Vec<String>,
}

/// A running recording.
pub struct Recorder {
    supervisor: Option<Supervisor>,
    chunker: Option<StageHandle<()>>,
    compressors: Vec<StageHandle<()>>,
    sequencer: Option<StageHandle<SequencerOutput>>,
    closer: Option<StageHandle<CloserOutput>>,
    events: Option<StageHandle<()>>,
    status: StatusHandle,
    deadline: Duration,
}

/// The events stage as the status handle sees it.
#[derive(Clone)]
struct EventsHandle {
    lane: Arc<Lane>,
    status: Arc<Mutex<EventsStatus>>,
}

/// Reads a recorder's status from any thread, for as long as it is held.
#[derive(Clone)]
pub struct StatusHandle {
    intake: Arc<Intake>,
    counters: Arc<PipelineCounters>,
    stages: Arc<Stages>,
    sources: SupervisorView,
    session_dir: PathBuf,
    backend: String,
    fallback_reason: Option<String>,
    started: Instant,
    events: Option<EventsHandle>,
    /// The operator's pause, set with the intake's hold.
    pause: Arc<Mutex<Option<PauseStatus>>>,
}

impl std::fmt::Debug for StatusHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusHandle")
            .field("session_dir", &self.session_dir)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl StatusHandle {
    /// Pauses recording (the operator's `pause`, `who` asked): sources
    /// keep running and their messages are let go, not counted as drops;
    /// the open segment stays open. The status shows who paused and
    /// since when. Idempotent: a second pause keeps the first's mark.
    pub fn pause(&self, who: &str) {
        let mut mark = lock(&self.pause);
        if mark.is_none() {
            tracing::info!("recording paused by {who}");
            *mark = Some(PauseStatus {
                by: who.to_owned(),
                since_unix_ns: SystemClock.now_ns(),
            });
        }
        self.intake.set_held(true);
    }

    /// Resumes after [`pause`](Self::pause) (`who` asked). Idempotent.
    pub fn resume(&self, who: &str) {
        let mut mark = lock(&self.pause);
        if let Some(m) = mark.take() {
            tracing::info!("recording resumed by {who} (paused by {} before)", m.by);
        }
        self.intake.set_held(false);
    }

    /// True while paused by the operator.
    pub fn is_paused(&self) -> bool {
        self.intake.is_held()
    }

    /// Closes the open segment and opens the next as soon as it holds a
    /// chunk of new data (at once when it does).
    pub fn split(&self) {
        self.counters.split_requested.store(true, Ordering::Relaxed);
    }

    /// Asks for an event clip now (`edgerec ctl trigger`): `name` names
    /// the clip (empty = `ctl`), `reason` goes into its metadata. False
    /// when the recording makes no clips (`continuous` mode) or has ended.
    pub fn trigger(&self, name: &str, reason: &str) -> bool {
        self.trigger_window(name, reason, None, None)
    }

    /// [`trigger`](Self::trigger) whose clip keeps `pre` before the event
    /// (at most what the pre-roll ring holds) and `post` after it; `None`
    /// takes the rule's (or `[triggers]`') value.
    pub fn trigger_window(
        &self,
        name: &str,
        reason: &str,
        pre: Option<std::time::Duration>,
        post: Option<std::time::Duration>,
    ) -> bool {
        let ns = |d: std::time::Duration| d.as_nanos().min(u128::from(u64::MAX)) as u64;
        match &self.events {
            Some(e) if !e.lane.is_closed() => e.lane.trigger(
                name.to_owned(),
                reason.to_owned(),
                pre.map(ns),
                post.map(ns),
            ),
            _ => false,
        }
    }

    /// The events stage's status; `None` in `continuous` mode.
    pub fn events(&self) -> Option<EventsStatus> {
        self.events.as_ref().map(|e| {
            let mut s = lock(&e.status).clone();
            s.lane_dropped = e.lane.refused();
            s
        })
    }

    /// The status now.
    pub fn snapshot(&self) -> RecorderStatus {
        let fault = lock(&self.counters.fault).clone();
        let disk_full = lock(&self.counters.disk_full).clone();
        let stage_died = self.stages.death();
        let state = if fault.is_some() || stage_died.is_some() {
            RecorderState::Fault
        } else if disk_full.is_some() {
            RecorderState::DiskFull
        } else if self.counters.stopping.load(Ordering::Relaxed) {
            RecorderState::Stopping
        } else {
            RecorderState::Recording
        };
        let budget = self.intake.budget();
        RecorderStatus {
            state,
            backend: self.backend.clone(),
            fallback_reason: self.fallback_reason.clone(),
            session_dir: self.session_dir.clone(),
            segment: lock(&self.counters.segment).clone(),
            elapsed: self.started.elapsed(),
            bytes_written: self.counters.bytes_written.load(Ordering::Relaxed),
            durable_bytes: self.counters.durable_bytes.load(Ordering::Relaxed),
            segment_bytes: self.counters.segment_bytes.load(Ordering::Relaxed),
            chunks_written: self.counters.chunks_written.load(Ordering::Relaxed),
            messages_written: self.counters.messages_written.load(Ordering::Relaxed),
            budget_used: budget.used(),
            budget_peak: budget.peak(),
            budget_limit: budget.limit(),
            fault: fault.or_else(|| {
                stage_died
                    .as_ref()
                    .map(|d| format!("stage {} died: {}", d.stage, d.message))
            }),
            disk_full,
            paused: lock(&self.pause).clone(),
            deleted_unsent: self.counters.deleted_unsent.load(Ordering::Relaxed),
            deleted_sent: self.counters.deleted_sent.load(Ordering::Relaxed),
            channels: self
                .intake
                .table()
                .all()
                .iter()
                .map(|c| ChannelStatus {
                    topic: c.spec.topic.clone(),
                    type_name: c.spec.type_name.clone(),
                    accepted: c.counters.accepted.load(Ordering::Relaxed),
                    dropped: c.counters.dropped.load(Ordering::Relaxed),
                    lost: c.counters.lost.load(Ordering::Relaxed),
                    upstream_lost: c.counters.upstream_lost.load(Ordering::Relaxed),
                    written: c.counters.written.load(Ordering::Relaxed),
                    bytes: c.counters.bytes.load(Ordering::Relaxed),
                })
                .collect(),
            sources: self.sources.status(),
            unknown_channel_pushes: self.intake.table().unknown_channel_pushes(),
            stage_died,
            events: self.events(),
        }
    }
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("session_dir", &self.status.session_dir)
            .field("backend", &self.status.backend)
            .finish()
    }
}

impl Recorder {
    /// Creates the session, opens the first segment and starts every
    /// stage, then the sources. Errors here (a root that cannot be
    /// created, a storage backend that is refused) happen before any
    /// source runs.
    pub fn start(
        opts: RecorderOptions,
        sources: Vec<Box<dyn Source>>,
        clock: Arc<dyn RecordingClock>,
    ) -> Result<Self, RecorderError> {
        if opts.chunk_size == 0 {
            return Err(RecorderError::ZeroOption {
                option: "chunk_size",
            });
        }
        if opts.queue_capacity == 0 {
            return Err(RecorderError::ZeroOption {
                option: "queue_capacity",
            });
        }
        // The chunk buffer pool: at most half the budget, charged for good.
        let buf_cap = opts.chunk_size + opts.chunk_size / 4;
        let pool = ((opts.memory_budget / 2) as usize / buf_cap).clamp(3, MAX_CHUNKS_IN_FLIGHT + 2);
        let pool_bytes = (pool * buf_cap) as u64;
        let reserve = opts.memory_budget.saturating_sub(pool_bytes) / RESERVE_FRACTION;
        let intake = Intake::new(
            opts.queue_capacity,
            MemoryBudget::with_reserve(opts.memory_budget, reserve),
            clock.clone(),
        );
        intake.budget().force_reserve(pool_bytes);

        let mut session = match &opts.session_dir {
            Some(dir) => Session::create_at(
                dir,
                opts.metadata_version,
                opts.storage.clone(),
                opts.library.clone(),
            )?,
            None => Session::create(
                &opts.root,
                &opts.session_prefix,
                clock.now_ns(),
                opts.metadata_version,
                opts.storage.clone(),
                opts.library.clone(),
            )?,
        };
        let segment = match session.open_segment(&intake.table().all()) {
            Ok(s) => s,
            Err(e) => {
                // Nothing was recorded: leave no empty session behind.
                let _ = std::fs::remove_dir(session.dir());
                return Err(e);
            }
        };
        let backend = segment.backend().to_string();
        let fallback_reason = segment.fallback_reason();
        let session_dir = session.dir().to_path_buf();
        let counters = Arc::new(PipelineCounters::new());
        *lock(&counters.segment) = segment.active_path().to_path_buf();
        tracing::info!(
            "recording into {} with {} (chunks of {} B, compression {}, memory budget {} MiB of which {} MiB reserved for the channels' shares)",
            session_dir.display(),
            backend,
            opts.chunk_size,
            opts.compression.display_name(),
            opts.memory_budget >> 20,
            reserve >> 20,
        );
        if let Some(r) = &fallback_reason {
            tracing::warn!("storage fell back to {backend}: {r}");
        }

        let stages = Arc::new(Stages::default());
        let watch = &opts.watch;
        let threads = if opts.compressor_threads == 0 {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
        } else {
            opts.compressor_threads
        };
        let jobs = Arc::new(WorkQueue::new());
        let (sealed_tx, sealed_rx) = mpsc::channel::<Sealed>();
        let (recycle_tx, recycle_rx) = mpsc::sync_channel::<Vec<u8>>(pool);
        let (close_tx, close_rx) = mpsc::channel::<CloseJob>();
        let (closed_tx, closed_rx) = mpsc::channel::<(PathBuf, u64)>();
        let session = Arc::new(Mutex::new(session));

        // Everything that can fail without a thread comes first; once the
        // first stage runs, a failure to start another stops those started
        // (the guard aborts them) instead of leaving them beating forever.
        let comps = (0..threads)
            .map(|i| {
                ChunkCompressor::new(opts.compression).map_err(|e| RecorderError::Compressor {
                    name: format!("compressor {i}"),
                    source: e,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let rules = match &opts.triggers {
            Some(plan) => Some(Rules::new(&plan.rules).map_err(RecorderError::Trigger)?),
            None => None,
        };
        let guard = AbortOnDrop(Some((stages.clone(), intake.clone())));
        let mut compressors = Vec::new();
        for (i, mut comp) in comps.into_iter().enumerate() {
            let name = format!("compressor {i}");
            let (jobs, tx, intake, st, w) = (
                jobs.clone(),
                sealed_tx.clone(),
                intake.clone(),
                stages.clone(),
                watch.clone(),
            );
            compressors.push(spawn_stage(
                &name,
                &format!("edgerec-zip{i}"),
                &stages,
                StageBeat::new(watch, &name),
                move |beat| crate::compressor::run(&jobs, tx, &mut comp, &intake, &st, &w, beat),
            )?);
        }
        drop(sealed_tx);

        // A stage deadline of 0 (the health side not watching) still needs
        // one for stopping: the configuration's default.
        let deadline = if opts.watch.deadline.is_zero() {
            Duration::from_secs(5)
        } else {
            opts.watch.deadline.max(Duration::from_millis(500))
        };
        let closer = Closer {
            allowance: deadline * 10,
            rx: close_rx,
            session: session.clone(),
            intake: intake.clone(),
            counters: counters.clone(),
            notify: closed_tx,
            stages: stages.clone(),
            watch: watch.clone(),
        };
        let realtime_priority = opts.storage.realtime_priority;
        let closer = spawn_stage(
            "closer",
            "edgerec-close",
            &stages,
            StageBeat::new(watch, "closer"),
            move |beat| {
                // Closing is part of the storage stage: it fdatasyncs.
                edgerec_storage::apply_realtime_priority(
                    "the segment closer (edgerec-close)",
                    realtime_priority,
                );
                closer.run(beat)
            },
        )?;

        let retention = opts.retention.map(|p| {
            let r = crate::retention::Retention::new(&opts.root, p).with_write_ahead(
                opts.storage.preallocate
                    + (opts.storage.queue_depth * opts.storage.block_size) as u64,
            );
            match &opts.watch.offload {
                Some(o) => r.with_offload(o.clone()),
                None => r,
            }
        });
        let sequencer = Sequencer {
            rx: sealed_rx,
            recycle: recycle_tx,
            intake: intake.clone(),
            counters: counters.clone(),
            stages: stages.clone(),
            split: opts.split,
            retention,
            watch: watch.clone(),
            session,
            close_tx,
            closed_rx,
            segment: Some(segment),
            state: SequencerState::default(),
        };
        let sequencer = spawn_stage(
            "storage",
            "edgerec-seq",
            &stages,
            StageBeat::new(watch, "storage"),
            move |beat| {
                // The storage stage's feeding thread: the same real-time
                // priority as the I/O thread it hands blocks to.
                edgerec_storage::apply_realtime_priority(
                    "the sequencer (edgerec-seq)",
                    realtime_priority,
                );
                sequencer.run(beat)
            },
        )?;

        let mut events_handle = None;
        let mut events_stage = None;
        let mut events_lane = None;
        if let (Some(plan), Some(rules)) = (opts.triggers.clone(), rules) {
            // The lane may hold what a quarter of the pipeline's budget
            // would: the stage is behind by that much before it drops.
            let (lane, rx) = Lane::new((opts.memory_budget / 4).max(16 << 20));
            let lane = Arc::new(lane);
            let status = Arc::new(Mutex::new(EventsStatus::default()));
            let sink = intake.sink();
            let events_topic = match sink.register(events_spec()) {
                Ok(id) => Some((sink, id)),
                Err(e) => {
                    tracing::warn!("{EVENTS_TOPIC} cannot be recorded: {e}");
                    None
                }
            };
            let plan = Arc::new(plan);
            let stage = EventsStage {
                plan: (*plan).clone(),
                rules,
                rx,
                lane: lane.clone(),
                intake: intake.clone(),
                status: status.clone(),
                stages: stages.clone(),
                compression: opts.compression,
                library: opts.library.clone(),
                events_topic,
                budget: crate::events::budget::ClipBudget::new(plan.disk_budget),
                watch: opts.watch.clone(),
            };
            events_stage = Some(spawn_stage(
                "events",
                "edgerec-events",
                &stages,
                StageBeat::new(watch, "events"),
                move |beat| stage.run(beat),
            )?);
            events_handle = Some(EventsHandle {
                lane: lane.clone(),
                status,
            });
            events_lane = Some((lane, plan));
        }

        let chunker = Chunker {
            events: events_lane,
            intake: intake.clone(),
            jobs,
            recycle: recycle_rx,
            counters: counters.clone(),
            stages: stages.clone(),
            limits: ChunkLimits {
                pool,
                chunk_size: opts.chunk_size,
                max_age: opts.chunk_max_age,
                // One buffer is being built, one may be on its way back.
                in_flight: pool - 2,
            },
            watch: watch.clone(),
        };
        let chunker = spawn_stage(
            "chunker",
            "edgerec-chunk",
            &stages,
            StageBeat::new(watch, "chunker"),
            move |beat| chunker.run(beat),
        )?;

        let sources_beat = StageBeat::new(watch, "sources");
        let supervisor = Supervisor::start(
            &intake,
            sources,
            opts.supervisor,
            Box::new(move || sources_beat.beat()),
        )
        .map_err(|e| RecorderError::Thread {
            name: "edgerec-sources".into(),
            source: e,
        })?;
        guard.disarm();
        let status = StatusHandle {
            intake,
            counters,
            stages,
            sources: supervisor.view(),
            session_dir,
            backend,
            fallback_reason,
            started: Instant::now(),
            events: events_handle,
            pause: Arc::new(Mutex::new(None)),
        };
        Ok(Self {
            events: events_stage,
            supervisor: Some(supervisor),
            chunker: Some(chunker),
            compressors,
            sequencer: Some(sequencer),
            closer: Some(closer),
            status,
            deadline,
        })
    }

    /// The bag directory of this session.
    pub fn session_dir(&self) -> &Path {
        &self.status.session_dir
    }

    /// A snapshot for the live line, the status socket and the ROS topic.
    pub fn status(&self) -> RecorderStatus {
        self.status.snapshot()
    }

    /// A handle that reads the status, also after [`stop`](Self::stop)
    /// (the final counts after a storage failure, when `stop` returns the
    /// error rather than a report).
    pub fn status_handle(&self) -> StatusHandle {
        self.status.clone()
    }

    /// The pipeline stage that died, when one did: the recording must
    /// stop (it is in `fault`; nothing more is written).
    pub fn stage_died(&self) -> Option<crate::stage::StageDeath> {
        self.status.stages.death()
    }

    /// Stops the sources, drains every queue into the file, closes the
    /// segment and returns what was recorded. Everything accepted before
    /// the call is written (unless storage failed, which the report says).
    ///
    /// Never hangs: a stage that stops beating for a stage deadline while
    /// it is waited for is left behind and named in the error. After a
    /// stage died, the open segment is left `.active` and the error names
    /// the stage.
    pub fn stop(mut self) -> Result<RecordingReport, RecorderError> {
        self.status.counters.stopping.store(true, Ordering::Relaxed);
        if let Some(s) = self.supervisor.take() {
            let r = s.stop(self.deadline);
            if !r.not_stopped.is_empty() {
                tracing::error!(
                    "sources still running after the stop request: {}",
                    r.not_stopped.join(", ")
                );
            }
        }
        // From here a push is refused (and counted); the chunker drains
        // what is queued and ends.
        self.status.intake.close();
        let mut stuck = Vec::new();
        let mut join = |h: Option<StageHandle<()>>| {
            if let Some(h) = h {
                if let Err(Stuck(name)) = h.join_within(self.deadline) {
                    stuck.push(name);
                }
            }
        };
        join(self.chunker.take());
        // The chunker has handed over all it will: the events stage
        // finishes its clip and ends.
        if let Some(e) = &self.status.events {
            e.lane.close();
        }
        join(self.events.take());
        for c in std::mem::take(&mut self.compressors) {
            join(Some(c));
        }
        let seq = match self.sequencer.take().map(|h| h.join_within(self.deadline)) {
            Some(Ok(out)) => out,
            Some(Err(Stuck(name))) => {
                stuck.push(name);
                None
            }
            None => None,
        };
        let closed = match self.closer.take().map(|h| h.join_within(self.deadline)) {
            Some(Ok(out)) => out,
            Some(Err(Stuck(name))) => {
                stuck.push(name);
                None
            }
            None => None,
        };
        if let Some(d) = self.status.stages.death() {
            return Err(RecorderError::StageDied {
                stage: d.stage,
                message: d.message,
            });
        }
        if !stuck.is_empty() {
            return Err(RecorderError::StagesStuck { stages: stuck });
        }
        let seq = seq.unwrap_or_default();
        let CloserOutput { closed, errors } = closed.unwrap_or_default();
        let counters = &self.status.counters;
        if let Some(c) = closed.last() {
            counters.durable_bytes.store(c.bytes, Ordering::Relaxed);
            counters.segment_bytes.store(c.bytes, Ordering::Relaxed);
            *lock(&counters.segment) = c.path.clone();
        }
        let mut storage_errors = seq.storage_errors;
        storage_errors.extend(errors);
        let mut status = self.status.snapshot();
        status.state = RecorderState::Stopped;
        Ok(RecordingReport {
            session_dir: self.status.session_dir.clone(),
            segments: closed,
            status,
            bytes_per_bin: seq.bytes_per_bin,
            split_at_seconds: seq.split_at_seconds,
            storage_errors,
        })
    }
}

/// `/edgerec/events`: each event as JSON in a `std_msgs/msg/String`.
fn events_spec() -> edgerec_source::ChannelSpec {
    let def = edgerec_format::msgdefs::lookup("std_msgs/String");
    let mut metadata = std::collections::BTreeMap::new();
    metadata.insert(
        "offered_qos_profiles".to_owned(),
        edgerec_format::bag::qos_profile_yaml(true, false, 10),
    );
    edgerec_source::ChannelSpec {
        topic: EVENTS_TOPIC.to_owned(),
        type_name: "std_msgs/msg/String".to_owned(),
        message_encoding: "cdr".to_owned(),
        schema_encoding: "ros2msg".to_owned(),
        schema: def
            .map(|d| d.text().as_bytes().to_vec())
            .unwrap_or_default(),
        metadata,
        latched: false,
    }
}

/// Stops the stages already started when `start` fails half-way.
struct AbortOnDrop(Option<(Arc<Stages>, Arc<Intake>)>);

impl AbortOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some((stages, intake)) = self.0.take() {
            stages.abort();
            intake.close();
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // A recorder dropped without stop(): stop the sources (the
        // supervisor's drop) and close the intake so the stages drain and
        // close the file; do not wait here.
        self.status.intake.close();
    }
}
