//! Unindexed bags (a `.bag.active` cut by a power cut): the scan and
//! reindex keep at least what Debian's `rosbag reindex` keeps, and the
//! whole messages of a cut uncompressed chunk besides; the new bag opens in
//! Debian's rosbag with the same messages.

use edgerec_rosbag1::{reindex, Bag, Filter, Indexing};

use crate::support::{
    active_copy, generated, oracle, rosbag_reads, rosbag_reindex, scratch, to_msgs, Msg,
    COMPRESSIONS,
};

/// A chunk in the middle of the bag holding small messages (not an image),
/// so that half of it holds several whole messages.
fn small_chunk(positions: &[u64]) -> usize {
    (positions.len() / 2..positions.len() - 1)
        .find(|&k| positions[k + 1] - positions[k] < 16 * 1024)
        .unwrap()
}

fn assert_prefix(got: &[Msg], all: &[Msg], what: &str) {
    assert!(got.len() <= all.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(all).enumerate() {
        assert_eq!(g, w, "{what}: message {i}");
    }
}

#[test]
fn reindex_keeps_at_least_what_rosbag_reindex_keeps_and_the_whole_messages_of_a_cut_chunk() {
    let Some(dir) = generated() else { return };
    for c in COMPRESSIONS {
        let want = oracle(dir, c);
        let bytes = std::fs::read(dir.join(format!("{c}.bag"))).unwrap();
        let p = &want.chunk_positions;
        let k = small_chunk(p);
        let cuts = [
            ("boundary", p[k] as usize),
            ("mid", (p[k] + (p[k + 1] - p[k]) / 2) as usize),
        ];
        for (label, cut) in cuts {
            let what = format!("{c}, cut at the {label} of chunk {k} (byte {cut})");
            let work = scratch(&format!("reindex-{c}-{label}"));
            let src = work.join("rec.bag.active");
            let original = active_copy(&bytes, cut);
            std::fs::write(&src, &original).unwrap();

            // Opening it falls back to the scan by itself.
            let bag = Bag::open(&src).unwrap();
            assert!(matches!(bag.indexing(), Indexing::Scan(_)), "{what}");

            let ours_path = work.join("rec.bag");
            let report = reindex(&src, &ours_path).unwrap();
            assert_eq!(
                std::fs::read(&src).unwrap(),
                original,
                "{what}: source modified"
            );

            let mut ours_bag = Bag::open(&ours_path).unwrap();
            assert!(matches!(ours_bag.indexing(), Indexing::Index), "{what}");
            let ours = to_msgs(&mut ours_bag, &Filter::default());
            assert_eq!(report.messages as usize, ours.len(), "{what}");
            assert_prefix(&ours, &want.messages, &what);

            let theirs_dir = work.join("rosbag");
            std::fs::create_dir(&theirs_dir).unwrap();
            let theirs = rosbag_reads(&rosbag_reindex(&src, &theirs_dir)).messages;
            assert_prefix(&theirs, &want.messages, &what);
            assert!(
                ours.len() >= theirs.len(),
                "{what}: ours {} < rosbag's {}",
                ours.len(),
                theirs.len()
            );

            // Debian's rosbag opens the new bag and reads the same messages.
            assert_eq!(rosbag_reads(&ours_path).messages, ours, "{what}");

            let scan = &report.scan;
            match label {
                "boundary" => {
                    assert_eq!(ours.len(), theirs.len(), "{what}");
                    assert_eq!(scan.chunks as usize, k, "{what}");
                    assert!(scan.stop_error.is_none(), "{what}: {:?}", scan.stop_error);
                    assert_eq!(scan.stop_offset, cut as u64);
                    assert!(scan.cut_chunk.is_none());
                }
                _ => {
                    assert_eq!(scan.chunks as usize, k, "{what}");
                    assert!(scan.stop_error.is_some(), "{what}");
                    assert_eq!(scan.stop_offset, p[k], "{what}");
                    if c == "none" {
                        let cut_chunk = scan.cut_chunk.as_ref().unwrap();
                        assert_eq!(cut_chunk.pos, p[k]);
                        assert!(cut_chunk.messages > 0);
                        assert_eq!(
                            ours.len(),
                            theirs.len() + cut_chunk.messages as usize,
                            "{what}"
                        );
                    }
                }
            }
            println!(
                "{what}: kept {} messages, rosbag reindex {}; scan stopped at byte {}: {}",
                ours.len(),
                theirs.len(),
                scan.stop_offset,
                scan.stop_error
                    .as_ref()
                    .map_or("end of file".into(), |e| e.to_string())
            );
        }
    }
}

#[test]
fn reindex_refuses_to_write_over_its_source() {
    let work = scratch("reindex-self");
    let src = work.join("x.bag");
    std::fs::write(&src, b"#ROSBAG V2.0\n").unwrap();
    assert!(matches!(
        reindex(&src, &src),
        Err(edgerec_rosbag1::Error::DestinationIsSource(_))
    ));
    assert_eq!(std::fs::read(&src).unwrap(), b"#ROSBAG V2.0\n");
}
