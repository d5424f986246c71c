//! Recovery of cut, zero-padded and corrupted files: every result passes
//! our `check_file` and the `mcap` crate's read-back with every CRC; what
//! is kept is exactly the complete chunks before the damage, per channel a
//! gap-free prefix; the exit code says whether a corrupt record was
//! skipped; recovery converges when run again or after an interruption, and
//! never writes the original.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use edgerec_format::chunk::{ChunkBuilder, ChunkCompressor, Compression};
use edgerec_format::reader::check_file;
use edgerec_format::records::{Channel, Schema};
use edgerec_format::recover::{self, Dropped, Outcome, RecoveryReport};
use edgerec_format::writer::{McapWriter, PROFILE_ROS2};

const CHANNELS: u16 = 3;
const PER_CHANNEL: u32 = 100;

/// A chunk as written: where it is and how many messages of each channel
/// the file holds up to and including it.
#[derive(Debug, Clone)]
struct ChunkAt {
    start: u64,
    /// End of the Chunk record (its message indexes follow).
    record_end: u64,
    /// End of its message indexes.
    end: u64,
    /// Messages per channel id in this chunk and all before it.
    cumulative: BTreeMap<u16, u64>,
}

#[derive(Debug, Clone)]
struct Written {
    bytes: Vec<u8>,
    chunks: Vec<ChunkAt>,
    /// End of the Header record.
    header_end: u64,
    /// Offset of the DataEnd record.
    data_end: u64,
}

fn topic(ch: u16) -> String {
    format!("/t{ch}")
}

/// Incompressible payload of 200..1400 bytes that carries its sequence.
fn payload(ch: u16, i: u32) -> Vec<u8> {
    let n = 200 + (i as usize * 389 + ch as usize * 101) % 1200;
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ ((ch as u64) << 32 | i as u64);
    let mut v: Vec<u8> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    v[..4].copy_from_slice(&i.to_le_bytes());
    v
}

/// 3 channels x 100 messages in chunks of about 16 KiB.
fn write_file(compression: Compression) -> Written {
    let mut w = McapWriter::new(Vec::new(), PROFILE_ROS2, "edgerec-test").unwrap();
    let header_end = w.position();
    for id in 1..=CHANNELS {
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
            topic: topic(id),
            message_encoding: "cdr".into(),
            metadata: BTreeMap::from([("offered_qos_profiles".to_string(), String::new())]),
        })
        .unwrap();
    }
    let mut b = ChunkBuilder::new(16 << 10);
    let mut z = ChunkCompressor::new(compression).unwrap();
    let mut chunks = Vec::new();
    let mut cumulative: BTreeMap<u16, u64> = BTreeMap::new();
    let mut t = 1_700_000_000_000_000_000u64;
    let mut flush = |b: &mut ChunkBuilder, w: &mut McapWriter<Vec<u8>>| {
        let sealed = b.take().seal(&mut z);
        for &(ch, n) in &sealed.channel_counts {
            *cumulative.entry(ch).or_insert(0) += n;
        }
        let ci = w.write_chunk(&sealed).unwrap();
        chunks.push(ChunkAt {
            start: ci.chunk_start_offset,
            record_end: ci.chunk_start_offset + ci.chunk_length,
            end: ci.chunk_start_offset + ci.chunk_length + ci.message_index_length,
            cumulative: cumulative.clone(),
        });
    };
    for i in 0..PER_CHANNEL {
        for ch in 1..=CHANNELS {
            t += 1000;
            b.push(ch, i, t, t - 10, &payload(ch, i));
            if b.len() >= 16 << 10 {
                flush(&mut b, &mut w);
            }
        }
    }
    if !b.is_empty() {
        flush(&mut b, &mut w);
    }
    let data_end = w.position();
    let (bytes, _) = w.finish().unwrap();
    Written {
        bytes,
        chunks,
        header_end,
        data_end,
    }
}

/// Messages per channel of the chunks that end (record, not indexes) at or
/// before `cut`.
fn expected_before(w: &Written, cut: u64) -> BTreeMap<u16, u64> {
    w.chunks
        .iter()
        .rev()
        .find(|c| c.record_end <= cut)
        .map(|c| c.cumulative.clone())
        .unwrap_or_default()
}

/// Writes `bytes` as `<dir>/<name>.mcap.active`.
fn active(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(format!("{name}.mcap.active"));
    fs::write(&p, bytes).unwrap();
    p
}

/// Asserts the recovered file is valid for both readers and holds exactly
/// `want` messages per channel, each a gap-free prefix of its sequence,
/// with the payloads written.
fn assert_recovered(r: &RecoveryReport, want: &BTreeMap<u16, u64>, what: &str) {
    let out = r
        .output
        .as_ref()
        .unwrap_or_else(|| panic!("{what}: no output"));
    let rep = check_file(out).unwrap_or_else(|e| panic!("{what}: check_file: {e}"));
    let rb = edgerec_testkit::mcap_readback(out).unwrap_or_else(|e| panic!("{what}: mcap: {e}"));
    assert!(
        rb.metadata.contains_key(recover::RECOVERED_METADATA),
        "{what}"
    );
    let mut seqs: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for m in &rb.messages {
        let ch: u16 = m.topic[2..].parse().unwrap();
        assert_eq!(m.data, payload(ch, m.sequence), "{what}: payload");
        seqs.entry(m.topic.clone()).or_default().push(m.sequence);
    }
    for ch in 1..=CHANNELS {
        let n = want.get(&ch).copied().unwrap_or(0);
        let got = seqs.remove(&topic(ch)).unwrap_or_default();
        assert_eq!(got.len() as u64, n, "{what}: {} count", topic(ch));
        assert!(
            got.iter().enumerate().all(|(i, s)| *s == i as u32),
            "{what}: {} is not a gap-free prefix: {got:?}",
            topic(ch)
        );
        let reported = r.kept_messages.get(&topic(ch)).copied().unwrap_or(0);
        assert_eq!(reported, n, "{what}: report for {}", topic(ch));
    }
    let total: u64 = want.values().sum();
    assert_eq!(rep.messages, total, "{what}");
    assert_eq!(rb.message_count, total, "{what}");
    assert_eq!(
        fs::metadata(out).unwrap().permissions().mode() & 0o777,
        0o444,
        "{what}"
    );
    assert_eq!(
        r.bytes_discarded,
        r.original_bytes - r.kept_bytes,
        "{what}: discarded bytes"
    );
}

fn compressions() -> [Compression; 3] {
    [
        Compression::None,
        Compression::Lz4,
        Compression::Zstd { level: 3 },
    ]
}

/// The cut points: every chunk boundary +-1, the start of its body, the
/// middle of it, between it and its indexes; the header and the schema
/// records; inside the summary.
fn cuts(w: &Written) -> Vec<u64> {
    let mut v = vec![
        0,
        4,
        8,
        w.header_end - 1,
        w.header_end,
        w.header_end + 5,
        w.chunks[0].start - 20,
        w.data_end,
        w.data_end + 5,
        w.data_end + 13,
        w.data_end + 40,
        w.bytes.len() as u64 - 30,
        w.bytes.len() as u64 - 1,
    ];
    for c in &w.chunks {
        v.extend([
            c.start - 1,
            c.start,
            c.start + 1,
            c.start + 9,
            (c.start + c.record_end) / 2,
            c.record_end - 1,
            c.record_end,
            c.record_end + 1,
            c.end - 1,
            c.end,
            c.end + 1,
        ]);
    }
    v.sort_unstable();
    v.dedup();
    v.retain(|&c| c <= w.bytes.len() as u64);
    v
}

#[test]
fn cut_at_every_boundary_keeps_exactly_the_complete_chunks() {
    for comp in compressions() {
        let w = write_file(comp);
        assert!(w.chunks.len() >= 10, "{} chunks", w.chunks.len());
        let d = tempfile::tempdir().unwrap();
        for (k, cut) in cuts(&w).into_iter().enumerate() {
            for padded in [false, true] {
                let what = format!("{comp:?} cut at {cut} padded {padded}");
                let mut bytes = w.bytes[..cut as usize].to_vec();
                if padded {
                    // Like a preallocated file: zeros to well past where the
                    // cut record would end.
                    bytes.resize(bytes.len().div_ceil(4096) * 4096 + (64 << 10), 0);
                }
                let src = active(d.path(), &format!("c{k}_{padded}"), &bytes);
                let r = recover::recover_file(&src).unwrap_or_else(|e| panic!("{what}: {e}"));
                if cut < w.header_end {
                    assert_eq!(r.outcome, Outcome::NothingRecoverable, "{what}");
                    assert_eq!(r.exit_code(), 1, "{what}");
                    assert!(r.output.is_none(), "{what}");
                    // Left as it was.
                    assert_eq!(fs::read(&src).unwrap(), bytes, "{what}");
                    assert!(!recover::temp_path(&recover::output_path(&src)).exists());
                    continue;
                }
                assert_eq!(r.outcome, Outcome::Clean, "{what}: {r}");
                assert_eq!(r.exit_code(), 0, "{what}");
                assert!(!src.exists(), "{what}: the .active file is removed");
                assert_eq!(r.original_bytes, bytes.len() as u64);
                // Zeros cut off and padded back are the same bytes (an lz4
                // frame ends with four).
                let cut = if padded {
                    let zeros = w.bytes[cut as usize..].iter().take_while(|&&b| b == 0);
                    cut + zeros.count() as u64
                } else {
                    cut
                };
                let want = expected_before(&w, cut);
                assert_recovered(&r, &want, &what);
                let whole = w.chunks.iter().filter(|c| c.record_end <= cut).count();
                assert_eq!(r.chunks_kept, whole as u64, "{what}");
                if cut >= w.data_end + 13 {
                    // The data section was complete (DataEnd is 13 bytes).
                    assert!(r.stopped_at.is_none(), "{what}: {r}");
                }
                // What the cut chunk held is reported where it decodes.
                if let Some(c) = w
                    .chunks
                    .iter()
                    .find(|c| c.start < cut && cut < c.record_end)
                {
                    if comp == Compression::None && cut > c.start + 9 + 45 && !padded {
                        assert!(
                            matches!(
                                r.dropped,
                                Dropped::Counted {
                                    complete: false,
                                    ..
                                }
                            ),
                            "{what}: {:?}",
                            r.dropped
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn a_bit_flip_in_the_second_chunk_is_skipped_with_exit_3() {
    for comp in compressions() {
        let w = write_file(comp);
        let d = tempfile::tempdir().unwrap();
        let c = &w.chunks[1];
        let mut bytes = w.bytes.clone();
        let at = ((c.start + c.record_end) / 2) as usize;
        bytes[at] ^= 0x10;
        let src = active(d.path(), "flip", &bytes);
        let r = recover::recover_file(&src).unwrap();
        let what = format!("{comp:?} flip at {at}");
        assert_eq!(r.outcome, Outcome::CorruptSkipped, "{what}: {r}");
        assert_eq!(r.exit_code(), 3);
        assert!(r.corrupt_skipped());
        assert_eq!(r.stopped_at.as_ref().unwrap().offset, c.start, "{what}");
        assert_eq!(r.kept_bytes, c.start);
        assert_eq!(r.chunks_kept, 1);
        assert_recovered(&r, &w.chunks[0].cumulative, &what);
        let rb = edgerec_testkit::mcap_readback(r.output.as_ref().unwrap()).unwrap();
        assert_eq!(
            rb.metadata[recover::RECOVERED_METADATA]["corrupt_skipped"],
            "true"
        );
        // Uncompressed, the bad chunk still decodes: what it held is known.
        if comp == Compression::None {
            let in_chunk: u64 = (1..=CHANNELS)
                .map(|ch| c.cumulative[&ch] - w.chunks[0].cumulative[&ch])
                .sum();
            match &r.dropped {
                Dropped::Counted {
                    per_topic,
                    complete: true,
                } => assert_eq!(per_topic.values().sum::<u64>(), in_chunk, "{what}"),
                other => panic!("{what}: {other:?}"),
            }
        }
        let text = r.to_string();
        assert!(
            text.contains("CORRUPT") && text.contains("exit 3"),
            "{text}"
        );
    }
}

#[test]
fn a_hole_inside_a_chunk_is_the_unsynced_tail() {
    // A later block landed, an earlier one did not: 4 KiB of aligned zeros
    // inside chunk 3, everything after it present.
    for comp in compressions() {
        let w = write_file(comp);
        let c = &w.chunks[3];
        let mut bytes = w.bytes.clone();
        let hole = (c.start + 9).div_ceil(4096) * 4096;
        assert!(hole + 4096 <= c.record_end, "chunk too small for a hole");
        bytes[hole as usize..hole as usize + 4096].fill(0);
        let d = tempfile::tempdir().unwrap();
        let src = active(d.path(), "hole", &bytes);
        let r = recover::recover_file(&src).unwrap();
        let what = format!("{comp:?} hole at {hole}");
        assert_eq!(r.outcome, Outcome::Clean, "{what}: {r}");
        assert_eq!(r.chunks_kept, 3, "{what}");
        assert_recovered(&r, &w.chunks[2].cumulative, &what);
    }
}

#[test]
fn a_corrupt_first_chunk_leaves_a_valid_file_without_messages() {
    let w = write_file(Compression::Zstd { level: 3 });
    let c = &w.chunks[0];
    let mut bytes = w.bytes[..w.chunks[2].end as usize].to_vec();
    bytes[(c.start + 40) as usize] ^= 0xff;
    let d = tempfile::tempdir().unwrap();
    let src = active(d.path(), "first", &bytes);
    let r = recover::recover_file(&src).unwrap();
    assert_eq!(r.exit_code(), 3, "{r}");
    assert_eq!(r.chunks_kept, 0);
    assert_recovered(&r, &BTreeMap::new(), "corrupt first chunk");
    let rb = edgerec_testkit::mcap_readback(r.output.as_ref().unwrap()).unwrap();
    assert_eq!(rb.topics.len(), CHANNELS as usize, "channels are kept");
}

#[test]
fn header_only_and_empty_files() {
    let w = write_file(Compression::None);
    let d = tempfile::tempdir().unwrap();
    // Header only, then zeros: a valid file without messages, exit 0.
    let mut b = w.bytes[..w.header_end as usize].to_vec();
    b.resize(1 << 20, 0);
    let r = recover::recover_file(&active(d.path(), "h", &b)).unwrap();
    assert_eq!(r.exit_code(), 0, "{r}");
    assert_recovered(&r, &BTreeMap::new(), "header only");
    // Empty and all-zero files: nothing recoverable, left alone.
    for (name, bytes) in [("empty", vec![]), ("zeros", vec![0u8; 1 << 20])] {
        let src = active(d.path(), name, &bytes);
        let r = recover::recover_file(&src).unwrap();
        assert_eq!(r.exit_code(), 1, "{name}: {r}");
        assert!(src.exists());
        assert!(r.to_string().contains("NOTHING RECOVERABLE"));
    }
}

/// Topic, sequence, log time and payload of one message.
type Msg = (String, u32, u64, Vec<u8>);

/// Recovered file contents without the `recovered_at_ns` value: message
/// count, messages, file size.
fn fingerprint(p: &Path) -> (u64, Vec<Msg>, u64) {
    let rb = edgerec_testkit::mcap_readback(p).unwrap();
    let msgs = rb
        .messages
        .into_iter()
        .map(|m| (m.topic, m.sequence, m.log_time, m.data))
        .collect();
    (rb.message_count, msgs, fs::metadata(p).unwrap().len())
}

#[test]
fn rerun_and_interrupted_recovery_converge_and_the_original_is_never_written() {
    let w = write_file(Compression::Lz4);
    let cut = ((w.chunks[6].start + w.chunks[6].record_end) / 2) as usize;
    let mut bytes = w.bytes[..cut].to_vec();
    bytes.resize(bytes.len() + (256 << 10), 0);
    let want = expected_before(&w, cut as u64);

    // The reference: one uninterrupted recovery.
    let d = tempfile::tempdir().unwrap();
    let src = active(d.path(), "s", &bytes);
    // A second name for the inode: the original's bytes after recovery
    // prove it was never written.
    let link = d.path().join("original.link");
    fs::hard_link(&src, &link).unwrap();
    let r = recover::recover_file(&src).unwrap();
    assert_recovered(&r, &want, "reference");
    assert_eq!(fs::read(&link).unwrap(), bytes, "the original was modified");
    let out = r.output.clone().unwrap();
    let reference = fingerprint(&out);

    // Run again: the file is closed now; nothing changes.
    let before = fs::read(&out).unwrap();
    let again = recover::recover_file(&out).unwrap();
    assert_eq!(again.outcome, Outcome::AlreadyClosed);
    assert_eq!(fs::read(&out).unwrap(), before);
    assert!(recover::recover_dir(d.path()).unwrap().is_empty());
    assert_eq!(fs::read(&out).unwrap(), before);

    // Interrupted before the rename: a stale, read-only .recovering.
    let d2 = tempfile::tempdir().unwrap();
    let src2 = active(d2.path(), "s", &bytes);
    let tmp = recover::temp_path(&recover::output_path(&src2));
    fs::write(&tmp, &bytes[..1000]).unwrap();
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o444)).unwrap();
    let r2 = recover::recover_file(&src2).unwrap();
    assert_recovered(&r2, &want, "stale .recovering");
    assert!(!tmp.exists());
    assert_eq!(fingerprint(r2.output.as_ref().unwrap()), reference);

    // Interrupted after the rename, before the original was removed: both
    // the closed file and the .active are there (the closed one here even
    // damaged, to show the .active stays the source of truth).
    for damaged in [false, true] {
        let d3 = tempfile::tempdir().unwrap();
        let src3 = active(d3.path(), "s", &bytes);
        let out3 = recover::output_path(&src3);
        let mut closed = fs::read(&out).unwrap();
        if damaged {
            closed.truncate(closed.len() / 2);
        }
        fs::write(&out3, &closed).unwrap();
        fs::set_permissions(&out3, fs::Permissions::from_mode(0o444)).unwrap();
        let r3 = recover::recover_dir(d3.path()).unwrap();
        assert_eq!(r3.len(), 1);
        assert_recovered(&r3[0], &want, "both outputs");
        assert!(!src3.exists());
        assert_eq!(fingerprint(&out3), reference);
    }

    // A failure before anything is written leaves the original as it was:
    // the temporary name is taken by a directory.
    let d4 = tempfile::tempdir().unwrap();
    let src4 = active(d4.path(), "s", &bytes);
    fs::create_dir(recover::temp_path(&recover::output_path(&src4))).unwrap();
    assert!(recover::recover_file(&src4).is_err());
    assert_eq!(fs::read(&src4).unwrap(), bytes);
    assert!(!recover::output_path(&src4).exists());
}

#[test]
fn recover_dir_rewrites_metadata_yaml_and_info_says_recovered() {
    let w = write_file(Compression::Zstd { level: 3 });
    let d = tempfile::tempdir().unwrap();
    let bag = d.path().join("sess");
    fs::create_dir(&bag).unwrap();
    // Segment 0 closed, segment 1 cut; metadata.yaml (Jazzy) lists only 0.
    fs::write(bag.join("sess_0.mcap"), &w.bytes).unwrap();
    let cut = w.chunks[4].end as usize + 100;
    active(&bag, "sess_1", &w.bytes[..cut]);
    fs::write(
        bag.join("metadata.yaml"),
        "rosbag2_bagfile_information:\n  version: 9\n  storage_identifier: mcap\n",
    )
    .unwrap();
    let reports = recover::recover_dir(&bag).unwrap();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].exit_code(), 0);
    let kept: u64 = w.chunks[4].cumulative.values().sum();
    let meta = fs::read_to_string(bag.join("metadata.yaml")).unwrap();
    assert!(meta.contains("  version: 9\n"), "{meta}");
    assert!(
        meta.contains("sess_0.mcap") && meta.contains("sess_1.mcap"),
        "{meta}"
    );
    assert!(!meta.contains(".active"), "{meta}");
    let total = (CHANNELS as u64) * PER_CHANNEL as u64 + kept;
    assert!(
        meta.contains(&format!("  message_count: {total}\n")),
        "{meta}"
    );
    assert!(meta.contains("name: /t1\n"), "{meta}");

    let info = edgerec_format::info::inspect(&bag).unwrap();
    assert_eq!(info.messages, total);
    assert!(info.files[0].recovered().is_none());
    let rec = info.files[1].recovered().expect("recovered metadata");
    assert_eq!(rec["kept_bytes"], reports[0].kept_bytes.to_string());
    assert_eq!(rec["corrupt_skipped"], "false");
    let text = info.to_string();
    assert!(text.contains("recovered: kept"), "{text}");

    // A new bag without metadata.yaml: created, Humble.
    let bag2 = d.path().join("other");
    fs::create_dir(&bag2).unwrap();
    active(&bag2, "other_0", &w.bytes[..cut]);
    recover::recover_dir(&bag2).unwrap();
    let meta = fs::read_to_string(bag2.join("metadata.yaml")).unwrap();
    assert!(meta.contains("  version: 5\n"), "{meta}");

    // recover_root finds both only while they hold .active segments.
    assert!(recover::dirs_with_active_segments(d.path())
        .unwrap()
        .is_empty());
    active(&bag2, "other_1", &w.bytes[..cut]);
    let found = recover::recover_root(d.path()).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].dir, bag2);
    assert_eq!(found[0].result.as_ref().unwrap().len(), 1);
    assert!(recover::recover_root(&d.path().join("missing"))
        .unwrap()
        .is_empty());
}

#[test]
fn a_closed_file_cut_in_its_summary_is_replaced_in_place() {
    let w = write_file(Compression::Lz4);
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("x.mcap");
    fs::write(&p, &w.bytes[..w.bytes.len() - 50]).unwrap();
    let r = recover::recover_file(&p).unwrap();
    assert_eq!(r.outcome, Outcome::Clean, "{r}");
    assert_eq!(r.output.as_deref(), Some(p.as_path()));
    assert!(r.stopped_at.is_none(), "the data section was whole: {r}");
    assert_recovered(&r, &w.chunks.last().unwrap().cumulative, "in place");
    assert!(!recover::temp_path(&p).exists());
    // The result is closed: a second run leaves it alone.
    assert_eq!(
        recover::recover_file(&p).unwrap().outcome,
        Outcome::AlreadyClosed
    );
    let err = recover::recover_file(&recover::temp_path(&p)).unwrap_err();
    assert!(err.to_string().contains("interrupted recovery"), "{err}");
}

#[test]
fn recovery_never_follows_a_link_planted_in_the_recordings_root() {
    use std::os::unix::fs::symlink;
    let w = write_file(Compression::Zstd { level: 3 });
    let cut = w.chunks[4].end as usize + 100;
    let data = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    // A directory elsewhere that looks like a session with a cut segment,
    // linked into the root: recovering it would write and delete there.
    active(outside.path(), "elsewhere_0", &w.bytes[..cut]);
    symlink(outside.path(), data.path().join("linked_session")).unwrap();
    // A session of ours whose cut segment is a link to a file elsewhere:
    // recovering it would copy that file into the bag.
    let secret = outside.path().join("secret.mcap.active");
    fs::write(&secret, &w.bytes[..cut]).unwrap();
    let sess = data.path().join("sess");
    fs::create_dir(&sess).unwrap();
    symlink(&secret, sess.join("sess_0.mcap.active")).unwrap();
    let before: Vec<_> = fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();

    let found = recover::recover_root(data.path()).unwrap();
    // The linked session is not one; the linked segment is none either.
    assert!(found
        .iter()
        .all(|r| r.dir != data.path().join("linked_session")));
    for r in &found {
        assert!(r.result.as_ref().map_or(true, |v| v.is_empty()), "{r:?}");
    }
    let after: Vec<_> = fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(before.len(), after.len(), "{after:?}");
    assert!(outside.path().join("elsewhere_0.mcap.active").exists());
    assert!(!sess.join("sess_0.mcap").exists());
    // By hand: a linked segment or a linked directory is refused, named.
    let err = recover::recover_file(&sess.join("sess_0.mcap.active")).unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    let err = recover::recover_dir(&data.path().join("linked_session")).unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert!(outside.path().join("elsewhere_0.mcap.active").exists());
}
