//! An append-only MCAP file writer that takes pre-sealed chunks.
//!
//! Unlike the `mcap` crate's writer, compression happens before the writer
//! (on a pool of threads), so this type only frames: it writes Schema and
//! Channel records into the data section before the first chunk that needs
//! them, appends sealed chunks in the order given, and at [`finish`]
//! writes DataEnd, a summary (schemas, channels, statistics, chunk indexes,
//! metadata indexes), summary offsets and the footer. It never seeks, so any
//! [`std::io::Write`] works as the sink. After a sink error it refuses
//! further writes.
//!
//! [`finish`]: McapWriter::finish

use std::collections::BTreeMap;
use std::io::Write;

use crate::chunk::SealedChunk;
use crate::records::{self, op, Channel, ChunkIndex, Schema, Statistics, MAGIC};
use crate::FormatError;

/// The MCAP header profile for ROS 2 bags.
pub const PROFILE_ROS2: &str = "ros2";

/// What the writer has put in the file so far.
#[derive(Debug, Clone, Default)]
pub struct WrittenSummary {
    /// Statistics as written to the summary.
    pub statistics: Statistics,
    /// Chunk indexes.
    pub chunk_indexes: Vec<ChunkIndex>,
    /// Schemas by id.
    pub schemas: BTreeMap<u16, Schema>,
    /// Channels by id.
    pub channels: BTreeMap<u16, Channel>,
    /// Bytes in the file.
    pub file_len: u64,
}

/// Frames an MCAP file over a sequential sink.
#[derive(Debug)]
pub struct McapWriter<W: Write> {
    sink: W,
    pos: u64,
    crc: crc32fast::Hasher,
    schemas: BTreeMap<u16, Schema>,
    channels: BTreeMap<u16, Channel>,
    stats: Statistics,
    chunk_indexes: Vec<ChunkIndex>,
    metadata_indexes: Vec<(u64, u64, String)>,
    scratch: Vec<u8>,
    failed: bool,
}

impl<W: Write> McapWriter<W> {
    /// Writes the magic and the Header record.
    pub fn new(sink: W, profile: &str, library: &str) -> Result<Self, FormatError> {
        let mut w = Self {
            sink,
            pos: 0,
            crc: crc32fast::Hasher::new(),
            schemas: BTreeMap::new(),
            channels: BTreeMap::new(),
            stats: Statistics::default(),
            chunk_indexes: Vec::new(),
            metadata_indexes: Vec::new(),
            scratch: Vec::with_capacity(4096),
            failed: false,
        };
        let mut b = Vec::with_capacity(64);
        b.extend_from_slice(MAGIC);
        records::header(&mut b, profile, library);
        w.emit(&b)?;
        Ok(w)
    }

    fn emit(&mut self, b: &[u8]) -> Result<(), FormatError> {
        if self.failed {
            return Err(FormatError::WriterFailed);
        }
        if let Err(e) = self.sink.write_all(b) {
            self.failed = true;
            return Err(FormatError::Io(e));
        }
        self.crc.update(b);
        self.pos += b.len() as u64;
        Ok(())
    }

    /// Bytes written so far.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The sink.
    pub fn sink(&self) -> &W {
        &self.sink
    }

    /// Gives up on the file and returns the sink (after a failure, to close
    /// the file at its last good block).
    pub fn into_sink(self) -> W {
        self.sink
    }

    /// Mutable access to the sink (for periodic sync ticks).
    pub fn sink_mut(&mut self) -> &mut W {
        &mut self.sink
    }

    /// True when a schema with this id is in the file.
    pub fn has_schema(&self, id: u16) -> bool {
        self.schemas.contains_key(&id)
    }

    /// True when a channel with this id is in the file.
    pub fn has_channel(&self, id: u16) -> bool {
        self.channels.contains_key(&id)
    }

    /// Writes a Schema record (once per id).
    pub fn add_schema(&mut self, s: &Schema) -> Result<(), FormatError> {
        if self.schemas.contains_key(&s.id) {
            return Ok(());
        }
        let mut b = std::mem::take(&mut self.scratch);
        b.clear();
        records::schema(&mut b, s);
        let r = self.emit(&b);
        self.scratch = b;
        r?;
        self.schemas.insert(s.id, s.clone());
        Ok(())
    }

    /// Writes a Channel record (once per id). Its schema must be added first.
    pub fn add_channel(&mut self, c: &Channel) -> Result<(), FormatError> {
        if self.channels.contains_key(&c.id) {
            return Ok(());
        }
        if c.schema_id != 0 && !self.schemas.contains_key(&c.schema_id) {
            return Err(FormatError::Inconsistent(format!(
                "channel {} ({}) refers to schema {} that was not added",
                c.id, c.topic, c.schema_id
            )));
        }
        let mut b = std::mem::take(&mut self.scratch);
        b.clear();
        records::channel(&mut b, c);
        let r = self.emit(&b);
        self.scratch = b;
        r?;
        self.channels.insert(c.id, c.clone());
        Ok(())
    }

    /// Appends a sealed chunk and its message indexes. Every channel in it
    /// must have been added.
    pub fn write_chunk(&mut self, c: &SealedChunk) -> Result<ChunkIndex, FormatError> {
        if self.failed {
            return Err(FormatError::WriterFailed);
        }
        for (ch, _) in &c.channel_counts {
            if !self.channels.contains_key(ch) {
                return Err(FormatError::Inconsistent(format!(
                    "chunk holds messages of channel {ch}, which was not added"
                )));
            }
        }
        let start = self.pos;
        for part in [&c.head, &c.body, &c.indexes] {
            if let Err(e) = self.sink.write_all(part) {
                self.failed = true;
                return Err(FormatError::Io(e));
            }
        }
        self.crc.combine(&c.crc);
        self.pos += c.total_len();
        let chunk_len = c.chunk_len();
        let index = ChunkIndex {
            message_start_time: c.start,
            message_end_time: c.end,
            chunk_start_offset: start,
            chunk_length: chunk_len,
            message_index_offsets: c
                .index_offsets
                .iter()
                .map(|&(ch, off)| (ch, start + chunk_len + off))
                .collect(),
            message_index_length: c.indexes.len() as u64,
            compression: c.compression.mcap_name().to_string(),
            compressed_size: c.body.len() as u64,
            uncompressed_size: c.uncompressed_size,
        };
        let s = &mut self.stats;
        if c.message_count > 0 {
            if s.message_count == 0 {
                s.message_start_time = c.start;
                s.message_end_time = c.end;
            } else {
                s.message_start_time = s.message_start_time.min(c.start);
                s.message_end_time = s.message_end_time.max(c.end);
            }
        }
        s.message_count += c.message_count;
        s.chunk_count += 1;
        for &(ch, n) in &c.channel_counts {
            *s.channel_message_counts.entry(ch).or_insert(0) += n;
        }
        self.chunk_indexes.push(index.clone());
        Ok(index)
    }

    /// Writes a Metadata record into the data section.
    pub fn write_metadata(
        &mut self,
        name: &str,
        map: &BTreeMap<String, String>,
    ) -> Result<(), FormatError> {
        let mut b = Vec::new();
        records::metadata(&mut b, name, map);
        let offset = self.pos;
        self.emit(&b)?;
        self.metadata_indexes
            .push((offset, b.len() as u64, name.to_string()));
        self.stats.metadata_count += 1;
        Ok(())
    }

    /// Statistics of what was written so far.
    pub fn statistics(&self) -> &Statistics {
        &self.stats
    }

    /// Writes DataEnd, the summary, summary offsets, footer and magic.
    /// Returns the sink (for the caller to close) and what was written.
    pub fn finish(mut self) -> Result<(W, WrittenSummary), FormatError> {
        let mut b = Vec::new();
        records::data_end(&mut b, self.crc.clone().finalize());
        self.emit(&b)?;

        let summary_start = self.pos;
        let mut s = Vec::with_capacity(4096 + self.chunk_indexes.len() * 96);
        let mut groups: Vec<(u8, u64, u64)> = Vec::new();
        let mut group = |s: &Vec<u8>, opcode: u8, from: usize| {
            if s.len() > from {
                groups.push((opcode, summary_start + from as u64, (s.len() - from) as u64));
            }
        };
        let from = s.len();
        for sc in self.schemas.values() {
            records::schema(&mut s, sc);
        }
        group(&s, op::SCHEMA, from);
        let from = s.len();
        for c in self.channels.values() {
            records::channel(&mut s, c);
        }
        group(&s, op::CHANNEL, from);
        self.stats.schema_count = self.schemas.len() as u16;
        self.stats.channel_count = self.channels.len() as u32;
        let from = s.len();
        records::statistics(&mut s, &self.stats);
        group(&s, op::STATISTICS, from);
        let from = s.len();
        for ci in &self.chunk_indexes {
            records::chunk_index(&mut s, ci);
        }
        group(&s, op::CHUNK_INDEX, from);
        let from = s.len();
        for (off, len, name) in &self.metadata_indexes {
            records::metadata_index(&mut s, *off, *len, name);
        }
        group(&s, op::METADATA_INDEX, from);

        let summary_offset_start = summary_start + s.len() as u64;
        for (opcode, start, len) in &groups {
            records::summary_offset(&mut s, *opcode, *start, *len);
        }
        records::footer_without_crc(&mut s, summary_start, summary_offset_start);
        let summary_crc = crc32fast::hash(&s);
        s.extend_from_slice(&summary_crc.to_le_bytes());
        s.extend_from_slice(MAGIC);
        self.emit(&s)?;
        let summary = WrittenSummary {
            statistics: self.stats,
            chunk_indexes: self.chunk_indexes,
            schemas: self.schemas,
            channels: self.channels,
            file_len: self.pos,
        };
        Ok((self.sink, summary))
    }
}
