//! Sessions and segments on disk.
//!
//! One rosbag2 bag directory per session; segments `<session>_<n>.mcap`,
//! the open one named `.mcap.active`. Closing a segment finishes its
//! summary, fdatasyncs, publishes it (`edgerec_format::bag::publish`: 0444,
//! fsync, rename, directory fsync) and rewrites `metadata.yaml` atomically.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use edgerec_format::bag::{self, BagMetadata, MetadataVersion};
use edgerec_format::chunk::SealedChunk;
use edgerec_format::records::{Channel, Schema};
use edgerec_format::writer::{McapWriter, PROFILE_ROS2};
use edgerec_format::FormatError;
use edgerec_storage::{CloseReport, DirectFile, StorageError, WriterOptions};

use crate::RecorderError;
use edgerec_source::Channel as SourceChannel;

/// `std::io::Write` over a [`DirectFile`], so the format crate stays free of
/// the storage crate. A storage error travels inside the `io::Error` and is
/// recovered with [`storage_error`].
#[derive(Debug)]
pub struct StorageSink(pub DirectFile);

impl io::Write for StorageSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write_all(buf).map_err(io::Error::other)?;
        Ok(buf.len())
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf).map_err(io::Error::other)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A recording session: one bag directory.
#[derive(Debug)]
pub struct Session {
    dir: PathBuf,
    name: String,
    bag: BagMetadata,
    next_index: u32,
    storage: WriterOptions,
    library: String,
}

/// `YYYYmmddTHHMMSSZ` for ns since the epoch (UTC).
pub fn utc_stamp(ns: u64) -> String {
    let secs = (ns / 1_000_000_000) as i64;
    let (y, mo, d) = edgerec_format::info::civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{y:04}{mo:02}{d:02}T{:02}{:02}{:02}Z",
        s / 3600,
        (s / 60) % 60,
        s % 60
    )
}

impl Session {
    /// Creates `<root>/<prefix>_<UTC stamp>[_<k>]`, unique even when the
    /// clock went backwards and the name exists already.
    pub fn create(
        root: &Path,
        prefix: &str,
        now_ns: u64,
        version: MetadataVersion,
        storage: WriterOptions,
        library: String,
    ) -> Result<Self, RecorderError> {
        // A root that is a link (to a directory outside the data
        // partition) is refused; the session directory is made in the
        // root's descriptor, beside (never through) a link planted under
        // the name it would take.
        let parent =
            edgerec_format::nofollow::create_dir_all(root).map_err(|e| RecorderError::Path {
                path: root.to_path_buf(),
                what: "create the recordings root",
                source: e,
            })?;
        let base = format!("{prefix}_{}", utc_stamp(now_ns));
        let (name, _) = parent
            .create_unique_dir(&base)
            .map_err(|e| RecorderError::Path {
                path: root.join(&base),
                what: if e.kind() == io::ErrorKind::AlreadyExists {
                    "find an unused session name"
                } else {
                    "create the session directory"
                },
                source: e,
            })?;
        let _ = parent.sync();
        Ok(Self::new(root.join(&name), name, version, storage, library))
    }

    fn new(
        dir: PathBuf,
        name: String,
        version: MetadataVersion,
        storage: WriterOptions,
        library: String,
    ) -> Self {
        Self {
            dir,
            name,
            bag: BagMetadata {
                version,
                ..Default::default()
            },
            next_index: 0,
            storage,
            library,
        }
    }

    /// A session in exactly `dir` (rosbag2's `-o`), which must not exist
    /// yet (rosbag2 refuses an existing output directory too); its files
    /// are named after it.
    pub fn create_at(
        dir: &Path,
        version: MetadataVersion,
        storage: WriterOptions,
        library: String,
    ) -> Result<Self, RecorderError> {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| !n.is_empty() && *n != "." && *n != "..")
            .ok_or_else(|| RecorderError::Path {
                path: dir.to_path_buf(),
                what: "name the bag directory after its last part",
                source: io::Error::from(io::ErrorKind::InvalidInput),
            })?
            .to_owned();
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| RecorderError::Path {
                path: parent.to_path_buf(),
                what: "create the bag directory's parent",
                source: e,
            })?;
        }
        std::fs::create_dir(dir).map_err(|e| RecorderError::Path {
            path: dir.to_path_buf(),
            what: if e.kind() == io::ErrorKind::AlreadyExists {
                "create the bag directory (it exists already: choose another -o, or remove it)"
            } else {
                "create the bag directory"
            },
            source: e,
        })?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            let _ = bag::sync_dir(parent);
        }
        Ok(Self::new(
            dir.to_path_buf(),
            name,
            version,
            storage,
            library,
        ))
    }

    /// The bag directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// The session name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Reloads the bag metadata from the closed segments on disk (after
    /// retention deleted some of this session's).
    pub fn reload_metadata(&mut self) {
        match edgerec_format::bag::rewrite_metadata(&self.dir) {
            Ok(m) => self.bag = m,
            Err(e) => tracing::warn!("{}: cannot rewrite metadata.yaml: {e}", self.dir.display()),
        }
    }

    /// The bag metadata as written last.
    pub fn metadata(&self) -> &BagMetadata {
        &self.bag
    }

    /// Opens the next segment and writes the schemas and channels of
    /// `channels` into it.
    pub fn open_segment(
        &mut self,
        channels: &[Arc<SourceChannel>],
    ) -> Result<Segment, RecorderError> {
        let index = self.next_index;
        self.next_index += 1;
        let file_name = format!("{}_{index}.mcap", self.name);
        let final_path = self.dir.join(&file_name);
        let active_path = self.dir.join(format!("{file_name}.active"));
        let file = DirectFile::create(&active_path, &self.storage).map_err(|e| {
            RecorderError::Storage {
                path: active_path.clone(),
                source: e,
            }
        })?;
        let _ = bag::sync_dir(&self.dir);
        let mcap = McapWriter::new(StorageSink(file), PROFILE_ROS2, &self.library)
            .map_err(|e| fmt_err(&active_path, e))?;
        let mut seg = Segment {
            index,
            file_name,
            final_path,
            active_path,
            mcap,
            written: BTreeMap::new(),
            repeats: BTreeMap::new(),
            new_span: None,
            closing_metadata: Vec::new(),
        };
        for c in channels {
            seg.add_channel(c)?;
        }
        Ok(seg)
    }

    /// Records a segment finished by [`Segment::finish`] (possibly on
    /// another thread) in `metadata.yaml`, rewritten atomically.
    pub fn add_closed(&mut self, f: FinishedSegment) -> Result<ClosedSegment, RecorderError> {
        let FinishedSegment {
            closed,
            file_name,
            summary,
        } = f;
        self.bag.add_file(
            file_name,
            &summary.statistics,
            &summary.channels,
            &summary.schemas,
        );
        self.bag
            .write_atomic(&self.dir)
            .map_err(|e| RecorderError::Path {
                path: self.dir.join("metadata.yaml"),
                what: "write metadata.yaml",
                source: e,
            })?;
        Ok(closed)
    }
}

/// A segment whose file is complete and renamed, not yet in
/// `metadata.yaml`.
#[derive(Debug)]
pub struct FinishedSegment {
    closed: ClosedSegment,
    file_name: String,
    summary: edgerec_format::writer::WrittenSummary,
}

fn fmt_err(path: &Path, e: FormatError) -> RecorderError {
    // The storage error travels inside the io::Error of StorageSink.
    match e {
        FormatError::Io(io) if io.get_ref().is_some_and(|x| x.is::<StorageError>()) => {
            match io.into_inner().map(|b| b.downcast::<StorageError>()) {
                Some(Ok(se)) => RecorderError::Storage {
                    path: path.to_path_buf(),
                    source: *se,
                },
                _ => RecorderError::Format {
                    path: path.to_path_buf(),
                    source: FormatError::Inconsistent("storage error lost in transit".into()),
                },
            }
        }
        e => RecorderError::Format {
            path: path.to_path_buf(),
            source: e,
        },
    }
}

/// The segment being written.
#[derive(Debug)]
pub struct Segment {
    index: u32,
    file_name: String,
    final_path: PathBuf,
    active_path: PathBuf,
    mcap: McapWriter<StorageSink>,
    /// Messages per channel written into this segment (latched repeats
    /// apart), to correct the counters if closing it fails.
    written: BTreeMap<u16, u64>,
    repeats: BTreeMap<u16, u64>,
    /// The first and last log time of the new messages (latched repeats
    /// apart: they keep the time they were first recorded at).
    new_span: Option<(u64, u64)>,
    /// Metadata records to write when the segment closes (the clock's
    /// quality over the segment, `edgerec.drops`).
    closing_metadata: Vec<(String, BTreeMap<String, String>)>,
}

impl Segment {
    /// Adds a Metadata record that [`finish`](Self::finish) writes; the
    /// sequencer adds what describes the whole segment just before it
    /// hands the segment to the closer.
    pub fn add_closing_metadata(&mut self, name: String, values: BTreeMap<String, String>) {
        self.closing_metadata.push((name, values));
    }

    /// Writes the schema and channel records of `c` (once).
    pub fn add_channel(&mut self, c: &SourceChannel) -> Result<(), RecorderError> {
        let id = c.id.0;
        if self.mcap.has_channel(id) {
            return Ok(());
        }
        let schema = Schema {
            id,
            name: c.spec.type_name.clone(),
            encoding: c.spec.schema_encoding.clone(),
            data: c.spec.schema.clone(),
        };
        let channel = Channel {
            id,
            schema_id: id,
            topic: c.spec.topic.clone(),
            message_encoding: c.spec.message_encoding.clone(),
            metadata: c.spec.metadata.clone(),
        };
        let path = self.active_path.clone();
        self.mcap
            .add_schema(&schema)
            .and_then(|_| self.mcap.add_channel(&channel))
            .map_err(|e| fmt_err(&path, e))
    }

    /// True when the channel's records are in this segment.
    pub fn has_channel(&self, id: u16) -> bool {
        self.mcap.has_channel(id)
    }

    /// Appends a sealed chunk.
    pub fn write_chunk(&mut self, c: &SealedChunk) -> Result<(), RecorderError> {
        let path = self.active_path.clone();
        self.mcap
            .write_chunk(c)
            .map(|_| ())
            .map_err(|e| fmt_err(&path, e))?;
        for &(ch, n) in &c.channel_counts {
            *self.written.entry(ch).or_insert(0) += n;
        }
        if c.message_count > 0 {
            self.new_span = Some(match self.new_span {
                Some((a, b)) => (a.min(c.start), b.max(c.end)),
                None => (c.start, c.end),
            });
        }
        Ok(())
    }

    /// Appends a chunk of latched repeats (not new messages).
    pub fn write_repeats(&mut self, c: &SealedChunk) -> Result<(), RecorderError> {
        let path = self.active_path.clone();
        self.mcap
            .write_chunk(c)
            .map(|_| ())
            .map_err(|e| fmt_err(&path, e))?;
        for &(ch, n) in &c.channel_counts {
            *self.repeats.entry(ch).or_insert(0) += n;
        }
        Ok(())
    }

    /// New messages per channel in this segment, and latched repeats.
    pub fn message_counts(&self) -> (BTreeMap<u16, u64>, BTreeMap<u16, u64>) {
        (self.written.clone(), self.repeats.clone())
    }

    /// Lets the storage writer start its periodic sync.
    pub fn tick(&mut self) -> Result<(), RecorderError> {
        let path = self.active_path.clone();
        self.mcap
            .sink_mut()
            .0
            .tick()
            .map_err(|e| RecorderError::Storage { path, source: e })
    }

    /// Bytes in the file so far.
    pub fn position(&self) -> u64 {
        self.mcap.position()
    }
    /// Bytes known durable.
    pub fn durable(&self) -> u64 {
        self.mcap.sink().0.durable_offset()
    }
    /// The storage backend in use.
    pub fn backend(&self) -> edgerec_storage::Backend {
        self.mcap.sink().0.backend()
    }
    /// Why a better backend was refused.
    pub fn fallback_reason(&self) -> Option<String> {
        self.mcap.sink().0.fallback_reason().map(str::to_string)
    }
    /// The `.active` path.
    pub fn active_path(&self) -> &Path {
        &self.active_path
    }
    /// Its index in the session.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Writes the closing Metadata records, the summary and footer, closes
    /// the file (pad, truncate, fdatasync), renames it from `.active`,
    /// fsyncs the directory and makes it read-only. Needs no session: a
    /// closer thread runs it while the next segment is being written.
    pub fn finish(self) -> Result<FinishedSegment, RecorderError> {
        let Segment {
            mut mcap,
            active_path,
            final_path,
            file_name,
            index,
            closing_metadata,
            new_span,
            ..
        } = self;
        let (sink, summary) = match closing_metadata
            .iter()
            .try_for_each(|(name, values)| mcap.write_metadata(name, values))
            .and_then(|_| mcap.finish())
        {
            Ok(x) => x,
            Err(e) => return Err(fmt_err(&active_path, e)),
        };
        let report: CloseReport = sink.0.close().map_err(|e| RecorderError::Storage {
            path: active_path.clone(),
            source: e,
        })?;
        if let Some(kept) = report.truncated_after_error {
            // The failure surfaced only at close: the summary is not on
            // disk. Leave the file `.active` for recovery.
            return Err(RecorderError::ClosedAfterFailure {
                path: active_path,
                kept,
            });
        }
        bag::publish(&active_path, &final_path).map_err(|e| RecorderError::Path {
            path: e.path,
            what: e.step.what(),
            source: e.source,
        })?;
        let st = &summary.statistics;
        let (new_start_ns, new_end_ns) =
            new_span.unwrap_or((st.message_start_time, st.message_end_time));
        Ok(FinishedSegment {
            closed: ClosedSegment {
                index,
                path: final_path,
                messages: st.message_count,
                bytes: report.logical_len,
                start_ns: st.message_start_time,
                end_ns: st.message_end_time,
                new_start_ns,
                new_end_ns,
            },
            file_name,
            summary,
        })
    }

    /// After a storage failure: closes the file at its last good block and
    /// leaves it `.active` for recovery.
    pub fn abandon(self) -> Option<CloseReport> {
        let Segment { mcap, .. } = self;
        // The writer failed; its sink still owns the file. finish() would
        // refuse, so take the sink out through into_sink.
        let sink = mcap.into_sink();
        sink.0.close().ok()
    }
}

/// A segment that was closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedSegment {
    /// Its index.
    pub index: u32,
    /// Final path.
    pub path: PathBuf,
    /// Messages in it.
    pub messages: u64,
    /// File size.
    pub bytes: u64,
    /// First log time.
    pub start_ns: u64,
    /// Last log time.
    pub end_ns: u64,
    /// First log time of the messages new in it: a latched repeat at its
    /// head keeps the time it was first recorded at, which can be long
    /// before the segment began. The span an event's window is compared
    /// with.
    pub new_start_ns: u64,
    /// Last log time of the messages new in it.
    pub new_end_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgerec_format::nofollow::is_real_dir;

    #[test]
    fn utc_stamp_matches_known_dates() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        // 2026-12-02 13:27:47 UTC
        assert_eq!(utc_stamp(1_796_218_067_000_000_000), "20261202T132747Z");
        // 2000-02-29 (leap day) 23:59:59
        assert_eq!(utc_stamp(951_868_799_000_000_000), "20000229T235959Z");
    }

    #[cfg(unix)]
    #[test]
    fn a_linked_root_is_refused_and_a_planted_session_link_is_passed_over() {
        use std::os::unix::fs::symlink;
        let data = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let make = |root: &Path| {
            Session::create(
                root,
                "rec",
                1_796_218_067_000_000_000,
                MetadataVersion::Humble,
                WriterOptions::default(),
                "test".into(),
            )
        };
        // The recordings root itself a link to elsewhere: refused, named.
        let linked = data.path().join("recordings");
        symlink(outside.path(), &linked).unwrap();
        let err = make(&linked).err().unwrap().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        std::fs::remove_file(&linked).unwrap();
        // A link planted under the name the session would take: the
        // session is made beside it, and nothing is made through it.
        std::fs::create_dir(&linked).unwrap();
        symlink(outside.path(), linked.join("rec_20261202T132747Z")).unwrap();
        let mut s = make(&linked).unwrap();
        assert_eq!(s.name(), "rec_20261202T132747Z_1");
        assert!(is_real_dir(s.dir()));
        let seg = s.open_segment(&[]).unwrap();
        drop(seg);
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}
