//! The chunker: drains every channel's queue round-robin (at most
//! [`BATCH`] messages or one chunk's worth of bytes per channel per pass,
//! so a flooding channel cannot starve the others), assigns per-channel sequence numbers, copies each
//! payload once into the open chunk and hands full or aged chunks to the
//! compressors, numbered. It sees channels registered at any time: each
//! pass covers every id in the table.
//!
//! It also picks where a segment is cut when there are video channels
//! (their sources mark key units: [`edgerec_source::SourceSink::push_video`]).
//! The sequencer, when a split is due, raises `cut_wanted` and asks the
//! sources for key units; for `max_duration` the chunker does not wait for
//! that: the first message at or past the open segment's deadline starts
//! the cut (and asks for the key units), so the video channels' key units
//! come one or two frames after the limit, not a chunk later. At most one
//! cut is made per segment. The chunker then keeps writing every channel into
//! the old segment except that, per video channel, it holds back the key
//! unit that comes and everything after it. When every video channel that
//! was active has one held (or after [`CUT_WAIT`]), it closes the chunk,
//! marks the next one `cut_before` and starts it with what it held. So the
//! first message of each video channel in every segment is a key unit, and
//! nothing is dropped or repeated; the old segment runs a few frames past
//! the split limit, and the two segments overlap in time by as much.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgerec_format::chunk::{ChunkBuilder, OpenChunk};
use edgerec_source::{ChannelId, Intake, Queued};

use crate::counters::PipelineCounters;
use crate::events::ring::RingMessage;
use crate::events::{Lane, TriggerPlan};
use crate::stage::{fault_point, StageBeat, Stages, WorkQueue};
use crate::Watch;

/// Drains up to this many envelopes from one channel before moving on.
pub const BATCH: usize = 256;

/// The longest a cut waits for the video channels' key units: a source
/// whose encoder ignores the request still makes one within its keyframe
/// interval (1 s by default); one that has none by then starts the next
/// segment on a delta frame (logged).
pub const CUT_WAIT: Duration = Duration::from_secs(2);

/// A video channel that produced nothing for this long is not waited for
/// (a camera that is down).
const CUT_ACTIVE: Duration = Duration::from_secs(2);

/// Budget bytes the chunker gives back at once: one atomic per message on
/// a line the sources also write costs more than the copy.
const RELEASE_BATCH: u64 = 256 << 10;

/// A chunk on its way to a compressor.
pub(crate) struct ChunkJob {
    pub(crate) no: u64,
    /// The next segment starts with this chunk.
    pub(crate) cut_before: bool,
    pub(crate) chunk: OpenChunk,
    /// The last message of each latched channel in this chunk.
    pub(crate) latched: Vec<LatchedMessage>,
}

/// A latched (transient-local) channel's last message, written again at
/// the start of every new segment with its original sequence number and
/// times, so a reader of any one segment gets it, and a reader of all of
/// them can tell the repeat by its sequence number.
#[derive(Debug, Clone)]
pub(crate) struct LatchedMessage {
    pub(crate) channel: u16,
    pub(crate) sequence: u32,
    pub(crate) log_time: u64,
    pub(crate) publish_time: u64,
    pub(crate) payload: Arc<[u8]>,
}

/// When the chunker closes a chunk, and how many may be out.
pub(crate) struct ChunkLimits {
    /// Chunk buffers in the pool.
    pub(crate) pool: usize,
    pub(crate) chunk_size: usize,
    pub(crate) max_age: Duration,
    /// Chunks out at most (the sequencer's reorder heap holds them).
    pub(crate) in_flight: usize,
}

/// Everything the chunker works with.
pub(crate) struct Chunker {
    pub(crate) intake: Arc<Intake>,
    pub(crate) jobs: Arc<WorkQueue<ChunkJob>>,
    pub(crate) recycle: Receiver<Vec<u8>>,
    pub(crate) counters: Arc<PipelineCounters>,
    pub(crate) stages: Arc<Stages>,
    pub(crate) limits: ChunkLimits,
    pub(crate) watch: Watch,
    /// `triggered` and `mixed`: where clip channels and rule topics go.
    pub(crate) events: Option<(Arc<Lane>, Arc<TriggerPlan>)>,
}

/// Where a channel's messages go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Route {
    /// Into the continuous segments.
    continuous: bool,
    /// To the events stage: `ring` for a clip channel, else only for the
    /// rules that read it.
    tap: bool,
    ring: bool,
}

impl Route {
    const CONTINUOUS: Route = Route {
        continuous: true,
        tap: false,
        ring: false,
    };

    fn of(events: &Option<(Arc<Lane>, Arc<TriggerPlan>)>, topic: &str) -> Route {
        match events {
            None => Route::CONTINUOUS,
            Some((_, plan)) => {
                let continuous = plan.is_continuous(topic);
                let ring = plan.is_in_ring(topic);
                Route {
                    continuous,
                    tap: ring || plan.is_rule_topic(topic),
                    ring,
                }
            }
        }
    }
}

/// Per-channel state, indexed by channel id.
#[derive(Default)]
struct ChannelState {
    seq: Vec<u32>,
    /// Whether the channel's latched flag has been read.
    seen: Vec<bool>,
    latched: Vec<bool>,
    /// Its last message was large (an eighth of a chunk or more): it is
    /// taken one message at a time.
    large: Vec<bool>,
    /// When it last had a message (for the cut: which video channels to
    /// wait for).
    last_msg: Vec<Option<Instant>>,
    route: Vec<Route>,
}

impl ChannelState {
    fn grow(&mut self, id: usize) {
        if id >= self.seq.len() {
            self.seq.resize(id + 1, 0);
            self.seen.resize(id + 1, false);
            self.latched.resize(id + 1, false);
            self.large.resize(id + 1, false);
            self.last_msg.resize(id + 1, None);
            self.route.resize(id + 1, Route::CONTINUOUS);
        }
    }
}

/// A cut being prepared: per video channel, the key unit it ends on and
/// what came after it, held back for the next segment.
struct Cut {
    since: Instant,
    /// The segment it ends.
    segment_no: u64,
    /// Video channels to wait for, each with what is held of it (empty
    /// until its key unit comes).
    held: BTreeMap<usize, Vec<Queued>>,
}

impl Cut {
    fn ready(&self) -> bool {
        self.held.values().all(|h| !h.is_empty())
    }
}

impl Chunker {
    /// Runs until the intake is closed and drained, or the pipeline aborts.
    pub(crate) fn run(self, beat: &StageBeat) {
        let Chunker {
            intake,
            jobs,
            recycle,
            counters,
            stages,
            limits,
            watch,
            events,
        } = self;
        intake.doorbell().set_consumer(std::thread::current());
        let mut out = Out {
            b: ChunkBuilder::with_pool(limits.chunk_size + limits.chunk_size / 4, limits.pool - 1),
            latched_now: BTreeMap::new(),
            next_no: 0,
            opened: None,
            cut_next: false,
            to_release: 0,
        };
        let cx = Cx {
            intake: &intake,
            jobs: &jobs,
            recycle: &recycle,
            counters: &counters,
            stages: &stages,
            limits: &limits,
            beat,
        };
        let mut st = ChannelState::default();
        let mut batch: Vec<Queued> = Vec::with_capacity(BATCH);
        let mut closing_pass_done = false;
        let mut cut: Option<Cut> = None;
        // The segment the last cut was made in: one cut per segment.
        let mut cut_in: Option<u64> = None;
        loop {
            beat.beat_progress(out.next_no);
            fault_point(&watch, "chunker");
            if stages.aborted() {
                return;
            }
            while let Ok(buf) = recycle.try_recv() {
                out.b.recycle(buf);
            }
            // Read before the pass: a pass that starts after the close
            // is the last one needed.
            let closed = intake.is_closed();
            intake.doorbell().clear();
            let table = intake.table();
            let segment_no = counters.segment_no.load(Ordering::Acquire);
            let may_cut = cut.is_none() && cut_in != Some(segment_no);
            if may_cut && counters.cut_wanted.load(Ordering::Acquire) {
                cut = Some(start_cut(table, &st, segment_no));
            }
            // Past the open segment's deadline: start the cut at the first
            // such message (only with video channels; without them the
            // sequencer splits on its own at once).
            let deadline = if may_cut && cut.is_none() {
                counters.cut_deadline_ns.load(Ordering::Acquire)
            } else {
                u64::MAX
            };
            let mut got = 0usize;
            for n in 1..=table.len() {
                let Some(ch) = table.get(ChannelId(n as u16)) else {
                    continue;
                };
                let id = n;
                st.grow(id);
                // At most BATCH messages or one chunk's worth of bytes from
                // a channel per pass, whichever comes first: a channel of
                // large messages (taken one at a time) cannot hold the pass
                // for BATCH chunk writes while a quiet channel waits.
                let mut taken = 0usize;
                let mut bytes = 0usize;
                loop {
                    let want = if st.large[id] { 1 } else { BATCH - taken };
                    let popped = intake.pop_into(ch, &mut batch, want);
                    if popped == 0 {
                        break;
                    }
                    taken += popped;
                    if !st.seen[id] {
                        st.seen[id] = true;
                        st.latched[id] = ch.spec.latched;
                        st.route[id] = Route::of(&events, &ch.spec.topic);
                    }
                    st.last_msg[id] = Some(Instant::now());
                    for q in batch.drain(..) {
                        got += 1;
                        bytes += q.env.payload.len();
                        if q.env.log_time >= deadline && cut.is_none() && any_keyed(table) {
                            counters.cut_started.store(true, Ordering::Release);
                            intake.request_key_units();
                            cut = Some(start_cut(table, &st, segment_no));
                        }
                        // Held for the next segment: this video channel's
                        // key unit and what follows it.
                        if let Some(held) = cut.as_mut().and_then(|c| c.held.get_mut(&id)) {
                            if q.key || !held.is_empty() {
                                held.push(q);
                                continue;
                            }
                        }
                        let route = st.route[id];
                        if route.tap {
                            let Some((lane, _)) = &events else { continue };
                            if !route.continuous {
                                out.tap_only(&cx, &mut st, ch, id, q, lane);
                                continue;
                            }
                            // A continuous channel: the ring and the rules
                            // get a copy; one the lane cannot take is only
                            // missing from a clip (counted by the lane).
                            let m = RingMessage {
                                channel: id as u16,
                                sequence: st.seq[id],
                                log_time: q.env.log_time,
                                publish_time: q.env.publish_time,
                                key: q.key,
                                payload: q.env.payload.clone(),
                            };
                            lane.offer(route.ring, m);
                        }
                        if !out.put(&cx, &mut st, ch, id, q) {
                            return;
                        }
                    }
                    if taken >= BATCH || bytes >= limits.chunk_size {
                        break;
                    }
                }
            }
            intake.budget().release(std::mem::take(&mut out.to_release));
            if let Some(c) = cut.take_if(|c| c.ready() || c.since.elapsed() >= CUT_WAIT) {
                cut_in = Some(c.segment_no);
                if !out.cut(&cx, &mut st, c) {
                    return;
                }
            }
            let aged = out.opened.is_some_and(|t| t.elapsed() >= limits.max_age);
            if !out.b.is_empty() && aged && !out.send(&cx) {
                return;
            }
            if got == 0 {
                if closed {
                    if closing_pass_done {
                        break;
                    }
                    // One more pass: a push may have passed the closed
                    // check just before the close.
                    closing_pass_done = true;
                    continue;
                }
                // No spin before parking: measured at 1 MHz, a 5 us spin
                // raised the capacity at max rate (2.7 -> 4.9 M msg/s) but
                // took 1.9 cores instead of 1.4 at 1 MHz; a recorder is
                // mostly not at max rate.
                if intake.doorbell().may_sleep() {
                    let wait = match out.opened {
                        Some(t) if !out.b.is_empty() => limits.max_age.saturating_sub(t.elapsed()),
                        _ => Duration::from_millis(20),
                    }
                    .min(Duration::from_millis(20));
                    std::thread::park_timeout(wait);
                    intake.doorbell().awake();
                }
            }
        }
        // The recording ends: what a cut held goes into the last segment.
        if let Some(mut c) = cut.take() {
            for (id, held) in std::mem::take(&mut c.held) {
                let Some(ch) = table_get(&intake, id) else {
                    continue;
                };
                for q in held {
                    if !out.put(&cx, &mut st, &ch, id, q) {
                        return;
                    }
                }
            }
        }
        intake.budget().release(std::mem::take(&mut out.to_release));
        if !out.b.is_empty() {
            out.send(&cx);
        }
        jobs.close();
    }
}

fn table_get(intake: &Intake, id: usize) -> Option<Arc<edgerec_source::Channel>> {
    intake.table().get(ChannelId(id as u16)).cloned()
}

/// True when some channel is video (its source marks key units).
fn any_keyed(table: &edgerec_source::ChannelTable) -> bool {
    (1..=table.len()).any(|n| table.get(ChannelId(n as u16)).is_some_and(|c| c.is_keyed()))
}

/// Starts a cut of segment `segment_no`: the video channels that had a
/// message lately are waited for.
fn start_cut(table: &edgerec_source::ChannelTable, st: &ChannelState, segment_no: u64) -> Cut {
    let mut held = BTreeMap::new();
    for n in 1..=table.len() {
        let Some(ch) = table.get(ChannelId(n as u16)) else {
            continue;
        };
        let active = st
            .last_msg
            .get(n)
            .copied()
            .flatten()
            .is_some_and(|t| t.elapsed() < CUT_ACTIVE);
        // Clip-only channels are not in the segments: nothing to cut.
        let continuous = st.route.get(n).is_none_or(|r| r.continuous);
        if ch.is_keyed() && active && continuous {
            held.insert(n, Vec::new());
        }
    }
    Cut {
        since: Instant::now(),
        segment_no,
        held,
    }
}

/// What the chunker's helpers need.
struct Cx<'a> {
    intake: &'a Intake,
    jobs: &'a WorkQueue<ChunkJob>,
    recycle: &'a Receiver<Vec<u8>>,
    counters: &'a PipelineCounters,
    stages: &'a Stages,
    limits: &'a ChunkLimits,
    beat: &'a StageBeat,
}

/// The chunk being built and what goes with it.
struct Out {
    b: ChunkBuilder,
    latched_now: BTreeMap<u16, LatchedMessage>,
    next_no: u64,
    opened: Option<Instant>,
    /// The next chunk sent starts a segment.
    cut_next: bool,
    /// Budget bytes copied and not yet given back.
    to_release: u64,
}

impl Out {
    /// Copies one message into the open chunk (sending it when full);
    /// false when the pipeline aborted.
    fn put(
        &mut self,
        cx: &Cx,
        st: &mut ChannelState,
        ch: &edgerec_source::Channel,
        id: usize,
        q: Queued,
    ) -> bool {
        let env = q.env;
        st.large[id] = env.payload.len() >= cx.limits.chunk_size / 8;
        let seq = st.seq[id];
        st.seq[id] = seq.wrapping_add(1);
        if self.b.is_empty() {
            self.opened = Some(Instant::now());
        }
        self.b
            .push(id as u16, seq, env.log_time, env.publish_time, &env.payload);
        if st.latched[id] {
            self.latched_now.insert(
                id as u16,
                LatchedMessage {
                    channel: id as u16,
                    sequence: seq,
                    log_time: env.log_time,
                    publish_time: env.publish_time,
                    payload: Arc::from(env.payload.as_slice()),
                },
            );
        }
        // The payload is copied (into pool memory); a small buffer goes
        // back to its channel for reuse.
        self.release(cx, ch, q.charge);
        cx.intake.recycle(ch, env.payload);
        if self.to_release >= RELEASE_BATCH {
            cx.intake
                .budget()
                .release(std::mem::take(&mut self.to_release));
        }
        self.b.len() < cx.limits.chunk_size || self.send(cx)
    }

    /// Gives a message's budget charge back: at once for a channel's
    /// reserved share, batched for the shared budget.
    fn release(&mut self, cx: &Cx, ch: &edgerec_source::Channel, charge: edgerec_source::Charge) {
        if charge.reserved {
            cx.intake.release(ch, charge);
        } else {
            self.to_release += charge.bytes;
        }
    }

    /// Hands a message of a clip channel to the events stage (its payload
    /// moved, not copied); counted as a drop of its channel when the lane
    /// is full.
    fn tap_only(
        &mut self,
        cx: &Cx,
        st: &mut ChannelState,
        ch: &edgerec_source::Channel,
        id: usize,
        q: Queued,
        lane: &Lane,
    ) {
        let seq = st.seq[id];
        st.seq[id] = seq.wrapping_add(1);
        self.release(cx, ch, q.charge);
        let m = RingMessage {
            channel: id as u16,
            sequence: seq,
            log_time: q.env.log_time,
            publish_time: q.env.publish_time,
            key: q.key,
            payload: q.env.payload,
        };
        if !lane.offer(true, m) {
            ch.counters
                .dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Makes the cut: the open chunk ends the old segment, the next one
    /// starts the new segment with what the cut held. False when the
    /// pipeline aborted.
    fn cut(&mut self, cx: &Cx, st: &mut ChannelState, mut c: Cut) -> bool {
        let late: Vec<String> = c
            .held
            .iter()
            .filter(|(_, h)| h.is_empty())
            .filter_map(|(id, _)| table_get(cx.intake, *id).map(|ch| ch.spec.topic.clone()))
            .collect();
        if !late.is_empty() {
            tracing::warn!(
                "segment cut after {} ms without a key unit from {}: its next segment starts \
                 on a frame that needs the previous segment to decode",
                c.since.elapsed().as_millis(),
                late.join(", ")
            );
        }
        if !self.b.is_empty() && !self.send(cx) {
            return false;
        }
        self.cut_next = true;
        cx.counters.cut_wanted.store(false, Ordering::Release);
        for (id, held) in std::mem::take(&mut c.held) {
            let Some(ch) = table_get(cx.intake, id) else {
                continue;
            };
            for q in held {
                if !self.put(cx, st, &ch, id, q) {
                    return false;
                }
            }
        }
        // A cut with nothing held still needs a chunk to carry the mark:
        // the next one made, whenever that is.
        true
    }

    /// Hands the open chunk to the compressors; false when the pipeline
    /// aborted while waiting for room.
    fn send(&mut self, cx: &Cx) -> bool {
        // Keep the sequencer's reorder heap within its fixed capacity.
        // Waiting on the stages downstream is not a stall of this one: it
        // beats, and they are watched themselves.
        while cx.counters.in_flight.load(Ordering::Acquire) >= cx.limits.in_flight {
            if cx.stages.aborted() {
                return false;
            }
            cx.beat.beat();
            std::thread::sleep(Duration::from_micros(200));
        }
        cx.counters.in_flight.fetch_add(1, Ordering::AcqRel);
        // Buffers written meanwhile come back here: take() must find one,
        // or it allocates past the pool the budget was charged for.
        while let Ok(buf) = cx.recycle.try_recv() {
            self.b.recycle(buf);
        }
        let chunk = self.b.take();
        cx.jobs.push(ChunkJob {
            no: self.next_no,
            cut_before: std::mem::take(&mut self.cut_next),
            chunk,
            latched: std::mem::take(&mut self.latched_now)
                .into_values()
                .collect(),
        });
        self.next_no += 1;
        true
    }
}
