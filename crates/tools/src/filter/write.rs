//! Writing what `filter` keeps as MCAP: one file, or a rosbag2 bag
//! directory with one segment per input file that kept a message.
//!
//! Schemas, channels (topic, encoding, metadata: the QoS profiles and
//! latching a recorder wrote) and messages (bytes, log and publish times,
//! sequence numbers) are carried unchanged. A schema or channel keeps its
//! input id unless a different one of the same id was met first (segments
//! of a bag directory may number differently), then takes the next free
//! id. Each output file gets the schemas and channels of the messages it
//! holds, before the first chunk that needs them; chunks of
//! [`CHUNK_BYTES`] are sealed with the chosen compression; the writer adds
//! chunk indexes, statistics, a summary and CRCs. Metadata records of an
//! input file go to the output file that holds its messages. Files are
//! written under `.part` names and published (synced, renamed, read-only)
//! only when all are whole; a bag directory gets its `metadata.yaml` last.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use edgerec_format::bag;
use edgerec_format::chunk::{ChunkBuilder, ChunkCompressor, Compression};
use edgerec_format::records::{Channel, MessageRef, Schema};
use edgerec_format::writer::McapWriter;
use edgerec_format::FormatError;

use crate::error::{Result, ToolError};
use crate::filter::read::Sink;

/// Uncompressed bytes of messages per output chunk (as `mcap filter`).
pub const CHUNK_BYTES: usize = 4 << 20;

/// The library named in the output's header.
const LIBRARY: &str = concat!("edgerec filter ", env!("CARGO_PKG_VERSION"));

/// Where the output goes.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// One MCAP file.
    File(PathBuf),
    /// A new rosbag2 bag directory.
    Dir(PathBuf),
}

type SchemaKey = (String, String, Vec<u8>);
type ChannelKey = (u16, String, String, Vec<(String, String)>);

struct OpenFile {
    w: McapWriter<BufWriter<File>>,
    part: PathBuf,
    dest: PathBuf,
}

/// A file written and closed, waiting to be published.
struct Closed {
    part: PathBuf,
    dest: PathBuf,
}

/// The [`Sink`] that writes MCAP.
pub(crate) struct McapOut {
    target: Target,
    profile: Option<String>,
    schema_ids: HashMap<SchemaKey, u16>,
    schemas: BTreeMap<u16, Schema>,
    channel_ids: HashMap<ChannelKey, u16>,
    channels: BTreeMap<u16, Channel>,
    /// The current input file's schemas by its ids.
    in_schemas: BTreeMap<u16, Schema>,
    /// The current input file's kept channels: its id to the output's.
    in_channels: BTreeMap<u16, u16>,
    /// Metadata records waiting for the file that holds their messages.
    pending_metadata: Vec<(String, BTreeMap<String, String>)>,
    current: Option<OpenFile>,
    closed: Vec<Closed>,
    builder: ChunkBuilder,
    z: ChunkCompressor,
    /// Messages kept per output channel.
    counts: BTreeMap<u16, u64>,
    /// Bytes of message data kept.
    pub bytes: u64,
}

fn next_free<T>(taken: &BTreeMap<u16, T>, wish: u16) -> Option<u16> {
    if wish != 0 && !taken.contains_key(&wish) {
        return Some(wish);
    }
    taken
        .keys()
        .next_back()
        .map_or(Some(1), |last| last.checked_add(1))
}

/// The name a file is written under until it is whole: `<dest>.part`.
pub(crate) fn part_of(dest: &Path) -> PathBuf {
    let mut name = dest.as_os_str().to_owned();
    name.push(".part");
    PathBuf::from(name)
}

impl McapOut {
    /// A writer into `target` (which must not exist) with `compression`.
    pub fn new(target: Target, compression: Compression) -> Result<McapOut> {
        if let Target::Dir(dir) = &target {
            std::fs::create_dir(dir).map_err(ToolError::io(dir))?;
        }
        Ok(McapOut {
            target,

            profile: None,
            schema_ids: HashMap::new(),
            schemas: BTreeMap::new(),
            channel_ids: HashMap::new(),
            channels: BTreeMap::new(),
            in_schemas: BTreeMap::new(),
            in_channels: BTreeMap::new(),
            pending_metadata: Vec::new(),
            current: None,
            closed: Vec::new(),
            builder: ChunkBuilder::new(CHUNK_BYTES + (1 << 16)),
            z: ChunkCompressor::new(compression).map_err(ToolError::io("zstd"))?,
            counts: BTreeMap::new(),
            bytes: 0,
        })
    }

    /// The path of the next output file.
    fn next_dest(&self) -> PathBuf {
        match &self.target {
            Target::File(p) => p.clone(),
            Target::Dir(dir) => {
                let name = dir
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("filtered");
                dir.join(format!("{name}_{}.mcap", self.closed.len()))
            }
        }
    }

    /// The open output file, opened (with the waiting metadata) if none is.
    fn open(&mut self) -> Result<&mut OpenFile> {
        let f = match self.current.take() {
            Some(f) => f,
            None => {
                let dest = self.next_dest();
                let part = part_of(&dest);
                let f = create_new(&part)?;
                let profile = self.profile.clone().unwrap_or_default();
                let mut w =
                    McapWriter::new(BufWriter::with_capacity(1 << 20, f), &profile, LIBRARY)
                        .map_err(ToolError::mcap(&part))?;
                for (name, map) in std::mem::take(&mut self.pending_metadata) {
                    w.write_metadata(&name, &map)
                        .map_err(ToolError::mcap(&part))?;
                }
                OpenFile { w, part, dest }
            }
        };
        Ok(self.current.insert(f))
    }

    /// Seals what the builder holds into the open file.
    fn flush(&mut self) -> Result<()> {
        if self.builder.is_empty() {
            return Ok(());
        }
        let sealed = self.builder.take().seal(&mut self.z);
        let f = self.open()?;
        f.w.write_chunk(&sealed).map_err(ToolError::mcap(&f.part))?;
        for b in sealed.into_buffers() {
            self.builder.recycle(b);
        }
        Ok(())
    }

    /// Closes the open file (summary, footer, fsync).
    fn close(&mut self) -> Result<()> {
        self.flush()?;
        let Some(f) = self.current.take() else {
            return Ok(());
        };
        let part = f.part;
        let (mut sink, _) = f.w.finish().map_err(ToolError::mcap(&part))?;
        sink.flush().map_err(ToolError::io(&part))?;
        sink.get_ref().sync_all().map_err(ToolError::io(&part))?;
        self.closed.push(Closed { part, dest: f.dest });
        Ok(())
    }

    /// Closes and publishes every file (one, with no message, when nothing
    /// was kept), then writes a bag directory's `metadata.yaml` (keeping
    /// the version of `version_from`'s, an input directory's). Returns the
    /// files written.
    pub fn finish(mut self, version_from: Option<&Path>) -> Result<Vec<PathBuf>> {
        if self.current.is_none() && self.closed.is_empty() {
            self.open()?;
        }
        self.close()?;
        let mut files = Vec::new();
        for c in &self.closed {
            bag::publish(&c.part, &c.dest)
                .map_err(|e| ToolError::mcap(&c.dest)(FormatError::Publish(e)))?;
            files.push(c.dest.clone());
        }
        if let Target::Dir(dir) = &self.target {
            if let Some(src) = version_from.map(|d| d.join("metadata.yaml")) {
                if src.is_file() {
                    std::fs::copy(&src, dir.join("metadata.yaml")).map_err(ToolError::io(&src))?;
                }
            }
            bag::rewrite_metadata(dir).map_err(ToolError::mcap(dir))?;
        }
        Ok(files)
    }

    /// Removes what was written (after an error).
    pub fn abandon(mut self) {
        if let Some(f) = self.current.take() {
            let _ = std::fs::remove_file(&f.part);
        }
        for c in &self.closed {
            let _ = std::fs::remove_file(&c.part);
        }
        if let Target::Dir(dir) = &self.target {
            let _ = std::fs::remove_file(dir.join("metadata.yaml"));
            let _ = std::fs::remove_dir(dir);
        }
    }

    /// Messages kept per topic.
    pub fn topic_counts(&self) -> BTreeMap<String, u64> {
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for (id, n) in &self.counts {
            if let Some(c) = self.channels.get(id) {
                *out.entry(c.topic.clone()).or_default() += n;
            }
        }
        out
    }

    /// Makes sure the open file has channel `id` (and its schema).
    fn declare(&mut self, id: u16) -> Result<()> {
        // Every message asks: answered without a copy once it is there.
        if self.current.as_ref().is_some_and(|f| f.w.has_channel(id)) {
            return Ok(());
        }
        let Some(channel) = self.channels.get(&id).cloned() else {
            return Ok(());
        };
        let schema = self.schemas.get(&channel.schema_id).cloned();
        let f = self.open()?;
        if let Some(s) = schema {
            f.w.add_schema(&s).map_err(ToolError::mcap(&f.part))?;
        }
        f.w.add_channel(&channel).map_err(ToolError::mcap(&f.part))
    }
}

fn create_new(path: &Path) -> Result<File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(ToolError::io(path))
}

impl Sink for McapOut {
    fn begin_file(&mut self, _path: &Path, profile: &str) -> Result<()> {
        if self.profile.is_none() {
            self.profile = Some(profile.to_owned());
        }
        if matches!(self.target, Target::Dir(_)) && self.current.is_some() {
            self.close()?;
        }
        self.in_schemas.clear();
        self.in_channels.clear();
        Ok(())
    }

    fn schema(&mut self, s: &Schema) -> Result<()> {
        self.in_schemas.insert(s.id, s.clone());
        Ok(())
    }

    fn channel(&mut self, c: &Channel) -> Result<bool> {
        let schema_id = if c.schema_id == 0 {
            0
        } else {
            let Some(s) = self.in_schemas.get(&c.schema_id) else {
                return Err(ToolError::Usage(format!(
                    "channel {} ({}) refers to schema {}, which the file does not hold",
                    c.id, c.topic, c.schema_id
                )));
            };
            let key = (s.name.clone(), s.encoding.clone(), s.data.clone());
            match self.schema_ids.get(&key) {
                Some(id) => *id,
                None => {
                    let id = next_free(&self.schemas, s.id)
                        .ok_or_else(|| ToolError::Usage("more than 65535 schemas".to_owned()))?;
                    let mut out = s.clone();
                    out.id = id;
                    self.schemas.insert(id, out);
                    self.schema_ids.insert(key, id);
                    id
                }
            }
        };
        let key = (
            schema_id,
            c.topic.clone(),
            c.message_encoding.clone(),
            c.metadata
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        );
        let id = match self.channel_ids.get(&key) {
            Some(id) => *id,
            None => {
                let id = next_free(&self.channels, c.id)
                    .ok_or_else(|| ToolError::Usage("more than 65535 channels".to_owned()))?;
                let mut out = c.clone();
                out.id = id;
                out.schema_id = schema_id;
                self.channels.insert(id, out);
                self.channel_ids.insert(key, id);
                id
            }
        };
        self.in_channels.insert(c.id, id);
        Ok(true)
    }

    fn message(&mut self, m: &MessageRef<'_>) -> Result<()> {
        let Some(&id) = self.in_channels.get(&m.channel_id) else {
            return Ok(());
        };
        self.declare(id)?;
        self.builder
            .push(id, m.sequence, m.log_time, m.publish_time, m.data);
        *self.counts.entry(id).or_default() += 1;
        self.bytes += m.data.len() as u64;
        if self.builder.len() >= CHUNK_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn metadata(&mut self, name: &str, map: &BTreeMap<String, String>) -> Result<()> {
        match self.current.as_mut() {
            Some(f) => {
                f.w.write_metadata(name, map)
                    .map_err(ToolError::mcap(&f.part))
            }
            None => {
                self.pending_metadata.push((name.to_owned(), map.clone()));
                Ok(())
            }
        }
    }
}
