//! The dedicated I/O thread: it owns the engine (and with it the io_uring),
//! takes commands from the writer in order, keeps up to `queue_depth` writes
//! in flight, and hands every buffer back when its completion is reaped.
//!
//! Ordering rules, enforced here for every backend alike:
//! - a write never starts while another write overlapping its range is in
//!   flight (a padded tail block is later rewritten whole at the same
//!   offset: the first must complete before the second starts);
//! - a sync issues fdatasync at once (one at a time; writes continue
//!   beside it) and on success publishes as durable the contiguous written
//!   length at the moment it was issued: fdatasync covers every write
//!   completed before it;
//! - after the first failed write or sync no further write is submitted;
//!   close truncates the file at the last good contiguous offset.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::IntoRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crate::align::AlignedBuf;
use crate::backend::{Done, Engine, Op, SubmitError, WriteOp};
use crate::error::{ErrorKind, StorageError};
use crate::{Backend, Faults};

/// What the writer asks of the I/O thread, executed in order.
pub(crate) enum Cmd {
    /// Write a block (full, or a zero-padded tail).
    Write(WriteOp),
    /// fdatasync, publish the durable offset, answer with `id`.
    Sync { id: u64 },
    /// Drain, truncate to `logical_len` (or to the last good offset after a
    /// failure), fdatasync, close the fd and exit. `None`: the writer went
    /// away without closing; keep what was written.
    Close { logical_len: Option<u64> },
}

/// What the I/O thread tells the writer.
pub(crate) enum Event {
    /// A buffer is free again (written, failed or cancelled).
    Buffer(AlignedBuf),
    /// The first failed write (or a broken queue); nothing more is written.
    Failed(StorageError),
    /// Sync `id` completed; `durable` bytes are durable.
    Synced { id: u64, durable: u64 },
    /// Sync `id` failed, or was refused because the writer had failed.
    SyncFailed { id: u64, error: StorageError },
    /// The answer to [`Cmd::Close`]; the thread has exited its loop.
    Closed(Result<Closed, StorageError>),
}

/// Outcome of a successful close.
pub(crate) struct Closed {
    pub(crate) truncated_after_error: Option<u64>,
}

/// Counters the I/O thread updates and the writer (or a status thread) reads.
#[derive(Default)]
pub(crate) struct Shared {
    pub(crate) durable: Arc<AtomicU64>,
    pub(crate) bytes_written: AtomicU64,
    pub(crate) writes: AtomicU64,
    pub(crate) syncs: AtomicU64,
    pub(crate) max_write_latency_us: AtomicU64,
    pub(crate) max_sync_latency_us: AtomicU64,
}

/// Fixed parameters of the I/O thread.
pub(crate) struct Config {
    pub(crate) path: PathBuf,
    pub(crate) backend: Backend,
    pub(crate) alignment: usize,
    pub(crate) queue_depth: usize,
    pub(crate) preallocate: u64,
    pub(crate) realtime_priority: u8,
    pub(crate) faults: Faults,
}

/// Starts the I/O thread.
pub(crate) fn spawn(
    engine: Box<dyn Engine>,
    file: Arc<File>,
    cfg: Config,
    shared: Arc<Shared>,
) -> std::io::Result<(Sender<Cmd>, Receiver<Event>, JoinHandle<()>)> {
    let (cmd_tx, cmd_rx) = mpsc::channel();
    let (ev_tx, ev_rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("edgerec-io".into())
        .spawn(move || {
            crate::sched::apply_realtime_priority(
                "the I/O thread (edgerec-io)",
                cfg.realtime_priority,
            );
            Worker::new(engine, file, cfg, shared, ev_tx).run(cmd_rx)
        })?;
    Ok((cmd_tx, ev_rx, handle))
}

/// The written byte ranges, merged: `end` is the contiguous length from
/// offset 0 that completed writes cover; completed ranges beyond a gap wait
/// in `ahead` until the gap fills.
#[derive(Default, Debug)]
pub(crate) struct Contiguous {
    end: u64,
    ahead: BTreeMap<u64, u64>,
}

impl Contiguous {
    /// Records that `[start, end)` is written.
    pub(crate) fn complete(&mut self, start: u64, end: u64) {
        if start <= self.end {
            self.end = self.end.max(end);
        } else {
            let e = self.ahead.entry(start).or_insert(end);
            *e = (*e).max(end);
        }
        while let Some((&s, &e)) = self.ahead.first_key_value() {
            if s > self.end {
                break;
            }
            self.end = self.end.max(e);
            self.ahead.remove(&s);
        }
    }

    /// Contiguous written length from offset 0.
    pub(crate) fn end(&self) -> u64 {
        self.end
    }
}

/// Why the worker stopped writing; decides where close truncates.
#[derive(Clone, Copy, Debug)]
enum Failure {
    /// A write failed (or the queue broke): keep the contiguous good prefix.
    Write,
    /// fdatasync failed: only what an earlier sync made durable is trusted.
    Sync { durable: u64 },
}

/// `fallocate` ahead of the write offset in extents of `extent` bytes.
struct Prealloc {
    extent: u64,
    /// End of the allocated region.
    end: u64,
    enabled: bool,
    in_flight: bool,
}

enum Step {
    Next,
    Blocked(Cmd),
    Exit(Result<Closed, StorageError>),
}

struct Worker {
    engine: Box<dyn Engine>,
    file: Arc<File>,
    cfg: Config,
    shared: Arc<Shared>,
    events: Sender<Event>,
    written: Contiguous,
    /// `[offset, offset + len)` of each write in flight.
    writes_in_flight: Vec<(u64, u64)>,
    /// `(id, target)` of the fdatasync in flight for a sync request.
    sync_in_flight: Option<(u64, u64)>,
    /// `(id, target)` of a sync request waiting for the writes before it.
    sync_waiting: Option<(u64, u64)>,
    /// Largest `valid_end` of any write submitted.
    submitted_end: u64,
    /// Result of the final fdatasync issued by close.
    close_sync: Option<i32>,
    prealloc: Prealloc,
    failure: Option<Failure>,
    /// The engine's queue failed; what it holds is abandoned to it.
    broken: bool,
    writes_submitted: u64,
    /// Completions made up by the worker (injected faults, refused
    /// submissions), processed like the engine's.
    synthetic: Vec<Done>,
    scratch: Vec<Done>,
}

impl Worker {
    fn new(
        engine: Box<dyn Engine>,
        file: Arc<File>,
        cfg: Config,
        shared: Arc<Shared>,
        events: Sender<Event>,
    ) -> Worker {
        let prealloc = Prealloc {
            extent: cfg.preallocate,
            end: 0,
            enabled: cfg.preallocate > 0,
            in_flight: false,
        };
        Worker {
            engine,
            file,
            cfg,
            shared,
            events,
            written: Contiguous::default(),
            writes_in_flight: Vec::new(),
            sync_in_flight: None,
            sync_waiting: None,
            submitted_end: 0,
            close_sync: None,
            prealloc,
            failure: None,
            broken: false,
            writes_submitted: 0,
            synthetic: Vec::new(),
            scratch: Vec::new(),
        }
    }

    fn run(mut self, commands: Receiver<Cmd>) {
        let mut pending: Option<Cmd> = None;
        let result = loop {
            self.reap(false);
            if pending.is_none() {
                pending = if self.busy() == 0 {
                    Some(commands.recv().unwrap_or(Cmd::Close { logical_len: None }))
                } else {
                    match commands.try_recv() {
                        Ok(cmd) => Some(cmd),
                        Err(TryRecvError::Empty) => None,
                        Err(TryRecvError::Disconnected) => Some(Cmd::Close { logical_len: None }),
                    }
                };
            }
            match pending.take() {
                // Nothing new to do: wait for the kernel.
                None => self.reap(true),
                Some(cmd) => match self.start(cmd) {
                    Step::Next => {}
                    Step::Blocked(cmd) => {
                        pending = Some(cmd);
                        self.reap(true);
                    }
                    Step::Exit(result) => break result,
                },
            }
        };
        let events = self.events.clone();
        let result = result.and_then(|closed| self.close_fd().map(|()| closed));
        let _ = events.send(Event::Closed(result));
    }

    /// Operations the worker still waits for.
    fn busy(&self) -> usize {
        let engine = if self.broken {
            0
        } else {
            self.engine.in_flight()
        };
        engine + self.synthetic.len()
    }

    fn start(&mut self, cmd: Cmd) -> Step {
        match cmd {
            Cmd::Write(op) => {
                if self.failure.is_some() {
                    // Never write after a failure: the file must end at the
                    // good prefix, not carry blocks past a hole.
                    self.give_back(op.buf);
                    return Step::Next;
                }
                let (start, end) = (op.offset, op.offset + op.len as u64);
                let overlaps = self
                    .writes_in_flight
                    .iter()
                    .any(|&(s, e)| s < end && start < e);
                if overlaps || self.writes_in_flight.len() >= self.cfg.queue_depth {
                    return Step::Blocked(Cmd::Write(op));
                }
                self.preallocate_for(end);
                self.submit_write(op);
                Step::Next
            }
            Cmd::Sync { id } => {
                // One sync at a time. It covers every write submitted before
                // it: fdatasync is issued as soon as those have completed,
                // while later writes keep flowing beside it. (Draining the
                // whole queue first, as an earlier version did, emptied it
                // once a second and cost throughput.)
                if self.sync_in_flight.is_some() || self.sync_waiting.is_some() {
                    return Step::Blocked(Cmd::Sync { id });
                }
                if self.failure.is_some() {
                    let error = self.error(ErrorKind::Failed, "fdatasync", None);
                    let _ = self.events.send(Event::SyncFailed { id, error });
                    return Step::Next;
                }
                self.sync_waiting = Some((id, self.submitted_end));
                self.maybe_issue_sync();
                Step::Next
            }
            Cmd::Close { logical_len } => {
                if self.busy() > 0 || self.sync_waiting.is_some() {
                    return Step::Blocked(Cmd::Close { logical_len });
                }
                Step::Exit(self.finish(logical_len))
            }
        }
    }

    /// Issues the waiting sync once every write it covers and the
    /// fallocate in flight have completed (so the allocation the sync
    /// reports is on disk, and a sync never races an allocation); answers
    /// it with a failure when the writer failed meanwhile.
    fn maybe_issue_sync(&mut self) {
        let Some((id, target)) = self.sync_waiting else {
            return;
        };
        if self.failure.is_some() {
            self.sync_waiting = None;
            let error = self.error(ErrorKind::Failed, "fdatasync", None);
            let _ = self.events.send(Event::SyncFailed { id, error });
            return;
        }
        if self.sync_in_flight.is_some() || self.prealloc.in_flight || self.written.end() < target {
            return;
        }
        self.sync_waiting = None;
        self.sync_in_flight = Some((id, self.written.end()));
        self.push(Op::Datasync {
            id: Some(id),
            started: Instant::now(),
        });
    }

    fn submit_write(&mut self, mut op: WriteOp) {
        self.submitted_end = self.submitted_end.max(op.valid_end);
        self.writes_submitted += 1;
        self.writes_in_flight
            .push((op.offset, op.offset + op.len as u64));
        op.started = Instant::now();
        // Fault injection costs production one branch on a None.
        if let Some((nth, errno)) = self.cfg.faults.fail_write {
            if nth == self.writes_submitted {
                self.synthetic.push(Done {
                    op: Op::Write(op),
                    result: -errno,
                });
                return;
            }
        }
        self.push(Op::Write(op));
    }

    /// Allocates the next extent when a write reaches into the last
    /// allocated one, so block allocation happens ahead of the writes.
    fn preallocate_for(&mut self, write_end: u64) {
        let p = &mut self.prealloc;
        if !p.enabled || p.in_flight || write_end <= p.end.saturating_sub(p.extent) {
            return;
        }
        let start = p.end.max(write_end.saturating_sub(1) / p.extent * p.extent);
        p.end = start + p.extent;
        p.in_flight = true;
        let len = p.extent;
        self.push(Op::Fallocate { offset: start, len });
    }

    fn push(&mut self, op: Op) {
        match self.engine.submit(op) {
            Ok(()) => {}
            Err(SubmitError::NotQueued(op, errno)) => {
                self.synthetic.push(Done { op, result: -errno })
            }
            Err(SubmitError::Broken(e)) => {
                self.broken = true;
                let errno = e.raw_os_error().unwrap_or(libc::EIO);
                self.fail(
                    ErrorKind::Io {
                        op: "io_uring_enter",
                        errno,
                    },
                    "io_uring_enter",
                    None,
                );
            }
        }
    }

    /// Processes completions; with `wait`, first blocks for at least one.
    fn reap(&mut self, wait: bool) {
        let mut done = std::mem::take(&mut self.scratch);
        done.append(&mut self.synthetic);
        if !self.broken {
            let block = wait && done.is_empty() && self.engine.in_flight() > 0;
            if let Err(e) = self.engine.reap(block, &mut done) {
                self.broken = true;
                let errno = e.raw_os_error().unwrap_or(libc::EIO);
                self.fail(
                    ErrorKind::Io {
                        op: "io_uring_enter",
                        errno,
                    },
                    "io_uring_enter",
                    None,
                );
            }
        }
        for d in done.drain(..) {
            self.complete(d);
        }
        self.scratch = done;
        self.maybe_issue_sync();
    }

    fn complete(&mut self, done: Done) {
        let result = done.result;
        match done.op {
            Op::Write(op) => self.complete_write(op, result),
            Op::Datasync { id, started } => {
                let us = started.elapsed().as_micros() as u64;
                match id {
                    None => self.close_sync = Some(result),
                    Some(id) => {
                        let target = match self.sync_in_flight.take() {
                            Some((sid, target)) if sid == id => target,
                            _ => 0,
                        };
                        if result >= 0 {
                            self.shared.syncs.fetch_add(1, Ordering::Relaxed);
                            self.shared
                                .max_sync_latency_us
                                .fetch_max(us, Ordering::Relaxed);
                            self.shared.durable.fetch_max(target, Ordering::Release);
                            let durable = self.shared.durable.load(Ordering::Acquire);
                            let _ = self.events.send(Event::Synced { id, durable });
                        } else {
                            let durable = self.shared.durable.load(Ordering::Acquire);
                            let error = self.error(
                                ErrorKind::Io {
                                    op: "fdatasync",
                                    errno: -result,
                                },
                                "fdatasync",
                                None,
                            );
                            if self.failure.is_none() {
                                tracing::error!(%error, durable, "fdatasync failed; the writer stops");
                                self.failure = Some(Failure::Sync { durable });
                            }
                            let _ = self.events.send(Event::SyncFailed { id, error });
                        }
                    }
                }
            }
            Op::Fallocate { offset, len } => {
                self.prealloc.in_flight = false;
                if result >= 0 {
                    // Writes submitted while this one ran may already reach
                    // into the extent it allocated: allocate the next now
                    // rather than at the next write.
                    self.preallocate_for(self.submitted_end);
                }
                if result < 0 {
                    self.prealloc.enabled = false;
                    let errno = -result;
                    let reason = crate::error::errno_text(errno);
                    // Not fatal: writes allocate blocks themselves; only a
                    // failed write stops the writer.
                    if errno == libc::EOPNOTSUPP {
                        tracing::info!(path = %self.cfg.path.display(), "fallocate: {reason}; preallocation disabled");
                    } else {
                        tracing::warn!(path = %self.cfg.path.display(), offset, len, "fallocate: {reason}; preallocation disabled");
                    }
                }
            }
        }
    }

    fn complete_write(&mut self, mut op: WriteOp, result: i32) {
        if result >= 0 {
            let n = result as usize;
            op.done += n;
            self.shared
                .bytes_written
                .fetch_add(n as u64, Ordering::Relaxed);
            if op.done < op.len {
                // A short write (tmpfs or ext4 close to full). Retry the rest
                // when its offset and address stay aligned; the retry then
                // reports the real errno (ENOSPC) or finishes the block.
                let aligned =
                    self.cfg.backend == Backend::Buffered || op.done % self.cfg.alignment == 0;
                if n > 0 && aligned && self.failure.is_none() {
                    tracing::debug!(
                        offset = op.offset,
                        written = op.done,
                        len = op.len,
                        "short write; retrying the rest"
                    );
                    self.push(Op::Write(op));
                    return;
                }
                let (offset, requested, written) = (op.offset, op.len, op.done);
                self.end_write(op);
                self.fail(
                    ErrorKind::ShortWrite { requested, written },
                    "write",
                    Some(offset),
                );
                return;
            }
            let us = op.started.elapsed().as_micros() as u64;
            self.shared.writes.fetch_add(1, Ordering::Relaxed);
            self.shared
                .max_write_latency_us
                .fetch_max(us, Ordering::Relaxed);
            self.written.complete(op.offset, op.valid_end);
            self.end_write(op);
        } else {
            let offset = op.offset + op.done as u64;
            self.end_write(op);
            self.fail(
                ErrorKind::from_errno("write", -result),
                "write",
                Some(offset),
            );
        }
    }

    /// Removes a finished write from the in-flight set and frees its buffer.
    fn end_write(&mut self, op: WriteOp) {
        let range = (op.offset, op.offset + op.len as u64);
        if let Some(i) = self.writes_in_flight.iter().position(|&r| r == range) {
            self.writes_in_flight.swap_remove(i);
        }
        self.give_back(op.buf);
    }

    fn give_back(&self, buf: AlignedBuf) {
        // The writer may be gone (dropped while we drain); the buffer is
        // then simply freed.
        let _ = self.events.send(Event::Buffer(buf));
    }

    fn error(&self, kind: ErrorKind, op: &'static str, offset: Option<u64>) -> StorageError {
        StorageError::new(kind, &self.cfg.path, op, offset)
    }

    /// Records the first write failure and tells the writer.
    fn fail(&mut self, kind: ErrorKind, op: &'static str, offset: Option<u64>) {
        let error = self.error(kind, op, offset);
        if self.failure.is_some() {
            tracing::debug!(%error, "further failure after the first");
            return;
        }
        tracing::error!(%error, backend = %self.cfg.backend, "write failed; the writer stops");
        self.failure = Some(Failure::Write);
        let _ = self.events.send(Event::Failed(error));
    }

    /// Truncates, syncs and reports; called with nothing in flight.
    fn finish(&mut self, logical_len: Option<u64>) -> Result<Closed, StorageError> {
        let good = self.written.end();
        let (len, truncated) = match (self.failure, logical_len) {
            (Some(Failure::Write), _) => (good, Some(good)),
            (Some(Failure::Sync { durable }), _) => (durable, Some(durable)),
            (None, Some(l)) if good >= l => (l, None),
            (None, Some(l)) => {
                // Cannot happen while the writer submits every block before
                // Close; never extend the file over unwritten data.
                tracing::error!(
                    good,
                    logical_len = l,
                    "written prefix shorter than the logical length"
                );
                (good, Some(good))
            }
            (None, None) => (good, None),
        };
        self.file
            .set_len(len)
            .map_err(|e| StorageError::io(&self.cfg.path, "ftruncate", Some(len), &e))?;
        self.datasync_blocking()?;
        self.shared.durable.fetch_max(len, Ordering::Release);
        Ok(Closed {
            truncated_after_error: truncated,
        })
    }

    /// fdatasync through the engine, waiting for it (plain fdatasync when
    /// the engine's queue is broken).
    fn datasync_blocking(&mut self) -> Result<(), StorageError> {
        if self.broken {
            return self
                .file
                .sync_data()
                .map_err(|e| StorageError::io(&self.cfg.path, "fdatasync", None, &e));
        }
        self.close_sync = None;
        self.push(Op::Datasync {
            id: None,
            started: Instant::now(),
        });
        while self.close_sync.is_none() && self.busy() > 0 {
            self.reap(true);
        }
        match self.close_sync.take() {
            Some(r) if r >= 0 => Ok(()),
            Some(r) => Err(self.error(
                ErrorKind::Io {
                    op: "fdatasync",
                    errno: -r,
                },
                "fdatasync",
                None,
            )),
            None => self
                .file
                .sync_data()
                .map_err(|e| StorageError::io(&self.cfg.path, "fdatasync", None, &e)),
        }
    }

    /// Drops the engine (no operation is in flight now), then closes the fd
    /// and checks close(2), which can report a deferred write error on
    /// some file systems (NFS).
    fn close_fd(self) -> Result<(), StorageError> {
        let Worker {
            engine, file, cfg, ..
        } = self;
        drop(engine);
        match Arc::try_unwrap(file) {
            Ok(file) => {
                let fd = file.into_raw_fd();
                // SAFETY: into_raw_fd gave us sole ownership of an open fd;
                // it is closed exactly once, here.
                let rc = unsafe { libc::close(fd) };
                if rc != 0 {
                    let e = std::io::Error::last_os_error();
                    return Err(StorageError::io(&cfg.path, "close", None, &e));
                }
                Ok(())
            }
            // Only an engine leaked after a broken queue can still hold it.
            Err(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Contiguous;

    #[test]
    fn contiguous_merges_out_of_order_completions() {
        let mut c = Contiguous::default();
        c.complete(4096, 8192);
        assert_eq!(c.end(), 0, "a gap at 0 keeps the prefix empty");
        c.complete(12288, 16384);
        c.complete(0, 4096);
        assert_eq!(c.end(), 8192);
        c.complete(8192, 12288);
        assert_eq!(c.end(), 16384);
    }

    #[test]
    fn contiguous_tail_then_rewrite() {
        let mut c = Contiguous::default();
        // Padded tail at 0 holding 100 bytes, then the full block rewrite.
        c.complete(0, 100);
        assert_eq!(c.end(), 100);
        c.complete(4096, 8192);
        assert_eq!(c.end(), 100);
        c.complete(0, 4096);
        assert_eq!(c.end(), 8192);
    }

    #[test]
    fn contiguous_stops_at_a_failed_block() {
        let mut c = Contiguous::default();
        c.complete(0, 4096);
        c.complete(4096, 8192);
        // Block at 8192 failed; later ones succeeded.
        c.complete(12288, 16384);
        c.complete(16384, 20480);
        assert_eq!(c.end(), 8192);
    }
}
