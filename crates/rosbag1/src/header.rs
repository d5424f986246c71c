//! The bag header record (op 0x03) after the magic line: where the index
//! is and how many connections and chunks it holds. rosbag writes it with
//! `index_pos` 0 when it opens a bag and rewrites it in place at close, so
//! the record is padded with spaces to a fixed 4096 bytes.

use std::io::{Read, Seek};

use crate::error::{Error, Place, Result};
use crate::records::{self, op, RecordReader, MAGIC};

/// The size of the bag header record, padding included.
pub const BAG_HEADER_RECORD_LEN: usize = 4096;

/// The bag header's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BagHeader {
    /// File offset of the first index record (connections, then chunk
    /// infos); 0 while the bag is being recorded (`.bag.active`).
    pub index_pos: u64,
    /// Connection records at `index_pos`.
    pub conn_count: u32,
    /// Chunk info records after them.
    pub chunk_count: u32,
}

impl BagHeader {
    /// Reads the magic line and the bag header record; returns the header
    /// and the file offset of the first record after it. A bag with an
    /// `encryptor` field is refused with [`Error::Encrypted`].
    pub fn read<R: Read + Seek>(r: &mut RecordReader<R>) -> Result<(BagHeader, u64)> {
        let n = (MAGIC.len() as u64).min(r.len()) as usize;
        let mut magic = vec![0u8; n];
        r.read_at(0, &mut magic)?;
        if magic != MAGIC {
            return Err(Error::BadMagic {
                found: String::from_utf8_lossy(&magic).into_owned(),
            });
        }
        let pos = MAGIC.len() as u64;
        let head = r.read_head(pos)?;
        let fields = head.fields()?;
        let found = fields.op()?;
        if found != op::BAG_HEADER {
            return Err(Error::UnexpectedOp {
                at: Place::File(pos),
                expected: "bag header",
                expected_op: op::BAG_HEADER,
                found,
            });
        }
        if let Some(enc) = fields.get("encryptor") {
            return Err(Error::Encrypted {
                encryptor: String::from_utf8_lossy(enc).into_owned(),
            });
        }
        let header = BagHeader {
            index_pos: fields.u64(op::BAG_HEADER, "index_pos")?,
            conn_count: fields.u32(op::BAG_HEADER, "conn_count")?,
            chunk_count: fields.u32(op::BAG_HEADER, "chunk_count")?,
        };
        Ok((header, head.end()))
    }

    /// The magic line and the 4096-byte bag header record.
    pub fn encode(&self) -> Vec<u8> {
        let mut h = Vec::new();
        records::put_field(&mut h, "index_pos", &self.index_pos.to_le_bytes());
        records::put_field(&mut h, "conn_count", &self.conn_count.to_le_bytes());
        records::put_field(&mut h, "chunk_count", &self.chunk_count.to_le_bytes());
        records::put_field(&mut h, "op", &[op::BAG_HEADER]);
        let padding = BAG_HEADER_RECORD_LEN - 8 - h.len();
        let mut out = Vec::with_capacity(MAGIC.len() + BAG_HEADER_RECORD_LEN);
        out.extend_from_slice(MAGIC);
        records::put_record(&mut out, &h, &vec![b' '; padding]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn encode_is_4096_bytes_and_reads_back() {
        let h = BagHeader {
            index_pos: 12345,
            conn_count: 3,
            chunk_count: 9,
        };
        let bytes = h.encode();
        assert_eq!(bytes.len(), MAGIC.len() + BAG_HEADER_RECORD_LEN);
        let mut r = RecordReader::new(Cursor::new(bytes.clone())).unwrap();
        assert_eq!(BagHeader::read(&mut r).unwrap(), (h, bytes.len() as u64));
    }

    #[test]
    fn other_files_are_refused_by_their_magic() {
        let mut r = RecordReader::new(Cursor::new(b"\x89MCAP0\r\n".to_vec())).unwrap();
        assert!(matches!(
            BagHeader::read(&mut r),
            Err(Error::BadMagic { .. })
        ));
    }
}
