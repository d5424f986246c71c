//! The upload journal: what a multipart upload has acknowledged, on the
//! data partition, so an upload cut by SIGKILL, a power cut or a reboot
//! goes on where it stopped instead of from zero.
//!
//! One file per upload in progress, `<journal_dir>/<SHA-256 of the
//! bucket and key>.jsonl`: a first line that says which upload it is (the
//! store, the bucket, the key, the upload id, and the file as it was: its
//! path, size, modification time, SHA-256 and the part size), then one line
//! per part the store acknowledged (its number, ETag and the MD5 sent),
//! each appended and made durable (`fdatasync`) before the part counts as
//! sent. The file is removed once the upload is complete or abandoned. A
//! last line cut by a power cut is ignored (its part is sent again); a
//! journal that cannot be read is set aside, never trusted.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::error::io;
use crate::OffloadError;

/// A journal file larger than this is not read (10,000 parts of about 100
/// bytes each, and the header, fit well within it).
pub const MAX_JOURNAL: u64 = 4 << 20;

/// Which upload a journal is for, and the file as it was when it began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// Format version: 1.
    pub v: u32,
    /// `offload.endpoint`.
    pub endpoint: String,
    /// The bucket.
    pub bucket: String,
    /// The object key.
    pub key: String,
    /// The store's id of the multipart upload.
    pub upload_id: String,
    /// The local file.
    pub file: PathBuf,
    /// Its size.
    pub size: u64,
    /// Its modification time, ns since the epoch.
    pub mtime_ns: i128,
    /// Its SHA-256, hex; empty when it was not known as the upload
    /// began (the parts are hashed as they are sent).
    pub sha256: String,
    /// The part size the upload was cut in.
    pub part_size: u64,
}

/// One acknowledged part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// Its number, from 1.
    pub part: u16,
    /// The ETag the store answered.
    pub etag: String,
    /// The Content-MD5 it was sent with.
    pub md5: String,
}

/// A journal read back: its header and the parts acknowledged, by number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    /// Which upload.
    pub header: Header,
    /// Acknowledged parts (the last one written wins for a number).
    pub parts: std::collections::BTreeMap<u16, Part>,
}

/// Reads a journal's text: `None` when its first line is not a header of
/// version 1 (the file is not a journal, or was cut before its header
/// was whole). Part lines that do not parse, or name a part outside 1 to
/// 10,000, are skipped (a line cut by a power cut).
pub fn parse(text: &str) -> Option<Recorded> {
    let mut lines = text.split('\n');
    let header: Header = serde_json::from_str(lines.next()?).ok()?;
    if header.v != 1 || header.upload_id.is_empty() || header.part_size == 0 {
        return None;
    }
    let mut parts = std::collections::BTreeMap::new();
    for line in lines {
        if let Ok(p) = serde_json::from_str::<Part>(line) {
            if (1..=10_000).contains(&p.part) && !p.etag.is_empty() && p.etag.len() <= 256 {
                parts.insert(p.part, p);
            }
        }
    }
    Some(Recorded { header, parts })
}

/// The journal directory.
#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
}

/// An open journal of one upload, appended as parts are acknowledged.
#[derive(Debug)]
pub struct Entry {
    path: PathBuf,
    file: File,
}

impl Journal {
    /// The journal in `dir` (made when first written).
    pub fn new(dir: &Path) -> Self {
        Journal {
            dir: dir.to_path_buf(),
        }
    }

    /// The journal file of `key` in `bucket`.
    pub fn path_of(&self, bucket: &str, key: &str) -> PathBuf {
        let h = sha2::Sha256::digest(format!("{bucket}\n{key}").as_bytes());
        let name: String = h.iter().take(16).map(|b| format!("{b:02x}")).collect();
        self.dir.join(format!("{name}.jsonl"))
    }

    /// What the journal holds for `key`, if anything readable.
    pub fn read(&self, bucket: &str, key: &str) -> Result<Option<Recorded>, OffloadError> {
        let path = self.path_of(bucket, key);
        // What is at the path, not what a link there points at.
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(&path, "read the upload journal")(e)),
        };
        if !meta.is_file() {
            self.set_aside(&path, "not a regular file (a link, a FIFO or a directory)");
            return Ok(None);
        }
        if meta.len() > MAX_JOURNAL {
            self.set_aside(&path, "larger than any journal");
            return Ok(None);
        }
        let bytes = edgerec_format::nofollow::read_capped(&path, MAX_JOURNAL)
            .map_err(io(&path, "read the upload journal"))?;
        let text = String::from_utf8_lossy(&bytes);
        match parse(&text) {
            Some(r) if r.header.bucket == bucket && r.header.key == key => Ok(Some(r)),
            _ => {
                self.set_aside(&path, "not a journal of this upload");
                Ok(None)
            }
        }
    }

    /// Renames a journal that cannot be used to `*.bad` (kept for a
    /// person to look at, never read again).
    fn set_aside(&self, path: &Path, why: &str) {
        let bad = path.with_extension("bad");
        tracing::warn!(
            "{}: {why}; set aside as {} and the upload starts over",
            path.display(),
            bad.display()
        );
        let _ = std::fs::rename(path, bad);
    }

    /// Starts the journal of a new upload: its header, durable before the
    /// first part is sent.
    pub fn begin(&self, header: &Header) -> Result<Entry, OffloadError> {
        // Made relative to the directory's descriptor under a random
        // temporary name, then renamed: a link planted in the journal
        // directory is never written through.
        let dir = edgerec_format::nofollow::create_dir_all(&self.dir)
            .map_err(io(&self.dir, "create the journal directory"))?;
        let path = self.path_of(&header.bucket, &header.key);
        let mut line = serde_json::to_string(header).unwrap_or_default();
        line.push('\n');
        dir.write_atomic(&crate::upload::file_name(&path), line.as_bytes())
            .map_err(io(&path, "write the upload journal"))?;
        self.open(header)
    }

    /// Opens the journal of an upload that goes on, for appending.
    pub fn open(&self, header: &Header) -> Result<Entry, OffloadError> {
        let path = self.path_of(&header.bucket, &header.key);
        let file = crate::platform::open_append_existing(&path)
            .map_err(io(&path, "open the upload journal"))?;
        Ok(Entry { path, file })
    }

    /// Every readable journal in the directory.
    pub fn all(&self) -> Vec<Recorded> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        rd.flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
            .filter(|e| {
                e.metadata()
                    .is_ok_and(|m| m.is_file() && m.len() <= MAX_JOURNAL)
            })
            .filter_map(|e| edgerec_format::nofollow::read_capped(&e.path(), MAX_JOURNAL).ok())
            .filter_map(|t| parse(&String::from_utf8_lossy(&t)))
            .collect()
    }

    /// Removes the journal of `key` (the upload is complete or abandoned).
    pub fn remove(&self, bucket: &str, key: &str) {
        let path = self.path_of(bucket, key);
        if std::fs::remove_file(&path).is_ok() {
            sync_dir(&self.dir);
        }
    }
}

impl Entry {
    /// Records an acknowledged part, durably, before it counts as sent.
    pub fn acknowledged(&mut self, part: &Part) -> Result<(), OffloadError> {
        let mut line = serde_json::to_string(part).unwrap_or_default();
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|_| self.file.sync_data())
            .map_err(io(&self.path, "write the upload journal"))
    }
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header {
            v: 1,
            endpoint: "https://s3.example".into(),
            bucket: "fleet".into(),
            key: "v/s/f.mcap".into(),
            upload_id: "u-1".into(),
            file: PathBuf::from("/data/f.mcap"),
            size: 40 << 20,
            mtime_ns: 1_796_580_374_000_000_000,
            sha256: "ab".repeat(32),
            part_size: 16 << 20,
        }
    }

    #[test]
    fn parts_survive_and_a_cut_line_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::new(&d.path().join("journal"));
        let h = header();
        let mut e = j.begin(&h).unwrap();
        for n in 1..=2u16 {
            e.acknowledged(&Part {
                part: n,
                etag: format!("\"etag{n}\""),
                md5: "x".into(),
            })
            .unwrap();
        }
        drop(e);
        // A power cut in the middle of the third line.
        let path = j.path_of("fleet", "v/s/f.mcap");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"part\":3,\"etag\":\"\\\"et").unwrap();
        drop(f);
        let r = j.read("fleet", "v/s/f.mcap").unwrap().unwrap();
        assert_eq!(r.header, h);
        assert_eq!(r.parts.keys().copied().collect::<Vec<_>>(), [1, 2]);
        assert_eq!(r.parts[&2].etag, "\"etag2\"");
        // Another key: nothing.
        assert_eq!(j.read("fleet", "other").unwrap(), None);
        j.remove("fleet", "v/s/f.mcap");
        assert_eq!(j.read("fleet", "v/s/f.mcap").unwrap(), None);
    }

    #[test]
    fn a_file_that_is_not_a_journal_is_set_aside() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::new(d.path());
        let path = j.path_of("fleet", "k");
        std::fs::write(&path, "garbage\n{\"part\":1}").unwrap();
        assert_eq!(j.read("fleet", "k").unwrap(), None);
        assert!(!path.exists());
        assert!(path.with_extension("bad").exists());
        assert!(parse("").is_none());
        assert!(parse("{\"v\":2}").is_none());
    }

    #[cfg(unix)]
    #[test]
    fn links_planted_in_the_journal_directory_are_never_followed() {
        let d = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let j = Journal::new(d.path());
        let h = header();
        let path = j.path_of(&h.bucket, &h.key);
        // A link as the journal: read sets the link aside, never reads
        // what it points at; begin replaces a link, never writes through.
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        assert_eq!(j.read(&h.bucket, &h.key).unwrap(), None);
        assert!(std::fs::symlink_metadata(path.with_extension("bad"))
            .unwrap()
            .file_type()
            .is_symlink());
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        std::os::unix::fs::symlink(&victim, path.with_extension("new")).unwrap();
        let mut e = j.begin(&h).unwrap();
        e.acknowledged(&Part {
            part: 1,
            etag: "\"e\"".into(),
            md5: "m".into(),
        })
        .unwrap();
        assert_eq!(j.read(&h.bucket, &h.key).unwrap().unwrap().parts.len(), 1);
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        // /dev/zero as a journal is set aside, not read until memory ends.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        assert_eq!(j.read(&h.bucket, &h.key).unwrap(), None);
        assert!(j.all().is_empty());
        // The journal directory itself a link: refused.
        let linked = d.path().join("linked");
        std::os::unix::fs::symlink(outside.path(), &linked).unwrap();
        let err = Journal::new(&linked).begin(&h).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 1);
    }
}
