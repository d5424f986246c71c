//! Recordings out to the tools of the field, and candump logs in:
//!
//! - [`export_candump`]: CAN topics of a bag (every closed segment, in
//!   order) as a `candump -L` log, frames of several topics merged by
//!   receive time (each topic read by its own thread, a k-way merge on the
//!   log times, so memory stays bounded whatever the bag's size);
//! - [`export_pcap`]: UDP packet topics as a pcap file, merged the same way;
//! - [`import_candump`]: a `candump -L` log as a new bag directory, one
//!   MCAP file with a `can_msgs/msg/Frame` topic per interface
//!   (`/can/<interface>`) and a `ros2_socketcan_msgs/msg/FdFrame` one for
//!   its CAN FD frames (`/can/<interface>/fd`), as the CAN source records
//!   them; `export_candump` of the result gives the log back byte for
//!   byte.
//!
//! Outputs are written under a `.part` name and renamed when complete.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use edgerec_format::bag;
use edgerec_format::chunk::{ChunkBuilder, ChunkCompressor, Compression};
use edgerec_format::info::{self, BagInfo, FileState};
use edgerec_format::messages::read_topics;
use edgerec_format::records::{Channel, MessageRef, Schema};
use edgerec_format::writer::{McapWriter, PROFILE_ROS2};
use edgerec_format::FormatError;

use crate::can::frame::{self, FrameError, FD_FRAME_TYPE, FRAME_TYPE};
use crate::candump;
use crate::pcap::{self, PcapWriter};
use crate::udp::packet::{self, PACKET_TYPE};

/// Items buffered per topic between its reader thread and the merge.
const MERGE_DEPTH: usize = 4096;
/// Bytes of messages per chunk in an imported bag.
const IMPORT_CHUNK: usize = 4 << 20;

/// Why an export or import failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The bag could not be read.
    #[error(transparent)]
    Bag(#[from] FormatError),
    /// The bag has no such topic.
    #[error("no topic {topic} in the bag; {}", list(want, available))]
    TopicNotFound {
        /// The topic asked for.
        topic: String,
        /// What the export takes.
        want: &'static str,
        /// The topics of that kind the bag has.
        available: Vec<String>,
    },
    /// The topic holds another type.
    #[error("{topic} is {type_name}, not {want}; {}", list(want, available))]
    WrongType {
        /// The topic.
        topic: String,
        /// Its type.
        type_name: String,
        /// What the export takes.
        want: &'static str,
        /// The topics of that kind the bag has.
        available: Vec<String>,
    },
    /// Nothing to export.
    #[error("no {want} messages in the closed files{}", unfinished(*unfinished_segments))]
    Empty {
        /// What the export takes.
        want: &'static str,
        /// Unfinished or unreadable segments skipped.
        unfinished_segments: usize,
    },
    /// A CAN message does not decode.
    #[error("{topic}: message {index} does not decode: {source}")]
    Frame {
        /// The topic.
        topic: String,
        /// Its position on the topic, from 0.
        index: u64,
        /// What is wrong.
        source: FrameError,
    },
    /// A packet message does not decode, or does not fit a pcap frame.
    #[error("{topic}: message {index}: {what}")]
    Packet {
        /// The topic.
        topic: String,
        /// Its position on the topic, from 0.
        index: u64,
        /// What is wrong.
        what: String,
    },
    /// A line of a candump log does not parse.
    #[error("{}:{line}:{column}: {what}", path.display())]
    Log {
        /// The log.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        what: String,
    },
    /// The output exists already (imports never overwrite a bag).
    #[error("{}: already exists; give a new directory", .0.display())]
    Exists(PathBuf),
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

fn list(want: &str, available: &[String]) -> String {
    if available.is_empty() {
        format!("it has no {want} topic")
    } else {
        format!("its {want} topics: {}", available.join(", "))
    }
}

fn unfinished(n: usize) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" ({n} unfinished or unreadable segments skipped: run `edgerec recover` first)")
    }
}

fn io_at(path: &Path) -> impl Fn(std::io::Error) -> ExportError + '_ {
    move |source| ExportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportSummary {
    /// The topics exported.
    pub topics: Vec<String>,
    /// Frames or packets written.
    pub count: u64,
    /// First and last receive time, ns.
    pub first_ns: u64,
    /// Last receive time, ns.
    pub last_ns: u64,
    /// Unfinished or unreadable segments skipped.
    pub unfinished_segments: usize,
    /// The file written.
    pub output: PathBuf,
}

/// The topics of the bag to export: those asked for (each checked to be
/// one of `types`), or every topic of those types.
fn pick_topics(
    info: &BagInfo,
    asked: &[String],
    types: &[&'static str],
    want: &'static str,
) -> Result<Vec<String>, ExportError> {
    let available: Vec<String> = info
        .topics
        .iter()
        .filter(|(_, t)| types.contains(&t.type_name.as_str()))
        .map(|(n, _)| n.clone())
        .collect();
    if asked.is_empty() {
        if available.is_empty() {
            return Err(ExportError::Empty {
                want,
                unfinished_segments: unfinished_count(info),
            });
        }
        return Ok(available);
    }
    let mut out = Vec::new();
    for topic in asked {
        match info.topics.get(topic) {
            None => {
                return Err(ExportError::TopicNotFound {
                    topic: topic.clone(),
                    want,
                    available,
                })
            }
            Some(t) if !types.contains(&t.type_name.as_str()) => {
                return Err(ExportError::WrongType {
                    topic: topic.clone(),
                    type_name: t.type_name.clone(),
                    want,
                    available,
                })
            }
            Some(_) => {
                if !out.contains(topic) {
                    out.push(topic.clone())
                }
            }
        }
    }
    Ok(out)
}

fn unfinished_count(info: &BagInfo) -> usize {
    info.files
        .iter()
        .filter(|f| !matches!(f.state, FileState::Closed(_)))
        .count()
}

/// Calls `emit` for every message of `topics`, merged by log time (a tie
/// keeps the order of `topics`); `decode` turns each message into what
/// `emit` takes, on the topic's reader thread.
fn merge_topics<T, D, E>(
    info: &BagInfo,
    topics: &[String],
    decode: D,
    mut emit: E,
) -> Result<(), ExportError>
where
    T: Send,
    D: Fn(&Channel, MessageRef<'_>, u64) -> Result<T, ExportError> + Sync,
    E: FnMut(u64, T) -> Result<(), ExportError>,
{
    if let [topic] = topics {
        let wanted = BTreeSet::from([topic.as_str()]);
        let mut index = 0u64;
        return read_topics(info, &wanted, |ch, m| {
            let t = m.log_time;
            let item = decode(ch, m, index)?;
            index += 1;
            emit(t, item)
        });
    }
    std::thread::scope(|scope| {
        let mut heads = Vec::new();
        for topic in topics {
            let (tx, rx) = mpsc::sync_channel::<Result<(u64, T), ExportError>>(MERGE_DEPTH);
            let decode = &decode;
            scope.spawn(move || {
                let wanted = BTreeSet::from([topic.as_str()]);
                let mut index = 0u64;
                let r = read_topics(info, &wanted, |ch, m| {
                    let t = m.log_time;
                    let item = decode(ch, m, index)?;
                    index += 1;
                    // The merge has stopped (on an error of its own, which
                    // it reports): any error ends this reader; it is not
                    // seen.
                    tx.send(Ok((t, item))).map_err(|_| ExportError::Empty {
                        want: "merge stopped",
                        unfinished_segments: 0,
                    })
                });
                if let Err(e) = r {
                    let _ = tx.send(Err(e));
                }
            });
            heads.push((rx, None::<(u64, T)>, false));
        }
        loop {
            for (rx, head, done) in heads.iter_mut() {
                if head.is_none() && !*done {
                    match rx.recv() {
                        Ok(Ok(item)) => *head = Some(item),
                        Ok(Err(e)) => return Err(e),
                        Err(_) => *done = true,
                    }
                }
            }
            let next = heads
                .iter()
                .enumerate()
                .filter_map(|(i, (_, h, _))| h.as_ref().map(|(t, _)| (*t, i)))
                .min();
            let Some((_, i)) = next else { return Ok(()) };
            if let Some((t, item)) = heads[i].1.take() {
                emit(t, item)?;
            }
        }
    })
}

/// Writes `topics` (CAN topics; all of them when empty) of the bag or
/// file at `bag` to `output` as a `candump -L` log.
pub fn export_candump(
    bag: &Path,
    topics: &[String],
    output: &Path,
) -> Result<ExportSummary, ExportError> {
    let info = info::inspect(bag)?;
    let topics = pick_topics(&info, topics, &[FRAME_TYPE, FD_FRAME_TYPE], "CAN")?;
    let part = part_path(output);
    let f = File::create(&part).map_err(io_at(&part))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let mut s = ExportSummary {
        topics: topics.clone(),
        unfinished_segments: unfinished_count(&info),
        output: output.to_path_buf(),
        ..Default::default()
    };
    let mut line = String::with_capacity(256);
    let result = merge_topics(
        &info,
        &topics,
        |ch, m, index| {
            let topic_type = info.topics.get(&ch.topic).map(|t| t.type_name.as_str());
            let decoded = if topic_type == Some(FD_FRAME_TYPE) {
                frame::decode_fd_frame(m.data)
            } else {
                frame::decode_frame(m.data)
            };
            decoded.map_err(|source| ExportError::Frame {
                topic: ch.topic.clone(),
                index,
                source,
            })
        },
        |t, d| {
            line.clear();
            candump::format_line(t, &d.interface, &d.frame, &mut line);
            line.push('\n');
            w.write_all(line.as_bytes()).map_err(io_at(&part))?;
            if s.count == 0 {
                s.first_ns = t;
            }
            s.last_ns = t;
            s.count += 1;
            Ok(())
        },
    );
    finish_output(result, w, &part, output, s)
}

fn part_path(output: &Path) -> PathBuf {
    let mut p = output.as_os_str().to_owned();
    p.push(".part");
    PathBuf::from(p)
}

fn finish_output<W: Write>(
    result: Result<(), ExportError>,
    mut w: W,
    part: &Path,
    output: &Path,
    s: ExportSummary,
) -> Result<ExportSummary, ExportError> {
    let result = result.and_then(|()| w.flush().map_err(io_at(part)));
    drop(w);
    if let Err(e) = result {
        let _ = std::fs::remove_file(part);
        return Err(e);
    }
    std::fs::rename(part, output).map_err(io_at(output))?;
    Ok(s)
}

/// Writes `topics` (packet topics; all of them when empty) of the bag or
/// file at `bag` to `output` as a pcap file.
pub fn export_pcap(
    bag: &Path,
    topics: &[String],
    output: &Path,
) -> Result<ExportSummary, ExportError> {
    let info = info::inspect(bag)?;
    let topics = pick_topics(&info, topics, &[PACKET_TYPE], "UDP packet")?;
    let part = part_path(output);
    let f = File::create(&part).map_err(io_at(&part))?;
    let mut w = PcapWriter::new(BufWriter::with_capacity(1 << 20, f)).map_err(io_at(&part))?;
    let mut s = ExportSummary {
        topics: topics.clone(),
        unfinished_segments: unfinished_count(&info),
        output: output.to_path_buf(),
        ..Default::default()
    };
    struct Item {
        from: SocketAddrV4,
        to: SocketAddrV4,
        data: Vec<u8>,
        topic: String,
        index: u64,
    }
    let result = merge_topics(
        &info,
        &topics,
        |ch, m, index| {
            let p = packet::decode(m.data).map_err(|e| ExportError::Packet {
                topic: ch.topic.clone(),
                index,
                what: format!("does not decode: {e}"),
            })?;
            let bind: SocketAddrV4 = ch
                .metadata
                .get("bind")
                .and_then(|b| b.parse().ok())
                .unwrap_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
            let group = ch.metadata.get("multicast").and_then(|g| g.parse().ok());
            Ok(Item {
                from: p
                    .from
                    .unwrap_or(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)),
                to: pcap::destination(bind, group),
                data: p.data.to_vec(),
                topic: ch.topic.clone(),
                index,
            })
        },
        |t, item| {
            w.write(t, item.from, item.to, &item.data)
                .map_err(|e| ExportError::Packet {
                    topic: item.topic,
                    index: item.index,
                    what: e.to_string(),
                })?;
            if s.count == 0 {
                s.first_ns = t;
            }
            s.last_ns = t;
            s.count += 1;
            Ok(())
        },
    );
    match result.and_then(|()| w.finish().map_err(io_at(&part))) {
        Ok(inner) => finish_output(Ok(()), inner, &part, output, s),
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            Err(e)
        }
    }
}

/// What an import wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// Frames per topic.
    pub topics: BTreeMap<String, u64>,
    /// Frames in all.
    pub frames: u64,
    /// The MCAP file written.
    pub file: PathBuf,
}

struct ImportChannel {
    id: u16,
    sequence: u32,
}

/// Reads the `candump -L` log at `log` into a new bag directory `out`.
pub fn import_candump(log: &Path, out: &Path) -> Result<ImportSummary, ExportError> {
    let input = File::open(log).map_err(io_at(log))?;
    if out.exists() {
        return Err(ExportError::Exists(out.to_path_buf()));
    }
    std::fs::create_dir_all(out).map_err(io_at(out))?;
    let name = out
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("imported")
        .to_owned();
    let file = out.join(format!("{name}_0.mcap"));
    let part = out.join(format!("{name}_0.mcap.part"));
    let result = write_import(BufReader::new(input), log, &part);
    let summary = match result {
        Ok(topics) => topics,
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            let _ = std::fs::remove_dir(out);
            return Err(e);
        }
    };
    bag::publish(&part, &file).map_err(|e| ExportError::Bag(FormatError::Publish(e)))?;
    bag::rewrite_metadata(out)?;
    Ok(ImportSummary {
        frames: summary.values().sum(),
        topics: summary,
        file,
    })
}

fn write_import<R: BufRead>(
    input: R,
    log: &Path,
    part: &Path,
) -> Result<BTreeMap<String, u64>, ExportError> {
    let f = File::create(part).map_err(io_at(part))?;
    let mut w = McapWriter::new(
        BufWriter::with_capacity(1 << 20, f),
        PROFILE_ROS2,
        "edgerec import candump",
    )?;
    for (id, ty) in [(1u16, FRAME_TYPE), (2, FD_FRAME_TYPE)] {
        let data = edgerec_format::msgdefs::lookup(ty)
            .map(|d| d.text().as_bytes().to_vec())
            .unwrap_or_default();
        w.add_schema(&Schema {
            id,
            name: ty.to_owned(),
            encoding: "ros2msg".to_owned(),
            data,
        })?;
    }
    let mut channels: BTreeMap<(String, bool), ImportChannel> = BTreeMap::new();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut builder = ChunkBuilder::new(IMPORT_CHUNK + (1 << 16));
    let mut z = ChunkCompressor::new(Compression::None).map_err(io_at(part))?;
    let mut payload = Vec::with_capacity(256);
    for (n, line) in input.lines().enumerate() {
        let line = line.map_err(io_at(log))?;
        let parsed = candump::parse_line(&line).map_err(|e| ExportError::Log {
            path: log.to_path_buf(),
            line: n + 1,
            column: e.column,
            what: e.what,
        })?;
        let Some(l) = parsed else { continue };
        let key = (l.interface.clone(), l.frame.fd);
        if !channels.contains_key(&key) {
            let id = channels.len() as u16 + 1;
            let topic = if l.frame.fd {
                format!("/can/{}/fd", l.interface)
            } else {
                format!("/can/{}", l.interface)
            };
            let metadata = BTreeMap::from([
                ("interface".to_owned(), l.interface.clone()),
                (
                    "offered_qos_profiles".to_owned(),
                    bag::qos_profile_yaml(true, false, 100),
                ),
                ("imported_from".to_owned(), log.display().to_string()),
            ]);
            w.add_channel(&Channel {
                id,
                schema_id: if l.frame.fd { 2 } else { 1 },
                topic,
                message_encoding: "cdr".to_owned(),
                metadata,
            })?;
            channels.insert(key.clone(), ImportChannel { id, sequence: 0 });
        }
        let Some(ch) = channels.get_mut(&key) else {
            continue;
        };
        payload = l.frame.encode_into(payload, l.time_ns, &l.interface);
        ch.sequence = ch.sequence.wrapping_add(1);
        builder.push(ch.id, ch.sequence, l.time_ns, l.time_ns, &payload);
        let topic = if l.frame.fd {
            format!("/can/{}/fd", l.interface)
        } else {
            format!("/can/{}", l.interface)
        };
        *counts.entry(topic).or_default() += 1;
        if builder.len() >= IMPORT_CHUNK {
            w.write_chunk(&builder.take().seal(&mut z))?;
        }
    }
    if !builder.is_empty() {
        w.write_chunk(&builder.take().seal(&mut z))?;
    }
    if counts.is_empty() {
        return Err(ExportError::Log {
            path: log.to_path_buf(),
            line: 1,
            column: 1,
            what: "no frame in the log".to_owned(),
        });
    }
    let (mut sink, _) = w.finish()?;
    sink.flush().map_err(io_at(part))?;
    sink.get_ref().sync_all().map_err(io_at(part))?;
    Ok(counts)
}

/// Frames of a log file, parsed (for tests and the QEMU comparison).
pub fn read_log(log: &Path) -> Result<Vec<candump::LogLine>, ExportError> {
    let input = File::open(log).map_err(io_at(log))?;
    let mut out = Vec::new();
    for (n, line) in BufReader::new(input).lines().enumerate() {
        let line = line.map_err(io_at(log))?;
        match candump::parse_line(&line) {
            Ok(Some(l)) => out.push(l),
            Ok(None) => {}
            Err(e) => {
                return Err(ExportError::Log {
                    path: log.to_path_buf(),
                    line: n + 1,
                    column: e.column,
                    what: e.what,
                })
            }
        }
    }
    Ok(out)
}
