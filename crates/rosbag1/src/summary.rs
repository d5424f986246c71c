//! What `rosbag info` shows: time range, message and chunk counts,
//! compression, and per topic its type, md5sum, connections and messages.
//!
//! Counts come from the chunk infos (or the scan); compression from each
//! chunk's header; per-connection first and last times from the index data
//! records after each chunk, read without decompressing anything. Where an
//! index data record is missing or disagrees, the chunk's time range stands
//! in for the connection's.

use std::collections::BTreeMap;
use std::io::{Read, Seek};

use crate::bag::{Bag, ChunkRef, ConnCount};
use crate::chunk::{ChunkHeader, Compression};
use crate::error::Result;
use crate::index::IndexData;
use crate::records::{op, RecordReader};
use crate::Time;

/// Chunks of one compression.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompressionStats {
    /// Chunks.
    pub chunks: u64,
    /// Their data bytes as stored.
    pub stored_bytes: u64,
    /// Their data bytes uncompressed (the `size` fields).
    pub uncompressed_bytes: u64,
}

/// One topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSummary {
    /// The topic.
    pub topic: String,
    /// The type of its first connection.
    pub msg_type: String,
    /// That type's md5sum.
    pub md5sum: String,
    /// Connections (publishers) on the topic.
    pub connections: u32,
    /// Whether any of them latched.
    pub latching: bool,
    /// Messages.
    pub messages: u64,
    /// Earliest message time.
    pub first: Option<Time>,
    /// Latest message time.
    pub last: Option<Time>,
}

/// A bag's summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// File size in bytes.
    pub file_len: u64,
    /// Whether the index was used (else the bag was scanned).
    pub indexed: bool,
    /// Earliest message time.
    pub start: Option<Time>,
    /// Latest message time.
    pub end: Option<Time>,
    /// Messages with a known connection.
    pub messages: u64,
    /// Chunks (a cut last chunk included).
    pub chunks: u64,
    /// Chunks by compression.
    pub compression: BTreeMap<Compression, CompressionStats>,
    /// Topics by name.
    pub topics: Vec<TopicSummary>,
}

impl Summary {
    /// The time between the first and the last message, in nanoseconds.
    pub fn duration_ns(&self) -> u64 {
        match (self.start, self.end) {
            (Some(s), Some(e)) => e.as_nanos().saturating_sub(s.as_nanos()),
            _ => 0,
        }
    }
}

/// Reads the index data records after a whole chunk; `None` when they are
/// missing or do not match the chunk's counts.
fn chunk_index<R: Read + Seek>(
    r: &mut RecordReader<R>,
    mut pos: u64,
    chunk: &ChunkRef,
) -> Option<Vec<ConnCount>> {
    let mut out = Vec::new();
    while out.len() < chunk.counts.len() {
        let head = r.read_head(pos).ok()?;
        let fields = head.fields().ok()?;
        if fields.op().ok()? != op::INDEX_DATA {
            break;
        }
        let idx = IndexData::parse(&fields, &r.read_data(&head).ok()?).ok()?;
        out.push(ConnCount {
            conn: idx.conn,
            count: idx.entries.len() as u32,
            first: idx.entries.iter().map(|e| e.time).min()?,
            last: idx.entries.iter().map(|e| e.time).max()?,
        });
        pos = head.end();
    }
    out.sort_by_key(|c| c.conn);
    let mut expected: Vec<_> = chunk.counts.iter().map(|c| (c.conn, c.count)).collect();
    expected.sort();
    let found: Vec<_> = out.iter().map(|c| (c.conn, c.count)).collect();
    (found == expected).then_some(out)
}

impl<R: Read + Seek> Bag<R> {
    /// Summarises the bag: reads every chunk's header and index data, no
    /// message data.
    pub fn summary(&mut self) -> Result<Summary> {
        let mut compression: BTreeMap<Compression, CompressionStats> = BTreeMap::new();
        let mut per_conn: BTreeMap<u32, (u64, Time, Time)> = BTreeMap::new();
        for chunk in &self.chunks {
            let head = self.reader.read_head(chunk.pos)?;
            let header = ChunkHeader::parse(&head.fields()?, chunk.pos)?;
            let stats = compression.entry(header.compression).or_default();
            stats.chunks += 1;
            stats.stored_bytes += head
                .data_len
                .min(self.reader.len().saturating_sub(head.data_pos));
            stats.uncompressed_bytes += u64::from(header.size);
            let counts = if chunk.cut {
                None
            } else {
                chunk_index(&mut self.reader, head.end(), chunk)
            };
            for c in counts.as_ref().unwrap_or(&chunk.counts) {
                let e = per_conn.entry(c.conn).or_insert((0, c.first, c.last));
                e.0 += u64::from(c.count);
                e.1 = e.1.min(c.first);
                e.2 = e.2.max(c.last);
            }
        }
        let mut topics: BTreeMap<&str, TopicSummary> = BTreeMap::new();
        for c in self.connections.values() {
            let t = topics.entry(&c.topic).or_insert_with(|| TopicSummary {
                topic: c.topic.clone(),
                msg_type: c.msg_type.clone(),
                md5sum: c.md5sum.clone(),
                connections: 0,
                latching: false,
                messages: 0,
                first: None,
                last: None,
            });
            t.connections += 1;
            t.latching |= c.latching;
            if let Some(&(n, first, last)) = per_conn.get(&c.id) {
                t.messages += n;
                t.first = Some(t.first.map_or(first, |f| f.min(first)));
                t.last = Some(t.last.map_or(last, |l| l.max(last)));
            }
        }
        let topics: Vec<TopicSummary> = topics.into_values().collect();
        Ok(Summary {
            file_len: self.reader.len(),
            indexed: self.scan_report().is_none(),
            start: topics.iter().filter_map(|t| t.first).min(),
            end: topics.iter().filter_map(|t| t.last).max(),
            messages: topics.iter().map(|t| t.messages).sum(),
            chunks: self.chunks.len() as u64,
            compression,
            topics,
        })
    }
}
