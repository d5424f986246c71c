//! The compressor pool: seals chunks (compress, CRC) in parallel, in any
//! order; the sequencer puts them back in order.

use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use edgerec_format::chunk::{ChunkCompressor, SealedChunk};
use edgerec_source::Intake;

use crate::chunker::{ChunkJob, LatchedMessage};
use crate::stage::{fault_point, Pop, StageBeat, Stages, WorkQueue};
use crate::Watch;

/// A sealed chunk on its way to the sequencer.
pub(crate) struct Sealed {
    pub(crate) no: u64,
    pub(crate) sealed: SealedChunk,
    /// Budget bytes held until written (the compressed copy).
    pub(crate) charge: u64,
    pub(crate) latched: Vec<LatchedMessage>,
    /// The next segment starts with this chunk (see [`crate::chunker`]).
    pub(crate) cut_before: bool,
}

impl PartialEq for Sealed {
    fn eq(&self, o: &Self) -> bool {
        self.no == o.no
    }
}
impl Eq for Sealed {}
impl PartialOrd for Sealed {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Sealed {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.no.cmp(&o.no)
    }
}

/// Seals jobs until the queue is closed and empty, or the pipeline aborts.
pub(crate) fn run(
    jobs: &WorkQueue<ChunkJob>,
    out: Sender<Sealed>,
    comp: &mut ChunkCompressor,
    intake: &Arc<Intake>,
    stages: &Stages,
    watch: &Watch,
    beat: &StageBeat,
) {
    let mut sealed_count = 0u64;
    loop {
        beat.beat_progress(sealed_count);
        fault_point(watch, "compressor");
        if stages.aborted() {
            return;
        }
        let job = match jobs.pop_timeout(Duration::from_millis(100)) {
            Pop::Item(j) => j,
            Pop::Empty => continue,
            Pop::Closed => return,
        };
        let sealed = job.chunk.seal(comp);
        sealed_count += 1;
        // The compressed copy and the index records are new memory.
        let extra = sealed.extra_memory() as u64;
        intake.budget().force_reserve(extra);
        if out
            .send(Sealed {
                no: job.no,
                sealed,
                charge: extra,
                latched: job.latched,
                cut_before: job.cut_before,
            })
            .is_err()
        {
            return;
        }
    }
}
