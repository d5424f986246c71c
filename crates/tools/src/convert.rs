//! `convert`: a ROS 1 bag into the MCAP world, streaming (one ROS 1 chunk
//! in memory at a time, MCAP chunks of [`CHUNK_BYTES`]).
//!
//! - [`Target::Ros1Mcap`]: one MCAP file with the `ros1` profile, as
//!   `mcap convert` writes it: a schema per type (`pkg/Type`, encoding
//!   `ros1msg`, the connection's `message_definition`), a channel per
//!   connection (message encoding `ros1`, metadata `callerid`, `latching`
//!   and `md5sum` as the connection header has them), the messages' bytes
//!   unchanged, log and publish time the bag time.
//! - [`Target::Ros2`]: a rosbag2 bag directory (`metadata.yaml` and one
//!   `<name>_0.mcap` in CDR), the mapping of [`crate::ros2map`]; connections
//!   of one topic, type and latching become one channel, as rosbags-convert
//!   merges them; latched topics are offered as reliable, transient-local.
//!
//! The output is written under a `.part` name and published (synced,
//! renamed) only when whole; an existing output is refused. Messages whose
//! bytes do not fit their definition stop the conversion with an error
//! naming the message's place, and nothing is published.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use edgerec_format::bag;
use edgerec_format::chunk::{ChunkBuilder, ChunkCompressor, Compression};
use edgerec_format::records::{Channel, Schema};
use edgerec_format::writer::{McapWriter, PROFILE_ROS2};
use edgerec_format::FormatError;
use edgerec_rosbag1::{Bag, Filter};

use crate::error::{MessageError, Result, ToolError};
use crate::ros2map::Ros2Type;

/// Uncompressed bytes of messages per MCAP chunk.
pub const CHUNK_BYTES: usize = 4 << 20;

/// The `ros1` MCAP profile.
pub const PROFILE_ROS1: &str = "ros1";

/// What to convert into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// One MCAP file, ROS 1 messages unchanged.
    Ros1Mcap,
    /// A rosbag2 bag directory in CDR.
    Ros2,
}

/// How far a conversion is, for a progress line.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    /// Messages written.
    pub messages: u64,
    /// Messages in the bag.
    pub total: u64,
    /// Bytes of message data read.
    pub bytes: u64,
}

/// What a conversion wrote.
#[derive(Debug, Clone, Default)]
pub struct ConvertReport {
    /// The MCAP file written.
    pub file: PathBuf,
    /// Messages per output topic.
    pub topics: BTreeMap<String, u64>,
    /// Messages written.
    pub messages: u64,
    /// Channels written.
    pub channels: usize,
    /// Bytes of the output file.
    pub bytes: u64,
    /// Types renamed on the way (ROS 1 name, ROS 2 name): `--to ros2` only.
    pub types: BTreeMap<String, String>,
}

/// Options of a conversion.
#[derive(Debug, Clone, Copy)]
pub struct ConvertOptions {
    /// Into what.
    pub target: Target,
    /// Chunk compression of the output.
    pub compression: Compression,
}

/// Converts the ROS 1 bag `src` into `dst` (a file for
/// [`Target::Ros1Mcap`], a new directory for [`Target::Ros2`]); `progress`
/// is called after every chunk written.
pub fn convert(
    src: &Path,
    dst: &Path,
    opts: ConvertOptions,
    mut progress: impl FnMut(Progress),
) -> Result<ConvertReport> {
    if dst.exists() {
        return Err(ToolError::OutputExists {
            path: dst.to_path_buf(),
        });
    }
    let mut bag = Bag::open(src).map_err(ToolError::ros1(src))?;
    let (file, part) = match opts.target {
        Target::Ros1Mcap => (dst.to_path_buf(), part_name(dst)),
        Target::Ros2 => {
            std::fs::create_dir_all(dst).map_err(ToolError::io(dst))?;
            let name = dst
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("converted")
                .to_owned();
            (
                dst.join(format!("{name}_0.mcap")),
                dst.join(format!("{name}_0.mcap.part")),
            )
        }
    };
    let written = write(&mut bag, src, &part, opts, &mut progress);
    let mut report = match written {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            if opts.target == Target::Ros2 {
                let _ = std::fs::remove_dir(dst);
            }
            return Err(e);
        }
    };
    let mcap_err = ToolError::mcap(&file);
    bag::publish(&part, &file).map_err(|e| mcap_err(FormatError::Publish(e)))?;
    if opts.target == Target::Ros2 {
        bag::rewrite_metadata(dst).map_err(ToolError::mcap(dst))?;
    }
    report.bytes = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    report.file = file;
    Ok(report)
}

fn part_name(dst: &Path) -> PathBuf {
    let mut name = dst.as_os_str().to_owned();
    name.push(".part");
    PathBuf::from(name)
}

/// A ROS 1 connection's place in the output.
struct Route {
    channel: u16,
    topic: String,
    /// `--to ros2`: the payload converter (index into `types`).
    ros2: Option<usize>,
}

/// The id of the schema named `name`, written on first use.
fn schema<W: Write>(
    w: &mut McapWriter<W>,
    schemas: &mut BTreeMap<String, u16>,
    name: &str,
    encoding: &str,
    definition: &str,
) -> std::result::Result<u16, FormatError> {
    if let Some(id) = schemas.get(name) {
        return Ok(*id);
    }
    let id = schemas.len() as u16 + 1;
    w.add_schema(&Schema {
        id,
        name: name.to_owned(),
        encoding: encoding.to_owned(),
        data: definition.as_bytes().to_vec(),
    })?;
    schemas.insert(name.to_owned(), id);
    Ok(id)
}

fn write(
    bag: &mut Bag<std::io::BufReader<File>>,
    src: &Path,
    part: &Path,
    opts: ConvertOptions,
    progress: &mut impl FnMut(Progress),
) -> Result<ConvertReport> {
    let part_err = ToolError::io(part);
    let f = File::create(part).map_err(part_err)?;
    let mcap = |e| ToolError::mcap(part)(e);
    let (profile, library) = match opts.target {
        Target::Ros1Mcap => (PROFILE_ROS1, "edgerec convert"),
        Target::Ros2 => (PROFILE_ROS2, "edgerec convert --to ros2"),
    };
    let mut w =
        McapWriter::new(BufWriter::with_capacity(1 << 20, f), profile, library).map_err(mcap)?;
    let mut report = ConvertReport::default();
    let mut routes: BTreeMap<u32, Route> = BTreeMap::new();
    let mut schemas: BTreeMap<String, u16> = BTreeMap::new();
    let mut ros2_types: Vec<Ros2Type> = Vec::new();
    let mut ros2_by_type: BTreeMap<String, usize> = BTreeMap::new();
    // `--to ros2`: (topic, ROS 2 type, latched) -> channel.
    let mut merged: BTreeMap<(String, String, bool), u16> = BTreeMap::new();
    let connections: Vec<_> = bag.connections().values().cloned().collect();
    for c in &connections {
        let latched = c.latching;
        let (channel, ros2) = match opts.target {
            Target::Ros1Mcap => {
                let schema_id = schema(
                    &mut w,
                    &mut schemas,
                    &c.msg_type,
                    "ros1msg",
                    &c.message_definition,
                )
                .map_err(mcap)?;
                let id = routes.len() as u16 + 1;
                let mut metadata = BTreeMap::from([
                    (
                        "latching".to_owned(),
                        if latched { "1" } else { "0" }.to_owned(),
                    ),
                    ("md5sum".to_owned(), c.md5sum.clone()),
                ]);
                if let Some(caller) = &c.callerid {
                    metadata.insert("callerid".to_owned(), caller.clone());
                }
                w.add_channel(&Channel {
                    id,
                    schema_id,
                    topic: c.topic.clone(),
                    message_encoding: "ros1".to_owned(),
                    metadata,
                })
                .map_err(mcap)?;
                (id, None)
            }
            Target::Ros2 => {
                let ti = match ros2_by_type.get(&c.msg_type) {
                    Some(i) => *i,
                    None => {
                        let t = Ros2Type::from_ros1(&c.msg_type, &c.message_definition).map_err(
                            |e| ToolError::Definition {
                                topic: c.topic.clone(),
                                type_name: c.msg_type.clone(),
                                why: e.to_string(),
                            },
                        )?;
                        report.types.insert(c.msg_type.clone(), t.name().to_owned());
                        ros2_types.push(t);
                        ros2_by_type.insert(c.msg_type.clone(), ros2_types.len() - 1);
                        ros2_types.len() - 1
                    }
                };
                let t = &ros2_types[ti];
                let schema_id = schema(&mut w, &mut schemas, t.name(), "ros2msg", t.definition())
                    .map_err(mcap)?;
                let key = (c.topic.clone(), t.name().to_owned(), latched);
                let next = merged.len() as u16 + 1;
                let id = *merged.entry(key).or_insert(next);
                if !w.has_channel(id) {
                    let qos = if latched {
                        bag::qos_profile_yaml(true, true, 1)
                    } else {
                        String::new()
                    };
                    w.add_channel(&Channel {
                        id,
                        schema_id,
                        topic: c.topic.clone(),
                        message_encoding: "cdr".to_owned(),
                        metadata: BTreeMap::from([("offered_qos_profiles".to_owned(), qos)]),
                    })
                    .map_err(mcap)?;
                }
                (id, Some(ti))
            }
        };
        routes.insert(
            c.id,
            Route {
                channel,
                topic: c.topic.clone(),
                ros2,
            },
        );
    }
    report.channels = match opts.target {
        Target::Ros1Mcap => routes.len(),
        Target::Ros2 => merged.len(),
    };
    let total = bag.message_count();
    let mut z = ChunkCompressor::new(opts.compression).map_err(ToolError::io(part))?;
    let mut builder = ChunkBuilder::new(CHUNK_BYTES + (1 << 16));
    let mut cdr = Vec::with_capacity(1 << 16);
    let mut done = Progress {
        total,
        ..Progress::default()
    };
    // Per channel (ids 1..=channels): rosbag2's sequence number (merged
    // connections share one) and the messages written.
    let mut per_channel = vec![(0u32, 0u64); report.channels + 1];
    for m in bag.messages(&Filter::default()) {
        let m = m.map_err(ToolError::ros1(src))?;
        let Some(route) = routes.get(&m.connection.id) else {
            continue;
        };
        let t = m.time_ns();
        let data: &[u8] = match route.ros2 {
            None => &m.data,
            Some(ti) => {
                ros2_types[ti].convert(&m.data, &mut cdr).map_err(|e| {
                    ToolError::Convert(Box::new(MessageError {
                        path: src.to_path_buf(),
                        topic: route.topic.clone(),
                        type_name: m.connection.msg_type.clone(),
                        time_ns: t,
                        place: format!(
                            "record at byte {} of the chunk at byte {}",
                            m.offset, m.chunk_pos
                        ),
                        why: format!("does not convert: {e}; nothing was written"),
                    }))
                })?;
                &cdr
            }
        };
        // rosbag2 numbers each channel's messages; merged connections share one count.
        let Some(counts) = per_channel.get_mut(usize::from(route.channel)) else {
            continue;
        };
        counts.0 = counts.0.wrapping_add(1);
        counts.1 += 1;
        builder.push(route.channel, counts.0, t, t, data);
        done.messages += 1;
        done.bytes += m.data.len() as u64;
        if builder.len() >= CHUNK_BYTES {
            w.write_chunk(&builder.take().seal(&mut z)).map_err(mcap)?;
            progress(done);
        }
    }
    if !builder.is_empty() {
        w.write_chunk(&builder.take().seal(&mut z)).map_err(mcap)?;
    }
    progress(done);
    report.messages = done.messages;
    let channel_topics: BTreeMap<u16, &str> = routes
        .values()
        .map(|r| (r.channel, r.topic.as_str()))
        .collect();
    for (channel, topic) in channel_topics {
        let n = per_channel.get(usize::from(channel)).map_or(0, |c| c.1);
        if n > 0 {
            *report.topics.entry(topic.to_owned()).or_default() += n;
        }
    }
    let (mut sink, _) = w.finish().map_err(mcap)?;
    sink.flush().map_err(ToolError::io(part))?;
    sink.get_ref().sync_all().map_err(ToolError::io(part))?;
    Ok(report)
}
