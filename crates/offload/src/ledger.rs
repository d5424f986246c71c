//! What the running recorder's offload has at the store: one JSON line per
//! segment file or event clip directory confirmed there (sent, or found
//! there already with the right size and checksum), in `sent.jsonl` in
//! `offload.journal_dir`, so it outlives a restart. Retention asks it
//! (through the binary; the recorder does not depend on offload) which
//! files may go first, and counts each one deleted before it was sent.
//! A line lost to a power cut only means the file is checked at the store
//! again (and skipped there). Read back bounded: lines past
//! [`MAX_LINE`] bytes or files past [`MAX_LEDGER`] are not trusted, and
//! entries whose file is gone are dropped when it is opened.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};

/// The ledger's file name in `offload.journal_dir`.
pub const LEDGER: &str = "sent.jsonl";

/// The most of the file read back; the rest is left out (those files are
/// checked at the store again).
pub const MAX_LEDGER: u64 = 16 << 20;

/// The longest line trusted.
pub const MAX_LINE: usize = 8 << 10;

#[derive(Debug, Serialize, Deserialize)]
struct Line {
    path: PathBuf,
    bytes: u64,
    key: String,
}

/// The ledger: the set in memory (shared with retention's question) and
/// the file it is appended to.
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    sent: Arc<RwLock<HashMap<PathBuf, u64>>>,
    file: Option<Arc<Mutex<std::fs::File>>>,
}

/// A path as the ledger keys it: absolute (not resolved: the recorder
/// and retention name files the same way).
fn key_of(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

impl Ledger {
    /// The ledger in `dir` (made if missing); in memory only when `dir` is
    /// empty. Entries whose file is gone are dropped (the file is
    /// rewritten without them).
    pub fn open(dir: &Path) -> std::io::Result<Ledger> {
        if dir.as_os_str().is_empty() {
            return Ok(Ledger::default());
        }
        // The directory (a link in its place refused) is opened once and
        // the ledger made and replaced relative to it: a link planted as
        // the ledger or its temporary file is never written through.
        let handle = edgerec_format::nofollow::create_dir_all(dir)?;
        let path = dir.join(LEDGER);
        let mut text = Vec::new();
        if let Ok(f) = crate::platform::open_private(&path) {
            f.take(MAX_LEDGER).read_to_end(&mut text)?;
        }
        let (listed, mut dropped) = parse(&text);
        let mut sent = HashMap::new();
        for (p, b) in listed {
            if p.exists() {
                sent.insert(p, b);
            } else {
                dropped += 1;
            }
        }
        if dropped > 0 {
            // Rewritten whole, then renamed over the old one.
            let text: Vec<u8> = sent
                .iter()
                .flat_map(|(p, b)| line_bytes(p, *b, ""))
                .collect();
            handle.write_atomic(LEDGER, &text)?;
        }
        let file = handle.open_append(LEDGER)?;
        Ok(Ledger {
            sent: Arc::new(RwLock::new(sent)),
            file: Some(Arc::new(Mutex::new(file))),
        })
    }

    /// `path` (a segment file, or a clip's directory) of `bytes` is at the
    /// store as `key`.
    pub fn record(&self, path: &Path, bytes: u64, key: &str) {
        let k = key_of(path);
        if let Some(f) = &self.file {
            let mut f = f.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = f.write_all(&line_bytes(&k, bytes, key)) {
                tracing::warn!("offload: the ledger of what was sent: {e}");
            }
        }
        self.sent
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(k, bytes);
    }

    /// Whether `path` is at the store.
    pub fn has(&self, path: &Path) -> bool {
        self.sent
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&key_of(path))
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.sent.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// No entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The entries of a ledger's text (path, bytes), and how many lines were
/// not trusted (too long, not an entry, a relative path).
pub fn parse(text: &[u8]) -> (Vec<(PathBuf, u64)>, usize) {
    let mut out = Vec::new();
    let mut dropped = 0;
    for line in text.split(|b| *b == b'\n') {
        if line.is_empty() {
            continue;
        }
        if line.len() > MAX_LINE {
            dropped += 1;
            continue;
        }
        match serde_json::from_slice::<Line>(line) {
            Ok(l) if l.path.is_absolute() => out.push((l.path, l.bytes)),
            _ => dropped += 1,
        }
    }
    (out, dropped)
}

fn line_bytes(path: &Path, bytes: u64, key: &str) -> Vec<u8> {
    let mut v = serde_json::to_vec(&Line {
        path: path.to_path_buf(),
        bytes,
        key: key.to_owned(),
    })
    .unwrap_or_default();
    v.push(b'\n');
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_recorded_is_there_after_a_restart_and_gone_files_are_dropped() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a.mcap");
        let b = d.path().join("b.mcap");
        std::fs::write(&a, b"a").unwrap();
        std::fs::write(&b, b"b").unwrap();
        let l = Ledger::open(&d.path().join("j")).unwrap();
        assert!(!l.has(&a));
        l.record(&a, 1, "v/s/a.mcap");
        l.record(&b, 1, "v/s/b.mcap");
        assert!(l.has(&a) && l.has(&b));
        std::fs::remove_file(&b).unwrap();
        // Garbage and an over-long line are not trusted.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(d.path().join("j").join(LEDGER))
            .unwrap();
        f.write_all(b"{not json\n").unwrap();
        f.write_all(&vec![b'x'; MAX_LINE + 1]).unwrap();
        f.write_all(b"\n").unwrap();
        drop(f);
        let again = Ledger::open(&d.path().join("j")).unwrap();
        assert!(again.has(&a));
        assert!(!again.has(&b));
        assert_eq!(again.len(), 1);
        let text = std::fs::read_to_string(d.path().join("j").join(LEDGER)).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        // In memory only.
        let mem = Ledger::open(Path::new("")).unwrap();
        mem.record(&a, 1, "k");
        assert!(mem.has(&a));
    }

    #[cfg(unix)]
    #[test]
    fn a_link_planted_as_the_ledger_or_its_temporary_file_is_not_written_through() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let j = d.path().join("j");
        std::fs::create_dir(&j).unwrap();
        // The name the old code rewrote through, and the ledger itself.
        std::os::unix::fs::symlink(&victim, j.join(".sent.jsonl.tmp")).unwrap();
        std::os::unix::fs::symlink(&victim, j.join(LEDGER)).unwrap();
        let err = Ledger::open(&j).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        std::fs::remove_file(j.join(LEDGER)).unwrap();
        // A ledger that lists a gone file is rewritten beside the link.
        std::fs::write(j.join(LEDGER), line_bytes(&d.path().join("gone"), 1, "k")).unwrap();
        let l = Ledger::open(&j).unwrap();
        l.record(&victim, 4, "k");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(Ledger::open(&j).unwrap().has(&victim));
    }
}
