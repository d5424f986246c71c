//! The three ways to get blocks onto disk, behind one small [`Engine`]
//! interface (submit an operation, reap completions) so the I/O thread
//! treats them identically: same ordering, same error handling, same
//! durable offset. [`uring`] queues operations on an io_uring and the kernel
//! completes them asynchronously; [`pwrite`] performs each one with a
//! blocking system call at submission (on an `O_DIRECT` fd, or on a normal
//! fd for the buffered backend) and reports it as already complete.
//!
//! An operation owns its buffer from submission until its completion is
//! reaped, and is handed back with the result (the tokio-uring pattern), so
//! a buffer cannot return to the pool while the kernel may still read it.

pub(crate) mod pwrite;
pub(crate) mod uring;

use std::fmt;
use std::io;
use std::time::Instant;

use crate::align::AlignedBuf;

/// The backend a [`DirectFile`](crate::DirectFile) writes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// `IORING_OP_WRITE` on an `O_DIRECT` fd, several writes in flight,
    /// `IORING_OP_FSYNC` with `IORING_FSYNC_DATASYNC`.
    IoUringDirect,
    /// Blocking `pwrite(2)` on an `O_DIRECT` fd, then `fdatasync(2)`.
    PwriteDirect,
    /// Blocking `pwrite(2)` through the page cache, then `fdatasync(2)`.
    Buffered,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::IoUringDirect => "io_uring+O_DIRECT",
            Backend::PwriteDirect => "pwrite+O_DIRECT",
            Backend::Buffered => "buffered+fdatasync",
        })
    }
}

/// Which backend [`DirectFile::create`](crate::DirectFile::create) uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum BackendChoice {
    /// The best one this kernel and file system allow: io_uring+O_DIRECT,
    /// else pwrite+O_DIRECT, else buffered+fdatasync; the reason for a
    /// fallback is logged and kept in
    /// [`DirectFile::fallback_reason`](crate::DirectFile::fallback_reason).
    #[default]
    Auto,
    /// io_uring+O_DIRECT or an [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable) error.
    IoUring,
    /// pwrite+O_DIRECT or an [`ErrorKind::Unavailable`](crate::ErrorKind::Unavailable) error.
    PwriteDirect,
    /// buffered+fdatasync.
    Buffered,
}

/// A block write: `buf[done..len]` goes to file offset `offset + done`.
pub(crate) struct WriteOp {
    /// Owned by the operation until its completion is reaped.
    pub(crate) buf: AlignedBuf,
    /// File offset of `buf[0]`, a multiple of the alignment.
    pub(crate) offset: u64,
    /// Bytes of `buf` to write: the block size, or a padded tail.
    pub(crate) len: usize,
    /// File offset where the caller's data in this block ends (padding
    /// excluded): what a successful write makes readable.
    pub(crate) valid_end: u64,
    /// Bytes already written by earlier short completions.
    pub(crate) done: usize,
    /// When the write was first submitted, for latency statistics.
    pub(crate) started: Instant,
}

/// One kernel operation.
pub(crate) enum Op {
    /// `pwrite(2)` / `IORING_OP_WRITE`.
    Write(WriteOp),
    /// `fdatasync(2)` / `IORING_OP_FSYNC` with `IORING_FSYNC_DATASYNC`.
    /// `id` is the sync request it answers; `None` is the final one at close.
    Datasync { id: Option<u64>, started: Instant },
    /// `fallocate(2)` mode 0 / `IORING_OP_FALLOCATE`.
    Fallocate { offset: u64, len: u64 },
}

/// A completed operation and its result: bytes (`>= 0`) or `-errno`.
pub(crate) struct Done {
    pub(crate) op: Op,
    pub(crate) result: i32,
}

/// Why [`Engine::submit`] did not take an operation.
pub(crate) enum SubmitError {
    /// The operation was not queued and comes back; complete it with `-errno`.
    NotQueued(Op, i32),
    /// The queue itself is broken (io_uring_enter failed hard); the engine
    /// keeps the operation, since the kernel may still have it.
    Broken(io::Error),
}

/// Submit operations and reap their completions.
pub(crate) trait Engine: Send {
    /// Queues `op`. On success the engine owns it until [`Engine::reap`]
    /// hands it back.
    fn submit(&mut self, op: Op) -> Result<(), SubmitError>;

    /// Moves completed operations to `out`; with `wait`, blocks until at
    /// least one completes (when any is in flight).
    fn reap(&mut self, wait: bool, out: &mut Vec<Done>) -> io::Result<()>;

    /// Operations submitted and not yet reaped.
    fn in_flight(&self) -> usize;
}
