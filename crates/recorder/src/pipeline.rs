//! The pipeline: sources -> chunker -> compressor pool -> sequencer -> storage.
//!
//! Threads and what each owns:
//! - one per source, pushing into its own bounded queue (never blocking);
//! - the chunker: drains every source queue round-robin, assigns per-channel
//!   sequence numbers, copies each payload once into the open chunk and hands
//!   full (or aged) chunks to the pool, numbered;
//! - `compressor_threads` compressors: seal chunks (compress + CRC) in any
//!   order;
//! - the sequencer: puts sealed chunks back in number order (a fixed-size
//!   heapless heap; the chunker keeps at most [`MAX_CHUNKS_IN_FLIGHT`] out,
//!   so it cannot overflow), writes them through the segment to the storage
//!   writer, ticks the sync policy and closes the segment at the end.
//!
//! Memory: chunk buffers come from a fixed pool, sized at start to at most
//! half the [`MemoryBudget`] and charged to it for the whole recording; a
//! queued message is charged its payload allocation until the chunker has
//! copied it into a pool buffer; a compressor's output is charged until it
//! is written. So queued payloads can never hold more than the budget minus
//! the pool, and what is resident stays within the budget even though the
//! allocator keeps freed payload memory for reuse. A full budget makes
//! sources drop (counted per channel), never wait. Only compressor output
//! is charged past the limit (refusing it would deadlock the pipeline). Not
//! counted: the storage block pool (queue_depth + 2 blocks).

use std::cmp::Ordering as CmpOrdering;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use edgerec_format::bag::MetadataVersion;
use edgerec_format::chunk::{ChunkBuilder, ChunkCompressor, Compression, OpenChunk, SealedChunk};
use edgerec_health::heartbeat::{Heartbeat, Heartbeats};
use edgerec_storage::WriterOptions;

use crate::budget::MemoryBudget;
use crate::clock::RecordingClock;
use crate::segment::{ClosedSegment, Segment, Session};
use crate::source::{
    ChannelRegistry, Doorbell, SinkShared, Source, SourceQueue, SourceSink, StopFlag,
};
use crate::status::{ChannelStatus, RecorderState, RecorderStatus};
use crate::RecorderError;

/// Capacity of the sequencer's reorder heap: the chunker never has more
/// chunks out than this, so the heap cannot overflow. The chunk buffer
/// pool (half the memory budget) sets the real limit below it: 23 chunks
/// of 4 MiB with the defaults, about 0.3 s of a 1 MHz stream of 256 B
/// messages, to ride out a write stall. (A limit of 6 made the chunker wait
/// during a 70 ms stall and a 1 MHz source overflow its queue.)
pub const MAX_CHUNKS_IN_FLIGHT: usize = 64;

/// Width of the bins of [`RecordingReport::bytes_per_bin`]: fine enough
/// to place a split inside a second and compare it with its neighbours.
pub const THROUGHPUT_BIN: Duration = Duration::from_millis(100);

/// Everything the pipeline needs to know, in its own terms.
#[derive(Debug, Clone)]
pub struct RecorderOptions {
    /// Where session directories are created.
    pub root: PathBuf,
    /// Session name prefix.
    pub session_prefix: String,
    /// metadata.yaml version.
    pub metadata_version: MetadataVersion,
    /// The storage writer's options.
    pub storage: WriterOptions,
    /// Uncompressed chunk size that closes a chunk.
    pub chunk_size: usize,
    /// Chunk compression.
    pub compression: Compression,
    /// A chunk older than this is closed even if not full.
    pub chunk_max_age: Duration,
    /// Bytes all queued envelopes and chunks in flight may hold.
    pub memory_budget: u64,
    /// Compressor threads (0 = cores).
    pub compressor_threads: usize,
    /// Envelopes each source's queue holds.
    pub queue_capacity: usize,
    /// The MCAP header's library string.
    pub library: String,
    /// When a segment is split.
    pub split: SplitPolicy,
    /// Disk-space limits; None records until the disk is full.
    pub retention: Option<crate::retention::RetentionPolicy>,
    /// Heartbeats and per-segment records from the rest of the recorder.
    pub watch: Watch,
}

/// What the pipeline reports to the health side, and what it asks of it.
#[derive(Clone, Default)]
pub struct Watch {
    /// Where the storage stage and every source register a heartbeat
    /// (`storage`, `source <name>`), each with `deadline`; the watchdogs
    /// stop being fed when one goes quiet for longer. None: not watched.
    pub heartbeats: Option<Heartbeats>,
    /// How long a stage may go without progress.
    pub deadline: Duration,
    /// Called once per segment, just before it is closed: Metadata records
    /// that describe the whole segment (the clock's quality over it).
    pub segment_metadata: Option<SegmentMetadataFn>,
    /// Test builds only: once set, the storage stage hangs (the sequencer
    /// stops turning, so its heartbeat stops), to prove that the watchdog
    /// resets the board.
    #[cfg(feature = "fault-injection")]
    pub stall_storage: Option<Arc<AtomicBool>>,
}

/// See [`Watch::segment_metadata`].
pub type SegmentMetadataFn = Arc<dyn Fn() -> Vec<(String, BTreeMap<String, String>)> + Send + Sync>;

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("heartbeats", &self.heartbeats.is_some())
            .field("deadline", &self.deadline)
            .field("segment_metadata", &self.segment_metadata.is_some())
            .finish()
    }
}

/// A segment is closed and the next one opened when any limit is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitPolicy {
    /// File bytes.
    pub max_bytes: u64,
    /// Span of log times.
    pub max_duration: Duration,
    /// Messages; 0 = no limit.
    pub max_messages: u64,
}

impl Default for SplitPolicy {
    fn default() -> Self {
        Self {
            max_bytes: 1 << 30,
            max_duration: Duration::from_secs(300),
            max_messages: 0,
        }
    }
}

impl RecorderOptions {
    /// Options from the configuration file.
    pub fn from_config(cfg: &edgerec_config::Config) -> Self {
        use edgerec_config::{Compression as C, RosDistro, StorageBackend as B};
        let s = &cfg.storage;
        Self {
            root: cfg.recording.root.clone(),
            session_prefix: cfg.recording.session_prefix.clone(),
            metadata_version: match cfg.recording.ros_distro {
                RosDistro::Humble => MetadataVersion::Humble,
                RosDistro::Jazzy => MetadataVersion::Jazzy,
            },
            storage: WriterOptions {
                block_size: s.block_size as usize,
                queue_depth: s.queue_depth as usize,
                sync_interval: s.sync_interval,
                preallocate: s.preallocate,
                realtime_priority: s.realtime_priority,
                backend: match s.backend {
                    B::Auto => edgerec_storage::BackendChoice::Auto,
                    B::IoUring => edgerec_storage::BackendChoice::IoUring,
                    B::PwriteDirect => edgerec_storage::BackendChoice::PwriteDirect,
                    B::Buffered => edgerec_storage::BackendChoice::Buffered,
                },
                ..WriterOptions::default()
            },
            chunk_size: cfg.mcap.chunk_size as usize,
            compression: match cfg.mcap.compression {
                C::None => Compression::None,
                C::Lz4 => Compression::Lz4,
                C::Zstd => Compression::Zstd {
                    level: cfg.mcap.compression_level,
                },
            },
            chunk_max_age: cfg.mcap.chunk_max_age,
            memory_budget: cfg.pipeline.memory_budget,
            compressor_threads: cfg.pipeline.compressor_threads,
            queue_capacity: cfg.pipeline.queue_capacity,
            library: format!("edgerec {}", env!("CARGO_PKG_VERSION")),
            split: SplitPolicy {
                max_bytes: cfg.segment.max_bytes,
                max_duration: cfg.segment.max_duration,
                max_messages: cfg.segment.max_messages,
            },
            retention: Some((&cfg.retention).into()),
            watch: Watch {
                deadline: cfg.health.stage_deadline,
                ..Watch::default()
            },
        }
    }
}

/// Counters the threads update and the status reads.
#[derive(Debug, Default)]
pub(crate) struct PipelineCounters {
    pub(crate) bytes_written: AtomicU64,
    pub(crate) durable_bytes: AtomicU64,
    /// Bytes of the current segment handed to storage.
    pub(crate) segment_bytes: AtomicU64,
    pub(crate) chunks_written: AtomicU64,
    pub(crate) messages_written: AtomicU64,
    pub(crate) in_flight: AtomicUsize,
    pub(crate) fault: Mutex<Option<String>>,
    /// Why recording is paused for space (retention), when it is.
    pub(crate) disk_full: Mutex<Option<String>>,
    pub(crate) segment: Mutex<PathBuf>,
    pub(crate) stopping: AtomicBool,
}

struct ChunkJob {
    no: u64,
    chunk: OpenChunk,
    charge: u64,
    /// Channels whose first messages are in this chunk (sequence numbers
    /// start at 0 there): the sequencer writes their records first.
    channels: Vec<u16>,
    /// The last message of each latched channel in this chunk.
    latched: Vec<LatchedMessage>,
}

struct Sealed {
    no: u64,
    sealed: SealedChunk,
    charge: u64,
    channels: Vec<u16>,
    latched: Vec<LatchedMessage>,
}

/// A latched (transient-local) channel's last message, written again at
/// the start of every new segment with its original sequence number and
/// times, so a reader of any one segment gets it, and a reader of all of
/// them can tell the repeat by its sequence number.
#[derive(Debug, Clone)]
struct LatchedMessage {
    channel: u16,
    sequence: u32,
    log_time: u64,
    publish_time: u64,
    payload: Arc<[u8]>,
}

impl PartialEq for Sealed {
    fn eq(&self, o: &Self) -> bool {
        self.no == o.no
    }
}
impl Eq for Sealed {}
impl PartialOrd for Sealed {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for Sealed {
    fn cmp(&self, o: &Self) -> CmpOrdering {
        self.no.cmp(&o.no)
    }
}

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

/// The sequencer's share of [`Watch`].
struct SequencerWatch {
    beat: Option<Heartbeat>,
    segment_metadata: Option<SegmentMetadataFn>,
    #[cfg(feature = "fault-injection")]
    stall_storage: Option<Arc<AtomicBool>>,
}

impl SequencerWatch {
    /// Adds the per-segment records to a segment about to be closed.
    fn closing(&self, seg: &mut Segment) {
        if let Some(f) = &self.segment_metadata {
            for (name, values) in f() {
                seg.add_closing_metadata(name, values);
            }
        }
    }
}

/// What the sequencer thread returns.
struct SequencerOutput {
    closed: Vec<ClosedSegment>,
    storage_errors: Vec<String>,
    bytes_per_bin: Vec<u64>,
    split_at_seconds: Vec<f64>,
}

/// A running recording.
pub struct Recorder {
    stop: StopFlag,
    sources: Vec<(String, JoinHandle<Result<(), crate::source::SourceError>>)>,
    chunker: Option<JoinHandle<()>>,
    compressors: Vec<JoinHandle<()>>,
    sequencer: Option<JoinHandle<Result<SequencerOutput, RecorderError>>>,
    registry: Arc<ChannelRegistry>,
    shared: Arc<SinkShared>,
    counters: Arc<PipelineCounters>,
    session_dir: PathBuf,
    backend: String,
    fallback_reason: Option<String>,
    started: Instant,
}

/// Reads a recorder's status from any thread, for as long as it is held.
#[derive(Clone)]
pub struct StatusHandle {
    registry: Arc<ChannelRegistry>,
    shared: Arc<SinkShared>,
    counters: Arc<PipelineCounters>,
    session_dir: PathBuf,
    backend: String,
    fallback_reason: Option<String>,
    started: Instant,
}

impl std::fmt::Debug for StatusHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusHandle")
            .field("session_dir", &self.session_dir)
            .finish()
    }
}

impl StatusHandle {
    /// The status now.
    pub fn snapshot(&self) -> RecorderStatus {
        let fault = self
            .counters
            .fault
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let disk_full = self
            .counters
            .disk_full
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let state = if fault.is_some() {
            RecorderState::Fault
        } else if disk_full.is_some() {
            RecorderState::DiskFull
        } else if self.counters.stopping.load(Ordering::Relaxed) {
            RecorderState::Stopping
        } else {
            RecorderState::Recording
        };
        RecorderStatus {
            state,
            backend: self.backend.clone(),
            fallback_reason: self.fallback_reason.clone(),
            session_dir: self.session_dir.clone(),
            segment: self
                .counters
                .segment
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            elapsed: self.started.elapsed(),
            bytes_written: self.counters.bytes_written.load(Ordering::Relaxed),
            durable_bytes: self.counters.durable_bytes.load(Ordering::Relaxed),
            segment_bytes: self.counters.segment_bytes.load(Ordering::Relaxed),
            chunks_written: self.counters.chunks_written.load(Ordering::Relaxed),
            messages_written: self.counters.messages_written.load(Ordering::Relaxed),
            budget_used: self.shared.budget.used(),
            budget_peak: self.shared.budget.peak(),
            budget_limit: self.shared.budget.limit(),
            fault,
            disk_full,
            channels: self
                .registry
                .all()
                .iter()
                .map(|c| ChannelStatus {
                    topic: c.spec.topic.clone(),
                    type_name: c.spec.type_name.clone(),
                    accepted: c.counters.accepted.load(Ordering::Relaxed),
                    dropped: c.counters.dropped.load(Ordering::Relaxed),
                    lost: c.counters.lost.load(Ordering::Relaxed),
                    written: c.counters.written.load(Ordering::Relaxed),
                    bytes: c.counters.bytes.load(Ordering::Relaxed),
                })
                .collect(),
        }
    }
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("session_dir", &self.session_dir)
            .field("backend", &self.backend)
            .finish()
    }
}

impl Recorder {
    /// Creates the session, opens the first segment and starts every thread.
    /// Errors here (a root that cannot be created, a storage backend that is
    /// refused) happen before any source runs.
    pub fn start(
        opts: RecorderOptions,
        sources: Vec<Box<dyn Source>>,
        clock: Arc<dyn RecordingClock>,
    ) -> Result<Self, RecorderError> {
        if opts.chunk_size == 0 || opts.queue_capacity == 0 {
            return Err(RecorderError::Options(
                "chunk_size and queue_capacity must be positive".into(),
            ));
        }
        let registry = Arc::new(ChannelRegistry::default());
        let doorbell = Arc::new(Doorbell::default());
        let budget = Arc::new(MemoryBudget::new(opts.memory_budget));
        let shared = Arc::new(SinkShared {
            budget: budget.clone(),
            registry: registry.clone(),
            doorbell: doorbell.clone(),
            clock: clock.clone(),
            paused: AtomicBool::new(false),
        });
        let mut queues: Vec<SourceQueue> = Vec::new();
        let mut ready = Vec::new();
        for mut src in sources {
            let (tx, rx) = mpsc::sync_channel(opts.queue_capacity);
            let returns = Arc::new(crate::source::return_pool());
            let mut sink = SourceSink::new(tx, returns.clone(), shared.clone());
            if let Some(h) = &opts.watch.heartbeats {
                sink.set_heartbeat(Arc::new(
                    h.register(format!("source {}", src.name()), opts.watch.deadline),
                ));
            }
            src.register(&mut sink).map_err(|e| RecorderError::Source {
                source_name: src.name(),
                reason: e.to_string(),
            })?;
            queues.push((rx, returns));
            ready.push((src, sink));
        }

        let mut session = Session::create(
            &opts.root,
            &opts.session_prefix,
            clock.now_ns(),
            opts.metadata_version,
            opts.storage.clone(),
            opts.library.clone(),
        )?;
        let segment = match session.open_segment(&registry.all()) {
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
        let counters = Arc::new(PipelineCounters::default());
        *counters.segment.lock().unwrap_or_else(|p| p.into_inner()) =
            segment.active_path().to_path_buf();
        tracing::info!(
            "recording into {} with {} ({} channels, chunks of {} B, compression {})",
            session_dir.display(),
            backend,
            registry.all().len(),
            opts.chunk_size,
            opts.compression.display_name()
        );
        if let Some(r) = &fallback_reason {
            tracing::warn!("storage fell back to {backend}: {r}");
        }

        let threads = if opts.compressor_threads == 0 {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
        } else {
            opts.compressor_threads
        };
        let (job_tx, job_rx) = mpsc::sync_channel::<ChunkJob>(MAX_CHUNKS_IN_FLIGHT);
        let job_rx = Arc::new(Mutex::new(job_rx));
        let (sealed_tx, sealed_rx) = mpsc::channel::<Sealed>();
        // The chunk buffer pool: at most half the budget, charged for good.
        let buf_cap = opts.chunk_size + opts.chunk_size / 4;
        let pool = ((opts.memory_budget / 2) as usize / buf_cap).clamp(3, MAX_CHUNKS_IN_FLIGHT + 2);
        budget.force_reserve((pool * buf_cap) as u64);
        let (recycle_tx, recycle_rx) = mpsc::sync_channel::<Vec<u8>>(pool);

        let mut compressors = Vec::new();
        for i in 0..threads {
            let rx = job_rx.clone();
            let tx = sealed_tx.clone();
            let budget = budget.clone();
            let mut comp = ChunkCompressor::new(opts.compression)
                .map_err(|e| RecorderError::Options(format!("compressor {i} cannot start: {e}")))?;
            compressors.push(spawn(&format!("edgerec-zip{i}"), move || {
                compressor_loop(rx, tx, &mut comp, &budget)
            })?);
        }
        drop(sealed_tx);

        let seq = {
            let registry = registry.clone();
            let counters = counters.clone();
            let budget = budget.clone();
            let shared = shared.clone();
            let split = opts.split;
            let retention = opts.retention.map(|p| {
                crate::retention::Retention::new(&opts.root, p).with_write_ahead(
                    opts.storage.preallocate
                        + (opts.storage.queue_depth * opts.storage.block_size) as u64,
                )
            });
            let watch = SequencerWatch {
                beat: opts
                    .watch
                    .heartbeats
                    .as_ref()
                    .map(|h| h.register("storage", opts.watch.deadline)),
                segment_metadata: opts.watch.segment_metadata.clone(),
                #[cfg(feature = "fault-injection")]
                stall_storage: opts.watch.stall_storage.clone(),
            };
            let realtime_priority = opts.storage.realtime_priority;
            spawn("edgerec-seq", move || {
                // The storage stage's feeding thread: the same real-time
                // priority as the I/O thread it hands blocks to.
                edgerec_storage::apply_realtime_priority(
                    "the sequencer (edgerec-seq)",
                    realtime_priority,
                );
                sequencer_loop(
                    session, segment, sealed_rx, recycle_tx, registry, counters, budget, shared,
                    split, retention, watch,
                )
            })?
        };

        let chunker = {
            let counters = counters.clone();
            let registry_for_chunker = registry.clone();
            let bell = doorbell.clone();
            let chunk_size = opts.chunk_size;
            let max_age = opts.chunk_max_age;
            // One buffer is being built, one may be on its way back.
            let in_flight_limit = pool - 2;
            let budget = budget.clone();
            let h = spawn("edgerec-chunk", move || {
                chunker_loop(
                    queues,
                    job_tx,
                    recycle_rx,
                    bell,
                    counters,
                    registry_for_chunker,
                    budget,
                    ChunkLimits {
                        pool,
                        chunk_size,
                        max_age,
                        in_flight: in_flight_limit,
                    },
                )
            })?;
            let _ = doorbell_thread(&doorbell, &h);
            h
        };

        let stop = StopFlag::new();
        let mut source_threads = Vec::new();
        for (src, sink) in ready {
            let name = src.name();
            let st = stop.clone();
            let h = spawn(&format!("src-{name}"), move || src.run(sink, st))?;
            source_threads.push((name, h));
        }
        Ok(Self {
            stop,
            sources: source_threads,
            chunker: Some(chunker),
            compressors,
            sequencer: Some(seq),
            registry,
            shared,
            counters,
            session_dir,
            backend,
            fallback_reason,
            started: Instant::now(),
        })
    }

    /// The bag directory of this session.
    pub fn session_dir(&self) -> &Path {
        &self.session_dir
    }

    /// A snapshot for the live line, the status socket and the ROS topic.
    pub fn status(&self) -> RecorderStatus {
        self.status_handle().snapshot()
    }

    /// A handle that reads the status, also after [`stop`](Self::stop)
    /// (the final counts after a storage failure, when `stop` returns the
    /// error rather than a report).
    pub fn status_handle(&self) -> StatusHandle {
        StatusHandle {
            registry: self.registry.clone(),
            shared: self.shared.clone(),
            counters: self.counters.clone(),
            session_dir: self.session_dir.clone(),
            backend: self.backend.clone(),
            fallback_reason: self.fallback_reason.clone(),
            started: self.started,
        }
    }

    /// Stops the sources, drains every queue into the file, closes the
    /// segment and returns what was recorded. Everything accepted before the
    /// call is written (unless storage failed, which the report says).
    pub fn stop(mut self) -> Result<RecordingReport, RecorderError> {
        self.counters.stopping.store(true, Ordering::Relaxed);
        self.stop.set();
        let mut source_errors = Vec::new();
        for (name, h) in self.sources.drain(..) {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => source_errors.push(format!("{name}: {e}")),
                Err(_) => source_errors.push(format!("{name}: panicked")),
            }
        }
        if let Some(h) = self.chunker.take() {
            let _ = h.join();
        }
        for h in self.compressors.drain(..) {
            let _ = h.join();
        }
        let out = match self.sequencer.take().map(|h| h.join()) {
            Some(Ok(r)) => r?,
            Some(Err(_)) => return Err(RecorderError::Thread("sequencer panicked".into())),
            None => SequencerOutput {
                closed: Vec::new(),
                storage_errors: Vec::new(),
                bytes_per_bin: Vec::new(),
                split_at_seconds: Vec::new(),
            },
        };
        for e in &source_errors {
            tracing::error!("source ended with an error: {e}");
        }
        let mut status = self.status();
        status.state = RecorderState::Stopped;
        Ok(RecordingReport {
            session_dir: self.session_dir.clone(),
            segments: out.closed,
            status,
            bytes_per_bin: out.bytes_per_bin,
            split_at_seconds: out.split_at_seconds,
            storage_errors: out.storage_errors,
        })
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // A recorder dropped without stop(): stop the sources so the threads
        // drain and close the file; do not wait here.
        self.stop.set();
    }
}

fn spawn<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, RecorderError> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .map_err(|e| RecorderError::Thread(format!("cannot start thread {name}: {e}")))
}

fn doorbell_thread(d: &Doorbell, h: &JoinHandle<()>) -> Result<(), std::thread::Thread> {
    d.thread.set(h.thread().clone())
}

/// When the chunker closes a chunk.
struct ChunkLimits {
    pool: usize,
    chunk_size: usize,
    max_age: Duration,
    in_flight: usize,
}

/// Budget bytes the chunker gives back at once.
const RELEASE_BATCH: u64 = 256 << 10;

/// Drains up to this many envelopes from one queue before moving on, so a
/// flooding source cannot starve the others.
const BATCH: usize = 256;

#[allow(clippy::too_many_arguments)]
fn chunker_loop(
    queues: Vec<SourceQueue>,
    job_tx: SyncSender<ChunkJob>,
    recycle_rx: Receiver<Vec<u8>>,
    doorbell: Arc<Doorbell>,
    counters: Arc<PipelineCounters>,
    registry: Arc<ChannelRegistry>,
    budget: Arc<MemoryBudget>,
    limits: ChunkLimits,
) {
    let ChunkLimits {
        pool,
        chunk_size,
        max_age,
        in_flight,
    } = limits;
    let mut b = ChunkBuilder::with_pool(chunk_size + chunk_size / 4, pool - 1);
    let mut seqs: Vec<u32> = Vec::new();
    let mut seen: Vec<bool> = Vec::new();
    let mut new_channels: Vec<u16> = Vec::new();
    let mut opened: Option<Instant> = None;
    // Budget charges of copied payloads, given back in batches: one atomic
    // per message on a line the sources also write costs more than the copy.
    let mut to_release = 0u64;
    let mut next_no = 0u64;
    let mut open: Vec<bool> = vec![true; queues.len()];

    // Per channel: latched? (looked up once, on its first message).
    let mut latched_flag: Vec<bool> = Vec::new();
    let mut latched_now: std::collections::BTreeMap<u16, LatchedMessage> = Default::default();
    let mut send =
        |b: &mut ChunkBuilder,
         new_channels: &mut Vec<u16>,
         latched_now: &mut std::collections::BTreeMap<u16, LatchedMessage>| {
            // Keep the sequencer's reorder heap within its fixed capacity.
            while counters.in_flight.load(Ordering::Acquire) >= in_flight {
                std::thread::sleep(Duration::from_micros(200));
            }
            counters.in_flight.fetch_add(1, Ordering::AcqRel);
            // Buffers written meanwhile come back here: take() must find one,
            // or it allocates past the pool the budget was charged for.
            while let Ok(buf) = recycle_rx.try_recv() {
                b.recycle(buf);
            }
            let chunk = b.take();
            // The chunk's buffer is charged as part of the pool.
            let charge = 0;
            let job = ChunkJob {
                no: next_no,
                chunk,
                charge,
                channels: std::mem::take(new_channels),
                latched: std::mem::take(latched_now).into_values().collect(),
            };
            next_no += 1;
            // The pool only goes away when the pipeline does; a failed send
            // means the compressors died, and the sequencer reports that.
            let _ = job_tx.send(job);
        };

    loop {
        while let Ok(buf) = recycle_rx.try_recv() {
            b.recycle(buf);
        }
        doorbell.clear();
        let mut got = 0usize;
        for (qi, (q, returns)) in queues.iter().enumerate() {
            if !open[qi] {
                continue;
            }
            for _ in 0..BATCH {
                match q.try_recv() {
                    Ok(env) => {
                        got += 1;
                        let ch = env.channel.0 as usize;
                        if ch >= seqs.len() {
                            seqs.resize(ch + 1, 0);
                            seen.resize(ch + 1, false);
                        }
                        if !seen[ch] {
                            seen[ch] = true;
                            new_channels.push(env.channel.0);
                            if ch >= latched_flag.len() {
                                latched_flag.resize(ch + 1, false);
                            }
                            latched_flag[ch] =
                                registry.get(env.channel).is_some_and(|c| c.spec.latched);
                        }
                        let seq = seqs[ch];
                        seqs[ch] = seq.wrapping_add(1);
                        if b.is_empty() {
                            opened = Some(Instant::now());
                        }
                        b.push(
                            env.channel.0,
                            seq,
                            env.log_time,
                            env.publish_time,
                            &env.payload,
                        );
                        if latched_flag.get(ch).copied().unwrap_or(false) {
                            latched_now.insert(
                                env.channel.0,
                                LatchedMessage {
                                    channel: env.channel.0,
                                    sequence: seq,
                                    log_time: env.log_time,
                                    publish_time: env.publish_time,
                                    payload: Arc::from(env.payload.as_slice()),
                                },
                            );
                        }
                        // The payload is copied (into pool memory); a small
                        // buffer goes back to its source for reuse.
                        to_release += env.charge();
                        if env.payload.capacity() <= crate::source::RETURN_MAX_CAPACITY {
                            let _ = returns.enqueue(env.payload);
                        }
                        if to_release >= RELEASE_BATCH {
                            budget.release(std::mem::take(&mut to_release));
                        }
                        if b.len() >= chunk_size {
                            send(&mut b, &mut new_channels, &mut latched_now);
                        }
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        open[qi] = false;
                        break;
                    }
                }
            }
        }
        budget.release(std::mem::take(&mut to_release));
        let aged = opened.is_some_and(|t| t.elapsed() >= max_age);
        if !b.is_empty() && aged {
            send(&mut b, &mut new_channels, &mut latched_now);
        }
        if got == 0 {
            if !open.iter().any(|o| *o) {
                break;
            }
            // No spin before parking: measured at 1 MHz, a 5 us spin raised
            // the capacity at max rate (2.7 -> 4.9 M msg/s) but took 1.9 cores
            // instead of 1.4 at 1 MHz; a recorder is mostly not at max rate.
            if doorbell.may_sleep() {
                let wait = match opened {
                    Some(t) if !b.is_empty() => max_age.saturating_sub(t.elapsed()),
                    _ => Duration::from_millis(20),
                }
                .min(Duration::from_millis(20));
                std::thread::park_timeout(wait);
                doorbell.awake();
            }
        }
    }
    if !b.is_empty() {
        send(&mut b, &mut new_channels, &mut latched_now);
    }
}

fn compressor_loop(
    rx: Arc<Mutex<Receiver<ChunkJob>>>,
    tx: Sender<Sealed>,
    comp: &mut ChunkCompressor,
    budget: &MemoryBudget,
) {
    loop {
        let job = {
            let guard = rx.lock().unwrap_or_else(|p| p.into_inner());
            guard.recv()
        };
        let Ok(job) = job else { return };
        let sealed = job.chunk.seal(comp);
        // The compressed copy and the index records are new memory.
        let extra = sealed.extra_memory() as u64;
        budget.force_reserve(extra);
        let charge = job.charge + extra;
        if tx
            .send(Sealed {
                no: job.no,
                sealed,
                charge,
                channels: job.channels,
                latched: job.latched,
            })
            .is_err()
        {
            return;
        }
    }
}

/// Where the sequencer is in the current segment.
#[derive(Debug, Default)]
struct SegmentProgress {
    chunks: u64,
    messages: u64,
    start_ns: Option<u64>,
}

impl SegmentProgress {
    fn should_split(&self, split: &SplitPolicy, position: u64, next: &SealedChunk) -> bool {
        if self.chunks == 0 {
            return false;
        }
        let bytes = position + next.total_len() > split.max_bytes;
        let span = self
            .start_ns
            .is_some_and(|t| next.end.saturating_sub(t) >= split.max_duration.as_nanos() as u64);
        let count =
            split.max_messages > 0 && self.messages + next.message_count > split.max_messages;
        bytes || span || count
    }

    fn wrote(&mut self, c: &SealedChunk) {
        self.chunks += 1;
        self.messages += c.message_count;
        if c.message_count > 0 {
            self.start_ns = Some(self.start_ns.map_or(c.start, |t| t.min(c.start)));
        }
    }
}

/// Closes finished segments on their own thread, in order, so a split does
/// not stall the writes of the next segment (closing means the summary, a
/// final fdatasync, rename, directory fsync and metadata.yaml).
/// Work for the closer thread.
enum CloseJob {
    /// Finish a healthy segment.
    Finish(Box<Segment>),
    /// Recover a segment that storage failed in (already closed at its last
    /// good block): rebuild its summary so it is a valid closed file.
    Recover(PathBuf),
    /// The same for a segment whose close failed; the counts say what was
    /// written into it (new messages, latched repeats) so what recovery
    /// could not keep moves from `written` to `lost`.
    RecoverCounted(PathBuf, BTreeMap<u16, u64>, BTreeMap<u16, u64>),
}

fn closer_loop(
    rx: Receiver<CloseJob>,
    session: Arc<Mutex<Session>>,
    registry: Arc<ChannelRegistry>,
    closed: Arc<Mutex<Vec<ClosedSegment>>>,
    notify: mpsc::Sender<(PathBuf, u64)>,
    errors: Arc<Mutex<Vec<String>>>,
    counters: Arc<PipelineCounters>,
) {
    let mut jobs: std::collections::VecDeque<CloseJob> = Default::default();
    // Recoveries that failed (a full disk has no room for the recovered
    // copy): tried again with the next job and once more at the end.
    let mut retry: Vec<CloseJob> = Vec::new();
    let mut last_round = false;
    loop {
        let job = match jobs.pop_front() {
            Some(j) => j,
            None if last_round => break,
            None => match rx.recv() {
                Ok(j) => {
                    jobs.extend(retry.drain(..));
                    j
                }
                Err(_) => {
                    last_round = true;
                    jobs.extend(retry.drain(..));
                    continue;
                }
            },
        };
        let seg = match job {
            CloseJob::Finish(seg) => *seg,
            CloseJob::Recover(..) | CloseJob::RecoverCounted(..) => {
                let (path, counts) = match job {
                    CloseJob::RecoverCounted(p, w, r) => (p, Some((w, r))),
                    CloseJob::Recover(p) => (p, None),
                    CloseJob::Finish(_) => continue,
                };
                if !path.exists() {
                    continue;
                }
                match edgerec_format::recover::recover_file(&path) {
                    // Not even a whole header reached the disk (the failure
                    // hit the first write): the file holds no data at all.
                    Ok(r)
                        if r.outcome == edgerec_format::recover::Outcome::NothingRecoverable
                            && r.original_bytes < 1 << 20 =>
                    {
                        tracing::warn!(
                            "removing {}: the storage failure came before any data ({} bytes)",
                            path.display(),
                            r.original_bytes
                        );
                        let _ = std::fs::remove_file(&path);
                    }
                    Ok(r) => {
                        if let Some((written, repeats)) = counts {
                            correct_counts(&registry, &counters, &written, &repeats, &r);
                        }
                        tracing::warn!(
                            "recovered {} after the storage failure: kept {} of {} bytes",
                            path.display(),
                            r.kept_bytes,
                            r.original_bytes
                        );
                        let mut sess = session.lock().unwrap_or_else(|p| p.into_inner());
                        sess.reload_metadata();
                        if let Some(out) = r.output {
                            let bytes = std::fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
                            let _ = notify.send((out.clone(), bytes));
                            closed
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push(ClosedSegment {
                                    index: u32::MAX,
                                    path: out,
                                    messages: r.kept_messages.values().sum(),
                                    bytes,
                                    start_ns: 0,
                                    end_ns: 0,
                                });
                        }
                    }
                    // Kept `.active`; tried again later, and by start-up
                    // recovery if it still fails.
                    Err(e) => {
                        tracing::warn!("recovering {} failed (will retry): {e}", path.display());
                        if !last_round {
                            retry.push(match counts {
                                Some((w, r)) => CloseJob::RecoverCounted(path, w, r),
                                None => CloseJob::Recover(path),
                            });
                        }
                    }
                }
                continue;
            }
        };
        let path = seg.active_path().to_path_buf();
        let (written, repeats) = seg.message_counts();
        let finished = seg.finish(&registry.all());
        let r = finished.and_then(|f| {
            session
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .add_closed(f)
        });
        match r {
            Ok(c) => {
                tracing::info!("closed {} ({} messages)", c.path.display(), c.messages);
                let _ = notify.send((c.path.clone(), c.bytes));
                closed.lock().unwrap_or_else(|p| p.into_inner()).push(c);
            }
            // The next segment is unaffected. A write that failed while
            // closing left this one cut at its last good block: recover it.
            Err(e) => {
                tracing::error!("closing {} failed: {e}", path.display());
                errors
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(e.to_string());
                if path.exists() {
                    jobs.push_back(CloseJob::RecoverCounted(path, written, repeats));
                }
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn sequencer_loop(
    session: Session,
    segment: Segment,
    rx: Receiver<Sealed>,
    recycle: SyncSender<Vec<u8>>,
    registry: Arc<ChannelRegistry>,
    counters: Arc<PipelineCounters>,
    budget: Arc<MemoryBudget>,
    shared: Arc<SinkShared>,
    split: SplitPolicy,
    mut retention: Option<crate::retention::Retention>,
    watch: SequencerWatch,
) -> Result<SequencerOutput, RecorderError> {
    // Paused for space: the reason, and the chunk size to ask room for.
    let mut space_pause: Option<u64> = None;
    let t0 = Instant::now();
    let mut bytes_per_bin: Vec<u64> = Vec::new();
    let mut split_at_seconds: Vec<f64> = Vec::new();
    let mut heap: heapless::BinaryHeap<Sealed, heapless::binary_heap::Min, MAX_CHUNKS_IN_FLIGHT> =
        heapless::BinaryHeap::new();
    let mut next = 0u64;
    let mut segment = Some(segment);
    let mut progress = SegmentProgress::default();
    let mut latched_last: std::collections::BTreeMap<u16, LatchedMessage> = Default::default();
    // Storage failures so far, and when to try a new segment after one.
    let mut storage_errors: Vec<String> = Vec::new();
    let mut retry_at: Option<Instant> = None;
    let mut disconnected = false;
    // Chunks handed to storage but not yet known durable: (end offset,
    // messages per channel). If storage fails, the ones past the kept
    // length move from `written` to `lost`.
    let mut unsynced: std::collections::VecDeque<(u64, Vec<(u16, u64)>)> =
        std::collections::VecDeque::new();
    // Also the sync check: a sync starts at most this late after
    // sync_interval, which bounds the loss window (issue 3 measures it).
    let tick_every = Duration::from_millis(20);
    let mut last_tick = Instant::now();

    let session = Arc::new(Mutex::new(session));
    let closed = Arc::new(Mutex::new(Vec::new()));
    let (close_tx, close_rx) = mpsc::channel::<CloseJob>();
    let (closed_tx, closed_rx) = mpsc::channel::<(PathBuf, u64)>();
    let close_errors = Arc::new(Mutex::new(Vec::new()));
    let closer = {
        let session = session.clone();
        let registry = registry.clone();
        let closed = closed.clone();
        let errors = close_errors.clone();
        let counters = counters.clone();
        spawn("edgerec-close", move || {
            closer_loop(
                close_rx, session, registry, closed, closed_tx, errors, counters,
            )
        })?
    };

    // A storage failure: close the segment at its last good block, have it
    // recovered into a valid file, pause (sources run, their messages are
    // dropped and counted) and try a new segment a second later.
    let fail = |e: RecorderError,
                segment: &mut Option<Segment>,
                unsynced: &mut std::collections::VecDeque<(u64, Vec<(u16, u64)>)>,
                storage_errors: &mut Vec<String>,
                retry_at: &mut Option<Instant>| {
        tracing::error!("storage failed: {e}; the segment is closed at its last good chunk");
        *counters.fault.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
        shared.paused.store(true, Ordering::Relaxed);
        storage_errors.push(e.to_string());
        *retry_at = Some(Instant::now() + RETRY_AFTER_FAILURE);
        if let Some(seg) = segment.take() {
            let path = seg.active_path().to_path_buf();
            let report = seg.abandon();
            let kept = report
                .as_ref()
                .map(|r| r.truncated_after_error.unwrap_or(r.logical_len))
                .unwrap_or(0);
            for (_, counts) in unsynced.iter().filter(|(end, _)| *end > kept) {
                for &(ch, n) in counts {
                    if let Some(c) = registry.get(crate::ChannelId(ch)) {
                        c.counters.written.fetch_sub(n, Ordering::Relaxed);
                        c.counters.lost.fetch_add(n, Ordering::Relaxed);
                    }
                    counters.messages_written.fetch_sub(n, Ordering::Relaxed);
                }
            }
            unsynced.clear();
            if close_tx.send(CloseJob::Recover(path)).is_err() {
                tracing::error!("segment closer is gone; recovery waits for the next start");
            }
        }
    };

    while !(disconnected && heap.is_empty()) {
        // The storage stage's heartbeat: this loop turns at least every
        // tick, and stops turning when a write or a sync hangs in the
        // kernel (the writer blocks once its buffers are all in flight).
        if let Some(b) = &watch.beat {
            b.beat_progress(next);
        }
        #[cfg(feature = "fault-injection")]
        if let Some(stall) = &watch.stall_storage {
            if stall.load(Ordering::Acquire) {
                tracing::error!("fault injection: the storage stage hangs now, on purpose");
                while stall.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        match rx.recv_timeout(tick_every) {
            Ok(s) => {
                if let Err(s) = heap.push(s) {
                    // Cannot happen: the chunker keeps at most the heap's
                    // capacity in flight. Count the chunk as lost rather
                    // than write out of order.
                    tracing::error!("reorder heap full at chunk {}; chunk lost", s.no);
                    count_lost(&registry, &s);
                    budget.release(s.charge);
                    counters.in_flight.fetch_sub(1, Ordering::AcqRel);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => disconnected = true,
        }
        while heap.peek().is_some_and(|s| s.no == next) {
            let Some(s) = heap.pop() else { break };
            next += 1;
            {
                if let Some(seg) = &mut segment {
                    if progress.should_split(&split, seg.position(), &s.sealed) {
                        match rotate(
                            seg,
                            &session,
                            &registry,
                            &latched_last,
                            &close_tx,
                            &counters,
                            &watch,
                        ) {
                            Ok(p) => {
                                progress = p;
                                unsynced.clear();
                                split_at_seconds.push(t0.elapsed().as_secs_f64());
                            }
                            Err(e) => fail(
                                e,
                                &mut segment,
                                &mut unsynced,
                                &mut storage_errors,
                                &mut retry_at,
                            ),
                        }
                    }
                }
            }
            if let (Some(seg), Some(ret)) = (&segment, &mut retention) {
                if space_pause.is_none() {
                    let need = s.sealed.total_len();
                    if !make_room(ret, need, seg.active_path(), &session, &counters, &shared) {
                        space_pause = Some(need);
                    }
                }
            }
            match &mut segment {
                Some(_) if space_pause.is_some() => count_lost(&registry, &s),
                Some(seg) => match write_sealed(seg, &s, &registry) {
                    Ok(()) => {
                        progress.wrote(&s.sealed);
                        for m in &s.latched {
                            latched_last.insert(m.channel, m.clone());
                        }
                        unsynced.push_back((seg.position(), s.sealed.channel_counts.clone()));
                        counters
                            .segment_bytes
                            .store(seg.position(), Ordering::Relaxed);
                        for &(ch, n) in &s.sealed.channel_counts {
                            if let Some(c) = registry.get(crate::ChannelId(ch)) {
                                c.counters.written.fetch_add(n, Ordering::Relaxed);
                            }
                        }
                        counters.chunks_written.fetch_add(1, Ordering::Relaxed);
                        counters
                            .messages_written
                            .fetch_add(s.sealed.message_count, Ordering::Relaxed);
                        counters
                            .bytes_written
                            .fetch_add(s.sealed.total_len(), Ordering::Relaxed);
                        let bin = (t0.elapsed().as_nanos() / THROUGHPUT_BIN.as_nanos()) as usize;
                        if bytes_per_bin.len() <= bin {
                            bytes_per_bin.resize(bin + 1, 0);
                        }
                        bytes_per_bin[bin] += s.sealed.total_len();
                    }
                    Err(e) => {
                        count_lost(&registry, &s);
                        fail(
                            e,
                            &mut segment,
                            &mut unsynced,
                            &mut storage_errors,
                            &mut retry_at,
                        );
                    }
                },
                None => count_lost(&registry, &s),
            }
            budget.release(s.charge);
            counters.in_flight.fetch_sub(1, Ordering::AcqRel);
            for buf in s.sealed.into_buffers() {
                let _ = recycle.try_send(buf);
            }
        }
        if last_tick.elapsed() >= tick_every {
            last_tick = Instant::now();
            if let Some(ret) = &mut retention {
                while let Ok((path, bytes)) = closed_rx.try_recv() {
                    ret.segment_closed(&path, bytes);
                }
                if let (Some(need), Some(seg)) = (space_pause, &segment) {
                    if make_room(ret, need, seg.active_path(), &session, &counters, &shared) {
                        space_pause = None;
                    }
                }
            }
            if segment.is_none() && retry_at.is_some_and(|t| Instant::now() >= t) {
                match reopen(&session, &registry, &latched_last, &mut retention) {
                    Ok((seg, p)) => {
                        tracing::info!(
                            "recording resumes in {} after the storage failure",
                            seg.active_path().display()
                        );
                        *counters.segment.lock().unwrap_or_else(|p| p.into_inner()) =
                            seg.active_path().to_path_buf();
                        segment = Some(seg);
                        progress = p;
                        retry_at = None;
                        *counters.fault.lock().unwrap_or_else(|p| p.into_inner()) = None;
                        if space_pause.is_none() {
                            shared.paused.store(false, Ordering::Relaxed);
                        }
                    }
                    Err(e) => {
                        tracing::warn!("cannot open a new segment yet: {e}");
                        retry_at = Some(Instant::now() + RETRY_AFTER_FAILURE);
                    }
                }
            }
            let ticked = segment
                .as_mut()
                .map(|seg| seg.tick().map(|_| seg.durable()));
            match ticked {
                Some(Err(e)) => fail(
                    e,
                    &mut segment,
                    &mut unsynced,
                    &mut storage_errors,
                    &mut retry_at,
                ),
                Some(Ok(durable)) => {
                    counters.durable_bytes.store(durable, Ordering::Relaxed);
                    while unsynced.front().is_some_and(|(end, _)| *end <= durable) {
                        unsynced.pop_front();
                    }
                }
                None => {}
            }
        }
    }
    // The last segment goes through the closer too, after the earlier
    // ones, so closes (and recoveries) stay in order.
    if let Some(mut seg) = segment.take() {
        watch.closing(&mut seg);
        let _ = close_tx.send(CloseJob::Finish(Box::new(seg)));
    }
    drop(close_tx);
    if closer.join().is_err() {
        tracing::error!("the segment closer thread panicked");
    }
    let closed_list = std::mem::take(&mut *closed.lock().unwrap_or_else(|p| p.into_inner()));
    storage_errors.append(&mut close_errors.lock().unwrap_or_else(|p| p.into_inner()));
    if let Some(c) = closed_list.last() {
        counters.durable_bytes.store(c.bytes, Ordering::Relaxed);
        counters.segment_bytes.store(c.bytes, Ordering::Relaxed);
        *counters.segment.lock().unwrap_or_else(|p| p.into_inner()) = c.path.clone();
    }
    Ok(SequencerOutput {
        closed: closed_list,
        storage_errors,
        bytes_per_bin,
        split_at_seconds,
    })
}

/// Moves what recovery could not keep of a segment from `written` to
/// `lost`.
fn correct_counts(
    registry: &ChannelRegistry,
    counters: &PipelineCounters,
    written: &BTreeMap<u16, u64>,
    repeats: &BTreeMap<u16, u64>,
    r: &edgerec_format::recover::RecoveryReport,
) {
    for (&ch, &n) in written {
        let Some(c) = registry.get(crate::ChannelId(ch)) else {
            continue;
        };
        let kept = r.kept_messages.get(&c.spec.topic).copied().unwrap_or(0);
        let kept_new = kept.saturating_sub(repeats.get(&ch).copied().unwrap_or(0));
        let gone = n.saturating_sub(kept_new);
        if gone > 0 {
            c.counters.written.fetch_sub(gone, Ordering::Relaxed);
            c.counters.lost.fetch_add(gone, Ordering::Relaxed);
            counters.messages_written.fetch_sub(gone, Ordering::Relaxed);
        }
    }
}

/// How long recording waits after a storage failure before it tries a new
/// segment.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);

/// After a storage failure: a new segment (when retention finds room),
/// opened with the latched channels' last messages.
fn reopen(
    session: &Mutex<Session>,
    registry: &ChannelRegistry,
    latched: &std::collections::BTreeMap<u16, LatchedMessage>,
    retention: &mut Option<crate::retention::Retention>,
) -> Result<(Segment, SegmentProgress), RecorderError> {
    let dir = session
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .dir()
        .to_path_buf();
    if let Some(ret) = retention {
        match ret.make_room(4 << 20, &dir) {
            Ok(crate::retention::Room::Pause { reason, .. }) => {
                return Err(RecorderError::Options(format!("no room yet: {reason}")))
            }
            Ok(crate::retention::Room::Proceed { deleted }) if !deleted.is_empty() => session
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .reload_metadata(),
            Ok(_) => {}
            Err(e) => tracing::warn!("retention: {e}"),
        }
    }
    let mut seg = session
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .open_segment(&registry.all())?;
    let mut progress = SegmentProgress::default();
    write_latched(&mut seg, latched, &mut progress)?;
    Ok((seg, progress))
}

fn write_latched(
    seg: &mut Segment,
    latched: &std::collections::BTreeMap<u16, LatchedMessage>,
    progress: &mut SegmentProgress,
) -> Result<(), RecorderError> {
    if latched.is_empty() {
        return Ok(());
    }
    let size: usize = latched.values().map(|m| m.payload.len() + 64).sum();
    let mut b = ChunkBuilder::new(size);
    for m in latched.values() {
        b.push(
            m.channel,
            m.sequence,
            m.log_time,
            m.publish_time,
            &m.payload,
        );
    }
    let mut plain = ChunkCompressor::new(Compression::None)
        .map_err(|e| RecorderError::Options(format!("latched chunk: {e}")))?;
    let sealed = b.take().seal(&mut plain);
    seg.write_repeats(&sealed)?;
    progress.wrote(&sealed);
    Ok(())
}

/// Asks retention for room for `need` bytes. True: write. False: recording
/// pauses softly (sources run, their messages are dropped and counted, the
/// state is disk-full) until a later call finds room.
fn make_room(
    ret: &mut crate::retention::Retention,
    need: u64,
    active: &Path,
    session: &Mutex<Session>,
    counters: &PipelineCounters,
    shared: &SinkShared,
) -> bool {
    use crate::retention::Room;
    let (ok, deleted, reason) = match ret.make_room(need, active) {
        Ok(Room::Proceed { deleted }) => (true, deleted, None),
        Ok(Room::Pause { reason, deleted }) => (false, deleted, Some(reason)),
        Err(e) => {
            // Retention cannot see the disk; storage's own ENOSPC handling
            // is the backstop, so keep recording.
            tracing::warn!("retention: {e}");
            (true, Vec::new(), None)
        }
    };
    if !deleted.is_empty() {
        let mut sess = session.lock().unwrap_or_else(|p| p.into_inner());
        if deleted.iter().any(|p| p.parent() == Some(sess.dir())) {
            sess.reload_metadata();
        }
    }
    for p in &deleted {
        tracing::info!("retention deleted {}", p.display());
    }
    let mut full = counters.disk_full.lock().unwrap_or_else(|p| p.into_inner());
    match (ok, reason) {
        (true, _) => {
            if full.take().is_some() {
                tracing::info!("space is back: recording resumes");
                shared.paused.store(false, Ordering::Relaxed);
            }
        }
        (false, reason) => {
            if full.is_none() {
                tracing::warn!(
                    "disk full: recording paused, messages are dropped and counted ({})",
                    reason.as_deref().unwrap_or("")
                );
            }
            *full = reason;
            shared.paused.store(true, Ordering::Relaxed);
        }
    }
    ok
}

/// Opens the next segment, hands the current one to the closer, and
/// writes the latched channels' last messages first in the new one.
fn rotate(
    seg: &mut Segment,
    session: &Mutex<Session>,
    registry: &ChannelRegistry,
    latched: &std::collections::BTreeMap<u16, LatchedMessage>,
    close_tx: &mpsc::Sender<CloseJob>,
    counters: &PipelineCounters,
    watch: &SequencerWatch,
) -> Result<SegmentProgress, RecorderError> {
    let all = registry.all();
    let fresh = session
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .open_segment(&all)?;
    let mut old = std::mem::replace(seg, fresh);
    watch.closing(&mut old);
    if close_tx.send(CloseJob::Finish(Box::new(old))).is_err() {
        tracing::error!("segment closer is gone; the previous segment stays .active");
    }
    *counters.segment.lock().unwrap_or_else(|p| p.into_inner()) = seg.active_path().to_path_buf();
    let mut progress = SegmentProgress::default();
    write_latched(seg, latched, &mut progress)?;
    Ok(progress)
}

fn write_sealed(
    seg: &mut Segment,
    s: &Sealed,
    registry: &ChannelRegistry,
) -> Result<(), RecorderError> {
    for &ch in &s.channels {
        if !seg.has_channel(ch) {
            if let Some(c) = registry.get(crate::ChannelId(ch)) {
                seg.add_channel(&c)?;
            }
        }
    }
    seg.write_chunk(&s.sealed)
}

fn count_lost(registry: &ChannelRegistry, s: &Sealed) {
    for &(ch, n) in &s.sealed.channel_counts {
        if let Some(c) = registry.get(crate::ChannelId(ch)) {
            c.counters.lost.fetch_add(n, Ordering::Relaxed);
        }
    }
}
