//! The chunker: drains every channel's queue round-robin (at most
//! [`BATCH`] messages or one chunk's worth of bytes per channel per pass,
//! so a flooding channel cannot starve the others), assigns per-channel sequence numbers, copies each
//! payload once into the open chunk and hands full or aged chunks to the
//! compressors, numbered. It sees channels registered at any time: each
//! pass covers every id in the table.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgerec_format::chunk::{ChunkBuilder, OpenChunk};
use edgerec_source::{ChannelId, Intake, Queued};

use crate::counters::PipelineCounters;
use crate::stage::{fault_point, StageBeat, Stages, WorkQueue};
use crate::Watch;

/// Drains up to this many envelopes from one channel before moving on.
pub const BATCH: usize = 256;

/// Budget bytes the chunker gives back at once: one atomic per message on
/// a line the sources also write costs more than the copy.
const RELEASE_BATCH: u64 = 256 << 10;

/// A chunk on its way to a compressor.
pub(crate) struct ChunkJob {
    pub(crate) no: u64,
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
        } = self;
        intake.doorbell().set_consumer(std::thread::current());
        let mut out = Out {
            b: ChunkBuilder::with_pool(limits.chunk_size + limits.chunk_size / 4, limits.pool - 1),
            latched_now: BTreeMap::new(),
            next_no: 0,
            opened: None,
        };
        let mut st = ChannelState::default();
        let mut batch: Vec<Queued> = Vec::with_capacity(BATCH);
        let mut to_release = 0u64;
        let mut closing_pass_done = false;
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
            let mut got = 0usize;
            let table = intake.table();
            for n in 1..=table.len() {
                let Some(ch) = table.get(ChannelId(n as u16)) else {
                    continue;
                };
                let id = n;
                if id >= st.seq.len() {
                    st.seq.resize(id + 1, 0);
                    st.seen.resize(id + 1, false);
                    st.latched.resize(id + 1, false);
                    st.large.resize(id + 1, false);
                }
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
                    }
                    for q in batch.drain(..) {
                        got += 1;
                        let env = q.env;
                        bytes += env.payload.len();
                        st.large[id] = env.payload.len() >= limits.chunk_size / 8;
                        let seq = st.seq[id];
                        st.seq[id] = seq.wrapping_add(1);
                        if out.b.is_empty() {
                            out.opened = Some(Instant::now());
                        }
                        out.b
                            .push(id as u16, seq, env.log_time, env.publish_time, &env.payload);
                        if st.latched[id] {
                            out.latched_now.insert(
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
                        // The payload is copied (into pool memory); a small
                        // buffer goes back to its channel for reuse.
                        if q.charge.reserved {
                            intake.release(ch, q.charge);
                        } else {
                            to_release += q.charge.bytes;
                        }
                        intake.recycle(ch, env.payload);
                        if to_release >= RELEASE_BATCH {
                            intake.budget().release(std::mem::take(&mut to_release));
                        }
                        if out.b.len() >= limits.chunk_size
                            && !out.send(&jobs, &recycle, &counters, &stages, &limits, beat)
                        {
                            return;
                        }
                    }
                    if taken >= BATCH || bytes >= limits.chunk_size {
                        break;
                    }
                }
            }
            intake.budget().release(std::mem::take(&mut to_release));
            let aged = out.opened.is_some_and(|t| t.elapsed() >= limits.max_age);
            if !out.b.is_empty()
                && aged
                && !out.send(&jobs, &recycle, &counters, &stages, &limits, beat)
            {
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
        if !out.b.is_empty() {
            out.send(&jobs, &recycle, &counters, &stages, &limits, beat);
        }
        jobs.close();
    }
}

/// The chunk being built and what goes with it.
struct Out {
    b: ChunkBuilder,
    latched_now: BTreeMap<u16, LatchedMessage>,
    next_no: u64,
    opened: Option<Instant>,
}

impl Out {
    /// Hands the open chunk to the compressors; false when the pipeline
    /// aborted while waiting for room.
    fn send(
        &mut self,
        jobs: &WorkQueue<ChunkJob>,
        recycle: &Receiver<Vec<u8>>,
        counters: &PipelineCounters,
        stages: &Stages,
        limits: &ChunkLimits,
        beat: &StageBeat,
    ) -> bool {
        // Keep the sequencer's reorder heap within its fixed capacity.
        // Waiting on the stages downstream is not a stall of this one: it
        // beats, and they are watched themselves.
        while counters.in_flight.load(Ordering::Acquire) >= limits.in_flight {
            if stages.aborted() {
                return false;
            }
            beat.beat();
            std::thread::sleep(Duration::from_micros(200));
        }
        counters.in_flight.fetch_add(1, Ordering::AcqRel);
        // Buffers written meanwhile come back here: take() must find one,
        // or it allocates past the pool the budget was charged for.
        while let Ok(buf) = recycle.try_recv() {
            self.b.recycle(buf);
        }
        let chunk = self.b.take();
        jobs.push(ChunkJob {
            no: self.next_no,
            chunk,
            latched: std::mem::take(&mut self.latched_now)
                .into_values()
                .collect(),
        });
        self.next_no += 1;
        true
    }
}
