//! The sequencer, the `storage` stage: puts sealed chunks back in number
//! order (a fixed-size heapless heap: the chunker keeps at most
//! [`MAX_CHUNKS_IN_FLIGHT`] out, so it cannot overflow), writes them
//! through the segment to the storage writer, splits segments, asks
//! retention for room before every chunk, ticks the sync policy, and
//! recovers from storage failures by closing the segment at its last good
//! block and opening a new one.
//!
//! Its loop turns at least every [`TICK`]; it stops turning when a write
//! or a sync hangs in the kernel (the storage writer blocks once its
//! buffers are all in flight), which is what its heartbeat shows.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use edgerec_format::chunk::{ChunkBuilder, ChunkCompressor, Compression, SealedChunk};
use edgerec_source::{ChannelId, Intake};

use crate::chunker::LatchedMessage;
use crate::closer::CloseJob;
use crate::compressor::Sealed;
use crate::counters::PipelineCounters;
use crate::drops::DropLedger;
use crate::retention::{Retention, Room};
use crate::segment::{Segment, Session};
use crate::stage::{fault_point, StageBeat, Stages};
use crate::{RecorderError, SplitPolicy, Watch, THROUGHPUT_BIN};

/// Capacity of the sequencer's reorder heap: the chunker never has more
/// chunks out than this, so the heap cannot overflow. The chunk buffer
/// pool (half the memory budget) sets the real limit below it: 23 chunks
/// of 4 MiB with the defaults, about 0.3 s of a 1 MHz stream of 256 B
/// messages, to ride out a write stall. (A limit of 6 made the chunker wait
/// during a 70 ms stall and a 1 MHz source overflow its queue.)
pub const MAX_CHUNKS_IN_FLIGHT: usize = 64;

/// How often the loop turns when no chunk comes, and so how late a sync
/// can start after `sync_interval` (which bounds the loss window).
pub const TICK: Duration = Duration::from_millis(20);

/// How long recording waits after a storage failure before it tries a new
/// segment.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);

/// What the sequencer returns.
#[derive(Debug, Default)]
pub(crate) struct SequencerOutput {
    pub(crate) storage_errors: Vec<String>,
    pub(crate) bytes_per_bin: Vec<u64>,
    pub(crate) split_at_seconds: Vec<f64>,
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

    /// The latched repeats at the head of a segment: counted as messages,
    /// but neither a chunk of new data nor the start of the segment's span.
    /// They carry the log time of when they were first received, which
    /// can be long ago (a `/tf_static` published once at boot): taken as
    /// the segment's start, every new segment would be over
    /// `max_duration` at its first chunk and split at once (found recording
    /// a live `/tf_static` with `edgerec record -d 8`).
    fn wrote_repeats(&mut self, c: &SealedChunk) {
        self.messages += c.message_count;
    }
}

/// The sequencer's inputs and its state between chunks.
pub(crate) struct Sequencer {
    pub(crate) rx: Receiver<Sealed>,
    pub(crate) recycle: SyncSender<Vec<u8>>,
    pub(crate) intake: Arc<Intake>,
    pub(crate) counters: Arc<PipelineCounters>,
    pub(crate) stages: Arc<Stages>,
    pub(crate) split: SplitPolicy,
    pub(crate) retention: Option<Retention>,
    pub(crate) watch: Watch,
    pub(crate) session: Arc<Mutex<Session>>,
    pub(crate) close_tx: Sender<CloseJob>,
    /// Segments the closer finished, for retention.
    pub(crate) closed_rx: Receiver<(PathBuf, u64)>,
    pub(crate) segment: Option<Segment>,
    pub(crate) state: SequencerState,
}

/// What the loop keeps between turns.
pub(crate) struct SequencerState {
    heap: heapless::BinaryHeap<Sealed, heapless::binary_heap::Min, MAX_CHUNKS_IN_FLIGHT>,
    next: u64,
    progress: SegmentProgress,
    latched_last: BTreeMap<u16, LatchedMessage>,
    ledger: DropLedger,
    /// Paused for space: the chunk size to ask room for.
    space_pause: Option<u64>,
    /// When to try a new segment after a storage failure.
    retry_at: Option<Instant>,
    /// Chunks handed to storage but not yet known durable: (end offset,
    /// messages per channel). If storage fails, the ones past the kept
    /// length move from `written` to `lost`.
    unsynced: VecDeque<(u64, Vec<(u16, u64)>)>,
    t0: Instant,
    last_tick: Instant,
    out: SequencerOutput,
    /// A split is due and waits for the chunker's cut before the video
    /// channels' key units (see [`crate::chunker`]); since when.
    cut_pending: Option<Instant>,
}

impl Default for SequencerState {
    fn default() -> Self {
        Self {
            heap: heapless::BinaryHeap::new(),
            next: 0,
            progress: SegmentProgress::default(),
            latched_last: BTreeMap::new(),
            ledger: DropLedger::default(),
            space_pause: None,
            retry_at: None,
            unsynced: VecDeque::new(),
            t0: Instant::now(),
            cut_pending: None,
            last_tick: Instant::now(),
            out: SequencerOutput::default(),
        }
    }
}

impl Sequencer {
    /// Runs until every compressor is done and every chunk written, or the
    /// pipeline aborts (the open segment is then left `.active`).
    pub(crate) fn run(mut self, beat: &StageBeat) -> SequencerOutput {
        let mut disconnected = false;
        while !(disconnected && self.state.heap.is_empty()) {
            beat.beat_progress(self.state.next);
            fault_point(&self.watch, "storage");
            if self.stages.aborted() {
                self.abandon_for_abort();
                return self.state.out;
            }
            match self.rx.recv_timeout(TICK) {
                Ok(s) => {
                    if let Err(s) = self.state.heap.push(s) {
                        // Cannot happen: the chunker keeps at most the
                        // heap's capacity in flight. Count the chunk as
                        // lost rather than write out of order.
                        tracing::error!("reorder heap full at chunk {}; chunk lost", s.no);
                        self.count_lost(&s);
                        self.done_with(s);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    // With chunks missing from the heap for good (a
                    // compressor died), the abort check above ends it.
                    disconnected = true;
                    if !self.state.heap.is_empty()
                        && self
                            .state
                            .heap
                            .peek()
                            .is_some_and(|s| s.no != self.state.next)
                    {
                        std::thread::sleep(TICK);
                    }
                }
            }
            while self
                .state
                .heap
                .peek()
                .is_some_and(|s| s.no == self.state.next)
            {
                let Some(s) = self.state.heap.pop() else {
                    break;
                };
                self.state.next += 1;
                self.write(s);
            }
            self.take_split_request();
            if self.state.last_tick.elapsed() >= TICK {
                self.state.last_tick = Instant::now();
                self.tick();
            }
        }
        // The compressors also end when a stage died: then the open segment
        // is left for recovery like after any death, not closed here.
        if self.stages.aborted() {
            self.abandon_for_abort();
            return self.state.out;
        }
        // The last segment goes through the closer too, after the earlier
        // ones, so closes (and recoveries) stay in order.
        if let Some(mut seg) = self.segment.take() {
            self.add_closing_metadata(&mut seg);
            let _ = self.close_tx.send(CloseJob::Finish(Box::new(seg)));
        }
        self.state.out
    }

    /// One chunk in order: split if due, ask for room, write, count.
    fn write(&mut self, s: Sealed) {
        if s.cut_before {
            self.state.cut_pending = None;
        }
        if s.cut_before && self.segment.is_some() && self.state.progress.chunks > 0 {
            self.split_now();
        } else if let Some(seg) = &self.segment {
            if self
                .state
                .progress
                .should_split(&self.split, seg.position(), &s.sealed)
            {
                self.want_split();
            }
        }
        if self.segment.is_some() && self.state.space_pause.is_none() {
            let need = s.sealed.total_len();
            if !self.make_room(need) {
                self.state.space_pause = Some(need);
            }
        }
        let result = match &mut self.segment {
            Some(_) if self.state.space_pause.is_some() => {
                self.count_lost(&s);
                None
            }
            None => {
                self.count_lost(&s);
                None
            }
            Some(seg) => Some(write_sealed(seg, &s, &self.intake)),
        };
        match result {
            Some(Ok(())) => self.wrote(&s),
            Some(Err(e)) => {
                self.count_lost(&s);
                self.fail(e);
            }
            None => {}
        }
        self.done_with(s);
    }

    /// Counts a chunk written into the open segment.
    fn wrote(&mut self, s: &Sealed) {
        let Some(seg) = &self.segment else { return };
        let st = &mut self.state;
        let had_start = st.progress.start_ns.is_some();
        st.progress.wrote(&s.sealed);
        if let (false, Some(t)) = (had_start, st.progress.start_ns) {
            let limit = self.split.max_duration.as_nanos() as u64;
            self.counters
                .cut_deadline_ns
                .store(t.saturating_add(limit), Ordering::Release);
        }
        for m in &s.latched {
            st.latched_last.insert(m.channel, m.clone());
        }
        st.unsynced
            .push_back((seg.position(), s.sealed.channel_counts.clone()));
        let c = &self.counters;
        c.segment_bytes.store(seg.position(), Ordering::Relaxed);
        for &(ch, n) in &s.sealed.channel_counts {
            if let Some(ch) = self.intake.table().get(ChannelId(ch)) {
                ch.counters.written.fetch_add(n, Ordering::Relaxed);
            }
        }
        c.chunks_written.fetch_add(1, Ordering::Relaxed);
        c.messages_written
            .fetch_add(s.sealed.message_count, Ordering::Relaxed);
        c.bytes_written
            .fetch_add(s.sealed.total_len(), Ordering::Relaxed);
        let bin = (st.t0.elapsed().as_nanos() / THROUGHPUT_BIN.as_nanos()) as usize;
        let bins = &mut st.out.bytes_per_bin;
        if bins.len() <= bin {
            bins.resize(bin + 1, 0);
        }
        bins[bin] += s.sealed.total_len();
    }

    /// Gives back a chunk's memory, written or not.
    fn done_with(&self, s: Sealed) {
        self.intake.budget().release(s.charge);
        self.counters.in_flight.fetch_sub(1, Ordering::AcqRel);
        for buf in s.sealed.into_buffers() {
            let _ = self.recycle.try_send(buf);
        }
    }

    fn count_lost(&self, s: &Sealed) {
        for &(ch, n) in &s.sealed.channel_counts {
            if let Some(c) = self.intake.table().get(ChannelId(ch)) {
                c.counters.lost.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// The periodic work: retention's news, the space pause, reopening
    /// after a failure, the storage writer's sync.
    /// Closes the open segment and opens the next.
    fn split_now(&mut self) {
        match self.rotate() {
            Ok(()) => {
                let at = self.state.t0.elapsed().as_secs_f64();
                self.state.out.split_at_seconds.push(at);
            }
            Err(e) => self.fail(e),
        }
    }

    /// A split is due. Without video channels it is made now; with them
    /// the chunker is asked to cut just before their key units, and the
    /// split is made at the chunk it marks (the old segment takes the
    /// chunks until then). If no marked chunk comes well after the
    /// chunker's own limit, the split is made anyway.
    fn want_split(&mut self) {
        if let Some(since) = self.state.cut_pending {
            if since.elapsed() >= 3 * crate::chunker::CUT_WAIT {
                tracing::warn!(
                    "no segment cut from the chunker after {} ms: splitting here",
                    since.elapsed().as_millis()
                );
                self.state.cut_pending = None;
                self.counters.cut_wanted.store(false, Ordering::Release);
                self.split_now();
            }
            return;
        }
        let table = self.intake.table();
        let video =
            (1..=table.len()).any(|n| table.get(ChannelId(n as u16)).is_some_and(|c| c.is_keyed()));
        if video {
            self.state.cut_pending = Some(Instant::now());
            // The chunker may have started this cut already, at the
            // deadline, and asked for the key units itself.
            if !self.counters.cut_started.load(Ordering::Acquire) {
                self.counters.cut_wanted.store(true, Ordering::Release);
                self.intake.request_key_units();
            }
        } else {
            self.split_now();
        }
    }

    /// A split the operator asked for: now, when the open segment holds
    /// anything new (a segment of nothing but latched repeats is not cut),
    /// or at the next key units when there are video channels.
    fn take_split_request(&mut self) {
        if self.segment.is_some()
            && self.state.progress.chunks > 0
            && self.counters.split_requested.swap(false, Ordering::Relaxed)
        {
            tracing::info!("split requested");
            self.want_split();
        }
    }

    fn tick(&mut self) {
        if let Some(ret) = &mut self.retention {
            while let Ok((path, bytes)) = self.closed_rx.try_recv() {
                ret.segment_closed(&path, bytes);
            }
        }
        if let Some(need) = self.state.space_pause {
            if self.segment.is_some() && self.make_room(need) {
                self.state.space_pause = None;
            }
        }
        if self.segment.is_none() && self.state.retry_at.is_some_and(|t| Instant::now() >= t) {
            match self.reopen() {
                Ok(()) => {
                    if let Some(seg) = &self.segment {
                        tracing::info!(
                            "recording resumes in {} after the storage failure",
                            seg.active_path().display()
                        );
                        *lock(&self.counters.segment) = seg.active_path().to_path_buf();
                    }
                    self.state.retry_at = None;
                    *lock(&self.counters.fault) = None;
                    if self.state.space_pause.is_none() {
                        self.intake.set_paused(false);
                    }
                }
                Err(e) => {
                    tracing::warn!("cannot open a new segment yet: {e}");
                    self.state.retry_at = Some(Instant::now() + RETRY_AFTER_FAILURE);
                }
            }
        }
        let ticked = self
            .segment
            .as_mut()
            .map(|seg| seg.tick().map(|_| seg.durable()));
        match ticked {
            Some(Err(e)) => self.fail(e),
            Some(Ok(durable)) => {
                self.counters
                    .durable_bytes
                    .store(durable, Ordering::Relaxed);
                while self
                    .state
                    .unsynced
                    .front()
                    .is_some_and(|(end, _)| *end <= durable)
                {
                    self.state.unsynced.pop_front();
                }
            }
            None => {}
        }
    }

    /// The records that close a segment: the health side's (the clock's
    /// quality over it), then the drops while it was open.
    fn add_closing_metadata(&mut self, seg: &mut Segment) {
        if let Some(f) = &self.watch.segment_metadata {
            for (name, values) in f() {
                seg.add_closing_metadata(name, values);
            }
        }
        let drops = self.state.ledger.take(self.intake.table());
        seg.add_closing_metadata("edgerec.drops".to_owned(), drops);
    }

    /// Opens the next segment, hands the current one to the closer, and
    /// writes the latched channels' last messages first in the new one.
    fn rotate(&mut self) -> Result<(), RecorderError> {
        let fresh = lock(&self.session).open_segment(&self.intake.table().all())?;
        let Some(mut old) = self.segment.replace(fresh) else {
            return Ok(());
        };
        self.add_closing_metadata(&mut old);
        if self.close_tx.send(CloseJob::Finish(Box::new(old))).is_err() {
            tracing::error!("segment closer is gone; the previous segment stays .active");
        }
        if let Some(seg) = &self.segment {
            *lock(&self.counters.segment) = seg.active_path().to_path_buf();
        }
        self.state.unsynced.clear();
        self.segment_opened();
        self.write_latched()
    }

    /// After a storage failure: a new segment (when retention finds room),
    /// opened with the latched channels' last messages.
    fn reopen(&mut self) -> Result<(), RecorderError> {
        let dir = lock(&self.session).dir().to_path_buf();
        if let Some(ret) = &mut self.retention {
            match ret.make_room(4 << 20, &dir) {
                Ok(Room::Pause { reason, .. }) => return Err(RecorderError::NoRoom { reason }),
                Ok(Room::Proceed { deleted }) if !deleted.is_empty() => {
                    lock(&self.session).reload_metadata()
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("retention: {e}"),
            }
        }
        let seg = lock(&self.session).open_segment(&self.intake.table().all())?;
        self.segment = Some(seg);
        self.segment_opened();
        self.write_latched()
    }

    /// A new segment: no cut is wanted or started for it yet, and its
    /// deadline is known once its first message is written.
    fn segment_opened(&mut self) {
        self.state.progress = SegmentProgress::default();
        self.state.cut_pending = None;
        let c = &self.counters;
        c.cut_wanted.store(false, Ordering::Release);
        c.cut_started.store(false, Ordering::Release);
        c.cut_deadline_ns.store(u64::MAX, Ordering::Release);
        c.segment_no.fetch_add(1, Ordering::AcqRel);
    }

    fn write_latched(&mut self) -> Result<(), RecorderError> {
        let latched = &self.state.latched_last;
        let Some(seg) = &mut self.segment else {
            return Ok(());
        };
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
        let mut plain =
            ChunkCompressor::new(Compression::None).map_err(|e| RecorderError::Compressor {
                name: "the latched repeats' compressor".into(),
                source: e,
            })?;
        let sealed = b.take().seal(&mut plain);
        for &ch in latched.keys() {
            if let Some(c) = self.intake.table().get(ChannelId(ch)) {
                seg.add_channel(c)?;
            }
        }
        seg.write_repeats(&sealed)?;
        self.state.progress.wrote_repeats(&sealed);
        Ok(())
    }

    /// Asks retention for room for `need` bytes. True: write. False:
    /// recording pauses softly (sources run, their messages are dropped
    /// and counted, the state is disk-full) until a later call finds room.
    fn make_room(&mut self, need: u64) -> bool {
        let (Some(ret), Some(seg)) = (&mut self.retention, &self.segment) else {
            return true;
        };
        let (ok, deleted, reason) = match ret.make_room(need, seg.active_path()) {
            Ok(Room::Proceed { deleted }) => (true, deleted, None),
            Ok(Room::Pause { reason, deleted }) => (false, deleted, Some(reason)),
            Err(e) => {
                // Retention cannot see the disk; storage's own ENOSPC
                // handling is the backstop, so keep recording.
                tracing::warn!("retention: {e}");
                (true, Vec::new(), None)
            }
        };
        if !deleted.is_empty() {
            let mut sess = lock(&self.session);
            if deleted.iter().any(|p| p.parent() == Some(sess.dir())) {
                sess.reload_metadata();
            }
        }
        for p in &deleted {
            tracing::info!("retention deleted {}", p.display());
        }
        if !deleted.is_empty() {
            let st = ret.status();
            self.counters
                .deleted_unsent
                .store(st.deleted_unsent, Ordering::Relaxed);
            self.counters
                .deleted_sent
                .store(st.deleted_sent, Ordering::Relaxed);
        }
        let mut full = lock(&self.counters.disk_full);
        match (ok, reason) {
            (true, _) => {
                if full.take().is_some() {
                    tracing::info!("space is back: recording resumes");
                    self.intake.set_paused(false);
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
                self.intake.set_paused(true);
            }
        }
        ok
    }

    /// A storage failure: close the segment at its last good block, have
    /// it recovered into a valid file, pause (sources run, their messages
    /// are dropped and counted) and try a new segment a second later.
    fn fail(&mut self, e: RecorderError) {
        tracing::error!("storage failed: {e}; the segment is closed at its last good chunk");
        *lock(&self.counters.fault) = Some(e.to_string());
        self.intake.set_paused(true);
        self.state.out.storage_errors.push(e.to_string());
        self.state.retry_at = Some(Instant::now() + RETRY_AFTER_FAILURE);
        let Some(seg) = self.segment.take() else {
            return;
        };
        let path = seg.active_path().to_path_buf();
        let report = seg.abandon();
        let kept = report
            .as_ref()
            .map(|r| r.truncated_after_error.unwrap_or(r.logical_len))
            .unwrap_or(0);
        for (_, counts) in self.state.unsynced.iter().filter(|(end, _)| *end > kept) {
            for &(ch, n) in counts {
                if let Some(c) = self.intake.table().get(ChannelId(ch)) {
                    c.counters.written.fetch_sub(n, Ordering::Relaxed);
                    c.counters.lost.fetch_add(n, Ordering::Relaxed);
                }
                self.counters
                    .messages_written
                    .fetch_sub(n, Ordering::Relaxed);
            }
        }
        self.state.unsynced.clear();
        if self.close_tx.send(CloseJob::Recover(path)).is_err() {
            tracing::error!("segment closer is gone; recovery waits for the next start");
        }
    }

    /// A stage died: stop writing and leave the open segment `.active`,
    /// synced as far as it got, for the next start to recover. After a
    /// panic somewhere in the pipeline, one way out for every stage (and
    /// the same state a crash leaves) beats a second close path that
    /// only a panic exercises.
    fn abandon_for_abort(&mut self) {
        if let Some(seg) = self.segment.take() {
            let path = seg.active_path().to_path_buf();
            let kept = seg.abandon().map(|r| r.logical_len).unwrap_or(0);
            tracing::warn!(
                "{} left .active at {kept} bytes for recovery at the next start",
                path.display()
            );
        }
    }
}

/// Writes a chunk after the schema and channel records of every channel in
/// it that this segment does not have yet: a channel registered while
/// recording, or one whose first chunks were dropped during a pause.
fn write_sealed(seg: &mut Segment, s: &Sealed, intake: &Intake) -> Result<(), RecorderError> {
    for &(ch, _) in &s.sealed.channel_counts {
        if !seg.has_channel(ch) {
            if let Some(c) = intake.table().get(ChannelId(ch)) {
                seg.add_channel(c)?;
            }
        }
    }
    seg.write_chunk(&s.sealed)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(log_times: &[u64]) -> SealedChunk {
        let mut b = ChunkBuilder::new(1024);
        for (i, t) in log_times.iter().enumerate() {
            b.push(1, i as u32, *t, *t, &[0, 1, 0, 0]);
        }
        b.take()
            .seal(&mut ChunkCompressor::new(Compression::None).unwrap())
    }

    #[test]
    fn old_latched_repeats_do_not_start_the_segments_span() {
        let split = SplitPolicy {
            max_bytes: u64::MAX,
            max_duration: Duration::from_secs(8),
            max_messages: 0,
        };
        let s = 1_000_000_000u64;
        let mut p = SegmentProgress::default();
        // /tf_static received at t = 1 s, repeated at the head of a segment
        // opened at t = 100 s.
        p.wrote_repeats(&chunk(&[s]));
        assert!(!p.should_split(&split, 0, &chunk(&[100 * s])));
        p.wrote(&chunk(&[100 * s]));
        assert!(!p.should_split(&split, 0, &chunk(&[107 * s])));
        assert!(p.should_split(&split, 0, &chunk(&[108 * s])));
        assert_eq!(p.messages, 2);
    }
}
