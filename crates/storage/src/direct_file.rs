//! [`DirectFile`]: the append-only writer the rest of edgerec sees. It
//! copies caller bytes into aligned pool blocks, hands each full block to
//! the I/O thread, and tracks what is accepted, written and durable.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::align::{padded_len, AlignedBuf, BufferPool};
use crate::backend::pwrite::PwriteEngine;
use crate::backend::uring::{self, UringEngine};
use crate::backend::{Engine, WriteOp};
use crate::blockdev;
use crate::error::{errno_text, ErrorKind, StorageError};
use crate::io_thread::{self, Cmd, Event, Shared};
use crate::{Backend, BackendChoice};

/// Largest block accepted: one io_uring SQE carries a `u32` length, and
/// larger blocks gain nothing.
const MAX_BLOCK_SIZE: usize = 1 << 30;
/// Far above any useful NVMe queue depth for one sequential stream.
const MAX_QUEUE_DEPTH: usize = 1024;

/// How a [`DirectFile`] writes.
#[derive(Clone, Debug)]
pub struct WriterOptions {
    /// Bytes per write; a multiple of [`DirectFile::alignment`]. Default 1 MiB.
    pub block_size: usize,
    /// Writes in flight at once. Default 8.
    pub queue_depth: usize,
    /// How long [`DirectFile::tick`] lets unsynced data wait before it
    /// starts an fdatasync. Default 1 s.
    pub sync_interval: Duration,
    /// `fallocate` extent size, allocated one extent ahead of the write
    /// offset; 0 turns preallocation off. Default 256 MiB. Mode 0
    /// fallocate also extends the file size, so until close the file is
    /// longer than its data: after a crash, bytes past the durable offset
    /// read as zeros. A file system that cannot preallocate (EOPNOTSUPP,
    /// ENOSPC) only switches it off.
    pub preallocate: u64,
    /// Backend selection. Default [`BackendChoice::Auto`].
    pub backend: BackendChoice,
    /// `SCHED_FIFO` priority of the I/O thread, 1 to 99; 0 (the default)
    /// leaves it at normal scheduling. A refusal (no `CAP_SYS_NICE`) is
    /// logged once and the file is written at normal priority.
    pub realtime_priority: u8,
    /// Fault injection for tests; the default injects nothing.
    #[doc(hidden)]
    pub faults: Faults,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            block_size: 1 << 20,
            queue_depth: 8,
            sync_interval: Duration::from_secs(1),
            preallocate: 256 << 20,
            backend: BackendChoice::Auto,
            realtime_priority: 0,
            faults: Faults::default(),
        }
    }
}

/// Faults to inject, for tests of the fallback chain and of failure
/// handling. Not part of the stable API.
#[doc(hidden)]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Make io_uring setup fail with this errno (as under qemu-user, with
    /// `kernel.io_uring_disabled`, or under seccomp).
    pub io_uring_errno: Option<i32>,
    /// Make opening with `O_DIRECT` fail with `EINVAL` (as on some tmpfs or
    /// overlay mounts).
    pub odirect_einval: bool,
    /// `Some((n, errno))`: the `n`-th block write (1-based, counting every
    /// write submitted, padded tails included) completes with `-errno`
    /// without reaching the kernel.
    pub fail_write: Option<(u64, i32)>,
}

/// A cheap handle to a file's durable offset, for a status thread.
#[derive(Clone, Debug)]
pub struct DurableOffset(Arc<AtomicU64>);

impl DurableOffset {
    /// Bytes known durable: written and covered by a completed fdatasync.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// I/O statistics of one file.
#[derive(Clone, Debug)]
pub struct StorageStats {
    /// Bytes the kernel accepted, padding and tail rewrites included.
    pub bytes_written: u64,
    /// Write operations completed.
    pub writes: u64,
    /// fdatasync calls completed for sync requests.
    pub syncs: u64,
    /// Longest time from submitting a write to its completion, in µs.
    pub max_write_latency_us: u64,
    /// Longest fdatasync, in µs.
    pub max_sync_latency_us: u64,
    /// The backend in use.
    pub backend: Backend,
}

/// The outcome of [`DirectFile::close`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloseReport {
    /// Bytes accepted by [`DirectFile::write_all`].
    pub logical_len: u64,
    /// The backend that wrote them.
    pub backend: Backend,
    /// `Some(len)` when a write or sync had failed: the file was truncated
    /// to `len`, the last good contiguous offset, and holds correct data up
    /// to there. Check it: a failure first noticed during close is reported
    /// only here.
    pub truncated_after_error: Option<u64>,
}

enum State {
    Healthy,
    /// Failed; the error is `Some` until a call has returned it.
    Failed(Option<StorageError>),
}

/// An append-only file written in aligned blocks by a dedicated I/O thread,
/// through io_uring+O_DIRECT where the kernel allows it.
///
/// Bytes move through three stages: *accepted* ([`logical_len`]), written
/// by the kernel, and *durable* ([`durable_offset`], after fdatasync).
/// Call [`tick`] often so data becomes durable every `sync_interval`, and
/// [`close`] at the end; Drop closes too, but can only log a failure.
///
/// [`logical_len`]: DirectFile::logical_len
/// [`durable_offset`]: DirectFile::durable_offset
/// [`tick`]: DirectFile::tick
/// [`close`]: DirectFile::close
pub struct DirectFile {
    path: PathBuf,
    backend: Backend,
    fallback_reason: Option<String>,
    alignment: usize,
    block_size: usize,
    sync_interval: Duration,
    pool: BufferPool,
    /// The block being filled, if one is taken.
    cur: Option<AlignedBuf>,
    /// File offset of `cur`.
    cur_offset: u64,
    /// Bytes of `cur` filled.
    cur_fill: usize,
    /// `valid_end` of the padded tail last written for the current block.
    tail_written: Option<u64>,
    logical_len: u64,
    /// Logical length covered by the last sync request.
    sync_requested: u64,
    last_sync: Instant,
    /// The sync started by tick() and not yet answered.
    tick_sync: Option<u64>,
    next_sync_id: u64,
    state: State,
    shared: Arc<Shared>,
    commands: Sender<Cmd>,
    events: Receiver<Event>,
    thread: Option<JoinHandle<()>>,
    closed: bool,
}

/// What a handled event means for a caller waiting on a sync.
enum SyncAnswer {
    Done(u64, u64),
    Failed(u64),
}

impl DirectFile {
    /// Creates `path` (it must not exist; mode 0644 less the umask) and
    /// starts its I/O thread with the best backend `opts` allow.
    pub fn create(path: &Path, opts: &WriterOptions) -> Result<DirectFile, StorageError> {
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        // The new file lands on its directory's file system, so the
        // directory tells the alignment before anything is created.
        let dev =
            blockdev::device_of(parent).map_err(|e| StorageError::io(path, "stat", None, &e))?;
        let alignment = blockdev::io_alignment(blockdev::logical_block_size(dev));
        validate(opts, alignment).map_err(|why| {
            StorageError::new(ErrorKind::InvalidOptions(why), path, "create", None)
        })?;
        let pool =
            BufferPool::new(opts.queue_depth + 2, opts.block_size, alignment).ok_or_else(|| {
                StorageError::new(
                    ErrorKind::Io {
                        op: "alloc",
                        errno: libc::ENOMEM,
                    },
                    path,
                    "alloc",
                    None,
                )
            })?;

        let opened = open_backend(path, opts)?;
        let backend = opened.backend;
        let file = Arc::new(opened.file);
        let engine: Box<dyn Engine> = match opened.ring {
            Some(ring) => Box::new(UringEngine::new(ring, Arc::clone(&file))),
            None => Box::new(PwriteEngine::new(Arc::clone(&file))),
        };
        log_backend(path, backend, opened.fallback_reason.as_deref());

        let shared = Arc::new(Shared::default());
        let cfg = io_thread::Config {
            path: path.to_path_buf(),
            backend,
            alignment,
            queue_depth: opts.queue_depth,
            preallocate: opts.preallocate,
            realtime_priority: opts.realtime_priority,
            faults: opts.faults.clone(),
        };
        let (commands, events, thread) =
            match io_thread::spawn(engine, file, cfg, Arc::clone(&shared)) {
                Ok(t) => t,
                Err(e) => {
                    let _ = std::fs::remove_file(path);
                    return Err(StorageError::io(path, "spawn I/O thread", None, &e));
                }
            };
        Ok(DirectFile {
            path: path.to_path_buf(),
            backend,
            fallback_reason: opened.fallback_reason,
            alignment,
            block_size: opts.block_size,
            sync_interval: opts.sync_interval,
            pool,
            cur: None,
            cur_offset: 0,
            cur_fill: 0,
            tail_written: None,
            logical_len: 0,
            sync_requested: 0,
            last_sync: Instant::now(),
            tick_sync: None,
            next_sync_id: 0,
            state: State::Healthy,
            shared,
            commands,
            events,
            thread: Some(thread),
            closed: false,
        })
    }

    /// The backend in use.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Why a better backend was refused, e.g.
    /// `"io_uring_setup: ENOSYS (Function not implemented)"`; `None` when
    /// the first choice worked.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.fallback_reason.as_deref()
    }

    /// Alignment of buffer addresses, write lengths and offsets in bytes:
    /// the device's logical block size, at least 4096.
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `data`. Copies it into pool blocks and submits each block as
    /// it fills; blocks only while every pool block is in flight. After a
    /// failure returns the error once, then [`ErrorKind::Failed`]; bytes
    /// accepted before the error count in [`logical_len`](Self::logical_len).
    pub fn write_all(&mut self, mut data: &[u8]) -> Result<(), StorageError> {
        self.poll()?;
        while !data.is_empty() {
            if self.cur.is_none() {
                let buf = self.take_buffer()?;
                self.cur = Some(buf);
            }
            let fill = self.cur_fill;
            let Some(cur) = self.cur.as_mut() else {
                continue;
            };
            let n = (self.block_size - fill).min(data.len());
            cur.as_mut_slice()[fill..fill + n].copy_from_slice(&data[..n]);
            self.cur_fill += n;
            self.logical_len += n as u64;
            data = &data[n..];
            if self.cur_fill == self.block_size {
                self.submit_full_block()?;
            }
        }
        Ok(())
    }

    /// Bytes accepted so far.
    pub fn logical_len(&self) -> u64 {
        self.logical_len
    }

    /// Bytes known durable (written and fdatasync'd).
    pub fn durable_offset(&self) -> u64 {
        self.shared.durable.load(Ordering::Acquire)
    }

    /// A handle to the durable offset another thread can read.
    pub fn durability(&self) -> DurableOffset {
        DurableOffset(Arc::clone(&self.shared.durable))
    }

    /// Housekeeping; call every 50-100 ms. When `sync_interval` has passed
    /// since the last sync request and data is unsynced, writes the partial
    /// tail block (a zero-padded copy) and starts an fdatasync without
    /// waiting for it; [`durable_offset`](Self::durable_offset) advances when it completes.
    pub fn tick(&mut self) -> Result<(), StorageError> {
        self.poll()?;
        if self.tick_sync.is_some()
            || self.logical_len <= self.sync_requested
            || self.last_sync.elapsed() < self.sync_interval
        {
            return Ok(());
        }
        self.write_tail()?;
        let id = self.request_sync()?;
        self.tick_sync = Some(id);
        Ok(())
    }

    /// Writes everything accepted (the partial tail padded), fdatasyncs and
    /// waits; returns the durable offset, then equal to
    /// [`logical_len`](Self::logical_len).
    pub fn sync(&mut self) -> Result<u64, StorageError> {
        self.poll()?;
        if self.durable_offset() == self.logical_len {
            return Ok(self.logical_len);
        }
        self.write_tail()?;
        let id = self.request_sync()?;
        loop {
            let event = self.next_event()?;
            match self.handle(event) {
                Some(SyncAnswer::Done(sid, durable)) if sid == id => return Ok(durable),
                Some(SyncAnswer::Failed(sid)) if sid == id => {
                    self.check()?;
                    return Err(self.error(ErrorKind::Failed, "fdatasync"));
                }
                _ => self.check()?,
            }
        }
    }

    /// I/O statistics so far.
    pub fn stats(&self) -> StorageStats {
        let s = &self.shared;
        StorageStats {
            bytes_written: s.bytes_written.load(Ordering::Relaxed),
            writes: s.writes.load(Ordering::Relaxed),
            syncs: s.syncs.load(Ordering::Relaxed),
            max_write_latency_us: s.max_write_latency_us.load(Ordering::Relaxed),
            max_sync_latency_us: s.max_sync_latency_us.load(Ordering::Relaxed),
            backend: self.backend,
        }
    }

    /// Writes the padded tail, waits for every write, truncates the file to
    /// its logical length, fdatasyncs and closes it. After a failure the
    /// file is instead truncated at the last good contiguous offset, synced
    /// and closed, and [`CloseReport::truncated_after_error`] says where.
    pub fn close(mut self) -> Result<CloseReport, StorageError> {
        self.close_inner()
    }

    fn close_inner(&mut self) -> Result<CloseReport, StorageError> {
        self.closed = true;
        self.drain_ready();
        if let Some(mut cur) = self.cur.take() {
            let fill = self.cur_fill;
            let valid_end = self.cur_offset + fill as u64;
            if matches!(self.state, State::Healthy)
                && fill > 0
                && self.tail_written != Some(valid_end)
            {
                // The last block is padded in place: nothing follows it.
                let len = padded_len(fill, self.alignment);
                cur.as_mut_slice()[fill..len].fill(0);
                let op = self.write_op(cur, len, valid_end);
                // A send failure surfaces below as a missing Closed answer.
                let _ = self.commands.send(Cmd::Write(op));
            } else {
                self.pool.put(cur);
            }
        }
        let sent = self.commands.send(Cmd::Close {
            logical_len: Some(self.logical_len),
        });
        let closed = match sent {
            Ok(()) => loop {
                match self.events.recv() {
                    Ok(Event::Closed(result)) => break result,
                    Ok(event) => {
                        self.handle(event);
                    }
                    Err(_) => break Err(self.error(ErrorKind::IoThreadExited, "close")),
                }
            },
            Err(_) => Err(self.error(ErrorKind::IoThreadExited, "close")),
        };
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!(path = %self.path.display(), "I/O thread panicked");
            }
        }
        let closed = closed?;
        if let Some(len) = closed.truncated_after_error {
            tracing::warn!(
                path = %self.path.display(),
                logical_len = self.logical_len,
                truncated_to = len,
                "closed after a failure; file truncated at the last good offset"
            );
        }
        Ok(CloseReport {
            logical_len: self.logical_len,
            backend: self.backend,
            truncated_after_error: closed.truncated_after_error,
        })
    }

    fn write_op(&self, buf: AlignedBuf, len: usize, valid_end: u64) -> WriteOp {
        WriteOp {
            buf,
            offset: self.cur_offset,
            len,
            valid_end,
            done: 0,
            started: Instant::now(),
        }
    }

    fn submit_full_block(&mut self) -> Result<(), StorageError> {
        let Some(buf) = self.cur.take() else {
            return Ok(());
        };
        let op = self.write_op(
            buf,
            self.block_size,
            self.cur_offset + self.block_size as u64,
        );
        self.cur_offset += self.block_size as u64;
        self.cur_fill = 0;
        self.tail_written = None;
        self.send(Cmd::Write(op))
    }

    /// Writes a zero-padded copy of the partial current block, unless the
    /// same tail is already written. The current block stays with the
    /// writer and is written again, whole, once full; the I/O thread keeps
    /// the two writes of that offset from overlapping in time.
    fn write_tail(&mut self) -> Result<(), StorageError> {
        let fill = self.cur_fill;
        let valid_end = self.cur_offset + fill as u64;
        if fill == 0 || self.tail_written == Some(valid_end) {
            return Ok(());
        }
        let mut tail = self.take_buffer()?;
        let Some(cur) = &self.cur else {
            self.pool.put(tail);
            return Ok(());
        };
        let len = padded_len(fill, self.alignment);
        let dst = tail.as_mut_slice();
        dst[..fill].copy_from_slice(&cur.as_slice()[..fill]);
        dst[fill..len].fill(0);
        let op = self.write_op(tail, len, valid_end);
        self.tail_written = Some(valid_end);
        self.send(Cmd::Write(op))
    }

    fn request_sync(&mut self) -> Result<u64, StorageError> {
        let id = self.next_sync_id;
        self.next_sync_id += 1;
        self.sync_requested = self.logical_len;
        self.last_sync = Instant::now();
        self.send(Cmd::Sync { id })?;
        Ok(id)
    }

    fn send(&mut self, cmd: Cmd) -> Result<(), StorageError> {
        if self.commands.send(cmd).is_err() {
            self.thread_gone();
            return self.check();
        }
        Ok(())
    }

    /// A free pool block; waits for the I/O thread to return one when all
    /// are in flight.
    fn take_buffer(&mut self) -> Result<AlignedBuf, StorageError> {
        loop {
            if let Some(buf) = self.pool.take() {
                return Ok(buf);
            }
            let event = self.next_event()?;
            self.handle(event);
            self.check()?;
        }
    }

    fn next_event(&mut self) -> Result<Event, StorageError> {
        match self.events.recv() {
            Ok(event) => Ok(event),
            Err(_) => {
                self.thread_gone();
                self.check()?;
                Err(self.error(ErrorKind::IoThreadExited, "recv"))
            }
        }
    }

    fn thread_gone(&mut self) {
        if matches!(self.state, State::Healthy) {
            self.state = State::Failed(Some(self.error(ErrorKind::IoThreadExited, "write")));
        }
    }

    /// Handles events that are already there, then reports the state.
    fn poll(&mut self) -> Result<(), StorageError> {
        self.drain_ready();
        self.check()
    }

    fn drain_ready(&mut self) {
        loop {
            match self.events.try_recv() {
                Ok(event) => {
                    self.handle(event);
                }
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    if !self.closed {
                        self.thread_gone();
                    }
                    return;
                }
            }
        }
    }

    fn handle(&mut self, event: Event) -> Option<SyncAnswer> {
        match event {
            Event::Buffer(buf) => {
                self.pool.put(buf);
                None
            }
            Event::Failed(error) => {
                self.set_failed(error);
                None
            }
            Event::Synced { id, durable } => {
                if self.tick_sync == Some(id) {
                    self.tick_sync = None;
                }
                Some(SyncAnswer::Done(id, durable))
            }
            Event::SyncFailed { id, error } => {
                if self.tick_sync == Some(id) {
                    self.tick_sync = None;
                }
                self.set_failed(error);
                Some(SyncAnswer::Failed(id))
            }
            Event::Closed(_) => None,
        }
    }

    fn set_failed(&mut self, error: StorageError) {
        if matches!(self.state, State::Healthy) {
            self.state = State::Failed(Some(error));
        }
    }

    /// `Ok` while healthy; the first error once; then `Failed`.
    fn check(&mut self) -> Result<(), StorageError> {
        match &mut self.state {
            State::Healthy => Ok(()),
            State::Failed(first) => match first.take() {
                Some(e) => Err(e),
                None => Err(StorageError::new(
                    ErrorKind::Failed,
                    &self.path,
                    "write",
                    Some(self.logical_len),
                )),
            },
        }
    }

    fn error(&self, kind: ErrorKind, op: &'static str) -> StorageError {
        StorageError::new(kind, &self.path, op, None)
    }
}

impl Drop for DirectFile {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        match self.close_inner() {
            Ok(report) => {
                tracing::warn!(path = %self.path.display(), ?report, "DirectFile dropped without close(); closed it");
            }
            Err(error) => {
                tracing::warn!(%error, "DirectFile dropped without close(); closing failed");
            }
        }
    }
}

impl std::fmt::Debug for DirectFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectFile")
            .field("path", &self.path)
            .field("backend", &self.backend)
            .field("alignment", &self.alignment)
            .field("logical_len", &self.logical_len)
            .field("durable_offset", &self.durable_offset())
            .finish_non_exhaustive()
    }
}

fn validate(opts: &WriterOptions, alignment: usize) -> Result<(), String> {
    if opts.block_size == 0 || opts.block_size % alignment != 0 {
        return Err(format!(
            "block_size {} is not a positive multiple of the alignment {alignment}",
            opts.block_size
        ));
    }
    if opts.block_size > MAX_BLOCK_SIZE {
        return Err(format!(
            "block_size {} exceeds {MAX_BLOCK_SIZE}",
            opts.block_size
        ));
    }
    if opts.queue_depth == 0 || opts.queue_depth > MAX_QUEUE_DEPTH {
        return Err(format!(
            "queue_depth {} is not in 1..={MAX_QUEUE_DEPTH}",
            opts.queue_depth
        ));
    }
    Ok(())
}

struct Opened {
    backend: Backend,
    file: File,
    ring: Option<io_uring::IoUring>,
    fallback_reason: Option<String>,
}

/// Walks the fallback chain: io_uring+O_DIRECT, pwrite+O_DIRECT,
/// buffered+fdatasync, or exactly the forced backend.
fn open_backend(path: &Path, opts: &WriterOptions) -> Result<Opened, StorageError> {
    let choice = opts.backend;
    let mut reasons: Vec<String> = Vec::new();
    let unavailable = |backend: Backend, reason: String| {
        StorageError::new(
            ErrorKind::Unavailable { backend, reason },
            path,
            "create",
            None,
        )
    };

    let mut ring = None;
    if matches!(choice, BackendChoice::Auto | BackendChoice::IoUring) {
        match uring::setup(opts.queue_depth, opts.faults.io_uring_errno) {
            Ok(r) => ring = Some(r),
            Err(reason) if choice == BackendChoice::IoUring => {
                return Err(unavailable(Backend::IoUringDirect, reason));
            }
            Err(reason) => reasons.push(reason),
        }
    }

    let mut direct = None;
    if choice != BackendChoice::Buffered {
        match open_file(path, true, opts.faults.odirect_einval) {
            Ok(file) => direct = Some(file),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                // open(2) checks O_DIRECT support after creating the file,
                // so the refused open leaves it behind; O_EXCL succeeded, so
                // it is ours to remove.
                if let Err(e) = std::fs::remove_file(path) {
                    if e.kind() != std::io::ErrorKind::NotFound {
                        return Err(StorageError::io(path, "unlink", None, &e));
                    }
                }
                let reason = format!("open O_DIRECT: {}", errno_text(libc::EINVAL));
                match choice {
                    BackendChoice::IoUring => {
                        return Err(unavailable(Backend::IoUringDirect, reason))
                    }
                    BackendChoice::PwriteDirect => {
                        return Err(unavailable(Backend::PwriteDirect, reason))
                    }
                    _ => reasons.push(reason),
                }
            }
            Err(e) => return Err(StorageError::io(path, "open", None, &e)),
        }
    }

    let (backend, file, ring) = match direct {
        Some(file) => match ring {
            Some(ring) => (Backend::IoUringDirect, file, Some(ring)),
            None => (Backend::PwriteDirect, file, None),
        },
        None => {
            let file = open_file(path, false, false)
                .map_err(|e| StorageError::io(path, "open", None, &e))?;
            (Backend::Buffered, file, None)
        }
    };
    Ok(Opened {
        backend,
        file,
        ring,
        fallback_reason: if reasons.is_empty() {
            None
        } else {
            Some(reasons.join("; "))
        },
    })
}

fn open_file(path: &Path, direct: bool, inject_einval: bool) -> std::io::Result<File> {
    if direct && inject_einval {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(if direct { libc::O_DIRECT } else { 0 })
        .open(path)
}

/// Logs the backend choice; a fallback is a warning the first time a given
/// reason appears in this process (a recorder rotates files often), then
/// debug.
fn log_backend(path: &Path, backend: Backend, reason: Option<&str>) {
    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let Some(reason) = reason else {
        tracing::debug!(path = %path.display(), %backend, "storage backend");
        return;
    };
    let first = match SEEN.lock() {
        Ok(mut seen) if !seen.iter().any(|r| r == reason) => {
            seen.push(reason.to_string());
            true
        }
        Ok(_) => false,
        Err(_) => true,
    };
    if first {
        tracing::warn!(path = %path.display(), %backend, reason, "storage backend fallback");
    } else {
        tracing::debug!(path = %path.display(), %backend, reason, "storage backend fallback");
    }
}
