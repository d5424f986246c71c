//! The closer: finishes segments on its own thread, in order, so a split
//! does not stall the writes of the next segment (closing means the
//! summary, a final fdatasync, rename, 0444, directory fsync and
//! `metadata.yaml`), and recovers segments that storage failed in.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use edgerec_format::recover::{self, Outcome, RecoveryReport};
use edgerec_source::{ChannelId, Intake};

use crate::counters::PipelineCounters;
use crate::options::AnnouncedKind;
use crate::segment::{ClosedSegment, Segment, Session};
use crate::stage::{beating_while, fault_point, StageBeat, Stages};
use crate::Watch;

/// Work for the closer.
pub(crate) enum CloseJob {
    /// Finish a healthy segment.
    Finish(Box<Segment>),
    /// Recover a segment that storage failed in (already closed at its
    /// last good block): rebuild its summary so it is a valid closed file.
    Recover(PathBuf),
    /// The same for a segment whose close failed; the counts say what was
    /// written into it (new messages, latched repeats) so what recovery
    /// could not keep moves from `written` to `lost`.
    RecoverCounted(PathBuf, BTreeMap<u16, u64>, BTreeMap<u16, u64>),
}

/// What the closer did.
#[derive(Debug, Default)]
pub(crate) struct CloserOutput {
    pub(crate) closed: Vec<ClosedSegment>,
    pub(crate) errors: Vec<String>,
}

/// How soon a recovery that failed is tried again while no other job
/// comes (the space it needs may be back); the wait doubles, to
/// [`RETRY_MAX`], while it keeps failing.
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(60);

/// The closer's inputs.
pub(crate) struct Closer {
    pub(crate) rx: Receiver<CloseJob>,
    pub(crate) session: Arc<Mutex<Session>>,
    pub(crate) intake: Arc<Intake>,
    pub(crate) counters: Arc<PipelineCounters>,
    /// Each closed file and its size, for retention.
    pub(crate) notify: Sender<(PathBuf, u64)>,
    pub(crate) stages: Arc<Stages>,
    pub(crate) watch: Watch,
    /// How long one close or recovery may take while the closer still
    /// counts as alive (see [`beating_while`]).
    pub(crate) allowance: Duration,
}

impl Closer {
    /// Runs until the sequencer is gone and every job is done (or, after
    /// an abort, until no job is waiting).
    pub(crate) fn run(self, beat: &StageBeat) -> CloserOutput {
        let mut out = CloserOutput::default();
        let mut jobs: VecDeque<CloseJob> = VecDeque::new();
        // Recoveries that failed (a full disk has no room for the recovered
        // copy): tried again with the next job, after RETRY_FIRST and
        // longer while none comes, and once more at the end.
        let mut retry: Vec<CloseJob> = Vec::new();
        let mut retried = Instant::now();
        let mut retry_wait = RETRY_FIRST;
        let mut last_round = false;
        let mut done = 0u64;
        loop {
            beat.beat_progress(done);
            fault_point(&self.watch, "closer");
            let job = match jobs.pop_front() {
                Some(j) => j,
                None if last_round => break,
                None => match self.rx.recv_timeout(Duration::from_millis(100)) {
                    Ok(j) => {
                        jobs.extend(retry.drain(..));
                        j
                    }
                    Err(RecvTimeoutError::Timeout) if self.stages.aborted() => break,
                    Err(RecvTimeoutError::Timeout) => {
                        if retry.is_empty() {
                            retry_wait = RETRY_FIRST;
                        } else if retried.elapsed() >= retry_wait {
                            retried = Instant::now();
                            retry_wait = (retry_wait * 2).min(RETRY_MAX);
                            jobs.extend(retry.drain(..));
                        }
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        last_round = true;
                        jobs.extend(retry.drain(..));
                        continue;
                    }
                },
            };
            done += 1;
            match job {
                CloseJob::Finish(seg) => self.finish(*seg, &mut jobs, &mut out, beat),
                CloseJob::Recover(path) => {
                    if let Some(again) = self.recover(path, None, &mut out, beat) {
                        if !last_round {
                            retry.push(again);
                        }
                    }
                }
                CloseJob::RecoverCounted(path, w, r) => {
                    if let Some(again) = self.recover(path, Some((w, r)), &mut out, beat) {
                        if !last_round {
                            retry.push(again);
                        }
                    }
                }
            }
        }
        out
    }

    fn finish(
        &self,
        seg: Segment,
        jobs: &mut VecDeque<CloseJob>,
        out: &mut CloserOutput,
        beat: &StageBeat,
    ) {
        let path = seg.active_path().to_path_buf();
        let (written, repeats) = seg.message_counts();
        let r = beating_while(beat, "edgerec-close", self.allowance, || seg.finish())
            .and_then(|f| lock(&self.session).add_closed(f));
        match r {
            Ok(c) => {
                tracing::info!("closed {} ({} messages)", c.path.display(), c.messages);
                let _ = self.notify.send((c.path.clone(), c.bytes));
                crate::options::announce(
                    &self.watch,
                    &c.path,
                    c.bytes,
                    AnnouncedKind::Segment,
                    (c.new_start_ns, c.new_end_ns),
                );
                out.closed.push(c);
            }
            // The next segment is unaffected. A write that failed while
            // closing left this one cut at its last good block: recover it.
            Err(e) => {
                tracing::error!("closing {} failed: {e}", path.display());
                out.errors.push(e.to_string());
                if path.exists() {
                    jobs.push_back(CloseJob::RecoverCounted(path, written, repeats));
                }
            }
        }
    }

    /// Recovers `path`; returns the job to try again when it failed.
    fn recover(
        &self,
        path: PathBuf,
        counts: Option<(BTreeMap<u16, u64>, BTreeMap<u16, u64>)>,
        out: &mut CloserOutput,
        beat: &StageBeat,
    ) -> Option<CloseJob> {
        if !path.exists() {
            return None;
        }
        let recovered = beating_while(beat, "edgerec-close", self.allowance, || {
            recover::recover_file(&path)
        });
        match recovered {
            // Not even a whole header reached the disk (the failure hit
            // the first write): the file holds no data at all.
            Ok(r) if r.outcome == Outcome::NothingRecoverable && r.original_bytes < 1 << 20 => {
                tracing::warn!(
                    "removing {}: the storage failure came before any data ({} bytes)",
                    path.display(),
                    r.original_bytes
                );
                let _ = std::fs::remove_file(&path);
                None
            }
            Ok(r) => {
                if let Some((written, repeats)) = &counts {
                    self.correct_counts(written, repeats, &r);
                }
                tracing::warn!(
                    "recovered {} after the storage failure: kept {} of {} bytes",
                    path.display(),
                    r.kept_bytes,
                    r.original_bytes
                );
                lock(&self.session).reload_metadata();
                if let Some(file) = r.output {
                    let bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
                    let _ = self.notify.send((file.clone(), bytes));
                    crate::options::announce(
                        &self.watch,
                        &file,
                        bytes,
                        AnnouncedKind::Segment,
                        (0, 0),
                    );
                    out.closed.push(ClosedSegment {
                        index: u32::MAX,
                        path: file,
                        messages: r.kept_messages.values().sum(),
                        bytes,
                        start_ns: 0,
                        end_ns: 0,
                        new_start_ns: 0,
                        new_end_ns: 0,
                    });
                }
                None
            }
            // Kept `.active`; tried again later, and by start-up recovery
            // if it still fails.
            Err(e) => {
                tracing::warn!("recovering {} failed (will retry): {e}", path.display());
                Some(match counts {
                    Some((w, r)) => CloseJob::RecoverCounted(path, w, r),
                    None => CloseJob::Recover(path),
                })
            }
        }
    }

    /// Moves what recovery could not keep of a segment from `written` to
    /// `lost`.
    fn correct_counts(
        &self,
        written: &BTreeMap<u16, u64>,
        repeats: &BTreeMap<u16, u64>,
        r: &RecoveryReport,
    ) {
        for (&ch, &n) in written {
            let Some(c) = self.intake.table().get(ChannelId(ch)) else {
                continue;
            };
            let kept = r.kept_messages.get(&c.spec.topic).copied().unwrap_or(0);
            let kept_new = kept.saturating_sub(repeats.get(&ch).copied().unwrap_or(0));
            let gone = n.saturating_sub(kept_new);
            if gone > 0 {
                c.counters.written.fetch_sub(gone, Ordering::Relaxed);
                c.counters.lost.fetch_add(gone, Ordering::Relaxed);
                self.counters
                    .messages_written
                    .fetch_sub(gone, Ordering::Relaxed);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
