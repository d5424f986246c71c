//! Shared helpers: a position-dependent byte pattern, writers, checks.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use edgerec_storage::{Backend, BackendChoice, DirectFile, ErrorKind, WriterOptions};

pub const KIB: usize = 1024;
pub const MIB: usize = 1024 * 1024;

/// The byte expected at file offset `i`. Mixes in the 4 KiB page number so
/// a block written at the wrong offset, or a page of padding left behind,
/// does not match.
pub fn byte_at(i: u64) -> u8 {
    ((i % 251) as u8) ^ ((i >> 12) as u8).wrapping_mul(31)
}

pub fn pattern(start: u64, len: usize) -> Vec<u8> {
    (0..len as u64).map(|k| byte_at(start + k)).collect()
}

/// Appends `len` pattern bytes at the writer's current logical end.
pub fn append(f: &mut DirectFile, len: usize) -> Result<(), edgerec_storage::StorageError> {
    let data = pattern(f.logical_len(), len);
    f.write_all(&data)
}

/// Odd write sizes, a few MiB in all.
pub const ODD_SIZES: &[usize] = &[
    1,
    4095,
    MIB + 3,
    7,
    64 * KIB,
    4096,
    3 * MIB - 5,
    1,
    513,
    123_457,
];

/// Asserts the file holds exactly `len` pattern bytes.
pub fn assert_file_is_pattern(path: &Path, len: u64) {
    let data = std::fs::read(path).expect("read back");
    assert_eq!(data.len() as u64, len, "file length of {}", path.display());
    assert_prefix_is_pattern(&data, len);
}

/// Asserts the first `len` bytes of `data` are the pattern.
pub fn assert_prefix_is_pattern(data: &[u8], len: u64) {
    assert!(
        data.len() as u64 >= len,
        "have {} bytes, want {len}",
        data.len()
    );
    if let Some(i) = (0..len as usize).find(|&i| data[i] != byte_at(i as u64)) {
        panic!(
            "mismatch at offset {i}: got {:#04x}, want {:#04x}",
            data[i],
            byte_at(i as u64)
        );
    }
}

/// Options for a test: small preallocation so parallel tests do not
/// reserve gigabytes.
pub fn opts(backend: BackendChoice) -> WriterOptions {
    init_logging();
    WriterOptions {
        backend,
        preallocate: 8 * MIB as u64,
        ..WriterOptions::default()
    }
}

pub const FORCED: [(BackendChoice, Backend); 3] = [
    (BackendChoice::IoUring, Backend::IoUringDirect),
    (BackendChoice::PwriteDirect, Backend::PwriteDirect),
    (BackendChoice::Buffered, Backend::Buffered),
];

/// Routes the crate's tracing output to the test harness (shown for
/// failing tests, or with `--nocapture`); `RUST_LOG` picks the level.
pub fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .try_init();
}

/// Creates a writer with a forced backend, or prints why this host cannot
/// run it and returns `None`.
pub fn create_or_skip(path: &Path, opts: &WriterOptions, test: &str) -> Option<DirectFile> {
    match DirectFile::create(path, opts) {
        Ok(f) => Some(f),
        Err(e) => match e.kind() {
            ErrorKind::Unavailable {
                backend: Backend::IoUringDirect,
                reason,
            } => {
                edgerec_testkit::io_uring_skip_reason(reason)
                    .context(format!("{test} with {:?}", opts.backend))
                    .report();
                None
            }
            ErrorKind::Unavailable { .. } => {
                edgerec_testkit::skip::skip(format!("{test} with {:?}: {e}", opts.backend));
                None
            }
            _ => panic!("create {}: {e}", path.display()),
        },
    }
}

/// The storage crate's own verdict on io_uring here: `Some(reason)` (the
/// `Unavailable` reason, e.g. `"io_uring_setup: ENOSYS (Function not
/// implemented)"`, what user-mode QEMU answers) when a forced io_uring
/// writer cannot be created, `None` when it can.
pub fn io_uring_refusal() -> Option<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let probe = dir.path().join("io_uring_probe.bin");
    match DirectFile::create(&probe, &opts(BackendChoice::IoUring)) {
        Ok(f) => {
            f.close().expect("close the io_uring probe");
            None
        }
        Err(e) => match e.kind() {
            ErrorKind::Unavailable { reason, .. } => Some(reason.clone()),
            _ => panic!("io_uring probe {}: {e}", probe.display()),
        },
    }
}

/// The fallback reason Auto gives when O_DIRECT is refused: the io_uring
/// refusal comes first where io_uring is refused too (user-mode QEMU),
/// joined the way the crate joins every refusal on the way down.
pub fn o_direct_refused_reason() -> String {
    let einval = "open O_DIRECT: EINVAL (Invalid argument)";
    match io_uring_refusal() {
        Some(ring) => format!("{ring}; {einval}"),
        None => einval.to_owned(),
    }
}

/// Calls `tick` every 5 ms until `cond` holds or 5 s pass.
pub fn tick_until(f: &mut DirectFile, mut cond: impl FnMut(&DirectFile) -> bool) -> bool {
    for _ in 0..1000 {
        f.tick().expect("tick");
        if cond(f) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

/// Unmounts on drop, whatever the test did.
pub struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.0)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            // Something still holds it (a failed test's open file): detach
            // lazily so the tempdir can go.
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// Runs `mount args... target`; `Err` is the reason to skip.
pub fn mount(args: &[&str], target: &Path) -> Result<Mounted, String> {
    let out = Command::new("mount")
        .args(args)
        .arg(target)
        .output()
        .map_err(|e| format!("cannot run mount: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "mount {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(Mounted(target.to_path_buf()))
}
