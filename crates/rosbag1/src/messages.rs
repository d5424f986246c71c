//! Reading messages, one decompressed chunk at a time.
//!
//! Order: chunks in file order, and inside a chunk by time (stable, so
//! file order among equal times). rosbag fills chunks in arrival order, so
//! this is time order whenever chunks do not overlap in time
//! ([`Bag::chunks_in_time_order`]); a full time-order merge across
//! overlapping chunks would need several chunks in memory at once, which
//! this reader avoids on purpose. Chunks whose time range or connections
//! cannot match the filter are not read at all.

use std::collections::{BTreeSet, VecDeque};
use std::io::{Read, Seek};
use std::sync::Arc;

use crate::bag::{Bag, ChunkRef};
use crate::chunk::{self, ChunkHeader};
use crate::connection::Connection;
use crate::error::Result;
use crate::message::{ChunkItem, ChunkWalk};
use crate::records::RecordReader;
use crate::Time;

/// Which messages to read. The default reads all of them.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only these topics; `None` for all.
    pub topics: Option<BTreeSet<String>>,
    /// Only messages at or after this time.
    pub start: Option<Time>,
    /// Only messages at or before this time.
    pub end: Option<Time>,
}

impl Filter {
    /// Only the given topics.
    pub fn topics<I: IntoIterator<Item = S>, S: Into<String>>(topics: I) -> Filter {
        Filter {
            topics: Some(topics.into_iter().map(Into::into).collect()),
            ..Filter::default()
        }
    }

    fn admits_time(&self, t: Time) -> bool {
        self.start.is_none_or(|s| t >= s) && self.end.is_none_or(|e| t <= e)
    }
}

/// One message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its connection (topic, type, md5sum, definition, callerid).
    pub connection: Arc<Connection>,
    /// The bag time.
    pub time: Time,
    /// The serialized message (ROS 1 serialization).
    pub data: Vec<u8>,
    /// File offset of the chunk it was read from.
    pub chunk_pos: u64,
    /// Offset of its record in the chunk's uncompressed data.
    pub offset: u32,
}

impl Message {
    /// The topic.
    pub fn topic(&self) -> &str {
        &self.connection.topic
    }

    /// The bag time in nanoseconds since the epoch.
    pub fn time_ns(&self) -> u64 {
        self.time.as_nanos()
    }
}

impl<R: Read + Seek> Bag<R> {
    /// The messages `filter` admits; see the module documentation for
    /// their order. After an error the iterator ends.
    pub fn messages(&mut self, filter: &Filter) -> Messages<'_, R> {
        let conns: BTreeSet<u32> = self
            .connections
            .values()
            .filter(|c| filter.topics.as_ref().is_none_or(|t| t.contains(&c.topic)))
            .map(|c| c.id)
            .collect();
        let chunks: VecDeque<&ChunkRef> = self
            .chunks
            .iter()
            .filter(|c| {
                c.counts
                    .iter()
                    .any(|n| n.count > 0 && conns.contains(&n.conn))
                    && filter.start.is_none_or(|s| c.end_time >= s)
                    && filter.end.is_none_or(|e| c.start_time <= e)
            })
            .collect();
        Messages {
            reader: &mut self.reader,
            connections: &self.connections,
            conns,
            filter: filter.clone(),
            chunks,
            plain: Vec::new(),
            chunk_pos: 0,
            pending: VecDeque::new(),
            failed: false,
        }
    }
}

impl<R: Read + Seek> Bag<R> {
    /// (conn, time) of every whole message in one chunk, in chunk order,
    /// read from the chunk itself (decompressed, every record parsed).
    pub fn chunk_message_times(&mut self, chunk: &ChunkRef) -> Result<Vec<(u32, Time)>> {
        let head = self.reader.read_head(chunk.pos)?;
        let header = ChunkHeader::parse(&head.fields()?, chunk.pos)?;
        let plain = if chunk.cut {
            let data = self.reader.read_data_available(&head)?;
            chunk::decompress_lenient(header, data, chunk.pos).0
        } else {
            chunk::decompress(header, self.reader.read_data(&head)?, chunk.pos)?
        };
        let mut out = Vec::new();
        for item in ChunkWalk::new(&plain, chunk.pos) {
            match item {
                Ok(ChunkItem::Message { conn, time, .. }) => out.push((conn, time)),
                Ok(ChunkItem::Connection(_)) => {}
                Err(_) if chunk.cut => break,
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// A message found in the current chunk: where its data lies.
#[derive(Debug)]
struct Pending {
    time: Time,
    conn: u32,
    offset: u32,
    data: std::ops::Range<usize>,
}

/// Iterator over a bag's messages; see [`Bag::messages`].
#[derive(Debug)]
pub struct Messages<'a, R> {
    reader: &'a mut RecordReader<R>,
    connections: &'a std::collections::BTreeMap<u32, Arc<Connection>>,
    conns: BTreeSet<u32>,
    filter: Filter,
    chunks: VecDeque<&'a ChunkRef>,
    /// The current chunk's uncompressed data.
    plain: Vec<u8>,
    chunk_pos: u64,
    pending: VecDeque<Pending>,
    failed: bool,
}

impl<R: Read + Seek> Messages<'_, R> {
    /// Reads the next chunk and queues its admitted messages.
    fn load(&mut self, chunk: &ChunkRef) -> Result<()> {
        let head = self.reader.read_head(chunk.pos)?;
        let header = ChunkHeader::parse(&head.fields()?, chunk.pos)?;
        self.plain = if chunk.cut {
            let data = self.reader.read_data_available(&head)?;
            chunk::decompress_lenient(header, data, chunk.pos).0
        } else {
            chunk::decompress(header, self.reader.read_data(&head)?, chunk.pos)?
        };
        self.chunk_pos = chunk.pos;
        let mut found = Vec::new();
        for item in ChunkWalk::new(&self.plain, chunk.pos) {
            let item = match item {
                Ok(item) => item,
                // The scan kept the whole messages before the break; so do we.
                Err(_) if chunk.cut => break,
                Err(e) => return Err(e),
            };
            if let ChunkItem::Message {
                offset,
                conn,
                time,
                data,
                end,
            } = item
            {
                if self.conns.contains(&conn) && self.filter.admits_time(time) {
                    found.push(Pending {
                        time,
                        conn,
                        offset: offset as u32,
                        data: end - data.len()..end,
                    });
                }
            }
        }
        found.sort_by_key(|p| p.time);
        self.pending = found.into();
        Ok(())
    }
}

impl<R: Read + Seek> Iterator for Messages<'_, R> {
    type Item = Result<Message>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed {
                return None;
            }
            if let Some(p) = self.pending.pop_front() {
                let Some(connection) = self.connections.get(&p.conn) else {
                    continue;
                };
                return Some(Ok(Message {
                    connection: Arc::clone(connection),
                    time: p.time,
                    data: self.plain.get(p.data).unwrap_or_default().to_vec(),
                    chunk_pos: self.chunk_pos,
                    offset: p.offset,
                }));
            }
            let chunk = self.chunks.pop_front()?;
            if let Err(e) = self.load(chunk) {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }
}
