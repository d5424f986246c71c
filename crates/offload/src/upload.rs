//! Sending files. A bag directory goes file by file in name order with
//! `metadata.yaml` last, so a store that holds `metadata.yaml` holds the
//! whole session; `.active` files (still being written, or left by a power
//! cut for `edgerec recover`) are not sent. A file goes in one PUT when it
//! fits in a part, else as a multipart upload whose parts are read with
//! `pread` and sent `concurrency` at a time, each with its Content-MD5;
//! they are read past the page cache ([`crate::uncached`]), so an upload
//! does not push the recording's pages out. Each part is read once: its MD5 is
//! computed (the request's Content-MD5, so the store refuses bytes other
//! than the ones hashed) and it is fed, in order, to the file's SHA-256
//! (for the manifest, and a single PUT's metadata). After the upload the
//! object's ETag must be the one those MD5s give (S3's: the MD5 of a
//! single PUT; the MD5 of the parts' MD5s and `-N` for N parts; or, from
//! a store that gives the MD5 of the whole object, that), else the file is
//! sent again, and never deleted. A file is skipped when the store
//! already holds an object of its size whose ETag (and SHA-256, when it
//! has one) are the file's: only then is it read before sending. After
//! every file of a bag directory, its [`crate::manifest`] is sent last.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use std::collections::BTreeMap;

use sha2::Digest as _;

use crate::error::io;
use crate::journal::{Entry, Header, Journal, Part};
use crate::key::{date_from_session, date_from_unix, object_key, KeyParts};
use crate::manifest::MANIFEST;
use crate::platform::mtime_ns;
use crate::s3::Client;
use crate::settings::Settings;
use crate::uncached::{ReadBuf, Uncached};
use crate::OffloadError;

/// S3 takes at most this many parts.
pub const MAX_PARTS: u64 = 10_000;

/// The file that says a bag directory is complete: sent last.
pub const METADATA: &str = "metadata.yaml";

/// The directory under the recordings root that holds event clips.
pub const EVENTS_DIR: &str = "events";

/// One file to send and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    /// The file.
    pub path: PathBuf,
    /// Its object key.
    pub key: String,
    /// Its size when planned.
    pub size: u64,
    /// The bag directory it belongs to (an index into
    /// [`Plan::sessions`]), if it was given as one.
    pub session: Option<usize>,
}

/// A bag directory to send: its manifest follows its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedSession {
    /// The directory's name.
    pub name: String,
    /// The manifest's object key.
    pub manifest_key: String,
    /// Its files left out, each with why.
    pub left_out: Vec<String>,
}

/// What to send, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The files.
    pub files: Vec<PlannedFile>,
    /// The bag directories among the paths.
    pub sessions: Vec<PlannedSession>,
    /// What is not sent, each with why.
    pub skipped: Vec<String>,
}

/// What became of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
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
        /// The file's SHA-256, hex.
        sha256: String,
    },
    /// The store already held it.
    Skipped {
        /// The file's SHA-256, hex.
        sha256: String,
    },
}

impl FileOutcome {
    /// The file's SHA-256, hex.
    pub fn sha256(&self) -> &str {
        match self {
            FileOutcome::Sent { sha256, .. } | FileOutcome::Skipped { sha256 } => sha256,
        }
    }
}

/// The files of `paths` (bag directories or files) with their keys, in
/// the order they are sent, and what is left out.
pub fn plan(paths: &[PathBuf], settings: &Settings) -> Result<Plan, OffloadError> {
    let mut plan = Plan::default();
    let (out, skipped) = (&mut plan.files, &mut plan.skipped);
    for p in paths {
        let meta = std::fs::metadata(p).map_err(io(p, "read"))?;
        if meta.is_dir() {
            let mut files: Vec<(PathBuf, u64, i64)> = Vec::new();
            let mut left_out = Vec::new();
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
                    left_out.push(format!(
                        "{name}: still being written, or cut by a power loss"
                    ));
                    continue;
                }
                if name == MANIFEST {
                    skipped.push(format!(
                        "{}: the session's manifest is made by the upload; a file of that name is not sent",
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
            let (session, date) = session_and_date(p, files.iter().map(|f| f.2).min().unwrap_or(0));
            let index = plan.sessions.len();
            for (path, size, _) in files {
                let key = key_for(settings, &session, &file_name(&path), &date);
                out.push(PlannedFile {
                    path,
                    key,
                    size,
                    session: Some(index),
                });
            }
            plan.sessions.push(PlannedSession {
                manifest_key: key_for(settings, &session, MANIFEST, &date),
                name: session,
                left_out,
            });
        } else if meta.is_file() {
            let file = file_name(p);
            let session = file.split('.').next().unwrap_or(&file).to_owned();
            let date = date_from_session(&session).unwrap_or_else(|| date_from_unix(mtime(&meta)));
            let key = key_for(settings, &session, &file, &date);
            out.push(PlannedFile {
                path: p.clone(),
                key,
                size: meta.len(),
                session: None,
            });
        } else {
            skipped.push(format!("{}: not a file or a directory", p.display()));
        }
    }
    Ok(plan)
}

/// The last component of `path`, as text (`{file}` in keys).
pub(crate) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A bag directory's name, its `{session}` in keys.
fn session_name(dir: &Path) -> String {
    dir.canonicalize()
        .ok()
        .and_then(|c| c.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "session".to_owned())
}

/// The session of a recording's bag directory `dir` as [`plan`] names it,
/// and the UTC date of its keys (from its name, else `mtime`, seconds).
fn session_and_date(dir: &Path, mtime: i64) -> (String, String) {
    let session = session_name(dir);
    let date = date_from_session(&session).unwrap_or_else(|| date_from_unix(mtime));
    (session, date)
}

/// A file of a bag directory, keyed as [`plan`] keys it when the
/// directory is given: for the files the running recorder closes one at
/// a time.
pub fn plan_in_session(path: &Path, settings: &Settings) -> Result<PlannedFile, OffloadError> {
    let meta = std::fs::metadata(path).map_err(io(path, "read"))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let (session, date) = session_and_date(dir, mtime(&meta));
    Ok(PlannedFile {
        key: key_for(settings, &session, &file_name(path), &date),
        path: path.to_path_buf(),
        size: meta.len(),
        session: None,
    })
}

/// The key of `file` (the manifest) in the bag directory `dir`, and the
/// directory's session name.
pub fn key_in_session(dir: &Path, file: &str, settings: &Settings) -> (String, String) {
    let mtime = std::fs::metadata(dir).map(|m| mtime(&m)).unwrap_or(0);
    let (session, date) = session_and_date(dir, mtime);
    (key_for(settings, &session, file, &date), session)
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
    (mtime_ns(m) / 1_000_000_000) as i64
}

/// What a file is, from one read: its size, its SHA-256 and the MD5 of
/// each part it is sent in (one part when it fits in one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digests {
    /// Bytes read.
    pub size: u64,
    /// SHA-256, hex.
    pub sha256: String,
    /// The MD5 of each part, in order.
    pub part_md5: Vec<[u8; 16]>,
    /// The MD5 of the whole file, when it was computed (for a store that
    /// gives a multipart object that as its ETag).
    pub whole_md5: Option<[u8; 16]>,
}

impl Digests {
    /// The digests of `bytes` sent in one part.
    pub fn of(bytes: &[u8]) -> Digests {
        Digests {
            size: bytes.len() as u64,
            sha256: hex(&sha2::Sha256::digest(bytes)),
            part_md5: vec![md5::Md5::digest(bytes).into()],
            whole_md5: None,
        }
    }

    /// The ETag S3 gives the object once sent: the MD5 of a single PUT,
    /// or the MD5 of the parts' MD5s and `-N`; hex, without quotes.
    pub fn etag(&self) -> String {
        match self.part_md5.as_slice() {
            [one] => hex(one),
            parts => {
                let mut h = md5::Md5::new();
                for p in parts {
                    h.update(p);
                }
                format!("{}-{}", hex(&h.finalize()), parts.len())
            }
        }
    }

    /// Content-MD5 (base64) of part `i` (from 0).
    pub fn content_md5(&self, i: usize) -> String {
        self.part_md5.get(i).map(base64_md5).unwrap_or_default()
    }
}

/// An MD5 as Content-MD5 writes it (base64).
fn base64_md5(digest: &[u8; 16]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(digest)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The [`Digests`] of `path` sent in parts of `part_size` (one part when
/// it is no larger), read once in 1 MiB chunks past the page cache.
pub fn digests(path: &Path, part_size: u64) -> Result<Digests, OffloadError> {
    let part_size = part_size.max(1);
    let mut sha = sha2::Sha256::new();
    let mut part = md5::Md5::new();
    let mut in_part = 0u64;
    let mut parts = Vec::new();
    let size = read_through(path, |chunk| {
        sha.update(chunk);
        let mut rest = chunk;
        while !rest.is_empty() {
            let take = rest.len().min((part_size - in_part) as usize);
            part.update(&rest[..take]);
            in_part += take as u64;
            rest = &rest[take..];
            if in_part == part_size {
                parts.push(part.finalize_reset().into());
                in_part = 0;
            }
        }
    })?;
    if in_part > 0 || parts.is_empty() {
        parts.push(part.finalize().into());
    }
    Ok(Digests {
        size,
        sha256: hex(&sha.finalize()),
        part_md5: parts,
        whole_md5: None,
    })
}

/// The MD5 of the whole file at `path`, hex.
fn whole_md5(path: &Path) -> Result<String, OffloadError> {
    let mut h = md5::Md5::new();
    read_through(path, |chunk| h.update(chunk))?;
    Ok(hex(&h.finalize()))
}

/// Reads `path` once in 1 MiB chunks past the page cache (`Uncached`),
/// handing each chunk to `each`; the bytes read.
fn read_through(path: &Path, mut each: impl FnMut(&[u8])) -> Result<u64, OffloadError> {
    let f = Uncached::open(path).map_err(io(path, "open"))?;
    let mut buf = ReadBuf::default();
    let mut off = 0u64;
    loop {
        let chunk = f.read(&mut buf, off, 1 << 20).map_err(io(path, "read"))?;
        if chunk.is_empty() {
            return Ok(off);
        }
        each(chunk);
        off += chunk.len() as u64;
    }
}

/// The hashes of a whole file that its part senders feed in part order:
/// the SHA-256 and, for a store whose ETags need it, the whole file's
/// MD5. Each sender waits for its part's turn; a failure wakes them all.
struct InOrder {
    /// The next part to take, and the hashes so far.
    state: Mutex<(usize, sha2::Sha256, Option<md5::Md5>)>,
    turn: std::sync::Condvar,
}

impl InOrder {
    fn new(whole_md5: bool) -> InOrder {
        InOrder {
            state: Mutex::new((0, sha2::Sha256::new(), whole_md5.then(md5::Md5::new))),
            turn: std::sync::Condvar::new(),
        }
    }

    /// Feeds part `i` once every part before it is in; false when
    /// `failed` was set first.
    fn feed(&self, i: usize, bytes: &[u8], failed: &AtomicBool) -> bool {
        let mut s = lock(&self.state);
        while s.0 != i && !failed.load(Ordering::Relaxed) {
            s = self
                .turn
                .wait(s)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        if failed.load(Ordering::Relaxed) {
            return false;
        }
        s.1.update(bytes);
        if let Some(w) = s.2.as_mut() {
            w.update(bytes);
        }
        s.0 += 1;
        self.turn.notify_all();
        true
    }

    /// Wakes every sender waiting for its turn (under the lock, so a
    /// sender between its check of `failed` and its wait is not missed).
    fn wake_all(&self) {
        let _held = lock(&self.state);
        self.turn.notify_all();
    }

    /// The SHA-256 (hex) and the whole file's MD5, if it was asked for.
    fn finish(self) -> (String, Option<[u8; 16]>) {
        let (_, sha, whole) = self
            .state
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (hex(&sha.finalize()), whole.map(|w| w.finalize().into()))
    }
}

/// A multipart upload begun or taken up again: its id, the parts the
/// store holds already (number to the ETag and the Content-MD5 they were
/// sent with), its journal.
struct Started {
    id: String,
    done: BTreeMap<u16, (String, String)>,
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
    etag_is_md5: bool,
    /// Set once the store is seen to give a multipart object the MD5 of
    /// its bytes as its ETag (s3rver): later uploads compute that MD5 in
    /// their one read instead of reading the file again.
    whole_md5_etags: AtomicBool,
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
            etag_is_md5: settings.etag_is_md5(),
            whole_md5_etags: AtomicBool::new(false),
        }
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Sends `f` unless the store holds it already; `progress` is told
    /// the bytes sent as each part is acknowledged. An object that is not
    /// the file after the upload (its size or ETag differ) is sent once
    /// more, then reported as [`OffloadError::Mismatch`].
    pub fn upload(
        &self,
        f: &PlannedFile,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<FileOutcome, OffloadError> {
        let size = std::fs::metadata(&f.path)
            .map_err(io(&f.path, "read"))?
            .len();
        let n = size.div_ceil(self.part_size);
        if n > MAX_PARTS {
            return Err(OffloadError::NotConfigured(format!(
                "{}: {size} bytes would take {n} parts, more than S3's {MAX_PARTS}: raise \
                 offload.part_size to at least {} bytes",
                f.path.display(),
                size.div_ceil(MAX_PARTS)
            )));
        }
        // Only an object of the file's size may be the file: then read
        // it to compare (a re-run); else send it, hashing as it is read.
        if let Some(have) = self.client.head(&f.key)? {
            if have.size == size {
                let d = digests(&f.path, self.part_size)?;
                if self.holds(&have, &d, Some(&f.path))? {
                    return Ok(FileOutcome::Skipped { sha256: d.sha256 });
                }
            }
        }
        let mut tries = 0;
        loop {
            tries += 1;
            let (d, parts, reused) = if size <= self.part_size {
                let body = std::fs::read(&f.path).map_err(io(&f.path, "read"))?;
                if body.len() as u64 != size {
                    return Err(changed(&f.path));
                }
                let d = Digests::of(&body);
                self.client
                    .put(&f.key, &body, &d.content_md5(0), Some(&d.sha256))?;
                progress(size);
                (d, 1, 0)
            } else {
                self.multipart(f, size, progress)?
            };
            // What the store holds now must be the file.
            let have = self.client.head(&f.key)?;
            if let Some(have) = &have {
                if self.holds(have, &d, Some(&f.path))? {
                    return Ok(FileOutcome::Sent {
                        bytes: size,
                        parts,
                        reused,
                        sha256: d.sha256,
                    });
                }
            }
            let what = match have {
                Some(have) if have.size != size => format!("{} bytes, the file {size}", have.size),
                Some(have) => format!(
                    "ETag {}, where the file's part MD5s give {}",
                    have.etag.as_deref().unwrap_or("(none)"),
                    d.etag()
                ),
                None => "no object".to_owned(),
            };
            let err = OffloadError::Mismatch {
                key: f.key.clone(),
                what,
            };
            if tries >= 2 {
                return Err(err);
            }
            tracing::warn!("{err}; sending it again now");
        }
    }

    /// Whether the object `have` is the file (at `path`) of digests `d`:
    /// its size, the SHA-256 a single PUT stored with it, and (unless
    /// SSE-KMS makes ETags opaque) its ETag: S3's form, or, from a store
    /// that gives a multipart object the MD5 of its bytes instead
    /// (s3rver), that MD5, computed by reading the file again only then.
    fn holds(
        &self,
        have: &crate::s3::ObjectInfo,
        d: &Digests,
        path: Option<&Path>,
    ) -> Result<bool, OffloadError> {
        if have.size != d.size {
            return Ok(false);
        }
        // A single PUT stores the SHA-256 with the object; a multipart
        // upload begins before it is known (the ETag covers its parts).
        if have.sha256.as_deref().is_some_and(|s| s != d.sha256) {
            return Ok(false);
        }
        if !self.etag_is_md5 {
            return Ok(true);
        }
        let Some(etag) = have.etag.as_deref() else {
            return Ok(false);
        };
        if etag == d.etag() {
            return Ok(true);
        }
        let whole_md5_form = etag.len() == 32 && etag.bytes().all(|b| b.is_ascii_hexdigit());
        if d.part_md5.len() < 2 || !whole_md5_form {
            return Ok(false);
        }
        let whole = match (d.whole_md5, path) {
            (Some(m), _) => hex(&m),
            (None, Some(path)) => whole_md5(path)?,
            (None, None) => return Ok(false),
        };
        let same = etag.eq_ignore_ascii_case(&whole);
        if same {
            self.whole_md5_etags.store(true, Ordering::Relaxed);
        }
        Ok(same)
    }

    /// Where a multipart upload of `f` stands: the upload a journal says
    /// was cut (its parts the store still holds, by number), or a new one.
    fn start_or_resume(&self, f: &PlannedFile, header: &Header) -> Result<Started, OffloadError> {
        let Some(journal) = &self.journal else {
            let id = self.client.create_multipart(&f.key)?;
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
                && old.part_size == header.part_size;
            if same {
                match self.client.list_parts(&f.key, &old.upload_id) {
                    Ok(listed) => {
                        // A part counts when the journal and the store agree
                        // on its ETag; a part the store has that the journal
                        // never recorded was in flight, and is sent again.
                        let done: BTreeMap<u16, (String, String)> = r
                            .parts
                            .values()
                            .filter(|p| {
                                listed
                                    .get(&p.part)
                                    .is_some_and(|(e, _)| same_etag(e, &p.etag))
                            })
                            .map(|p| (p.part, (p.etag.clone(), p.md5.clone())))
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
        let id = self.client.create_multipart(&f.key)?;
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

    /// Sends `f` (`size` bytes) in parts, reading it once: each part is
    /// read, its MD5 computed (its Content-MD5), fed in order to the
    /// file's SHA-256, then sent, `concurrency` parts at a time. A part a
    /// cut upload left at the store is read too, and kept only if its
    /// MD5 is the one it was sent with. Returns the file's digests, the
    /// parts, and how many were kept from before.
    fn multipart(
        &self,
        f: &PlannedFile,
        size: u64,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<(Digests, u64, u64), OffloadError> {
        let n = size.div_ceil(self.part_size) as usize;
        let file = Uncached::open(&f.path).map_err(io(&f.path, "open"))?;
        let meta = file.file().metadata().map_err(io(&f.path, "read"))?;
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
            // Not known until every part is read.
            sha256: String::new(),
            part_size: self.part_size,
        };
        let Started { id, done, entry } = self.start_or_resume(f, &header)?;
        let etags: Mutex<Vec<Option<String>>> = Mutex::new(vec![None; n]);
        let md5s: Mutex<Vec<[u8; 16]>> = Mutex::new(vec![[0; 16]; n]);
        let entry = Mutex::new(entry);
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let first_error: Mutex<Option<OffloadError>> = Mutex::new(None);
        let sent = AtomicU64::new(0);
        let kept = AtomicU64::new(0);
        let order = InOrder::new(self.whole_md5_etags.load(Ordering::Relaxed));
        let fail = |e: OffloadError| {
            failed.store(true, Ordering::Relaxed);
            lock(&first_error).get_or_insert(e);
            order.wake_all();
        };
        std::thread::scope(|s| {
            for _ in 0..self.concurrency.min(n) {
                s.spawn(|| {
                    let mut buf = ReadBuf::default();
                    while !failed.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break;
                        }
                        let off = i as u64 * self.part_size;
                        let len = self.part_size.min(size - off) as usize;
                        let number = (i + 1) as u16;
                        let buf = match file.read(&mut buf, off, len) {
                            Ok(b) if b.len() == len => b,
                            Ok(_) => {
                                fail(changed(&f.path));
                                break;
                            }
                            Err(e) => {
                                fail(io(&f.path, "read")(e));
                                break;
                            }
                        };
                        let digest: [u8; 16] = md5::Md5::digest(buf).into();
                        lock(&md5s)[i] = digest;
                        if !order.feed(i, buf, &failed) {
                            break;
                        }
                        let md5 = base64_md5(&digest);
                        // A part from a cut upload stays if it is these bytes.
                        if let Some((etag, was)) = done.get(&number) {
                            if *was == md5 {
                                lock(&etags)[i] = Some(etag.clone());
                                kept.fetch_add(1, Ordering::Relaxed);
                                progress(
                                    sent.fetch_add(len as u64, Ordering::Relaxed) + len as u64,
                                );
                                continue;
                            }
                        }
                        let part = self
                            .client
                            .upload_part(&f.key, &id, number, buf, &md5)
                            .and_then(|etag| {
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
                                fail(e);
                                break;
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
        result?;
        let (sha256, whole_md5) = order.finish();
        let d = Digests {
            size,
            sha256,
            part_md5: md5s
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            whole_md5,
        };
        Ok((d, n as u64, kept.into_inner()))
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

    /// Sends `plan`: each file in order, and after the last file of a bag
    /// directory its manifest, if every one of its files is at the store.
    /// The calling thread is put in the idle I/O class first.
    /// `progress` is told the bytes done of the whole plan; `outcome` is
    /// told what became of each file (and manifest). A refusal every
    /// other file would meet too (401, 403, 404: the credentials, the
    /// bucket) stops it.
    pub fn send(
        &self,
        plan: &Plan,
        vehicle: &str,
        progress: &(dyn Fn(u64) + Sync),
        outcome: &mut dyn FnMut(&Path, &str, &FileResult),
    ) -> Report {
        // The recorder's writes come first: this thread and the part
        // senders it starts read at the idle I/O class.
        if let Err(e) = crate::priority::idle_io() {
            tracing::warn!("cannot lower the upload's I/O priority to idle: {e}");
        }
        let mut report = Report::default();
        let mut done_before = 0u64;
        let mut entries: Vec<Vec<crate::manifest::ManifestFile>> =
            vec![Vec::new(); plan.sessions.len()];
        let mut session_failed = vec![false; plan.sessions.len()];
        for (i, f) in plan.files.iter().enumerate() {
            let base = done_before;
            let r = self.upload(f, &|bytes| progress(base + bytes));
            outcome(&f.path, &f.key, &r);
            done_before += f.size;
            let stop = match &r {
                Ok(o) => {
                    match o {
                        FileOutcome::Sent { bytes, .. } => {
                            report.sent += 1;
                            report.sent_bytes += bytes;
                        }
                        FileOutcome::Skipped { .. } => report.skipped += 1,
                    }
                    if let Some(s) = f.session {
                        entries[s].push(crate::manifest::file_entry(
                            &f.path,
                            &f.key,
                            f.size,
                            o.sha256(),
                        ));
                    }
                    false
                }
                Err(e) => {
                    report.failed.push(f.path.clone());
                    if let Some(s) = f.session {
                        session_failed[s] = true;
                    }
                    matches!(
                        e,
                        OffloadError::Refused {
                            status: 401 | 403 | 404,
                            ..
                        }
                    )
                }
            };
            let last_of_session = f
                .session
                .filter(|s| plan.files.get(i + 1).and_then(|n| n.session) != Some(*s));
            if let Some(s) = last_of_session.filter(|s| !session_failed[*s]) {
                let session = &plan.sessions[s];
                let manifest = crate::manifest::Manifest::new(
                    vehicle,
                    &session.name,
                    std::mem::take(&mut entries[s]),
                    session.left_out.clone(),
                );
                let r = self.upload_bytes(&session.manifest_key, &manifest.to_bytes());
                outcome(Path::new(MANIFEST), &session.manifest_key, &r);
                match r {
                    Ok(_) => report.manifests += 1,
                    Err(_) => report.failed.push(PathBuf::from(MANIFEST)),
                }
            }
            if stop {
                report.not_tried = plan.files.len() - i - 1;
                break;
            }
        }
        report
    }

    /// Sends `bytes` as the object `key` in one PUT unless the store holds
    /// it already, and checks it there as [`Uploader::upload`] does.
    pub fn upload_bytes(&self, key: &str, bytes: &[u8]) -> Result<FileOutcome, OffloadError> {
        let d = Digests::of(bytes);
        if let Some(have) = self.client.head(key)? {
            if self.holds(&have, &d, None)? {
                return Ok(FileOutcome::Skipped { sha256: d.sha256 });
            }
        }
        self.client
            .put(key, bytes, &d.content_md5(0), Some(&d.sha256))?;
        match self.client.head(key)? {
            Some(have) if self.holds(&have, &d, None)? => Ok(FileOutcome::Sent {
                bytes: d.size,
                parts: 1,
                reused: 0,
                sha256: d.sha256,
            }),
            _ => Err(OffloadError::Mismatch {
                key: key.to_owned(),
                what: "an object that is not what was sent".to_owned(),
            }),
        }
    }
}

/// What became of one file (or manifest) in [`Uploader::send`].
pub type FileResult = Result<FileOutcome, OffloadError>;

/// What [`Uploader::send`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Files sent.
    pub sent: u64,
    /// Their bytes.
    pub sent_bytes: u64,
    /// Files the store held already.
    pub skipped: u64,
    /// Manifests at the store (sent or there already).
    pub manifests: u64,
    /// Files (or manifests) that failed.
    pub failed: Vec<PathBuf>,
    /// Files not tried after a refusal that would meet them too.
    pub not_tried: usize,
}

/// Whether two ETags name the same part (servers differ in whether they
/// quote it in a header and in XML).
fn same_etag(a: &str, b: &str) -> bool {
    a.trim_matches('"') == b.trim_matches('"')
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
        std::fs::write(bag.join(MANIFEST), b"{}").unwrap();
        let p = plan(std::slice::from_ref(&bag), &settings()).unwrap();
        let (files, skipped) = (&p.files, &p.skipped);
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
        assert_eq!(skipped.len(), 3, "{skipped:?}");
        assert!(skipped.iter().any(|s| s.contains("edgerec recover")));
        assert!(skipped.iter().any(|s| s.contains("manifest")));
        assert_eq!(p.sessions.len(), 1);
        assert_eq!(
            p.sessions[0].manifest_key,
            "v7/demo_20261206T101500Z/manifest.json"
        );
        assert_eq!(
            p.sessions[0].left_out,
            ["demo_20261206T101500Z_2.mcap.active: still being written, or cut by a power loss"]
        );
        assert!(files.iter().all(|f| f.session == Some(0)));
        assert!(plan(&[d.path().join("none")], &settings()).is_err());
    }

    /// The ETags S3 documents: a PUT's is the body's MD5; a multipart
    /// upload's is the MD5 of its parts' MD5s, then `-N`. Checked against
    /// the MD5s computed whole, with part boundaries inside and at the
    /// end of the 1 MiB read buffer.
    #[test]
    fn digests_give_s3s_etags() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("f");
        let bytes: Vec<u8> = (0..(5u32 << 20) + 123)
            .map(|i| (i * 7 + i / 977) as u8)
            .collect();
        std::fs::write(&path, &bytes).unwrap();
        let md5 = |b: &[u8]| -> [u8; 16] { md5::Md5::digest(b).into() };
        let one = digests(&path, 16 << 20).unwrap();
        assert_eq!(one.size, bytes.len() as u64);
        assert_eq!(one.part_md5, [md5(&bytes)]);
        assert_eq!(one.etag(), hex(&md5(&bytes)));
        assert_eq!(one.sha256, hex(&sha2::Sha256::digest(&bytes)));
        for part in [1u64 << 20, 1_500_001, 2 << 20] {
            let dd = digests(&path, part).unwrap();
            let want: Vec<[u8; 16]> = bytes.chunks(part as usize).map(md5).collect();
            assert_eq!(dd.part_md5, want, "part size {part}");
            let cat: Vec<u8> = want.concat();
            assert_eq!(dd.etag(), format!("{}-{}", hex(&md5(&cat)), want.len()));
        }
        std::fs::write(&path, b"").unwrap();
        let empty = digests(&path, 16 << 20).unwrap();
        assert_eq!(empty.etag(), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(empty.content_md5(0), "1B2M2Y8AsgTpgAmY7PhCfg==");
    }
}
