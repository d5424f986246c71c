//! What the pipeline needs to know, in its own terms, and what it reports
//! to the health side.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use edgerec_format::bag::MetadataVersion;
use edgerec_format::chunk::Compression;
use edgerec_health::heartbeat::Heartbeats;
use edgerec_source::SupervisorOptions;
use edgerec_storage::WriterOptions;

/// Everything the pipeline needs to know.
#[derive(Debug, Clone)]
pub struct RecorderOptions {
    /// Where session directories are created.
    pub root: PathBuf,
    /// Session name prefix.
    pub session_prefix: String,
    /// The bag directory itself (rosbag2's `-o`), in place of a new
    /// `<root>/<prefix>_<time>` directory; it must not exist yet.
    pub session_dir: Option<PathBuf>,
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
    /// Messages each channel's queue holds.
    pub queue_capacity: usize,
    /// The MCAP header's library string.
    pub library: String,
    /// When a segment is split.
    pub split: SplitPolicy,
    /// Disk-space limits; None records until the disk is full.
    pub retention: Option<crate::retention::RetentionPolicy>,
    /// How sources are restarted.
    pub supervisor: SupervisorOptions,
    /// `triggered` and `mixed`: the events stage's plan; `None` records
    /// everything continuously.
    pub triggers: Option<crate::events::TriggerPlan>,
    /// Heartbeats and per-segment records from the rest of the recorder.
    pub watch: Watch,
}

/// What the pipeline reports to the health side, and what it asks of it.
#[derive(Clone, Default)]
pub struct Watch {
    /// Where every stage registers a heartbeat (`chunker`, `compressor N`,
    /// `storage`, `closer`, `sources`), each with `deadline`; the
    /// watchdogs stop being fed when one goes quiet for longer or dies.
    /// None: not watched by the health side (the recorder still watches
    /// its stages itself to stop without hanging).
    pub heartbeats: Option<Heartbeats>,
    /// How long a stage may go without progress.
    pub deadline: Duration,
    /// Called once per segment, just before it is closed: Metadata records
    /// that describe the whole segment (the clock's quality over it).
    pub segment_metadata: Option<SegmentMetadataFn>,
    /// Called with what the recorder announces: each file it has closed
    /// for good (a segment, after `metadata.yaml` names it; an event
    /// clip's bag directory) and each event's window as it fires and
    /// grows, from the recorder's own threads: it must hand it on and
    /// return (offload queues it; the recorder never waits on offload).
    pub on_announce: Option<AnnounceFn>,
    /// What offload has at the store, for retention (what was sent goes
    /// first; each file deleted before it was sent is counted); `None`
    /// with offload off.
    pub offload: Option<crate::retention::OffloadAware>,
    /// Test builds only: switches that make a stage hang or panic.
    #[cfg(feature = "fault-injection")]
    pub faults: Option<Arc<crate::stage::FaultSwitch>>,
}

/// What the recorder announces, for [`Watch::on_announce`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announced {
    /// The segment file, or the clip's bag directory (an event: the
    /// directory its clip is written to).
    pub path: PathBuf,
    /// Its bytes (a clip: its segment's; an event: 0).
    pub bytes: u64,
    /// What it is.
    pub kind: AnnouncedKind,
    /// The log time it covers, ns since the epoch: a segment's first
    /// message (0: not known, a file recovered after a failure), a clip's
    /// or an event's window start (pre-roll included).
    pub start_ns: u64,
    /// Its last message; a window's end (post-roll included; `u64::MAX`
    /// while an event's condition still holds).
    pub end_ns: u64,
}

/// What an [`Announced`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnnouncedKind {
    /// A segment of the continuous recording, closed for good.
    Segment,
    /// An event clip (a bag directory of its own under `events/`),
    /// closed for good.
    Clip,
    /// An event fired or its window grew; its clip is announced when it
    /// closes. Announced again, with the same path, as the window grows.
    Event,
}

/// See [`Watch::on_announce`].
pub type AnnounceFn = Arc<dyn Fn(Announced) + Send + Sync>;

/// Tells `watch`'s [`Watch::on_announce`], if any.
pub(crate) fn announce(
    watch: &Watch,
    path: &std::path::Path,
    bytes: u64,
    kind: AnnouncedKind,
    span: (u64, u64),
) {
    if let Some(f) = &watch.on_announce {
        f(Announced {
            path: path.to_path_buf(),
            bytes,
            kind,
            start_ns: span.0,
            end_ns: span.1,
        });
    }
}

/// See [`Watch::segment_metadata`].
pub type SegmentMetadataFn = Arc<dyn Fn() -> Vec<(String, BTreeMap<String, String>)> + Send + Sync>;

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("heartbeats", &self.heartbeats.is_some())
            .field("deadline", &self.deadline)
            .field("segment_metadata", &self.segment_metadata.is_some())
            .field("on_announce", &self.on_announce.is_some())
            .field("offload", &self.offload)
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
            session_dir: None,
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
            retention: Some(crate::retention::RetentionPolicy {
                // Event clips are kept for `triggers.keep`; 0 = forever.
                clip_keep: (!cfg.triggers.keep.is_zero()).then_some(cfg.triggers.keep),
                ..(&cfg.retention).into()
            }),
            supervisor: SupervisorOptions {
                backoff_min: cfg.sources.restart_backoff_min,
                backoff_max: cfg.sources.restart_backoff_max,
                deadline: cfg.health.stage_deadline,
            },
            triggers: crate::events::TriggerPlan::from_config(cfg),
            watch: Watch {
                deadline: cfg.health.stage_deadline,
                ..Watch::default()
            },
        }
    }
}
