//! Channels: what a source declares about a topic, and what the recorder
//! keeps for it (its id, counters and queue).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::queue::ChannelQueue;
use crate::returns::ReturnPool;

/// Index of a channel in the recorder's table; also its MCAP channel id
/// and schema id. Ids start at 1 and are never reused within a recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChannelId(pub u16);

/// What a source declares about one of its channels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelSpec {
    /// Topic name.
    pub topic: String,
    /// `pkg/msg/Type`.
    pub type_name: String,
    /// Message encoding (`cdr`).
    pub message_encoding: String,
    /// Schema encoding (`ros2msg`).
    pub schema_encoding: String,
    /// The schema text (rosbag2's concatenated definition).
    pub schema: Vec<u8>,
    /// Channel metadata (`offered_qos_profiles`).
    pub metadata: BTreeMap<String, String>,
    /// Transient-local: the last message is repeated in each new segment.
    pub latched: bool,
}

impl ChannelSpec {
    /// True when `other` describes the same data: same topic, type,
    /// encodings and schema. A source restarted after a failure declares
    /// its channels again; such a declaration gets the channel it had.
    /// Metadata and the latched flag of the first declaration are kept.
    pub fn same_data(&self, other: &ChannelSpec) -> bool {
        self.topic == other.topic
            && self.type_name == other.type_name
            && self.message_encoding == other.message_encoding
            && self.schema_encoding == other.schema_encoding
            && self.schema == other.schema
    }
}

/// Counters of one channel, updated by the sink and the pipeline.
#[derive(Debug, Default)]
pub struct ChannelCounters {
    /// Messages accepted into the pipeline.
    pub accepted: AtomicU64,
    /// Messages refused at the sink (queue full, budget spent, paused,
    /// stopped).
    pub dropped: AtomicU64,
    /// Payload bytes accepted.
    pub bytes: AtomicU64,
    /// Messages written to a file.
    pub written: AtomicU64,
    /// Messages accepted but lost before reaching a file (storage failed).
    pub lost: AtomicU64,
    /// Messages the source's own transport says it lost before they
    /// reached edgerec (DDS `SAMPLE_LOST` and `SAMPLE_REJECTED`); set by
    /// the source, not counted in [`missing`](Self::missing), which is
    /// edgerec's own.
    pub upstream_lost: AtomicU64,
}

impl ChannelCounters {
    /// Dropped plus lost: every message of this channel that is not in a
    /// file although the source offered it.
    pub fn missing(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed) + self.lost.load(Ordering::Relaxed)
    }
}

/// A channel known to the recorder.
pub struct Channel {
    /// Its id.
    pub id: ChannelId,
    /// What the source declared first.
    pub spec: ChannelSpec,
    /// Its counters.
    pub counters: ChannelCounters,
    /// Its own bounded queue: a flooding channel fills only this one.
    pub(crate) queue: ChannelQueue,
    /// Bytes this channel holds in its guaranteed share of the budget
    /// (see [`crate::budget`]).
    pub(crate) floor_bytes: AtomicU64,
    /// Small payload buffers on their way back to this channel's source;
    /// made when the first one comes back (a channel of large messages
    /// never has one).
    pub(crate) returns: std::sync::OnceLock<Box<ReturnPool>>,
    /// Its source marks key units ([`crate::SourceSink::push_key`]): a
    /// video channel. The recorder then cuts segments just before one of
    /// them, so every segment of it starts where a decoder can.
    pub(crate) keyed: std::sync::atomic::AtomicBool,
}

impl Channel {
    /// True when its source marks key units (a video channel).
    pub fn is_keyed(&self) -> bool {
        self.keyed.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("id", &self.id)
            .field("topic", &self.spec.topic)
            .field("type_name", &self.spec.type_name)
            .finish_non_exhaustive()
    }
}
