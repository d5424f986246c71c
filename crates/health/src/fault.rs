//! The fault file: when a stage stalls, the supervisor stops feeding the
//! watchdog and writes down which stage stalled and how far it had got,
//! atomically and durably, before the hardware resets the board. The next
//! start reads it once ([`take_previous`]), reports it, and renames it so
//! the same fault is not reported twice.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use edgerec_format::nofollow::{self, Dir};
use serde::{Deserialize, Serialize};

use crate::heartbeat::Stalled;

/// Most bytes a fault file may hold when read back: a record is under
/// 1 KiB, and anything longer is not one.
pub const MAX_FAULT_BYTES: u64 = 64 * 1024;

/// Where the kernel publishes the random id of the current boot.
const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// What the supervisor knew when it stopped feeding the watchdog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultRecord {
    /// The stalled stage (the longest silent one when several stalled).
    pub stage: String,
    /// The stage's deadline, in ms.
    pub deadline_ms: u64,
    /// How long it had been silent, in ms.
    pub silent_for_ms: u64,
    /// Its last reported progress figure.
    pub last_progress: u64,
    /// Wall-clock time of the decision, ns since the Unix epoch (0 when the
    /// clock reads before 1970).
    pub at_unix_ns: u64,
    /// The kernel's boot id, to tell the boot that failed from the one
    /// reading the file; `None` where `/proc` does not say.
    pub boot_id: Option<String>,
    /// The recorder's process id.
    pub pid: u32,
    /// A sentence for people: what stalled and what happens next.
    pub message: String,
}

impl FaultRecord {
    /// A record of `stalled`, stamped now with this boot and process.
    pub fn from_stalled(stalled: &Stalled, message: impl Into<String>) -> FaultRecord {
        FaultRecord {
            stage: stalled.name.clone(),
            deadline_ms: millis(stalled.deadline),
            silent_for_ms: millis(stalled.silent_for),
            last_progress: stalled.last_progress,
            at_unix_ns: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
                .unwrap_or(0),
            boot_id: boot_id(),
            pid: std::process::id(),
            message: message.into(),
        }
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The current boot's id, if `/proc` is mounted and says.
pub fn boot_id() -> Option<String> {
    let id = fs::read_to_string(BOOT_ID_PATH).ok()?;
    let id = id.trim();
    (!id.is_empty()).then(|| id.to_owned())
}

/// Why the fault file could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    /// A file system operation failed.
    #[error("fault file {path}: {op}: {source}", path = .path.display())]
    Io {
        /// The file or directory operated on.
        path: PathBuf,
        /// What was being done, e.g. `"rename"`.
        op: &'static str,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The previous fault file is not a fault record; it has been renamed to
    /// `path` so it is reported only once.
    #[error("previous fault file is corrupt (kept as {path}): {source}", path = .path.display())]
    Corrupt {
        /// Where the corrupt file now is.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// The record could not be encoded (not expected for this type).
    #[error("fault record cannot be encoded: {0}")]
    Encode(#[source] serde_json::Error),
}

fn io_err<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(io::Error) -> FaultError + 'a {
    move |source| FaultError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

/// Writes `record` to `path` atomically and durably: a temporary file in
/// the same directory is written and fsynced, renamed over `path`, and the
/// directory is fsynced, so after a reset the file is either the old one or
/// the whole new one. A missing parent directory is created.
///
/// Never panics. A failure is logged at error level and also returned, so a
/// caller with nothing better to do may ignore the result.
pub fn write_fault(path: &Path, record: &FaultRecord) -> Result<(), FaultError> {
    let result = write_atomically(path, record);
    if let Err(err) = &result {
        tracing::error!("cannot write the fault file: {err}");
    }
    result
}

/// The fault file's directory, opened without following a link there, and
/// the file's name in it. The file is on the data partition, which someone
/// with the drive in hand can write: a link planted as the file or as its
/// directory is never followed (`edgerec_format::nofollow`).
fn open_dir(path: &Path) -> Result<(Dir, String), FaultError> {
    let (dir, name) = nofollow::split(path).map_err(io_err(path, "name"))?;
    let dir = Dir::open(&dir).map_err(io_err(&dir, "open directory"))?;
    Ok((dir, name))
}

fn write_atomically(path: &Path, record: &FaultRecord) -> Result<(), FaultError> {
    let mut json = serde_json::to_vec_pretty(record).map_err(FaultError::Encode)?;
    json.push(b'\n');
    let dir = parent_dir(path);
    fs::create_dir_all(&dir).map_err(io_err(&dir, "create directory"))?;
    let (dir, name) = open_dir(path)?;
    // A temporary file of a random name made with O_EXCL | O_NOFOLLOW,
    // fsynced, renamed over the file (a link there is replaced, never
    // written through), the directory fsynced.
    dir.write_atomic(&name, &json)
        .map_err(io_err(path, "write"))
}

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Where [`take_previous`] moves a fault file once read:
/// `<dir>/<stem>.reported.json`.
pub fn reported_path(path: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "fault".to_owned());
    parent_dir(path).join(format!("{stem}.reported.json"))
}

/// Reads the fault file left by a previous run, if any, and renames it to
/// [`reported_path`] so it is reported once (a later fault's file replaces
/// the reported one).
///
/// `Ok(None)`: no file. `Err(FaultError::Corrupt)`: the file is not a fault
/// record; it has been renamed all the same. `Err(FaultError::Io)`: it
/// could not be read. A record whose rename fails is still returned, with a
/// warning: it will be reported again at the next start.
pub fn take_previous(path: &Path) -> Result<Option<FaultRecord>, FaultError> {
    let (dir, name) = match open_dir(path) {
        Ok(opened) => opened,
        Err(FaultError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            return Ok(None)
        }
        Err(err) => return Err(err),
    };
    // A regular file of at most MAX_FAULT_BYTES: a link, a FIFO or a
    // device put there is refused without being read or waited on.
    let bytes = match dir.read_capped(&name, MAX_FAULT_BYTES) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(io_err(path, "read")(err)),
    };
    let reported = reported_path(path);
    let renamed = match reported.file_name().and_then(|n| n.to_str()) {
        Some(to) => dir.rename(&name, to).and_then(|()| dir.sync()),
        None => Err(io::Error::other("the reported name is not UTF-8")),
    };
    if let Err(err) = &renamed {
        tracing::warn!(
            "cannot rename the fault file {} to {}: {err}; it will be reported again",
            path.display(),
            reported.display()
        );
    }
    match serde_json::from_slice::<FaultRecord>(&bytes) {
        Ok(record) => Ok(Some(record)),
        Err(source) => Err(FaultError::Corrupt {
            path: if renamed.is_ok() {
                reported
            } else {
                path.to_path_buf()
            },
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn record() -> FaultRecord {
        FaultRecord::from_stalled(
            &Stalled {
                name: "source /camera/raw".to_owned(),
                deadline: Duration::from_millis(300),
                silent_for: Duration::from_millis(412),
                last_progress: 1234,
                dead: false,
            },
            "stage stalled",
        )
    }

    #[test]
    fn write_then_take_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/dir/last-fault.json");
        let rec = record();
        assert_eq!(rec.deadline_ms, 300);
        assert_eq!(rec.silent_for_ms, 412);
        assert_eq!(rec.pid, std::process::id());
        assert!(rec.at_unix_ns > 0);
        write_fault(&path, &rec).unwrap();
        // No temporary file is left behind.
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["last-fault.json"]);

        assert_eq!(take_previous(&path).unwrap(), Some(rec));
        assert!(!path.exists());
        assert!(dir.path().join("sub/dir/last-fault.reported.json").exists());
        assert_eq!(take_previous(&path).unwrap(), None);
    }

    #[test]
    fn new_fault_replaces_reported_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fault.json");
        write_fault(&path, &record()).unwrap();
        take_previous(&path).unwrap();
        let mut second = record();
        second.stage = "storage".to_owned();
        write_fault(&path, &second).unwrap();
        assert_eq!(take_previous(&path).unwrap().unwrap().stage, "storage");
        let reported = fs::read_to_string(dir.path().join("fault.reported.json")).unwrap();
        assert!(reported.contains("storage"));
    }

    #[test]
    fn corrupt_file_is_reported_and_renamed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fault.json");
        fs::write(&path, b"{\"stage\": 3").unwrap();
        match take_previous(&path) {
            Err(FaultError::Corrupt { path: kept, .. }) => {
                assert_eq!(kept, dir.path().join("fault.reported.json"));
                assert!(kept.exists());
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
        assert!(!path.exists());
    }

    #[test]
    fn unwritable_location_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        fs::write(&blocker, b"x").unwrap();
        // A regular file where the parent directory should be.
        let err = write_fault(&blocker.join("fault.json"), &record()).unwrap_err();
        assert!(matches!(err, FaultError::Io { .. }), "{err}");
    }

    #[test]
    fn a_link_planted_as_the_fault_file_is_replaced_not_written_through() {
        let data = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("passwd");
        fs::write(&victim, b"root:x:0:0\n").unwrap();
        let path = data.path().join("last-fault.json");
        std::os::unix::fs::symlink(&victim, &path).unwrap();

        // Read back: the link is refused, the file it names neither read
        // nor moved.
        let err = take_previous(&path).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(fs::read(&victim).unwrap(), b"root:x:0:0\n");

        // Written: the link itself is replaced by the record.
        write_fault(&path, &record()).unwrap();
        assert_eq!(fs::read(&victim).unwrap(), b"root:x:0:0\n");
        assert!(fs::symlink_metadata(&path).unwrap().is_file());
        assert_eq!(
            take_previous(&path).unwrap().unwrap().stage,
            "source /camera/raw"
        );
        // Nothing else was made beside it.
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_linked_fault_directory_is_not_written_through() {
        let data = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let dir = data.path().join("edgerec");
        std::os::unix::fs::symlink(outside.path(), &dir).unwrap();
        let err = write_fault(&dir.join("last-fault.json"), &record()).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
        assert!(take_previous(&dir.join("last-fault.json")).is_err());
    }

    #[test]
    fn what_is_not_a_small_regular_file_is_refused_without_reading_it() {
        // A device that never ends, a FIFO nobody writes (an open would
        // wait for a writer), a file far longer than any record.
        let err = take_previous(Path::new("/dev/zero")).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path for the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let err = take_previous(&fifo).unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let big = d.path().join("big.json");
        fs::write(&big, vec![b' '; 1 << 20]).unwrap();
        let err = take_previous(&big).unwrap_err();
        assert!(err.to_string().contains("more than the 65536"), "{err}");
        assert!(big.exists(), "a refused file stays for someone to look at");
    }

    #[test]
    fn reported_path_without_extension() {
        assert_eq!(
            reported_path(Path::new("/data/fault")),
            PathBuf::from("/data/fault.reported.json")
        );
    }
}
