//! Retention against real directories and real file systems. On a
//! tempdir, driven by `max_total_bytes`: the oldest closed segments go
//! first across sessions (mtime, then name; this run's closes last), never
//! the active, a protected, an `.active` or a `.recovering` file; the
//! affected `metadata.yaml` stops listing what was deleted; an emptied
//! session directory is removed (not the active one's); `Pause` when only
//! protected and active files remain, and nothing is deleted when deleting
//! all that may go would not be enough; a segment that cannot be deleted
//! is skipped; errors name the path; a call costs well under a microsecond
//! or two. On a size-limited tmpfs and a loop-mounted ext4 image: a
//! recording of 3x the file system's size never takes free space (measured
//! with statvfs after every write) below the floor, deletes strictly
//! oldest first, keeps the newest, pauses when everything left is
//! protected and resumes as soon as space returns. With offload, what is
//! at the store goes first (or at once, `delete_after_upload`), a clip
//! not at the store is kept unless allowed, and each deletion of a file
//! not sent is counted. Mounting needs root;
//! where it is refused the test says why and skips.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use edgerec_format::chunk::{ChunkBuilder, ChunkCompressor, Compression, SealedChunk};
use edgerec_format::records::{Channel, Schema};
use edgerec_format::writer::{McapWriter, PROFILE_ROS2};
use edgerec_recorder::retention::{
    OffloadAware, Retention, RetentionError, RetentionPolicy, Room, FREE_SENT_EVERY,
    FS_SAMPLE_EVERY, RESCAN_EVERY, SLACK,
};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

// ---------------------------------------------------------------------------
// Segments on disk
// ---------------------------------------------------------------------------

/// Writes one segment the way the recorder does: `<session>_<n>.mcap.active`
/// through [`McapWriter`], renamed to `.mcap` and made 0444 on close.
struct SegWriter {
    w: McapWriter<File>,
    active: PathBuf,
    path: PathBuf,
    builder: ChunkBuilder,
    z: ChunkCompressor,
    t: u64,
    seq: u32,
    payload: Vec<u8>,
}

impl SegWriter {
    fn open(dir: &Path, index: u32) -> SegWriter {
        let session = dir.file_name().unwrap().to_str().unwrap();
        let path = dir.join(format!("{session}_{index}.mcap"));
        let active = dir.join(format!("{session}_{index}.mcap.active"));
        let f = File::create(&active).unwrap();
        let mut w = McapWriter::new(f, PROFILE_ROS2, "edgerec-retention-test").unwrap();
        w.add_schema(&Schema {
            id: 1,
            name: "sensor_msgs/msg/PointCloud2".into(),
            encoding: "ros2msg".into(),
            data: b"uint8[] data".to_vec(),
        })
        .unwrap();
        w.add_channel(&Channel {
            id: 1,
            schema_id: 1,
            topic: "/lidar".into(),
            message_encoding: "cdr".into(),
            metadata: BTreeMap::from([("offered_qos_profiles".to_string(), String::new())]),
        })
        .unwrap();
        SegWriter {
            w,
            active,
            path,
            builder: ChunkBuilder::new(1 << 20),
            z: ChunkCompressor::new(Compression::None).unwrap(),
            t: 1_780_000_000_000_000_000 + u64::from(index) * 1_000_000_000,
            seq: 0,
            payload: (0..64 * KIB as usize).map(|i| (i * 131) as u8).collect(),
        }
    }

    /// A sealed chunk of about `bytes` payload, in 64 KiB messages.
    fn chunk(&mut self, bytes: u64) -> SealedChunk {
        let mut left = bytes as usize;
        while left > 0 {
            let n = left.min(self.payload.len());
            self.payload[..4].copy_from_slice(&self.seq.to_le_bytes());
            self.t += 1_000_000;
            self.builder
                .push(1, self.seq, self.t, self.t, &self.payload[..n]);
            self.seq += 1;
            left -= n;
        }
        self.builder.take().seal(&mut self.z)
    }

    fn write(&mut self, c: &SealedChunk) {
        self.w.write_chunk(c).unwrap();
    }

    fn position(&self) -> u64 {
        self.w.position()
    }

    /// Finishes, renames to `.mcap`, makes it 0444; returns (path, bytes).
    fn close(self) -> (PathBuf, u64) {
        use std::os::unix::fs::PermissionsExt;
        let (f, s) = self.w.finish().unwrap();
        f.sync_all().unwrap();
        drop(f);
        fs::rename(&self.active, &self.path).unwrap();
        fs::set_permissions(&self.path, fs::Permissions::from_mode(0o444)).unwrap();
        (self.path, s.file_len)
    }
}

/// A closed segment with one chunk of `payload` bytes and the given mtime.
fn closed_segment(dir: &Path, index: u32, payload: u64, mtime: SystemTime) -> (PathBuf, u64) {
    let mut w = SegWriter::open(dir, index);
    let c = w.chunk(payload);
    w.write(&c);
    let (path, bytes) = w.close();
    // mtime is set through a writable handle; root may open a 0444 file.
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    (path, bytes)
}

fn names_in_metadata(dir: &Path) -> Vec<String> {
    let text = fs::read_to_string(dir.join("metadata.yaml")).unwrap();
    let doc: serde_norway::Value = serde_norway::from_str(&text).unwrap();
    doc["rosbag2_bagfile_information"]["files"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect()
}

fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_str().unwrap().to_string()
}

struct Statvfs {
    size: u64,
    avail: u64,
}

fn statvfs(p: &Path) -> Statvfs {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    let mut s = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is NUL-terminated and alive across the call; `s` is a
    // writable statvfs-sized buffer.
    let r = unsafe { libc::statvfs(c.as_ptr(), s.as_mut_ptr()) };
    assert_eq!(
        r,
        0,
        "statvfs {}: {}",
        p.display(),
        std::io::Error::last_os_error()
    );
    // SAFETY: statvfs returned 0 and filled the struct.
    let s = unsafe { s.assume_init() };
    #[allow(clippy::unnecessary_cast)]
    let f = s.f_frsize as u64;
    #[allow(clippy::unnecessary_cast)]
    Statvfs {
        size: s.f_blocks as u64 * f,
        avail: s.f_bavail as u64 * f,
    }
}

// ---------------------------------------------------------------------------
// Tempdir tests, driven by max_total_bytes
// ---------------------------------------------------------------------------

fn cap_only(max_total_bytes: u64) -> RetentionPolicy {
    RetentionPolicy {
        max_total_bytes,
        min_free_bytes: 0,
        min_free_percent: 0,
        clip_keep: None,
    }
}

/// Three sessions A, B, C of three closed segments each (A oldest, sizes
/// differing), B_0 protected, a stale `.mcap.active` and a `.mcap.recovering`
/// in B, and C's open segment C_3.
struct Layout {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    dirs: [PathBuf; 3],
    /// Closed segments in age order: A_0..A_2, B_0..B_2, C_0..C_2.
    segs: Vec<(PathBuf, u64)>,
    active: PathBuf,
    untouchable: Vec<PathBuf>,
}

fn layout() -> Layout {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("recordings");
    fs::create_dir(&root).unwrap();
    let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_780_000_000);
    let dirs = ["A", "B", "C"].map(|s| root.join(format!("rec_20260601T0{s}0000Z")));
    let mut segs = Vec::new();
    for (d, dir) in dirs.iter().enumerate() {
        fs::create_dir(dir).unwrap();
        for i in 0..3u32 {
            let payload = (20 + 12 * ((d as u64 + u64::from(i)) % 3)) * KIB;
            let mtime = base + Duration::from_secs(100 * d as u64 + u64::from(i));
            segs.push(closed_segment(dir, i, payload, mtime));
        }
        edgerec_format::bag::rewrite_metadata(dir).unwrap();
    }
    let protected_marker = PathBuf::from(format!("{}.protected", segs[3].0.display()));
    fs::write(&protected_marker, b"event clip").unwrap();
    let stale_active = dirs[1].join("rec_20260601T0B0000Z_7.mcap.active");
    fs::write(&stale_active, vec![1u8; 30 * KIB as usize]).unwrap();
    let recovering = dirs[1].join("rec_20260601T0B0000Z_8.mcap.recovering");
    fs::write(&recovering, vec![2u8; 30 * KIB as usize]).unwrap();
    let mut open = SegWriter::open(&dirs[2], 3);
    let c = open.chunk(10 * KIB);
    open.write(&c);
    let active = open.active.clone();
    drop(open);
    Layout {
        untouchable: vec![
            segs[3].0.clone(),
            protected_marker,
            stale_active,
            recovering,
            active.clone(),
        ],
        _tmp: tmp,
        root,
        dirs,
        segs,
        active,
    }
}

/// Bytes of every file in every directory under `root`, as retention counts.
fn disk_total(root: &Path) -> u64 {
    let mut n = 0;
    for d in fs::read_dir(root).unwrap().flatten() {
        if d.file_type().unwrap().is_dir() {
            for f in fs::read_dir(d.path()).unwrap().flatten() {
                n += f.metadata().unwrap().len();
            }
        }
    }
    n
}

fn append(path: &Path, n: u64) {
    use std::io::Write;
    let mut f = File::options().append(true).open(path).unwrap();
    f.write_all(&vec![0u8; n as usize]).unwrap();
}

/// Asks for room that deleting exactly `sizes` (in order) provides: the
/// headroom under the cap, plus the sizes, less half the last.
fn upcoming_to_delete(r: &Retention, cap: u64, sizes: &[u64]) -> u64 {
    let headroom = cap as i64 - r.status().recorded_bytes as i64;
    let want: u64 = sizes.iter().sum::<u64>() - sizes.last().copied().unwrap_or(0) / 2;
    (headroom + want as i64).max(0) as u64
}

fn proceed(room: Room) -> Vec<PathBuf> {
    match room {
        Room::Proceed { deleted } => deleted,
        Room::Pause { reason, .. } => panic!("unexpected pause: {reason}"),
    }
}

#[test]
fn deletes_oldest_first_never_active_or_protected_and_keeps_metadata_current() {
    let l = layout();
    let cap = disk_total(&l.root);
    let mut r = Retention::new(&l.root, cap_only(cap));
    let size = |i: usize| l.segs[i].1;
    let path = |i: usize| l.segs[i].0.clone();
    // The first call scans; nothing to do yet.
    assert!(proceed(r.make_room(0, &l.active).unwrap()).is_empty());
    assert_eq!(r.status().recorded_bytes, cap);

    // A_0 and A_1: A's metadata.yaml now lists only A_2.
    let up = upcoming_to_delete(&r, cap, &[size(0), size(1)]);
    let deleted = proceed(r.make_room(up, &l.active).unwrap());
    assert_eq!(deleted, [path(0), path(1)]);
    append(&l.active, up);
    assert!(!path(0).exists() && !path(1).exists() && path(2).exists());
    assert_eq!(names_in_metadata(&l.dirs[0]), [file_name(&path(2))]);

    // A_2: session A has no segment left and disappears.
    let up = upcoming_to_delete(&r, cap, &[size(2)]);
    assert_eq!(proceed(r.make_room(up, &l.active).unwrap()), [path(2)]);
    append(&l.active, up);
    assert!(!l.dirs[0].exists(), "emptied session A was not removed");

    // B_0 is protected: B_1 goes instead; B's metadata keeps B_0 and B_2.
    let up = upcoming_to_delete(&r, cap, &[size(4)]);
    assert_eq!(proceed(r.make_room(up, &l.active).unwrap()), [path(4)]);
    append(&l.active, up);
    assert_eq!(
        names_in_metadata(&l.dirs[1]),
        [file_name(&path(3)), file_name(&path(5))]
    );

    // Everything else deletable: B_2, C_0..C_2. C holds the active segment
    // and stays; its metadata.yaml lists nothing now.
    let up = upcoming_to_delete(&r, cap, &[size(5), size(6), size(7), size(8)]);
    assert_eq!(
        proceed(r.make_room(up, &l.active).unwrap()),
        [path(5), path(6), path(7), path(8)]
    );
    append(&l.active, up);
    assert!(
        l.dirs[2].exists(),
        "the active session's directory was removed"
    );
    // The active session's metadata.yaml has one writer, the session (the
    // pipeline reloads it under the session lock after a deletion), so
    // retention left it alone; the owner's reload lists nothing now.
    assert!(!names_in_metadata(&l.dirs[2]).is_empty());
    edgerec_format::bag::rewrite_metadata(&l.dirs[2]).unwrap();
    assert!(names_in_metadata(&l.dirs[2]).is_empty());
    assert!(l.dirs[1].exists());

    // Only protected, active and recovering files are left: pause, delete
    // nothing; the reason says so and the status shows it.
    let headroom = cap - r.status().recorded_bytes;
    match r.make_room(headroom + 1, &l.active).unwrap() {
        Room::Pause { reason, deleted } => {
            assert!(deleted.is_empty());
            assert!(reason.contains("nothing left to delete"), "{reason}");
            assert!(reason.contains("1 protected"), "{reason}");
        }
        other => panic!("expected a pause, got {other:?}"),
    }
    let st = r.status();
    assert!(st.paused.is_some());
    assert_eq!(st.deleted_segments, 8);
    assert_eq!(
        st.deleted_bytes,
        [0, 1, 2, 4, 5, 6, 7, 8]
            .iter()
            .map(|&i| size(i))
            .sum::<u64>()
    );
    assert_eq!((st.closed_segments, st.protected_segments), (1, 1));
    for p in &l.untouchable {
        assert!(p.exists(), "{} was deleted", p.display());
    }

    // A request that fits resumes.
    assert!(proceed(r.make_room(0, &l.active).unwrap()).is_empty());
    assert!(r.status().paused.is_none());
}

#[test]
fn pauses_without_deleting_when_deleting_all_that_may_go_is_not_enough() {
    let l = layout();
    let cap = disk_total(&l.root);
    let mut r = Retention::new(&l.root, cap_only(cap));
    let deletable: u64 = l
        .segs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3)
        .map(|(_, s)| s.1)
        .sum();
    match r.make_room(deletable + 1, &l.active).unwrap() {
        Room::Pause { reason, deleted } => {
            assert!(deleted.is_empty(), "deleted {deleted:?} for nothing");
            assert!(reason.contains("would not be enough"), "{reason}");
            assert!(reason.contains("cap"), "{reason}");
        }
        other => panic!("expected a pause, got {other:?}"),
    }
    for (p, _) in &l.segs {
        assert!(p.exists(), "{} was deleted", p.display());
    }
    // Exactly enough: everything deletable goes, in order, and it proceeds.
    let deleted = proceed(r.make_room(deletable, &l.active).unwrap());
    let expected: Vec<PathBuf> = l
        .segs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3)
        .map(|(_, s)| s.0.clone())
        .collect();
    assert_eq!(deleted, expected);
}

#[test]
fn order_is_mtime_then_session_and_index_with_this_runs_closes_last() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let t = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(1_780_000_000 + s);
    // Session "z" is named later but written earlier (a clock that was
    // set back): mtime wins. In "a", _2 and _10 share an mtime: numeric
    // index order, not string order. "c" is this run's session.
    let z = root.join("rec_20270101T000000Z");
    let a = root.join("rec_20260101T000000Z");
    let c = root.join("rec_20250101T000000Z");
    for d in [&z, &a, &c] {
        fs::create_dir(d).unwrap();
    }
    let z0 = closed_segment(&z, 0, 8 * KIB, t(0));
    let a10 = closed_segment(&a, 10, 8 * KIB, t(50));
    let a2 = closed_segment(&a, 2, 8 * KIB, t(50));
    let a1 = closed_segment(&a, 1, 8 * KIB, t(10));
    for d in [&z, &a, &c] {
        edgerec_format::bag::rewrite_metadata(d).unwrap();
    }
    let active = c.join("rec_20250101T000000Z_2.mcap.active");
    let mut r = Retention::new(root, cap_only(u64::MAX));
    assert!(proceed(r.make_room(0, &active).unwrap()).is_empty());
    // Closed during this run with the oldest mtime of all: still after
    // every segment of earlier runs.
    let a11 = closed_segment(&a, 11, 8 * KIB, SystemTime::UNIX_EPOCH);
    r.segment_closed(&a11.0, a11.1);
    // Closed by this run in its own session, found on disk before its
    // closer reported it: the newest of all, so the very last (ranking it
    // with earlier runs' files had it deleted first on the QEMU board).
    let c0 = closed_segment(&c, 0, 8 * KIB, SystemTime::UNIX_EPOCH);
    let all = [&z0, &a1, &a2, &a10, &a11, &c0];
    let total: u64 = all.iter().map(|s| s.1).sum();
    let mut r2 = Retention::new(root, cap_only(disk_total(root)));
    r2.segment_closed(&a11.0, a11.1);
    let deleted = proceed(r2.make_room(total - c0.1 / 2, &active).unwrap());
    let expected: Vec<PathBuf> = all.iter().map(|s| s.0.clone()).collect();
    assert_eq!(deleted, expected);
    assert!(!z.exists() && !a.exists() && c.exists());
}

#[test]
fn a_segment_that_cannot_be_deleted_is_skipped_and_named() {
    let l = layout();
    let cap = disk_total(&l.root);
    let mut r = Retention::new(&l.root, cap_only(cap));
    assert!(proceed(r.make_room(0, &l.active).unwrap()).is_empty());
    // After the scan, the oldest segment's name becomes a non-empty
    // directory: unlink fails (EISDIR) even for root.
    let (a0, a0_size) = l.segs[0].clone();
    fs::remove_file(&a0).unwrap();
    fs::create_dir(&a0).unwrap();
    fs::write(a0.join("x"), b"x").unwrap();
    let up = upcoming_to_delete(&r, cap, &[a0_size]);
    let deleted = proceed(r.make_room(up, &l.active).unwrap());
    assert_eq!(deleted, [l.segs[1].0.clone()]);
    let err = r.status().last_error.expect("the failure is in the status");
    assert!(err.contains(&a0.display().to_string()), "{err}");
    assert!(a0.is_dir());
}

#[test]
fn errors_are_typed_and_name_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("not-there");
    let mut r = Retention::new(&missing, cap_only(0));
    match r.make_room(1, &missing.join("x.mcap.active")) {
        Err(e @ RetentionError::Statvfs { .. }) => {
            assert!(e.to_string().contains("not-there"), "{e}")
        }
        other => panic!("expected a statvfs error, got {other:?}"),
    }
    let file = tmp.path().join("a-file");
    fs::write(&file, b"").unwrap();
    let mut r = Retention::new(&file, cap_only(0));
    match r.make_room(1, &file.join("x.mcap.active")) {
        Err(e @ RetentionError::Scan { .. }) => assert!(e.to_string().contains("a-file"), "{e}"),
        other => panic!("expected a scan error, got {other:?}"),
    }
}

#[test]
fn a_call_is_cheap_statvfs_is_sampled_and_the_scan_cached() {
    let l = layout();
    let mut r = Retention::new(&l.root, cap_only(u64::MAX / 2));
    // Calls for 350 ms: about 4 statvfs samples are due, and one scan.
    // 256 bytes each keeps the approved bytes per sample well under the
    // free space of any test machine.
    let mut n = 0u32;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(350) {
        for _ in 0..1000 {
            assert!(matches!(
                r.make_room(256, &l.active),
                Ok(Room::Proceed { .. })
            ));
        }
        n += 1000;
    }
    let el = t0.elapsed();
    let st = r.status();
    let per_call = el / n;
    println!(
        "{n} calls in {el:?} ({per_call:?} each), {} statvfs, {} scans",
        st.fs_samples, st.scans
    );
    assert_eq!(st.scans, 1);
    let max_samples = (el.as_millis() / FS_SAMPLE_EVERY.as_millis()) as u64 + 2;
    assert!(
        (3..=max_samples).contains(&st.fs_samples),
        "{} samples in {el:?}",
        st.fs_samples
    );
    // Under user-mode QEMU every instruction is emulated (a debug build's
    // 5.3 us was seen): the cost bar is for real cores.
    let bar = match edgerec_testkit::qemu_user() {
        Some(_) => Duration::from_micros(50),
        None => Duration::from_micros(5),
    };
    assert!(per_call < bar, "{per_call:?} per call");
    assert_eq!(st.recorded_bytes, disk_total(&l.root) + u64::from(n) * 256);
}

// ---------------------------------------------------------------------------
// A real small file system
// ---------------------------------------------------------------------------

/// A file system mounted at a tempdir; unmounted on drop, also when the
/// test panics.
struct Mounted {
    dir: tempfile::TempDir,
    what: String,
    _image: Option<tempfile::TempDir>,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Busy (a file left open by a failed assertion): detach it
            // lazily so the mount never outlives the test.
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }
}

fn run(cmd: &mut Command) -> Result<(), String> {
    match cmd.output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "{cmd:?}: {}: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Err(format!("{cmd:?}: {e}")),
    }
}

fn mount_tmpfs(size: u64) -> Result<Mounted, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    run(Command::new("mount")
        .args(["-t", "tmpfs", "-o"])
        .arg(format!("size={size},mode=0755"))
        .arg("edgerec-retention-test")
        .arg(dir.path()))?;
    Ok(Mounted {
        dir,
        what: format!("tmpfs of {} MiB", size / MIB),
        _image: None,
    })
}

fn mount_ext4_image(size: u64) -> Result<Mounted, String> {
    let image_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let image = image_dir.path().join("fs.img");
    File::create(&image)
        .and_then(|f| f.set_len(size))
        .map_err(|e| e.to_string())?;
    // 4 KiB blocks like the data partition; other defaults (5% reserved
    // for root, which f_bavail leaves out) as mkfs makes them.
    run(Command::new("mkfs.ext4")
        .args(["-q", "-F", "-b", "4096"])
        .arg(&image))?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    run(Command::new("mount")
        .args(["-t", "ext4", "-o", "loop"])
        .arg(&image)
        .arg(dir.path()))?;
    Ok(Mounted {
        dir,
        what: format!("loop-mounted ext4 image of {} MiB", size / MIB),
        _image: Some(image_dir),
    })
}

const SEGMENT: u64 = 4 * MIB;
const CHUNK: u64 = 256 * KIB;
const SEGMENTS_PER_SESSION: u32 = 5;

/// Records 3x the file system's size through [`SegWriter`], calling
/// `make_room` before every write as the sequencer does, and checks the
/// floor with statvfs after every write.
fn record_three_times_the_file_system(m: &Mounted, nominal: u64) {
    let t0 = Instant::now();
    let root = m.dir.path();
    let fs0 = statvfs(root);
    let policy = RetentionPolicy {
        max_total_bytes: 0,
        min_free_bytes: 6 * MIB,
        // 15% of 64 MiB is above 6 MiB: the percentage decides the floor.
        min_free_percent: 15,
        clip_keep: None,
    };
    let floor = policy.floor(fs0.size);
    assert!(floor > 6 * MIB && floor < fs0.avail / 2, "floor {floor}");
    let mut r = Retention::new(root, policy);

    let mut min_free = u64::MAX;
    let mut checks = 0u64;
    let mut check_floor = |when: &str| {
        let free = statvfs(root).avail;
        assert!(
            free >= floor,
            "{}: free {free} below the floor {floor} after {when}",
            m.what
        );
        min_free = min_free.min(free);
        checks += 1;
    };

    let mut written = 0u64;
    let mut closed: Vec<PathBuf> = Vec::new();
    let mut deleted: Vec<PathBuf> = Vec::new();
    let mut sessions: Vec<PathBuf> = Vec::new();
    let mut protected: Option<PathBuf> = None;
    let room = |r: &mut Retention, n: u64, active: &Path, deleted: &mut Vec<PathBuf>| match r
        .make_room(n, active)
        .unwrap()
    {
        Room::Proceed { deleted: d } => deleted.extend(d),
        Room::Pause { reason, .. } => panic!("{}: unexpected pause: {reason}", m.what),
    };
    // 3x the larger of the image and what statvfs reports usable.
    let target = 3 * nominal.max(fs0.size);
    while written < target {
        let k = closed.len() as u32;
        if k % SEGMENTS_PER_SESSION == 0 {
            let dir = root.join(format!("rec_20260601T120000Z_{}", sessions.len()));
            fs::create_dir(&dir).unwrap();
            sessions.push(dir);
        }
        let dir = sessions.last().unwrap();
        let index = k % SEGMENTS_PER_SESSION;
        let session = file_name(dir);
        let active = dir.join(format!("{session}_{index}.mcap.active"));
        room(&mut r, 4 * KIB, &active, &mut deleted);
        let mut w = SegWriter::open(dir, index);
        check_floor("opening a segment");
        while w.position() < SEGMENT {
            let c = w.chunk(CHUNK);
            room(&mut r, c.total_len(), &active, &mut deleted);
            w.write(&c);
            check_floor("a chunk");
        }
        // The summary; a guess, as the sequencer's would be.
        room(&mut r, 16 * KIB, &active, &mut deleted);
        let (path, bytes) = w.close();
        edgerec_format::bag::rewrite_metadata(dir).unwrap();
        r.segment_closed(&path, bytes);
        check_floor("closing a segment");
        written += bytes;
        if k == 1 {
            // An event clip: marked after its close, as the trigger issue
            // will; retention must see the marker before unlinking.
            fs::write(format!("{}.protected", path.display()), b"event").unwrap();
            protected = Some(path.clone());
        }
        closed.push(path);
    }
    let protected = protected.unwrap();

    // Strictly oldest first: the deleted ones are the oldest closed ones
    // (the protected clip skipped), in order; the newest all survive.
    let unprotected: Vec<&PathBuf> = closed.iter().filter(|p| **p != protected).collect();
    assert_eq!(
        deleted.iter().collect::<Vec<_>>(),
        unprotected[..deleted.len()],
        "{}: not the oldest first",
        m.what
    );
    let survivors: Vec<&PathBuf> = unprotected[deleted.len()..].to_vec();
    for p in &deleted {
        assert!(!p.exists(), "{} still exists", p.display());
    }
    let mut kept = fs::metadata(&protected).unwrap().len();
    for p in &survivors {
        kept += fs::metadata(p).unwrap().len();
    }
    // It deleted only what it had to: what survives fills the file system
    // up to the floor, less about one segment.
    let usable = fs0.avail - floor - SLACK;
    assert!(
        kept + 2 * SEGMENT >= usable,
        "{}: kept {kept} of {usable} usable",
        m.what
    );
    // Sessions: emptied ones are gone; the others list exactly what is
    // left in them.
    for dir in &sessions {
        let left: Vec<String> = closed
            .iter()
            .filter(|p| p.parent() == Some(dir.as_path()) && p.exists())
            .map(|p| file_name(p))
            .collect();
        if left.is_empty() {
            assert!(!dir.exists(), "{} was not removed", dir.display());
        } else {
            assert_eq!(names_in_metadata(dir), left, "{}", dir.display());
        }
    }

    // Protect everything left and keep recording: it pauses before the
    // floor, deleting nothing, and resumes once space returns.
    for p in &survivors {
        fs::write(format!("{}.protected", p.display()), b"keep").unwrap();
    }
    let dir = sessions.last().unwrap().clone();
    let mut w = SegWriter::open(&dir, SEGMENTS_PER_SESSION);
    let active = w.active.clone();
    let reason = loop {
        let c = w.chunk(CHUNK);
        match r.make_room(c.total_len(), &active).unwrap() {
            Room::Proceed { deleted } => {
                assert!(deleted.is_empty(), "deleted protected {deleted:?}");
                w.write(&c);
                check_floor("a chunk before the pause");
            }
            Room::Pause { reason, deleted } => {
                assert!(deleted.is_empty());
                break reason;
            }
        }
    };
    assert!(reason.contains("nothing left to delete"), "{reason}");
    assert!(r.status().paused.is_some());
    // Paused: asking again does not change the answer.
    assert!(!r.make_room(CHUNK, &active).unwrap().is_proceed());
    // The operator removes the protected clip: the next call sees the
    // space (statvfs is sampled before any pause verdict) and proceeds.
    fs::remove_file(&protected).unwrap();
    fs::remove_file(format!("{}.protected", protected.display())).unwrap();
    let c = w.chunk(CHUNK);
    assert!(r.make_room(c.total_len(), &active).unwrap().is_proceed());
    w.write(&c);
    check_floor("a chunk after the pause");
    drop(w);

    let st = r.status();
    println!(
        "{}: fs {} MiB usable, floor {:.1} MiB, wrote {:.0} MiB ({:.1}x the usable size) in {} segments of {} sessions; \
         deleted {} ({:.0} MiB); {} statvfs checks, least free {:.2} MiB above the floor; \
         retention made {} statvfs calls and {} scans; {:?}",
        m.what,
        fs0.size / MIB,
        floor as f64 / MIB as f64,
        written as f64 / MIB as f64,
        written as f64 / fs0.size as f64,
        closed.len(),
        sessions.len(),
        st.deleted_segments,
        st.deleted_bytes as f64 / MIB as f64,
        checks,
        (min_free - floor) as f64 / MIB as f64,
        st.fs_samples,
        st.scans,
        t0.elapsed()
    );
    assert!(written >= target);
    assert_eq!(st.deleted_segments as usize, deleted.len());
}

#[test]
fn tmpfs_recording_of_three_times_its_size_stays_above_the_floor() {
    match mount_tmpfs(64 * MIB) {
        Ok(m) => record_three_times_the_file_system(&m, 64 * MIB),
        Err(why) => edgerec_testkit::skip::skip(format!("cannot mount a tmpfs here: {why}")),
    }
}

#[test]
fn ext4_recording_of_three_times_its_size_stays_above_the_floor() {
    match mount_ext4_image(64 * MIB) {
        Ok(m) => record_three_times_the_file_system(&m, 64 * MIB),
        Err(why) => {
            edgerec_testkit::skip::skip(format!("cannot loop-mount an ext4 image here: {why}"))
        }
    }
}

// ---------------------------------------------------------------------------
// Event clips under <root>/events/, deleted last
// ---------------------------------------------------------------------------

const HOUR: Duration = Duration::from_secs(3600);

/// An event clip bag directory `<root>/events/<name>/`: `metadata.yaml` and
/// one `*.mcap` of `bytes` bytes modified at `mtime`, and, when `active`, a
/// `.mcap.active` still being written. Returns its directory and the bytes
/// of its files.
fn clip(root: &Path, name: &str, bytes: u64, mtime: SystemTime, active: bool) -> (PathBuf, u64) {
    let dir = root.join("events").join(name);
    fs::create_dir_all(&dir).unwrap();
    let meta = b"rosbag2_bagfile_information: {}\n";
    fs::write(dir.join("metadata.yaml"), meta).unwrap();
    let mcap = dir.join(format!("{name}_0.mcap"));
    fs::write(&mcap, vec![7u8; bytes as usize]).unwrap();
    File::options()
        .write(true)
        .open(&mcap)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let mut total = bytes + meta.len() as u64;
    if active {
        fs::write(
            dir.join(format!("{name}_1.mcap.active")),
            vec![8u8; KIB as usize],
        )
        .unwrap();
        total += KIB;
    }
    (dir, total)
}

/// Older than every segment of [`layout`] by mtime (so an order by age
/// alone would take them first) and `age` before now by the wall clock.
fn clip_mtime(age: Duration) -> SystemTime {
    let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_780_000_000);
    base.min(SystemTime::now() - age) - age
}

fn keep(cap: u64, clip_keep: Option<Duration>) -> RetentionPolicy {
    RetentionPolicy {
        clip_keep,
        ..cap_only(cap)
    }
}

fn pause_reason(room: Room) -> String {
    match room {
        Room::Pause { reason, deleted } => {
            assert!(deleted.is_empty(), "deleted {deleted:?} before pausing");
            reason
        }
        other => panic!("expected a pause, got {other:?}"),
    }
}

#[test]
fn clips_count_in_the_total_and_go_oldest_first_only_after_every_deletable_segment() {
    let l = layout();
    let segments_total = disk_total(&l.root);
    let (old, old_bytes) = clip(
        &l.root,
        "hard_brake_20260101T000000Z",
        40 * KIB,
        clip_mtime(3 * HOUR),
        false,
    );
    let (older, older_bytes) = clip(
        &l.root,
        "hard_brake_20251231T000000Z",
        30 * KIB,
        clip_mtime(4 * HOUR),
        false,
    );
    let (young, young_bytes) = clip(
        &l.root,
        "low_battery_20260102T000000Z",
        20 * KIB,
        SystemTime::now(),
        false,
    );
    let clips_bytes = old_bytes + older_bytes + young_bytes;
    let cap = segments_total + clips_bytes;
    let mut r = Retention::new(&l.root, keep(cap, Some(HOUR)));
    assert!(proceed(r.make_room(0, &l.active).unwrap()).is_empty());
    let st = r.status();
    assert_eq!(st.recorded_bytes, cap, "clips are in the recorded total");
    assert_eq!((st.event_clips, st.event_clip_bytes), (3, clips_bytes));

    // Room that every deletable segment and the older old clip give: the
    // segments go first, in their order, then that clip, nothing more.
    let segments: Vec<(PathBuf, u64)> = l
        .segs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3)
        .map(|(_, s)| s.clone())
        .collect();
    let mut sizes: Vec<u64> = segments.iter().map(|s| s.1).collect();
    sizes.push(older_bytes);
    let upcoming = upcoming_to_delete(&r, cap, &sizes);
    let deleted = proceed(r.make_room(upcoming, &l.active).unwrap());
    let mut expected: Vec<PathBuf> = segments.iter().map(|s| s.0.clone()).collect();
    expected.push(older.clone());
    assert_eq!(deleted, expected);
    assert!(!older.exists(), "the clip directory is gone, files and all");
    assert!(old.exists() && young.exists());
    assert_eq!(r.status().deleted_clips, 1);

    // Next the other old clip; the young one is kept and the pause says so.
    let upcoming = upcoming_to_delete(&r, cap, &[old_bytes]);
    assert_eq!(
        proceed(r.make_room(upcoming, &l.active).unwrap()),
        std::slice::from_ref(&old)
    );
    let reason = pause_reason(r.make_room(cap, &l.active).unwrap());
    assert!(
        reason.contains("only event clips kept by triggers.keep remain (1 clips, 20.0 KiB; "),
        "{reason}"
    );
    assert!(young.exists(), "{reason}");
    for p in &l.untouchable {
        assert!(p.exists(), "{} was deleted", p.display());
    }
}

#[test]
fn clips_younger_than_keep_are_never_deleted_and_the_pause_names_them() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("recordings");
    fs::create_dir(&root).unwrap();
    let (a, a_bytes) = clip(
        &root,
        "hard_brake_20260101T000000Z",
        64 * KIB,
        SystemTime::now() - 10 * Duration::from_secs(60),
        false,
    );
    let (b, b_bytes) = clip(
        &root,
        "hard_brake_20260101T000000Z_2",
        32 * KIB,
        SystemTime::now(),
        false,
    );
    let active = root.join("rec_20260601T000000Z/rec_20260601T000000Z_0.mcap.active");
    let cap = a_bytes + b_bytes;
    for clip_keep in [Some(HOUR), None] {
        let mut r = Retention::new(&root, keep(cap, clip_keep));
        let reason = pause_reason(r.make_room(KIB, &active).unwrap());
        assert!(
            reason.contains("only event clips kept by triggers.keep remain (2 clips, "),
            "{reason}"
        );
        assert!(a.exists() && b.exists(), "{clip_keep:?}: {reason}");
        assert_eq!(r.status().paused.as_deref(), Some(reason.as_str()));
    }
    // Once the keep has passed for the older clip, it goes, and only it.
    let mut r = Retention::new(&root, keep(cap, Some(Duration::from_secs(60))));
    assert_eq!(
        proceed(r.make_room(KIB, &active).unwrap()),
        std::slice::from_ref(&a)
    );
    assert!(!a.exists() && b.exists());
}

#[test]
fn an_active_clip_is_never_deleted() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("recordings");
    fs::create_dir(&root).unwrap();
    let (writing, w_bytes) = clip(
        &root,
        "hard_brake_20250101T000000Z",
        64 * KIB,
        clip_mtime(5 * HOUR),
        true,
    );
    let (done, d_bytes) = clip(
        &root,
        "hard_brake_20250102T000000Z",
        32 * KIB,
        clip_mtime(4 * HOUR),
        false,
    );
    let active = root.join("rec_20260601T000000Z/rec_20260601T000000Z_0.mcap.active");
    let cap = w_bytes + d_bytes;
    let mut r = Retention::new(&root, keep(cap, Some(HOUR)));
    assert!(proceed(r.make_room(0, &active).unwrap()).is_empty());
    assert_eq!(r.status().recorded_bytes, cap, "{:?}", r.status());
    // More than the closed clip frees: nothing is deleted for nothing.
    let reason = pause_reason(r.make_room(d_bytes + KIB, &active).unwrap());
    assert!(reason.contains("would not be enough"), "{reason}");
    assert!(writing.exists() && done.exists());
    // What the closed clip frees: it goes, the older active one stays.
    assert_eq!(
        proceed(r.make_room(d_bytes / 2, &active).unwrap()),
        std::slice::from_ref(&done)
    );
    assert!(writing.exists() && !done.exists());
    let reason = pause_reason(r.make_room(cap, &active).unwrap());
    assert!(
        reason.contains("only event clips kept by triggers.keep remain (1 clips, "),
        "{reason}"
    );
}

// ---------------------------------------------------------------------------
// With offload: what is at the store goes first
// ---------------------------------------------------------------------------

/// Retention told that `sent` (paths) are at the store.
fn with_sent(
    r: Retention,
    sent: &std::sync::Arc<std::sync::Mutex<Vec<PathBuf>>>,
    delete_after_upload: bool,
    keep_unsent_clips: bool,
) -> Retention {
    let sent = sent.clone();
    r.with_offload(OffloadAware {
        uploaded: std::sync::Arc::new(move |p: &Path| sent.lock().unwrap().iter().any(|s| s == p)),
        delete_after_upload,
        keep_unsent_clips,
    })
}

#[test]
fn segments_at_the_store_go_first_and_each_unsent_deletion_is_counted() {
    let l = layout();
    let cap = disk_total(&l.root);
    // B_2 and C_0 are at the store; A_0..A_2 (older) are not.
    let sent = std::sync::Arc::new(std::sync::Mutex::new(vec![
        l.segs[5].0.clone(),
        l.segs[6].0.clone(),
    ]));
    let mut r = with_sent(Retention::new(&l.root, cap_only(cap)), &sent, false, true);
    assert!(proceed(r.make_room(0, &l.active).unwrap()).is_empty());
    let up = upcoming_to_delete(&r, cap, &[l.segs[5].1, l.segs[6].1]);
    let deleted = proceed(r.make_room(up, &l.active).unwrap());
    assert_eq!(deleted, [l.segs[5].0.clone(), l.segs[6].0.clone()]);
    append(&l.active, up);
    let st = r.status();
    assert_eq!((st.deleted_sent, st.deleted_unsent), (2, 0));
    // Then the oldest of those not sent, counted as lost to the store.
    let up = upcoming_to_delete(&r, cap, &[l.segs[0].1]);
    let deleted = proceed(r.make_room(up, &l.active).unwrap());
    assert_eq!(deleted, [l.segs[0].0.clone()]);
    let st = r.status();
    assert_eq!((st.deleted_sent, st.deleted_unsent), (2, 1));
}

#[test]
fn delete_after_upload_frees_what_is_at_the_store_without_pressure() {
    let l = layout();
    let cap = disk_total(&l.root) * 10;
    let sent = std::sync::Arc::new(std::sync::Mutex::new(vec![]));
    let mut r = with_sent(Retention::new(&l.root, cap_only(cap)), &sent, true, true);
    assert!(proceed(r.make_room(0, &l.active).unwrap()).is_empty());
    // A_1 reaches the store, and so does B_0 (protected: kept) and the
    // active segment's session (not a segment: nothing).
    sent.lock()
        .unwrap()
        .extend([l.segs[1].0.clone(), l.segs[3].0.clone(), l.active.clone()]);
    std::thread::sleep(FREE_SENT_EVERY);
    let deleted = proceed(r.make_room(0, &l.active).unwrap());
    assert_eq!(deleted, [l.segs[1].0.clone()]);
    assert!(l.segs[3].0.exists() && l.active.exists());
    assert_eq!(
        names_in_metadata(&l.dirs[0]),
        [file_name(&l.segs[0].0), file_name(&l.segs[2].0)]
    );
    assert_eq!(r.status().deleted_sent, 1);
    // A clip at the store goes too, an unfinished one never.
    let (done, _) = clip(
        &l.root,
        "brake_20260101T000000Z",
        KIB,
        SystemTime::now(),
        false,
    );
    let (open, _) = clip(
        &l.root,
        "brake_20260102T000000Z",
        KIB,
        SystemTime::now(),
        true,
    );
    sent.lock().unwrap().extend([done.clone(), open.clone()]);
    // Seen at the next scan (the cap makes one every RESCAN_EVERY).
    std::thread::sleep(RESCAN_EVERY.max(FREE_SENT_EVERY));
    let deleted = proceed(r.make_room(0, &l.active).unwrap());
    assert_eq!(deleted, std::slice::from_ref(&done));
    assert!(!done.exists() && open.exists());
}

#[test]
fn a_clip_not_at_the_store_is_kept_and_the_pause_says_why() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("recordings");
    fs::create_dir(&root).unwrap();
    let (a, a_bytes) = clip(
        &root,
        "brake_20250101T000000Z",
        64 * KIB,
        clip_mtime(5 * HOUR),
        false,
    );
    let (b, b_bytes) = clip(
        &root,
        "brake_20250102T000000Z",
        32 * KIB,
        clip_mtime(4 * HOUR),
        false,
    );
    let active = root.join("rec_20260601T000000Z/rec_20260601T000000Z_0.mcap.active");
    let cap = a_bytes + b_bytes;
    let sent = std::sync::Arc::new(std::sync::Mutex::new(vec![b.clone()]));
    let mut r = with_sent(
        Retention::new(&root, keep(cap, Some(HOUR))),
        &sent,
        false,
        true,
    );
    // Only b may go (a is older but not at the store).
    assert_eq!(
        proceed(r.make_room(KIB, &active).unwrap()),
        std::slice::from_ref(&b)
    );
    let reason = pause_reason(r.make_room(cap, &active).unwrap());
    assert!(
        reason.contains(
            "kept by triggers.keep or offload.keep_unsent_clips (1 not at the store yet)"
        ),
        "{reason}"
    );
    assert!(a.exists());
    // Allowed: it goes, and is counted as never sent.
    let mut r = with_sent(
        Retention::new(&root, keep(cap, Some(HOUR))),
        &sent,
        false,
        false,
    );
    assert_eq!(
        proceed(r.make_room(cap - b_bytes, &active).unwrap()),
        std::slice::from_ref(&a)
    );
    assert_eq!(r.status().deleted_unsent, 1);
}

#[test]
fn links_planted_in_the_root_are_never_counted_or_deleted_through() {
    use std::os::unix::fs::symlink;
    let l = layout();
    let cap = disk_total(&l.root);
    let outside = tempfile::tempdir().unwrap();
    let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    // A session elsewhere, older than all of ours, linked in as a session.
    let elsewhere = outside.path().join("rec_20010101T000000Z");
    fs::create_dir(&elsewhere).unwrap();
    let (far_segment, _) = closed_segment(&elsewhere, 0, 20 * KIB, old);
    edgerec_format::bag::rewrite_metadata(&elsewhere).unwrap();
    symlink(&elsewhere, l.root.join("rec_20010101T000000Z")).unwrap();
    // events/ a link to a directory elsewhere holding an old clip.
    let (far_clip, _) = clip(outside.path(), "ctl_20010101T000000Z", 10 * KIB, old, false);
    symlink(outside.path().join("events"), l.root.join("events")).unwrap();
    // A "segment" of session A that is a link to a file elsewhere.
    let far_file = outside.path().join("file.mcap");
    fs::write(&far_file, vec![0u8; 4096]).unwrap();
    symlink(&far_file, l.dirs[0].join("rec_20260601T0A0000Z_9.mcap")).unwrap();

    let mut r = Retention::new(&l.root, cap_only(cap));
    assert!(proceed(r.make_room(0, &l.active).unwrap()).is_empty());
    // The links count for nothing.
    assert_eq!(r.status().recorded_bytes, cap);
    // Room for one segment: the oldest of ours goes, not the older one
    // behind the link.
    let up = upcoming_to_delete(&r, cap, &[l.segs[0].1]);
    assert_eq!(
        proceed(r.make_room(up, &l.active).unwrap()),
        [l.segs[0].0.clone()]
    );
    assert!(far_segment.exists() && far_file.exists());
    assert!(far_clip.join("metadata.yaml").exists());
    assert!(elsewhere.join("metadata.yaml").exists());
    assert_eq!(fs::read(&far_file).unwrap(), vec![0u8; 4096]);
}
