//! Reading MCAP files: a streaming record reader, the summary, and `check`.
//!
//! [`check_file`] walks the whole file once with bounded memory (the largest
//! record), verifying framing, every chunk CRC and size, the message indexes
//! against the messages they index, the data-section CRC, the summary CRC,
//! and that the summary (statistics, chunk indexes, summary offsets) agrees
//! with what the data section holds. It stops at the first problem and names
//! its offset.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use crate::records::{self, op, Channel, ChunkIndex, Schema, Statistics, MAGIC, RECORD_PREFIX};
use crate::FormatError;

/// Message index entries (log_time, offset) by channel.
type ChannelEntries = BTreeMap<u16, Vec<(u64, u64)>>;

/// Reads records one by one from a byte stream, hashing what it reads.
#[derive(Debug)]
pub struct RecordReader<R: Read> {
    inner: R,
    pos: u64,
    crc: crc32fast::Hasher,
}

/// A record read by [`RecordReader`], owning its body.
#[derive(Debug, Clone)]
pub struct OwnedRecord {
    /// File offset of the opcode.
    pub offset: u64,
    /// Opcode.
    pub opcode: u8,
    /// Body.
    pub body: Vec<u8>,
}

/// What [`RecordReader::next_record`] found.
#[derive(Debug)]
pub enum ReadOutcome {
    /// A complete record.
    Record(OwnedRecord),
    /// Clean end of input at a record boundary.
    End,
    /// The input ends inside a record.
    Truncated {
        /// Offset of the incomplete record.
        offset: u64,
        /// Bytes that were there.
        available: u64,
    },
}

impl<R: Read> RecordReader<R> {
    /// A reader positioned at file offset `pos` (bytes before it were
    /// consumed by the caller and are not hashed).
    pub fn new(inner: R, pos: u64) -> Self {
        Self {
            inner,
            pos,
            crc: crc32fast::Hasher::new(),
        }
    }

    /// The CRC of everything read through this reader so far.
    pub fn crc(&self) -> u32 {
        self.crc.clone().finalize()
    }

    /// Feeds bytes read elsewhere (the magic) into the running CRC.
    pub fn hash_prefix(&mut self, b: &[u8]) {
        self.crc.update(b);
    }

    /// Current file offset.
    pub fn position(&self) -> u64 {
        self.pos
    }

    fn fill(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut got = 0;
        while got < buf.len() {
            match self.inner.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(got)
    }

    /// Reads the next record. `max_len` bounds the body size accepted (a
    /// corrupt length must not make us allocate gigabytes).
    pub fn next_record(&mut self, max_len: u64) -> Result<ReadOutcome, FormatError> {
        let offset = self.pos;
        let mut prefix = [0u8; RECORD_PREFIX];
        let n = self.fill(&mut prefix)?;
        if n == 0 {
            return Ok(ReadOutcome::End);
        }
        if n < RECORD_PREFIX {
            return Ok(ReadOutcome::Truncated {
                offset,
                available: n as u64,
            });
        }
        let opcode = prefix[0];
        let mut l = [0u8; 8];
        l.copy_from_slice(&prefix[1..]);
        let len = u64::from_le_bytes(l);
        if len > max_len {
            // Either the file was cut inside this record or the length
            // itself is damaged; both end the readable part here.
            return Ok(ReadOutcome::Truncated {
                offset,
                available: RECORD_PREFIX as u64 + max_len,
            });
        }
        let Ok(body_len) = usize::try_from(len) else {
            return Ok(ReadOutcome::Truncated {
                offset,
                available: RECORD_PREFIX as u64,
            });
        };
        let mut body = vec![0u8; body_len];
        let got = self.fill(&mut body)?;
        if got < body.len() {
            return Ok(ReadOutcome::Truncated {
                offset,
                available: (RECORD_PREFIX + got) as u64,
            });
        }
        self.crc.update(&prefix);
        self.crc.update(&body);
        self.pos += RECORD_PREFIX as u64 + len;
        Ok(ReadOutcome::Record(OwnedRecord {
            offset,
            opcode,
            body,
        }))
    }
}

/// The largest decompressed chunk a reader accepts. `mcap.chunk_size` is
/// at most 256 MiB and a chunk closes at the first message past it; the
/// uncompressed size cannot be checked against the file (compression
/// shrinks it), so a claim beyond this is taken as damage.
pub const MAX_CHUNK_UNCOMPRESSED: u64 = 1 << 30;

/// Decompresses a chunk's records and verifies size and CRC. `offset` is
/// the Chunk record's, for errors.
pub fn decompress_chunk(c: &records::ChunkRef<'_>, offset: u64) -> Result<Vec<u8>, FormatError> {
    if c.uncompressed_size > MAX_CHUNK_UNCOMPRESSED {
        return Err(FormatError::LengthOutOfBounds {
            offset,
            field: "chunk.uncompressed_size",
            claimed: c.uncompressed_size,
            limit: MAX_CHUNK_UNCOMPRESSED,
        });
    }
    // Even within the limit the claimed size is not what is allocated: a
    // damaged size must not cost its claim when the data is small. The
    // output grows as decompression produces it, up to one byte past the
    // claim (enough to tell a longer output from an exact one). Starting
    // at a few times the compressed size saves most regrowth.
    let bound = c.uncompressed_size + 1;
    let start = c.records.len().saturating_mul(4).min(bound as usize);
    let decompressed = |r: &mut dyn Read, name: &str| -> Result<Vec<u8>, FormatError> {
        let mut v = Vec::with_capacity(start);
        r.take(bound)
            .read_to_end(&mut v)
            .map_err(|e| FormatError::Corrupt {
                offset,
                what: format!("{name} chunk does not decompress: {e}"),
            })?;
        Ok(v)
    };
    let out = match c.compression {
        "" => c.records.to_vec(),
        "zstd" => {
            let mut d = zstd::stream::read::Decoder::with_buffer(c.records).map_err(|e| {
                FormatError::Corrupt {
                    offset,
                    what: format!("zstd decoder: {e}"),
                }
            })?;
            decompressed(&mut d, "zstd")?
        }
        "lz4" => decompressed(&mut lz4_flex::frame::FrameDecoder::new(c.records), "lz4")?,
        other => {
            return Err(FormatError::Corrupt {
                offset,
                what: format!("unknown chunk compression `{other}`"),
            })
        }
    };
    if out.len() as u64 != c.uncompressed_size {
        return Err(FormatError::Corrupt {
            offset,
            what: format!(
                "chunk decompresses to {} bytes, header says {}",
                out.len(),
                c.uncompressed_size
            ),
        });
    }
    if c.uncompressed_crc != 0 {
        let crc = crc32fast::hash(&out);
        if crc != c.uncompressed_crc {
            return Err(FormatError::BadCrc {
                offset,
                what: "chunk",
                saved: c.uncompressed_crc,
                calculated: crc,
            });
        }
    }
    Ok(out)
}

/// The summary section of a file, read from its footer.
#[derive(Debug, Clone, Default)]
pub struct FileSummary {
    /// File size.
    pub file_len: u64,
    /// The header's profile.
    pub profile: String,
    /// The header's library.
    pub library: String,
    /// Statistics (None when the file has none).
    pub statistics: Option<Statistics>,
    /// Schemas by id.
    pub schemas: BTreeMap<u16, Schema>,
    /// Channels by id.
    pub channels: BTreeMap<u16, Channel>,
    /// Chunk indexes.
    pub chunk_indexes: Vec<ChunkIndex>,
    /// Metadata records by name (read through the metadata indexes); the
    /// last one of a name wins.
    pub metadata: BTreeMap<String, BTreeMap<String, String>>,
    /// Every Metadata record the metadata indexes point at, in their order,
    /// several of one name kept (what a copy of the file carries over).
    pub metadata_records: Vec<(String, BTreeMap<String, String>)>,
}

impl FileSummary {
    /// Compression names used by the chunks (`none` for uncompressed).
    pub fn compressions(&self) -> BTreeSet<String> {
        self.chunk_indexes
            .iter()
            .map(|c| {
                if c.compression.is_empty() {
                    "none".to_string()
                } else {
                    c.compression.clone()
                }
            })
            .collect()
    }
}

fn read_exact_at(f: &mut File, offset: u64, len: usize) -> Result<Vec<u8>, FormatError> {
    f.seek(SeekFrom::Start(offset))?;
    let mut v = vec![0u8; len];
    f.read_exact(&mut v)?;
    Ok(v)
}

/// Reads the header, footer and summary section of a closed file. The
/// spec makes every part of the summary optional: where it lacks
/// statistics, or a channel or schema its messages use, the data section
/// is read once to fill them in (a file written without a summary, or
/// with `use_statistics=False`, as Python `mcap` can).
pub fn read_summary(path: &Path) -> Result<FileSummary, FormatError> {
    let mut out = read_summary_section(path)?;
    let complete = out.statistics.as_ref().is_some_and(|st| {
        st.channel_message_counts.keys().all(|id| {
            out.channels
                .get(id)
                .is_some_and(|c| c.schema_id == 0 || out.schemas.contains_key(&c.schema_id))
        }) && (st.message_count == 0 || !st.channel_message_counts.is_empty())
    });
    if !complete {
        let rep = check_file(path)?;
        out.statistics = Some(rep.statistics());
        out.schemas.extend(rep.schema_table);
        out.channels.extend(rep.channel_table);
        if out.chunk_indexes.is_empty() {
            out.chunk_indexes = rep.chunk_table;
        }
    }
    Ok(out)
}

fn read_summary_section(path: &Path) -> Result<FileSummary, FormatError> {
    let mut f = File::open(path)?;
    let file_len = f.metadata()?.len();
    let min = (MAGIC.len() * 2 + records::FOOTER_RECORD_LEN) as u64;
    if file_len < min {
        return Err(FormatError::Corrupt {
            offset: 0,
            what: format!("file is {file_len} bytes, shorter than an empty MCAP ({min})"),
        });
    }
    let head = read_exact_at(&mut f, 0, MAGIC.len() + RECORD_PREFIX)?;
    if &head[..8] != MAGIC {
        return Err(FormatError::Corrupt {
            offset: 0,
            what: "not an MCAP file (bad leading magic)".into(),
        });
    }
    let mut out = FileSummary {
        file_len,
        ..Default::default()
    };
    if head[8] == op::HEADER {
        let hlen = u64::from_le_bytes(head[9..17].try_into().unwrap_or([0; 8]));
        let header_room = file_len - head.len() as u64;
        if hlen > header_room {
            return Err(FormatError::LengthOutOfBounds {
                offset: MAGIC.len() as u64,
                field: "header.length",
                claimed: hlen,
                limit: header_room,
            });
        }
        if hlen < 1 << 20 {
            let hb = read_exact_at(&mut f, 17, hlen as usize)?;
            let mut c = records::Cursor::new(&hb);
            out.profile = c.str("header.profile")?.to_string();
            out.library = c.str("header.library")?.to_string();
        }
    }
    let tail_at = file_len - (records::FOOTER_RECORD_LEN + MAGIC.len()) as u64;
    let tail = read_exact_at(&mut f, tail_at, records::FOOTER_RECORD_LEN + MAGIC.len())?;
    if &tail[records::FOOTER_RECORD_LEN..] != MAGIC {
        return Err(FormatError::Corrupt {
            offset: file_len - 8,
            what: "no trailing magic: the file was not closed (run `edgerec recover`)".into(),
        });
    }
    if tail[0] != op::FOOTER {
        return Err(FormatError::Corrupt {
            offset: tail_at,
            what: "no footer record before the trailing magic".into(),
        });
    }
    let (summary_start, _, _) = records::parse_footer(&tail[RECORD_PREFIX..])?;
    if summary_start == 0 {
        return Ok(out);
    }
    if summary_start >= tail_at {
        return Err(FormatError::Corrupt {
            offset: tail_at,
            what: format!("footer's summary start {summary_start} is past the footer"),
        });
    }
    let summary = read_exact_at(&mut f, summary_start, (tail_at - summary_start) as usize)?;
    let mut meta_idx = Vec::new();
    for r in records::RecordIter::new(&summary, summary_start) {
        let r = r.map_err(|t| FormatError::Corrupt {
            offset: t.offset,
            what: "summary section ends inside a record".into(),
        })?;
        match r.opcode {
            op::SCHEMA => {
                let s = records::parse_schema(r.body)?;
                out.schemas.insert(s.id, s);
            }
            op::CHANNEL => {
                let c = records::parse_channel(r.body)?;
                out.channels.insert(c.id, c);
            }
            op::STATISTICS => out.statistics = Some(records::parse_statistics(r.body)?),
            op::CHUNK_INDEX => out.chunk_indexes.push(records::parse_chunk_index(r.body)?),
            op::METADATA_INDEX => {
                let mut c = records::Cursor::new(r.body);
                meta_idx.push((
                    c.u64("metadata_index.offset")?,
                    c.u64("metadata_index.length")?,
                ));
            }
            _ => {}
        }
    }
    for (off, len) in meta_idx {
        if off.checked_add(len).is_none_or(|end| end > file_len) || len > 64 << 20 {
            continue;
        }
        let b = read_exact_at(&mut f, off, len as usize)?;
        if b.len() > RECORD_PREFIX && b[0] == op::METADATA {
            let (name, map) = records::parse_metadata(&b[RECORD_PREFIX..])?;
            out.metadata_records.push((name.clone(), map.clone()));
            out.metadata.insert(name, map);
        }
    }
    Ok(out)
}

/// What a successful [`check_file`] counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// File size.
    pub file_len: u64,
    /// Messages.
    pub messages: u64,
    /// Chunks.
    pub chunks: u64,
    /// Schemas.
    pub schemas: u64,
    /// Channels.
    pub channels: u64,
    /// Messages per channel id.
    pub channel_messages: BTreeMap<u16, u64>,
    /// Earliest log time (0 when empty).
    pub start_time: u64,
    /// Latest log time.
    pub end_time: u64,
    /// Whether the file had a summary section.
    pub has_summary: bool,
    /// CRC fields the writer left 0 (not computed; the spec allows it):
    /// chunks, the data section and the summary. Those parts were not
    /// verified.
    pub crcs_absent: u64,
    /// Chunks followed by no message index (the spec makes them optional).
    pub unindexed_chunks: u64,
    /// The schemas of the data section, by id.
    pub schema_table: BTreeMap<u16, Schema>,
    /// The channels of the data section, by id.
    pub channel_table: BTreeMap<u16, Channel>,
    /// An index entry for every chunk of the data section, as a summary
    /// would have it.
    pub chunk_table: Vec<ChunkIndex>,
}

impl CheckReport {
    /// Statistics as the data section has them, for files whose summary
    /// has none.
    pub fn statistics(&self) -> Statistics {
        Statistics {
            message_count: self.messages,
            schema_count: self.schemas.try_into().unwrap_or(u16::MAX),
            channel_count: self.channels.try_into().unwrap_or(u32::MAX),
            chunk_count: self.chunks.try_into().unwrap_or(u32::MAX),
            message_start_time: self.start_time,
            message_end_time: self.end_time,
            channel_message_counts: self.channel_messages.clone(),
            ..Default::default()
        }
    }
}

fn corrupt(offset: u64, what: impl Into<String>) -> FormatError {
    FormatError::Corrupt {
        offset,
        what: what.into(),
    }
}

/// Verifies a whole file: structure, every CRC, indexes and summary.
pub fn check_file(path: &Path) -> Result<CheckReport, FormatError> {
    let f = File::open(path)?;
    let file_len = f.metadata()?.len();
    let mut r = BufReader::with_capacity(1 << 20, f);
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)
        .map_err(|_| corrupt(0, "file shorter than the magic"))?;
    if &magic != MAGIC {
        return Err(corrupt(0, "bad leading magic: not an MCAP file"));
    }
    let mut rr = RecordReader::new(r, 8);
    rr.hash_prefix(&magic);
    let mut rep = CheckReport {
        file_len,
        ..Default::default()
    };
    let mut schemas: BTreeMap<u16, Schema> = BTreeMap::new();
    let mut channels: BTreeMap<u16, Channel> = BTreeMap::new();
    let mut chunks: Vec<ChunkIndex> = Vec::new();
    let mut metadata_offsets: BTreeSet<u64> = BTreeSet::new();
    let mut first = true;
    // The message index records expected right after the last chunk:
    // channel -> entries, from the decompressed chunk, and whether any
    // message index followed it yet.
    let mut pending_index: Option<(u64, ChannelEntries, bool)> = None;
    let remaining = |pos: u64| file_len.saturating_sub(pos);

    let data_end_offset;
    let data_crc_saved;
    loop {
        let pos = rr.position();
        let crc_before = rr.crc();
        let rec = match rr.next_record(remaining(pos))? {
            ReadOutcome::Record(rec) => rec,
            ReadOutcome::End => {
                return Err(corrupt(pos, "file ends without DataEnd, summary and footer (not closed: run `edgerec recover`)"))
            }
            ReadOutcome::Truncated { offset, available } => {
                return Err(corrupt(offset, format!("truncated record ({available} bytes left): the file was not closed (run `edgerec recover`)")))
            }
        };
        if first {
            if rec.opcode != op::HEADER {
                return Err(corrupt(rec.offset, "first record is not a Header"));
            }
            // The profile and library must fit the record, as every
            // reader (and read_summary) decodes them.
            let mut c = records::Cursor::new(&rec.body);
            c.str("header.profile")
                .map_err(|e| corrupt(rec.offset, e.to_string()))?;
            c.str("header.library")
                .map_err(|e| corrupt(rec.offset, e.to_string()))?;
            first = false;
            continue;
        }
        if rec.opcode != op::MESSAGE_INDEX {
            // Message indexes are optional (the spec's writers may leave
            // them out: Python `mcap` with `IndexType.NONE`); a chunk
            // followed by none is unindexed, one followed by some must
            // index every channel it holds.
            if let Some((chunk_off, expected, indexed)) = pending_index.take() {
                if !indexed {
                    rep.unindexed_chunks += 1;
                } else if !expected.is_empty() {
                    return Err(corrupt(
                        chunk_off,
                        format!(
                            "chunk lacks message indexes for channels {:?}",
                            expected.keys().collect::<Vec<_>>()
                        ),
                    ));
                }
            }
        }
        match rec.opcode {
            op::HEADER => return Err(corrupt(rec.offset, "second Header record")),
            op::FOOTER => return Err(corrupt(rec.offset, "Footer before DataEnd")),
            op::SCHEMA => {
                let s = records::parse_schema(&rec.body)
                    .map_err(|e| corrupt(rec.offset, e.to_string()))?;
                schemas.insert(s.id, s);
            }
            op::CHANNEL => {
                let c = records::parse_channel(&rec.body)
                    .map_err(|e| corrupt(rec.offset, e.to_string()))?;
                if c.schema_id != 0 && !schemas.contains_key(&c.schema_id) {
                    return Err(corrupt(
                        rec.offset,
                        format!("channel {} names unknown schema {}", c.topic, c.schema_id),
                    ));
                }
                channels.insert(c.id, c);
            }
            op::MESSAGE => {
                let m = records::parse_message(&rec.body)
                    .map_err(|e| corrupt(rec.offset, e.to_string()))?;
                if !channels.contains_key(&m.channel_id) {
                    return Err(corrupt(
                        rec.offset,
                        format!("message on unknown channel {}", m.channel_id),
                    ));
                }
                count_message(&mut rep, m.channel_id, m.log_time);
            }
            op::CHUNK => {
                let c = records::parse_chunk(&rec.body)
                    .map_err(|e| corrupt(rec.offset, e.to_string()))?;
                let raw = decompress_chunk(&c, rec.offset)?;
                if c.uncompressed_crc == 0 {
                    rep.crcs_absent += 1;
                }
                let mut expected: BTreeMap<u16, Vec<(u64, u64)>> = BTreeMap::new();
                let (mut lo, mut hi) = (u64::MAX, 0u64);
                for inner in records::RecordIter::new(&raw, 0) {
                    let inner = inner.map_err(|t| {
                        corrupt(
                            rec.offset,
                            format!("record inside chunk is cut at chunk offset {}", t.offset),
                        )
                    })?;
                    match inner.opcode {
                        op::MESSAGE => {
                            let m = records::parse_message(inner.body)
                                .map_err(|e| corrupt(rec.offset, e.to_string()))?;
                            if !channels.contains_key(&m.channel_id) {
                                return Err(corrupt(
                                    rec.offset,
                                    format!(
                                        "chunk holds a message on unknown channel {}",
                                        m.channel_id
                                    ),
                                ));
                            }
                            expected
                                .entry(m.channel_id)
                                .or_default()
                                .push((m.log_time, inner.offset));
                            lo = lo.min(m.log_time);
                            hi = hi.max(m.log_time);
                            count_message(&mut rep, m.channel_id, m.log_time);
                        }
                        op::SCHEMA => {
                            let s = records::parse_schema(inner.body)
                                .map_err(|e| corrupt(rec.offset, e.to_string()))?;
                            schemas.insert(s.id, s);
                        }
                        op::CHANNEL => {
                            let ch = records::parse_channel(inner.body)
                                .map_err(|e| corrupt(rec.offset, e.to_string()))?;
                            channels.insert(ch.id, ch);
                        }
                        other => {
                            return Err(corrupt(
                                rec.offset,
                                format!("record 0x{other:02x} is not allowed inside a chunk"),
                            ))
                        }
                    }
                }
                if !expected.is_empty() && (lo != c.message_start_time || hi != c.message_end_time)
                {
                    return Err(corrupt(
                        rec.offset,
                        format!(
                            "chunk time range {}..{} does not match its messages {lo}..{hi}",
                            c.message_start_time, c.message_end_time
                        ),
                    ));
                }
                chunks.push(ChunkIndex {
                    message_start_time: c.message_start_time,
                    message_end_time: c.message_end_time,
                    chunk_start_offset: rec.offset,
                    chunk_length: RECORD_PREFIX as u64 + rec.body.len() as u64,
                    compression: c.compression.to_string(),
                    compressed_size: c.records.len() as u64,
                    uncompressed_size: c.uncompressed_size,
                    ..Default::default()
                });
                rep.chunks += 1;
                pending_index = Some((rec.offset, expected, false));
            }
            op::MESSAGE_INDEX => {
                let (ch, mut entries) = records::parse_message_index(&rec.body)
                    .map_err(|e| corrupt(rec.offset, e.to_string()))?;
                let Some((chunk_off, expected, indexed)) = pending_index.as_mut() else {
                    return Err(corrupt(rec.offset, "MessageIndex not following a chunk"));
                };
                *indexed = true;
                let mut want = expected.remove(&ch).unwrap_or_default();
                entries.sort_unstable();
                want.sort_unstable();
                if entries != want {
                    return Err(corrupt(rec.offset, format!(
                        "message index of channel {ch} for chunk at {chunk_off} lists {} entries that do not match the chunk's {} messages",
                        entries.len(), want.len()
                    )));
                }
                if let Some(last) = chunks.last_mut() {
                    last.message_index_offsets.insert(ch, rec.offset);
                    last.message_index_length += RECORD_PREFIX as u64 + rec.body.len() as u64;
                }
            }
            op::METADATA => {
                records::parse_metadata(&rec.body)
                    .map_err(|e| corrupt(rec.offset, e.to_string()))?;
                metadata_offsets.insert(rec.offset);
            }
            op::ATTACHMENT => {}
            op::DATA_END => {
                let mut c = records::Cursor::new(&rec.body);
                data_crc_saved = c
                    .u32("data_end.crc")
                    .map_err(|e| corrupt(rec.offset, e.to_string()))?;
                data_end_offset = rec.offset;
                if data_crc_saved == 0 {
                    rep.crcs_absent += 1;
                }
                if data_crc_saved != 0 && data_crc_saved != crc_before {
                    return Err(FormatError::BadCrc {
                        offset: rec.offset,
                        what: "data section",
                        saved: data_crc_saved,
                        calculated: crc_before,
                    });
                }
                break;
            }
            op::CHUNK_INDEX
            | op::STATISTICS
            | op::SUMMARY_OFFSET
            | op::METADATA_INDEX
            | op::ATTACHMENT_INDEX => {
                return Err(corrupt(
                    rec.offset,
                    format!(
                        "summary record 0x{:02x} inside the data section",
                        rec.opcode
                    ),
                ));
            }
            _ => {} // unknown opcodes are allowed by the spec
        }
    }
    let _ = data_end_offset;
    rep.schemas = schemas.len() as u64;
    rep.channels = channels.len() as u64;
    if pending_index.is_some_and(|(_, _, indexed)| !indexed) {
        rep.unindexed_chunks += 1;
    }

    // Summary section and footer.
    let summary_pos = rr.position();
    let mut summary_records: Vec<OwnedRecord> = Vec::new();
    let footer = loop {
        let rec = match rr.next_record(remaining(rr.position()))? {
            ReadOutcome::Record(rec) => rec,
            ReadOutcome::End | ReadOutcome::Truncated { .. } => {
                return Err(corrupt(rr.position(), "file ends before the footer"))
            }
        };
        if rec.opcode == op::FOOTER {
            break rec;
        }
        summary_records.push(rec);
    };
    let (summary_start, summary_offset_start, summary_crc) =
        records::parse_footer(&footer.body).map_err(|e| corrupt(footer.offset, e.to_string()))?;
    // One byte more than the magic is enough to tell that more follows;
    // a Footer opcode early in a damaged file must not read the rest.
    let mut tail = Vec::new();
    (&mut rr.inner)
        .take(MAGIC.len() as u64 + 1)
        .read_to_end(&mut tail)?;
    if tail.as_slice() != MAGIC {
        return Err(corrupt(
            footer.offset,
            "footer is not followed by exactly the trailing magic",
        ));
    }
    rep.has_summary = summary_start != 0;
    if summary_start != 0 && summary_start != summary_pos {
        return Err(corrupt(
            footer.offset,
            format!(
                "footer says the summary starts at {summary_start}, it starts at {summary_pos}"
            ),
        ));
    }
    if summary_crc == 0 && summary_start != 0 {
        rep.crcs_absent += 1;
    }
    if summary_crc != 0 {
        let mut h = crc32fast::Hasher::new();
        for rec in &summary_records {
            h.update(&[rec.opcode]);
            h.update(&(rec.body.len() as u64).to_le_bytes());
            h.update(&rec.body);
        }
        h.update(&[op::FOOTER]);
        h.update(&(footer.body.len() as u64).to_le_bytes());
        h.update(&footer.body[..16]);
        let calc = h.finalize();
        if calc != summary_crc {
            return Err(FormatError::BadCrc {
                offset: footer.offset,
                what: "summary",
                saved: summary_crc,
                calculated: calc,
            });
        }
    }
    check_summary(
        &summary_records,
        summary_offset_start,
        &rep,
        &chunks,
        &schemas,
        &channels,
        &metadata_offsets,
    )?;
    rep.schema_table = schemas;
    rep.channel_table = channels;
    rep.chunk_table = chunks;
    Ok(rep)
}

fn count_message(rep: &mut CheckReport, ch: u16, t: u64) {
    if rep.messages == 0 {
        rep.start_time = t;
        rep.end_time = t;
    } else {
        rep.start_time = rep.start_time.min(t);
        rep.end_time = rep.end_time.max(t);
    }
    rep.messages += 1;
    *rep.channel_messages.entry(ch).or_insert(0) += 1;
}

fn check_summary(
    recs: &[OwnedRecord],
    summary_offset_start: u64,
    rep: &CheckReport,
    chunks: &[ChunkIndex],
    schemas: &BTreeMap<u16, Schema>,
    channels: &BTreeMap<u16, Channel>,
    metadata_offsets: &BTreeSet<u64>,
) -> Result<(), FormatError> {
    let mut summary_chunks = Vec::new();
    let mut saw_offsets = false;
    for rec in recs {
        let at = rec.offset;
        match rec.opcode {
            op::SCHEMA => {
                let s = records::parse_schema(&rec.body).map_err(|e| corrupt(at, e.to_string()))?;
                if schemas.get(&s.id) != Some(&s) {
                    return Err(corrupt(
                        at,
                        format!("summary schema {} differs from the data section", s.id),
                    ));
                }
            }
            op::CHANNEL => {
                let c =
                    records::parse_channel(&rec.body).map_err(|e| corrupt(at, e.to_string()))?;
                if channels.get(&c.id) != Some(&c) {
                    return Err(corrupt(
                        at,
                        format!(
                            "summary channel {} ({}) differs from the data section",
                            c.id, c.topic
                        ),
                    ));
                }
            }
            op::STATISTICS => {
                let s =
                    records::parse_statistics(&rec.body).map_err(|e| corrupt(at, e.to_string()))?;
                let counts: BTreeMap<u16, u64> = s.channel_message_counts.clone();
                if s.message_count != rep.messages
                    || s.chunk_count as u64 != rep.chunks
                    || counts != rep.channel_messages
                    || (rep.messages > 0
                        && (s.message_start_time != rep.start_time
                            || s.message_end_time != rep.end_time))
                {
                    return Err(corrupt(at, format!(
                        "statistics say {} messages in {} chunks ({}..{}), the data section has {} in {} ({}..{})",
                        s.message_count, s.chunk_count, s.message_start_time, s.message_end_time,
                        rep.messages, rep.chunks, rep.start_time, rep.end_time
                    )));
                }
            }
            op::CHUNK_INDEX => summary_chunks.push(
                records::parse_chunk_index(&rec.body).map_err(|e| corrupt(at, e.to_string()))?,
            ),
            op::METADATA_INDEX => {
                let mut c = records::Cursor::new(&rec.body);
                let off = c
                    .u64("metadata_index.offset")
                    .map_err(|e| corrupt(at, e.to_string()))?;
                if !metadata_offsets.contains(&off) {
                    return Err(corrupt(
                        at,
                        format!("metadata index points at {off}, where no Metadata record is"),
                    ));
                }
            }
            op::SUMMARY_OFFSET => {
                saw_offsets = true;
                if rec.offset < summary_offset_start {
                    return Err(corrupt(
                        at,
                        "SummaryOffset record before the footer's summary offset start",
                    ));
                }
                let mut c = records::Cursor::new(&rec.body);
                let opcode = c
                    .u8("summary_offset.group_opcode")
                    .map_err(|e| corrupt(at, e.to_string()))?;
                let start = c
                    .u64("summary_offset.group_start")
                    .map_err(|e| corrupt(at, e.to_string()))?;
                let len = c
                    .u64("summary_offset.group_length")
                    .map_err(|e| corrupt(at, e.to_string()))?;
                // An empty group (length 0) is allowed: Python `mcap`
                // writes one for index kinds it has no records of.
                let group_ok = len == 0
                    || recs
                        .iter()
                        .filter(|r| r.offset >= start && r.offset < start.saturating_add(len))
                        .all(|r| r.opcode == opcode)
                        && recs.iter().any(|r| r.offset == start && r.opcode == opcode);
                if !group_ok {
                    return Err(corrupt(at, format!("summary offset for opcode 0x{opcode:02x} does not point at a group of such records")));
                }
            }
            _ => {}
        }
    }
    if summary_offset_start != 0 && !saw_offsets {
        return Err(corrupt(
            summary_offset_start,
            "footer names a summary offset section that is empty",
        ));
    }
    // Chunk indexes are optional too; when the summary has any, they
    // must cover every chunk.
    if !summary_chunks.is_empty() {
        if summary_chunks.len() != chunks.len() {
            return Err(corrupt(
                0,
                format!(
                    "summary has {} chunk indexes, the data section {} chunks",
                    summary_chunks.len(),
                    chunks.len()
                ),
            ));
        }
        for (s, d) in summary_chunks.iter().zip(chunks) {
            if s != d {
                return Err(corrupt(
                    d.chunk_start_offset,
                    format!("chunk index disagrees with the chunk: index {s:?}, chunk {d:?}"),
                ));
            }
        }
    }
    Ok(())
}
