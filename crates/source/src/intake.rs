//! The intake: what every sink shares and what the recorder's chunker
//! drains. It owns the channel table (each channel with its own queue),
//! the memory budget, the doorbell that wakes the chunker, the recording
//! clock, and the paused and closed switches.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crate::budget::MemoryBudget;
use crate::channel::Channel;
use crate::clock::RecordingClock;
use crate::doorbell::Doorbell;
use crate::queue::{Charge, Queued};
use crate::returns::{return_pool, RETURN_MAX_CAPACITY};
use crate::sink::SourceSink;
use crate::table::ChannelTable;

/// Shared by every sink and the chunker.
#[derive(Debug)]
pub struct Intake {
    pub(crate) table: ChannelTable,
    pub(crate) budget: MemoryBudget,
    pub(crate) doorbell: Doorbell,
    pub(crate) clock: Arc<dyn RecordingClock>,
    /// Recording is paused (disk full, storage failed): pushes are
    /// refused and counted.
    pub(crate) paused: AtomicBool,
    /// The operator paused recording (`edgerec ctl pause`, rosbag2's
    /// `~/pause`): pushes are refused and not counted as drops.
    pub(crate) held: AtomicBool,
    /// The recording is over: pushes are refused and counted.
    pub(crate) closed: AtomicBool,
    /// Bumped each time the recorder wants a key unit from every video
    /// channel (a segment is about to be cut).
    pub(crate) key_requests: AtomicU64,
}

impl Intake {
    /// An intake whose channels each queue at most `queue_capacity`
    /// messages, all charged to `budget`, stamped by `clock`.
    pub fn new(
        queue_capacity: usize,
        budget: MemoryBudget,
        clock: Arc<dyn RecordingClock>,
    ) -> Arc<Intake> {
        Arc::new(Intake {
            table: ChannelTable::new(queue_capacity),
            budget,
            doorbell: Doorbell::default(),
            clock,
            paused: AtomicBool::new(false),
            held: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            key_requests: AtomicU64::new(0),
        })
    }

    /// A sink for one source (or one run of it) with its own liveness.
    pub fn sink(self: &Arc<Self>) -> SourceSink {
        SourceSink::new(self.clone())
    }

    /// The channels.
    pub fn table(&self) -> &ChannelTable {
        &self.table
    }

    /// The memory budget.
    pub fn budget(&self) -> &MemoryBudget {
        &self.budget
    }

    /// The chunker's doorbell.
    pub fn doorbell(&self) -> &Doorbell {
        &self.doorbell
    }

    /// Now on the recording clock.
    #[inline]
    pub fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// Pauses (true) or resumes recording: while paused every push is
    /// refused with [`crate::Dropped::Paused`] and counted.
    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
    }

    /// True while paused.
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    /// Holds (true) or releases recording on the operator's request: while
    /// held every push to a channel that is not latched is refused as
    /// [`Dropped::Held`](crate::Dropped), which is not a drop (nothing was
    /// lost that was meant to be kept); latched channels are kept.
    /// Independent of [`set_paused`](Self::set_paused), so a disk-full
    /// pause ending does not end the operator's.
    pub fn set_held(&self, held: bool) {
        self.held.store(held, Ordering::Relaxed);
    }

    /// True while the operator holds recording.
    pub fn is_held(&self) -> bool {
        self.held.load(Ordering::Relaxed)
    }

    /// Ends the intake: from now on every push is refused with
    /// [`crate::Dropped::Closed`] and counted. The recorder closes it once
    /// the sources have stopped, before its last drain.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.doorbell.wake();
    }

    /// True once closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Asks every source of a keyed (video) channel for a key unit as soon
    /// as it can make one: the recorder is about to cut a segment, and
    /// cuts it just before the key units.
    pub fn request_key_units(&self) {
        self.key_requests.fetch_add(1, Ordering::AcqRel);
    }

    /// How many times key units were asked for; a source that sees it grow
    /// asks its encoder for one (GStreamer's force-key-unit event).
    pub fn key_unit_requests(&self) -> u64 {
        self.key_requests.load(Ordering::Acquire)
    }

    /// Moves up to `max` of `channel`'s queued messages, oldest first,
    /// into `out`; returns how many. Each keeps its charge until
    /// [`release`](Self::release).
    #[inline]
    pub fn pop_into(&self, channel: &Channel, out: &mut Vec<Queued>, max: usize) -> usize {
        channel.queue.pop_into(out, max)
    }

    /// Gives back what a message was charged, once its payload is copied.
    /// A charge on the shared area may be summed and given back in one
    /// call to [`MemoryBudget::release`] instead.
    #[inline]
    pub fn release(&self, channel: &Channel, charge: Charge) {
        if charge.reserved {
            channel
                .floor_bytes
                .fetch_sub(charge.bytes, Ordering::AcqRel);
        }
        self.budget.release(charge.bytes);
    }

    /// Hands a copied payload's buffer back to its channel for reuse, if
    /// it is small enough to be worth keeping.
    #[inline]
    pub fn recycle(&self, channel: &Channel, buf: Vec<u8>) {
        if buf.capacity() <= RETURN_MAX_CAPACITY {
            let _ = channel
                .returns
                .get_or_init(|| Box::new(return_pool()))
                .enqueue(buf);
        }
    }
}
