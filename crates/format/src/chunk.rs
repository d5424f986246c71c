//! Chunks: built by one thread, sealed (compressed, CRC'd) by another.
//!
//! The pipeline copies each payload exactly once, into a [`ChunkBuilder`]'s
//! record buffer. Sealing turns the built records into a [`SealedChunk`]:
//! the Chunk record split into a small head and the (compressed) body so the
//! uncompressed case needs no second copy, plus the MessageIndex records that
//! follow it. A sealed chunk also carries the CRC-32 of all its bytes so the
//! file writer can extend the data-section CRC without reading them again.

use crate::records;

/// Chunk compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Records stored as they are.
    #[default]
    None,
    /// LZ4 frame format.
    Lz4,
    /// Zstandard at a level.
    Zstd {
        /// 1..=19 (22 with --ultra).
        level: i32,
    },
}

impl Compression {
    /// The name MCAP stores in the Chunk record.
    pub fn mcap_name(&self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Lz4 => "lz4",
            Compression::Zstd { .. } => "zstd",
        }
    }
    /// The compression a Chunk record names (`""`, `"lz4"`, `"zstd"`), or
    /// None for one this crate cannot decompress. A zstd level is not
    /// stored in files; 0 stands for "unknown" here.
    pub fn from_mcap_name(name: &str) -> Option<Self> {
        match name {
            "" => Some(Compression::None),
            "lz4" => Some(Compression::Lz4),
            "zstd" => Some(Compression::Zstd { level: 0 }),
            _ => None,
        }
    }
    /// The name people read (`none`, `lz4`, `zstd`).
    pub fn display_name(&self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd { .. } => "zstd",
        }
    }
}

/// Accumulates Message records of one chunk and their per-channel indexes.
#[derive(Debug)]
pub struct ChunkBuilder {
    records: Vec<u8>,
    capacity: usize,
    /// index[channel] = [(log_time, offset in records)]
    index: Vec<Vec<(u64, u64)>>,
    present: Vec<u16>,
    start: u64,
    end: u64,
    count: u64,
    spare: Vec<Vec<u8>>,
    max_spare: usize,
}

impl ChunkBuilder {
    /// A builder whose buffer starts with room for `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        Self::with_pool(capacity, 0)
    }

    /// A builder that also keeps `pool` spare buffers of `capacity` bytes
    /// (allocated now, filled later) and takes back up to that many through
    /// [`recycle`](Self::recycle), so a steady pipeline allocates no chunk
    /// buffer after start.
    pub fn with_pool(capacity: usize, pool: usize) -> Self {
        Self {
            records: Vec::with_capacity(capacity),
            capacity,
            index: Vec::new(),
            present: Vec::new(),
            start: u64::MAX,
            end: 0,
            count: 0,
            spare: (0..pool).map(|_| Vec::with_capacity(capacity)).collect(),
            max_spare: pool.max(1),
        }
    }

    /// Appends one Message record; `data` is the payload's single copy.
    #[inline]
    pub fn push(
        &mut self,
        channel_id: u16,
        sequence: u32,
        log_time: u64,
        publish_time: u64,
        data: &[u8],
    ) {
        let offset = self.records.len() as u64;
        records::message_head(
            &mut self.records,
            channel_id,
            sequence,
            log_time,
            publish_time,
            data.len(),
        );
        self.records.extend_from_slice(data);
        let ch = channel_id as usize;
        if ch >= self.index.len() {
            self.index.resize_with(ch + 1, Vec::new);
        }
        let slot = &mut self.index[ch];
        if slot.is_empty() {
            self.present.push(channel_id);
        }
        slot.push((log_time, offset));
        self.start = self.start.min(log_time);
        self.end = self.end.max(log_time);
        self.count += 1;
    }

    /// Uncompressed bytes so far.
    pub fn len(&self) -> usize {
        self.records.len()
    }
    /// True when no message was pushed since the last [`take`](Self::take).
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// Messages so far.
    pub fn message_count(&self) -> u64 {
        self.count
    }

    /// Gives a buffer back for reuse (from [`SealedChunk::into_buffers`]).
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.spare.len() < self.max_spare && buf.capacity() >= self.capacity {
            buf.clear();
            self.spare.push(buf);
        }
    }

    /// Moves the built chunk out and starts an empty one.
    pub fn take(&mut self) -> OpenChunk {
        let fresh = self
            .spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(self.capacity));
        let records = std::mem::replace(&mut self.records, fresh);
        let mut indexes = Vec::with_capacity(self.present.len());
        self.present.sort_unstable();
        for &ch in &self.present {
            indexes.push((ch, std::mem::take(&mut self.index[ch as usize])));
        }
        self.present.clear();
        let c = OpenChunk {
            records,
            indexes,
            start: if self.count == 0 { 0 } else { self.start },
            end: self.end,
            message_count: self.count,
        };
        self.start = u64::MAX;
        self.end = 0;
        self.count = 0;
        c
    }
}

/// A chunk whose records are complete but not yet compressed.
#[derive(Debug)]
pub struct OpenChunk {
    records: Vec<u8>,
    indexes: Vec<(u16, Vec<(u64, u64)>)>,
    start: u64,
    end: u64,
    message_count: u64,
}

impl OpenChunk {
    /// Messages in the chunk.
    pub fn message_count(&self) -> u64 {
        self.message_count
    }
    /// Uncompressed size.
    pub fn len(&self) -> usize {
        self.records.len()
    }
    /// True when the chunk holds no record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
    /// Channels and how many messages each has in this chunk.
    pub fn channel_counts(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.indexes.iter().map(|(c, v)| (*c, v.len() as u64))
    }

    /// Compresses (in the calling thread) and computes every CRC.
    pub fn seal(self, compressor: &mut ChunkCompressor) -> SealedChunk {
        let uncompressed_crc = crc32fast::hash(&self.records);
        let uncompressed_size = self.records.len() as u64;
        let (body, spare) = match compressor.compress(&self.records) {
            Some(c) => (c, Some(self.records)),
            None => (self.records, None),
        };
        let mut head = Vec::with_capacity(64);
        records::chunk_head(
            &mut head,
            self.start,
            self.end,
            uncompressed_size,
            uncompressed_crc,
            compressor.compression.mcap_name(),
            body.len() as u64,
        );
        let mut indexes = Vec::with_capacity(
            self.indexes
                .iter()
                .map(|(_, v)| 15 + v.len() * 16)
                .sum::<usize>(),
        );
        let mut index_offsets = Vec::with_capacity(self.indexes.len());
        let mut channel_counts = Vec::with_capacity(self.indexes.len());
        for (ch, entries) in &self.indexes {
            index_offsets.push((*ch, indexes.len() as u64));
            channel_counts.push((*ch, entries.len() as u64));
            records::message_index(&mut indexes, *ch, entries);
        }
        let mut crc = crc32fast::Hasher::new();
        crc.update(&head);
        crc.update(&body);
        crc.update(&indexes);
        SealedChunk {
            head,
            body,
            indexes,
            index_offsets,
            channel_counts,
            start: self.start,
            end: self.end,
            message_count: self.message_count,
            uncompressed_size,
            compression: compressor.compression,
            crc,
            spare,
        }
    }
}

/// Per-thread compression state (a zstd context is reused between chunks).
pub struct ChunkCompressor {
    compression: Compression,
    zstd: Option<zstd::bulk::Compressor<'static>>,
}

impl std::fmt::Debug for ChunkCompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkCompressor")
            .field("compression", &self.compression)
            .finish()
    }
}

impl ChunkCompressor {
    /// A compressor for one pool thread.
    pub fn new(compression: Compression) -> std::io::Result<Self> {
        let zstd = match compression {
            Compression::Zstd { level } => Some(zstd::bulk::Compressor::new(level)?),
            _ => None,
        };
        Ok(Self { compression, zstd })
    }

    /// Returns the compressed bytes, or None to store `raw` as it is (no
    /// compression configured, or a compressor failure: storing raw keeps
    /// the data, the chunk then says `""`).
    fn compress(&mut self, raw: &[u8]) -> Option<Vec<u8>> {
        match self.compression {
            Compression::None => None,
            Compression::Zstd { .. } => {
                let z = self.zstd.as_mut()?;
                match z.compress(raw) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        tracing::warn!("zstd failed ({e}); storing chunk uncompressed");
                        self.compression_fallback();
                        None
                    }
                }
            }
            Compression::Lz4 => {
                let mut enc =
                    lz4_flex::frame::FrameEncoder::new(Vec::with_capacity(raw.len() / 2 + 1024));
                use std::io::Write;
                match enc.write_all(raw).and_then(|_| {
                    enc.finish()
                        .map_err(|e| std::io::Error::other(e.to_string()))
                }) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        tracing::warn!("lz4 failed ({e}); storing chunk uncompressed");
                        self.compression_fallback();
                        None
                    }
                }
            }
        }
    }

    fn compression_fallback(&mut self) {
        self.compression = Compression::None;
        self.zstd = None;
    }
}

/// A compressed chunk ready to be appended to a file.
#[derive(Debug)]
pub struct SealedChunk {
    /// The Chunk record's opcode, length and fixed fields.
    pub head: Vec<u8>,
    /// The Chunk record's `records` field (compressed or raw).
    pub body: Vec<u8>,
    /// The MessageIndex records that follow the chunk.
    pub indexes: Vec<u8>,
    /// Channel id and offset of its MessageIndex record within `indexes`.
    pub index_offsets: Vec<(u16, u64)>,
    /// Channel id and message count within this chunk.
    pub channel_counts: Vec<(u16, u64)>,
    /// Earliest log time.
    pub start: u64,
    /// Latest log time.
    pub end: u64,
    /// Messages.
    pub message_count: u64,
    /// Records size before compression.
    pub uncompressed_size: u64,
    /// The compression actually used.
    pub compression: Compression,
    /// CRC-32 state over head, body and indexes in file order.
    pub crc: crc32fast::Hasher,
    spare: Option<Vec<u8>>,
}

impl SealedChunk {
    /// A chunk read back from a file, to append it to another file as it is
    /// (recovery): the Chunk record's fields, its (compressed) `records`
    /// field, and the message index entries rebuilt from its decompressed
    /// records, `(channel, [(log_time, offset in the records)])`. The
    /// caller has verified the CRC and that `start`/`end` match the
    /// messages; nothing is compressed again.
    pub fn from_parts(
        start: u64,
        end: u64,
        uncompressed_size: u64,
        uncompressed_crc: u32,
        compression: Compression,
        body: Vec<u8>,
        mut index: Vec<(u16, Vec<(u64, u64)>)>,
    ) -> SealedChunk {
        index.sort_unstable_by_key(|(ch, _)| *ch);
        let mut head = Vec::with_capacity(64);
        records::chunk_head(
            &mut head,
            start,
            end,
            uncompressed_size,
            uncompressed_crc,
            compression.mcap_name(),
            body.len() as u64,
        );
        let mut indexes =
            Vec::with_capacity(index.iter().map(|(_, v)| 15 + v.len() * 16).sum::<usize>());
        let mut index_offsets = Vec::with_capacity(index.len());
        let mut channel_counts = Vec::with_capacity(index.len());
        let mut message_count = 0;
        for (ch, entries) in &index {
            index_offsets.push((*ch, indexes.len() as u64));
            channel_counts.push((*ch, entries.len() as u64));
            message_count += entries.len() as u64;
            records::message_index(&mut indexes, *ch, entries);
        }
        let mut crc = crc32fast::Hasher::new();
        crc.update(&head);
        crc.update(&body);
        crc.update(&indexes);
        SealedChunk {
            head,
            body,
            indexes,
            index_offsets,
            channel_counts,
            start,
            end,
            message_count,
            uncompressed_size,
            compression,
            crc,
            spare: None,
        }
    }

    /// Length of the Chunk record (head + body).
    pub fn chunk_len(&self) -> u64 {
        (self.head.len() + self.body.len()) as u64
    }
    /// Bytes this chunk adds to the file.
    pub fn total_len(&self) -> u64 {
        self.chunk_len() + self.indexes.len() as u64
    }
    /// Bytes sealing allocated beyond the raw records buffer: the
    /// compressed copy (when compressed) and the index records.
    pub fn extra_memory(&self) -> usize {
        let compressed = if self.spare.is_some() {
            self.body.capacity()
        } else {
            0
        };
        compressed + self.head.capacity() + self.indexes.capacity()
    }

    /// The large buffers, for reuse by a [`ChunkBuilder`].
    pub fn into_buffers(self) -> impl Iterator<Item = Vec<u8>> {
        std::iter::once(self.body).chain(self.spare)
    }
}
