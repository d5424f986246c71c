//! Message data records (op 0x02: `conn`, `time`; data = the serialized
//! message) and the walk over a chunk's uncompressed data, which holds
//! message data and connection records.

use crate::connection::Connection;
use crate::error::{Place, Result};
use crate::records::{self, op, Fields};
use crate::Time;

/// Appends a message data record.
pub fn encode(conn: u32, time: Time, data: &[u8], out: &mut Vec<u8>) {
    let mut h = Vec::with_capacity(40);
    records::put_field(&mut h, "op", &[op::MESSAGE_DATA]);
    records::put_field(&mut h, "conn", &conn.to_le_bytes());
    records::put_field(&mut h, "time", &time.to_le_bytes());
    records::put_record(out, &h, data);
}

/// One record of a chunk's data that a reader cares about.
#[derive(Debug)]
pub enum ChunkItem<'a> {
    /// A connection record.
    Connection(Connection),
    /// A message data record.
    Message {
        /// Offset of the record in the chunk's uncompressed data.
        offset: usize,
        /// Its connection id.
        conn: u32,
        /// Its time.
        time: Time,
        /// The serialized message.
        data: &'a [u8],
        /// Offset just past the record (and its data).
        end: usize,
    },
}

/// Walks the records of a chunk's uncompressed data. Records of other ops
/// are skipped. After an error the walk ends; [`ChunkWalk::pos`] says
/// where the broken record starts.
#[derive(Debug)]
pub struct ChunkWalk<'a> {
    buf: &'a [u8],
    pos: usize,
    chunk_pos: u64,
    done: bool,
}

impl<'a> ChunkWalk<'a> {
    /// Walks `buf`, the uncompressed data of the chunk record at `chunk_pos`.
    pub fn new(buf: &'a [u8], chunk_pos: u64) -> Self {
        ChunkWalk {
            buf,
            pos: 0,
            chunk_pos,
            done: false,
        }
    }

    /// Offset of the next record (after an error: of the broken one).
    pub fn pos(&self) -> usize {
        self.pos
    }

    fn item(&mut self) -> Result<Option<ChunkItem<'a>>> {
        let chunk = self.chunk_pos;
        let place = |o: usize| Place::Chunk {
            chunk,
            offset: o as u64,
        };
        loop {
            let Some(rec) = records::split(self.buf, self.pos, place)? else {
                return Ok(None);
            };
            let fields = Fields::parse(rec.header, place(rec.pos))?;
            let item = match fields.op()? {
                op::MESSAGE_DATA => Some(ChunkItem::Message {
                    offset: rec.pos,
                    conn: fields.u32(op::MESSAGE_DATA, "conn")?,
                    time: fields.time(op::MESSAGE_DATA, "time")?,
                    data: rec.data,
                    end: rec.end,
                }),
                op::CONNECTION => {
                    Some(ChunkItem::Connection(Connection::parse(&fields, rec.data)?))
                }
                _ => None,
            };
            self.pos = rec.end;
            if item.is_some() {
                return Ok(item);
            }
        }
    }
}

impl<'a> Iterator for ChunkWalk<'a> {
    type Item = Result<ChunkItem<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.item() {
            Ok(Some(item)) => Some(Ok(item)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_connections_and_messages_and_stops_at_a_cut() {
        let mut buf = Vec::new();
        Connection::new(
            0,
            "/a",
            "std_msgs/String",
            "992ce8a1687cec8c8bd883ec73ca41d1",
            "string data\n",
        )
        .encode(&mut buf);
        encode(0, Time { sec: 1, nsec: 5 }, b"\x02\0\0\0hi", &mut buf);
        let second = buf.len();
        encode(0, Time { sec: 2, nsec: 0 }, b"\x03\0\0\0abc", &mut buf);
        let items: Vec<_> = ChunkWalk::new(&buf, 99).collect::<Result<_>>().unwrap();
        assert_eq!(items.len(), 3);
        assert!(matches!(
            items[2],
            ChunkItem::Message { offset, conn: 0, time: Time { sec: 2, nsec: 0 }, data: b"\x03\0\0\0abc", .. } if offset == second
        ));

        let cut = &buf[..buf.len() - 2];
        let mut walk = ChunkWalk::new(cut, 99);
        assert!(walk.next().unwrap().is_ok());
        assert!(walk.next().unwrap().is_ok());
        assert!(walk.next().unwrap().is_err());
        assert!(walk.next().is_none());
        assert_eq!(walk.pos(), second);
    }
}
