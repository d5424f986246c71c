//! Typed errors: one [`StorageError`] that names the file, the operation,
//! the offset and the OS error, classified by an [`ErrorKind`].

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::Backend;

/// What went wrong, in a form a caller can act on (stop recording, rotate to
/// another disk, report a configuration error).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The device or file system is full (`ENOSPC`) on a write.
    NoSpace,
    /// A system call failed with `errno`.
    Io {
        /// The system call or kernel operation, e.g. `"write"`, `"fdatasync"`.
        op: &'static str,
        /// The raw OS error number.
        errno: i32,
    },
    /// The kernel accepted fewer bytes than asked and the remainder could not
    /// be retried (an unaligned remainder on `O_DIRECT`, or zero progress).
    ShortWrite {
        /// Bytes the operation asked for.
        requested: usize,
        /// Bytes the kernel wrote.
        written: usize,
    },
    /// The writer already failed earlier and refuses further writes; the
    /// first error was returned by an earlier call.
    Failed,
    /// A backend was forced with [`BackendChoice`](crate::BackendChoice) but
    /// the kernel or file system refused it.
    Unavailable {
        /// The backend that was refused.
        backend: Backend,
        /// Why, e.g. `"io_uring_setup: ENOSYS (Function not implemented)"`.
        reason: String,
    },
    /// [`WriterOptions`](crate::WriterOptions) are inconsistent.
    InvalidOptions(String),
    /// The I/O thread exited without answering (it panicked, or the
    /// process is tearing down).
    IoThreadExited,
}

impl ErrorKind {
    /// Classifies a failed `op` by its errno: `ENOSPC` on a write is
    /// [`ErrorKind::NoSpace`], everything else [`ErrorKind::Io`].
    pub(crate) fn from_errno(op: &'static str, errno: i32) -> ErrorKind {
        if errno == libc::ENOSPC && op == "write" {
            ErrorKind::NoSpace
        } else {
            ErrorKind::Io { op, errno }
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::NoSpace => write!(f, "{}", errno_text(libc::ENOSPC)),
            ErrorKind::Io { errno, .. } => write!(f, "{}", errno_text(*errno)),
            ErrorKind::ShortWrite { requested, written } => {
                write!(f, "short write: {written} of {requested} bytes")
            }
            ErrorKind::Failed => f.write_str("writer failed earlier and refuses further writes"),
            ErrorKind::Unavailable { backend, reason } => {
                write!(f, "backend {backend} unavailable: {reason}")
            }
            ErrorKind::InvalidOptions(why) => write!(f, "invalid writer options: {why}"),
            ErrorKind::IoThreadExited => f.write_str("I/O thread exited unexpectedly"),
        }
    }
}

/// An error from [`DirectFile`](crate::DirectFile). Its `Display` reads
/// like `/data/bag_0.mcap: write at offset 2097152: EIO (Input/output error)`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{path}: {op}{at}: {kind}", path = .path.display(), at = AtOffset(*.offset))]
pub struct StorageError {
    kind: ErrorKind,
    path: PathBuf,
    op: &'static str,
    offset: Option<u64>,
}

impl StorageError {
    pub(crate) fn new(kind: ErrorKind, path: &Path, op: &'static str, offset: Option<u64>) -> Self {
        StorageError {
            kind,
            path: path.to_path_buf(),
            op,
            offset,
        }
    }

    /// An OS error from `op`, classified with [`ErrorKind::from_errno`].
    pub(crate) fn os(path: &Path, op: &'static str, offset: Option<u64>, errno: i32) -> Self {
        Self::new(ErrorKind::from_errno(op, errno), path, op, offset)
    }

    /// An OS error taken from a `std::io::Error` (`EIO` when it has no errno).
    pub(crate) fn io(path: &Path, op: &'static str, offset: Option<u64>, err: &io::Error) -> Self {
        Self::os(path, op, offset, err.raw_os_error().unwrap_or(libc::EIO))
    }

    /// What went wrong.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The file the writer was writing.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The operation that failed, e.g. `"write"`, `"fdatasync"`, `"open"`.
    pub fn op(&self) -> &'static str {
        self.op
    }

    /// The file offset of the failed operation, where it has one.
    pub fn offset(&self) -> Option<u64> {
        self.offset
    }

    /// The raw OS error number, where the error came from the kernel.
    pub fn errno(&self) -> Option<i32> {
        match self.kind {
            ErrorKind::NoSpace => Some(libc::ENOSPC),
            ErrorKind::Io { errno, .. } => Some(errno),
            _ => None,
        }
    }
}

struct AtOffset(Option<u64>);

impl fmt::Display for AtOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(off) => write!(f, " at offset {off}"),
            None => Ok(()),
        }
    }
}

/// `"ENOSYS (Function not implemented)"`: the symbolic name a reader greps
/// for, then the libc description.
pub(crate) fn errno_text(errno: i32) -> String {
    let desc = io::Error::from_raw_os_error(errno).to_string();
    // std renders "Function not implemented (os error 38)"; the number is
    // redundant next to the symbolic name.
    let desc = match desc.rfind(" (os error ") {
        Some(cut) => desc[..cut].to_string(),
        None => desc,
    };
    match errno_name(errno) {
        Some(name) => format!("{name} ({desc})"),
        None => format!("errno {errno} ({desc})"),
    }
}

fn errno_name(errno: i32) -> Option<&'static str> {
    Some(match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EINTR => "EINTR",
        libc::EIO => "EIO",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::EMFILE => "EMFILE",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::EROFS => "EROFS",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EDQUOT => "EDQUOT",
        libc::ENXIO => "ENXIO",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_path_op_offset_and_os_error() {
        let e = StorageError::os(
            Path::new("/data/a.mcap"),
            "write",
            Some(2_097_152),
            libc::EIO,
        );
        assert_eq!(
            e.to_string(),
            "/data/a.mcap: write at offset 2097152: EIO (Input/output error)"
        );
        assert_eq!(e.errno(), Some(libc::EIO));
        assert_eq!(
            e.kind(),
            &ErrorKind::Io {
                op: "write",
                errno: libc::EIO
            }
        );
    }

    #[test]
    fn enospc_on_write_is_no_space() {
        let e = StorageError::os(Path::new("x"), "write", Some(0), libc::ENOSPC);
        assert_eq!(e.kind(), &ErrorKind::NoSpace);
        assert!(
            e.to_string().contains("ENOSPC (No space left on device)"),
            "{e}"
        );
        // ENOSPC from anything but a data write is not the "disk full while
        // recording" condition callers act on.
        let e = StorageError::os(Path::new("x"), "fdatasync", None, libc::ENOSPC);
        assert!(matches!(
            e.kind(),
            ErrorKind::Io {
                op: "fdatasync",
                ..
            }
        ));
    }

    #[test]
    fn errno_text_matches_fallback_reason_format() {
        assert_eq!(
            errno_text(libc::ENOSYS),
            "ENOSYS (Function not implemented)"
        );
        assert!(errno_text(4095).starts_with("errno 4095 ("));
    }
}
