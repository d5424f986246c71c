//! Test support shared by edgerec's integration tests.
//!
//! [`mcap_readback`] reads a file with the `mcap` crate (an implementation
//! independent of ours) with every CRC checked: chunk, data section and
//! summary section. [`python`] finds the virtual environment that
//! `scripts/test` made for the Python readers.
#![deny(missing_docs)]

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
