//! `reindex` of a `.bag.active`: every whole message, at least what
//! Debian's `rosbag reindex` keeps, the original untouched.

use crate::support::*;

#[test]
fn reindex_keeps_every_whole_message_and_never_touches_the_original() {
    let Some(dir) = generated() else { return };
    if !std::path::Path::new(ROSBAG).exists() {
        edgerec_testkit::skip::skip(format!("{ROSBAG} is missing"));
        return;
    }
    let original = std::fs::read(dir.join("none.bag")).unwrap();
    let chunks = chunk_positions(dir, "none");
    let all = rosbag_decodes(&dir.join("none.bag"), false);
    for (label, cut) in [
        ("at-a-chunk", chunks[20] as usize),
        ("mid-chunk", (chunks[20] + chunks[21]) as usize / 2),
    ] {
        let work = scratch(&format!("reindex-{label}"));
        let src = work.join("run.bag.active");
        let bytes = active_copy(&original, cut);
        std::fs::write(&src, &bytes).unwrap();
        let r = tools(["reindex", src.to_str().unwrap()]);
        assert!(r.status.success(), "{label}: {}", stderr(&r));
        assert!(stdout(&r).contains("untouched"), "{}", stdout(&r));
        assert_eq!(
            std::fs::read(&src).unwrap(),
            bytes,
            "{label}: the original changed"
        );
        let ours_bag = work.join("run.bag");
        let chk = tools(["check", ours_bag.to_str().unwrap()]);
        assert!(chk.status.success(), "{label}: {}", stdout(&chk));
        let ours = rosbag_decodes(&ours_bag, false);

        // Debian's rosbag reindex, on a copy.
        let theirs_dir = work.join("rosbag");
        std::fs::create_dir(&theirs_dir).unwrap();
        let copy = work.join("copy.bag");
        std::fs::write(&copy, &bytes).unwrap();
        let theirs = rosbag_decodes(&rosbag_reindex(&copy, &theirs_dir), false);
        assert!(
            ours.len() >= theirs.len(),
            "{label}: kept {} messages, rosbag reindex {}",
            ours.len(),
            theirs.len()
        );
        // What we kept is what rosbag read from the whole bag, in time
        // order, up to the cut.
        let last = ours.iter().map(|m| m.log_time).max().unwrap();
        let expected: Vec<Decoded> = all.iter().filter(|m| m.log_time <= last).cloned().collect();
        assert_same(&ours, &expected, &format!("reindex {label}"));
        if label == "mid-chunk" {
            assert!(
                ours.len() > theirs.len(),
                "mid-chunk: the whole messages of the cut chunk are kept"
            );
            assert!(
                stdout(&r).contains("whole messages kept from it"),
                "{}",
                stdout(&r)
            );
        }
        // A second run refuses to write over the first's output.
        let again = tools(["reindex", src.to_str().unwrap()]);
        assert_eq!(again.status.code(), Some(1));
        assert!(
            stderr(&again).contains("exists already"),
            "{}",
            stderr(&again)
        );
        // `recover` does the same for a ROS 1 bag.
        let rec = tools(["recover", src.to_str().unwrap()]);
        assert_eq!(rec.status.code(), Some(1), "{}", stdout(&rec));
    }
}
