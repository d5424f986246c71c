//! Injected write failures: typed error, then Failed, then a close that
//! truncates at the last good contiguous block.

use edgerec_storage::{BackendChoice, DirectFile, ErrorKind, StorageError};

use crate::util::*;

const BLOCK: usize = 64 * KIB;

/// Writes ten blocks in odd chunks with the third block write failing
/// with `errno`; returns the first error seen by write_all or sync.
fn fail_third_block(choice: BackendChoice, errno: i32, check: fn(&ErrorKind) -> bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("fault.bin");
    let mut o = opts(choice);
    o.block_size = BLOCK;
    o.faults.fail_write = Some((3, errno));
    let Some(mut f) = create_or_skip(&path, &o, "fault injection") else {
        return;
    };
    let mut first: Option<StorageError> = None;
    while f.logical_len() < 10 * BLOCK as u64 {
        if let Err(e) = append(&mut f, 10_007) {
            first = Some(e);
            break;
        }
    }
    let first = match first {
        Some(e) => e,
        // Every byte was accepted before the failure came back: the
        // next call reports it.
        None => f.sync().expect_err("sync after a failed write"),
    };
    assert!(check(first.kind()), "{choice:?}: unexpected {first}");
    assert_eq!(first.offset(), Some(2 * BLOCK as u64), "{first}");
    assert_eq!(first.op(), "write");
    assert!(first.to_string().contains("fault.bin"), "{first}");

    // The writer now refuses everything.
    let again = f.write_all(b"more").expect_err("write after failure");
    assert_eq!(again.kind(), &ErrorKind::Failed, "{again}");
    assert_eq!(
        f.sync().expect_err("sync after failure").kind(),
        &ErrorKind::Failed
    );
    assert_eq!(
        f.tick().expect_err("tick after failure").kind(),
        &ErrorKind::Failed
    );

    let report = f.close().expect("close after failure still closes");
    let good = 2 * BLOCK as u64;
    assert_eq!(report.truncated_after_error, Some(good), "{choice:?}");
    assert_file_is_pattern(&path, good);
}

fn is_eio(k: &ErrorKind) -> bool {
    *k == ErrorKind::Io {
        op: "write",
        errno: libc::EIO,
    }
}

fn is_no_space(k: &ErrorKind) -> bool {
    *k == ErrorKind::NoSpace
}

#[test]
fn eio_on_third_block_io_uring() {
    fail_third_block(BackendChoice::IoUring, libc::EIO, is_eio);
}

#[test]
fn eio_on_third_block_pwrite_direct() {
    fail_third_block(BackendChoice::PwriteDirect, libc::EIO, is_eio);
}

#[test]
fn eio_on_third_block_buffered() {
    fail_third_block(BackendChoice::Buffered, libc::EIO, is_eio);
}

#[test]
fn enospc_on_third_block_io_uring() {
    fail_third_block(BackendChoice::IoUring, libc::ENOSPC, is_no_space);
}

#[test]
fn enospc_on_third_block_pwrite_direct() {
    fail_third_block(BackendChoice::PwriteDirect, libc::ENOSPC, is_no_space);
}

#[test]
fn enospc_on_third_block_buffered() {
    fail_third_block(BackendChoice::Buffered, libc::ENOSPC, is_no_space);
}

/// The very first write is a padded tail (from sync) and fails: nothing
/// good is left, and the file ends empty.
#[test]
fn failed_tail_write_truncates_to_zero() {
    for (choice, _) in FORCED {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tailfail.bin");
        let mut o = opts(choice);
        o.faults.fail_write = Some((1, libc::EIO));
        let Some(mut f) = create_or_skip(&path, &o, "failed tail") else {
            continue;
        };
        append(&mut f, 5000).expect("accepted");
        let e = f
            .sync()
            .expect_err("sync must report the failed tail write");
        assert!(is_eio(e.kind()), "{e}");
        assert_eq!(f.durable_offset(), 0);
        let report = f.close().expect("close");
        assert_eq!(report.logical_len, 5000);
        assert_eq!(report.truncated_after_error, Some(0));
        assert_file_is_pattern(&path, 0);
    }
}

/// A failure noticed only at close is still reported, in the close report.
#[test]
fn failure_during_close_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("closefail.bin");
    let mut o = opts(BackendChoice::Auto);
    o.block_size = BLOCK;
    // Blocks 1 and 2 are full; write 3 is the padded tail close writes.
    o.faults.fail_write = Some((3, libc::EIO));
    let mut f = DirectFile::create(&path, &o).expect("create");
    append(&mut f, 2 * BLOCK + 100).expect("write");
    let report = f.close().expect("close");
    assert_eq!(report.logical_len, 2 * BLOCK as u64 + 100);
    assert_eq!(report.truncated_after_error, Some(2 * BLOCK as u64));
    assert_file_is_pattern(&path, 2 * BLOCK as u64);
}
