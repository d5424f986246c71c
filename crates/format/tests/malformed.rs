//! Malformed input: the files a fuzzer found crashing `check`, and cheap
//! mutations of a small valid file (huge values over every length field,
//! cuts at every byte) through `check`, `info` and `recover`. Every one
//! must end in an error or a result, never a panic or an allocation the
//! file cannot back.

use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use edgerec_format::info;
use edgerec_format::reader::{check_file, MAX_CHUNK_UNCOMPRESSED};
use edgerec_format::recover::{self, Outcome};
use edgerec_format::FormatError;

fn fuzz_find(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/fuzz")
        .join(name)
}

/// Offset of the one Chunk record in both fuzz finds.
const FUZZ_CHUNK_AT: u64 = 70;

fn assert_chunk_size_refused(e: &FormatError, claimed: u64) {
    match e {
        FormatError::LengthOutOfBounds {
            offset,
            field,
            claimed: c,
            limit,
        } => {
            assert_eq!(*offset, FUZZ_CHUNK_AT);
            assert_eq!(*field, "chunk.uncompressed_size");
            assert_eq!(*c, claimed);
            assert_eq!(*limit, MAX_CHUNK_UNCOMPRESSED);
        }
        other => panic!("expected LengthOutOfBounds, got {other:?}"),
    }
    let text = e.to_string();
    assert!(text.contains("at byte 70"), "{text}");
    assert!(text.contains("chunk.uncompressed_size"), "{text}");
}

/// `recover` and `info` on the same input: a result, no panic. `recover`
/// works on a copy beside its own temporary directory.
fn info_and_recover_survive(file: &Path) {
    info::inspect(file).expect("info reads a closed file's summary");
    let d = tempfile::tempdir().unwrap();
    let copy = d.path().join("f_0.mcap.active");
    fs::copy(file, &copy).unwrap();
    let rep = recover::recover_file(&copy).unwrap();
    assert_eq!(rep.outcome, Outcome::CorruptSkipped, "{rep}");
    let out = rep.output.expect("a recovered file");
    check_file(&out).unwrap();
}

/// Fuzz find 1: the chunk's uncompressed size is 2^63 + 13_786, past
/// `isize::MAX`; `check` panicked with `capacity overflow`.
#[test]
fn check_refuses_a_chunk_size_past_isize_max_instead_of_panicking() {
    let f = fuzz_find("check-capacity-overflow.mcap");
    let e = check_file(&f).unwrap_err();
    assert_chunk_size_refused(&e, 9_223_372_036_854_789_594);
    let all = info::check(&f).unwrap();
    assert!(all[0].result.is_err());
    info_and_recover_survive(&f);
}

/// Fuzz find 2: the chunk's uncompressed size is 2 TiB; `check` aborted
/// allocating it before decompressing 1748 bytes.
#[test]
fn check_refuses_a_2tib_chunk_size_instead_of_allocating_it() {
    let f = fuzz_find("check-alloc-2tib.mcap");
    let e = check_file(&f).unwrap_err();
    assert_chunk_size_refused(&e, 2_199_023_269_338);
    info_and_recover_survive(&f);
}

/// Fuzz find 3 (`scripts/fuzz`, `mcap_check`, 15 s in a CI run at
/// 516c21f): a Header whose profile length (`0x10000400`) runs past the
/// record. `check` skipped the Header by its record length and accepted
/// the file, while `read_summary` (and `info`) refused it
/// (`header.profile` short): the target's assertion that what `check`
/// accepts has a readable summary failed. The same field overwritten in
/// a file of the crate's own writer reproduces it.
#[test]
fn check_refuses_a_header_whose_profile_runs_past_the_record() {
    let mut bytes = small_file(&[Compression::None]);
    // Magic (8), opcode (1), record length (8), then the profile's length.
    bytes[17..21].copy_from_slice(&0x1000_0400u32.to_le_bytes());
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("f.mcap");
    fs::write(&f, &bytes).unwrap();
    assert!(edgerec_format::reader::read_summary(&f).is_err());
    let e = check_file(&f).unwrap_err().to_string();
    assert!(
        e.contains("header.profile") && e.contains("at byte 8"),
        "{e}"
    );
}

// ------------------------------------------------------------ mutations

use std::collections::BTreeMap;

use edgerec_format::chunk::{ChunkBuilder, ChunkCompressor, Compression};
use edgerec_format::records::{self, op, Channel, Schema, RECORD_PREFIX};
use edgerec_format::writer::{McapWriter, PROFILE_ROS2};

/// A small closed file from the crate's own writer: two channels, one
/// chunk per compression in `chunks`, a Metadata record; about 2 KB.
fn small_file(chunks: &[Compression]) -> Vec<u8> {
    let mut w = McapWriter::new(Vec::new(), PROFILE_ROS2, "malformed-test").unwrap();
    for id in 1..=2u16 {
        w.add_schema(&Schema {
            id,
            name: format!("pkg/msg/T{id}"),
            encoding: "ros2msg".into(),
            data: b"uint8[] data".to_vec(),
        })
        .unwrap();
        w.add_channel(&Channel {
            id,
            schema_id: id,
            topic: format!("/t{id}"),
            message_encoding: "cdr".into(),
            metadata: BTreeMap::from([("offered_qos_profiles".into(), String::new())]),
        })
        .unwrap();
    }
    let mut t = 1_000u64;
    for &compression in chunks {
        let mut b = ChunkBuilder::new(4096);
        for i in 0..3u32 {
            for ch in 1..=2u16 {
                t += 10;
                b.push(ch, i, t, t, &[ch as u8; 40]);
            }
        }
        let mut z = ChunkCompressor::new(compression).unwrap();
        w.write_chunk(&b.take().seal(&mut z)).unwrap();
    }
    w.write_metadata(
        "edgerec.drops",
        &BTreeMap::from([("/t1".into(), "0".into())]),
    )
    .unwrap();
    w.finish().unwrap().0
}

const EVERY_COMPRESSION: [Compression; 3] = [
    Compression::None,
    Compression::Lz4,
    Compression::Zstd { level: 1 },
];

/// Lengths that no small file can back: past `isize::MAX`, 2 TiB (the
/// fuzz finds), and all ones (also `u32::MAX` in a u32 field).
const HUGE: [u64; 3] = [(1 << 63) + 13_786, 2 << 40, u64::MAX];

/// File offsets of the length and offset fields of `bytes`: every
/// record's length, and the fields inside records that size or locate
/// something (string and map lengths, a chunk's sizes, the summary's
/// offsets), including the records inside the uncompressed chunk.
fn length_fields(bytes: &[u8]) -> Vec<usize> {
    fn walk(buf: &[u8], base: usize, out: &mut Vec<usize>) {
        for r in records::RecordIter::new(buf, base as u64) {
            let Ok(r) = r else { break };
            let at = r.offset as usize;
            let body = at + RECORD_PREFIX;
            out.push(at + 1);
            let u32_at = |o: usize| u32::from_le_bytes(bytes_at(buf, o - base)) as usize;
            match r.opcode {
                op::HEADER | op::METADATA => out.push(body),
                op::SCHEMA => out.push(body + 2),
                op::CHANNEL => out.push(body + 4),
                op::MESSAGE_INDEX => out.push(body + 2),
                op::CHUNK => {
                    let clen = u32_at(body + 28);
                    out.extend([body + 16, body + 28, body + 32 + clen]);
                    if clen == 0 {
                        let recs = body + 40;
                        walk(&buf[recs - base..at + r.len() as usize - base], recs, out);
                    }
                }
                op::CHUNK_INDEX => out.extend([body + 16, body + 24, body + 32]),
                op::STATISTICS => out.push(body + 38),
                op::METADATA_INDEX => out.extend([body, body + 8, body + 16]),
                op::SUMMARY_OFFSET => out.extend([body + 1, body + 9]),
                op::FOOTER => out.extend([body, body + 8]),
                _ => {}
            }
        }
    }
    fn bytes_at(buf: &[u8], o: usize) -> [u8; 4] {
        let mut a = [0u8; 4];
        a.copy_from_slice(&buf[o..o + 4]);
        a
    }
    let mut out = Vec::new();
    walk(&bytes[8..], 8, &mut out);
    out
}

/// Runs `f`, failing with `what` (the mutation) when it panics.
fn must_not_panic(what: &str, f: impl FnOnce()) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!("{what}: panicked: {msg}");
    }
}

/// `check` and `info` on `bytes`, written to `path`.
fn read_only_tools(path: &Path, bytes: &[u8], what: &str) {
    fs::write(path, bytes).unwrap();
    must_not_panic(what, || {
        let _ = check_file(path);
        let _ = info::inspect(path);
    });
}

/// `recover` on `bytes` as an `.active` segment in its own directory.
fn recover_tool(dir: &Path, bytes: &[u8], what: &str) {
    let case = dir.join("case");
    let _ = fs::remove_dir_all(&case);
    fs::create_dir(&case).unwrap();
    let p = case.join("m_0.mcap.active");
    fs::write(&p, bytes).unwrap();
    must_not_panic(what, || {
        if let Ok(rep) = recover::recover_file(&p) {
            if let Some(out) = rep.output {
                // What recovery writes is always a valid file.
                check_file(&out).unwrap_or_else(|e| panic!("recovered file invalid: {e}"));
            }
        }
    });
}

/// A scratch directory where fsync is cheap when there is one (recovery
/// fsyncs each result), else the usual temporary directory.
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap()
}

/// Fuzz find 3 (`scripts/fuzz`'s `mcap_recover`, a 6-minute run of 15
/// processes on 16 cores, minimized by libFuzzer): a zstd chunk whose
/// record body carries bytes after its records field, which the spec
/// allows (fields a later version appends). `recover` took the body's
/// tail as the records, so the file it wrote held a chunk that does not
/// decompress and `check` refused it. The rewritten chunk now holds
/// exactly the records field.
#[test]
fn recover_keeps_the_records_of_a_chunk_with_bytes_after_them() {
    let f = fuzz_find("recover-chunk-trailing-bytes.mcap");
    let d = tempfile::tempdir().unwrap();
    let copy = d.path().join("x_0.mcap.active");
    fs::copy(&f, &copy).unwrap();
    let rep = recover::recover_file(&copy).unwrap();
    let out = rep.output.as_ref().expect("a recovered file");
    let checked = check_file(out).unwrap_or_else(|e| panic!("recovered file: {e}\n{rep}"));
    assert_eq!(checked.messages, rep.messages_kept(), "{rep}");
    assert!(rep.messages_kept() > 0, "{rep}");
}

#[test]
fn huge_values_in_any_length_field_never_panic() {
    let good = small_file(&EVERY_COMPRESSION);
    check_file_bytes_ok(&good);
    let fields = length_fields(&good);
    assert!(fields.len() > 40, "found only {} fields", fields.len());
    let d = scratch();
    let path = d.path().join("m.mcap");
    for &at in &fields {
        for v in HUGE {
            let mut b = good.clone();
            // Eight bytes over a u32 field too: that field reads as its
            // low half, and the next field is damaged as well.
            let end = (at + 8).min(b.len());
            b[at..end].copy_from_slice(&v.to_le_bytes()[..end - at]);
            let what = format!("{v:#x} at byte {at}");
            read_only_tools(&path, &b, &what);
            recover_tool(d.path(), &b, &what);
        }
    }
}

/// Fields the walk above does not know (and the lengths inside the zstd
/// chunk) get the same treatment at every offset, through the tools that
/// only read. Without lz4, whose decoder costs most of a millisecond per
/// chunk in a debug build; the past-`isize::MAX` value is all ones here.
#[test]
fn huge_values_at_any_offset_never_panic_check_or_info() {
    let good = small_file(&[Compression::None, Compression::Zstd { level: 1 }]);
    let d = scratch();
    let path = d.path().join("m.mcap");
    for at in 0..good.len() - 8 {
        for v in [2 << 40, u64::MAX] {
            let mut b = good.clone();
            b[at..at + 8].copy_from_slice(&v.to_le_bytes());
            read_only_tools(&path, &b, &format!("{v:#x} at byte {at}"));
        }
    }
}

#[test]
fn a_cut_at_any_byte_never_panics() {
    let good = small_file(&EVERY_COMPRESSION);
    let d = scratch();
    let path = d.path().join("m.mcap");
    let boundaries: Vec<usize> = length_fields(&good).iter().map(|&f| f - 1).collect();
    for n in 0..good.len() {
        let what = format!("cut at byte {n} of {}", good.len());
        read_only_tools(&path, &good[..n], &what);
        // Recovery of every cut is the recover tests' job; here the cuts
        // near record starts and a spread of others.
        if n % 37 == 0 || boundaries.iter().any(|&b| n.abs_diff(b) <= 1) {
            recover_tool(d.path(), &good[..n], &what);
        }
    }
}

fn check_file_bytes_ok(bytes: &[u8]) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("good.mcap");
    fs::write(&p, bytes).unwrap();
    check_file(&p).unwrap();
}
