//! The durable offset: sync(), tick() on a timer, and the padded tail
//! being rewritten as a full block.

use std::time::Duration;

use edgerec_storage::{BackendChoice, DirectFile};

use crate::util::*;

#[test]
fn sync_makes_everything_accepted_durable() {
    for (choice, _) in FORCED {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sync.bin");
        let Some(mut f) = create_or_skip(&path, &opts(choice), "sync") else {
            continue;
        };
        let handle = f.durability();
        assert_eq!(f.durable_offset(), 0);
        for &n in &ODD_SIZES[..4] {
            append(&mut f, n).expect("write");
            let durable = f.sync().expect("sync");
            assert_eq!(durable, f.logical_len(), "{choice:?}");
            assert_eq!(f.durable_offset(), f.logical_len(), "{choice:?}");
            assert_eq!(handle.get(), f.logical_len(), "{choice:?}");
            // What is durable is also readable, correct, right now.
            let on_disk = std::fs::read(&path).expect("read");
            assert_prefix_is_pattern(&on_disk, durable);
        }
        // Nothing new: sync returns at once with the same offset.
        let len = f.logical_len();
        let syncs = f.stats().syncs;
        assert_eq!(f.sync().expect("sync"), len);
        assert_eq!(f.stats().syncs, syncs, "no fdatasync without new data");
        assert!(f.stats().syncs >= 4);
        f.close().expect("close");
        assert_file_is_pattern(&path, len);
    }
}

#[test]
fn tick_covers_the_partial_tail_then_the_rewrite_is_correct() {
    for (choice, _) in FORCED {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tick.bin");
        let mut o = opts(choice);
        o.block_size = 256 * KIB;
        o.sync_interval = Duration::from_millis(20);
        let Some(mut f) = create_or_skip(&path, &o, "tick") else {
            continue;
        };
        // One and a half blocks: the second is a partial tail.
        append(&mut f, 384 * KIB + 11).expect("write");
        let target = f.logical_len();
        assert!(
            tick_until(&mut f, |f| f.durable_offset() == target),
            "{choice:?}: durable stuck at {} of {target}",
            f.durable_offset()
        );
        let on_disk = std::fs::read(&path).expect("read");
        assert_prefix_is_pattern(&on_disk, target);
        // Fill the tail block and go beyond: the block at 256 KiB is now
        // rewritten whole over the padded copy.
        append(&mut f, 300 * KIB).expect("write");
        let target = f.logical_len();
        assert!(
            tick_until(&mut f, |f| f.durable_offset() == target),
            "{choice:?}: second tick"
        );
        append(&mut f, 5).expect("write");
        let report = f.close().expect("close");
        assert_file_is_pattern(&path, report.logical_len);
        assert_eq!(f_len(&path), report.logical_len);
    }
}

fn f_len(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).expect("stat").len()
}

#[test]
fn tick_waits_for_the_interval() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("idle.bin");
    let mut o = opts(BackendChoice::Auto);
    o.sync_interval = Duration::from_secs(3600);
    let mut f = DirectFile::create(&path, &o).expect("create");
    append(&mut f, 100).expect("write");
    for _ in 0..5 {
        f.tick().expect("tick");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(f.durable_offset(), 0);
    assert_eq!(f.stats().syncs, 0);
    f.close().expect("close");
    assert_file_is_pattern(&path, 100);
}

/// Many sync()/tick() rounds inside one block: each rewrites the padded
/// tail at the same offset, which must never overlap an earlier write of
/// it. The content at the end proves the order held.
#[test]
fn interleaved_sync_and_tick_keep_tail_rewrites_ordered() {
    for (choice, _) in FORCED {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("interleave.bin");
        let mut o = opts(choice);
        o.block_size = 64 * KIB;
        o.queue_depth = 4;
        o.sync_interval = Duration::from_millis(1);
        let Some(mut f) = create_or_skip(&path, &o, "interleave") else {
            continue;
        };
        for round in 0..60 {
            append(&mut f, 1 + round * 997).expect("write");
            if round % 3 == 0 {
                assert_eq!(f.sync().expect("sync"), f.logical_len());
            } else {
                std::thread::sleep(Duration::from_millis(2));
                f.tick().expect("tick");
            }
        }
        let len = f.logical_len();
        f.sync().expect("sync");
        let report = f.close().expect("close");
        assert_eq!(report.logical_len, len);
        assert_file_is_pattern(&path, len);
    }
}

#[test]
fn durability_handle_is_readable_from_another_thread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("handle.bin");
    let mut f = DirectFile::create(&path, &opts(BackendChoice::Auto)).expect("create");
    let handle = f.durability();
    let watcher = std::thread::spawn(move || {
        for _ in 0..2000 {
            if handle.get() >= 1000 {
                return handle.get();
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        handle.get()
    });
    append(&mut f, 1000).expect("write");
    f.sync().expect("sync");
    assert_eq!(watcher.join().expect("watcher"), 1000);
    f.close().expect("close");
}
