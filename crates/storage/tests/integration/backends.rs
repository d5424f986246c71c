//! Every backend on purpose: byte-exact round trips, tail padding and
//! truncation, preallocation, option checks.

use std::os::unix::fs::MetadataExt;

use edgerec_storage::{Backend, BackendChoice, DirectFile, ErrorKind, WriterOptions};

use crate::util::*;

fn roundtrip(choice: BackendChoice, want: Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("roundtrip.bin");
    let Some(mut f) = create_or_skip(&path, &opts(choice), "roundtrip") else {
        return;
    };
    assert_eq!(f.backend(), want);
    assert_eq!(
        f.fallback_reason(),
        None,
        "a forced backend never falls back"
    );
    assert_eq!(f.path(), path);
    assert!(f.alignment() >= 4096 && f.alignment().is_power_of_two());
    let mut total = 0u64;
    for &n in ODD_SIZES {
        append(&mut f, n).expect("write_all");
        total += n as u64;
        assert_eq!(f.logical_len(), total);
    }
    let stats = f.stats();
    assert_eq!(stats.backend, want);
    let report = f.close().expect("close");
    assert_eq!(report.logical_len, total);
    assert_eq!(report.backend, want);
    assert_eq!(report.truncated_after_error, None);
    assert_file_is_pattern(&path, total);
}

#[test]
fn roundtrip_io_uring_direct() {
    roundtrip(BackendChoice::IoUring, Backend::IoUringDirect);
}

#[test]
fn roundtrip_pwrite_direct() {
    roundtrip(BackendChoice::PwriteDirect, Backend::PwriteDirect);
}

#[test]
fn roundtrip_buffered() {
    roundtrip(BackendChoice::Buffered, Backend::Buffered);
}

/// A synced partial block is on disk zero-padded to the alignment; close
/// cuts the padding off again.
#[test]
fn tail_is_padded_on_disk_then_truncated_at_close() {
    for (choice, _) in FORCED {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tail.bin");
        let mut o = opts(choice);
        o.preallocate = 0; // so the file size shows the padded write alone
        let Some(mut f) = create_or_skip(&path, &o, "tail padding") else {
            continue;
        };
        let align = f.alignment() as u64;
        append(&mut f, 5000).expect("write");
        assert_eq!(f.sync().expect("sync"), 5000);
        let on_disk = std::fs::read(&path).expect("read");
        let padded = 5000u64.div_ceil(align) * align;
        assert_eq!(
            on_disk.len() as u64,
            padded,
            "{choice:?}: padded tail length"
        );
        assert_prefix_is_pattern(&on_disk, 5000);
        assert!(
            on_disk[5000..].iter().all(|&b| b == 0),
            "{choice:?}: padding is zeros"
        );
        let report = f.close().expect("close");
        assert_eq!(report.logical_len, 5000);
        assert_file_is_pattern(&path, 5000);
    }
}

#[test]
fn empty_file_closes_to_zero_length() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("empty.bin");
    let f = DirectFile::create(&path, &opts(BackendChoice::Auto)).expect("create");
    let report = f.close().expect("close");
    assert_eq!(report.logical_len, 0);
    assert_file_is_pattern(&path, 0);
}

/// fallocate runs one extent ahead of the writes, and close trims the
/// file back to the bytes written.
#[test]
fn preallocation_runs_ahead_and_close_trims() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("prealloc.bin");
    let mut o = opts(BackendChoice::Auto);
    o.preallocate = 4 * MIB as u64;
    let mut f = DirectFile::create(&path, &o).expect("create");
    append(&mut f, MIB).expect("write");
    f.sync().expect("sync");
    append(&mut f, MIB + 1).expect("write");
    f.sync().expect("sync");
    let meta = std::fs::metadata(&path).expect("stat");
    // A sync waits for the fallocate in flight, and an allocation that
    // completes after a write reached into it issues the next: [0, 4 MiB)
    // and [4, 8 MiB) whatever the timing.
    assert_eq!(
        meta.len(),
        8 * MIB as u64,
        "fallocate extends the size one extent ahead"
    );
    assert!(
        meta.blocks() * 512 >= 8 * MIB as u64,
        "blocks allocated: {}",
        meta.blocks()
    );
    let report = f.close().expect("close");
    assert_eq!(report.logical_len, 2 * MIB as u64 + 1);
    assert_file_is_pattern(&path, 2 * MIB as u64 + 1);
    let blocks = std::fs::metadata(&path).expect("stat").blocks() * 512;
    assert!(
        blocks < 4 * MIB as u64,
        "ftruncate released the preallocated tail: {blocks}"
    );
}

#[test]
fn create_refuses_an_existing_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("exists.bin");
    std::fs::write(&path, b"keep me").expect("write");
    let ring_refused = io_uring_refusal();
    for (choice, _) in FORCED {
        let e = DirectFile::create(&path, &opts(choice)).expect_err("must not overwrite");
        if let (BackendChoice::IoUring, Some(refusal)) = (choice, &ring_refused) {
            // The ring is set up before the file is opened, so a refused
            // io_uring answers first and the open is never tried.
            assert!(matches!(e.kind(), ErrorKind::Unavailable { .. }), "{e}");
            edgerec_testkit::io_uring_skip_reason(refusal).report();
            continue;
        }
        assert_eq!(
            e.kind(),
            &ErrorKind::Io {
                op: "open",
                errno: libc::EEXIST
            },
            "{choice:?}: {e}"
        );
        assert!(e.to_string().contains("exists.bin"), "{e}");
    }
    assert_eq!(std::fs::read(&path).expect("read"), b"keep me");
}

#[test]
fn invalid_options_are_rejected_before_creating_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.bin");
    let bad = [
        WriterOptions {
            block_size: 1000,
            ..WriterOptions::default()
        },
        WriterOptions {
            block_size: 0,
            ..WriterOptions::default()
        },
        WriterOptions {
            queue_depth: 0,
            ..WriterOptions::default()
        },
    ];
    for o in bad {
        let e = DirectFile::create(&path, &o).expect_err("invalid");
        assert!(matches!(e.kind(), ErrorKind::InvalidOptions(_)), "{e}");
        assert!(!path.exists(), "no file left behind");
    }
}

#[test]
fn defaults_match_the_documented_values() {
    let o = WriterOptions::default();
    assert_eq!(o.block_size, MIB);
    assert_eq!(o.queue_depth, 8);
    assert_eq!(o.sync_interval, std::time::Duration::from_secs(1));
    assert_eq!(o.preallocate, 256 * MIB as u64);
    assert_eq!(o.backend, BackendChoice::Auto);
    assert_eq!(BackendChoice::default(), BackendChoice::Auto);
    assert_eq!(Backend::IoUringDirect.to_string(), "io_uring+O_DIRECT");
    assert_eq!(Backend::PwriteDirect.to_string(), "pwrite+O_DIRECT");
    assert_eq!(Backend::Buffered.to_string(), "buffered+fdatasync");
}

/// Drop closes best-effort: the data and the exact length survive.
#[test]
fn drop_without_close_keeps_the_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dropped.bin");
    let mut f = DirectFile::create(&path, &opts(BackendChoice::Auto)).expect("create");
    append(&mut f, 3 * MIB + 17).expect("write");
    drop(f);
    assert_file_is_pattern(&path, 3 * MIB as u64 + 17);
}

/// A queue depth of 1 and a small block size still work (more blocking on
/// the pool, same bytes).
#[test]
fn small_blocks_and_queue_depth_one() {
    for (choice, _) in FORCED {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("qd1.bin");
        let mut o = opts(choice);
        o.block_size = 4096;
        o.queue_depth = 1;
        let Some(mut f) = create_or_skip(&path, &o, "queue depth 1") else {
            continue;
        };
        for n in [1, 4095, 4096, 4097, 10_000, 3] {
            append(&mut f, n).expect("write");
        }
        let len = f.logical_len();
        assert!(f.stats().writes > 0);
        f.close().expect("close");
        assert_file_is_pattern(&path, len);
    }
}

/// The writer moves to a recording thread; errors and the durability
/// handle cross threads (anyhow, status reporting).
#[test]
fn types_cross_threads() {
    fn send<T: Send>() {}
    fn send_sync<T: Send + Sync>() {}
    send::<DirectFile>();
    send_sync::<edgerec_storage::DurableOffset>();
    send_sync::<edgerec_storage::StorageError>();
    send_sync::<edgerec_storage::StorageStats>();
    send_sync::<edgerec_storage::CloseReport>();
}
