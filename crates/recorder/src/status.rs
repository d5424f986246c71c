//! The status snapshot: what the live line, the status socket and the ROS 2
//! status topic show.

use std::path::PathBuf;
use std::time::Duration;

/// The recorder's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecorderState {
    /// Writing.
    Recording,
    /// Draining after a stop request.
    Stopping,
    /// Finished.
    Stopped,
    /// Storage failed (sources run, their data is dropped and counted),
    /// or a stage died (the recording is ending).
    Fault,
    /// No space left within the retention limits and nothing deletable:
    /// sources run, their data is dropped and counted; resumes by itself.
    DiskFull,
}

impl RecorderState {
    /// Lower-case name.
    pub fn as_str(&self) -> &'static str {
        match self {
            RecorderState::Recording => "recording",
            RecorderState::Stopping => "stopping",
            RecorderState::Stopped => "stopped",
            RecorderState::Fault => "fault",
            RecorderState::DiskFull => "disk-full",
        }
    }
}

/// One channel's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelStatus {
    /// Topic.
    pub topic: String,
    /// `pkg/msg/Type`.
    pub type_name: String,
    /// Accepted into the pipeline.
    pub accepted: u64,
    /// Dropped at the source (queue full, budget, paused).
    pub dropped: u64,
    /// Accepted but lost to a storage failure.
    pub lost: u64,
    /// Lost before reaching edgerec, as the source's transport reports it
    /// (DDS `SAMPLE_LOST`/`SAMPLE_REJECTED`).
    pub upstream_lost: u64,
    /// Written into a file.
    pub written: u64,
    /// Payload bytes accepted.
    pub bytes: u64,
}

/// A point-in-time view of the recorder.
#[derive(Debug, Clone)]
pub struct RecorderStatus {
    /// State.
    pub state: RecorderState,
    /// Storage backend (`io_uring+O_DIRECT`, ...).
    pub backend: String,
    /// Why a better backend was refused.
    pub fallback_reason: Option<String>,
    /// Bag directory.
    pub session_dir: PathBuf,
    /// The segment being written (or the last closed one).
    pub segment: PathBuf,
    /// Time since start.
    pub elapsed: Duration,
    /// Bytes handed to storage.
    pub bytes_written: u64,
    /// Bytes of the current segment known durable.
    pub durable_bytes: u64,
    /// Bytes of the current segment handed to storage: with
    /// `durable_bytes`, what a power cut now would lose beyond memory.
    pub segment_bytes: u64,
    /// Chunks written.
    pub chunks_written: u64,
    /// Messages written.
    pub messages_written: u64,
    /// Memory budget in use.
    pub budget_used: u64,
    /// Highest budget use.
    pub budget_peak: u64,
    /// Budget limit.
    pub budget_limit: u64,
    /// The storage fault, when state is Fault.
    pub fault: Option<String>,
    /// Why recording is paused for space, when state is DiskFull.
    pub disk_full: Option<String>,
    /// Segments and clips retention deleted before offload sent them
    /// (offload on): data that never reached the store.
    pub deleted_unsent: u64,
    /// Segments and clips retention deleted because they were at the
    /// store.
    pub deleted_sent: u64,
    /// Per channel.
    pub channels: Vec<ChannelStatus>,
    /// Per source, from the supervisor.
    pub sources: Vec<edgerec_source::SourceStatus>,
    /// Pushes refused because no channel has their id (a source's bug).
    pub unknown_channel_pushes: u64,
    /// The pipeline stage that died, when one did.
    pub stage_died: Option<crate::stage::StageDeath>,
    /// Event triggers; `None` in `continuous` mode.
    pub events: Option<crate::events::EventsStatus>,
    /// The operator's pause: who and since when; `None` while recording.
    pub paused: Option<edgerec_health::status::PauseStatus>,
}

impl RecorderStatus {
    /// Messages dropped or lost over all channels.
    pub fn drops(&self) -> u64 {
        self.channels.iter().map(|c| c.dropped + c.lost).sum()
    }
    /// Messages accepted over all channels.
    pub fn accepted(&self) -> u64 {
        self.channels.iter().map(|c| c.accepted).sum()
    }
}
