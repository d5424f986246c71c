//! One event clip on disk: a bag directory of its own,
//! `<root>/events/<rule>_<UTC time>[_<k>]/`, with one MCAP file written
//! as `<dir>_0.mcap.active` and renamed to `.mcap` once finished and
//! synced, then `metadata.yaml`. Readers (rosbag2, the MCAP tools) open
//! it like any session.
//!
//! Clips are small next to the continuous stream (seconds of chosen
//! channels), so they are written through the page cache by a
//! `BufWriter` and made durable by one `fdatasync` at the end, not
//! through the io_uring writer: a power cut while a clip is open leaves an
//! `.active` file that `edgerec recover` repairs like any segment.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use edgerec_format::chunk::{ChunkBuilder, ChunkCompressor, Compression};
use edgerec_format::nofollow::{self, Dir};
use edgerec_format::records::{Channel, Schema};
use edgerec_format::writer::{McapWriter, PROFILE_ROS2};
use edgerec_source::ChannelSpec;

use super::ring::RingMessage;
use crate::segment::utc_stamp;

/// A chunk of a clip is written when it holds this many bytes.
const CLIP_CHUNK: usize = 1 << 20;

/// Events one clip lists; more that overlap it are counted
/// (`events_over_cap` in its `edgerec.clip` metadata) and neither listed
/// nor allowed to extend it, so a flood of triggers cannot keep one clip
/// open, or its metadata growing, without end.
pub const MAX_CLIP_EVENTS: usize = 256;

/// What a clip's Metadata record `edgerec.event` says of one event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventInfo {
    /// The rule (`ctl` for `edgerec ctl trigger` without a name).
    pub rule: String,
    /// Why: the operator's reason, or the rule's condition.
    pub reason: String,
    /// The values that fired it (`voltage=11.8`).
    pub values: String,
    /// Trigger time, ns since the epoch (log time of the message that
    /// fired it, or the clock when asked by hand).
    pub at_ns: u64,
    /// Pre-roll asked, ns.
    pub pre_ns: u64,
    /// Post-trigger window asked, ns.
    pub post_ns: u64,
    /// When the event ended (its condition cleared), ns; equal to `at_ns`
    /// for an instant event.
    pub end_ns: Option<u64>,
}

impl EventInfo {
    fn to_map(&self) -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        m.insert("rule".to_owned(), self.rule.clone());
        m.insert("reason".to_owned(), self.reason.clone());
        m.insert("values".to_owned(), self.values.clone());
        m.insert("trigger_time_ns".to_owned(), self.at_ns.to_string());
        m.insert("trigger_time".to_owned(), utc_stamp(self.at_ns));
        m.insert("pre_ns".to_owned(), self.pre_ns.to_string());
        m.insert("post_ns".to_owned(), self.post_ns.to_string());
        m.insert(
            "end_ns".to_owned(),
            self.end_ns.map_or(String::new(), |e| e.to_string()),
        );
        m
    }
}

/// Errors of writing a clip; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ClipError {
    /// A file operation failed.
    #[error("{path}: cannot {what}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was attempted.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// Framing the MCAP file failed.
    #[error("{path}: {source}")]
    Format {
        /// The file.
        path: PathBuf,
        /// The format error.
        source: edgerec_format::FormatError,
    },
}

/// A clip being written.
pub(crate) struct Clip {
    dir: PathBuf,
    /// The clip's directory, opened once: its file is made, and renamed,
    /// relative to it (a link planted in `events/` is never followed).
    handle: Dir,
    active: PathBuf,
    active_name: String,
    mcap: McapWriter<BufWriter<File>>,
    builder: ChunkBuilder,
    compressor: ChunkCompressor,
    /// Per channel in the clip, the first log time it records.
    starts: BTreeMap<u16, u64>,
    /// First log time of the clip.
    pub(crate) start: u64,
    /// Last log time it records; `None` while an event's condition holds.
    pub(crate) end: Option<u64>,
    /// Channels it records; `None` = every clip channel.
    pub(crate) topics: Option<BTreeSet<String>>,
    pub(crate) events: Vec<EventInfo>,
    /// What was cut short, and why (for `edgerec.clip`).
    pub(crate) notes: Vec<String>,
    pub(crate) messages: u64,
    /// Events that overlapped it past [`MAX_CLIP_EVENTS`].
    pub(crate) events_over_cap: u64,
    /// Bytes the file may reach (its share of `triggers.disk_budget`).
    limit: u64,
    /// The limit was reached: nothing more is written.
    full: bool,
    /// Log time of the last message written.
    last_log_time: Option<u64>,
}

impl Clip {
    /// Creates the clip's directory and file for an event at `at_ns`;
    /// its messages start at `start`.
    pub(crate) fn create(
        events: &Path,
        first: EventInfo,
        start: u64,
        topics: Option<BTreeSet<String>>,
        compression: Compression,
        library: &str,
    ) -> Result<Clip, ClipError> {
        let io = |path: &Path, what, source| ClipError::Io {
            path: path.to_path_buf(),
            what,
            source,
        };
        // `events/` itself a link (to a directory outside the data
        // partition) is refused; the clip's directory is `<rule>_<UTC>`,
        // or the next free `_<k>` beside anything already named so.
        let parent =
            nofollow::create_dir_all(events).map_err(|e| io(events, "create directory", e))?;
        let base = format!("{}_{}", first.rule, utc_stamp(first.at_ns));
        let (name, handle) = parent
            .create_unique_dir(&base)
            .map_err(|e| io(&events.join(&base), "create directory", e))?;
        let dir = events.join(&name);
        let active_name = format!("{name}_0.mcap.active");
        let active = dir.join(&active_name);
        let file = handle
            .create_new(&active_name)
            .map_err(|e| io(&active, "create", e))?;
        let mcap = McapWriter::new(
            BufWriter::with_capacity(1 << 20, file),
            PROFILE_ROS2,
            library,
        )
        .map_err(|source| ClipError::Format {
            path: active.clone(),
            source,
        })?;
        let compressor =
            ChunkCompressor::new(compression).map_err(|e| io(&active, "set up compression", e))?;
        Ok(Clip {
            dir,
            handle,
            active,
            active_name,
            mcap,
            builder: ChunkBuilder::new(CLIP_CHUNK + CLIP_CHUNK / 4),
            compressor,
            starts: BTreeMap::new(),
            start,
            end: None,
            topics,
            events: vec![first],
            notes: Vec::new(),
            messages: 0,
            events_over_cap: 0,
            limit: u64::MAX,
            full: false,
            last_log_time: None,
        })
    }

    /// The file may reach `bytes` (its share of the disk budget); past
    /// that the clip ends.
    pub(crate) fn set_limit(&mut self, bytes: u64) {
        self.limit = bytes;
    }

    /// Bytes written so far, with the chunk being filled (before
    /// compression: an upper bound).
    pub(crate) fn bytes(&self) -> u64 {
        self.mcap.position() + self.builder.len() as u64
    }

    /// The clip reached its limit and ended there.
    pub(crate) fn is_full(&self) -> bool {
        self.full
    }

    /// Adds an event that overlaps it, or counts it when the clip lists
    /// [`MAX_CLIP_EVENTS`] already (false: it must not extend the clip).
    pub(crate) fn add_event(&mut self, e: EventInfo) -> bool {
        if self.events.len() >= MAX_CLIP_EVENTS {
            self.events_over_cap += 1;
            return false;
        }
        self.events.push(e);
        true
    }

    /// The clip's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether it records `topic`.
    pub(crate) fn wants(&self, topic: &str) -> bool {
        self.topics.as_ref().is_none_or(|t| t.contains(topic))
    }

    /// The channels in it.
    pub(crate) fn channels(&self) -> impl Iterator<Item = u16> + '_ {
        self.starts.keys().copied()
    }

    /// The first log time it records of `channel`, once the channel is in.
    pub(crate) fn channel_start(&self, channel: u16) -> Option<u64> {
        self.starts.get(&channel).copied()
    }

    /// Adds `channel` (its schema and channel records), recording it from
    /// `from` on.
    pub(crate) fn add_channel(
        &mut self,
        channel: u16,
        spec: &ChannelSpec,
        from: u64,
    ) -> Result<(), ClipError> {
        if self.starts.contains_key(&channel) {
            return Ok(());
        }
        let schema = Schema {
            id: channel,
            name: spec.type_name.clone(),
            encoding: spec.schema_encoding.clone(),
            data: spec.schema.clone(),
        };
        let record = Channel {
            id: channel,
            schema_id: channel,
            topic: spec.topic.clone(),
            message_encoding: spec.message_encoding.clone(),
            metadata: spec.metadata.clone(),
        };
        self.mcap
            .add_schema(&schema)
            .and_then(|_| self.mcap.add_channel(&record))
            .map_err(|source| ClipError::Format {
                path: self.active.clone(),
                source,
            })?;
        self.starts.insert(channel, from);
        Ok(())
    }

    /// Writes one message of a channel added before (dropped when before
    /// that channel's start or after the clip's end).
    pub(crate) fn push(&mut self, m: &RingMessage) -> Result<(), ClipError> {
        let Some(from) = self.starts.get(&m.channel) else {
            return Ok(());
        };
        if m.log_time < *from || self.end.is_some_and(|e| m.log_time > e) {
            return Ok(());
        }
        self.write(m)
    }

    /// Writes a latched channel's last message ahead of the window, with
    /// its own times and sequence number (as a segment repeats it).
    pub(crate) fn push_latched(&mut self, m: &RingMessage) -> Result<(), ClipError> {
        if !self.starts.contains_key(&m.channel) {
            return Ok(());
        }
        self.write(m)
    }

    fn write(&mut self, m: &RingMessage) -> Result<(), ClipError> {
        if self.full {
            return Ok(());
        }
        // Record overhead is a few dozen bytes; 64 covers it.
        if self.bytes() + m.payload.len() as u64 + 64 > self.limit {
            self.full = true;
            let end = self.last_log_time.unwrap_or(self.start);
            self.end = Some(end);
            self.notes.push(format!(
                "the event clips' disk budget (triggers.disk_budget) is spent: the clip ends at {} \
                 ({} bytes)",
                utc_stamp(end),
                self.bytes()
            ));
            return Ok(());
        }
        self.last_log_time = Some(self.last_log_time.map_or(m.log_time, |t| t.max(m.log_time)));
        self.builder.push(
            m.channel,
            m.sequence,
            m.log_time,
            m.publish_time,
            &m.payload,
        );
        self.messages += 1;
        if self.builder.len() >= CLIP_CHUNK {
            self.flush_chunk()?;
        }
        Ok(())
    }

    fn flush_chunk(&mut self) -> Result<(), ClipError> {
        if self.builder.is_empty() {
            return Ok(());
        }
        let sealed = self.builder.take().seal(&mut self.compressor);
        self.mcap
            .write_chunk(&sealed)
            .map_err(|source| ClipError::Format {
                path: self.active.clone(),
                source,
            })?;
        for buf in sealed.into_buffers() {
            self.builder.recycle(buf);
        }
        Ok(())
    }

    /// Finishes the file (the events' metadata, summary), syncs it, drops
    /// `.active`, writes `metadata.yaml`. Returns the directory.
    pub(crate) fn finish(mut self) -> Result<PathBuf, ClipError> {
        self.flush_chunk()?;
        let fmt = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ClipError::Format { path, source }
        };
        for e in &self.events {
            self.mcap
                .write_metadata("edgerec.event", &e.to_map())
                .map_err(fmt(&self.active))?;
        }
        let mut clip = BTreeMap::new();
        clip.insert("start_ns".to_owned(), self.start.to_string());
        clip.insert(
            "end_ns".to_owned(),
            self.end.map_or(String::new(), |e| e.to_string()),
        );
        clip.insert("events".to_owned(), self.events.len().to_string());
        clip.insert(
            "events_over_cap".to_owned(),
            self.events_over_cap.to_string(),
        );
        clip.insert("cut_short".to_owned(), self.notes.join("; "));
        self.mcap
            .write_metadata("edgerec.clip", &clip)
            .map_err(fmt(&self.active))?;
        let (sink, _) = self.mcap.finish().map_err(fmt(&self.active))?;
        let io = |path: &Path, what, source| ClipError::Io {
            path: path.to_path_buf(),
            what,
            source,
        };
        let file = sink
            .into_inner()
            .map_err(|e| io(&self.active, "write", e.into_error()))?;
        // Read-only through the descriptor, then durable, then its final
        // name: never a chmod by path, which would follow a link.
        let _ = file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o444));
        file.sync_all().map_err(|e| io(&self.active, "fsync", e))?;
        let done_name = self
            .active_name
            .strip_suffix(".active")
            .unwrap_or(&self.active_name);
        self.handle
            .rename(&self.active_name, done_name)
            .map_err(|e| io(&self.active, "rename", e))?;
        edgerec_format::bag::rewrite_metadata(&self.dir).map_err(fmt(&self.dir))?;
        self.handle.sync().map_err(|e| io(&self.dir, "fsync", e))?;
        Ok(self.dir)
    }

    /// Flushes what it holds without finishing (a recording that stops
    /// abruptly): the `.active` file is left for recovery.
    pub(crate) fn abandon(mut self) {
        let _ = self.flush_chunk();
        let _ = self.mcap.sink_mut().flush();
    }
}
