//! What differs between Linux (the vehicle) and the other systems the
//! upload also runs on (`edgerec-tools upload` on a Windows or macOS
//! laptop): positioned reads, letting go of read pages, file times, and
//! how a file that holds a secret is opened and checked.

use std::fs::File;
use std::io;
use std::path::Path;

/// Reads at `off` into `buf`; the bytes read (0 at the end).
pub fn read_at(f: &File, buf: &mut [u8], off: u64) -> io::Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_at(f, buf, off)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_read(f, buf, off)
    }
}

/// Tells the kernel the pages of `[off, off + len)` are not needed again
/// (Linux), so an upload does not push the recording out of the page
/// cache; elsewhere nothing.
pub fn drop_cache(f: &File, off: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: posix_fadvise only advises the kernel about an open
        // fd's pages; it touches no memory of ours.
        unsafe {
            libc::posix_fadvise(
                f.as_raw_fd(),
                off as libc::off_t,
                len as libc::off_t,
                libc::POSIX_FADV_DONTNEED,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (f, off, len);
}

/// A file's modification time, ns since the epoch (0 when the system
/// has none).
pub fn mtime_ns(m: &std::fs::Metadata) -> i128 {
    m.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// Opens a file that holds a secret for reading, refusing a symbolic
/// link (`Err` of kind `InvalidInput`), and without blocking on a FIFO.
pub fn open_private(path: &Path) -> io::Result<File> {
    open_no_link(path, std::fs::OpenOptions::new().read(true))
}

/// Opens an existing file for appending, refusing a symbolic link in its
/// place (an upload journal on the data partition).
pub fn open_append_existing(path: &Path) -> io::Result<File> {
    open_no_link(path, std::fs::OpenOptions::new().append(true))
}

/// Opens `path` as `opts` say, refusing a symbolic link in its place
/// (`Err` of kind `InvalidInput`), and without blocking on a FIFO.
fn open_no_link(path: &Path, opts: &mut std::fs::OpenOptions) -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::ELOOP) {
                    io::Error::new(io::ErrorKind::InvalidInput, "a symbolic link")
                } else {
                    e
                }
            })
    }
    #[cfg(not(unix))]
    {
        if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a symbolic link",
            ));
        }
        opts.open(path)
    }
}

/// The permission bits that let others than the owner read `m`'s file
/// (`mode & 0o077`, with the mode), or `None` when only its owner can.
/// Windows keeps access in ACLs, not mode bits: there it is `None`, and
/// the file's ACL is the user's to keep.
pub fn readable_by_others(m: &std::fs::Metadata) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        let mode = m.mode() & 0o777;
        (mode & 0o077 != 0).then_some(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        None
    }
}
