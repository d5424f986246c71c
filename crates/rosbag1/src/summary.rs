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
    pos: u64,
    chunk: &ChunkRef,
) -> Option<Vec<ConnCount>> {
    let mut out = Vec::new();
    for (conn, times) in chunk_index_times(r, pos, chunk)? {
        out.push(ConnCount {
            conn,
            count: times.len() as u32,
            first: times.iter().copied().min()?,
            last: times.iter().copied().max()?,
        });
    }
    out.sort_by_key(|c| c.conn);
    Some(out)
}

/// Message times per connection, as the index data records after a chunk
/// list them.
pub type ConnTimes = Vec<(u32, Vec<Time>)>;

/// The index data records after a whole chunk, as (conn, times); `None`
/// when they are missing or do not match the chunk's counts.
fn chunk_index_times<R: Read + Seek>(
    r: &mut RecordReader<R>,
    mut pos: u64,
    chunk: &ChunkRef,
) -> Option<ConnTimes> {
    let mut out: Vec<(u32, Vec<Time>)> = Vec::new();
    while out.len() < chunk.counts.len() {
        let head = r.read_head(pos).ok()?;
        let fields = head.fields().ok()?;
        if fields.op().ok()? != op::INDEX_DATA {
            break;
        }
        let idx = IndexData::parse(&fields, &r.read_data(&head).ok()?).ok()?;
        out.push((idx.conn, idx.entries.iter().map(|e| e.time).collect()));
        pos = head.end();
    }
    let mut found: Vec<_> = out.iter().map(|(c, t)| (*c, t.len() as u32)).collect();
    found.sort();
    let mut expected: Vec<_> = chunk.counts.iter().map(|c| (c.conn, c.count)).collect();
    expected.sort();
    (found == expected).then_some(out)
}

impl<R: Read + Seek> Bag<R> {
    /// The index data records after a whole chunk, as (conn, times), read
    /// without decompressing it; `None` when they are missing or their
    /// counts differ from the chunk info's.
    pub fn chunk_index_times(&mut self, chunk: &ChunkRef) -> Result<Option<ConnTimes>> {
        let head = self.reader.read_head(chunk.pos)?;
        Ok(chunk_index_times(&mut self.reader, head.end(), chunk))
    }

    /// Every message's time per connection, sorted: from the index data
    /// records after each chunk (no decompression), or, for a chunk without
    /// a usable index (a cut one, a scanned bag), from the chunk itself.
    /// What `rosbag info --freq` computes its median frequency from.
    pub fn message_times(&mut self) -> Result<BTreeMap<u32, Vec<Time>>> {
        let mut times: BTreeMap<u32, Vec<Time>> = BTreeMap::new();
        let chunks = self.chunks.clone();
        for chunk in &chunks {
            let from_index = if chunk.cut {
                None
            } else {
                let head = self.reader.read_head(chunk.pos)?;
                chunk_index_times(&mut self.reader, head.end(), chunk)
            };
            match from_index {
                Some(list) => {
                    for (conn, t) in list {
                        times.entry(conn).or_default().extend(t);
                    }
                }
                None => {
                    for m in self.chunk_message_times(chunk)? {
                        times.entry(m.0).or_default().push(m.1);
                    }
                }
            }
        }
        for t in times.values_mut() {
            t.sort_unstable();
        }
        Ok(times)
    }

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
