//! Sending files. A bag directory goes file by file in name order with
//! `metadata.yaml` last, so a store that holds `metadata.yaml` holds the
//! whole session; `.active` files (still being written, or left by a power
//! cut for `edgerec recover`) are not sent. A file goes in one PUT when it
//! fits in a part, else as a multipart upload whose parts are read with
//! `pread` and sent `concurrency` at a time, each with its Content-MD5;
//! what was read is dropped from the page cache, so an upload does not
//! push the recording's pages out. A file is skipped when the store
//! already holds it (same size, same SHA-256 in the object's metadata),
//! and checked after it is sent: the store's size must be the file's.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use sha2::Digest as _;

use std::collections::BTreeMap;

use crate::error::io;
use crate::journal::{Entry, Header, Journal, Part};
use crate::key::{date_from_session, date_from_unix, object_key, KeyParts};
use crate::s3::{content_md5, Client};
use crate::settings::Settings;
use crate::OffloadError;

/// S3 takes at most this many parts.
pub const MAX_PARTS: u64 = 10_000;

/// The file that says a bag directory is complete: sent last.
pub const METADATA: &str = "metadata.yaml";

/// One file to send and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    /// The file.
    pub path: PathBuf,
    /// Its object key.
    pub key: String,
    /// Its size when planned.
    pub size: u64,
}

/// What became of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileOutcome {
    /// Sent: its bytes, in this many parts (1 for a single PUT), of
    /// which `reused` were at the store already (an upload that went on
    /// after a cut).
    Sent {
        /// The file's bytes.
        bytes: u64,
        /// Parts (1: one PUT).
        parts: u64,
        /// Parts the store held from before, not sent again.
        reused: u64,
    },
    /// The store already held it.
    Skipped,
}

/// The files of `paths` (bag directories or files) with their keys, in
/// the order they are sent; what is left out is said in `skipped`.
pub fn plan(
    paths: &[PathBuf],
    settings: &Settings,
    skipped: &mut Vec<String>,
) -> Result<Vec<PlannedFile>, OffloadError> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(io(p, "read"))?;
        if meta.is_dir() {
            let session = p
                .canonicalize()
                .ok()
                .and_then(|c| c.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "session".to_owned());
            let mut files: Vec<(PathBuf, u64, i64)> = Vec::new();
            for e in std::fs::read_dir(p).map_err(io(p, "list"))? {
                let e = e.map_err(io(p, "list"))?;
                let path = e.path();
                let name = e.file_name().to_string_lossy().into_owned();
                let m = std::fs::symlink_metadata(&path).map_err(io(&path, "read"))?;
                if !m.is_file() {
                    skipped.push(format!("{}: not a regular file", path.display()));
                    continue;
                }
                if name.ends_with(".active") {
                    skipped.push(format!(
                        "{}: still being written, or cut by a power loss (`edgerec recover` it first)",
                        path.display()
                    ));
                    continue;
                }
                files.push((path, m.len(), mtime(&m)));
            }
            // Name order, metadata.yaml last.
            files.sort_by(|a, b| {
                let last = |p: &Path| p.file_name().is_some_and(|n| n == METADATA);
                (last(&a.0), &a.0).cmp(&(last(&b.0), &b.0))
            });
            let date = date_from_session(&session)
                .unwrap_or_else(|| date_from_unix(files.iter().map(|f| f.2).min().unwrap_or(0)));
            for (path, size, _) in files {
                let file = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let key = key_for(settings, &session, &file, &date);
                out.push(PlannedFile { path, key, size });
            }
        } else if meta.is_file() {
            let file = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let session = file.split('.').next().unwrap_or(&file).to_owned();
            let date = date_from_session(&session).unwrap_or_else(|| date_from_unix(mtime(&meta)));
            let key = key_for(settings, &session, &file, &date);
            out.push(PlannedFile {
                path: p.clone(),
                key,
                size: meta.len(),
            });
        } else {
            skipped.push(format!("{}: not a file or a directory", p.display()));
        }
    }
    Ok(out)
}

fn key_for(settings: &Settings, session: &str, file: &str, date: &str) -> String {
    object_key(
        &settings.key_template,
        &KeyParts {
            vehicle: &settings.vehicle,
            session,
            file,
            date,
        },
    )
}

fn mtime(m: &std::fs::Metadata) -> i64 {
    std::os::unix::fs::MetadataExt::mtime(m)
}

/// The SHA-256 of `path`, hex, read once through a 1 MiB buffer (and let
/// go of in the page cache).
pub fn sha256_file(path: &Path) -> Result<String, OffloadError> {
    let f = std::fs::File::open(path).map_err(io(path, "open"))?;
    let mut h = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0u64;
    loop {
        let n = f.read_at(&mut buf, off).map_err(io(path, "read"))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        drop_cache(&f, off, n as u64);
        off += n as u64;
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Tells the kernel the pages of `[off, off + len)` are not needed again.
fn drop_cache(f: &std::fs::File, off: u64, len: u64) {
    use std::os::fd::AsRawFd;
    // SAFETY: posix_fadvise only advises the kernel about an open fd's
    // pages; it touches no memory of ours.
    unsafe {
        libc::posix_fadvise(
            f.as_raw_fd(),
            off as libc::off_t,
            len as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        );
    }
}

/// A multipart upload begun or taken up again: its id, the parts the
/// store holds already (number to ETag), its journal.
struct Started {
    id: String,
    done: BTreeMap<u16, String>,
    entry: Option<Entry>,
}

/// Sends files to one bucket.
pub struct Uploader {
    client: Client,
    part_size: u64,
    concurrency: usize,
    journal: Option<Journal>,
    endpoint: String,
    bucket: String,
}

impl Uploader {
    /// An uploader with `settings`' part size, concurrency and journal.
    pub fn new(client: Client, settings: &Settings) -> Self {
        Uploader {
            client,
            part_size: settings.part_size.max(1),
            concurrency: settings.concurrency.max(1),
            journal: (!settings.journal_dir.as_os_str().is_empty())
                .then(|| Journal::new(&settings.journal_dir)),
            endpoint: settings.endpoint.clone(),
            bucket: settings.bucket.clone(),
        }
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Sends `f` unless the store holds it already; `progress` is told
    /// the bytes sent as each part is acknowledged.
    pub fn upload(
        &self,
        f: &PlannedFile,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<FileOutcome, OffloadError> {
        let size = std::fs::metadata(&f.path)
            .map_err(io(&f.path, "read"))?
            .len();
        let sha = sha256_file(&f.path)?;
        if let Some(have) = self.client.head(&f.key)? {
            if have.size == size && have.sha256.as_deref() == Some(sha.as_str()) {
                return Ok(FileOutcome::Skipped);
            }
        }
        let parts = if size <= self.part_size {
            let body = std::fs::read(&f.path).map_err(io(&f.path, "read"))?;
            if body.len() as u64 != size {
                return Err(changed(&f.path));
            }
            self.client.put(&f.key, &body, &sha)?;
            progress(size);
            (1, 0)
        } else {
            self.multipart(f, size, &sha, progress)?
        };
        let (parts, reused) = parts;
        // What the store holds now must be the file.
        match self.client.head(&f.key)? {
            Some(have) if have.size == size => Ok(FileOutcome::Sent {
                bytes: size,
                parts,
                reused,
            }),
            Some(have) => Err(OffloadError::Mismatch {
                key: f.key.clone(),
                what: format!("{} bytes, the file {size}", have.size),
            }),
            None => Err(OffloadError::Mismatch {
                key: f.key.clone(),
                what: "no object".to_owned(),
            }),
        }
    }

    /// Where a multipart upload of `f` stands: the upload a journal says
    /// was cut (its parts the store still holds, by number), or a new one.
    fn start_or_resume(&self, f: &PlannedFile, header: &Header) -> Result<Started, OffloadError> {
        let Some(journal) = &self.journal else {
            let id = self.client.create_multipart(&f.key, &header.sha256)?;
            return Ok(Started {
                id,
                done: BTreeMap::new(),
                entry: None,
            });
        };
        if let Some(r) = journal.read(&self.bucket, &f.key)? {
            let old = &r.header;
            let same = old.endpoint == header.endpoint
                && old.file == header.file
                && old.size == header.size
                && old.mtime_ns == header.mtime_ns
                && old.sha256 == header.sha256
                && old.part_size == header.part_size;
            if same {
                match self.client.list_parts(&f.key, &old.upload_id) {
                    Ok(listed) => {
                        // A part counts when the journal and the store agree
                        // on its ETag; a part the store has that the journal
                        // never recorded was in flight, and is sent again.
                        let done: BTreeMap<u16, String> = r
                            .parts
                            .values()
                            .filter(|p| {
                                listed
                                    .get(&p.part)
                                    .is_some_and(|(e, _)| same_etag(e, &p.etag))
                            })
                            .map(|p| (p.part, p.etag.clone()))
                            .collect();
                        tracing::info!(
                            "{}: going on with the upload cut before ({} of its parts at the store)",
                            f.key,
                            done.len()
                        );
                        let entry = journal.open(old)?;
                        return Ok(Started {
                            id: old.upload_id.clone(),
                            done,
                            entry: Some(entry),
                        });
                    }
                    Err(OffloadError::Refused { status: 404, .. }) => {
                        tracing::info!(
                            "{}: the upload cut before is gone at the store; starting over",
                            f.key
                        );
                    }
                    Err(e) => return Err(e),
                }
            } else {
                // The file changed since: the old upload is ours to abandon.
                tracing::info!(
                    "{}: the file changed since its upload was cut; starting over",
                    f.key
                );
                if let Err(e) = self.client.abort(&f.key, &old.upload_id) {
                    tracing::warn!("{e}");
                }
            }
            journal.remove(&self.bucket, &f.key);
        }
        let id = self.client.create_multipart(&f.key, &header.sha256)?;
        let header = Header {
            upload_id: id.clone(),
            ..header.clone()
        };
        let entry = journal.begin(&header)?;
        Ok(Started {
            id,
            done: BTreeMap::new(),
            entry: Some(entry),
        })
    }

    /// Sends `f` in parts; (parts, parts reused from a cut upload).
    fn multipart(
        &self,
        f: &PlannedFile,
        size: u64,
        sha: &str,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<(u64, u64), OffloadError> {
        let n = size.div_ceil(self.part_size);
        if n > MAX_PARTS {
            return Err(OffloadError::NotConfigured(format!(
                "{}: {size} bytes would take {n} parts, more than S3's {MAX_PARTS}: raise \
                 offload.part_size to at least {} bytes",
                f.path.display(),
                size.div_ceil(MAX_PARTS)
            )));
        }
        let file = std::fs::File::open(&f.path).map_err(io(&f.path, "open"))?;
        let meta = file.metadata().map_err(io(&f.path, "read"))?;
        let header = Header {
            v: 1,
            endpoint: self.endpoint.clone(),
            bucket: self.bucket.clone(),
            key: f.key.clone(),
            upload_id: String::new(),
            // Absolute, so a run from another directory finds it.
            file: f.path.canonicalize().unwrap_or_else(|_| f.path.clone()),
            size,
            mtime_ns: mtime_ns(&meta),
            sha256: sha.to_owned(),
            part_size: self.part_size,
        };
        let Started { id, done, entry } = self.start_or_resume(f, &header)?;
        let reused = done.len() as u64;
        let mut initial: Vec<Option<String>> = vec![None; n as usize];
        let mut already = 0u64;
        for (num, etag) in &done {
            if let Some(slot) = initial.get_mut(usize::from(*num) - 1) {
                *slot = Some(etag.clone());
                already += self
                    .part_size
                    .min(size - (u64::from(*num) - 1) * self.part_size);
            }
        }
        if already > 0 {
            progress(already);
        }
        let todo: Vec<usize> = (0..n as usize).filter(|i| initial[*i].is_none()).collect();
        let etags: Mutex<Vec<Option<String>>> = Mutex::new(initial);
        let entry = Mutex::new(entry);
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let first_error: Mutex<Option<OffloadError>> = Mutex::new(None);
        let sent = AtomicU64::new(already);
        std::thread::scope(|s| {
            for _ in 0..self.concurrency.min(todo.len()) {
                s.spawn(|| {
                    let mut buf = Vec::new();
                    while !failed.load(Ordering::Relaxed) {
                        let Some(&i) = todo.get(next.fetch_add(1, Ordering::Relaxed)) else {
                            break;
                        };
                        let off = i as u64 * self.part_size;
                        let len = self.part_size.min(size - off) as usize;
                        let number = (i + 1) as u16;
                        buf.resize(len, 0);
                        let part = file
                            .read_exact_at(&mut buf, off)
                            .map_err(io(&f.path, "read"))
                            .and_then(|()| {
                                drop_cache(&file, off, len as u64);
                                let md5 = content_md5(&buf);
                                let etag =
                                    self.client.upload_part(&f.key, &id, number, &buf, &md5)?;
                                // Durable before it counts as sent.
                                if let Some(e) = lock(&entry).as_mut() {
                                    e.acknowledged(&Part {
                                        part: number,
                                        etag: etag.clone(),
                                        md5,
                                    })?;
                                }
                                Ok(etag)
                            });
                        match part {
                            Ok(etag) => {
                                tracing::info!("{}: part {number} of {n} sent", f.key);
                                lock(&etags)[i] = Some(etag);
                                progress(
                                    sent.fetch_add(len as u64, Ordering::Relaxed) + len as u64,
                                );
                            }
                            Err(e) => {
                                failed.store(true, Ordering::Relaxed);
                                lock(&first_error).get_or_insert(e);
                            }
                        }
                    }
                });
            }
        });
        let error = lock(&first_error).take();
        let result = match error {
            Some(e) => Err(e),
            None => {
                let etags: Option<Vec<String>> = lock(&etags).iter().cloned().collect();
                match etags {
                    Some(etags) => self.client.complete(&f.key, &id, &etags),
                    None => Err(changed(&f.path)),
                }
            }
        };
        match (&result, &self.journal) {
            (Ok(()), Some(j)) => j.remove(&self.bucket, &f.key),
            (Ok(()), None) => {}
            // Journaled: the next run goes on from the parts acknowledged.
            (Err(_), Some(_)) => {}
            (Err(_), None) => {
                if let Err(abort) = self.client.abort(&f.key, &id) {
                    tracing::warn!("{abort}");
                }
            }
        }
        result.map(|()| (n, reused))
    }

    /// Abandons the uploads the journal holds for this store and bucket
    /// whose files are gone or changed (their parts cost storage at the
    /// store until aborted); returns how many.
    pub fn abandon_stale(&self) -> usize {
        let Some(journal) = &self.journal else {
            return 0;
        };
        let mut n = 0;
        for r in journal.all() {
            let h = &r.header;
            if h.endpoint != self.endpoint || h.bucket != self.bucket {
                continue;
            }
            let current = std::fs::metadata(&h.file)
                .ok()
                .is_some_and(|m| m.len() == h.size && mtime_ns(&m) == h.mtime_ns);
            if current {
                continue;
            }
            tracing::info!(
                "{}: its file {} is gone or changed; abandoning its upload",
                h.key,
                h.file.display()
            );
            match self.client.abort(&h.key, &h.upload_id) {
                Ok(()) => {
                    journal.remove(&h.bucket, &h.key);
                    n += 1;
                }
                Err(e) => tracing::warn!("{e}"),
            }
        }
        n
    }
}

/// Whether two ETags name the same part (servers differ in whether they
/// quote it in a header and in XML).
fn same_etag(a: &str, b: &str) -> bool {
    a.trim_matches('"') == b.trim_matches('"')
}

fn mtime_ns(m: &std::fs::Metadata) -> i128 {
    use std::os::unix::fs::MetadataExt;
    i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn changed(path: &Path) -> OffloadError {
    OffloadError::Io {
        path: path.to_path_buf(),
        what: "read it whole (it changed while it was sent)",
        source: std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings::from_config(&edgerec_config::OffloadConfig {
            endpoint: "http://127.0.0.1:1".into(),
            bucket: "b".into(),
            journal_dir: std::path::PathBuf::new(),
            vehicle_id: "v7".into(),
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn a_bag_directory_in_name_order_metadata_last_active_left_out() {
        let d = tempfile::tempdir().unwrap();
        let bag = d.path().join("demo_20261206T101500Z");
        std::fs::create_dir(&bag).unwrap();
        for (name, len) in [
            ("metadata.yaml", 10),
            ("demo_20261206T101500Z_1.mcap", 20),
            ("demo_20261206T101500Z_0.mcap", 30),
            ("demo_20261206T101500Z_2.mcap.active", 40),
        ] {
            std::fs::write(bag.join(name), vec![1u8; len]).unwrap();
        }
        std::fs::create_dir(bag.join("sub")).unwrap();
        let mut skipped = Vec::new();
        let files = plan(std::slice::from_ref(&bag), &settings(), &mut skipped).unwrap();
        let keys: Vec<&str> = files.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "v7/demo_20261206T101500Z/demo_20261206T101500Z_0.mcap",
                "v7/demo_20261206T101500Z/demo_20261206T101500Z_1.mcap",
                "v7/demo_20261206T101500Z/metadata.yaml",
            ]
        );
        assert_eq!(files[0].size, 30);
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        assert!(skipped.iter().any(|s| s.contains("edgerec recover")));
        let sha = sha256_file(&bag.join("metadata.yaml")).unwrap();
        // sha256 of ten 0x01 bytes.
        assert_eq!(sha.len(), 64);
        assert!(plan(&[d.path().join("none")], &settings(), &mut skipped).is_err());
    }
}
