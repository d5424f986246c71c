//! The Auto fallback chain, with real and injected refusals.

use edgerec_storage::{Backend, BackendChoice, DirectFile, ErrorKind, Faults};

use crate::util::*;

fn write_and_verify(mut f: DirectFile) {
    let path = f.path().to_path_buf();
    append(&mut f, 2 * MIB + 333).expect("write");
    let report = f.close().expect("close");
    assert_file_is_pattern(&path, report.logical_len);
}

#[test]
fn auto_picks_io_uring_on_this_host() {
    // Probe the way a deployment would: is io_uring+O_DIRECT possible here?
    let dir = tempfile::tempdir().expect("tempdir");
    let probe = dir.path().join("probe.bin");
    match DirectFile::create(&probe, &opts(BackendChoice::IoUring)) {
        Ok(f) => {
            f.close().expect("close probe");
        }
        Err(e) => {
            let why = match e.kind() {
                ErrorKind::Unavailable { reason, .. } => {
                    edgerec_testkit::io_uring_skip_reason(reason)
                }
                _ => edgerec_testkit::skip::Skip::missing(e.to_string()),
            };
            why.report();
            return;
        }
    }
    let path = dir.path().join("auto.bin");
    let f = DirectFile::create(&path, &opts(BackendChoice::Auto)).expect("create");
    assert_eq!(f.backend(), Backend::IoUringDirect);
    assert_eq!(f.fallback_reason(), None);
    write_and_verify(f);
}

#[test]
fn auto_falls_back_to_pwrite_when_io_uring_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("enosys.bin");
    let mut o = opts(BackendChoice::Auto);
    // What qemu-user answers to io_uring_setup.
    o.faults = Faults {
        io_uring_errno: Some(libc::ENOSYS),
        ..Faults::default()
    };
    let f = DirectFile::create(&path, &o).expect("create");
    assert_eq!(f.backend(), Backend::PwriteDirect);
    let reason = f.fallback_reason().expect("a reason").to_string();
    assert!(
        reason.starts_with("io_uring_setup: ENOSYS (Function not implemented)"),
        "{reason}"
    );
    assert_eq!(f.stats().backend, Backend::PwriteDirect);
    write_and_verify(f);
}

#[test]
fn auto_names_eperm_when_io_uring_is_disabled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("eperm.bin");
    let mut o = opts(BackendChoice::Auto);
    // kernel.io_uring_disabled=2 or a seccomp profile.
    o.faults.io_uring_errno = Some(libc::EPERM);
    let f = DirectFile::create(&path, &o).expect("create");
    assert_eq!(f.backend(), Backend::PwriteDirect);
    assert!(
        f.fallback_reason()
            .expect("reason")
            .starts_with("io_uring_setup: EPERM"),
        "{:?}",
        f.fallback_reason()
    );
    write_and_verify(f);
}

#[test]
fn auto_falls_back_to_buffered_when_o_direct_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("einval.bin");
    let mut o = opts(BackendChoice::Auto);
    o.faults.odirect_einval = true;
    let f = DirectFile::create(&path, &o).expect("create");
    assert_eq!(f.backend(), Backend::Buffered);
    assert_eq!(
        f.fallback_reason(),
        Some(o_direct_refused_reason().as_str())
    );
    write_and_verify(f);
}

#[test]
fn auto_reports_every_refusal_on_the_way_down() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("both.bin");
    let mut o = opts(BackendChoice::Auto);
    o.faults.io_uring_errno = Some(libc::ENOSYS);
    o.faults.odirect_einval = true;
    let f = DirectFile::create(&path, &o).expect("create");
    assert_eq!(f.backend(), Backend::Buffered);
    let reason = f.fallback_reason().expect("reason");
    assert!(reason.contains("io_uring_setup: ENOSYS"), "{reason}");
    assert!(reason.contains("open O_DIRECT: EINVAL"), "{reason}");
    write_and_verify(f);
}

#[test]
fn forced_backends_fail_instead_of_falling_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("forced.bin");
    let cases = [
        (BackendChoice::IoUring, true, false, Backend::IoUringDirect),
        (BackendChoice::IoUring, false, true, Backend::IoUringDirect),
        (
            BackendChoice::PwriteDirect,
            false,
            true,
            Backend::PwriteDirect,
        ),
    ];
    for (choice, refuse_ring, refuse_direct, refused) in cases {
        let mut o = opts(choice);
        if refuse_ring {
            o.faults.io_uring_errno = Some(libc::ENOSYS);
        }
        o.faults.odirect_einval = refuse_direct;
        let e = DirectFile::create(&path, &o).expect_err("forced backend must not fall back");
        match e.kind() {
            ErrorKind::Unavailable { backend, reason } => {
                assert_eq!(*backend, refused, "{e}");
                assert!(!reason.is_empty());
            }
            other => panic!("{choice:?}: want Unavailable, got {other:?}"),
        }
        assert!(!path.exists(), "{choice:?}: refused create leaves no file");
    }
}

/// A real refusal: ramfs has no direct I/O, so open(O_DIRECT) creates the
/// file and then fails with EINVAL. Auto must clean up and go buffered.
#[test]
fn auto_falls_back_to_buffered_on_a_real_o_direct_refusal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mnt = dir.path().join("ramfs");
    std::fs::create_dir(&mnt).expect("mkdir");
    let _mounted = match mount(&["-t", "ramfs", "ramfs"], &mnt) {
        Ok(m) => m,
        Err(why) => {
            edgerec_testkit::skip::skip(why);
            return;
        }
    };
    let path = mnt.join("ramfs.bin");
    let e = DirectFile::create(&path, &opts(BackendChoice::PwriteDirect))
        .expect_err("ramfs refuses O_DIRECT");
    assert!(
        matches!(
            e.kind(),
            ErrorKind::Unavailable {
                backend: Backend::PwriteDirect,
                ..
            }
        ),
        "{e}"
    );
    assert!(!path.exists(), "the refused open's file is removed");
    let f = DirectFile::create(&path, &opts(BackendChoice::Auto)).expect("create");
    assert_eq!(f.backend(), Backend::Buffered);
    assert_eq!(
        f.fallback_reason(),
        Some(o_direct_refused_reason().as_str())
    );
    write_and_verify(f);
}
