//! The handle a source registers channels and pushes messages through.
//!
//! A push never blocks: a message that finds its channel's queue full, or
//! no room in the budget for it (see [`crate::budget`] for how the budget
//! is shared between channels), is refused and counted as dropped on its
//! channel. The sink is `Clone + Send + Sync`: a source with several
//! threads, or callbacks on threads it does not own (DDS listeners,
//! GStreamer pad probes), registers and pushes through any clone, and all
//! clones see every channel the moment it is registered.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::channel::{Channel, ChannelId, ChannelSpec};
use crate::clock::coarse_ns;
use crate::envelope::Envelope;
use crate::error::RegisterError;
use crate::intake::Intake;
use crate::queue::{Charge, Queued};
use crate::returns::RETURN_MAX_CAPACITY;

/// Why a push did not enter the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// Neither the shared budget nor the channel's share of the reserve
    /// has room.
    Budget,
    /// This channel's queue is full.
    QueueFull,
    /// Recording is paused (storage failed or disk full).
    Paused,
    /// The operator paused recording; not counted as a drop.
    Held,
    /// The recording has ended.
    Closed,
    /// No channel has this id (counted on the table, not a channel).
    UnknownChannel,
}

impl Dropped {
    /// Lower-case name for logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Dropped::Budget => "memory budget spent",
            Dropped::QueueFull => "queue full",
            Dropped::Paused => "recording paused",
            Dropped::Held => "recording paused by the operator",
            Dropped::Closed => "recording ended",
            Dropped::UnknownChannel => "unknown channel",
        }
    }
}

/// When a source last showed it was alive (a push or
/// [`SourceSink::alive`]), in ns on the coarse monotonic clock. The
/// supervisor reads it to tell a stalled source from a quiet one.
#[derive(Debug, Default)]
pub struct Liveness {
    last_ns: AtomicU64,
}

impl Liveness {
    /// A liveness stamped now.
    pub fn new() -> Self {
        let l = Self::default();
        l.beat();
        l
    }
    /// Stamps now.
    #[inline]
    pub fn beat(&self) {
        self.last_ns.store(coarse_ns(), Ordering::Relaxed);
    }
    /// Time since the last beat.
    pub fn age(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(
            coarse_ns().saturating_sub(self.last_ns.load(Ordering::Relaxed)),
        )
    }
}

/// The handle a source pushes envelopes through.
#[derive(Clone)]
pub struct SourceSink {
    intake: Arc<Intake>,
    live: Arc<Liveness>,
}

impl std::fmt::Debug for SourceSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceSink")
            .field("channels", &self.intake.table.len())
            .finish()
    }
}

impl SourceSink {
    pub(crate) fn new(intake: Arc<Intake>) -> Self {
        Self {
            intake,
            live: Arc::new(Liveness::new()),
        }
    }

    /// A sink on the same intake that beats `live`: the supervisor gives
    /// each run of a source its own.
    pub fn with_liveness(&self, live: Arc<Liveness>) -> Self {
        Self {
            intake: self.intake.clone(),
            live,
        }
    }

    /// Tells the supervisor this source is alive without pushing: a source
    /// waiting for input (a quiet topic, a camera between frames) calls it
    /// from its loop at least once per stage deadline. Pushing does the
    /// same.
    #[inline]
    pub fn alive(&self) {
        self.live.beat();
    }

    /// Declares a channel and returns its id; see
    /// [`crate::ChannelTable::register`]. Any clone, any time: the channel
    /// is known to every clone and to the chunker at once.
    pub fn register(&self, spec: ChannelSpec) -> Result<ChannelId, RegisterError> {
        self.intake.table.register(spec)
    }

    /// An empty buffer with room for `capacity` bytes for a message of
    /// `channel`: one the pipeline handed back when available, else a new
    /// one.
    #[inline]
    pub fn buffer(&self, channel: ChannelId, capacity: usize) -> Vec<u8> {
        if capacity <= RETURN_MAX_CAPACITY {
            if let Some(mut b) = self
                .intake
                .table
                .get(channel)
                .and_then(|c| c.returns.get()?.dequeue())
            {
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
        self.intake.clock.now_ns()
    }

    /// The offset from a kernel clock to the recording clock, sampled now
    /// (exact for realtime stamps on a realtime recording clock): how a
    /// source carries kernel timestamps to its log times.
    #[inline]
    pub fn clock_map(&self, base: crate::clock::KernelClock) -> crate::clock::ClockMap {
        let clock = &self.intake.clock;
        crate::clock::ClockMap::sample(base, clock.is_realtime(), || clock.now_ns())
    }

    /// True when a message of `bytes` would fit in the shared budget now
    /// and recording is not paused. A load generator uses it to wait
    /// instead of offering what would be dropped; real sources just push.
    #[inline]
    pub fn has_room(&self, bytes: u64) -> bool {
        self.alive();
        !self.intake.is_paused() && !self.intake.is_held() && self.intake.budget.has_room(bytes)
    }

    /// Reports how many messages of `channel` its transport has lost so
    /// far, before they reached the source (a running total; a smaller
    /// value than the last one is ignored).
    pub fn set_upstream_lost(&self, channel: ChannelId, total: u64) {
        if let Some(ch) = self.intake.table.get(channel) {
            ch.counters
                .upstream_lost
                .fetch_max(total, Ordering::Relaxed);
        }
    }

    /// Pushes an envelope; never blocks. On failure the message is counted
    /// as dropped on its channel (or, for an unknown id, on the table) and
    /// the returned reason says why.
    #[inline]
    pub fn push(&self, env: Envelope) -> Result<(), Dropped> {
        self.push_marked(env, false)
    }

    /// Like [`push`](Self::push), for a message of a video channel, saying
    /// whether it is a key unit (a keyframe with its parameter sets). The
    /// first call makes the channel keyed: from then on the recorder cuts
    /// segments just before one of its key units (asking for one through
    /// [`key_unit_requests`](Self::key_unit_requests)), so each segment of
    /// it decodes on its own.
    #[inline]
    pub fn push_video(&self, env: Envelope, key: bool) -> Result<(), Dropped> {
        if let Some(ch) = self.intake.table.get(env.channel) {
            if !ch.keyed.load(Ordering::Relaxed) {
                ch.keyed.store(true, Ordering::Relaxed);
            }
        }
        self.push_marked(env, key)
    }

    /// How many times the recorder has asked for key units (see
    /// [`Intake::request_key_units`]); a video source compares it with the
    /// last value it saw.
    #[inline]
    pub fn key_unit_requests(&self) -> u64 {
        self.intake.key_unit_requests()
    }

    #[inline]
    fn push_marked(&self, env: Envelope, key: bool) -> Result<(), Dropped> {
        let channel = env.channel;
        match self.try_push_marked(env, key) {
            Ok(()) => Ok(()),
            Err((Dropped::Held, _)) => Err(Dropped::Held),
            Err((why, _)) => {
                match self.intake.table.get(channel) {
                    Some(ch) => {
                        ch.counters.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                    None => self.intake.table.count_unknown(),
                }
                Err(why)
            }
        }
    }

    /// Pushes a copy of `bytes` as a message of `channel`, charging the
    /// memory budget *before* the copy is made: a message the budget, a
    /// pause or an unknown channel refuses costs no allocation, however
    /// large a peer made it. Refusals are counted as [`push`](Self::push)
    /// counts them.
    pub fn push_copy(
        &self,
        channel: ChannelId,
        log_time: u64,
        publish_time: u64,
        bytes: &[u8],
    ) -> Result<(), Dropped> {
        self.alive();
        let intake = &*self.intake;
        let Some(ch) = intake.table.get(channel) else {
            intake.table.count_unknown();
            return Err(Dropped::UnknownChannel);
        };
        let refuse = |why: Dropped| {
            ch.counters.dropped.fetch_add(1, Ordering::Relaxed);
            Err(why)
        };
        match self.gate(ch) {
            Ok(()) => {}
            Err(Dropped::Held) => return Err(Dropped::Held),
            Err(why) => return refuse(why),
        }
        let want = (bytes.len() + std::mem::size_of::<Envelope>()) as u64;
        let Some(first) = self.admit(ch, want) else {
            return refuse(Dropped::Budget);
        };
        let mut payload = self.buffer(channel, bytes.len());
        payload.extend_from_slice(bytes);
        let env = Envelope {
            channel,
            log_time,
            publish_time,
            payload,
        };
        // A reused buffer can be larger than asked for: charge all of it.
        let charge = if env.charge() == want {
            first
        } else {
            intake.release(ch, first);
            match self.admit(ch, env.charge()) {
                Some(c) => c,
                None => return refuse(Dropped::Budget),
            }
        };
        match self.enqueue(ch, env, charge, false) {
            Ok(()) => Ok(()),
            Err((why, _)) => refuse(why),
        }
    }

    /// Like [`push`](Self::push), but a refused envelope is handed back
    /// and NOT counted as a drop: for a load generator that waits and
    /// offers it again. A real source uses `push`.
    #[inline]
    pub fn try_push(&self, env: Envelope) -> Result<(), (Dropped, Envelope)> {
        self.try_push_marked(env, false)
    }

    #[inline]
    fn try_push_marked(&self, env: Envelope, key: bool) -> Result<(), (Dropped, Envelope)> {
        self.alive();
        let intake = &*self.intake;
        let Some(ch) = intake.table.get(env.channel) else {
            return Err((Dropped::UnknownChannel, env));
        };
        if let Err(why) = self.gate(ch) {
            return Err((why, env));
        }
        let bytes = env.charge();
        let charge = match self.admit(ch, bytes) {
            Some(c) => c,
            None => return Err((Dropped::Budget, env)),
        };
        self.enqueue(ch, env, charge, key)
    }

    /// Whether `ch` takes messages now: held (an operator's pause), paused
    /// or closed refuse them.
    #[inline]
    fn gate(&self, ch: &Channel) -> Result<(), Dropped> {
        let intake = &*self.intake;
        // A latched (transient-local) channel is kept through an
        // operator's pause: its message (a /tf_static) is sent once, and
        // letting it go would lose it for the rest of the recording
        // (rosbag2 issue 1302 loses it to --start-paused).
        if intake.held.load(Ordering::Relaxed) && !ch.spec.latched {
            return Err(Dropped::Held);
        }
        if intake.paused.load(Ordering::Relaxed) {
            return Err(Dropped::Paused);
        }
        if intake.closed.load(Ordering::Relaxed) {
            return Err(Dropped::Closed);
        }
        Ok(())
    }

    /// Queues an envelope already charged to the budget; a full queue
    /// gives the charge back and the envelope with it.
    #[inline]
    fn enqueue(
        &self,
        ch: &Channel,
        env: Envelope,
        charge: Charge,
        key: bool,
    ) -> Result<(), (Dropped, Envelope)> {
        let len = env.payload.len() as u64;
        match ch.queue.push(Queued { env, charge, key }) {
            Ok(()) => {
                ch.counters.accepted.fetch_add(1, Ordering::Relaxed);
                ch.counters.bytes.fetch_add(len, Ordering::Relaxed);
                self.intake.doorbell.ring();
                Ok(())
            }
            Err(q) => {
                self.intake.release(ch, q.charge);
                Err((Dropped::QueueFull, q.env))
            }
        }
    }

    /// Charges `bytes` to the shared area, else to the channel's share of
    /// the reserve (`reserve / channels`), else refuses.
    #[inline]
    fn admit(&self, ch: &Channel, bytes: u64) -> Option<Charge> {
        let budget = &self.intake.budget;
        if budget.try_reserve(bytes) {
            return Some(Charge {
                bytes,
                reserved: false,
            });
        }
        let share = budget.reserve() / (self.intake.table.len().max(1) as u64);
        let mut cur = ch.floor_bytes.load(Ordering::Relaxed);
        loop {
            if cur.saturating_add(bytes) > share {
                return None;
            }
            match ch.floor_bytes.compare_exchange_weak(
                cur,
                cur + bytes,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        budget.take_reserved(bytes);
        Some(Charge {
            bytes,
            reserved: true,
        })
    }
}
