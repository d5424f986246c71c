//! The index records of v2.0: index data (op 0x04, version 1), written
//! after each chunk, one per connection in it, listing each message's time
//! and offset in the chunk's uncompressed data; and chunk info (op 0x06,
//! version 1), written at `index_pos` after the connections, one per chunk,
//! with its file offset, time range and message count per connection.

use crate::error::{Error, Result};
use crate::records::{self, op, Fields};
use crate::Time;

/// One message in an index data record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct IndexEntry {
    /// The message's time.
    pub time: Time,
    /// Offset of its message data record in the chunk's uncompressed data.
    pub offset: u32,
}

/// An index data record: one connection's messages in one chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexData {
    /// The connection.
    pub conn: u32,
    /// Its messages in the chunk.
    pub entries: Vec<IndexEntry>,
}

fn check_version(fields: &Fields<'_>, op: u8, what: &'static str) -> Result<()> {
    let version = fields.u32(op, "ver")?;
    if version != 1 {
        return Err(Error::UnsupportedVersion {
            at: fields.at(),
            what,
            version,
        });
    }
    Ok(())
}

/// `count` entries of `width` bytes must be exactly `data`: checked before
/// anything is allocated for them.
fn check_count(fields: &Fields<'_>, count: u32, width: usize, data: &[u8]) -> Result<()> {
    if (count as usize).checked_mul(width) != Some(data.len()) {
        return Err(Error::BadData {
            at: fields.at(),
            what: "the record's count does not match its data length",
        });
    }
    Ok(())
}

impl IndexData {
    /// Parses an index data record.
    pub fn parse(fields: &Fields<'_>, data: &[u8]) -> Result<IndexData> {
        check_version(fields, op::INDEX_DATA, "index data")?;
        let conn = fields.u32(op::INDEX_DATA, "conn")?;
        let count = fields.u32(op::INDEX_DATA, "count")?;
        check_count(fields, count, 12, data)?;
        let entries = data
            .chunks_exact(12)
            .map(|e| {
                let (t, o) = e.split_at(8);
                IndexEntry {
                    time: Time::from_le_bytes(&t.try_into().unwrap_or([0; 8])),
                    offset: u32::from_le_bytes(o.try_into().unwrap_or([0; 4])),
                }
            })
            .collect();
        Ok(IndexData { conn, entries })
    }

    /// Appends the index data record.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut h = Vec::new();
        records::put_field(&mut h, "op", &[op::INDEX_DATA]);
        records::put_field(&mut h, "ver", &1u32.to_le_bytes());
        records::put_field(&mut h, "conn", &self.conn.to_le_bytes());
        records::put_field(&mut h, "count", &(self.entries.len() as u32).to_le_bytes());
        let mut data = Vec::with_capacity(self.entries.len() * 12);
        for e in &self.entries {
            data.extend_from_slice(&e.time.to_le_bytes());
            data.extend_from_slice(&e.offset.to_le_bytes());
        }
        records::put_record(out, &h, &data);
    }
}

/// A chunk info record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkInfo {
    /// File offset of the chunk record.
    pub chunk_pos: u64,
    /// Earliest message time in the chunk.
    pub start_time: Time,
    /// Latest message time in the chunk.
    pub end_time: Time,
    /// Messages per connection: (conn, count).
    pub counts: Vec<(u32, u32)>,
}

impl ChunkInfo {
    /// Parses a chunk info record.
    pub fn parse(fields: &Fields<'_>, data: &[u8]) -> Result<ChunkInfo> {
        check_version(fields, op::CHUNK_INFO, "chunk info")?;
        let count = fields.u32(op::CHUNK_INFO, "count")?;
        check_count(fields, count, 8, data)?;
        Ok(ChunkInfo {
            chunk_pos: fields.u64(op::CHUNK_INFO, "chunk_pos")?,
            start_time: fields.time(op::CHUNK_INFO, "start_time")?,
            end_time: fields.time(op::CHUNK_INFO, "end_time")?,
            counts: data
                .chunks_exact(8)
                .map(|e| {
                    let (c, n) = e.split_at(4);
                    (
                        u32::from_le_bytes(c.try_into().unwrap_or([0; 4])),
                        u32::from_le_bytes(n.try_into().unwrap_or([0; 4])),
                    )
                })
                .collect(),
        })
    }

    /// Messages in the chunk.
    pub fn message_count(&self) -> u64 {
        self.counts.iter().map(|&(_, n)| u64::from(n)).sum()
    }

    /// Appends the chunk info record.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut h = Vec::new();
        records::put_field(&mut h, "op", &[op::CHUNK_INFO]);
        records::put_field(&mut h, "ver", &1u32.to_le_bytes());
        records::put_field(&mut h, "chunk_pos", &self.chunk_pos.to_le_bytes());
        records::put_field(&mut h, "start_time", &self.start_time.to_le_bytes());
        records::put_field(&mut h, "end_time", &self.end_time.to_le_bytes());
        records::put_field(&mut h, "count", &(self.counts.len() as u32).to_le_bytes());
        let mut data = Vec::with_capacity(self.counts.len() * 8);
        for (c, n) in &self.counts {
            data.extend_from_slice(&c.to_le_bytes());
            data.extend_from_slice(&n.to_le_bytes());
        }
        records::put_record(out, &h, &data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Place;

    fn reparse(bytes: &[u8]) -> (Fields<'_>, &[u8]) {
        let rec = records::split(bytes, 0, |o| Place::File(o as u64))
            .unwrap()
            .unwrap();
        (Fields::parse(rec.header, Place::File(0)).unwrap(), rec.data)
    }

    #[test]
    fn round_trips() {
        let idx = IndexData {
            conn: 3,
            entries: vec![
                IndexEntry {
                    time: Time { sec: 1, nsec: 2 },
                    offset: 0,
                },
                IndexEntry {
                    time: Time { sec: 1, nsec: 3 },
                    offset: 40,
                },
            ],
        };
        let mut out = Vec::new();
        idx.encode(&mut out);
        let (f, d) = reparse(&out);
        assert_eq!(IndexData::parse(&f, d).unwrap(), idx);

        let info = ChunkInfo {
            chunk_pos: 4117,
            start_time: Time { sec: 1, nsec: 2 },
            end_time: Time { sec: 5, nsec: 0 },
            counts: vec![(0, 10), (3, 2)],
        };
        let mut out = Vec::new();
        info.encode(&mut out);
        let (f, d) = reparse(&out);
        let back = ChunkInfo::parse(&f, d).unwrap();
        assert_eq!(back, info);
        assert_eq!(back.message_count(), 12);
    }

    #[test]
    fn a_count_that_disagrees_with_the_data_is_refused() {
        let mut h = Vec::new();
        records::put_field(&mut h, "op", &[op::INDEX_DATA]);
        records::put_field(&mut h, "ver", &1u32.to_le_bytes());
        records::put_field(&mut h, "conn", &0u32.to_le_bytes());
        records::put_field(&mut h, "count", &u32::MAX.to_le_bytes());
        let mut out = Vec::new();
        records::put_record(&mut out, &h, &[0; 12]);
        let (f, d) = reparse(&out);
        assert!(matches!(
            IndexData::parse(&f, d),
            Err(Error::BadData { .. })
        ));
    }
}
