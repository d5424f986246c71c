//! Record framing: `u32 header_len`, header fields (`u32 len`, then
//! `name=value`), `u32 data_len`, data; all little-endian.
//!
//! Two readers share one set of checks: [`split`] frames a record inside a
//! byte slice (a chunk's uncompressed data) and borrows from it, and
//! [`RecordReader`] frames records of a file through any `Read + Seek`.
//! Every length read from the bytes is compared with the bytes that remain
//! before anything is allocated for it, and headers and data have fixed
//! upper limits besides, so a flipped bit in a length costs an error, not
//! gigabytes.

use std::io::{Read, Seek, SeekFrom};

use crate::error::{Error, Place, Result};

/// The line every v2.0 bag starts with.
pub const MAGIC: &[u8; 13] = b"#ROSBAG V2.0\n";

/// Record ops (the `op` header field).
pub mod op {
    /// Message data: `conn`, `time`; data = the serialized message.
    pub const MESSAGE_DATA: u8 = 0x02;
    /// Bag header: `index_pos`, `conn_count`, `chunk_count`.
    pub const BAG_HEADER: u8 = 0x03;
    /// Index data: `ver`, `conn`, `count`; data = (time, offset) entries.
    pub const INDEX_DATA: u8 = 0x04;
    /// Chunk: `compression`, `size`; data = the (compressed) records.
    pub const CHUNK: u8 = 0x05;
    /// Chunk info: `ver`, `chunk_pos`, `start_time`, `end_time`, `count`.
    pub const CHUNK_INFO: u8 = 0x06;
    /// Connection: `conn`, `topic`; data = the connection header.
    pub const CONNECTION: u8 = 0x07;
}

/// The longest record header accepted. Real headers are tens of bytes (a
/// connection's definition is in its data, not its header).
pub const MAX_HEADER_LEN: u64 = 16 << 20;
/// The longest record data accepted, and the largest uncompressed chunk:
/// rosbag's chunks are 768 KiB unless one message is larger.
pub const MAX_DATA_LEN: u64 = 1 << 30;

/// A record's header fields in file order, borrowed from the header bytes.
#[derive(Debug, Clone)]
pub struct Fields<'a> {
    list: Vec<(&'a [u8], &'a [u8])>,
    at: Place,
}

impl<'a> Fields<'a> {
    /// Splits header bytes into `name=value` fields.
    pub fn parse(mut bytes: &'a [u8], at: Place) -> Result<Self> {
        let mut list = Vec::new();
        while !bytes.is_empty() {
            let len = take_u32(&mut bytes).ok_or(Error::BadField {
                at,
                what: "a field length is cut short",
            })? as usize;
            if len > bytes.len() {
                return Err(Error::BadField {
                    at,
                    what: "a field runs past the end of the header",
                });
            }
            let (field, rest) = bytes.split_at(len);
            bytes = rest;
            let eq = field
                .iter()
                .position(|&b| b == b'=')
                .ok_or(Error::BadField {
                    at,
                    what: "a field has no '='",
                })?;
            list.push((&field[..eq], &field[eq + 1..]));
        }
        Ok(Fields { list, at })
    }

    /// Where the record starts.
    pub fn at(&self) -> Place {
        self.at
    }

    /// All fields, in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> + '_ {
        self.list.iter().copied()
    }

    /// The value of a field; the last one when a name repeats (rosbag reads
    /// headers into a dict, so the last one wins there too).
    pub fn get(&self, name: &str) -> Option<&'a [u8]> {
        self.list
            .iter()
            .rev()
            .find(|(n, _)| *n == name.as_bytes())
            .map(|(_, v)| *v)
    }

    /// The `op` field.
    pub fn op(&self) -> Result<u8> {
        let v = self.get("op").ok_or(Error::BadField {
            at: self.at,
            what: "the record has no op field",
        })?;
        match v {
            [b] => Ok(*b),
            _ => Err(Error::FieldSize {
                at: self.at,
                field: "op",
                len: v.len(),
                expected: 1,
            }),
        }
    }

    fn fixed<const N: usize>(&self, op: u8, field: &'static str) -> Result<[u8; N]> {
        let v = self.get(field).ok_or(Error::MissingField {
            at: self.at,
            op,
            field,
        })?;
        v.try_into().map_err(|_| Error::FieldSize {
            at: self.at,
            field,
            len: v.len(),
            expected: N,
        })
    }

    /// A required `u32` field.
    pub fn u32(&self, op: u8, field: &'static str) -> Result<u32> {
        self.fixed::<4>(op, field).map(u32::from_le_bytes)
    }

    /// A required `u64` field.
    pub fn u64(&self, op: u8, field: &'static str) -> Result<u64> {
        self.fixed::<8>(op, field).map(u64::from_le_bytes)
    }

    /// A required `time` field (u32 sec, u32 nsec).
    pub fn time(&self, op: u8, field: &'static str) -> Result<crate::Time> {
        self.fixed::<8>(op, field)
            .map(|b| crate::Time::from_le_bytes(&b))
    }

    /// A required text field (lossy UTF-8: a topic with a bad byte is still
    /// shown rather than refusing the bag).
    pub fn text(&self, op: u8, field: &'static str) -> Result<String> {
        let v = self.get(field).ok_or(Error::MissingField {
            at: self.at,
            op,
            field,
        })?;
        Ok(String::from_utf8_lossy(v).into_owned())
    }
}

/// Appends one `name=value` field.
pub fn put_field(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    put_u32(out, (name.len() + 1 + value.len()) as u32);
    out.extend_from_slice(name.as_bytes());
    out.push(b'=');
    out.extend_from_slice(value);
}

/// Appends a whole record: header fields already encoded, then data.
pub fn put_record(out: &mut Vec<u8>, header: &[u8], data: &[u8]) {
    put_u32(out, header.len() as u32);
    out.extend_from_slice(header);
    put_u32(out, data.len() as u32);
    out.extend_from_slice(data);
}

/// Appends a little-endian u32.
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn take_u32(bytes: &mut &[u8]) -> Option<u32> {
    let (head, rest) = bytes.split_first_chunk::<4>()?;
    *bytes = rest;
    Some(u32::from_le_bytes(*head))
}

/// One record framed inside a byte slice.
#[derive(Debug, Clone, Copy)]
pub struct SliceRecord<'a> {
    /// Offset of the record in the slice.
    pub pos: usize,
    /// The header bytes (parse them with [`Fields::parse`]).
    pub header: &'a [u8],
    /// The data bytes.
    pub data: &'a [u8],
    /// Offset just past the record.
    pub end: usize,
}

/// Frames the record at `pos` of `buf`; `place` turns a slice offset into
/// the [`Place`] errors name. `Ok(None)` at the end of the slice.
pub fn split(
    buf: &[u8],
    pos: usize,
    place: impl Fn(usize) -> Place,
) -> Result<Option<SliceRecord<'_>>> {
    if pos >= buf.len() {
        return Ok(None);
    }
    let at = place(pos);
    let mut rest = &buf[pos..];
    let remaining = rest.len() as u64;
    let truncated = |what, need: u64| Error::Truncated {
        at,
        what,
        need,
        have: remaining,
    };
    let header_len = take_u32(&mut rest).ok_or(truncated("record header length", 4))? as usize;
    if header_len > rest.len() {
        return Err(truncated("record header", 4 + header_len as u64));
    }
    let (header, mut rest) = rest.split_at(header_len);
    let data_len =
        take_u32(&mut rest).ok_or(truncated("record data length", 8 + header_len as u64))? as usize;
    if data_len > rest.len() {
        return Err(truncated(
            "record data",
            8 + header_len as u64 + data_len as u64,
        ));
    }
    let data = &rest[..data_len];
    Ok(Some(SliceRecord {
        pos,
        header,
        data,
        end: pos + 8 + header_len + data_len,
    }))
}

/// A record's header read from a file, its data not yet read.
#[derive(Debug, Clone)]
pub struct RecordHead {
    /// File offset of the record.
    pub pos: u64,
    /// The header bytes.
    pub header: Vec<u8>,
    /// File offset of the data.
    pub data_pos: u64,
    /// The data length the record announces.
    pub data_len: u64,
}

impl RecordHead {
    /// File offset just past the record (may lie past the end of a cut file).
    pub fn end(&self) -> u64 {
        self.data_pos + self.data_len
    }

    /// The header's fields.
    pub fn fields(&self) -> Result<Fields<'_>> {
        Fields::parse(&self.header, Place::File(self.pos))
    }
}

/// Frames records of a file (or any `Read + Seek`) whose length is known.
#[derive(Debug)]
pub struct RecordReader<R> {
    inner: R,
    len: u64,
    /// Where `inner` is, to skip the seek when reading on sequentially.
    at: Option<u64>,
}

impl<R> RecordReader<R> {
    /// The length of the file.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Gives back the inner reader.
    pub fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: Read + Seek> RecordReader<R> {
    /// Wraps `inner`; its length is found by seeking to its end.
    pub fn new(mut inner: R) -> Result<Self> {
        let len = inner.seek(SeekFrom::End(0))?;
        Ok(RecordReader {
            inner,
            len,
            at: Some(len),
        })
    }

    fn seek_to(&mut self, pos: u64) -> Result<()> {
        if self.at != Some(pos) {
            self.at = None;
            self.inner.seek(SeekFrom::Start(pos))?;
            self.at = Some(pos);
        }
        Ok(())
    }

    /// Reads exactly `buf.len()` bytes at `pos`; the caller has checked
    /// that they lie inside the file.
    pub fn read_at(&mut self, pos: u64, buf: &mut [u8]) -> Result<()> {
        self.seek_to(pos)?;
        self.at = None;
        self.inner.read_exact(buf)?;
        self.at = Some(pos + buf.len() as u64);
        Ok(())
    }

    /// Reads `len` bytes at `pos`, `len` checked against the file's end and
    /// `limit` before anything is allocated.
    pub fn read_vec(&mut self, pos: u64, len: u64, what: &'static str) -> Result<Vec<u8>> {
        let have = self.len.saturating_sub(pos);
        if len > have {
            return Err(Error::Truncated {
                at: Place::File(pos),
                what,
                need: len,
                have,
            });
        }
        if len > MAX_DATA_LEN {
            return Err(Error::TooLarge {
                at: Place::File(pos),
                what,
                len,
                limit: MAX_DATA_LEN,
            });
        }
        let mut buf = vec![0u8; len as usize];
        self.read_at(pos, &mut buf)?;
        Ok(buf)
    }

    fn read_u32_at(&mut self, pos: u64, at: u64, what: &'static str) -> Result<u32> {
        let have = self.len.saturating_sub(pos);
        if have < 4 {
            return Err(Error::Truncated {
                at: Place::File(at),
                what,
                need: pos - at + 4,
                have: self.len.saturating_sub(at),
            });
        }
        let mut b = [0u8; 4];
        self.read_at(pos, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Reads the header of the record at `pos`. The data may run past the
    /// end of the file (a cut chunk): compare [`RecordHead::end`] with
    /// [`RecordReader::len`]; the header itself must be whole.
    pub fn read_head(&mut self, pos: u64) -> Result<RecordHead> {
        let header_len = u64::from(self.read_u32_at(pos, pos, "record header length")?);
        let have = self.len.saturating_sub(pos + 4);
        if header_len > have {
            return Err(Error::Truncated {
                at: Place::File(pos),
                what: "record header",
                need: 4 + header_len,
                have: have + 4,
            });
        }
        if header_len > MAX_HEADER_LEN {
            return Err(Error::TooLarge {
                at: Place::File(pos),
                what: "record header",
                len: header_len,
                limit: MAX_HEADER_LEN,
            });
        }
        let mut header = vec![0u8; header_len as usize];
        self.read_at(pos + 4, &mut header)?;
        let data_len =
            u64::from(self.read_u32_at(pos + 4 + header_len, pos, "record data length")?);
        if data_len > MAX_DATA_LEN {
            return Err(Error::TooLarge {
                at: Place::File(pos),
                what: "record data",
                len: data_len,
                limit: MAX_DATA_LEN,
            });
        }
        Ok(RecordHead {
            pos,
            header,
            data_pos: pos + 8 + header_len,
            data_len,
        })
    }

    /// Reads a whole record's data.
    pub fn read_data(&mut self, head: &RecordHead) -> Result<Vec<u8>> {
        self.read_vec(head.data_pos, head.data_len, "record data")
    }

    /// Reads what there is of a record's data (all of it unless the file
    /// was cut inside it).
    pub fn read_data_available(&mut self, head: &RecordHead) -> Result<Vec<u8>> {
        let avail = head.data_len.min(self.len.saturating_sub(head.data_pos));
        self.read_vec(head.data_pos, avail, "record data")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn record(fields: &[(&str, &[u8])], data: &[u8]) -> Vec<u8> {
        let mut h = Vec::new();
        for (n, v) in fields {
            put_field(&mut h, n, v);
        }
        let mut out = Vec::new();
        put_record(&mut out, &h, data);
        out
    }

    #[test]
    fn fields_round_trip_and_last_wins() {
        let r = record(
            &[("op", &[7]), ("topic", b"/a"), ("topic", b"/b=c")],
            b"xyz",
        );
        let rec = split(&r, 0, |o| Place::File(o as u64)).unwrap().unwrap();
        assert_eq!(rec.data, b"xyz");
        assert_eq!(rec.end, r.len());
        let f = Fields::parse(rec.header, Place::File(0)).unwrap();
        assert_eq!(f.op().unwrap(), 7);
        assert_eq!(f.text(7, "topic").unwrap(), "/b=c");
        assert!(matches!(
            f.u32(7, "conn"),
            Err(Error::MissingField { field: "conn", .. })
        ));
    }

    #[test]
    fn a_field_without_equals_is_refused() {
        let mut h = Vec::new();
        put_u32(&mut h, 3);
        h.extend_from_slice(b"abc");
        assert!(matches!(
            Fields::parse(&h, Place::File(0)),
            Err(Error::BadField { .. })
        ));
    }

    #[test]
    fn huge_lengths_are_errors_before_allocation() {
        let mut r = record(&[("op", &[2])], b"abcd");
        r[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            split(&r, 0, |o| Place::File(o as u64)),
            Err(Error::Truncated { .. })
        ));
        let mut rr = RecordReader::new(Cursor::new(r.clone())).unwrap();
        assert!(matches!(rr.read_head(0), Err(Error::Truncated { .. })));
        let mut r = record(&[("op", &[2])], b"abcd");
        let dl = r.len() - 8;
        r[dl..dl + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut rr = RecordReader::new(Cursor::new(r)).unwrap();
        assert!(matches!(rr.read_head(0), Err(Error::TooLarge { .. })));
    }

    #[test]
    fn a_cut_record_reads_its_available_data() {
        let r = record(&[("op", &[5])], b"0123456789");
        let cut = &r[..r.len() - 4];
        let mut rr = RecordReader::new(Cursor::new(cut.to_vec())).unwrap();
        let head = rr.read_head(0).unwrap();
        assert!(head.end() > rr.len());
        assert!(rr.read_data(&head).is_err());
        assert_eq!(rr.read_data_available(&head).unwrap(), b"012345");
    }
}
