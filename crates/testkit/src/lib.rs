//! Test support shared by edgerec's integration tests.
//!
//! [`mcap_readback`] reads a file with the `mcap` crate (an implementation
//! independent of ours) with every CRC checked: chunk, data section and
//! summary section. [`python`] finds the virtual environment that
//! `scripts/test` made for the Python readers. [`qemu_user`],
//! [`io_uring_skip_reason`] and [`skip_if_cannot_exec`] let tests that run
//! as aarch64 binaries under user-mode QEMU (`scripts/test-aarch64`) say
//! exactly why they skip what emulation cannot do.
#![deny(missing_docs)]

pub mod limit;
pub mod mqtt;
pub mod netns;
pub mod ros1;
pub mod s3;
pub mod skip;

pub use limit::time_limit;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One message as the `mcap` crate decoded it.
#[derive(Debug, Clone)]
pub struct ReadMessage {
    /// Topic.
    pub topic: String,
    /// Schema name.
    pub schema: String,
    /// MCAP sequence field.
    pub sequence: u32,
    /// Receive time.
    pub log_time: u64,
    /// Publish time.
    pub publish_time: u64,
    /// Payload.
    pub data: Vec<u8>,
}

/// Everything the `mcap` crate read from a file.
#[derive(Debug, Clone, Default)]
pub struct Readback {
    /// Messages in file order.
    pub messages: Vec<ReadMessage>,
    /// Statistics from the summary.
    pub message_count: u64,
    /// Channel id -> messages, from the summary statistics.
    pub channel_message_counts: BTreeMap<u16, u64>,
    /// Topic -> schema name, from the summary.
    pub topics: BTreeMap<String, String>,
    /// Metadata records by name.
    pub metadata: BTreeMap<String, BTreeMap<String, String>>,
    /// Chunks listed in the summary.
    pub chunk_count: usize,
}

/// Reads `path` with the `mcap` crate, validating every CRC (chunk, data
/// section, summary section) in a linear pass, then reading messages and
/// the summary through its high-level API. Returns an error string naming
/// what the crate rejected.
pub fn mcap_readback(path: &Path) -> Result<Readback, String> {
    use mcap::sans_io::linear_reader::{LinearReadEvent, LinearReader, LinearReaderOptions};
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let opts = LinearReaderOptions {
        validate_chunk_crcs: true,
        prevalidate_chunk_crcs: true,
        validate_data_section_crc: true,
        validate_summary_section_crc: true,
        check_finishes_after_end_magic: true,
        ..Default::default()
    };
    let mut lr = LinearReader::new_with_options(opts);
    let mut fed = 0usize;
    let mut metadata = BTreeMap::new();
    while let Some(ev) = lr.next_event() {
        match ev.map_err(|e| format!("mcap linear reader: {e}"))? {
            LinearReadEvent::ReadRequest(n) => {
                let n = n.min(bytes.len() - fed);
                lr.insert(n).copy_from_slice(&bytes[fed..fed + n]);
                lr.notify_read(n);
                fed += n;
            }
            LinearReadEvent::Record { data, opcode } => {
                let rec =
                    mcap::parse_record(opcode, data).map_err(|e| format!("mcap record: {e}"))?;
                if let mcap::records::Record::Metadata(m) = rec {
                    metadata.insert(m.name, m.metadata);
                }
            }
        }
    }
    let summary = mcap::Summary::read(&bytes)
        .map_err(|e| format!("mcap summary: {e}"))?
        .ok_or("no summary section")?;
    let stats = summary.stats.clone().ok_or("no statistics record")?;
    let mut out = Readback {
        message_count: stats.message_count,
        channel_message_counts: stats.channel_message_counts.into_iter().collect(),
        metadata,
        chunk_count: summary.chunk_indexes.len(),
        ..Default::default()
    };
    for ch in summary.channels.values() {
        let schema = ch
            .schema
            .as_ref()
            .map(|s| s.name.clone())
            .unwrap_or_default();
        out.topics.insert(ch.topic.clone(), schema);
    }
    let stream = mcap::MessageStream::new_with_options(
        &bytes,
        mcap::read::Options::ValidateChunkCrcs.into(),
    )
    .map_err(|e| format!("mcap message stream: {e}"))?;
    for m in stream {
        let m = m.map_err(|e| format!("mcap message: {e}"))?;
        out.messages.push(ReadMessage {
            topic: m.channel.topic.clone(),
            schema: m
                .channel
                .schema
                .as_ref()
                .map(|s| s.name.clone())
                .unwrap_or_default(),
            sequence: m.sequence,
            log_time: m.log_time,
            publish_time: m.publish_time,
            data: m.data.into_owned(),
        });
    }
    Ok(out)
}

/// The Python interpreter of the readers' virtual environment:
/// `$EDGEREC_PYTHON`, else `<workspace>/.venv/bin/python` when it exists.
/// None means the Python readers are not installed (`scripts/test`
/// installs them); callers print that and skip.
pub fn python() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("EDGEREC_PYTHON") {
        let p = PathBuf::from(p);
        if p.exists() {
            return Some(p);
        }
    }
    let p = workspace_root().join(".venv/bin/python");
    p.exists().then_some(p)
}

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A loop-mounted ext4 image of a given size, unmounted (lazily) on drop,
/// for tests that need a real small file system (ENOSPC, retention).
#[derive(Debug)]
pub struct LoopExt4 {
    dir: PathBuf,
}

impl LoopExt4 {
    /// Makes `img` (`mib` MiB, 4 KiB blocks) and mounts it on `dir`. Err
    /// says why when this machine refuses (no root, no loop devices):
    /// callers print it and skip.
    pub fn mount(img: &Path, dir: &Path, mib: u64) -> Result<LoopExt4, String> {
        use std::process::Command;
        let run = |cmd: &mut Command| -> Result<(), String> {
            let o = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
            if o.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{cmd:?}: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ))
            }
        };
        std::fs::File::create(img)
            .and_then(|f| f.set_len(mib << 20))
            .map_err(|e| e.to_string())?;
        run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-b", "4096"])
            .arg(img))?;
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        run(Command::new("mount").args(["-o", "loop"]).arg(img).arg(dir))?;
        Ok(LoopExt4 {
            dir: dir.to_path_buf(),
        })
    }
}

impl Drop for LoopExt4 {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .status();
    }
}

/// `len` incompressible bytes (xorshift), different for each `seed`.
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Bytes an unprivileged writer may still use on the file system of `p`
/// (statvfs f_bavail x f_frsize).
pub fn free_bytes(p: &Path) -> u64 {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else {
        return 0;
    };
    // SAFETY: statvfs fills the zeroed struct we own from a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the pointers are valid for the call.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return 0;
    }
    st.f_bavail as u64 * st.f_frsize as u64
}

/// Bytes of every regular file under `dir`, at any depth, not following
/// links; 0 when `dir` cannot be read.
pub fn tree_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .filter_map(|e| Some((std::fs::symlink_metadata(e.path()).ok()?, e.path())))
        .map(|(m, p)| {
            if m.is_dir() {
                tree_bytes(&p)
            } else if m.is_file() {
                m.len()
            } else {
                0
            }
        })
        .sum()
}

/// One `wait4(pid, WNOHANG)` on a child of this process: once it has
/// ended, it is reaped and this returns its wait status and its peak RSS
/// in KiB (the kernel's `ru_maxrss`, its VmHWM); `None` while it runs.
pub fn reap_with_peak_rss(pid: u32) -> std::io::Result<Option<(i32, u64)>> {
    let pid = pid as libc::pid_t;
    let mut st = 0;
    // SAFETY: a zeroed rusage is valid; wait4 fills it for our child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the pointers are valid for the call.
    let r = unsafe { libc::wait4(pid, &mut st, libc::WNOHANG, &mut ru) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // ru_maxrss is in KiB on Linux.
    Ok((r == pid).then_some((st, ru.ru_maxrss as u64)))
}

/// Waits until a recording under `root` has opened its first segment (a
/// `*.mcap.active` file in a session directory below `root`), polling
/// every 20 ms; false when `limit` passes first. Tests that signal a
/// running `edgerec run` after some time of recording count from here,
/// not from the spawn: an emulated start-up (user-mode QEMU) takes a good
/// part of a second.
pub fn wait_for_active_segment(root: &Path, limit: std::time::Duration) -> bool {
    let start = std::time::Instant::now();
    let active = || -> bool {
        let Ok(sessions) = std::fs::read_dir(root) else {
            return false;
        };
        sessions.flatten().any(|s| {
            std::fs::read_dir(s.path()).is_ok_and(|files| {
                files
                    .flatten()
                    .any(|f| f.file_name().to_string_lossy().ends_with(".mcap.active"))
            })
        })
    };
    while !active() {
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}

/// `Some(description)` when this test process is a foreign-architecture
/// binary run by user-mode QEMU (`qemu-aarch64` as cargo's runner, or
/// started through binfmt_misc), e.g. `"user-mode QEMU: an aarch64
/// process on an x86_64 kernel"`; `None` on native hardware and inside a
/// full-system VM.
///
/// QEMU answers `uname(2)` with the emulated machine, but does not touch
/// `/proc/sys/kernel/arch`, the kernel's own machine name (Linux 6.1 and
/// later); where that file is missing, `uname -m` run as a child answers
/// for the kernel (a host binary runs natively). A mismatch with the
/// architecture this binary was compiled for means emulation.
pub fn qemu_user() -> Option<String> {
    static ANSWER: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    ANSWER
        .get_or_init(|| {
            let kernel = std::fs::read_to_string("/proc/sys/kernel/arch")
                .ok()
                .or_else(|| {
                    let o = std::process::Command::new("uname")
                        .arg("-m")
                        .output()
                        .ok()?;
                    o.status
                        .success()
                        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
                })?;
            let kernel = match kernel.trim() {
                "arm64" => "aarch64",
                k => k,
            };
            let ours = std::env::consts::ARCH;
            (!kernel.is_empty() && kernel != ours)
                .then(|| format!("user-mode QEMU: an {ours} process on an {kernel} kernel"))
        })
        .clone()
}

/// The reason a test prints when it skips something because io_uring was
/// refused. `refusal` is what refused it, ideally the storage crate's own
/// probe (the `Unavailable` reason of a forced io_uring writer, e.g.
/// `"io_uring_setup: ENOSYS (Function not implemented)"`). User-mode QEMU
/// implements none of the io_uring syscalls, so there the reason says
/// that; anywhere else the refusal is the reason (a kernel without
/// io_uring, `kernel.io_uring_disabled`, a seccomp profile).
pub fn io_uring_skip_reason(refusal: &str) -> skip::Skip {
    if qemu_user().is_some() && refusal.contains("ENOSYS") {
        skip::Skip::allowed(
            skip::Allowed::QemuUser,
            "user-mode QEMU has no io_uring (io_uring_setup: ENOSYS)",
        )
    } else {
        skip::Skip::missing(format!("io_uring is refused here: {refusal}"))
    }
}

/// The reason a test prints when it skips because `what` (a syscall or
/// an ioctl, e.g. `"the SIOCETHTOOL ioctl"`) failed with `err`. User-mode
/// QEMU answers ENOSYS for what it does not translate (QEMU 7.2: io_uring,
/// SIOCETHTOOL), and then the reason says so; anywhere else it is the
/// error itself.
pub fn unsupported_skip_reason(what: &str, err: &std::io::Error) -> skip::Skip {
    match (qemu_user(), err.raw_os_error()) {
        (Some(_), Some(libc::ENOSYS)) => skip::Skip::allowed(
            skip::Allowed::QemuUser,
            format!("user-mode QEMU does not implement {what} (ENOSYS)"),
        ),
        _ => skip::Skip::missing(format!("{what} failed: {err}")),
    }
}

/// Why the binary `bin` (a target binary of the crate under test,
/// `CARGO_BIN_EXE_*`) cannot be started from this test process, when the
/// cause is user-mode QEMU; `None` when `bin --version` runs, and also
/// when it fails for any other reason (then the test runs and fails on
/// its own: a skip is never a way to hide a broken binary).
///
/// Under user-mode QEMU a child is exec'd by the host kernel, which can
/// run an aarch64 binary only through a binfmt_misc entry for
/// `qemu-aarch64`, and that QEMU finds the dynamic loader only through
/// `QEMU_LD_PREFIX` (cargo's runner passes `-L` to the test binary alone).
/// `scripts/test-aarch64` sets up both.
pub fn exec_skip_reason(bin: &str) -> Option<String> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static ANSWERS: OnceLock<Mutex<HashMap<String, Option<String>>>> = OnceLock::new();
    let qemu = qemu_user()?;
    let answers = ANSWERS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut answers = answers
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    answers
        .entry(bin.to_owned())
        .or_insert_with(|| exec_failure_under_qemu(bin, &qemu))
        .clone()
}

fn exec_failure_under_qemu(bin: &str, qemu: &str) -> Option<String> {
    let out = std::process::Command::new(bin)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output();
    let stderr = match &out {
        Ok(o) if o.status.success() => return None,
        Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_owned(),
        Err(e) => e.to_string(),
    };
    let mut header = [0u8; 64];
    let n = std::fs::File::open(bin)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut header))
        .unwrap_or(0);
    if let Err(why) = binfmt_entry_for(&header[..n]) {
        return Some(format!(
            "{qemu}; {why}, so the kernel cannot exec {bin} from the emulated test"
        ));
    }
    if stderr.contains("ld-linux") || stderr.contains("Could not open") {
        return Some(format!(
            "{qemu}; the qemu that binfmt_misc starts for {bin} finds no dynamic \
             loader ({stderr}): set QEMU_LD_PREFIX (scripts/test-aarch64 does)"
        ));
    }
    None
}

/// The name of an enabled binfmt_misc entry whose magic and mask match
/// the start of an executable, or why there is none.
fn binfmt_entry_for(header: &[u8]) -> Result<String, String> {
    let dir = Path::new("/proc/sys/fs/binfmt_misc");
    if !dir.join("status").exists() {
        return Err("binfmt_misc is not mounted on /proc/sys/fs/binfmt_misc".to_owned());
    }
    let hex = |s: &str| -> Vec<u8> {
        (0..s.len() / 2)
            .filter_map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
            .collect()
    };
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        if !text.starts_with("enabled") {
            continue;
        }
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .unwrap_or("")
        };
        let offset: usize = field("offset ").parse().unwrap_or(0);
        let magic = hex(field("magic "));
        let mask = hex(field("mask "));
        if magic.is_empty() || header.len() < offset + magic.len() {
            continue;
        }
        let matches = magic.iter().enumerate().all(|(i, m)| {
            let k = mask.get(i).copied().unwrap_or(0xff);
            header[offset + i] & k == m & k
        });
        if matches {
            return Ok(entry.file_name().to_string_lossy().into_owned());
        }
    }
    Err(format!(
        "binfmt_misc has no enabled entry for {arch} executables (registering \
         qemu-{arch} needs root; scripts/test-aarch64 does it)",
        arch = std::env::consts::ARCH
    ))
}

/// Skips ([`skip::skip`]: a failure under scripts/test, where
/// `scripts/test-aarch64` registers binfmt_misc) and returns true when
/// [`exec_skip_reason`] gives a reason not to start `bin` here; the caller
/// returns.
#[track_caller]
pub fn skip_if_cannot_exec(bin: &str) -> bool {
    let Some(why) = exec_skip_reason(bin) else {
        return false;
    };
    skip::skip(why);
    true
}

/// A child process killed and reaped when this goes out of scope, so a
/// failing test leaves no recorder running.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
