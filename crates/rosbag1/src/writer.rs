//! Writing an indexed v2.0 bag the way rosbag does: the bag header with
//! `index_pos` 0, uncompressed chunks of about 768 KiB (rosbag's default
//! `chunk_threshold`), each connection record in the chunk of its first
//! message, index data after each chunk, and at the end the connections
//! and chunk infos, after which the bag header is rewritten in place.
//!
//! After an I/O error the writer refuses further writes: it never writes
//! records after a failed one. [`BagWriter::finish`] must be called; drop
//! leaves a bag without index (which a scan still reads).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Seek, SeekFrom, Write};

use crate::connection::Connection;
use crate::error::{Error, Result};
use crate::header::BagHeader;
use crate::index::{ChunkInfo, IndexData, IndexEntry};
use crate::message;
use crate::records::{self, op};
use crate::Time;

/// rosbag's default chunk size.
pub const DEFAULT_CHUNK_THRESHOLD: usize = 768 * 1024;

/// What [`BagWriter::finish`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteSummary {
    /// Messages.
    pub messages: u64,
    /// Chunks.
    pub chunks: u64,
    /// Connections.
    pub connections: u32,
    /// File offset of the index.
    pub index_pos: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Writes an indexed bag with uncompressed chunks.
#[derive(Debug)]
pub struct BagWriter<W: Write + Seek> {
    out: W,
    pos: u64,
    failed: bool,
    threshold: usize,
    connections: BTreeMap<u32, Connection>,
    /// Connections whose record is already in a chunk.
    introduced: BTreeSet<u32>,
    chunk: Vec<u8>,
    chunk_index: BTreeMap<u32, Vec<IndexEntry>>,
    chunk_times: Option<(Time, Time)>,
    chunk_infos: Vec<ChunkInfo>,
    messages: u64,
}

impl<W: Write + Seek> BagWriter<W> {
    /// Starts a bag on `out` (at its current position 0) with rosbag's chunk size.
    pub fn new(out: W) -> Result<Self> {
        Self::with_chunk_threshold(out, DEFAULT_CHUNK_THRESHOLD)
    }

    /// Starts a bag whose chunks are closed once they reach `threshold` bytes.
    pub fn with_chunk_threshold(out: W, threshold: usize) -> Result<Self> {
        let mut w = BagWriter {
            out,
            pos: 0,
            failed: false,
            threshold: threshold.max(1),
            connections: BTreeMap::new(),
            introduced: BTreeSet::new(),
            chunk: Vec::new(),
            chunk_index: BTreeMap::new(),
            chunk_times: None,
            chunk_infos: Vec::new(),
            messages: 0,
        };
        w.emit(&BagHeader::default().encode())?;
        Ok(w)
    }

    fn emit(&mut self, bytes: &[u8]) -> Result<()> {
        if self.failed {
            return Err(Error::WriterFailed);
        }
        match self.out.write_all(bytes) {
            Ok(()) => {
                self.pos += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.failed = true;
                Err(e.into())
            }
        }
    }

    /// Adds a connection; its id is kept as given.
    pub fn add_connection(&mut self, connection: Connection) -> Result<()> {
        if self.failed {
            return Err(Error::WriterFailed);
        }
        if self.connections.contains_key(&connection.id) {
            return Err(Error::DuplicateConnection {
                conn: connection.id,
            });
        }
        self.connections.insert(connection.id, connection);
        Ok(())
    }

    /// Writes one message of connection `conn`.
    pub fn write(&mut self, conn: u32, time: Time, data: &[u8]) -> Result<()> {
        if self.failed {
            return Err(Error::WriterFailed);
        }
        // Lengths are u32 in the file, and readers cap chunks at 1 GiB.
        let len = data.len() as u64 + self.chunk.len() as u64;
        if len > records::MAX_DATA_LEN {
            return Err(Error::TooLarge {
                at: crate::Place::File(self.pos),
                what: "message",
                len: data.len() as u64,
                limit: records::MAX_DATA_LEN - self.chunk.len() as u64,
            });
        }
        let Some(c) = self.connections.get(&conn) else {
            return Err(Error::UnknownConnection {
                at: crate::Place::File(self.pos),
                conn,
            });
        };
        if self.introduced.insert(conn) {
            c.encode(&mut self.chunk);
        }
        let offset = self.chunk.len() as u32;
        message::encode(conn, time, data, &mut self.chunk);
        self.chunk_index
            .entry(conn)
            .or_default()
            .push(IndexEntry { time, offset });
        self.chunk_times = Some(match self.chunk_times {
            Some((s, e)) => (s.min(time), e.max(time)),
            None => (time, time),
        });
        self.messages += 1;
        if self.chunk.len() >= self.threshold {
            self.close_chunk()?;
        }
        Ok(())
    }

    fn close_chunk(&mut self) -> Result<()> {
        let Some((start_time, end_time)) = self.chunk_times.take() else {
            return Ok(());
        };
        let chunk_pos = self.pos;
        let mut h = Vec::new();
        records::put_field(&mut h, "op", &[op::CHUNK]);
        records::put_field(&mut h, "compression", b"none");
        records::put_field(&mut h, "size", &(self.chunk.len() as u32).to_le_bytes());
        let mut rec = Vec::with_capacity(self.chunk.len() + h.len() + 64);
        records::put_record(&mut rec, &h, &self.chunk);
        let mut counts = Vec::new();
        for (conn, mut entries) in std::mem::take(&mut self.chunk_index) {
            // rosbag keeps each connection's entries sorted by time.
            entries.sort();
            counts.push((conn, entries.len() as u32));
            IndexData { conn, entries }.encode(&mut rec);
        }
        self.chunk.clear();
        self.emit(&rec)?;
        self.chunk_infos.push(ChunkInfo {
            chunk_pos,
            start_time,
            end_time,
            counts,
        });
        Ok(())
    }

    /// Closes the last chunk, writes the index, rewrites the bag header and
    /// flushes; gives back the sink (the caller makes it durable).
    pub fn finish(mut self) -> Result<(W, WriteSummary)> {
        self.close_chunk()?;
        let index_pos = self.pos;
        let mut rec = Vec::new();
        for c in self.connections.values() {
            c.encode(&mut rec);
        }
        for info in &self.chunk_infos {
            info.encode(&mut rec);
        }
        self.emit(&rec)?;
        let header = BagHeader {
            index_pos,
            conn_count: self.connections.len() as u32,
            chunk_count: self.chunk_infos.len() as u32,
        };
        let bytes = self.pos;
        let rewrite = (|| -> std::io::Result<()> {
            self.out.seek(SeekFrom::Start(0))?;
            self.out.write_all(&header.encode())?;
            self.out.seek(SeekFrom::Start(bytes))?;
            self.out.flush()
        })();
        if let Err(e) = rewrite {
            self.failed = true;
            return Err(e.into());
        }
        Ok((
            self.out,
            WriteSummary {
                messages: self.messages,
                chunks: self.chunk_infos.len() as u64,
                connections: header.conn_count,
                index_pos,
                bytes,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bag, Filter};
    use std::io::Cursor;

    fn conn(id: u32, topic: &str) -> Connection {
        Connection::new(
            id,
            topic,
            "std_msgs/String",
            "992ce8a1687cec8c8bd883ec73ca41d1",
            "string data\n",
        )
    }

    #[test]
    fn small_chunks_read_back_through_the_index_and_a_scan() {
        let mut w = BagWriter::with_chunk_threshold(Cursor::new(Vec::new()), 256).unwrap();
        w.add_connection(conn(0, "/a")).unwrap();
        w.add_connection(conn(7, "/b")).unwrap();
        assert!(matches!(
            w.add_connection(conn(7, "/c")),
            Err(Error::DuplicateConnection { conn: 7 })
        ));
        for i in 0..100u32 {
            let data = format!("message {i}");
            w.write(i % 2 * 7, Time { sec: i, nsec: 1 }, data.as_bytes())
                .unwrap();
        }
        assert!(matches!(
            w.write(3, Time::MIN, b""),
            Err(Error::UnknownConnection { conn: 3, .. })
        ));
        let (out, summary) = w.finish().unwrap();
        assert_eq!(summary.messages, 100);
        assert!(summary.chunks > 10);
        let bytes = out.into_inner();
        let mut indexed = Bag::from_reader(Cursor::new(bytes.clone())).unwrap();
        assert!(indexed.scan_report().is_none());
        assert_eq!(indexed.header().chunk_count as u64, summary.chunks);
        let mut scanned = Bag::scan_reader(Cursor::new(bytes)).unwrap();
        let a: Vec<_> = indexed
            .messages(&Filter::default())
            .collect::<Result<_>>()
            .unwrap();
        let b: Vec<_> = scanned
            .messages(&Filter::default())
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len(), 100);
        assert_eq!(a[99].data, b"message 99");
        assert_eq!(a[99].topic(), "/b");
        let s = indexed.summary().unwrap();
        assert_eq!(s.topics.len(), 2);
        assert_eq!(s.topics[1].first, Some(Time { sec: 1, nsec: 1 }));
        assert_eq!(s.topics[1].last, Some(Time { sec: 99, nsec: 1 }));
    }

    /// A sink that fails after `left` bytes.
    struct Failing {
        left: usize,
        inner: Cursor<Vec<u8>>,
    }

    impl Write for Failing {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if buf.len() > self.left {
                return Err(std::io::Error::other("disk full"));
            }
            self.left -= buf.len();
            self.inner.write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Seek for Failing {
        fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
            self.inner.seek(pos)
        }
    }

    #[test]
    fn after_a_failed_write_the_writer_refuses_more() {
        let sink = Failing {
            left: 5000,
            inner: Cursor::new(Vec::new()),
        };
        let mut w = BagWriter::with_chunk_threshold(sink, 100).unwrap();
        w.add_connection(conn(0, "/a")).unwrap();
        let err = (0..100)
            .map(|i| w.write(0, Time { sec: i, nsec: 0 }, &[0; 64]))
            .find_map(|r| r.err())
            .unwrap();
        assert!(matches!(err, Error::Io(_)));
        assert!(matches!(
            w.write(0, Time::MIN, b""),
            Err(Error::WriterFailed)
        ));
        assert!(matches!(w.finish(), Err(Error::WriterFailed)));
    }
}
