//! Recovery of segments a crash or power cut left unfinished.
//!
//! [`recover_file`] reads an `.mcap.active` segment (or any MCAP file
//! without a valid summary) once from the start with bounded memory (the
//! largest record), keeps the Header, Schema, Channel and Metadata records
//! and every complete Chunk whose decompression and CRC pass, rebuilds the
//! message indexes from the chunks' own content, and writes a closed file
//! (chunk indexes, statistics, summary, summary offsets, CRCs, footer)
//! through [`McapWriter`]. It stops at the first truncated or corrupt
//! record. The result goes to `<x>.mcap.recovering` and is published as
//! `<x>.mcap` by [`bag::publish`] (mode 0444, fsync, rename, directory
//! fsync); only then is the original removed. The original is never
//! written, so running recovery again after it was itself interrupted, at
//! any point, ends in the same result: the `.active` file is the source of
//! truth until it is gone, and a stale `.recovering` file is discarded.
//!
//! What counts as the unsynced tail rather than corruption: the file ending
//! inside a record, a zero record prefix (the preallocated region past the
//! last write reads as zeros), and a record that fails its checks because
//! its end is zeros that run on past it, or because it holds a whole
//! 4 KiB-aligned block of zeros (a write that never landed; the storage
//! writer writes whole aligned blocks, up to `queue_depth` of them at
//! once, so a later one can land before an earlier one). A record that
//! fails any other way is corrupt. What this cannot tell apart:
//! a corrupt record whose own last bytes are zeros directly before the
//! zero tail, or one that really holds 4 KiB of aligned zeros (an
//! uncompressed all-black image); those count as tail.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::bag;
use crate::chunk::{ChunkBuilder, ChunkCompressor, Compression, SealedChunk};
use crate::nofollow;
use crate::reader::{self, ReadOutcome, RecordReader};
use crate::records::{self, op, MAGIC, RECORD_PREFIX};
use crate::writer::McapWriter;
use crate::FormatError;

/// Name of the Metadata record a recovered file carries. Keys:
/// `original_bytes`, `kept_bytes`, `corrupt_skipped` (`true`/`false`),
/// `recovered_at_ns`.
pub const RECOVERED_METADATA: &str = "edgerec.recovered";

/// Suffix of the temporary file a recovery writes before renaming it.
pub const RECOVERING_SUFFIX: &str = ".recovering";

/// The largest record accepted (`mcap.chunk_size` is at most 256 MiB; a
/// length beyond this is damage, and must not make recovery allocate it).
/// Decompressed chunks have theirs: [`reader::MAX_CHUNK_UNCOMPRESSED`].
const MAX_RECORD_LEN: u64 = 1 << 30;

/// Write granularity of the storage writer's `O_DIRECT` blocks (its
/// alignment is at least 4 KiB): a write that did not land leaves a hole of
/// this size or more.
const TORN_BLOCK: u64 = 4096;

/// Chunks built from stand-alone Message records are closed at this size.
const LOOSE_CHUNK: usize = 4 << 20;

/// How a recovery ended; decides the exit code (those of `mcap recover`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything before the unsynced tail was kept. Exit 0.
    Clean,
    /// A corrupt record was found: it and everything after it were
    /// skipped. Exit 3.
    CorruptSkipped,
    /// No complete header: nothing could be recovered; the file was left
    /// as it is. Exit 1.
    NothingRecoverable,
    /// The file is a valid closed MCAP file already; nothing was done.
    /// Exit 0.
    AlreadyClosed,
}

impl Outcome {
    /// 0, 3 or 1, as `mcap recover` exits.
    pub fn exit_code(self) -> u8 {
        match self {
            Outcome::Clean | Outcome::AlreadyClosed => 0,
            Outcome::CorruptSkipped => 3,
            Outcome::NothingRecoverable => 1,
        }
    }
    /// How bad it is, for the worst over several files: nothing
    /// recoverable, then corrupt, then clean.
    pub fn severity(self) -> u8 {
        match self {
            Outcome::Clean | Outcome::AlreadyClosed => 0,
            Outcome::CorruptSkipped => 1,
            Outcome::NothingRecoverable => 2,
        }
    }
}

/// Messages that were in the record where reading stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dropped {
    /// The record where reading stopped held no messages (zeros, the end
    /// of the file, or a non-chunk record).
    Nothing,
    /// Messages per topic found in the chunk where reading stopped.
    /// `complete` is false when only part of it could be decoded (the
    /// counts are then a lower bound).
    Counted {
        /// Topic to messages.
        per_topic: BTreeMap<String, u64>,
        /// Whether the whole chunk decoded.
        complete: bool,
    },
    /// The chunk where reading stopped could not be decoded at all.
    Unknown,
}

/// Where and why reading stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopPoint {
    /// File offset of the first record not kept.
    pub offset: u64,
    /// Why.
    pub reason: String,
}

/// What a recovery kept and dropped.
#[derive(Debug, Clone)]
pub struct RecoveryReport {
    /// The file that was recovered.
    pub source: PathBuf,
    /// The closed file written (None when nothing was recoverable).
    pub output: Option<PathBuf>,
    /// How it ended.
    pub outcome: Outcome,
    /// Messages kept per topic.
    pub kept_messages: BTreeMap<String, u64>,
    /// Chunks kept.
    pub chunks_kept: u64,
    /// Size of the original.
    pub original_bytes: u64,
    /// Bytes of the original that were read and used (up to the stop
    /// point).
    pub kept_bytes: u64,
    /// `original_bytes - kept_bytes`: the unsynced tail, preallocated
    /// zeros, and with a corrupt record everything from it on.
    pub bytes_discarded: u64,
    /// Where and why reading stopped (None when the data section ended
    /// properly with its DataEnd record, or for [`Outcome::AlreadyClosed`]).
    pub stopped_at: Option<StopPoint>,
    /// What the record where reading stopped held.
    pub dropped: Dropped,
}

impl RecoveryReport {
    /// 0, 3 or 1 (see [`Outcome::exit_code`]).
    pub fn exit_code(&self) -> u8 {
        self.outcome.exit_code()
    }
    /// True when a corrupt record was skipped.
    pub fn corrupt_skipped(&self) -> bool {
        self.outcome == Outcome::CorruptSkipped
    }
    /// Messages kept over all topics.
    pub fn messages_kept(&self) -> u64 {
        self.kept_messages.values().sum()
    }
}

impl fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let src = self.source.display();
        match self.outcome {
            Outcome::AlreadyClosed => {
                return write!(f, "{src}: a valid closed MCAP file already, nothing to do")
            }
            Outcome::NothingRecoverable => {
                write!(f, "{src}: NOTHING RECOVERABLE, left as it is")?;
                if let Some(s) = &self.stopped_at {
                    write!(f, " ({})", s.reason)?;
                }
                return Ok(());
            }
            Outcome::Clean | Outcome::CorruptSkipped => {}
        }
        let out = self
            .output
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        writeln!(f, "{src} -> {out}")?;
        write!(
            f,
            "  kept:      {} messages in {} chunks",
            self.messages_kept(),
            self.chunks_kept
        )?;
        let topics: Vec<String> = self
            .kept_messages
            .iter()
            .map(|(t, n)| format!("{t} {n}"))
            .collect();
        if !topics.is_empty() {
            write!(f, " ({})", topics.join(", "))?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "  bytes:     {} of {} used, {} discarded",
            self.kept_bytes, self.original_bytes, self.bytes_discarded
        )?;
        match &self.stopped_at {
            Some(s) => writeln!(f, "  stopped:   at byte {}: {}", s.offset, s.reason)?,
            None => writeln!(f, "  stopped:   at the end of the data section")?,
        }
        let dropped = match &self.dropped {
            Dropped::Nothing => "no messages in the record where reading stopped".to_string(),
            Dropped::Unknown => "unknown (the chunk where reading stopped does not decode)".into(),
            Dropped::Counted {
                per_topic,
                complete,
            } => {
                let v: Vec<String> = per_topic.iter().map(|(t, n)| format!("{t} {n}")).collect();
                format!(
                    "{}{} in the chunk where reading stopped",
                    if *complete { "" } else { "at least " },
                    v.join(", ")
                )
            }
        };
        writeln!(f, "  dropped:   {dropped}")?;
        write!(
            f,
            "  result:    {}",
            if self.corrupt_skipped() {
                "a CORRUPT record was skipped, with everything after it (exit 3)"
            } else {
                "nothing lost beyond the unsynced tail (exit 0)"
            }
        )
    }
}

/// The closed file a recovery of `path` writes: `path` without its
/// `.active` suffix (or `path` itself, replaced atomically).
pub fn output_path(path: &Path) -> PathBuf {
    match path.to_str().and_then(|s| s.strip_suffix(".active")) {
        Some(s) => PathBuf::from(s),
        None => path.to_path_buf(),
    }
}

/// The temporary file a recovery writes `output` to before the rename.
pub fn temp_path(output: &Path) -> PathBuf {
    let mut s = output.as_os_str().to_os_string();
    s.push(RECOVERING_SUFFIX);
    PathBuf::from(s)
}

/// A bag directory holds `metadata.yaml`, or segments named after it
/// (`<dir>_<n>.mcap`).
fn is_bag_dir(dir: &Path, file: &Path) -> bool {
    if dir.join("metadata.yaml").exists() {
        return true;
    }
    let dir_name = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
    let file_name = file.file_name().map(|n| n.to_string_lossy().into_owned());
    match (dir_name, file_name) {
        (Some(d), Some(f)) => f.starts_with(&format!("{d}_")),
        _ => false,
    }
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Recovers one file: an `<x>.mcap.active` segment becomes `<x>.mcap`;
/// any other MCAP file lacking a valid summary is replaced by its
/// recovered form (a valid one is left alone). When the file sits in a bag
/// directory, its `metadata.yaml` is rewritten before the original is
/// removed. See the module documentation for what is kept and the order of
/// the steps.
pub fn recover_file(path: &Path) -> Result<RecoveryReport, FormatError> {
    if path
        .to_str()
        .is_some_and(|s| s.ends_with(RECOVERING_SUFFIX))
    {
        return Err(FormatError::Inconsistent(format!(
            "{}: a temporary file of an interrupted recovery; recover its .active file instead",
            path.display()
        )));
    }
    let out = output_path(path);
    let replaces_itself = out == path;
    // A link in place of a segment is refused: recovering it would copy
    // whatever it points at into the bag, and remove the link.
    let original_bytes = nofollow::open_read(path)?.metadata()?.len();
    if replaces_itself && reader::check_file(path).is_ok() {
        return Ok(RecoveryReport {
            source: path.to_path_buf(),
            output: Some(out),
            outcome: Outcome::AlreadyClosed,
            kept_messages: BTreeMap::new(),
            chunks_kept: 0,
            original_bytes,
            kept_bytes: original_bytes,
            bytes_discarded: 0,
            stopped_at: None,
            dropped: Dropped::Nothing,
        });
    }
    let dir = bag::parent_dir(path);
    let tmp = temp_path(&out);
    // A stale temporary file from an interrupted run is discarded: the
    // original is still the source of truth. (Removed rather than
    // truncated: it may be 0444 already.)
    match fs::remove_file(&tmp) {
        Ok(()) => tracing::info!("{}: discarded a stale {}", path.display(), tmp.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    let make_sink = || -> std::io::Result<BufWriter<File>> {
        let f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        Ok(BufWriter::with_capacity(1 << 20, f))
    };
    let scan = match rebuild(path, original_bytes, make_sink) {
        Ok(s) => s,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    };
    let mut report = RecoveryReport {
        source: path.to_path_buf(),
        output: None,
        outcome: scan.outcome,
        kept_messages: scan.kept_messages,
        chunks_kept: scan.chunks_kept,
        original_bytes,
        kept_bytes: scan.kept_bytes,
        bytes_discarded: original_bytes.saturating_sub(scan.kept_bytes),
        stopped_at: scan.stopped_at,
        dropped: scan.dropped,
    };
    let Some(sink) = scan.sink else {
        return Ok(report);
    };
    // Flushed and closed here; publish reopens it by name.
    let published = match sink.into_inner() {
        Ok(file) => {
            drop(file);
            bag::publish(&tmp, &out).map_err(FormatError::from)
        }
        Err(e) => Err(e.into_error().into()),
    };
    if let Err(e) = published {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    report.output = Some(out.clone());
    if is_bag_dir(&dir, &out) {
        // Before the original goes: if this is interrupted, the next run
        // finds the .active file and writes both again.
        bag::rewrite_metadata(&dir)?;
    }
    if !replaces_itself {
        fs::remove_file(path)?;
        bag::sync_dir(&dir)?;
    }
    Ok(report)
}

/// Recovers every `.mcap.active` segment of a bag directory (in segment
/// order), then rewrites its `metadata.yaml` atomically from the summaries
/// of all closed segments there (keeping the rosbag2 version the existing
/// file names, else Humble). A directory without any closed segment keeps
/// its `metadata.yaml` as it is.
pub fn recover_dir(dir: &Path) -> Result<Vec<RecoveryReport>, FormatError> {
    nofollow::ensure_real_dir(dir)?;
    let mut reports = Vec::new();
    let files = bag::segment_files(dir)?;
    for p in &files {
        if p.extension().is_some_and(|e| e == "active") {
            reports.push(recover_file(p)?);
        }
    }
    for e in fs::read_dir(dir)? {
        let p = e?.path();
        let Some(name) = p.to_str() else { continue };
        if let Some(base) = name.strip_suffix(RECOVERING_SUFFIX) {
            // Its .active file is gone, so it is no temporary of a
            // recovery in progress: whose data it is, is unknown; keep it.
            tracing::warn!(
                "{}: left by an interrupted recovery whose {base}.active is gone; left as it is",
                p.display()
            );
        }
    }
    let closed = bag::segment_files(dir)?
        .iter()
        .any(|p| p.extension().is_some_and(|e| e == "mcap"));
    if closed {
        bag::rewrite_metadata(dir)?;
    }
    Ok(reports)
}

/// The session directories directly under `root` that hold an
/// `.mcap.active` segment (none when `root` does not exist).
pub fn dirs_with_active_segments(root: &Path) -> Result<Vec<PathBuf>, FormatError> {
    let rd = match fs::read_dir(root) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut dirs = Vec::new();
    for e in rd {
        let e = e?;
        let p = e.path();
        // file_type() does not follow links: a link to a directory
        // elsewhere is no session of ours, and recovering it would write
        // (and delete) there.
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_symlink() {
            tracing::warn!(
                "{}: a symbolic link, not a session; left alone",
                p.display()
            );
            continue;
        }
        if !kind.is_dir() {
            continue;
        }
        let has_active = fs::read_dir(&p)?
            .filter_map(|e| e.ok())
            .any(|e| e.file_name().to_string_lossy().ends_with(".mcap.active"));
        if has_active {
            dirs.push(p);
        }
    }
    dirs.sort();
    Ok(dirs)
}

/// The recovery of one session directory by [`recover_root`].
#[derive(Debug)]
pub struct DirRecovery {
    /// The session directory.
    pub dir: PathBuf,
    /// Its reports, or why its recovery failed.
    pub result: Result<Vec<RecoveryReport>, FormatError>,
}

/// Recovers every session directory under `root` that holds an `.active`
/// segment ([`dirs_with_active_segments`], then [`recover_dir`] on each);
/// what `edgerec run` does before recording. A failure in one directory
/// is returned with it and does not stop the others.
pub fn recover_root(root: &Path) -> Result<Vec<DirRecovery>, FormatError> {
    Ok(dirs_with_active_segments(root)?
        .into_iter()
        .map(|dir| {
            let result = recover_dir(&dir);
            DirRecovery { dir, result }
        })
        .collect())
}

// ------------------------------------------------------------------ scan

struct Scan<W: Write> {
    sink: Option<W>,
    outcome: Outcome,
    kept_messages: BTreeMap<String, u64>,
    chunks_kept: u64,
    kept_bytes: u64,
    stopped_at: Option<StopPoint>,
    dropped: Dropped,
}

/// What is at the reader's position.
enum Next {
    Record(reader::OwnedRecord),
    /// Clean end of the file at a record boundary.
    End,
    /// A zero record prefix: the preallocated, never written region.
    ZeroTail,
    /// The file ends inside the record; `available` bytes are there.
    Truncated {
        available: u64,
    },
    /// A length no record of ours can have.
    TooLong {
        len: u64,
    },
}

struct Source<R: Read> {
    rr: RecordReader<R>,
    /// A second handle for positional peeks (zeros, cut chunks).
    peek: File,
    len: u64,
}

impl<R: Read> Source<R> {
    fn next(&mut self) -> Result<Next, FormatError> {
        let pos = self.rr.position();
        if pos >= self.len {
            return Ok(Next::End);
        }
        let mut prefix = [0u8; RECORD_PREFIX];
        let n = read_at_most(&self.peek, pos, &mut prefix)?;
        if prefix[..n].iter().all(|&b| b == 0) {
            return Ok(Next::ZeroTail);
        }
        if n < RECORD_PREFIX {
            return Ok(Next::Truncated {
                available: n as u64,
            });
        }
        let len = u64::from_le_bytes(prefix[1..].try_into().unwrap_or([0xff; 8]));
        let avail = self.len - pos - RECORD_PREFIX as u64;
        if len > avail {
            return Ok(Next::Truncated {
                available: self.len - pos,
            });
        }
        if len > MAX_RECORD_LEN {
            return Ok(Next::TooLong { len });
        }
        Ok(match self.rr.next_record(len)? {
            ReadOutcome::Record(r) => Next::Record(r),
            ReadOutcome::End => Next::End,
            ReadOutcome::Truncated { available, .. } => Next::Truncated { available },
        })
    }

    /// True when zeros say the record at `start` (whose body is `body`)
    /// was never completely written: see the module documentation.
    fn torn(&self, start: u64, body: &[u8]) -> Result<bool, FormatError> {
        let body_at = start + RECORD_PREFIX as u64;
        let end = body_at + body.len() as u64;
        // A whole aligned block of zeros inside: a write that did not land.
        let mut blk = body_at.div_ceil(TORN_BLOCK) * TORN_BLOCK;
        while blk + TORN_BLOCK <= end {
            let a = (blk - body_at) as usize;
            if body[a..a + TORN_BLOCK as usize].iter().all(|&b| b == 0) {
                return Ok(true);
            }
            blk += TORN_BLOCK;
        }
        // Zeros at its end that run on past it to the next block boundary
        // (or to the end of the file). Without a body, the record ends
        // with its length's high byte, zero for any length we accept.
        if body.last().is_some_and(|&b| b != 0) {
            return Ok(false);
        }
        let boundary = ((end / TORN_BLOCK) + 1) * TORN_BLOCK;
        let upto = boundary.min(self.len);
        let mut after = vec![0u8; (upto - end) as usize];
        let n = read_at_most(&self.peek, end, &mut after)?;
        Ok(after[..n].iter().all(|&b| b == 0))
    }
}

/// A positional read: `pread` on Unix; elsewhere a seek and read on the
/// peek handle, which nothing else reads from.
fn read_at(f: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_at(f, buf, offset)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_read(f, buf, offset)
    }
}

fn read_at_most(f: &File, mut offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match read_at(f, &mut buf[got..], offset) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// A chunk that passed every check.
struct GoodChunk {
    start: u64,
    end: u64,
    uncompressed_size: u64,
    uncompressed_crc: u32,
    compression: Compression,
    /// Where the records field lies in the record body: a chunk may carry
    /// bytes after it (fields a later spec version appends), which the
    /// rewritten chunk leaves out.
    records: std::ops::Range<usize>,
    index: Vec<(u16, Vec<(u64, u64)>)>,
    schemas: Vec<records::Schema>,
    channels: Vec<records::Channel>,
}

impl GoodChunk {
    /// The chunk to append, its records moved out of the record `body`.
    fn seal(self, mut body: Vec<u8>) -> SealedChunk {
        body.truncate(self.records.end);
        body.drain(..self.records.start);
        SealedChunk::from_parts(
            self.start,
            self.end,
            self.uncompressed_size,
            self.uncompressed_crc,
            self.compression,
            body,
            self.index,
        )
    }
}

/// Decompresses and verifies a Chunk record body, rebuilding its message
/// indexes. `known` says whether a channel id was defined before it.
fn verify_chunk(
    body: &[u8],
    offset: u64,
    known: &dyn Fn(u16) -> bool,
) -> Result<GoodChunk, String> {
    let c = records::parse_chunk(body).map_err(|e| e.to_string())?;
    let compression = Compression::from_mcap_name(c.compression)
        .ok_or_else(|| format!("unknown chunk compression `{}`", c.compression))?;
    // Refuses a size past reader::MAX_CHUNK_UNCOMPRESSED before allocating.
    let raw = reader::decompress_chunk(&c, offset).map_err(|e| e.to_string())?;
    let mut index: BTreeMap<u16, Vec<(u64, u64)>> = BTreeMap::new();
    let mut schemas = Vec::new();
    let mut channels: Vec<records::Channel> = Vec::new();
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for inner in records::RecordIter::new(&raw, 0) {
        let inner = inner.map_err(|t| format!("record inside the chunk is cut at {}", t.offset))?;
        match inner.opcode {
            op::MESSAGE => {
                let m = records::parse_message(inner.body).map_err(|e| e.to_string())?;
                if !known(m.channel_id) && !channels.iter().any(|c| c.id == m.channel_id) {
                    return Err(format!("message on unknown channel {}", m.channel_id));
                }
                index
                    .entry(m.channel_id)
                    .or_default()
                    .push((m.log_time, inner.offset));
                lo = lo.min(m.log_time);
                hi = hi.max(m.log_time);
            }
            op::SCHEMA => {
                schemas.push(records::parse_schema(inner.body).map_err(|e| e.to_string())?)
            }
            op::CHANNEL => {
                channels.push(records::parse_channel(inner.body).map_err(|e| e.to_string())?)
            }
            other => return Err(format!("record 0x{other:02x} inside a chunk")),
        }
    }
    if !index.is_empty() && (lo != c.message_start_time || hi != c.message_end_time) {
        return Err(format!(
            "chunk time range {}..{} does not match its messages {lo}..{hi}",
            c.message_start_time, c.message_end_time
        ));
    }
    Ok(GoodChunk {
        start: c.message_start_time,
        end: c.message_end_time,
        uncompressed_size: c.uncompressed_size,
        uncompressed_crc: c.uncompressed_crc,
        compression,
        // Where parse_chunk found the records field (a sub-slice of body).
        records: {
            let at = c.records.as_ptr() as usize - body.as_ptr() as usize;
            at..at + c.records.len()
        },
        index: index.into_iter().collect(),
        schemas,
        channels,
    })
}

/// Messages per channel in a chunk that failed, decoding what can be
/// decoded: (counts, whether the whole chunk decoded).
fn lenient_counts(body: &[u8]) -> Option<(BTreeMap<u16, u64>, bool)> {
    let mut c = records::Cursor::new(body);
    c.u64("start").ok()?;
    c.u64("end").ok()?;
    let size = c
        .u64("uncompressed_size")
        .ok()?
        .min(reader::MAX_CHUNK_UNCOMPRESSED);
    c.u32("crc").ok()?;
    let compression = c.str("compression").ok()?;
    let records_len = c.u64("records_len").ok()?;
    let rest = c.rest();
    let whole = (rest.len() as u64) >= records_len;
    let recs = &rest[..rest
        .len()
        .min(usize::try_from(records_len).unwrap_or(usize::MAX))];
    let mut out = Vec::new();
    let (raw, decoded) = match compression {
        "" => (recs, true),
        "lz4" => {
            let ok = lz4_flex::frame::FrameDecoder::new(recs)
                .take(size)
                .read_to_end(&mut out)
                .is_ok();
            (&out[..], ok)
        }
        "zstd" => {
            let ok = match zstd::stream::read::Decoder::new(recs) {
                Ok(d) => d.take(size).read_to_end(&mut out).is_ok(),
                Err(_) => false,
            };
            (&out[..], ok)
        }
        _ => return None,
    };
    let mut counts = BTreeMap::new();
    let mut clean = true;
    for r in records::RecordIter::new(raw, 0) {
        match r {
            Ok(r) if r.opcode == op::MESSAGE => match records::parse_message(r.body) {
                Ok(m) => *counts.entry(m.channel_id).or_insert(0) += 1,
                Err(_) => {
                    clean = false;
                    break;
                }
            },
            Ok(_) => {}
            Err(_) => {
                clean = false;
                break;
            }
        }
    }
    let complete = whole && decoded && clean && raw.len() as u64 == size;
    if counts.is_empty() && !complete {
        return None;
    }
    Some((counts, complete))
}

/// Reads `path` and writes what it keeps through a writer over the sink
/// `make_sink` opens once the header is known to be there.
fn rebuild<W: Write>(
    path: &Path,
    file_len: u64,
    make_sink: impl FnOnce() -> std::io::Result<W>,
) -> Result<Scan<W>, FormatError> {
    let f = nofollow::open_read(path)?;
    let peek = nofollow::open_read(path)?;
    let mut br = BufReader::with_capacity(1 << 20, f);
    let nothing = |why: &str| Scan {
        sink: None,
        outcome: Outcome::NothingRecoverable,
        kept_messages: BTreeMap::new(),
        chunks_kept: 0,
        kept_bytes: 0,
        stopped_at: Some(StopPoint {
            offset: 0,
            reason: why.to_string(),
        }),
        dropped: Dropped::Unknown,
    };
    let mut magic = [0u8; 8];
    if br.read_exact(&mut magic).is_err() || &magic != MAGIC {
        return Ok(nothing("no MCAP magic at the start"));
    }
    let mut src = Source {
        rr: RecordReader::new(br, MAGIC.len() as u64),
        peek,
        len: file_len,
    };
    let header = match src.next()? {
        Next::Record(r) if r.opcode == op::HEADER => r,
        Next::Record(_) => return Ok(nothing("the first record is not a Header")),
        _ => return Ok(nothing("the Header record is incomplete")),
    };
    let mut hc = records::Cursor::new(&header.body);
    let (profile, library) = match (hc.str("header.profile"), hc.str("header.library")) {
        (Ok(p), Ok(l)) => (p.to_string(), l.to_string()),
        _ => return Ok(nothing("the Header record does not decode")),
    };
    if src.torn(header.offset, &header.body)? {
        return Ok(nothing("the Header record was not completely written"));
    }
    let mut w = McapWriter::new(make_sink()?, &profile, &library)?;

    let mut topics: BTreeMap<u16, String> = BTreeMap::new();
    let mut kept: BTreeMap<u16, u64> = BTreeMap::new();
    let mut chunks_kept = 0u64;
    let mut loose = ChunkBuilder::new(1 << 16);
    let mut plain = ChunkCompressor::new(Compression::None)?;

    // Appends the stand-alone messages gathered so far as one chunk.
    fn flush_loose<W: Write>(
        w: &mut McapWriter<W>,
        loose: &mut ChunkBuilder,
        plain: &mut ChunkCompressor,
        kept: &mut BTreeMap<u16, u64>,
        chunks_kept: &mut u64,
    ) -> Result<(), FormatError> {
        if loose.is_empty() {
            return Ok(());
        }
        let sealed = loose.take().seal(plain);
        for &(ch, n) in &sealed.channel_counts {
            *kept.entry(ch).or_insert(0) += n;
        }
        w.write_chunk(&sealed)?;
        *chunks_kept += 1;
        Ok(())
    }

    let corrupt = |offset: u64, reason: String| -> (Outcome, Option<StopPoint>) {
        (
            Outcome::CorruptSkipped,
            Some(StopPoint {
                offset,
                reason: format!("corrupt record: {reason}"),
            }),
        )
    };
    let tail = |offset: u64, reason: String| -> (Outcome, Option<StopPoint>) {
        (
            Outcome::Clean,
            Some(StopPoint {
                offset,
                reason: format!("unsynced tail: {reason}"),
            }),
        )
    };
    let mut dropped = Dropped::Nothing;
    let (outcome, stopped_at) = loop {
        let pos = src.rr.position();
        let rec = match src.next()? {
            Next::Record(r) => r,
            Next::End => break tail(pos, "the file ends at a record boundary".into()),
            Next::ZeroTail => break tail(pos, "zeros (never written)".into()),
            Next::Truncated { available } => {
                let mut bytes = vec![0u8; available.min(MAX_RECORD_LEN) as usize];
                let n = read_at_most(&src.peek, pos, &mut bytes)?;
                bytes.truncate(n);
                if bytes.first() == Some(&op::CHUNK) && n > RECORD_PREFIX {
                    dropped = counted(lenient_counts(&bytes[RECORD_PREFIX..]), &topics);
                }
                break tail(
                    pos,
                    format!("the file ends inside a record ({available} bytes of it are there)"),
                );
            }
            Next::TooLong { len } => {
                dropped = Dropped::Unknown;
                break corrupt(pos, format!("a record length of {len} bytes"));
            }
        };
        let at = rec.offset;
        // A record that decodes may still be a torn one whose missing end
        // reads as zeros; for those, parsing is not proof.
        let is_torn = |body: &[u8]| src.torn(at, body);
        match rec.opcode {
            op::SCHEMA => {
                let parsed = records::parse_schema(&rec.body);
                if is_torn(&rec.body)? {
                    break tail(at, "a Schema record cut by zeros".into());
                }
                match parsed {
                    Ok(s) => w.add_schema(&s)?,
                    Err(e) => break corrupt(at, format!("Schema: {e}")),
                }
            }
            op::CHANNEL => {
                let parsed = records::parse_channel(&rec.body);
                if is_torn(&rec.body)? {
                    break tail(at, "a Channel record cut by zeros".into());
                }
                match parsed {
                    Ok(c) => match w.add_channel(&c) {
                        Ok(()) => {
                            topics.entry(c.id).or_insert(c.topic);
                        }
                        Err(FormatError::Inconsistent(why)) => break corrupt(at, why),
                        Err(e) => return Err(e),
                    },
                    Err(e) => break corrupt(at, format!("Channel: {e}")),
                }
            }
            op::METADATA => {
                let parsed = records::parse_metadata(&rec.body);
                if is_torn(&rec.body)? {
                    break tail(at, "a Metadata record cut by zeros".into());
                }
                match parsed {
                    Ok((name, _)) if name == RECOVERED_METADATA => {}
                    Ok((name, map)) => {
                        flush_loose(&mut w, &mut loose, &mut plain, &mut kept, &mut chunks_kept)?;
                        w.write_metadata(&name, &map)?;
                    }
                    Err(e) => break corrupt(at, format!("Metadata: {e}")),
                }
            }
            op::MESSAGE => {
                let parsed = records::parse_message(&rec.body);
                if is_torn(&rec.body)? {
                    break tail(at, "a Message record cut by zeros".into());
                }
                let m = match parsed {
                    Ok(m) if w.has_channel(m.channel_id) => m,
                    Ok(m) => {
                        break corrupt(at, format!("message on unknown channel {}", m.channel_id))
                    }
                    Err(e) => break corrupt(at, format!("Message: {e}")),
                };
                loose.push(m.channel_id, m.sequence, m.log_time, m.publish_time, m.data);
                if loose.len() >= LOOSE_CHUNK {
                    flush_loose(&mut w, &mut loose, &mut plain, &mut kept, &mut chunks_kept)?;
                }
            }
            op::CHUNK => {
                let known = |id: u16| w.has_channel(id);
                let body = rec.body;
                match verify_chunk(&body, at, &known) {
                    // Without a CRC (0 = not computed) zeros pass every
                    // check: a chunk whose end never landed looks empty.
                    Ok(good) if good.uncompressed_crc == 0 && src.torn(at, &body)? => {
                        break tail(at, "a chunk without CRC cut by zeros".into());
                    }
                    Ok(good) => {
                        flush_loose(&mut w, &mut loose, &mut plain, &mut kept, &mut chunks_kept)?;
                        for s in &good.schemas {
                            w.add_schema(s)?;
                        }
                        for c in &good.channels {
                            w.add_channel(c)?;
                            topics.entry(c.id).or_insert(c.topic.clone());
                        }
                        let sealed = good.seal(body);
                        for &(ch, n) in &sealed.channel_counts {
                            *kept.entry(ch).or_insert(0) += n;
                        }
                        w.write_chunk(&sealed)?;
                        chunks_kept += 1;
                    }
                    Err(why) => {
                        dropped = counted(lenient_counts(&body), &topics);
                        if src.torn(at, &body)? {
                            break tail(at, format!("a chunk cut by zeros ({why})"));
                        }
                        break corrupt(at, format!("chunk: {why}"));
                    }
                }
            }
            // Rebuilt from the chunks; the ones in the file are not trusted.
            op::MESSAGE_INDEX => {}
            op::ATTACHMENT => {
                tracing::warn!("{}: attachment at byte {at} not kept", path.display());
            }
            // The data section is complete; the summary is rebuilt.
            op::DATA_END => break (Outcome::Clean, None),
            other => {
                if src.torn(at, &rec.body)? {
                    break tail(at, format!("a record 0x{other:02x} cut by zeros"));
                }
                break corrupt(
                    at,
                    format!("record 0x{other:02x} does not belong in the data section"),
                );
            }
        }
    };
    let kept_bytes = match &stopped_at {
        Some(s) => s.offset,
        None => src.rr.position(),
    };
    flush_loose(&mut w, &mut loose, &mut plain, &mut kept, &mut chunks_kept)?;
    let meta = BTreeMap::from([
        ("original_bytes".to_string(), file_len.to_string()),
        ("kept_bytes".to_string(), kept_bytes.to_string()),
        (
            "corrupt_skipped".to_string(),
            (outcome == Outcome::CorruptSkipped).to_string(),
        ),
        ("recovered_at_ns".to_string(), now_ns().to_string()),
    ]);
    w.write_metadata(RECOVERED_METADATA, &meta)?;
    let (sink, _summary) = w.finish()?;
    let mut kept_messages = BTreeMap::new();
    for (ch, n) in kept {
        *kept_messages.entry(topic_of(&topics, ch)).or_insert(0) += n;
    }
    Ok(Scan {
        sink: Some(sink),
        outcome,
        kept_messages,
        chunks_kept,
        kept_bytes,
        stopped_at,
        dropped,
    })
}

fn topic_of(topics: &BTreeMap<u16, String>, ch: u16) -> String {
    topics
        .get(&ch)
        .cloned()
        .unwrap_or_else(|| format!("channel {ch}"))
}

fn counted(c: Option<(BTreeMap<u16, u64>, bool)>, topics: &BTreeMap<u16, String>) -> Dropped {
    match c {
        None => Dropped::Unknown,
        Some((counts, complete)) => {
            let mut per_topic = BTreeMap::new();
            for (ch, n) in counts {
                *per_topic.entry(topic_of(topics, ch)).or_insert(0) += n;
            }
            if per_topic.is_empty() && complete {
                Dropped::Nothing
            } else {
                Dropped::Counted {
                    per_topic,
                    complete,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_and_temp_names() {
        let p = Path::new("/d/s_0.mcap.active");
        assert_eq!(output_path(p), Path::new("/d/s_0.mcap"));
        assert_eq!(
            temp_path(&output_path(p)),
            Path::new("/d/s_0.mcap.recovering")
        );
        assert_eq!(output_path(Path::new("x.mcap")), Path::new("x.mcap"));
    }

    #[test]
    fn exit_codes_follow_mcap_recover() {
        assert_eq!(Outcome::Clean.exit_code(), 0);
        assert_eq!(Outcome::AlreadyClosed.exit_code(), 0);
        assert_eq!(Outcome::CorruptSkipped.exit_code(), 3);
        assert_eq!(Outcome::NothingRecoverable.exit_code(), 1);
        assert!(Outcome::NothingRecoverable.severity() > Outcome::CorruptSkipped.severity());
    }
}
