//! Files written by `McapWriter` read back with the `mcap` crate (every CRC
//! validated) and pass our own `check_file`; corruptions are caught.

use std::collections::BTreeMap;
use std::io::Write;

use edgerec_format::chunk::{ChunkBuilder, ChunkCompressor, Compression};
use edgerec_format::reader::{check_file, read_summary};
use edgerec_format::records::{Channel, Schema};
use edgerec_format::writer::{McapWriter, PROFILE_ROS2};
use edgerec_format::FormatError;

fn payload(ch: u16, i: u32) -> Vec<u8> {
    let n = 16 + (i as usize * 37 + ch as usize * 11) % 3000;
    let mut v = vec![0u8; n];
    v[..4].copy_from_slice(&i.to_le_bytes());
    for (k, b) in v.iter_mut().enumerate().skip(4) {
        *b = (k as u32 ^ i) as u8;
    }
    v
}

/// Writes 3 channels x `n` messages in chunks of ~64 KiB.
fn write_file(path: &std::path::Path, compression: Compression, n: u32) -> u64 {
    let f = std::fs::File::create(path).unwrap();
    let mut w = McapWriter::new(std::io::BufWriter::new(f), PROFILE_ROS2, "edgerec-test").unwrap();
    for id in 1..=3u16 {
        w.add_schema(&Schema {
            id,
            name: format!("pkg/msg/T{id}"),
            encoding: "ros2msg".into(),
            data: format!("uint8[] data # {id}").into_bytes(),
        })
        .unwrap();
        w.add_channel(&Channel {
            id,
            schema_id: id,
            topic: format!("/t{id}"),
            message_encoding: "cdr".into(),
            metadata: BTreeMap::from([("offered_qos_profiles".to_string(), String::new())]),
        })
        .unwrap();
    }
    let mut b = ChunkBuilder::new(64 << 10);
    let mut z = ChunkCompressor::new(compression).unwrap();
    let mut t = 1_700_000_000_000_000_000u64;
    for i in 0..n {
        for ch in 1..=3u16 {
            t += 1000;
            b.push(ch, i, t, t - 10, &payload(ch, i));
            if b.len() >= 64 << 10 {
                w.write_chunk(&b.take().seal(&mut z)).unwrap();
            }
        }
    }
    if !b.is_empty() {
        w.write_chunk(&b.take().seal(&mut z)).unwrap();
    }
    w.write_metadata(
        "edgerec.drops",
        &BTreeMap::from([("/t1".to_string(), "0".to_string())]),
    )
    .unwrap();
    let (mut sink, s) = w.finish().unwrap();
    sink.flush().unwrap();
    s.file_len
}

#[test]
fn every_compression_reads_back_with_the_mcap_crate() {
    for c in [
        Compression::None,
        Compression::Lz4,
        Compression::Zstd { level: 3 },
    ] {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.mcap");
        let len = write_file(&p, c, 2000);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), len);
        let rb = edgerec_testkit::mcap_readback(&p).unwrap_or_else(|e| panic!("{c:?}: {e}"));
        assert_eq!(rb.message_count, 6000);
        assert_eq!(rb.messages.len(), 6000);
        assert!(rb.chunk_count > 10, "{c:?}: {} chunks", rb.chunk_count);
        assert_eq!(rb.metadata["edgerec.drops"]["/t1"], "0");
        for (k, m) in rb.messages.iter().enumerate() {
            let i = (k / 3) as u32;
            let ch = (k % 3) as u16 + 1;
            assert_eq!(m.topic, format!("/t{ch}"));
            assert_eq!(m.sequence, i);
            assert_eq!(m.data, payload(ch, i));
            assert_eq!(m.log_time - m.publish_time, 10);
        }
        let rep = check_file(&p).unwrap_or_else(|e| panic!("{c:?}: {e}"));
        assert_eq!(rep.messages, 6000);
        assert_eq!(rep.channel_messages[&2], 2000);
        let s = read_summary(&p).unwrap();
        assert_eq!(s.statistics.unwrap().message_count, 6000);
        assert_eq!(s.channels.len(), 3);
        assert_eq!(s.metadata["edgerec.drops"]["/t1"], "0");
        assert_eq!(s.profile, "ros2");
    }
}

#[test]
fn empty_file_is_valid() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("e.mcap");
    write_file(&p, Compression::None, 0);
    let rb = edgerec_testkit::mcap_readback(&p).unwrap();
    assert_eq!(rb.message_count, 0);
    assert_eq!(check_file(&p).unwrap().messages, 0);
}

fn corrupt_and_check(c: Compression, at: impl Fn(u64) -> u64) -> FormatError {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("c.mcap");
    let len = write_file(&p, c, 300);
    let mut bytes = std::fs::read(&p).unwrap();
    let i = at(len) as usize;
    bytes[i] ^= 0x40;
    std::fs::write(&p, &bytes).unwrap();
    check_file(&p).expect_err("a flipped bit must be found")
}

#[test]
fn a_flipped_bit_in_a_message_payload_is_a_chunk_crc_error() {
    // Byte 4000 lies inside the first chunk's records (uncompressed).
    match corrupt_and_check(Compression::None, |_| 4000) {
        FormatError::BadCrc { what: "chunk", .. } => {}
        e => panic!("unexpected: {e}"),
    }
}

#[test]
fn a_flipped_bit_in_compressed_data_is_found() {
    let e = corrupt_and_check(Compression::Zstd { level: 3 }, |_| 3000);
    assert!(
        matches!(e, FormatError::BadCrc { .. } | FormatError::Corrupt { .. }),
        "{e}"
    );
}

#[test]
fn a_flipped_bit_in_the_summary_is_a_summary_crc_error() {
    match corrupt_and_check(Compression::None, |len| len - 60) {
        FormatError::BadCrc {
            what: "summary", ..
        }
        | FormatError::Corrupt { .. } => {}
        e => panic!("unexpected: {e}"),
    }
}

#[test]
fn a_truncated_file_names_recover() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("t.mcap");
    let len = write_file(&p, Compression::Lz4, 300);
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(len / 2).unwrap();
    let e = check_file(&p).unwrap_err().to_string();
    assert!(e.contains("recover"), "{e}");
    assert!(read_summary(&p)
        .unwrap_err()
        .to_string()
        .contains("not closed"));
}
