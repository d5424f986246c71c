//! MCAP record encoding and decoding (spec: <https://mcap.dev/spec>).
//!
//! Every record is `opcode: u8, length: u64 LE, body`. Encoders append to a
//! `Vec<u8>` so a caller can build a whole chunk or summary in one buffer;
//! the decoder borrows from the input so a scan of a mapped or read file
//! copies nothing.

use std::collections::BTreeMap;

/// The 8 bytes that start and end every MCAP file.
pub const MAGIC: &[u8; 8] = b"\x89MCAP0\r\n";

/// Record opcodes.
pub mod op {
    /// Header.
    pub const HEADER: u8 = 0x01;
    /// Footer.
    pub const FOOTER: u8 = 0x02;
    /// Schema.
    pub const SCHEMA: u8 = 0x03;
    /// Channel.
    pub const CHANNEL: u8 = 0x04;
    /// Message.
    pub const MESSAGE: u8 = 0x05;
    /// Chunk.
    pub const CHUNK: u8 = 0x06;
    /// Message index.
    pub const MESSAGE_INDEX: u8 = 0x07;
    /// Chunk index.
    pub const CHUNK_INDEX: u8 = 0x08;
    /// Attachment.
    pub const ATTACHMENT: u8 = 0x09;
    /// Attachment index.
    pub const ATTACHMENT_INDEX: u8 = 0x0A;
    /// Statistics.
    pub const STATISTICS: u8 = 0x0B;
    /// Metadata.
    pub const METADATA: u8 = 0x0C;
    /// Metadata index.
    pub const METADATA_INDEX: u8 = 0x0D;
    /// Summary offset.
    pub const SUMMARY_OFFSET: u8 = 0x0E;
    /// Data end.
    pub const DATA_END: u8 = 0x0F;
}

/// Size of a record's opcode and length prefix.
pub const RECORD_PREFIX: usize = 9;
/// Size of a Message record's fixed fields (channel, sequence, two times).
pub const MESSAGE_FIXED: usize = 2 + 4 + 8 + 8;
/// Size of a whole Footer record including its prefix.
pub const FOOTER_RECORD_LEN: usize = RECORD_PREFIX + 8 + 8 + 4;

// ---------------------------------------------------------------- encoding

#[inline]
fn put_u16(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_le_bytes());
}
#[inline]
fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}
#[inline]
fn put_u64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn put_str(b: &mut Vec<u8>, s: &str) {
    put_u32(b, s.len() as u32);
    b.extend_from_slice(s.as_bytes());
}
fn put_bytes_u32(b: &mut Vec<u8>, s: &[u8]) {
    put_u32(b, s.len() as u32);
    b.extend_from_slice(s);
}
fn put_str_map(b: &mut Vec<u8>, m: &BTreeMap<String, String>) {
    let len: usize = m.iter().map(|(k, v)| 8 + k.len() + v.len()).sum();
    put_u32(b, len as u32);
    for (k, v) in m {
        put_str(b, k);
        put_str(b, v);
    }
}

/// Starts a record: writes the opcode and a placeholder length, returns the
/// position to pass to [`end_record`].
#[inline]
pub fn begin_record(b: &mut Vec<u8>, opcode: u8) -> usize {
    b.push(opcode);
    let at = b.len();
    put_u64(b, 0);
    at
}

/// Patches the length of a record started with [`begin_record`].
#[inline]
pub fn end_record(b: &mut [u8], at: usize) {
    let len = (b.len() - at - 8) as u64;
    b[at..at + 8].copy_from_slice(&len.to_le_bytes());
}

/// Appends a Header record.
pub fn header(b: &mut Vec<u8>, profile: &str, library: &str) {
    let at = begin_record(b, op::HEADER);
    put_str(b, profile);
    put_str(b, library);
    end_record(b, at);
}

/// Appends a Schema record.
pub fn schema(b: &mut Vec<u8>, s: &Schema) {
    let at = begin_record(b, op::SCHEMA);
    put_u16(b, s.id);
    put_str(b, &s.name);
    put_str(b, &s.encoding);
    put_bytes_u32(b, &s.data);
    end_record(b, at);
}

/// Appends a Channel record.
pub fn channel(b: &mut Vec<u8>, c: &Channel) {
    let at = begin_record(b, op::CHANNEL);
    put_u16(b, c.id);
    put_u16(b, c.schema_id);
    put_str(b, &c.topic);
    put_str(b, &c.message_encoding);
    put_str_map(b, &c.metadata);
    end_record(b, at);
}

/// Appends a Message record's prefix and fixed fields; the caller appends
/// exactly `data_len` payload bytes next. Returns nothing: the record length
/// is known up front, so no patching is needed.
#[inline]
pub fn message_head(
    b: &mut Vec<u8>,
    channel_id: u16,
    sequence: u32,
    log_time: u64,
    publish_time: u64,
    data_len: usize,
) {
    b.push(op::MESSAGE);
    put_u64(b, (MESSAGE_FIXED + data_len) as u64);
    put_u16(b, channel_id);
    put_u32(b, sequence);
    put_u64(b, log_time);
    put_u64(b, publish_time);
}

/// The fixed part of a Chunk record (everything but the records), encoded
/// with its opcode and length so the body can follow without a copy.
#[allow(clippy::too_many_arguments)]
pub fn chunk_head(
    b: &mut Vec<u8>,
    start: u64,
    end: u64,
    uncompressed_size: u64,
    uncompressed_crc: u32,
    compression: &str,
    records_len: u64,
) {
    b.push(op::CHUNK);
    let body_len = 8 + 8 + 8 + 4 + 4 + compression.len() as u64 + 8 + records_len;
    put_u64(b, body_len);
    put_u64(b, start);
    put_u64(b, end);
    put_u64(b, uncompressed_size);
    put_u32(b, uncompressed_crc);
    put_str(b, compression);
    put_u64(b, records_len);
}

/// Appends a MessageIndex record.
pub fn message_index(b: &mut Vec<u8>, channel_id: u16, entries: &[(u64, u64)]) {
    b.push(op::MESSAGE_INDEX);
    put_u64(b, (2 + 4 + entries.len() * 16) as u64);
    put_u16(b, channel_id);
    put_u32(b, (entries.len() * 16) as u32);
    for &(t, o) in entries {
        put_u64(b, t);
        put_u64(b, o);
    }
}

/// Appends a ChunkIndex record.
pub fn chunk_index(b: &mut Vec<u8>, c: &ChunkIndex) {
    let at = begin_record(b, op::CHUNK_INDEX);
    put_u64(b, c.message_start_time);
    put_u64(b, c.message_end_time);
    put_u64(b, c.chunk_start_offset);
    put_u64(b, c.chunk_length);
    put_u32(b, (c.message_index_offsets.len() * 10) as u32);
    for (&ch, &off) in &c.message_index_offsets {
        put_u16(b, ch);
        put_u64(b, off);
    }
    put_u64(b, c.message_index_length);
    put_str(b, &c.compression);
    put_u64(b, c.compressed_size);
    put_u64(b, c.uncompressed_size);
    end_record(b, at);
}

/// Appends a Statistics record.
pub fn statistics(b: &mut Vec<u8>, s: &Statistics) {
    let at = begin_record(b, op::STATISTICS);
    put_u64(b, s.message_count);
    put_u16(b, s.schema_count);
    put_u32(b, s.channel_count);
    put_u32(b, s.attachment_count);
    put_u32(b, s.metadata_count);
    put_u32(b, s.chunk_count);
    put_u64(b, s.message_start_time);
    put_u64(b, s.message_end_time);
    put_u32(b, (s.channel_message_counts.len() * 10) as u32);
    for (&ch, &n) in &s.channel_message_counts {
        put_u16(b, ch);
        put_u64(b, n);
    }
    end_record(b, at);
}

/// Appends a Metadata record.
pub fn metadata(b: &mut Vec<u8>, name: &str, m: &BTreeMap<String, String>) {
    let at = begin_record(b, op::METADATA);
    put_str(b, name);
    put_str_map(b, m);
    end_record(b, at);
}

/// Appends a MetadataIndex record.
pub fn metadata_index(b: &mut Vec<u8>, offset: u64, length: u64, name: &str) {
    let at = begin_record(b, op::METADATA_INDEX);
    put_u64(b, offset);
    put_u64(b, length);
    put_str(b, name);
    end_record(b, at);
}

/// Appends a SummaryOffset record.
pub fn summary_offset(b: &mut Vec<u8>, group_opcode: u8, start: u64, length: u64) {
    let at = begin_record(b, op::SUMMARY_OFFSET);
    b.push(group_opcode);
    put_u64(b, start);
    put_u64(b, length);
    end_record(b, at);
}

/// Appends a DataEnd record.
pub fn data_end(b: &mut Vec<u8>, crc: u32) {
    let at = begin_record(b, op::DATA_END);
    put_u32(b, crc);
    end_record(b, at);
}

/// Appends the Footer record without its CRC field value computed: the CRC
/// covers this record up to (excluding) the CRC, so callers hash first.
pub fn footer_without_crc(b: &mut Vec<u8>, summary_start: u64, summary_offset_start: u64) {
    b.push(op::FOOTER);
    put_u64(b, 8 + 8 + 4);
    put_u64(b, summary_start);
    put_u64(b, summary_offset_start);
}

// ------------------------------------------------------------------ types

/// A Schema record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schema {
    /// Schema id (non-zero).
    pub id: u16,
    /// `pkg/msg/Type`.
    pub name: String,
    /// `ros2msg`, `ros2idl`, ...
    pub encoding: String,
    /// The definition text.
    pub data: Vec<u8>,
}

/// A Channel record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    /// Channel id.
    pub id: u16,
    /// The schema its messages follow (0 = none).
    pub schema_id: u16,
    /// Topic name.
    pub topic: String,
    /// `cdr` for ROS 2.
    pub message_encoding: String,
    /// Per-channel metadata (`offered_qos_profiles`).
    pub metadata: BTreeMap<String, String>,
}

/// A ChunkIndex record.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChunkIndex {
    /// Earliest log time in the chunk.
    pub message_start_time: u64,
    /// Latest log time in the chunk.
    pub message_end_time: u64,
    /// File offset of the Chunk record's opcode.
    pub chunk_start_offset: u64,
    /// Whole Chunk record length including opcode and length prefix.
    pub chunk_length: u64,
    /// Channel id to file offset of its MessageIndex record.
    pub message_index_offsets: BTreeMap<u16, u64>,
    /// Total length of the MessageIndex records after the chunk.
    pub message_index_length: u64,
    /// Compression name.
    pub compression: String,
    /// Size of the (compressed) records field.
    pub compressed_size: u64,
    /// Size of the records once decompressed.
    pub uncompressed_size: u64,
}

/// A Statistics record.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Statistics {
    /// Messages in the file.
    pub message_count: u64,
    /// Schemas in the file.
    pub schema_count: u16,
    /// Channels in the file.
    pub channel_count: u32,
    /// Attachments in the file.
    pub attachment_count: u32,
    /// Metadata records in the file.
    pub metadata_count: u32,
    /// Chunks in the file.
    pub chunk_count: u32,
    /// Earliest log time (0 when empty).
    pub message_start_time: u64,
    /// Latest log time (0 when empty).
    pub message_end_time: u64,
    /// Messages per channel.
    pub channel_message_counts: BTreeMap<u16, u64>,
}

// ---------------------------------------------------------------- decoding

/// Why bytes could not be decoded as a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended inside a field.
    #[error("record body ends inside field `{0}`")]
    Short(&'static str),
    /// A string field is not UTF-8.
    #[error("field `{0}` is not UTF-8")]
    Utf8(&'static str),
}

/// A cursor over a record body.
#[derive(Debug, Clone, Copy)]
pub struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }
    /// Bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(DecodeError::Short(what));
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }
    /// Reads a u8.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }
    /// Reads a LE u16.
    pub fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    /// Reads a LE u32.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// Reads a LE u64.
    pub fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    /// Reads a u32-prefixed byte string.
    pub fn bytes32(&mut self, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let n = self.u32(what)? as usize;
        self.take(n, what)
    }
    /// Reads a u64-prefixed byte string.
    pub fn bytes64(&mut self, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let n = self.u64(what)?;
        let n = usize::try_from(n).map_err(|_| DecodeError::Short(what))?;
        self.take(n, what)
    }
    /// Reads a u32-prefixed UTF-8 string.
    pub fn str(&mut self, what: &'static str) -> Result<&'a str, DecodeError> {
        std::str::from_utf8(self.bytes32(what)?).map_err(|_| DecodeError::Utf8(what))
    }
    /// Reads a `Map<string, string>`.
    pub fn str_map(&mut self, what: &'static str) -> Result<BTreeMap<String, String>, DecodeError> {
        let mut inner = Cursor::new(self.bytes32(what)?);
        let mut m = BTreeMap::new();
        while !inner.buf.is_empty() {
            let k = inner.str(what)?.to_owned();
            let v = inner.str(what)?.to_owned();
            m.insert(k, v);
        }
        Ok(m)
    }
    /// Reads a `Map<u16, u64>`.
    pub fn u16_u64_map(&mut self, what: &'static str) -> Result<BTreeMap<u16, u64>, DecodeError> {
        let mut inner = Cursor::new(self.bytes32(what)?);
        let mut m = BTreeMap::new();
        while !inner.buf.is_empty() {
            let k = inner.u16(what)?;
            let v = inner.u64(what)?;
            m.insert(k, v);
        }
        Ok(m)
    }
}

/// Decodes a Schema body.
pub fn parse_schema(body: &[u8]) -> Result<Schema, DecodeError> {
    let mut c = Cursor::new(body);
    Ok(Schema {
        id: c.u16("schema.id")?,
        name: c.str("schema.name")?.to_owned(),
        encoding: c.str("schema.encoding")?.to_owned(),
        data: c.bytes32("schema.data")?.to_vec(),
    })
}

/// Decodes a Channel body.
pub fn parse_channel(body: &[u8]) -> Result<Channel, DecodeError> {
    let mut c = Cursor::new(body);
    Ok(Channel {
        id: c.u16("channel.id")?,
        schema_id: c.u16("channel.schema_id")?,
        topic: c.str("channel.topic")?.to_owned(),
        message_encoding: c.str("channel.message_encoding")?.to_owned(),
        metadata: c.str_map("channel.metadata")?,
    })
}

/// A decoded Message record, borrowing its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageRef<'a> {
    /// Channel id.
    pub channel_id: u16,
    /// Per-channel sequence number.
    pub sequence: u32,
    /// Receive time, ns since epoch.
    pub log_time: u64,
    /// Publish time, ns since epoch.
    pub publish_time: u64,
    /// The serialized message.
    pub data: &'a [u8],
}

/// Decodes a Message body.
pub fn parse_message(body: &[u8]) -> Result<MessageRef<'_>, DecodeError> {
    let mut c = Cursor::new(body);
    Ok(MessageRef {
        channel_id: c.u16("message.channel_id")?,
        sequence: c.u32("message.sequence")?,
        log_time: c.u64("message.log_time")?,
        publish_time: c.u64("message.publish_time")?,
        data: c.rest(),
    })
}

/// A decoded Chunk record, borrowing its records.
#[derive(Debug, Clone, Copy)]
pub struct ChunkRef<'a> {
    /// Earliest log time.
    pub message_start_time: u64,
    /// Latest log time.
    pub message_end_time: u64,
    /// Decompressed size of `records`.
    pub uncompressed_size: u64,
    /// CRC-32 of the decompressed records (0 = not computed).
    pub uncompressed_crc: u32,
    /// `""`, `"lz4"` or `"zstd"`.
    pub compression: &'a str,
    /// The (compressed) records.
    pub records: &'a [u8],
}

/// Decodes a Chunk body.
pub fn parse_chunk(body: &[u8]) -> Result<ChunkRef<'_>, DecodeError> {
    let mut c = Cursor::new(body);
    Ok(ChunkRef {
        message_start_time: c.u64("chunk.message_start_time")?,
        message_end_time: c.u64("chunk.message_end_time")?,
        uncompressed_size: c.u64("chunk.uncompressed_size")?,
        uncompressed_crc: c.u32("chunk.uncompressed_crc")?,
        compression: c.str("chunk.compression")?,
        records: c.bytes64("chunk.records")?,
    })
}

/// Decodes a MessageIndex body into (channel, [(log_time, offset)]).
pub fn parse_message_index(body: &[u8]) -> Result<(u16, Vec<(u64, u64)>), DecodeError> {
    let mut c = Cursor::new(body);
    let ch = c.u16("message_index.channel_id")?;
    let mut inner = Cursor::new(c.bytes32("message_index.records")?);
    let mut v = Vec::with_capacity(inner.rest().len() / 16);
    while !inner.rest().is_empty() {
        let t = inner.u64("message_index.log_time")?;
        let o = inner.u64("message_index.offset")?;
        v.push((t, o));
    }
    Ok((ch, v))
}

/// Decodes a ChunkIndex body.
pub fn parse_chunk_index(body: &[u8]) -> Result<ChunkIndex, DecodeError> {
    let mut c = Cursor::new(body);
    Ok(ChunkIndex {
        message_start_time: c.u64("chunk_index.message_start_time")?,
        message_end_time: c.u64("chunk_index.message_end_time")?,
        chunk_start_offset: c.u64("chunk_index.chunk_start_offset")?,
        chunk_length: c.u64("chunk_index.chunk_length")?,
        message_index_offsets: c.u16_u64_map("chunk_index.message_index_offsets")?,
        message_index_length: c.u64("chunk_index.message_index_length")?,
        compression: c.str("chunk_index.compression")?.to_owned(),
        compressed_size: c.u64("chunk_index.compressed_size")?,
        uncompressed_size: c.u64("chunk_index.uncompressed_size")?,
    })
}

/// Decodes a Statistics body.
pub fn parse_statistics(body: &[u8]) -> Result<Statistics, DecodeError> {
    let mut c = Cursor::new(body);
    Ok(Statistics {
        message_count: c.u64("statistics.message_count")?,
        schema_count: c.u16("statistics.schema_count")?,
        channel_count: c.u32("statistics.channel_count")?,
        attachment_count: c.u32("statistics.attachment_count")?,
        metadata_count: c.u32("statistics.metadata_count")?,
        chunk_count: c.u32("statistics.chunk_count")?,
        message_start_time: c.u64("statistics.message_start_time")?,
        message_end_time: c.u64("statistics.message_end_time")?,
        channel_message_counts: c.u16_u64_map("statistics.channel_message_counts")?,
    })
}

/// Decodes a Metadata body into (name, map).
pub fn parse_metadata(body: &[u8]) -> Result<(String, BTreeMap<String, String>), DecodeError> {
    let mut c = Cursor::new(body);
    let name = c.str("metadata.name")?.to_owned();
    Ok((name, c.str_map("metadata.metadata")?))
}

/// Decodes a Footer body into (summary_start, summary_offset_start, crc).
pub fn parse_footer(body: &[u8]) -> Result<(u64, u64, u32), DecodeError> {
    let mut c = Cursor::new(body);
    Ok((
        c.u64("footer.summary_start")?,
        c.u64("footer.summary_offset_start")?,
        c.u32("footer.summary_crc")?,
    ))
}

/// One record found by [`RecordIter`].
#[derive(Debug, Clone, Copy)]
pub struct RawRecord<'a> {
    /// Offset of the opcode, relative to the iterator's base offset.
    pub offset: u64,
    /// The opcode.
    pub opcode: u8,
    /// The body.
    pub body: &'a [u8],
}

impl RawRecord<'_> {
    /// Whole record length with prefix.
    pub fn len(&self) -> u64 {
        RECORD_PREFIX as u64 + self.body.len() as u64
    }
    /// True when the body is empty.
    pub fn is_empty(&self) -> bool {
        self.body.is_empty()
    }
}

/// Where a record sequence stopped being readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncated {
    /// Offset of the incomplete record.
    pub offset: u64,
    /// Bytes available from there.
    pub available: u64,
    /// Length the record claims (None when even the prefix is cut).
    pub claimed: Option<u64>,
}

/// Iterates `opcode, length, body` records in a byte slice; yields
/// `Err(Truncated)` once when the slice ends inside a record.
#[derive(Debug, Clone)]
pub struct RecordIter<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
    done: bool,
}

impl<'a> RecordIter<'a> {
    /// Records of `buf`, whose first byte sits at file offset `base`.
    pub fn new(buf: &'a [u8], base: u64) -> Self {
        Self {
            buf,
            pos: 0,
            base,
            done: false,
        }
    }
    /// Offset (relative to the file) of the next byte to read.
    pub fn position(&self) -> u64 {
        self.base + self.pos as u64
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<RawRecord<'a>, Truncated>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done || self.pos >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.pos..];
        let offset = self.base + self.pos as u64;
        if rest.len() < RECORD_PREFIX {
            self.done = true;
            return Some(Err(Truncated {
                offset,
                available: rest.len() as u64,
                claimed: None,
            }));
        }
        let opcode = rest[0];
        let mut l = [0u8; 8];
        l.copy_from_slice(&rest[1..9]);
        let len = u64::from_le_bytes(l);
        let avail = (rest.len() - RECORD_PREFIX) as u64;
        if len > avail {
            self.done = true;
            return Some(Err(Truncated {
                offset,
                available: rest.len() as u64,
                claimed: Some(len.saturating_add(RECORD_PREFIX as u64)),
            }));
        }
        let len = len as usize;
        let body = &rest[RECORD_PREFIX..RECORD_PREFIX + len];
        self.pos += RECORD_PREFIX + len;
        Some(Ok(RawRecord {
            offset,
            opcode,
            body,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_head_length_matches_payload() {
        let mut b = Vec::new();
        message_head(&mut b, 3, 7, 100, 99, 5);
        b.extend_from_slice(b"hello");
        let recs: Vec<_> = RecordIter::new(&b, 0).collect();
        assert_eq!(recs.len(), 1);
        let r = recs[0].as_ref().map_err(|e| format!("{e:?}")).unwrap();
        assert_eq!(r.opcode, op::MESSAGE);
        let m = parse_message(r.body).unwrap();
        assert_eq!(
            (m.channel_id, m.sequence, m.log_time, m.publish_time, m.data),
            (3, 7, 100, 99, &b"hello"[..])
        );
    }

    #[test]
    fn channel_and_schema_round_trip() {
        let mut b = Vec::new();
        let s = Schema {
            id: 1,
            name: "std_msgs/msg/String".into(),
            encoding: "ros2msg".into(),
            data: b"string data".to_vec(),
        };
        let mut md = BTreeMap::new();
        md.insert(
            "offered_qos_profiles".to_string(),
            "- history: 3".to_string(),
        );
        let c = Channel {
            id: 2,
            schema_id: 1,
            topic: "/chatter".into(),
            message_encoding: "cdr".into(),
            metadata: md,
        };
        schema(&mut b, &s);
        channel(&mut b, &c);
        let recs: Vec<_> = RecordIter::new(&b, 0).map(|r| r.unwrap()).collect();
        assert_eq!(parse_schema(recs[0].body).unwrap(), s);
        assert_eq!(parse_channel(recs[1].body).unwrap(), c);
    }

    #[test]
    fn truncated_record_is_reported_once() {
        let mut b = Vec::new();
        data_end(&mut b, 0);
        data_end(&mut b, 1);
        b.truncate(b.len() - 2);
        let v: Vec<_> = RecordIter::new(&b, 100).collect();
        assert_eq!(v.len(), 2);
        assert!(v[0].is_ok());
        let t = v[1].unwrap_err();
        assert_eq!(t.offset, 113);
        assert_eq!(t.claimed, Some(13));
    }

    #[test]
    fn chunk_index_and_statistics_round_trip() {
        let mut ci = ChunkIndex {
            message_start_time: 1,
            message_end_time: 2,
            chunk_start_offset: 3,
            chunk_length: 4,
            message_index_length: 5,
            compression: "zstd".into(),
            compressed_size: 6,
            uncompressed_size: 7,
            ..Default::default()
        };
        ci.message_index_offsets.insert(1, 99);
        ci.message_index_offsets.insert(4, 199);
        let mut st = Statistics {
            message_count: 10,
            schema_count: 1,
            channel_count: 2,
            chunk_count: 3,
            message_start_time: 5,
            message_end_time: 6,
            ..Default::default()
        };
        st.channel_message_counts.insert(1, 4);
        let mut b = Vec::new();
        chunk_index(&mut b, &ci);
        statistics(&mut b, &st);
        let recs: Vec<_> = RecordIter::new(&b, 0).map(|r| r.unwrap()).collect();
        assert_eq!(parse_chunk_index(recs[0].body).unwrap(), ci);
        assert_eq!(parse_statistics(recs[1].body).unwrap(), st);
    }
}
