//! The recording pipeline: from the sources' channel queues to segments on
//! disk. Sources are defined in `edgerec-source`; this crate consumes them.
//!
//! One thread per stage, each watched by a heartbeat:
//! - the [`chunker`] drains every channel's queue round-robin, assigns
//!   per-channel sequence numbers, copies each payload once into the open
//!   chunk and hands full (or aged) chunks to the pool, numbered;
//! - the [`compressor`]s seal chunks (compress + CRC) in any order;
//! - the [`sequencer`] (the `storage` stage) puts sealed chunks back in
//!   number order, writes them through the segment to the storage writer,
//!   splits segments, asks retention for room and keeps the drop ledger;
//! - the [`closer`] finishes split segments (summary, fdatasync, rename,
//!   0444, `metadata.yaml`) while the next one is written.
//!
//! A stage that panics is marked dead ([`stage`]): the recording enters
//! `fault`, every other stage stops at once, the open segment is left
//! `.active` for the next start to recover, and [`Recorder::stop`] returns
//! within a stage deadline instead of hanging.
//!
//! ```no_run
//! use std::sync::Arc;
//! use edgerec_recorder::{Recorder, RecorderOptions};
//! use edgerec_source::{Source, SystemClock};
//! use edgerec_synthetic::SyntheticSource;
//!
//! let cfg = edgerec_config::Config::load("config/demo.toml".as_ref()).unwrap();
//! let sources: Vec<Box<dyn Source>> = SyntheticSource::from_config(&cfg.sources.synthetic);
//! let rec = Recorder::start(RecorderOptions::from_config(&cfg), sources, Arc::new(SystemClock)).unwrap();
//! std::thread::sleep(std::time::Duration::from_secs(1));
//! let report = rec.stop().unwrap();
//! println!("{} messages in {}", report.status.messages_written, report.session_dir.display());
//! ```
#![deny(missing_docs)]

use std::path::PathBuf;

pub mod chunker;
pub mod closer;
pub mod compressor;
mod counters;
mod drops;
pub mod events;
pub mod inventory;
pub mod options;
pub mod recorder;
pub mod retention;
pub mod segment;
pub mod sequencer;
pub mod stage;
pub mod status;

pub use options::{
    AnnounceFn, Announced, AnnouncedKind, RecorderOptions, SegmentMetadataFn, SplitPolicy, Watch,
};
pub use recorder::{Recorder, RecordingReport, StatusHandle, THROUGHPUT_BIN};
pub use sequencer::MAX_CHUNKS_IN_FLIGHT;
pub use status::{ChannelStatus, RecorderState, RecorderStatus};

/// Errors of starting and running a recording.
#[derive(Debug, thiserror::Error)]
pub enum RecorderError {
    /// A file-system operation on a path failed.
    #[error("{path}: cannot {what}: {source}")]
    Path {
        /// The path.
        path: PathBuf,
        /// What was attempted.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The storage writer failed (its message names the file).
    #[error("{source}")]
    Storage {
        /// The segment file.
        path: PathBuf,
        /// The storage error.
        source: edgerec_storage::StorageError,
    },
    /// A write failed while a segment was being closed; the file was cut
    /// at its last good block and left `.active` for recovery.
    #[error("{path}: a write failed while closing the segment; the file was cut at byte {kept} and left for `edgerec recover`")]
    ClosedAfterFailure {
        /// The segment file.
        path: PathBuf,
        /// Bytes kept.
        kept: u64,
    },
    /// Framing the MCAP file failed.
    #[error("{path}: {source}")]
    Format {
        /// The segment file.
        path: PathBuf,
        /// The format error.
        source: edgerec_format::FormatError,
    },
    /// An option that must be positive is zero.
    #[error("{option} must be positive")]
    ZeroOption {
        /// The option (`chunk_size`, `queue_capacity`).
        option: &'static str,
    },
    /// A compressor could not be set up.
    #[error("{name} cannot start: {source}")]
    Compressor {
        /// Which one (`compressor 2`).
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// Retention found no room for a new segment yet.
    #[error("no room for a new segment yet: {reason}")]
    NoRoom {
        /// Retention's reason.
        reason: String,
    },
    /// A thread could not be started.
    #[error("cannot start thread {name}: {source}")]
    Thread {
        /// The thread.
        name: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A stage of the pipeline panicked: the recording ended in fault and
    /// its open segment was left `.active` for recovery.
    #[error("stage {stage} died: {message}; the open segment is left .active for recovery at the next start")]
    StageDied {
        /// The stage (`chunker`, `compressor 1`, `storage`, `closer`).
        stage: String,
        /// Its panic message.
        message: String,
    },
    /// A `[[trigger]]` rule's condition does not parse.
    #[error("{0}")]
    Trigger(Box<edgerec_config::ConfigError>),
    /// Stages that stopped making progress and did not end when asked.
    #[error("stages {} did not end (silent past their deadline); their threads are left behind", stages.join(", "))]
    StagesStuck {
        /// Their names.
        stages: Vec<String>,
    },
}
