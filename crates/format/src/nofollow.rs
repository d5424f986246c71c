//! Files on the data partition, created so that a link planted there is
//! never followed: the directory is opened once (`O_DIRECTORY |
//! O_NOFOLLOW`) and every file is made relative to its descriptor
//! (`openat(O_CREAT | O_EXCL | O_NOFOLLOW)`, `renameat`), temporary files
//! under names no one can guess. Someone who can write to `/data` can make
//! a write fail (and it is reported), never make edgerec write or read
//! through a link to another file.
//!
//! On other systems (the any-OS tools) the same calls go through the path
//! with `create_new`, which refuses an existing file or link too.

use std::collections::hash_map::RandomState;
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// A name no other process can guess: 64 bits from the OS's random keys.
fn random_suffix() -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(u64::from(std::process::id()));
    hasher.finish()
}

/// Whether `path` is a directory itself, not a link to one.
pub fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// Refuses a path whose last component is a link or not a directory.
pub fn ensure_real_dir(path: &Path) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Err(io::Error::other(format!(
            "{} is a symbolic link; edgerec does not follow links on the data partition \
             (remove it, or point the configuration at the real directory)",
            path.display()
        )));
    }
    if !meta.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory",
            path.display()
        )));
    }
    Ok(())
}

/// A directory opened once, for files made relative to it.
#[derive(Debug)]
pub struct Dir {
    path: PathBuf,
    #[cfg(unix)]
    fd: std::os::fd::OwnedFd,
}

#[cfg(unix)]
fn c_name(name: &str) -> io::Result<std::ffi::CString> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{name}` is not a file name"),
        ));
    }
    std::ffi::CString::new(name).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{name}` contains a NUL byte"),
        )
    })
}

#[cfg(unix)]
impl Dir {
    /// Opens `path`, refusing it when its last component is a link.
    pub fn open(path: &Path) -> io::Result<Dir> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
        // SAFETY: `c` is a valid NUL-terminated string for the call; the
        // returned descriptor is checked and then owned.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::ELOOP) || err.raw_os_error() == Some(libc::ENOTDIR)
            {
                ensure_real_dir(path)?;
            }
            return Err(err);
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        Ok(Dir {
            path: path.to_path_buf(),
            fd,
        })
    }

    fn raw(&self) -> libc::c_int {
        std::os::fd::AsRawFd::as_raw_fd(&self.fd)
    }

    fn openat(&self, name: &str, flags: libc::c_int) -> io::Result<File> {
        self.openat_mode(name, flags, 0o644)
    }

    fn openat_mode(&self, name: &str, flags: libc::c_int, mode: u32) -> io::Result<File> {
        let c = c_name(name)?;
        // SAFETY: the directory descriptor is open for the life of `self`,
        // `c` is NUL-terminated; the result is checked and then owned.
        let fd = unsafe {
            libc::openat(
                self.raw(),
                c.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode as libc::c_uint,
            )
        };
        if fd < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::ELOOP) {
                return Err(io::Error::other(format!(
                    "{} is a symbolic link; edgerec does not follow links on the data \
                     partition (remove it)",
                    self.path.join(name).display()
                )));
            }
            return Err(err);
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        Ok(unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) })
    }

    /// Creates `name`, which must not exist (a link in its place is an
    /// error, not followed).
    pub fn create_new(&self, name: &str) -> io::Result<File> {
        self.openat(name, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL)
    }

    /// Renames `from` to `to` inside the directory; `to` is replaced (a
    /// link at `to` is replaced itself, never followed).
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (f, t) = (c_name(from)?, c_name(to)?);
        // SAFETY: both names are NUL-terminated and the descriptor is open.
        let rc = unsafe { libc::renameat(self.raw(), f.as_ptr(), self.raw(), t.as_ptr()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Removes the file (or link) `name`.
    pub fn remove(&self, name: &str) -> io::Result<()> {
        let c = c_name(name)?;
        // SAFETY: the name is NUL-terminated and the descriptor is open.
        let rc = unsafe { libc::unlinkat(self.raw(), c.as_ptr(), 0) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Makes the directory `name` (a link or anything else in its place is
    /// an error, `AlreadyExists`, never followed) and opens it.
    pub fn create_dir(&self, name: &str) -> io::Result<Dir> {
        let c = c_name(name)?;
        // SAFETY: the name is NUL-terminated and the descriptor is open.
        if unsafe { libc::mkdirat(self.raw(), c.as_ptr(), 0o755) } != 0 {
            return Err(io::Error::last_os_error());
        }
        self.open_dir(name)
    }

    /// Opens the directory `name` in this one, refusing a link.
    pub fn open_dir(&self, name: &str) -> io::Result<Dir> {
        let file = match self.openat(name, libc::O_RDONLY | libc::O_DIRECTORY) {
            Ok(file) => file,
            // O_DIRECTORY | O_NOFOLLOW on a link says ENOTDIR: name it.
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
                ensure_real_dir(&self.path.join(name))?;
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        Ok(Dir {
            path: self.path.join(name),
            fd: file.into(),
        })
    }

    /// Opens `name` for appending, creating it (mode 0600) when missing;
    /// a link in its place is refused.
    pub fn open_append(&self, name: &str) -> io::Result<File> {
        self.openat_mode(name, libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT, 0o600)
    }

    /// Reads the regular file `name`, at most `cap` bytes: a link, a FIFO
    /// or a device in its place is refused without blocking, a longer file
    /// is an error.
    pub fn read_capped(&self, name: &str, cap: u64) -> io::Result<Vec<u8>> {
        let file = self.openat(name, libc::O_RDONLY | libc::O_NONBLOCK)?;
        read_regular(file, &self.path.join(name), cap)
    }

    /// fsyncs the directory, so a create or rename in it is durable.
    pub fn sync(&self) -> io::Result<()> {
        // SAFETY: the descriptor is open for the life of `self`.
        if unsafe { libc::fsync(self.raw()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(not(unix))]
impl Dir {
    /// Opens `path`, refusing it when it is a link.
    pub fn open(path: &Path) -> io::Result<Dir> {
        ensure_real_dir(path)?;
        Ok(Dir {
            path: path.to_path_buf(),
        })
    }

    /// Creates `name`, which must not exist.
    pub fn create_new(&self, name: &str) -> io::Result<File> {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(self.path.join(name))
    }

    /// Renames `from` to `to` inside the directory.
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        std::fs::rename(self.path.join(from), self.path.join(to))
    }

    /// Removes the file `name`.
    pub fn remove(&self, name: &str) -> io::Result<()> {
        std::fs::remove_file(self.path.join(name))
    }

    /// Makes the directory `name` and returns it.
    pub fn create_dir(&self, name: &str) -> io::Result<Dir> {
        let path = self.path.join(name);
        std::fs::create_dir(&path)?;
        Ok(Dir { path })
    }

    /// The directory `name` in this one, refusing a link.
    pub fn open_dir(&self, name: &str) -> io::Result<Dir> {
        Dir::open(&self.path.join(name))
    }

    /// Opens `name` for appending, creating it when missing.
    pub fn open_append(&self, name: &str) -> io::Result<File> {
        let path = self.path.join(name);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(io::Error::other(format!(
                "{} is a symbolic link",
                path.display()
            )));
        }
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
    }

    /// Reads the regular file `name`, at most `cap` bytes.
    pub fn read_capped(&self, name: &str, cap: u64) -> io::Result<Vec<u8>> {
        let path = self.path.join(name);
        if std::fs::symlink_metadata(&path)?.file_type().is_symlink() {
            return Err(io::Error::other(format!(
                "{} is a symbolic link",
                path.display()
            )));
        }
        read_regular(File::open(&path)?, &path, cap)
    }

    /// Nothing to sync on systems without directory fsync.
    pub fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}

impl Dir {
    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes a new directory `<base>`, or `<base>_<k>` for the first `k`
    /// whose name is free (a name taken by anything, a link included, is
    /// passed over, never followed); returns its name and the directory.
    pub fn create_unique_dir(&self, base: &str) -> io::Result<(String, Dir)> {
        for k in 0..10_000u32 {
            let name = if k == 0 {
                base.to_owned()
            } else {
                format!("{base}_{k}")
            };
            match self.create_dir(&name) {
                Ok(dir) => return Ok((name, dir)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{}: 10000 names from {base} are taken", self.path.display()),
        ))
    }

    /// Creates a temporary file `.<stem>.<random>.tmp`, returning its name.
    pub fn create_temp(&self, stem: &str) -> io::Result<(String, File)> {
        loop {
            let name = format!(".{stem}.{:016x}.tmp", random_suffix());
            match self.create_new(&name) {
                Ok(file) => return Ok((name, file)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Replaces `name` with `data` so that a power cut leaves the old or the
    /// new content: a temporary file of a random name, written, fsynced,
    /// renamed over `name`, the directory fsynced.
    pub fn write_atomic(&self, name: &str, data: &[u8]) -> io::Result<()> {
        let (tmp, mut file) = self.create_temp(name)?;
        let written = file
            .write_all(data)
            .and_then(|()| file.sync_all())
            .and_then(|()| self.rename(&tmp, name));
        if written.is_err() {
            // Best effort: a leftover temporary file is harmless.
            let _ = self.remove(&tmp);
        }
        written?;
        self.sync()
    }
}

fn read_regular(file: File, path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    if meta.len() > cap {
        return Err(io::Error::other(format!(
            "{} is {} bytes, more than the {cap} it may be",
            path.display(),
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // `take`: a file that grows after the stat still stops at the cap.
    file.take(cap.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(io::Error::other(format!(
            "{} grew past the {cap} bytes it may be",
            path.display()
        )));
    }
    Ok(bytes)
}

/// Creates `path` and its parents where missing, then opens it, refusing
/// it when its last component is a link (a recordings root or `events/`
/// that someone replaced with a link to elsewhere).
pub fn create_dir_all(path: &Path) -> io::Result<Dir> {
    std::fs::create_dir_all(path)?;
    Dir::open(path)
}

/// Opens `path` for reading, refusing a link in its last component.
pub fn open_read(path: &Path) -> io::Result<File> {
    let link = || {
        io::Error::other(format!(
            "{} is a symbolic link; edgerec does not follow links on the data partition \
             (remove it)",
            path.display()
        ))
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::ELOOP) {
                    link()
                } else {
                    e
                }
            })
    }
    #[cfg(not(unix))]
    {
        if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
            return Err(link());
        }
        File::open(path)
    }
}

/// Reads the regular file at `path`, at most `cap` bytes, without following
/// a link in its last component.
pub fn read_capped(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let (dir, name) = split(path)?;
    Dir::open(&dir)?.read_capped(&name, cap)
}

/// The directory and file name of `path`.
pub fn split(path: &Path) -> io::Result<(PathBuf, String)> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} names no file", path.display()),
            )
        })?
        .to_owned();
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_planted_link_is_replaced_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        symlink(&victim, d.path().join("file")).unwrap();
        let dir = Dir::open(d.path()).unwrap();
        dir.write_atomic("file", b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(!std::fs::symlink_metadata(d.path().join("file"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(d.path().join("file")).unwrap(), b"new");
        // No temporary file left behind.
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(names.len(), 2);
    }

    #[test]
    fn create_new_refuses_a_link_and_open_refuses_a_linked_directory() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        symlink(&victim, d.path().join("x")).unwrap();
        let dir = Dir::open(d.path()).unwrap();
        assert_eq!(
            dir.create_new("x").unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        symlink(d.path(), d.path().join("linked")).unwrap();
        let err = Dir::open(&d.path().join("linked")).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(!is_real_dir(&d.path().join("linked")));
        assert!(is_real_dir(d.path()));
        assert!(dir.create_new("../y").is_err());
    }

    #[test]
    fn reads_are_capped_and_only_of_regular_files() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("small"), b"12345").unwrap();
        assert_eq!(read_capped(&d.path().join("small"), 5).unwrap(), b"12345");
        let err = read_capped(&d.path().join("small"), 4).unwrap_err();
        assert!(err.to_string().contains("more than the 4"), "{err}");
        symlink(d.path().join("small"), d.path().join("link")).unwrap();
        assert!(read_capped(&d.path().join("link"), 100).is_err());
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid path string for mkfifo.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Refused at once, not blocked waiting for a writer.
        let err = read_capped(&fifo, 100).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }

    #[test]
    fn directories_are_made_beside_links_never_through_them() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let dir = Dir::open(d.path()).unwrap();
        // A link planted under the name a new directory would take is
        // passed over: the directory gets the next name.
        symlink(outside.path(), d.path().join("clip")).unwrap();
        let (name, made) = dir.create_unique_dir("clip").unwrap();
        assert_eq!(name, "clip_1");
        made.create_new("a").unwrap();
        assert!(d.path().join("clip_1/a").is_file());
        // Opening a linked directory, or appending through a link, fails.
        let err = dir.open_dir("clip").unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        std::fs::write(outside.path().join("log"), b"keep").unwrap();
        symlink(outside.path().join("log"), d.path().join("log")).unwrap();
        assert!(dir.open_append("log").is_err());
        let mut f = dir.open_append("own").unwrap();
        f.write_all(b"x").unwrap();
        // create_dir_all refuses a linked last component.
        let err = create_dir_all(&d.path().join("clip")).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
        assert_eq!(std::fs::read(outside.path().join("log")).unwrap(), b"keep");
    }
}
