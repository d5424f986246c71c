//! What the stages update and the status reads.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::Mutex;

/// Counters and state shared by the stages.
#[derive(Debug, Default)]
pub(crate) struct PipelineCounters {
    pub(crate) bytes_written: AtomicU64,
    pub(crate) durable_bytes: AtomicU64,
    /// Bytes of the current segment handed to storage.
    pub(crate) segment_bytes: AtomicU64,
    pub(crate) chunks_written: AtomicU64,
    pub(crate) messages_written: AtomicU64,
    /// Chunks handed to the compressors and not yet written.
    pub(crate) in_flight: AtomicUsize,
    /// The storage failure being recovered from.
    pub(crate) fault: Mutex<Option<String>>,
    /// Why recording is paused for space (retention), when it is.
    pub(crate) disk_full: Mutex<Option<String>>,
    /// The segment being written.
    pub(crate) segment: Mutex<PathBuf>,
    /// Segments and clips retention deleted before offload sent them.
    pub(crate) deleted_unsent: AtomicU64,
    /// Segments and clips retention deleted because they were at the
    /// store.
    pub(crate) deleted_sent: AtomicU64,
    pub(crate) stopping: AtomicBool,
    /// The operator asked for a split (`edgerec ctl split`, rosbag2's
    /// `~/split_bagfile`); the sequencer takes it.
    pub(crate) split_requested: AtomicBool,
    /// The sequencer wants to cut the segment and there are video
    /// channels: the chunker picks the point, just before their key units,
    /// and marks the chunk that starts the next segment.
    pub(crate) cut_wanted: AtomicBool,
    /// Segments opened so far: the chunker makes at most one cut per
    /// segment.
    pub(crate) segment_no: AtomicU64,
    /// The log time at which the open segment reaches `max_duration`
    /// (u64::MAX until its first message is written): with video channels
    /// the chunker starts the cut when a message reaches it, so the key
    /// units come at the limit rather than a chunk later.
    pub(crate) cut_deadline_ns: AtomicU64,
    /// The chunker has started the open segment's cut.
    pub(crate) cut_started: AtomicBool,
}

impl PipelineCounters {
    /// Counters of a pipeline that has not written anything yet.
    pub(crate) fn new() -> Self {
        PipelineCounters {
            cut_deadline_ns: AtomicU64::new(u64::MAX),
            ..Default::default()
        }
    }
}
