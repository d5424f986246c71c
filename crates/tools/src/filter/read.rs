//! Reading one MCAP file of `filter`'s input into a [`Sink`], keeping only
//! the channels and times asked for.
//!
//! A closed file is read through its summary: its schemas, channels and
//! Metadata records, then only the chunks whose index says they may hold a
//! wanted message (a kept channel, a time inside the window), in file
//! order. A file without chunk indexes, an unfinished `.active` segment and
//! a file whose summary does not read are read front to back, record by
//! record, up to the first damage. Damage (a cut, a chunk that does not
//! decompress or fails its CRC, a record that does not parse) ends the
//! file's reading; what came before it has been handed over, and the
//! damage is returned for the command to report. Memory is bounded by the
//! largest chunk, whatever the file's size.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use edgerec_format::info::{FileEntry, FileState};
use edgerec_format::reader::{FileSummary, ReadOutcome, RecordReader};
use edgerec_format::records::{self, op, Channel, MessageRef, Schema, MAGIC};

use crate::error::{Result, ToolError};
use crate::filter::decompress::{self, RawChunk};
use crate::filter::topics::Topics;

/// The largest record read front to back (`mcap.chunk_size` is at most
/// 256 MiB; a longer claim is damage and is not allocated).
const MAX_RECORD: u64 = 1 << 30;

/// What receives the kept content of the input, file by file.
pub(crate) trait Sink {
    /// A new input file begins, written by a writer of this profile.
    fn begin_file(&mut self, path: &Path, profile: &str) -> Result<()>;
    /// A schema of the current file (channels refer to it by id).
    fn schema(&mut self, s: &Schema) -> Result<()>;
    /// A channel of the current file on a kept topic; `false` when the
    /// sink wants none of its messages (an expression that can never hold
    /// for it).
    fn channel(&mut self, c: &Channel) -> Result<bool>;
    /// A kept message (of a channel handed over before).
    fn message(&mut self, m: &MessageRef<'_>) -> Result<()>;
    /// A Metadata record of the current file.
    fn metadata(&mut self, name: &str, map: &BTreeMap<String, String>) -> Result<()>;
}

/// Which messages are kept: topics and log times in `[start, end)`.
#[derive(Debug, Clone)]
pub(crate) struct Scope<'a> {
    /// The topics.
    pub topics: &'a Topics,
    /// The first log time kept, ns since the epoch.
    pub start_ns: u64,
    /// The first log time past the window (`u64::MAX`: none).
    pub end_ns: u64,
    /// Threads decompressing chunks.
    pub threads: usize,
}

impl Scope<'_> {
    fn admits_time(&self, t: u64) -> bool {
        t >= self.start_ns && t < self.end_ns
    }

    fn overlaps(&self, first: u64, last: u64) -> bool {
        last >= self.start_ns && first < self.end_ns
    }
}

/// Where an input file stopped being readable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The file.
    pub path: PathBuf,
    /// The byte where the damage is, when `what` does not say it.
    pub offset: Option<u64>,
    /// What is wrong there.
    pub what: String,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.what)?;
        if let Some(at) = self.offset {
            write!(f, " (at byte {at})")?;
        }
        write!(f, "; the output holds the kept messages before it")
    }
}

fn damage(path: &Path, offset: u64, what: impl Into<String>) -> Damage {
    Damage {
        path: path.to_path_buf(),
        offset: Some(offset),
        what: what.into(),
    }
}

/// Reads `entry` into `sink`. `Err` is the sink's error (the output); the
/// input's damage is `Ok(Some(_))`.
pub(crate) fn read_file(
    entry: &FileEntry,
    scope: &Scope<'_>,
    sink: &mut dyn Sink,
) -> Result<Option<Damage>> {
    match &entry.state {
        FileState::Closed(summary) if !summary.chunk_indexes.is_empty() => {
            read_indexed(&entry.path, summary, scope, sink)
        }
        FileState::Closed(_) => read_linear(&entry.path, scope, sink, None),
        FileState::Active => read_linear(
            &entry.path,
            scope,
            sink,
            Some(
                "not closed (still recording, or cut by a power cut; `edgerec recover` closes it)",
            ),
        ),
        FileState::Broken(why) => read_linear(&entry.path, scope, sink, Some(why)),
    }
}

fn read_indexed(
    path: &Path,
    summary: &FileSummary,
    scope: &Scope<'_>,
    sink: &mut dyn Sink,
) -> Result<Option<Damage>> {
    let mut f = File::open(path).map_err(ToolError::io(path))?;
    let file_len = f.metadata().map_err(ToolError::io(path))?.len();
    sink.begin_file(path, &summary.profile)?;
    for s in summary.schemas.values() {
        sink.schema(s)?;
    }
    let mut kept = Kept::new();
    for c in summary.channels.values() {
        admit_channel(c, &mut kept, scope, sink)?;
    }
    for (name, map) in &summary.metadata_records {
        sink.metadata(name, map)?;
    }
    let mut chunks: Vec<_> = summary
        .chunk_indexes
        .iter()
        .filter(|c| {
            scope.overlaps(c.message_start_time, c.message_end_time)
                && (c.message_index_offsets.is_empty()
                    || c.message_index_offsets.keys().any(|k| wanted(&kept, *k)))
        })
        .collect();
    chunks.sort_by_key(|c| c.chunk_start_offset);
    // Chunks are read here, in file order, decompressed on every core
    // (decompress.rs) and their messages handed on here in that order.
    let mut todo = chunks.into_iter();
    let mut found: Option<Damage> = None;
    let mut index_damage: Option<Damage> = None;
    decompress::in_order::<ToolError>(
        scope.threads,
        || {
            let Some(c) = todo.next() else {
                return Ok(None);
            };
            let at = c.chunk_start_offset;
            let room = file_len.saturating_sub(at);
            if c.chunk_length > room || c.chunk_length < records::RECORD_PREFIX as u64 {
                index_damage = Some(damage(
                    path,
                    at,
                    format!(
                        "the chunk index claims a chunk of {} bytes where {room} are left",
                        c.chunk_length
                    ),
                ));
                return Ok(None);
            }
            let Ok(len) = usize::try_from(c.chunk_length) else {
                index_damage = Some(damage(path, at, "a chunk larger than memory"));
                return Ok(None);
            };
            let mut buf = vec![0; len];
            f.seek(SeekFrom::Start(at)).map_err(ToolError::io(path))?;
            f.read_exact(&mut buf).map_err(ToolError::io(path))?;
            if buf[0] != op::CHUNK {
                index_damage = Some(damage(
                    path,
                    at,
                    "the chunk index points at no Chunk record",
                ));
                return Ok(None);
            }
            Ok(Some(RawChunk {
                at,
                bytes: buf,
                body_from: records::RECORD_PREFIX,
            }))
        },
        |at, raw| {
            let d = match raw {
                Ok(raw) => chunk_records(path, at, &raw, &mut kept, scope, sink, false)?,
                Err(what) => Some(damage(path, at, what)),
            };
            found = d;
            Ok(found.is_none())
        },
    )?;
    // Damage met while handing chunks on lies before any the reading met.
    Ok(found.or(index_damage))
}

/// The messages of one Chunk record's body, decompressed here (a linear
/// read); see [`chunk_records`].
fn chunk(
    path: &Path,
    at: u64,
    body: &[u8],
    kept: &mut Kept,
    scope: &Scope<'_>,
    sink: &mut dyn Sink,
    linear: bool,
) -> Result<Option<Damage>> {
    match decompress::decompress_body(at, body) {
        Ok(raw) => chunk_records(path, at, &raw, kept, scope, sink, linear),
        Err(what) => Ok(Some(damage(path, at, what))),
    }
}

/// The messages of one chunk's decompressed records `raw`; with `linear`,
/// the Schema and Channel records inside it too (a summary lists them
/// otherwise), a kept channel joining `kept`.
fn chunk_records(
    path: &Path,
    at: u64,
    raw: &[u8],
    kept: &mut Kept,
    scope: &Scope<'_>,
    sink: &mut dyn Sink,
    linear: bool,
) -> Result<Option<Damage>> {
    for inner in records::RecordIter::new(raw, 0) {
        let Ok(inner) = inner else {
            return Ok(Some(damage(path, at, "a record inside the chunk is cut")));
        };
        let bad = |what: &str, e: records::DecodeError| {
            Ok(Some(damage(
                path,
                at,
                format!("{what} inside the chunk does not parse: {e}"),
            )))
        };
        match inner.opcode {
            op::MESSAGE => {
                let m = match records::parse_message(inner.body) {
                    Ok(m) => m,
                    Err(e) => return bad("a message", e),
                };
                if wanted(kept, m.channel_id) && scope.admits_time(m.log_time) {
                    sink.message(&m)?;
                }
            }
            op::SCHEMA if linear => match records::parse_schema(inner.body) {
                Ok(s) => sink.schema(&s)?,
                Err(e) => return bad("a schema", e),
            },
            op::CHANNEL if linear => match records::parse_channel(inner.body) {
                Ok(c) => admit_channel(&c, kept, scope, sink)?,
                Err(e) => return bad("a channel", e),
            },
            _ => {}
        }
    }
    Ok(None)
}

/// Each channel met in a file and whether its messages are wanted.
type Kept = BTreeMap<u16, bool>;

fn wanted(kept: &Kept, id: u16) -> bool {
    kept.get(&id).copied().unwrap_or(false)
}

/// Decides a channel once (front to back, a chunk may repeat it): kept
/// when its topic is and the sink wants it.
fn admit_channel(
    c: &Channel,
    kept: &mut Kept,
    scope: &Scope<'_>,
    sink: &mut dyn Sink,
) -> Result<()> {
    if let std::collections::btree_map::Entry::Vacant(slot) = kept.entry(c.id) {
        slot.insert(scope.topics.admits(&c.topic) && sink.channel(c)?);
    }
    Ok(())
}

/// Reads `path` front to back. `state` is why it is not read through a
/// summary when that is damage of its own (an unfinished or unreadable
/// file): it is reported even when every record reads.
fn read_linear(
    path: &Path,
    scope: &Scope<'_>,
    sink: &mut dyn Sink,
    state: Option<&str>,
) -> Result<Option<Damage>> {
    let f = File::open(path).map_err(ToolError::io(path))?;
    let file_len = f.metadata().map_err(ToolError::io(path))?.len();
    let mut r = BufReader::with_capacity(1 << 20, f);
    let mut magic = [0u8; 8];
    let mut got = 0;
    while got < magic.len() {
        match r.read(&mut magic[got..]).map_err(ToolError::io(path))? {
            0 => break,
            n => got += n,
        }
    }
    if got < magic.len() || &magic != MAGIC {
        return Ok(Some(damage(path, 0, "no MCAP magic: not an MCAP file")));
    }
    let mut rr = RecordReader::new(r, MAGIC.len() as u64);
    let mut begun = false;
    let mut kept = Kept::new();
    let ended = |at: u64, what: String| -> Option<Damage> {
        Some(damage(
            path,
            at,
            match state {
                Some(s) => format!("{s}; read front to back: {what}"),
                None => what,
            },
        ))
    };
    loop {
        let left = file_len.saturating_sub(rr.position()).min(MAX_RECORD);
        let at = rr.position();
        let rec = match rr.next_record(left) {
            Ok(ReadOutcome::Record(rec)) => rec,
            Ok(ReadOutcome::End) => {
                return Ok(ended(at, "the file ends without a summary".to_owned()))
            }
            Ok(ReadOutcome::Truncated { offset, .. }) => {
                return Ok(ended(offset, "the file ends inside a record".to_owned()))
            }
            Err(e) => return Ok(ended(at, e.to_string())),
        };
        if !begun && rec.opcode != op::HEADER {
            sink.begin_file(path, "")?;
            begun = true;
        }
        let bad = |what: &str, e: records::DecodeError| {
            Ok(ended(rec.offset, format!("{what} does not parse: {e}")))
        };
        match rec.opcode {
            op::HEADER if !begun => {
                let profile = records::Cursor::new(&rec.body)
                    .str("header.profile")
                    .unwrap_or("")
                    .to_owned();
                sink.begin_file(path, &profile)?;
                begun = true;
            }
            op::SCHEMA => match records::parse_schema(&rec.body) {
                Ok(s) => sink.schema(&s)?,
                Err(e) => return bad("a schema", e),
            },
            op::CHANNEL => match records::parse_channel(&rec.body) {
                Ok(c) => admit_channel(&c, &mut kept, scope, sink)?,
                Err(e) => return bad("a channel", e),
            },
            op::MESSAGE => match records::parse_message(&rec.body) {
                Ok(m) => {
                    if wanted(&kept, m.channel_id) && scope.admits_time(m.log_time) {
                        sink.message(&m)?;
                    }
                }
                Err(e) => return bad("a message", e),
            },
            op::CHUNK => {
                if let Some(d) = chunk(path, rec.offset, &rec.body, &mut kept, scope, sink, true)? {
                    return Ok(ended(d.offset.unwrap_or(rec.offset), d.what));
                }
            }
            op::METADATA => match records::parse_metadata(&rec.body) {
                Ok((name, map)) => sink.metadata(&name, &map)?,
                Err(e) => return bad("a metadata record", e),
            },
            op::DATA_END | op::FOOTER => {
                return Ok(state.map(|s| damage(path, rec.offset, s)));
            }
            // A zero prefix is the preallocated, never written tail of a
            // segment cut by a power cut.
            0 => {
                return Ok(ended(
                    rec.offset,
                    "zeros from here on (the unsynced tail)".to_owned(),
                ))
            }
            _ => {}
        }
    }
}
