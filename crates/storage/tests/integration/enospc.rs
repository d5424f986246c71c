//! A real full file system: a small tmpfs and a small loop-mounted ext4.
//! Both need mount(2) (root, no restrictive container); each test probes
//! and prints why it skips.

use std::path::Path;
use std::process::Command;

use edgerec_storage::{BackendChoice, DirectFile, ErrorKind, StorageError};

use crate::util::*;

/// Writes until the file system is full; checks the typed error, the
/// refusal afterwards, and the truncated, correct file.
fn fill_until_no_space(dir: &Path, preallocate: u64, max: usize) -> u64 {
    let path = dir.join("fill.bin");
    let mut o = opts(BackendChoice::Auto);
    o.preallocate = preallocate;
    let mut f = DirectFile::create(&path, &o).expect("create on the small fs");
    eprintln!(
        "filling {} with {} (fallback: {:?}, alignment {})",
        dir.display(),
        f.backend(),
        f.fallback_reason(),
        f.alignment()
    );
    let mut first: Option<StorageError> = None;
    while f.logical_len() < max as u64 {
        if let Err(e) = append(&mut f, 300_001) {
            first = Some(e);
            break;
        }
    }
    let first = match first {
        Some(e) => e,
        None => f.sync().expect_err("the file system must fill up"),
    };
    assert_eq!(first.kind(), &ErrorKind::NoSpace, "{first}");
    eprintln!("got: {first}");
    assert_eq!(
        f.write_all(b"x").expect_err("refused after ENOSPC").kind(),
        &ErrorKind::Failed
    );
    let report = f.close().expect("close after ENOSPC");
    let kept = report
        .truncated_after_error
        .expect("close reports the truncation");
    assert!(kept <= report.logical_len);
    assert_file_is_pattern(&path, kept);
    kept
}

#[test]
fn real_enospc_on_a_small_tmpfs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    // 8 MiB + 8 KiB: the ninth 1 MiB block write comes back short (8 KiB),
    // the retry of the rest gets ENOSPC.
    let _mounted = match mount(&["-t", "tmpfs", "-o", "size=8200k", "tmpfs"], &mnt) {
        Ok(m) => m,
        Err(why) => {
            edgerec_testkit::skip::skip(why);
            return;
        }
    };
    // Default preallocation (256 MiB) cannot fit: fallocate's ENOSPC must
    // only switch preallocation off, and the data writes then fill the fs.
    let kept = fill_until_no_space(&mnt, 256 << 20, 16 * MIB);
    assert!(
        kept >= 4 * MIB as u64,
        "kept only {kept} bytes of an 8 MiB tmpfs"
    );
}

#[test]
fn real_enospc_on_a_small_ext4_loop_mount() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = dir.path().join("ext4.img");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).expect("mkdir");
    let file = std::fs::File::create(&image).expect("image");
    file.set_len(24 * MIB as u64).expect("size image");
    drop(file);
    let mkfs = Command::new("mkfs.ext4")
        .args(["-q", "-F", "-m", "0"])
        .arg(&image)
        .output();
    match mkfs {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            edgerec_testkit::skip::skip(format!(
                "mkfs.ext4 failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            return;
        }
        Err(e) => {
            edgerec_testkit::skip::skip(format!("no mkfs.ext4: {e}"));
            return;
        }
    }
    let image = image.to_string_lossy().into_owned();
    let _mounted = match mount(&["-o", "loop", &image], &mnt) {
        Ok(m) => m,
        Err(why) => {
            edgerec_testkit::skip::skip(why);
            return;
        }
    };
    // Preallocation in 4 MiB extents runs into ENOSPC before the writes do.
    let kept = fill_until_no_space(&mnt, 4 * MIB as u64, 48 * MIB);
    assert!(
        kept >= 8 * MIB as u64,
        "kept only {kept} bytes of a 24 MiB ext4"
    );
}
