//! Retention: deletes the oldest closed segments under the recordings root
//! before a write would cross `max_total_bytes` or eat into the free-space
//! floor, and says when nothing deletable is left so that the recorder
//! pauses instead of running the disk full. It knows files, not MCAP: a
//! closed segment is a `*.mcap` file in a bag directory (a subdirectory of
//! the root holding `metadata.yaml`), a protected one has a
//! `<name>.protected` marker beside it, and after deleting it asks the
//! format crate to rewrite that bag's `metadata.yaml`. Event clips, bag
//! directories under `<root>/events/`, count in the recorded total but are
//! deleted last: whole, oldest first, only once every deletable segment is
//! gone, never while younger than [`RetentionPolicy::clip_keep`] (age from
//! the modification time of a clip's newest `*.mcap`) and never while a
//! file in it ends `.active`. It is called before
//! every chunk write, so the common call costs a clock read and some
//! arithmetic: the directory scan is cached, `statvfs(3)` is sampled at
//! most every [`FS_SAMPLE_EVERY`], and the bytes approved since the sample
//! are subtracted from it.
//!
//! ```no_run
//! use std::path::Path;
//! use edgerec_recorder::retention::{Retention, RetentionPolicy, Room};
//!
//! let policy = RetentionPolicy { max_total_bytes: 0, min_free_bytes: 4 << 30, min_free_percent: 5, clip_keep: None };
//! // The storage writer's 256 MiB preallocation extent + 8 x 1 MiB blocks in flight.
//! let mut r = Retention::new(Path::new("/data/edgerec/recordings"), policy).with_write_ahead(264 << 20);
//! let active = Path::new("/data/edgerec/recordings/s_20260101T000000Z/s_20260101T000000Z_3.mcap.active");
//! match r.make_room(1 << 20, active).unwrap() {
//!     Room::Proceed { .. } => { /* write the chunk */ }
//!     Room::Pause { reason, .. } => eprintln!("disk full: {reason}"),
//! }
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, Metadata};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use edgerec_format::info::human_bytes;

/// How old a `statvfs` sample may get before [`Retention::make_room`]
/// takes a new one. Between samples the bytes it approved are subtracted
/// from the last one.
pub const FS_SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// How old the cached directory scan may get before it is redone: when a
/// cap is set (the recorded total must notice files added or removed by
/// others), and before any deletion (the list must be current).
pub const RESCAN_EVERY: Duration = Duration::from_secs(5);

/// A write at least this large gets a fresh `statvfs` sample first.
pub const LARGE_WRITE: u64 = 16 << 20;

/// Free space kept on top of the floor for what is written without a
/// `make_room` call: `metadata.yaml` rewrites, directory blocks, the MCAP
/// summary at close, file-system metadata.
pub const SLACK: u64 = 1 << 20;

/// A segment whose deletion failed is not tried again for this long.
pub const RETRY_FAILED_AFTER: Duration = Duration::from_secs(60);

/// Name of the rosbag2 metadata file that marks a bag directory.
const METADATA: &str = "metadata.yaml";

/// The directory under the root that holds event clips, one bag directory
/// each (`events/<trigger>_<YYYYMMDDTHHMMSSZ>[_<n>]/`).
pub const EVENTS_DIR: &str = "events";

/// The limits, as in `[retention]`, and how long event clips are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Most bytes all recordings under the root may hold; 0 = no cap.
    pub max_total_bytes: u64,
    /// Free bytes to keep on the file system.
    pub min_free_bytes: u64,
    /// Free space to keep in percent of the file system size; the larger
    /// of this and `min_free_bytes` is the floor.
    pub min_free_percent: u8,
    /// Event clips younger than this (from the modification time of their
    /// newest `*.mcap`) are never deleted; `None` (the default) keeps them
    /// forever. Older clips are deleted, oldest first, only after every
    /// deletable continuous segment.
    pub clip_keep: Option<Duration>,
}

impl RetentionPolicy {
    /// The free-space floor on a file system of `fs_size` bytes.
    pub fn floor(&self, fs_size: u64) -> u64 {
        let pct = u128::from(fs_size) * u128::from(self.min_free_percent.min(100)) / 100;
        self.min_free_bytes.max(pct as u64)
    }
}

impl From<&edgerec_config::RetentionConfig> for RetentionPolicy {
    fn from(c: &edgerec_config::RetentionConfig) -> Self {
        RetentionPolicy {
            max_total_bytes: c.max_total_bytes,
            min_free_bytes: c.min_free_bytes,
            min_free_percent: c.min_free_percent,
            // `triggers.keep` is wired by the caller that reads `[triggers]`.
            clip_keep: None,
        }
    }
}

/// Whether offload has the file or clip directory at `path` at the store
/// (the binary wires it to offload's ledger; the recorder does not depend
/// on offload).
pub type UploadedFn = std::sync::Arc<dyn Fn(&Path) -> bool + Send + Sync>;

/// How retention treats what offload has and has not sent.
#[derive(Clone)]
pub struct OffloadAware {
    /// What is at the store.
    pub uploaded: UploadedFn,
    /// Delete a closed segment or clip once it is at the store (else it
    /// stays until room is needed, and goes before anything not sent).
    pub delete_after_upload: bool,
    /// Never delete an event clip that is not at the store.
    pub keep_unsent_clips: bool,
}

impl std::fmt::Debug for OffloadAware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffloadAware")
            .field("delete_after_upload", &self.delete_after_upload)
            .field("keep_unsent_clips", &self.keep_unsent_clips)
            .finish()
    }
}

/// How often, at most, files already at the store are looked for and
/// deleted (`delete_after_upload`).
pub const FREE_SENT_EVERY: Duration = Duration::from_secs(1);

/// What [`Retention::make_room`] decided.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Room {
    /// The bytes may be written.
    Proceed {
        /// Segments deleted to make room, oldest first.
        deleted: Vec<PathBuf>,
    },
    /// Writing them would cross a limit and deleting what may be deleted
    /// would not prevent it: pause, drop and count, and ask again.
    Pause {
        /// Why, for the log and the status.
        reason: String,
        /// Segments deleted before giving up (empty when deleting all that
        /// may be deleted could not have been enough).
        deleted: Vec<PathBuf>,
    },
}

impl Room {
    /// The segments deleted by this call, oldest first.
    pub fn deleted(&self) -> &[PathBuf] {
        match self {
            Room::Proceed { deleted } | Room::Pause { deleted, .. } => deleted,
        }
    }
    /// True for [`Room::Proceed`].
    pub fn is_proceed(&self) -> bool {
        matches!(self, Room::Proceed { .. })
    }
}

/// The file system and the recordings, as of the last call (no syscall).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionStatus {
    /// Size of the file system holding the root (`f_blocks * f_frsize`).
    pub fs_size: u64,
    /// Free bytes available to the recorder (`f_bavail * f_frsize` at the
    /// last sample, less the bytes approved since).
    pub free_bytes: u64,
    /// The floor: max(`min_free_bytes`, `min_free_percent` of `fs_size`).
    pub floor_bytes: u64,
    /// The cap (0 = none).
    pub max_total_bytes: u64,
    /// Bytes in the files of all bag directories under the root (scan plus
    /// approved growth less deletions).
    pub recorded_bytes: u64,
    /// Closed segments known (deletable or not).
    pub closed_segments: usize,
    /// Of those, protected ones.
    pub protected_segments: usize,
    /// Event clips known under `<root>/events/`.
    pub event_clips: usize,
    /// Their bytes (counted in `recorded_bytes` too).
    pub event_clip_bytes: u64,
    /// Event clips deleted since start.
    pub deleted_clips: u64,
    /// Segments deleted since start.
    pub deleted_segments: u64,
    /// Their bytes.
    pub deleted_bytes: u64,
    /// Segments and clips deleted before offload sent them (with
    /// offload on): data that never reached the store.
    pub deleted_unsent: u64,
    /// Segments and clips deleted because they were at the store
    /// (`delete_after_upload`).
    pub deleted_sent: u64,
    /// Why the last call said pause; `None` when it said proceed.
    pub paused: Option<String>,
    /// The last error met on the way (a failed deletion or metadata
    /// rewrite); recording went on.
    pub last_error: Option<String>,
    /// `statvfs` calls made.
    pub fs_samples: u64,
    /// Directory scans made.
    pub scans: u64,
}

/// Errors of retention. `make_room` returns the first two; the others are
/// logged, kept in [`RetentionStatus::last_error`], and skipped over.
#[derive(Debug, thiserror::Error)]
pub enum RetentionError {
    /// `statvfs` on the root failed.
    #[error("{}: statvfs failed: {source}", path.display())]
    Statvfs {
        /// The recordings root.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The root could not be listed.
    #[error("{}: cannot list the recordings: {source}", path.display())]
    Scan {
        /// The recordings root.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A segment could not be deleted; the next oldest was tried.
    #[error("{}: cannot delete the segment: {source}", path.display())]
    Delete {
        /// The segment.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// `metadata.yaml` could not be rewritten after a deletion.
    #[error("{}: cannot rewrite metadata.yaml: {source}", path.display())]
    Metadata {
        /// The bag directory.
        path: PathBuf,
        /// The format error.
        source: edgerec_format::FormatError,
    },
    /// An event clip directory could not be deleted; the next oldest was
    /// tried.
    #[error("{}: cannot delete the event clip: {source}", path.display())]
    DeleteClip {
        /// The clip directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A bag directory left without segments could not be removed.
    #[error("{}: cannot remove the emptied session directory: {source}", path.display())]
    RemoveDir {
        /// The bag directory.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
}

/// One `statvfs` sample.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FsSample {
    pub(crate) size: u64,
    pub(crate) free: u64,
}

pub(crate) fn statvfs(path: &Path) -> io::Result<FsSample> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    let mut s = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a NUL-terminated string alive for the whole call and
    // `s` points to writable memory the size of `struct statvfs`.
    let r = unsafe { libc::statvfs(c.as_ptr(), s.as_mut_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it filled the whole struct.
    let s = unsafe { s.assume_init() };
    // The field types differ between targets (u32 on 32-bit ARM).
    #[allow(clippy::unnecessary_cast)]
    let (frsize, blocks, avail) = (
        if s.f_frsize > 0 {
            s.f_frsize
        } else {
            s.f_bsize
        } as u64,
        s.f_blocks as u64,
        s.f_bavail as u64,
    );
    Ok(FsSample {
        size: blocks.saturating_mul(frsize),
        // f_bavail, not f_bfree: space reserved for root is not counted
        // as free even when the recorder runs as root, so the floor holds
        // for the rest of the system too.
        free: avail.saturating_mul(frsize),
    })
}

/// Deletion order. Oldest first by modification time, then by session
/// directory name and segment number, with segments closed during this
/// run after everything found on disk, in the order they closed.
///
/// Why mtime: a closed segment's mtime is when its last byte was written,
/// a property of each file, so it interleaves sessions correctly without
/// trusting their names: a session name's stamp orders only sessions, its
/// `_k` suffix says nothing about time, and a recovered or copied-in bag
/// need not follow our naming at all. Name as the tie-break because mtime
/// can tie (one-second timestamps on small ext4 with 128-byte inodes, fast
/// closes), and then the session stamp and the numeric segment index
/// (`_10` after `_9`) are the best order left. The run rank exists because
/// the wall clock can step backwards while recording (PTP step, RTC set by
/// NTP late): a segment closed after the step would have an older mtime
/// than data written before it and would be deleted first, and the order
/// in which this process closed its own segments is known for certain.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct OrderKey {
    run_rank: u64,
    mtime_ns: i128,
    session: String,
    index: u64,
    name: String,
}

#[derive(Debug, Clone)]
struct ClosedSeg {
    path: PathBuf,
    bytes: u64,
    protected: bool,
}

/// One event clip directory as of the last scan.
#[derive(Debug, Clone)]
struct EventClip {
    dir: PathBuf,
    /// Bytes of all its files.
    bytes: u64,
    /// Modification time of its newest `*.mcap` (of the directory when it
    /// holds none), in ns since the epoch: what its age counts from.
    newest_ns: i128,
    /// A file in it ends `.active`: still being written.
    active: bool,
}

/// What one attempt at deleting the oldest deletable clip did.
#[derive(Debug)]
enum ClipDeletion {
    /// This clip directory is gone.
    Deleted(PathBuf),
    /// The oldest turned out to be kept, was gone already, or could not be
    /// deleted; it is out of the running, try again.
    Skipped,
    /// No clip may be deleted.
    NoneLeft,
}

/// Wall-clock now in ns since the epoch, comparable with [`mtime_ns`].
fn wall_ns() -> i128 {
    match SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_nanos() as i128,
        Err(e) => -(e.duration().as_nanos() as i128),
    }
}

/// Lists the clip directories under `events`, oldest first (by newest
/// `*.mcap`, then name); unreadable ones are skipped with a warning.
fn scan_clips(events: &Path) -> Vec<EventClip> {
    let Ok(rd) = fs::read_dir(events) else {
        return Vec::new();
    };
    let mut clips: Vec<EventClip> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let dir = e.path();
            let files = match fs::read_dir(&dir) {
                Ok(rd) => rd,
                Err(err) => {
                    tracing::warn!("retention: cannot list {}: {err}; skipped", dir.display());
                    return None;
                }
            };
            let mut clip = EventClip {
                newest_ns: e.metadata().map(|m| mtime_ns(&m)).unwrap_or(0),
                dir,
                bytes: 0,
                active: false,
            };
            let mut newest_mcap: Option<i128> = None;
            for f in files.flatten() {
                let Ok(m) = f.metadata() else { continue };
                if !m.is_file() {
                    continue;
                }
                clip.bytes += m.len();
                let name = f.file_name();
                let name = name.to_string_lossy();
                clip.active |= name.ends_with(".active");
                if name.ends_with(".mcap") {
                    newest_mcap = newest_mcap.max(Some(mtime_ns(&m)));
                }
            }
            if let Some(t) = newest_mcap {
                clip.newest_ns = t;
            }
            Some(clip)
        })
        .collect();
    clips.sort_by(|a, b| (a.newest_ns, &a.dir).cmp(&(b.newest_ns, &b.dir)));
    clips
}

fn mtime_ns(m: &Metadata) -> i128 {
    match m.modified() {
        Ok(t) => match t.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(d) => d.as_nanos() as i128,
            Err(e) => -(e.duration().as_nanos() as i128),
        },
        Err(_) => 0,
    }
}

/// `<session>_<n>.mcap` -> n; `u64::MAX` for a name without a number.
fn segment_index(name: &str) -> u64 {
    name.strip_suffix(".mcap")
        .and_then(|stem| stem.rsplit('_').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX)
}

fn marker(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".protected");
    PathBuf::from(s)
}

fn since(t: Option<Instant>, now: Instant) -> Duration {
    t.map_or(Duration::MAX, |t| now.saturating_duration_since(t))
}

/// What a write would cross, in bytes.
#[derive(Debug, Clone, Copy, Default)]
struct Shortfall {
    free: u64,
    total: u64,
}

/// The retention policy applied to one recordings root. Owned by the
/// sequencer thread; see the module docs.
#[derive(Debug)]
pub struct Retention {
    root: PathBuf,
    policy: RetentionPolicy,
    write_ahead: u64,

    fs: Option<FsSample>,
    sampled_at: Option<Instant>,
    /// Something was written without a `make_room` (a segment closed).
    fs_stale: bool,
    /// Bytes approved since the sample. Not rounded up to blocks: chunks
    /// append to one file, so only its last partial block is extra, and
    /// [`SLACK`] covers that.
    pending: u64,

    segments: BTreeMap<OrderKey, ClosedSeg>,
    /// Event clips, oldest first.
    clips: Vec<EventClip>,
    scanned_at: Option<Instant>,
    rescan: bool,
    scanned_bytes: u64,
    growth: u64,
    removed: u64,
    /// Close order of segments closed during this run.
    run_rank: HashMap<PathBuf, u64>,
    next_rank: u64,
    failed: HashMap<PathBuf, Instant>,

    deleted_segments: u64,
    deleted_clips: u64,
    deleted_bytes: u64,
    deleted_unsent: u64,
    deleted_sent: u64,
    offload: Option<OffloadAware>,
    freed_at: Option<Instant>,
    fs_samples: u64,
    scans: u64,
    paused: Option<String>,
    last_error: Option<String>,
}

impl Retention {
    /// Retention for the recordings under `root`. Touches nothing on disk;
    /// the first [`make_room`](Self::make_room) scans and samples.
    pub fn new(root: &Path, policy: RetentionPolicy) -> Self {
        Retention {
            root: root.to_path_buf(),
            policy,
            write_ahead: 0,
            fs: None,
            sampled_at: None,
            fs_stale: true,
            pending: 0,
            segments: BTreeMap::new(),
            clips: Vec::new(),
            scanned_at: None,
            rescan: true,
            scanned_bytes: 0,
            growth: 0,
            removed: 0,
            run_rank: HashMap::new(),
            next_rank: 1,
            failed: HashMap::new(),
            deleted_segments: 0,
            deleted_clips: 0,
            deleted_bytes: 0,
            deleted_unsent: 0,
            deleted_sent: 0,
            offload: None,
            freed_at: None,
            fs_samples: 0,
            scans: 0,
            paused: None,
            last_error: None,
        }
    }

    /// Bytes the storage writer may take from the file system beyond what
    /// `make_room` was told of: its preallocation extent (`fallocate`
    /// takes a whole extent at once, ahead of the writes) plus the blocks
    /// it has in flight (queued but not yet in the `statvfs` sample). Kept
    /// free on top of the floor. Default 0, right for synchronous writes
    /// without preallocation.
    pub fn with_write_ahead(mut self, bytes: u64) -> Self {
        self.write_ahead = bytes;
        self
    }

    /// Retention that knows what offload sent: what is at the store goes
    /// first (or at once, `delete_after_upload`), an event clip not sent
    /// is kept (`keep_unsent_clips`), and each file deleted before it was
    /// sent is counted and logged.
    pub fn with_offload(mut self, offload: OffloadAware) -> Self {
        self.offload = Some(offload);
        self
    }

    /// The recordings root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The policy.
    pub fn policy(&self) -> RetentionPolicy {
        self.policy
    }

    /// Makes room for `upcoming` more bytes about to be written into
    /// `active` (the open segment; at a segment open, the path it will
    /// have or its session directory). If writing them would leave less
    /// free space than the floor plus write-ahead and [`SLACK`], or push
    /// the recorded total past `max_total_bytes`, deletes the oldest
    /// closed segments (by modification time, then session name and
    /// segment number; those reported to
    /// [`segment_closed`](Self::segment_closed) after all others, in the
    /// order reported) that are not
    /// `active`, not protected and not `.active`/`.recovering`, rewrites
    /// each affected bag's `metadata.yaml` and removes a bag directory left
    /// with only `metadata.yaml` (never the active one's). Only when no
    /// such segment is left does it delete event clips, whole, oldest
    /// first, those older than [`RetentionPolicy::clip_keep`] and without
    /// a `.active` file; `deleted` lists their directories. Returns
    /// [`Room::Pause`] when the limit would still be crossed; nothing is
    /// deleted then unless deleting could have been enough. After
    /// `Proceed` the bytes are counted as written.
    pub fn make_room(&mut self, upcoming: u64, active: &Path) -> Result<Room, RetentionError> {
        let now = Instant::now();
        let mut fresh = false;
        if self.fs_stale
            || upcoming >= LARGE_WRITE
            || since(self.sampled_at, now) >= FS_SAMPLE_EVERY
        {
            self.sample_fs(now)?;
            fresh = true;
        }
        let mut scanned = false;
        if self.rescan
            || (self.policy.max_total_bytes > 0 && since(self.scanned_at, now) >= RESCAN_EVERY)
        {
            self.scan(now, active)?;
            scanned = true;
        }

        let mut deleted = Vec::new();
        let mut touched: BTreeSet<PathBuf> = BTreeSet::new();
        let freed = self.free_sent(active, now, &mut deleted, &mut touched);
        // Errors leave the loop by value, not by `?`, so that what was
        // deleted before still gets its metadata.yaml rewritten.
        let verdict = loop {
            if freed.is_err() {
                break freed.map(|()| None);
            }
            let short = self.shortfall(upcoming);
            if short.free == 0 && short.total == 0 {
                break Ok(None);
            }
            // Never act on an estimate: the sample may be stale, and the
            // list of segments must be current before deleting from it.
            if !fresh {
                if let Err(e) = self.sample_fs(now) {
                    break Err(e);
                }
                fresh = true;
                continue;
            }
            if !scanned && since(self.scanned_at, now) >= RESCAN_EVERY {
                if let Err(e) = self.scan(now, active) {
                    break Err(e);
                }
                scanned = true;
                continue;
            }
            let (count, bytes) = self.deletable(active, now);
            // The wall clock only on this slow path: clip ages.
            let wall = wall_ns();
            let (clip_count, clip_bytes) = self.deletable_clips(wall);
            let (count, bytes) = (count + clip_count, bytes + clip_bytes);
            if count == 0 || bytes < short.free.max(short.total) {
                break Ok(Some(self.pause_reason(upcoming, short, count, bytes, wall)));
            }
            let Some(key) = self.oldest_deletable(active, now) else {
                // Every deletable segment is gone: the oldest clip next.
                match self.delete_oldest_clip(wall, now) {
                    Ok(ClipDeletion::Deleted(dir)) => deleted.push(dir),
                    Ok(ClipDeletion::Skipped) => {}
                    Ok(ClipDeletion::NoneLeft) => {
                        break Ok(Some(self.pause_reason(upcoming, short, 0, 0, wall)));
                    }
                    Err(e) => break Err(e),
                }
                continue;
            };
            if let Err(e) = self.delete_segment(key, now, &mut deleted, &mut touched) {
                break Err(e);
            }
        };

        for dir in &touched {
            self.tidy_session(dir, active);
        }

        match verdict? {
            None => {
                if let Some(reason) = self.paused.take() {
                    tracing::info!("retention: room again, resuming (was: {reason})");
                }
                self.pending = self.pending.saturating_add(upcoming);
                self.growth = self.growth.saturating_add(upcoming);
                Ok(Room::Proceed { deleted })
            }
            Some(reason) => {
                if self.paused.is_none() {
                    tracing::warn!("retention: pausing: {reason}");
                }
                self.paused = Some(reason.clone());
                Ok(Room::Pause { reason, deleted })
            }
        }
    }

    /// Deletes the closed segment `key` (unless a marker protects it
    /// now), counting it; one it cannot delete is skipped for
    /// [`RETRY_FAILED_AFTER`].
    fn delete_segment(
        &mut self,
        key: OrderKey,
        now: Instant,
        deleted: &mut Vec<PathBuf>,
        touched: &mut BTreeSet<PathBuf>,
    ) -> Result<(), RetentionError> {
        let Some(mut seg) = self.segments.remove(&key) else {
            return Ok(());
        };
        // The trigger issue may protect a segment at any moment; look
        // again right before unlinking.
        if marker(&seg.path).exists() {
            seg.protected = true;
            self.segments.insert(key, seg);
            return Ok(());
        }
        let sent = self.offload.as_ref().map(|o| (o.uploaded)(&seg.path));
        match fs::remove_file(&seg.path) {
            Ok(()) => {
                tracing::info!(
                    "retention: deleted {} ({}{})",
                    seg.path.display(),
                    human_bytes(seg.bytes),
                    match sent {
                        Some(true) => ", at the store",
                        _ => "",
                    }
                );
                self.deleted_segments += 1;
                self.deleted_bytes += seg.bytes;
                self.removed += seg.bytes;
                self.count_unsent(&seg.path, sent);
                self.run_rank.remove(&seg.path);
                if let Some(dir) = seg.path.parent() {
                    touched.insert(dir.to_path_buf());
                }
                deleted.push(seg.path);
                // Measure what the deletion freed instead of assuming: a
                // file someone still holds open frees nothing yet.
                self.sample_fs(now)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Gone already (removed by someone else): its space is in
                // the next sample; the list is stale.
                self.removed += seg.bytes;
                self.rescan = true;
                self.sample_fs(now)?;
            }
            Err(e) => {
                let err = RetentionError::Delete {
                    path: seg.path.clone(),
                    source: e,
                };
                tracing::warn!("retention: {err}; trying the next oldest");
                self.last_error = Some(err.to_string());
                self.failed.insert(seg.path, now);
                self.rescan = true;
            }
        }
        Ok(())
    }

    /// A deletion of `path` whose store state was `sent` (None: offload
    /// off): one not sent is counted and said, never silently.
    fn count_unsent(&mut self, path: &Path, sent: Option<bool>) {
        match sent {
            Some(false) => {
                self.deleted_unsent += 1;
                tracing::warn!(
                    "retention: {} was deleted before offload sent it ({} so far): it never \
                     reached the store",
                    path.display(),
                    self.deleted_unsent
                );
            }
            Some(true) => self.deleted_sent += 1,
            None => {}
        }
    }

    /// `delete_after_upload`: deletes the closed segments (not protected,
    /// not active) and the finished clips offload has at the store, at
    /// most every [`FREE_SENT_EVERY`].
    fn free_sent(
        &mut self,
        active: &Path,
        now: Instant,
        deleted: &mut Vec<PathBuf>,
        touched: &mut BTreeSet<PathBuf>,
    ) -> Result<(), RetentionError> {
        let Some(o) = self.offload.clone() else {
            return Ok(());
        };
        if !o.delete_after_upload || since(self.freed_at, now) < FREE_SENT_EVERY {
            return Ok(());
        }
        self.freed_at = Some(now);
        let sent: Vec<OrderKey> = self
            .segments
            .iter()
            .filter(|(_, s)| self.may_delete(s, active, now) && (o.uploaded)(&s.path))
            .map(|(k, _)| k.clone())
            .collect();
        for key in sent {
            self.delete_segment(key, now, deleted, touched)?;
        }
        while let Some(i) = self
            .clips
            .iter()
            .position(|c| !c.active && (o.uploaded)(&c.dir))
        {
            match self.delete_clip(i, now, |c| !c.active)? {
                ClipDeletion::Deleted(dir) => deleted.push(dir),
                ClipDeletion::Skipped | ClipDeletion::NoneLeft => break,
            }
        }
        Ok(())
    }

    /// Tells retention that a segment was closed at `path` (its final
    /// `.mcap` name) with `bytes` bytes, so it becomes deletable without a
    /// rescan. Segments reported here are deleted after every segment that
    /// was on disk before, in the order they were reported.
    pub fn segment_closed(&mut self, path: &Path, bytes: u64) {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            return;
        };
        if !name.ends_with(".mcap") {
            tracing::warn!(
                "retention: {} is not a closed segment name; ignored",
                path.display()
            );
            return;
        }
        // Closing wrote the summary and metadata.yaml and released the
        // preallocated tail, none of it announced: sample again next call.
        self.fs_stale = true;
        if self.run_rank.contains_key(path) {
            return;
        }
        let rank = self.next_rank;
        self.next_rank += 1;
        self.run_rank.insert(path.to_path_buf(), rank);
        self.segments.retain(|_, s| s.path != path);
        let session = path
            .parent()
            .and_then(|d| d.file_name())
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let key = OrderKey {
            run_rank: rank,
            mtime_ns: fs::metadata(path).map(|m| mtime_ns(&m)).unwrap_or(0),
            session,
            index: segment_index(name),
            name: name.to_string(),
        };
        self.segments.insert(
            key,
            ClosedSeg {
                path: path.to_path_buf(),
                bytes,
                protected: marker(path).exists(),
            },
        );
    }

    /// Whether clip `c` may be deleted at wall time `wall` (ns since the
    /// epoch): not `.active`, and `clip_keep` set and passed.
    fn clip_deletable(&self, c: &EventClip, wall: i128) -> bool {
        let old_enough = self
            .policy
            .clip_keep
            .is_some_and(|keep| wall.saturating_sub(c.newest_ns) >= keep.as_nanos() as i128);
        let sent_or_may_go = self
            .offload
            .as_ref()
            .is_none_or(|o| !o.keep_unsent_clips || (o.uploaded)(&c.dir));
        !c.active && old_enough && sent_or_may_go
    }

    fn deletable_clips(&self, wall: i128) -> (usize, u64) {
        self.clips
            .iter()
            .filter(|c| self.clip_deletable(c, wall))
            .fold((0, 0), |(n, b), c| (n + 1, b + c.bytes))
    }

    /// Deletes the oldest deletable clip, its files then its directory.
    fn delete_oldest_clip(
        &mut self,
        wall: i128,
        now: Instant,
    ) -> Result<ClipDeletion, RetentionError> {
        let Some(i) = self.clips.iter().position(|c| self.clip_deletable(c, wall)) else {
            return Ok(ClipDeletion::NoneLeft);
        };
        self.delete_clip_checked(i, now, |r, c| r.clip_deletable(c, wall))
    }

    /// Deletes the clip `i` when `may` still holds of it listed again.
    fn delete_clip(
        &mut self,
        i: usize,
        now: Instant,
        may: impl Fn(&EventClip) -> bool,
    ) -> Result<ClipDeletion, RetentionError> {
        self.delete_clip_checked(i, now, |_, c| may(c))
    }

    fn delete_clip_checked(
        &mut self,
        i: usize,
        now: Instant,
        may: impl Fn(&Retention, &EventClip) -> bool,
    ) -> Result<ClipDeletion, RetentionError> {
        // Look again right before deleting, as for a segment's marker: a
        // trigger may have started writing into it since the scan.
        match scan_clip_again(&self.clips[i].dir) {
            Some(fresh) if !may(self, &fresh) => {
                self.clips[i] = fresh;
                return Ok(ClipDeletion::Skipped);
            }
            Some(fresh) => self.clips[i] = fresh,
            None => {}
        }
        let clip = self.clips.remove(i);
        let sent = self.offload.as_ref().map(|o| (o.uploaded)(&clip.dir));
        match fs::remove_dir_all(&clip.dir) {
            Ok(()) => {
                tracing::info!(
                    "retention: deleted the event clip {} ({}{})",
                    clip.dir.display(),
                    human_bytes(clip.bytes),
                    match sent {
                        Some(true) => ", at the store",
                        _ => "",
                    }
                );
                self.deleted_clips += 1;
                self.deleted_bytes += clip.bytes;
                self.removed += clip.bytes;
                self.count_unsent(&clip.dir, sent);
                let events = self.root.join(EVENTS_DIR);
                if let Err(e) = edgerec_format::bag::sync_dir(&events) {
                    tracing::warn!("retention: fsync {}: {e}", events.display());
                }
                // Measure what the deletion freed instead of assuming.
                self.sample_fs(now)?;
                Ok(ClipDeletion::Deleted(clip.dir))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // Removed by someone else: its space is in the next sample.
                self.removed += clip.bytes;
                self.rescan = true;
                self.sample_fs(now)?;
                Ok(ClipDeletion::Skipped)
            }
            Err(e) => {
                let err = RetentionError::DeleteClip {
                    path: clip.dir,
                    source: e,
                };
                tracing::warn!("retention: {err}; trying the next oldest");
                self.last_error = Some(err.to_string());
                // Out of the list until the next scan; part of it may be
                // gone, which the next scan measures.
                self.rescan = true;
                Ok(ClipDeletion::Skipped)
            }
        }
    }

    /// The file system and the recordings as of the last call.
    pub fn status(&self) -> RetentionStatus {
        let (fs_size, free_bytes) = self
            .fs
            .map_or((0, 0), |f| (f.size, f.free.saturating_sub(self.pending)));
        RetentionStatus {
            fs_size,
            free_bytes,
            floor_bytes: self.policy.floor(fs_size),
            max_total_bytes: self.policy.max_total_bytes,
            recorded_bytes: self.recorded_bytes(),
            closed_segments: self.segments.len(),
            protected_segments: self.segments.values().filter(|s| s.protected).count(),
            event_clips: self.clips.len(),
            event_clip_bytes: self.clips.iter().map(|c| c.bytes).sum(),
            deleted_clips: self.deleted_clips,
            deleted_segments: self.deleted_segments,
            deleted_bytes: self.deleted_bytes,
            deleted_unsent: self.deleted_unsent,
            deleted_sent: self.deleted_sent,
            paused: self.paused.clone(),
            last_error: self.last_error.clone(),
            fs_samples: self.fs_samples,
            scans: self.scans,
        }
    }

    fn recorded_bytes(&self) -> u64 {
        self.scanned_bytes
            .saturating_add(self.growth)
            .saturating_sub(self.removed)
    }

    fn shortfall(&self, upcoming: u64) -> Shortfall {
        let mut s = Shortfall::default();
        if let Some(fs) = self.fs {
            let need = self
                .policy
                .floor(fs.size)
                .saturating_add(self.write_ahead)
                .saturating_add(SLACK)
                .saturating_add(upcoming);
            s.free = need.saturating_sub(fs.free.saturating_sub(self.pending));
        }
        if self.policy.max_total_bytes > 0 {
            s.total = self
                .recorded_bytes()
                .saturating_add(upcoming)
                .saturating_sub(self.policy.max_total_bytes);
        }
        s
    }

    fn may_delete(&self, s: &ClosedSeg, active: &Path, now: Instant) -> bool {
        !s.protected
            && !is_active(&s.path, active)
            && self
                .failed
                .get(&s.path)
                .is_none_or(|t| now.saturating_duration_since(*t) >= RETRY_FAILED_AFTER)
    }

    fn deletable(&self, active: &Path, now: Instant) -> (usize, u64) {
        self.segments
            .values()
            .filter(|s| self.may_delete(s, active, now))
            .fold((0, 0), |(n, b), s| (n + 1, b + s.bytes))
    }

    /// The oldest segment that may be deleted; with offload, the oldest
    /// of those at the store first.
    fn oldest_deletable(&self, active: &Path, now: Instant) -> Option<OrderKey> {
        let mut first = None;
        for (k, s) in &self.segments {
            if !self.may_delete(s, active, now) {
                continue;
            }
            let Some(o) = &self.offload else {
                return Some(k.clone());
            };
            if (o.uploaded)(&s.path) {
                return Some(k.clone());
            }
            first.get_or_insert(k);
        }
        first.cloned()
    }

    fn pause_reason(
        &self,
        upcoming: u64,
        short: Shortfall,
        count: usize,
        bytes: u64,
        wall: i128,
    ) -> String {
        let mut what = Vec::new();
        if short.free > 0 {
            let (size, free) = self
                .fs
                .map_or((0, 0), |f| (f.size, f.free.saturating_sub(self.pending)));
            let mut s = format!(
                "{} free of {} on {}, floor {}",
                human_bytes(free),
                human_bytes(size),
                self.root.display(),
                human_bytes(self.policy.floor(size)),
            );
            if self.write_ahead > 0 {
                s += &format!(" + {} write-ahead", human_bytes(self.write_ahead));
            }
            what.push(s);
        }
        if short.total > 0 {
            what.push(format!(
                "recordings hold {}, cap {}",
                human_bytes(self.recorded_bytes()),
                human_bytes(self.policy.max_total_bytes)
            ));
        }
        let protected = self.segments.values().filter(|s| s.protected).count();
        let kept: Vec<&EventClip> = self
            .clips
            .iter()
            .filter(|c| !self.clip_deletable(c, wall))
            .collect();
        let unsent = self.offload.as_ref().map_or(0, |o| {
            if o.keep_unsent_clips {
                kept.iter().filter(|c| !(o.uploaded)(&c.dir)).count()
            } else {
                0
            }
        });
        let why = if count == 0 && !kept.is_empty() {
            let by = if unsent > 0 {
                format!(
                    "triggers.keep or offload.keep_unsent_clips ({unsent} not at the store yet)"
                )
            } else {
                "triggers.keep".to_owned()
            };
            format!(
                "nothing left to delete: only event clips kept by {by} remain \
                 ({} clips, {}; {protected} protected closed segments)",
                kept.len(),
                human_bytes(kept.iter().map(|c| c.bytes).sum())
            )
        } else if count == 0 {
            format!("nothing left to delete ({protected} protected closed segments)")
        } else {
            format!(
                "deleting all {count} deletable segments ({}) would not be enough",
                human_bytes(bytes)
            )
        };
        format!(
            "{}: no room for {} more; {why}",
            what.join("; "),
            human_bytes(upcoming)
        )
    }

    fn sample_fs(&mut self, now: Instant) -> Result<(), RetentionError> {
        let s = statvfs(&self.root).map_err(|e| RetentionError::Statvfs {
            path: self.root.clone(),
            source: e,
        })?;
        self.fs = Some(s);
        self.sampled_at = Some(now);
        self.fs_stale = false;
        self.pending = 0;
        self.fs_samples += 1;
        Ok(())
    }

    /// Lists every bag directory under the root: the closed segments with
    /// their sizes and markers, and the bytes of all their files.
    fn scan(&mut self, now: Instant, active: &Path) -> Result<(), RetentionError> {
        let rd = fs::read_dir(&self.root).map_err(|e| RetentionError::Scan {
            path: self.root.clone(),
            source: e,
        })?;
        let mut segments = BTreeMap::new();
        let mut clips = Vec::new();
        let mut bytes = 0u64;
        for entry in rd.flatten() {
            // file_type() does not follow symlinks: a link to elsewhere is
            // not a session of ours.
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let dir = entry.path();
            if entry.file_name() == EVENTS_DIR {
                clips = scan_clips(&dir);
                bytes += clips.iter().map(|c| c.bytes).sum::<u64>();
                continue;
            }
            let session = entry.file_name().to_string_lossy().into_owned();
            let files: Vec<(String, Metadata)> = match fs::read_dir(&dir) {
                Ok(rd) => rd
                    .flatten()
                    .filter_map(|e| {
                        let name = e.file_name().into_string().ok()?;
                        let m = e.metadata().ok()?;
                        m.is_file().then_some((name, m))
                    })
                    .collect(),
                Err(e) => {
                    tracing::warn!("retention: cannot list {}: {e}; skipped", dir.display());
                    continue;
                }
            };
            bytes += files.iter().map(|(_, m)| m.len()).sum::<u64>();
            if !files.iter().any(|(n, _)| n == METADATA) {
                continue;
            }
            let markers: BTreeSet<&str> = files
                .iter()
                .filter_map(|(n, _)| n.strip_suffix(".protected"))
                .collect();
            for (name, m) in &files {
                // Only `*.mcap`: `.mcap.active` and `.mcap.recovering` end
                // otherwise and are never candidates.
                if !name.ends_with(".mcap") {
                    continue;
                }
                let path = dir.join(name);
                // A segment of this run is ranked when its closer reports
                // it. One found closed on disk before that report is the
                // newest there is (it was just closed), not the oldest:
                // ranking it 0 had retention delete it before older ones
                // (found on the QEMU board). Unranked segments of other
                // sessions are from earlier runs: oldest.
                let unranked = if active.parent() == Some(dir.as_path()) {
                    u64::MAX
                } else {
                    0
                };
                let key = OrderKey {
                    run_rank: self.run_rank.get(&path).copied().unwrap_or(unranked),
                    mtime_ns: mtime_ns(m),
                    session: session.clone(),
                    index: segment_index(name),
                    name: name.clone(),
                };
                segments.insert(
                    key,
                    ClosedSeg {
                        path,
                        bytes: m.len(),
                        protected: markers.contains(name.as_str()),
                    },
                );
            }
        }
        self.segments = segments;
        self.clips = clips;
        self.scanned_bytes = bytes;
        self.growth = 0;
        self.removed = 0;
        self.scanned_at = Some(now);
        self.rescan = false;
        self.scans += 1;
        self.failed
            .retain(|_, t| now.saturating_duration_since(*t) < RETRY_FAILED_AFTER);
        Ok(())
    }

    /// After deleting from `dir`: removes it when only `metadata.yaml` is
    /// left (and it is not the active session), else rewrites its
    /// `metadata.yaml` from the segments that remain (the active session's
    /// is left to the session, its only writer).
    fn tidy_session(&mut self, dir: &Path, active: &Path) {
        let leftovers: Option<Vec<String>> = fs::read_dir(dir).ok().map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        });
        let only_metadata = leftovers.as_ref().is_some_and(|names| {
            names
                .iter()
                .all(|n| n == METADATA || n == ".metadata.yaml.tmp")
        });
        if only_metadata && !active.starts_with(dir) {
            let removed = leftovers
                .into_iter()
                .flatten()
                .try_for_each(|n| fs::remove_file(dir.join(n)))
                .and_then(|_| fs::remove_dir(dir));
            match removed {
                Ok(()) => {
                    tracing::info!("retention: removed the emptied session {}", dir.display());
                    if let Err(e) = edgerec_format::bag::sync_dir(&self.root) {
                        tracing::warn!("retention: fsync {}: {e}", self.root.display());
                    }
                    return;
                }
                Err(e) => {
                    // Something appeared meanwhile, or metadata.yaml is gone
                    // already: fall through and write it again.
                    let err = RetentionError::RemoveDir {
                        path: dir.to_path_buf(),
                        source: e,
                    };
                    tracing::warn!("retention: {err}");
                    self.last_error = Some(err.to_string());
                }
            }
        }
        if active.starts_with(dir) {
            // The recording session's metadata.yaml has one writer, the
            // session itself (the pipeline reloads it after deletions):
            // rewriting it here too raced with the closer adding a segment
            // (a file listed twice; found on the QEMU board).
            return;
        }
        if let Err(e) = edgerec_format::bag::rewrite_metadata(dir) {
            let err = RetentionError::Metadata {
                path: dir.to_path_buf(),
                source: e,
            };
            tracing::warn!("retention: {err}");
            self.last_error = Some(err.to_string());
        }
    }
}

/// One clip directory listed again, as [`scan_clips`] lists it; `None`
/// when it is gone.
fn scan_clip_again(dir: &Path) -> Option<EventClip> {
    let parent = dir.parent()?;
    scan_clips(parent).into_iter().find(|c| c.dir == dir)
}

/// `path` is the active segment, or the name it will have once closed.
fn is_active(path: &Path, active: &Path) -> bool {
    path == active
        || active
            .to_str()
            .and_then(|a| a.strip_suffix(".active"))
            .is_some_and(|a| Path::new(a) == path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_is_the_larger_limit() {
        let p = RetentionPolicy {
            max_total_bytes: 0,
            min_free_bytes: 4 << 30,
            min_free_percent: 5,
            clip_keep: None,
        };
        assert_eq!(p.floor(10 << 30), 4 << 30);
        assert_eq!(p.floor(1000 << 30), 50 << 30);
        let d = RetentionPolicy::from(&edgerec_config::RetentionConfig::default());
        assert_eq!(d, p);
    }

    #[test]
    fn order_is_rank_then_mtime_then_session_then_numeric_index() {
        let k = |rank, mtime, session: &str, name: &str| OrderKey {
            run_rank: rank,
            mtime_ns: mtime,
            session: session.into(),
            index: segment_index(name),
            name: name.into(),
        };
        let mut v = [
            k(1, 0, "b", "b_0.mcap"),
            k(0, 5, "a", "a_10.mcap"),
            k(0, 5, "a", "a_9.mcap"),
            k(0, 1, "z", "z_3.mcap"),
        ];
        v.sort();
        let names: Vec<&str> = v.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["z_3.mcap", "a_9.mcap", "a_10.mcap", "b_0.mcap"]);
    }

    #[test]
    fn active_matches_its_final_name() {
        let a = Path::new("/r/s/s_3.mcap.active");
        assert!(is_active(Path::new("/r/s/s_3.mcap"), a));
        assert!(is_active(a, a));
        assert!(!is_active(Path::new("/r/s/s_2.mcap"), a));
    }
}
