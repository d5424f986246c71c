//! The messages of chosen channels, read back from closed files in file
//! order (the order they were recorded in): what tools that look inside
//! messages (`edgerec export`, the video figures of `edgerec info`) walk.
//! Chunks are found through the summary's chunk indexes and only those
//! holding a wanted channel are read and decompressed (CRC checked); a file
//! without chunk indexes is read front to back.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use crate::info::{BagInfo, FileState};
use crate::reader::{decompress_chunk, FileSummary, ReadOutcome, RecordReader};
use crate::records::{self, op, Channel, MessageRef, MAGIC};
use crate::FormatError;

fn corrupt(offset: u64, what: impl Into<String>) -> FormatError {
    FormatError::Corrupt {
        offset,
        what: what.into(),
    }
}

/// Calls `visit` for every message of `channels` in the closed file `path`
/// (whose summary is `summary`), in file order. The first error, the
/// file's or `visit`'s, ends the walk.
pub fn read_channels<E, F>(
    path: &Path,
    summary: &FileSummary,
    channels: &BTreeSet<u16>,
    mut visit: F,
) -> Result<(), E>
where
    E: From<FormatError>,
    F: FnMut(MessageRef<'_>) -> Result<(), E>,
{
    if channels.is_empty() {
        return Ok(());
    }
    if summary.chunk_indexes.is_empty() {
        return read_linear(path, channels, &mut visit);
    }
    let mut f = File::open(path).map_err(FormatError::from)?;
    let file_len = f.metadata().map_err(FormatError::from)?.len();
    let mut chunks: Vec<_> = summary
        .chunk_indexes
        .iter()
        .filter(|c| {
            // A chunk without message indexes (optional in the spec) may
            // hold any channel.
            c.message_index_offsets.is_empty()
                || c.message_index_offsets.keys().any(|k| channels.contains(k))
        })
        .collect();
    chunks.sort_by_key(|c| c.chunk_start_offset);
    let mut buf = Vec::new();
    for c in chunks {
        let at = c.chunk_start_offset;
        let room = file_len.saturating_sub(at);
        if c.chunk_length > room || c.chunk_length < records::RECORD_PREFIX as u64 {
            return Err(FormatError::LengthOutOfBounds {
                offset: at,
                field: "chunk_index.chunk_length",
                claimed: c.chunk_length,
                limit: room,
            }
            .into());
        }
        buf.resize(c.chunk_length as usize, 0);
        f.seek(SeekFrom::Start(at)).map_err(FormatError::from)?;
        f.read_exact(&mut buf).map_err(FormatError::from)?;
        if buf[0] != op::CHUNK {
            return Err(corrupt(at, "chunk index points at no Chunk record").into());
        }
        let chunk = records::parse_chunk(&buf[records::RECORD_PREFIX..])
            .map_err(|e| corrupt(at, e.to_string()))?;
        let raw = decompress_chunk(&chunk, at)?;
        visit_chunk(&raw, at, channels, &mut visit)?;
    }
    Ok(())
}

fn visit_chunk<E, F>(raw: &[u8], at: u64, channels: &BTreeSet<u16>, visit: &mut F) -> Result<(), E>
where
    E: From<FormatError>,
    F: FnMut(MessageRef<'_>) -> Result<(), E>,
{
    for inner in records::RecordIter::new(raw, 0) {
        let inner = inner.map_err(|t| {
            corrupt(
                at,
                format!("record inside chunk is cut at chunk offset {}", t.offset),
            )
        })?;
        if inner.opcode == op::MESSAGE {
            let m = records::parse_message(inner.body).map_err(|e| corrupt(at, e.to_string()))?;
            if channels.contains(&m.channel_id) {
                visit(m)?;
            }
        }
    }
    Ok(())
}

fn read_linear<E, F>(path: &Path, channels: &BTreeSet<u16>, visit: &mut F) -> Result<(), E>
where
    E: From<FormatError>,
    F: FnMut(MessageRef<'_>) -> Result<(), E>,
{
    let f = File::open(path).map_err(FormatError::from)?;
    let file_len = f.metadata().map_err(FormatError::from)?.len();
    let mut r = BufReader::with_capacity(1 << 20, f);
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)
        .map_err(|_| corrupt(0, "file shorter than the magic"))?;
    if &magic != MAGIC {
        return Err(corrupt(0, "bad leading magic: not an MCAP file").into());
    }
    let mut rr = RecordReader::new(r, MAGIC.len() as u64);
    loop {
        let left = file_len.saturating_sub(rr.position());
        let rec = match rr.next_record(left)? {
            ReadOutcome::Record(rec) => rec,
            ReadOutcome::End => return Ok(()),
            ReadOutcome::Truncated { offset, .. } => {
                return Err(corrupt(offset, "truncated record").into())
            }
        };
        match rec.opcode {
            op::MESSAGE => {
                let m = records::parse_message(&rec.body)
                    .map_err(|e| corrupt(rec.offset, e.to_string()))?;
                if channels.contains(&m.channel_id) {
                    visit(m)?;
                }
            }
            op::CHUNK => {
                let chunk = records::parse_chunk(&rec.body)
                    .map_err(|e| corrupt(rec.offset, e.to_string()))?;
                let raw = decompress_chunk(&chunk, rec.offset)?;
                visit_chunk(&raw, rec.offset, channels, visit)?;
            }
            // Nothing after the data section holds messages.
            op::DATA_END | op::FOOTER => return Ok(()),
            _ => {}
        }
    }
}

/// Calls `visit` for every message on `topics` in the closed files of a
/// bag (segment order, then file order), with its channel. Unfinished
/// (`.active`) and unreadable files are skipped: [`BagInfo::files`] says
/// which they are.
pub fn read_topics<E, F>(info: &BagInfo, topics: &BTreeSet<&str>, mut visit: F) -> Result<(), E>
where
    E: From<FormatError>,
    F: FnMut(&Channel, MessageRef<'_>) -> Result<(), E>,
{
    for file in &info.files {
        let FileState::Closed(summary) = &file.state else {
            continue;
        };
        let ids: BTreeSet<u16> = summary
            .channels
            .values()
            .filter(|c| topics.contains(c.topic.as_str()))
            .map(|c| c.id)
            .collect();
        read_channels(&file.path, summary, &ids, |m| {
            match summary.channels.get(&m.channel_id) {
                Some(ch) => visit(ch, m),
                None => Ok(()),
            }
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::{ChunkBuilder, ChunkCompressor, Compression};
    use crate::reader::read_summary;
    use crate::records::Schema;
    use crate::writer::{McapWriter, PROFILE_ROS2};

    fn write_file(dir: &Path, name: &str, compression: Compression) -> std::path::PathBuf {
        let mut w = McapWriter::new(Vec::new(), PROFILE_ROS2, "test").unwrap();
        w.add_schema(&Schema {
            id: 1,
            name: "std_msgs/msg/String".into(),
            encoding: "ros2msg".into(),
            data: b"string data".to_vec(),
        })
        .unwrap();
        for (id, topic) in [(1, "/a"), (2, "/b"), (3, "/c")] {
            w.add_channel(&Channel {
                id,
                schema_id: 1,
                topic: topic.into(),
                message_encoding: "cdr".into(),
                metadata: Default::default(),
            })
            .unwrap();
        }
        let mut z = ChunkCompressor::new(compression).unwrap();
        // Chunk 1: /a and /b interleaved; chunk 2: only /c; chunk 3: /b.
        let mut b = ChunkBuilder::new(1 << 16);
        for i in 0..4u32 {
            let ch = if i % 2 == 0 { 1 } else { 2 };
            b.push(ch, i, 10 + u64::from(i), 10, &[i as u8]);
        }
        w.write_chunk(&b.take().seal(&mut z)).unwrap();
        b.push(3, 0, 20, 20, b"c");
        w.write_chunk(&b.take().seal(&mut z)).unwrap();
        b.push(2, 9, 30, 30, b"late");
        w.write_chunk(&b.take().seal(&mut z)).unwrap();
        let (bytes, _) = w.finish().unwrap();
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    fn collect(path: &Path, ids: &[u16]) -> Vec<(u16, Vec<u8>)> {
        let s = read_summary(path).unwrap();
        let ids: BTreeSet<u16> = ids.iter().copied().collect();
        let mut out = Vec::new();
        read_channels::<FormatError, _>(path, &s, &ids, |m| {
            out.push((m.channel_id, m.data.to_vec()));
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn reads_only_the_chosen_channels_in_file_order() {
        let d = tempfile::tempdir().unwrap();
        for comp in [Compression::None, Compression::Zstd { level: 1 }] {
            let p = write_file(d.path(), "x.mcap", comp);
            assert_eq!(
                collect(&p, &[2]),
                vec![(2, vec![1]), (2, vec![3]), (2, b"late".to_vec())]
            );
            assert_eq!(collect(&p, &[3, 1]).len(), 3);
            assert!(collect(&p, &[]).is_empty());
        }
    }

    #[test]
    fn reads_a_file_without_chunk_indexes_front_to_back() {
        let d = tempfile::tempdir().unwrap();
        let p = write_file(d.path(), "x.mcap", Compression::None);
        let mut s = read_summary(&p).unwrap();
        s.chunk_indexes.clear();
        let ids: BTreeSet<u16> = [2].into();
        let mut n = 0;
        read_channels::<FormatError, _>(&p, &s, &ids, |_| {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 3);
    }

    #[test]
    fn the_visitor_error_ends_the_walk() {
        #[derive(Debug)]
        enum E {
            Stop,
            Format,
        }
        impl From<FormatError> for E {
            fn from(_: FormatError) -> Self {
                E::Format
            }
        }
        let d = tempfile::tempdir().unwrap();
        let p = write_file(d.path(), "x.mcap", Compression::None);
        let info = crate::info::inspect(d.path()).unwrap();
        let mut seen = 0;
        let r = read_topics(&info, &["/a", "/b"].into(), |ch, _| {
            seen += 1;
            if ch.topic == "/b" {
                Err(E::Stop)
            } else {
                Ok(())
            }
        });
        assert!(matches!(r, Err(E::Stop)), "{r:?}");
        assert_eq!(seen, 2);
        // A damaged chunk is an error, never a panic.
        let mut bytes = std::fs::read(&p).unwrap();
        let s = read_summary(&p).unwrap();
        let at = s.chunk_indexes[0].chunk_start_offset as usize;
        bytes[at] = op::SCHEMA;
        std::fs::write(&p, bytes).unwrap();
        let r = read_topics(&info, &["/a"].into(), |_, _| Ok::<(), E>(()));
        assert!(matches!(r, Err(E::Format)), "{r:?}");
    }
}
