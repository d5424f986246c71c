//! Sources and the non-blocking sink they push into.
//!
//! Each source gets its own bounded queue, so a source that floods (a
//! camera at max rate) fills only its own queue and cannot make a quiet one
//! (an IMU) drop. A push never blocks: when the queue is full or the memory
//! budget is spent, the message is dropped and counted on its channel.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, OnceLock, RwLock};
use std::thread::Thread;

use crate::budget::MemoryBudget;
use crate::clock::RecordingClock;
use crate::envelope::{ChannelId, Envelope};
use edgerec_health::heartbeat::Heartbeat;

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

/// Counters of one channel, updated by the source and the pipeline.
#[derive(Debug, Default)]
pub struct ChannelCounters {
    /// Messages accepted into the pipeline.
    pub accepted: AtomicU64,
    /// Messages dropped (queue full, budget spent, storage failed).
    pub dropped: AtomicU64,
    /// Payload bytes accepted.
    pub bytes: AtomicU64,
    /// Messages written to a file.
    pub written: AtomicU64,
    /// Messages accepted but lost before reaching a file (storage failed).
    pub lost: AtomicU64,
}

/// A channel known to the recorder.
#[derive(Debug)]
pub struct RegisteredChannel {
    /// Its id.
    pub id: ChannelId,
    /// What the source declared.
    pub spec: ChannelSpec,
    /// Its counters.
    pub counters: ChannelCounters,
}

/// Every channel of every source, in registration order (id = index).
#[derive(Debug, Default)]
pub struct ChannelRegistry {
    channels: RwLock<Vec<Arc<RegisteredChannel>>>,
}

/// Registration refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegisterError {
    /// Another source has that topic.
    #[error("topic {topic} is registered twice (as {first} and {second})")]
    DuplicateTopic {
        /// The topic.
        topic: String,
        /// The type it was first registered with.
        first: String,
        /// The type of the second registration.
        second: String,
    },
    /// MCAP channel ids are u16 and 0 is reserved.
    #[error("more than 65534 channels")]
    TooManyChannels,
}

impl ChannelRegistry {
    /// Adds a channel; ids start at 1 (MCAP reserves nothing, but schema
    /// id 0 means "none", so channel and schema ids are kept equal and >0).
    pub fn register(&self, spec: ChannelSpec) -> Result<Arc<RegisteredChannel>, RegisterError> {
        let mut v = self
            .channels
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(c) = v.iter().find(|c| c.spec.topic == spec.topic) {
            return Err(RegisterError::DuplicateTopic {
                topic: spec.topic,
                first: c.spec.type_name.clone(),
                second: spec.type_name,
            });
        }
        let id = u16::try_from(v.len() + 1).map_err(|_| RegisterError::TooManyChannels)?;
        if id == u16::MAX {
            return Err(RegisterError::TooManyChannels);
        }
        let c = Arc::new(RegisteredChannel {
            id: ChannelId(id),
            spec,
            counters: ChannelCounters::default(),
        });
        v.push(c.clone());
        Ok(c)
    }

    /// The channel with this id.
    pub fn get(&self, id: ChannelId) -> Option<Arc<RegisteredChannel>> {
        let v = self
            .channels
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        v.get((id.0 as usize).checked_sub(1)?).cloned()
    }

    /// All channels.
    pub fn all(&self) -> Vec<Arc<RegisteredChannel>> {
        self.channels
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// Wakes the chunker when it sleeps on empty queues.
///
/// A Dekker-style handshake: a source sets `pending` then reads
/// `sleeping`; the chunker sets `sleeping` then reads `pending`. With both
/// pairs sequentially consistent, at least one side sees the other, so a
/// push can never be left waiting for the park timeout. (Without `pending`,
/// a push between the chunker's last empty poll and its `sleeping` store
/// waited out the whole timeout: 20 ms, more than a 1 MHz source's 16384
/// queue slots, and the bench saw drops.)
#[derive(Debug, Default)]
pub(crate) struct Doorbell {
    pub(crate) sleeping: AtomicBool,
    pub(crate) pending: AtomicBool,
    pub(crate) thread: OnceLock<Thread>,
}

impl Doorbell {
    /// Called by a source after each successful push.
    #[inline]
    pub(crate) fn ring(&self) {
        // Mostly a read: the store only happens once per chunker poll.
        if !self.pending.load(Ordering::Relaxed) {
            self.pending.store(true, Ordering::SeqCst);
        }
        if self.sleeping.load(Ordering::SeqCst) {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
    }

    /// Called by the chunker before it polls the queues.
    #[inline]
    pub(crate) fn clear(&self) {
        if self.pending.load(Ordering::Relaxed) {
            self.pending.store(false, Ordering::SeqCst);
        }
    }

    /// Called by the chunker when its poll found nothing: true when it may
    /// park (no push arrived since [`clear`](Self::clear)); it must then
    /// call [`awake`](Self::awake) after parking.
    #[inline]
    pub(crate) fn may_sleep(&self) -> bool {
        self.sleeping.store(true, Ordering::SeqCst);
        if self.pending.load(Ordering::SeqCst) {
            self.sleeping.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// The chunker is running again.
    #[inline]
    pub(crate) fn awake(&self) {
        self.sleeping.store(false, Ordering::SeqCst);
    }
}

/// Payload buffers the chunker hands back to the source they came from
/// once copied, so small messages cost no malloc/free pair split across two
/// threads (measured: that pair and its arena lock were the largest cost
/// at 1 MHz). A fixed-capacity lock-free queue: capacity is a compile-time
/// constant here, and a full pool just frees the buffer.
///
/// heapless deprecates its mpmc queue because a thread pre-empted inside
/// `enqueue`/`dequeue` can make the others' calls fail until it resumes
/// (heapless issue 583); it stays safe, and is fit where a failed call can
/// be dropped. Here it can: a failed return frees the buffer, a failed take
/// allocates one.
pub(crate) type ReturnPool = heapless::mpmc::Queue<Vec<u8>, 128>;

/// An empty pool.
#[expect(
    deprecated,
    reason = "a failed enqueue/dequeue only costs an allocation here"
)]
pub(crate) fn return_pool() -> ReturnPool {
    ReturnPool::new()
}

/// Largest payload buffer worth returning; bigger ones are few per second
/// and would hold memory the budget does not see.
pub(crate) const RETURN_MAX_CAPACITY: usize = 16 << 10;

/// Shared by all sinks.
#[derive(Debug)]
pub(crate) struct SinkShared {
    pub(crate) budget: Arc<MemoryBudget>,
    pub(crate) registry: Arc<ChannelRegistry>,
    pub(crate) doorbell: Arc<Doorbell>,
    pub(crate) clock: Arc<dyn RecordingClock>,
    /// True while recording is paused (disk full, storage failed): pushes
    /// are dropped and counted.
    pub(crate) paused: AtomicBool,
}

impl std::fmt::Debug for dyn RecordingClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RecordingClock")
    }
}

/// The handle a source pushes envelopes through. Cheap to clone for a
/// source with several threads; all clones feed the same queue.
#[derive(Clone)]
pub struct SourceSink {
    tx: SyncSender<Envelope>,
    returns: Arc<ReturnPool>,
    shared: Arc<SinkShared>,
    channels: Vec<Arc<RegisteredChannel>>,
    /// The source's heartbeat: every push and [`alive`](Self::alive)
    /// beats it; when the source thread ends, the last clone drops it and
    /// the source no longer counts as a stage.
    heartbeat: Option<Arc<Heartbeat>>,
}

/// Why a push did not enter the pipeline (it was counted as a drop).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The memory budget is spent.
    Budget,
    /// This source's queue is full.
    QueueFull,
    /// Recording is paused (storage failed or disk full).
    Paused,
    /// The pipeline has stopped.
    Closed,
    /// The channel id is not one of this source's.
    UnknownChannel,
}

impl std::fmt::Debug for SourceSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceSink")
            .field("channels", &self.channels.len())
            .finish()
    }
}

impl SourceSink {
    pub(crate) fn new(
        tx: SyncSender<Envelope>,
        returns: Arc<ReturnPool>,
        shared: Arc<SinkShared>,
    ) -> Self {
        Self {
            tx,
            returns,
            shared,
            channels: Vec::new(),
            heartbeat: None,
        }
    }

    pub(crate) fn set_heartbeat(&mut self, heartbeat: Arc<Heartbeat>) {
        self.heartbeat = Some(heartbeat);
    }

    /// Tells the watchdog this source is alive without pushing: a source
    /// waiting for input (a quiet ROS 2 topic, a camera between frames)
    /// calls it from its loop at least once per stage deadline. Pushing
    /// does the same.
    #[inline]
    pub fn alive(&self) {
        if let Some(h) = &self.heartbeat {
            h.beat();
        }
    }

    /// Declares a channel and returns its id.
    pub fn register(&mut self, spec: ChannelSpec) -> Result<ChannelId, RegisterError> {
        let c = self.shared.registry.register(spec)?;
        let id = c.id;
        self.channels.push(c);
        Ok(id)
    }

    /// An empty buffer with room for `capacity` bytes: one the pipeline
    /// handed back when available, else a new one. Payloads built in it and
    /// pushed may come back here once written into a chunk.
    #[inline]
    pub fn buffer(&self, capacity: usize) -> Vec<u8> {
        if capacity <= RETURN_MAX_CAPACITY {
            if let Some(mut b) = self.returns.dequeue() {
                b.clear();
                if b.capacity() < capacity {
                    b.reserve(capacity);
                }
                return b;
            }
        }
        Vec::with_capacity(capacity)
    }

    /// Now on the recording clock.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.shared.clock.now_ns()
    }

    #[inline]
    fn channel(&self, id: ChannelId) -> Option<&RegisteredChannel> {
        // Sources have few channels; a scan beats a map here.
        self.channels.iter().find(|c| c.id == id).map(|c| &**c)
    }

    /// True when a message of `bytes` would fit in the memory budget now
    /// and recording is not paused. A load generator uses it to wait
    /// instead of offering what would be dropped; real sources just push.
    #[inline]
    pub fn has_room(&self, bytes: u64) -> bool {
        self.alive();
        !self.shared.paused.load(Ordering::Relaxed)
            && self.shared.budget.used() + bytes <= self.shared.budget.limit()
    }

    /// Pushes an envelope; never blocks. On failure the message is counted
    /// as dropped on its channel and the returned reason says why.
    #[inline]
    pub fn push(&self, env: Envelope) -> Result<(), Dropped> {
        let channel = env.channel;
        match self.try_push(env) {
            Ok(()) => Ok(()),
            Err((why, _)) => {
                if let Some(ch) = self.channel(channel) {
                    ch.counters.dropped.fetch_add(1, Ordering::Relaxed);
                }
                Err(why)
            }
        }
    }

    /// Like [`push`](Self::push), but a refused envelope is handed back
    /// and NOT counted as a drop: for a load generator that waits and
    /// offers it again. A real source uses `push`.
    #[inline]
    pub fn try_push(&self, env: Envelope) -> Result<(), (Dropped, Envelope)> {
        self.alive();
        let Some(ch) = self.channel(env.channel) else {
            return Err((Dropped::UnknownChannel, env));
        };
        if self.shared.paused.load(Ordering::Relaxed) {
            return Err((Dropped::Paused, env));
        }
        let charge = env.charge();
        if !self.shared.budget.try_reserve(charge) {
            return Err((Dropped::Budget, env));
        }
        let len = env.payload.len() as u64;
        match self.tx.try_send(env) {
            Ok(()) => {
                ch.counters.accepted.fetch_add(1, Ordering::Relaxed);
                ch.counters.bytes.fetch_add(len, Ordering::Relaxed);
                self.shared.doorbell.ring();
                Ok(())
            }
            Err(TrySendError::Full(env)) => {
                self.shared.budget.release(charge);
                Err((Dropped::QueueFull, env))
            }
            Err(TrySendError::Disconnected(env)) => {
                self.shared.budget.release(charge);
                Err((Dropped::Closed, env))
            }
        }
    }
}

/// Set when the recorder stops; sources poll it.
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// A flag not set.
    pub fn new() -> Self {
        Self::default()
    }
    /// True once stop was requested.
    #[inline]
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
    /// Requests stop.
    pub fn set(&self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Why a source ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A channel could not be registered.
    #[error(transparent)]
    Register(#[from] RegisterError),
    /// Anything else, with its reason.
    #[error("{0}")]
    Other(String),
}

/// Something that produces messages: synthetic sensors, ROS 2 topics,
/// cameras. `run` is called on a thread of its own and returns when `stop`
/// is set. It must never block on the pipeline: [`SourceSink::push`] does
/// not.
pub trait Source: Send + 'static {
    /// A short name for logs and heartbeats.
    fn name(&self) -> String;
    /// Registers the source's channels. Called before any source runs, so
    /// every channel is known when the first segment opens.
    fn register(&mut self, sink: &mut SourceSink) -> Result<(), SourceError>;
    /// Produces messages until `stop` is set.
    fn run(self: Box<Self>, sink: SourceSink, stop: StopFlag) -> Result<(), SourceError>;
}

/// The receiving end the chunker polls, and where it returns payloads.
pub(crate) type SourceQueue = (Receiver<Envelope>, Arc<ReturnPool>);
