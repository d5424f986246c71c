//! Chunk records (op 0x05): a block of message data and connection records,
//! stored as is (`none`) or compressed with `bz2` or `lz4`, with the
//! uncompressed length in `size`. ROS's `lz4` is the LZ4 frame format as
//! roslz4 writes it (independent blocks, content checksum); both decoders
//! are pure Rust, so this crate builds for any target.
//!
//! The decoded length must equal `size`. `size` is never trusted for an
//! allocation: output grows with what the decoder actually yields, and it
//! is cut off at `size + 1` bytes and at [`MAX_DATA_LEN`].

use std::io::Read;

use crate::error::{Error, Result};
use crate::records::{op, Fields, MAX_DATA_LEN};

/// How a chunk's data is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Compression {
    /// Uncompressed.
    None,
    /// bzip2.
    Bz2,
    /// LZ4 frame format.
    Lz4,
}

impl Compression {
    /// The `compression` field's value.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Bz2 => "bz2",
            Compression::Lz4 => "lz4",
        }
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A chunk record's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// How the data is stored.
    pub compression: Compression,
    /// The uncompressed length of the data.
    pub size: u32,
}

impl ChunkHeader {
    /// Parses the header of the chunk record at file offset `pos`.
    pub fn parse(fields: &Fields<'_>, pos: u64) -> Result<ChunkHeader> {
        let name = fields.get("compression").ok_or(Error::MissingField {
            at: fields.at(),
            op: op::CHUNK,
            field: "compression",
        })?;
        let compression = match name {
            b"none" => Compression::None,
            b"bz2" => Compression::Bz2,
            b"lz4" => Compression::Lz4,
            other => {
                return Err(Error::UnknownCompression {
                    chunk: pos,
                    name: String::from_utf8_lossy(other).into_owned(),
                })
            }
        };
        Ok(ChunkHeader {
            compression,
            size: fields.u32(op::CHUNK, "size")?,
        })
    }
}

/// How much to reserve before decoding: enough for rosbag's chunks (768
/// KiB) in one go, never what a corrupt `size` asks for.
const FIRST_RESERVE: u64 = 4 << 20;

fn decode_into(
    compression: Compression,
    data: &[u8],
    limit: u64,
    out: &mut Vec<u8>,
) -> std::io::Result<usize> {
    match compression {
        Compression::None => {
            let n = (data.len() as u64).min(limit) as usize;
            out.extend_from_slice(&data[..n]);
            Ok(n)
        }
        Compression::Bz2 => bzip2::read::BzDecoder::new(data)
            .take(limit)
            .read_to_end(out),
        Compression::Lz4 => lz4_flex::frame::FrameDecoder::new(data)
            .take(limit)
            .read_to_end(out),
    }
}

/// Decompresses a whole chunk's data; the result is exactly `size` bytes.
pub fn decompress(header: ChunkHeader, data: Vec<u8>, chunk_pos: u64) -> Result<Vec<u8>> {
    let size = u64::from(header.size);
    if header.compression == Compression::None {
        if data.len() as u64 != size {
            return Err(Error::SizeMismatch {
                chunk: chunk_pos,
                declared: size,
                actual: data.len() as u64,
            });
        }
        return Ok(data);
    }
    if size > MAX_DATA_LEN {
        return Err(Error::TooLarge {
            at: crate::Place::File(chunk_pos),
            what: "uncompressed chunk",
            len: size,
            limit: MAX_DATA_LEN,
        });
    }
    let mut out = Vec::with_capacity(size.min(FIRST_RESERVE) as usize);
    decode_into(header.compression, &data, size + 1, &mut out).map_err(|source| {
        Error::Decompress {
            chunk: chunk_pos,
            compression: header.compression.name(),
            source,
        }
    })?;
    if out.len() as u64 != size {
        return Err(Error::SizeMismatch {
            chunk: chunk_pos,
            declared: size,
            actual: out.len() as u64,
        });
    }
    Ok(out)
}

/// Decompresses what there is of a cut or damaged chunk: everything a
/// streaming decoder yields before the data ends or turns bad, at most
/// `size` bytes, and the error that ended it, if any. For `none` that is
/// the data itself; bz2 yields whole 900 KB blocks and lz4 whole frame
/// blocks, so a cut compressed chunk often yields nothing.
pub fn decompress_lenient(
    header: ChunkHeader,
    data: Vec<u8>,
    chunk_pos: u64,
) -> (Vec<u8>, Option<Error>) {
    let size = u64::from(header.size);
    let limit = size.min(MAX_DATA_LEN);
    let (mut out, failed) = if header.compression == Compression::None {
        (data, None)
    } else {
        let mut out =
            Vec::with_capacity(limit.min(FIRST_RESERVE).min(data.len() as u64 * 4) as usize);
        let failed = decode_into(header.compression, &data, limit + 1, &mut out)
            .err()
            .map(|source| Error::Decompress {
                chunk: chunk_pos,
                compression: header.compression.name(),
                source,
            });
        (out, failed)
    };
    let actual = out.len() as u64;
    let error = failed.or_else(|| {
        (actual != size).then_some(Error::SizeMismatch {
            chunk: chunk_pos,
            declared: size,
            actual,
        })
    });
    out.truncate(limit as usize);
    (out, error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn lz4(data: &[u8]) -> Vec<u8> {
        let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn bz2(data: &[u8]) -> Vec<u8> {
        let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn each_compression_decodes_to_its_size() {
        let plain: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for (compression, data) in [
            (Compression::None, plain.clone()),
            (Compression::Bz2, bz2(&plain)),
            (Compression::Lz4, lz4(&plain)),
        ] {
            let h = ChunkHeader {
                compression,
                size: plain.len() as u32,
            };
            assert_eq!(decompress(h, data.clone(), 0).unwrap(), plain);
            let wrong = ChunkHeader {
                size: h.size - 1,
                ..h
            };
            assert!(
                matches!(decompress(wrong, data, 0), Err(Error::SizeMismatch { .. })),
                "{compression}"
            );
        }
    }

    #[test]
    fn a_huge_size_is_refused_without_allocating_it() {
        let h = ChunkHeader {
            compression: Compression::Lz4,
            size: u32::MAX,
        };
        assert!(matches!(
            decompress(h, lz4(b"abc"), 7),
            Err(Error::TooLarge { .. })
        ));
        let h = ChunkHeader {
            compression: Compression::Bz2,
            size: (MAX_DATA_LEN - 1) as u32,
        };
        assert!(matches!(
            decompress(h, bz2(b"abc"), 7),
            Err(Error::SizeMismatch { actual: 3, .. })
        ));
    }

    #[test]
    fn garbage_is_a_decompress_error() {
        let h = ChunkHeader {
            compression: Compression::Lz4,
            size: 10,
        };
        assert!(matches!(
            decompress(h, b"not lz4 at all".to_vec(), 0),
            Err(Error::Decompress { .. })
        ));
        let h = ChunkHeader {
            compression: Compression::Bz2,
            size: 10,
        };
        assert!(matches!(
            decompress(h, b"not bz2 at all".to_vec(), 0),
            Err(Error::Decompress { .. })
        ));
    }

    #[test]
    fn a_cut_lz4_chunk_yields_its_whole_blocks() {
        let plain: Vec<u8> = (0..3_000_000u32).map(|i| (i % 7) as u8).collect();
        let mut e = lz4_flex::frame::FrameEncoder::with_frame_info(
            lz4_flex::frame::FrameInfo::new().block_size(lz4_flex::frame::BlockSize::Max64KB),
            Vec::new(),
        );
        e.write_all(&plain).unwrap();
        let data = e.finish().unwrap();
        let h = ChunkHeader {
            compression: Compression::Lz4,
            size: plain.len() as u32,
        };
        let (part, err) = decompress_lenient(h, data[..data.len() / 2].to_vec(), 0);
        assert!(err.is_some());
        assert!(!part.is_empty());
        assert_eq!(part.len() % (64 * 1024), 0);
        assert_eq!(&plain[..part.len()], &part[..]);
    }
}
