//! Reading a recording for upload past the page cache.
//!
//! An upload reads gigabytes the recorder wrote minutes ago and will not
//! read again. Through the page cache each read costs a copy, pages to
//! reclaim and, after `posix_fadvise(DONTNEED)`, the readahead's smaller
//! requests on the drive the recorder is writing to. On Linux the file is
//! opened `O_DIRECT` as well, where its file system takes it, and each
//! part is read straight into an aligned buffer in requests as large as
//! the part; a file system that refuses direct reads (tmpfs, some FUSE)
//! gets the buffered reads with the pages let go of after each read.

use std::fs::File;
use std::io;
use std::path::Path;

use crate::platform::{drop_cache, read_at};

/// The alignment `O_DIRECT` asks of offsets, lengths and buffers: the
/// largest logical block size of the drives we write to.
const ALIGN: usize = 4096;

/// A file opened to be read once, past the page cache where it can be.
#[derive(Debug)]
pub struct Uncached {
    /// The buffered handle: the file's metadata, and the reads a direct
    /// handle could not make.
    plain: File,
    /// The same file opened `O_DIRECT`, where its file system takes it.
    direct: Option<File>,
}

/// A read buffer whose start and length suit `O_DIRECT`; reused from
/// read to read.
#[derive(Debug, Default)]
pub struct ReadBuf {
    raw: Vec<u8>,
}

impl ReadBuf {
    /// An aligned window of at least `len` bytes (rounded up to
    /// [`ALIGN`]), growing the buffer when it is smaller.
    fn window(&mut self, len: usize) -> &mut [u8] {
        let len = len.next_multiple_of(ALIGN);
        if self.raw.len() < len + ALIGN {
            self.raw = vec![0; len + ALIGN];
        }
        let start = self.raw.as_ptr().align_offset(ALIGN).min(ALIGN);
        &mut self.raw[start..start + len]
    }
}

impl Uncached {
    /// Opens `path` for reading (and `O_DIRECT` beside it on Linux).
    pub fn open(path: &Path) -> io::Result<Uncached> {
        let plain = File::open(path)?;
        Ok(Uncached {
            direct: open_direct(path),
            plain,
        })
    }

    /// The buffered handle, for the file's metadata.
    pub fn file(&self) -> &File {
        &self.plain
    }

    /// Reads `len` bytes at `off` into `buf` and returns them: fewer only
    /// where the file ends first.
    pub fn read<'b>(&self, buf: &'b mut ReadBuf, off: u64, len: usize) -> io::Result<&'b [u8]> {
        if let Some(direct) = &self.direct {
            // From the aligned offset at or below `off`, a whole number of
            // blocks, until the window is full or the file ends.
            let head = (off % ALIGN as u64) as usize;
            let start = off - head as u64;
            match fill(direct, buf.window(head + len), start) {
                Ok(got) => {
                    let end = got.min(head + len).max(head);
                    return Ok(&buf.window(head + len)[head..end]);
                }
                // Refused at read time (a file system that takes the open
                // flag but not the request): the buffered read below.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
                Err(e) => return Err(e),
            }
        }
        let window = &mut buf.window(len)[..len];
        let got = fill(&self.plain, window, off)?;
        drop_cache(&self.plain, off, got as u64);
        Ok(&window[..got])
    }
}

/// Reads into all of `window` from `off` until it is full or the file
/// ends; the bytes read.
fn fill(f: &File, window: &mut [u8], off: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < window.len() {
        match read_at(f, &mut window[got..], off + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// `path` opened `O_DIRECT`, or `None` where its file system (or this
/// system) does not take it.
fn open_direct(path: &Path) -> Option<File> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT | libc::O_CLOEXEC)
            .open(path)
            .ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_of(len: usize) -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f.mcap");
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + i / 4093) as u8).collect();
        std::fs::write(&path, &bytes).expect("write");
        (dir, path, bytes)
    }

    #[test]
    fn any_offset_and_length_reads_the_files_bytes() {
        let (_dir, path, bytes) = file_of(3 * ALIGN * 5 + 1234);
        let f = Uncached::open(&path).expect("open");
        let mut buf = ReadBuf::default();
        for (off, len) in [
            (0usize, 1usize),
            (0, ALIGN),
            (1, ALIGN),
            (ALIGN - 1, 2),
            (5000, 20_000),
            (ALIGN * 3, ALIGN * 5),
            (bytes.len() - 10, 10),
            (bytes.len() - 10, 100),
            (0, bytes.len()),
            (0, bytes.len() + 5),
        ] {
            let got = f.read(&mut buf, off as u64, len).expect("read");
            let end = (off + len).min(bytes.len());
            assert_eq!(got, &bytes[off..end], "at {off}, {len} bytes");
        }
        assert!(f
            .read(&mut buf, bytes.len() as u64, 10)
            .expect("read")
            .is_empty());
        assert!(f
            .read(&mut buf, bytes.len() as u64 + 9000, 10)
            .expect("read")
            .is_empty());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_system_without_direct_reads_gets_buffered_ones() {
        // /dev/shm is tmpfs, which refuses O_DIRECT at open.
        let dir = tempfile::tempdir_in("/dev/shm").expect("a directory in /dev/shm");
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).expect("write");
        let f = Uncached::open(&path).expect("open");
        let mut buf = ReadBuf::default();
        assert_eq!(
            f.read(&mut buf, 777, 50_000).expect("read"),
            &bytes[777..50_777]
        );
    }
}
