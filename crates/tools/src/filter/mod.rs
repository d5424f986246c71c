//! `filter`: the part of a bag that matters, as a new bag: kept topics
//! ([`topics`]), an expression over the messages' fields ([`expr`]) and a
//! log-time window (`--start` inclusive, `--end` exclusive, as `mcap
//! filter`), from a ROS 1 bag, an MCAP file or a rosbag2 bag directory
//! into an MCAP file or a new bag directory ([`write`]) or a ROS 1 bag
//! ([`ros1`]).
//!
//! Streaming: a few input chunks (two per core decompressing them,
//! `decompress.rs`) and one output chunk in memory at a time, whatever the
//! input's size. Chunks that cannot hold a kept message (by
//! their index: channels and time range) are not read. An input file that
//! is cut or corrupt is filtered up to the damage ([`read`]); the output is
//! still complete and valid, and the damage is reported for the command to
//! warn and end non-zero. The output is refused when it exists.

mod decompress;
pub mod expr;
pub mod read;
pub mod ros1;
pub mod topics;
pub mod write;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use edgerec_format::chunk::Compression;
use edgerec_format::info::{BagInfo, FileState};
use edgerec_rosbag1::Bag;

use crate::error::{Result, ToolError};
use crate::open::{kind, Kind};
use crate::select::TimeSpec;

pub use read::Damage;
pub use topics::Topics;

/// What the output is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputKind {
    /// One MCAP file.
    Mcap,
    /// A rosbag2 bag directory (MCAP segments and `metadata.yaml`).
    Dir,
    /// A ROS 1 bag.
    Ros1,
}

impl OutputKind {
    /// `--to`'s value: `mcap`, `dir` (or `ros2`) or `bag` (or `ros1`).
    pub fn parse(value: &str) -> Result<OutputKind> {
        match value {
            "mcap" => Ok(OutputKind::Mcap),
            "dir" | "ros2" => Ok(OutputKind::Dir),
            "bag" | "ros1" => Ok(OutputKind::Ros1),
            other => Err(ToolError::Usage(format!(
                "--to {other:?}: give mcap (one MCAP file), dir (a rosbag2 bag directory) or bag (a ROS 1 bag)"
            ))),
        }
    }

    /// The kind an output's name says: `.mcap` one MCAP file, `.bag` a
    /// ROS 1 bag, anything else a bag directory.
    pub fn of(path: &Path) -> OutputKind {
        match path.extension().and_then(|e| e.to_str()) {
            Some("mcap") => OutputKind::Mcap,
            Some("bag") => OutputKind::Ros1,
            _ => OutputKind::Dir,
        }
    }
}

/// What to keep and how to write it.
#[derive(Debug, Clone, Default)]
pub struct FilterOptions {
    /// The topics kept.
    pub topics: Topics,
    /// The first log time kept.
    pub start: Option<TimeSpec>,
    /// The first log time no longer kept.
    pub end: Option<TimeSpec>,
    /// The output's kind (default: from its name).
    pub to: Option<OutputKind>,
    /// The output's chunk compression (default: the input's).
    pub compression: Option<Compression>,
    /// Threads decompressing input chunks (default: one per core, at
    /// most 8).
    pub threads: Option<usize>,
    /// Keep only the messages this expression holds for ([`expr`]).
    pub expression: Option<edgerec_trigger::Condition>,
}

/// What a filter wrote.
#[derive(Debug, Clone, Default)]
pub struct FilterReport {
    /// The files written (one, or a bag directory's segments).
    pub files: Vec<PathBuf>,
    /// Messages kept per topic.
    pub topics: BTreeMap<String, u64>,
    /// Messages kept.
    pub messages: u64,
    /// Bytes of message data kept.
    pub bytes: u64,
    /// Messages in the input's closed files (what their summaries count).
    pub input_messages: u64,
    /// Where input files stopped being readable: each is a warning, and
    /// the command ends non-zero.
    pub damage: Vec<Damage>,
    /// Messages the expression could not test (their bytes do not fit
    /// their schema): not kept, a warning, and the command ends non-zero.
    pub undecodable: u64,
    /// The first of those, with why.
    pub first_undecodable: Option<String>,
}

/// The chunk compression most of the input's chunks use (none when it has
/// none), as the output's default.
fn input_compression(names: &[String]) -> Compression {
    if names.iter().any(|n| n == "zstd") {
        Compression::Zstd { level: 1 }
    } else if names.iter().any(|n| n == "lz4") {
        Compression::Lz4
    } else {
        Compression::None
    }
}

/// The input, opened: a ROS 1 bag, or the summaries of an MCAP file or a
/// bag directory's files.
enum Source {
    Ros1(Box<Bag<BufReader<File>>>),
    Mcap(Box<BagInfo>),
}

impl Source {
    /// Every topic the input's index or summaries name.
    fn topics(&self) -> BTreeSet<String> {
        match self {
            Source::Ros1(b) => b.connections().values().map(|c| c.topic.clone()).collect(),
            Source::Mcap(i) => i.topics.keys().cloned().collect(),
        }
    }

    /// Whether [`Source::topics`] is every topic there is (an unfinished
    /// MCAP file's are not in any summary).
    fn topics_known(&self) -> bool {
        match self {
            Source::Ros1(_) => true,
            Source::Mcap(i) => i
                .files
                .iter()
                .all(|f| matches!(f.state, FileState::Closed(_))),
        }
    }

    /// The first message's log time, when known.
    fn start_ns(&self) -> Option<u64> {
        match self {
            Source::Ros1(b) => b.chunks().iter().map(|c| c.start_time.as_nanos()).min(),
            Source::Mcap(i) => {
                let closed = i
                    .files
                    .iter()
                    .any(|f| matches!(f.state, FileState::Closed(_)));
                (closed && i.messages > 0).then_some(i.start_ns)
            }
        }
    }

    /// Messages the index or the closed files' summaries count.
    fn messages(&self) -> u64 {
        match self {
            Source::Ros1(b) => b.message_count(),
            Source::Mcap(i) => i.messages,
        }
    }

    /// The default chunk compression of an MCAP output.
    fn compression(&self) -> Compression {
        match self {
            // As `edgerec convert` and rosbag2 write by default.
            Source::Ros1(_) => Compression::None,
            Source::Mcap(i) => input_compression(&i.compressions),
        }
    }

    /// Reads everything `scope` keeps into `sink`, noting damage.
    fn read(
        &mut self,
        path: &Path,
        scope: &read::Scope<'_>,
        sink: &mut dyn read::Sink,
        damage: &mut Vec<Damage>,
    ) -> Result<()> {
        match self {
            Source::Ros1(bag) => {
                if let Some(d) = ros1::read_bag(bag, path, scope, sink)? {
                    damage.push(d);
                }
            }
            Source::Mcap(info) => {
                for file in &info.files {
                    if let Some(d) = read::read_file(file, scope, sink)? {
                        damage.push(d);
                    }
                }
            }
        }
        Ok(())
    }
}

/// The output being written.
enum Output {
    Mcap(Box<write::McapOut>),
    Ros1(Box<ros1::Ros1Out>),
}

impl Output {
    fn sink(&mut self) -> &mut dyn read::Sink {
        match self {
            Output::Mcap(o) => o.as_mut(),
            Output::Ros1(o) => o.as_mut(),
        }
    }

    fn abandon(self) {
        match self {
            Output::Mcap(o) => o.abandon(),
            Output::Ros1(o) => o.abandon(),
        }
    }

    /// Messages kept per topic, and bytes of their data.
    fn kept(&self) -> (BTreeMap<String, u64>, u64) {
        match self {
            Output::Mcap(o) => (o.topic_counts(), o.bytes),
            Output::Ros1(o) => (o.topic_counts(), o.bytes),
        }
    }

    fn finish(self, version_from: Option<&Path>) -> Result<Vec<PathBuf>> {
        match self {
            Output::Mcap(o) => o.finish(version_from),
            Output::Ros1(o) => o.finish().map(|p| vec![p]),
        }
    }
}

/// Filters `input` into `output` (which must not exist).
pub fn filter(input: &Path, output: &Path, opts: &FilterOptions) -> Result<FilterReport> {
    let to = opts.to.unwrap_or_else(|| OutputKind::of(output));
    let input_kind = kind(input)?;
    if input_kind == Kind::Ros1 && to == OutputKind::Dir {
        return Err(ToolError::Usage(format!(
            "{}: a bag directory holds ROS 2 (CDR) messages and {} is a ROS 1 bag: filter into a .bag or an .mcap file, or `edgerec convert --to ros2` the bag first and filter the directory",
            output.display(),
            input.display()
        )));
    }
    if output.exists() {
        return Err(ToolError::OutputExists {
            path: output.to_path_buf(),
        });
    }
    let mut source = match input_kind {
        Kind::Ros1 => Source::Ros1(Box::new(Bag::open(input).map_err(ToolError::ros1(input))?)),
        Kind::Mcap => match crate::open::open(input)? {
            crate::open::Input::Mcap(info) => Source::Mcap(info),
            crate::open::Input::Ros1(_) => {
                return Err(ToolError::NotABag {
                    path: input.to_path_buf(),
                    what: "read as a ROS 1 bag after being taken for MCAP".to_owned(),
                })
            }
        },
    };
    if source.topics_known() {
        let have = source.topics();
        for t in opts.topics.names() {
            if !have.contains(t) {
                return Err(ToolError::NoSuchTopic {
                    path: input.to_path_buf(),
                    topic: t.clone(),
                    available: have.iter().cloned().collect(),
                });
            }
        }
    }
    let relative = matches!(opts.start, Some(TimeSpec::AfterStart(_)))
        || matches!(opts.end, Some(TimeSpec::AfterStart(_)));
    let first = match source.start_ns() {
        Some(t) => t,
        None if relative => {
            return Err(ToolError::Usage(format!(
                "{}: a time after the bag's start (+...) needs the start, which only a closed file with messages gives; give an absolute time, or `edgerec recover` the bag first",
                input.display()
            )))
        }
        None => 0,
    };
    let start_ns = opts.start.map_or(0, |s| s.resolve(first));
    let end_ns = opts.end.map_or(u64::MAX, |e| e.resolve(first));
    if end_ns <= start_ns {
        return Err(ToolError::Usage(format!(
            "--start ({start_ns} ns) is not before --end ({end_ns} ns): the window keeps nothing"
        )));
    }
    let mut out = match to {
        OutputKind::Ros1 => Output::Ros1(Box::new(ros1::Ros1Out::new(output)?)),
        OutputKind::Mcap | OutputKind::Dir => {
            let target = match to {
                OutputKind::Mcap => write::Target::File(output.to_path_buf()),
                _ => write::Target::Dir(output.to_path_buf()),
            };
            let compression = opts.compression.unwrap_or_else(|| source.compression());
            Output::Mcap(Box::new(write::McapOut::new(target, compression)?))
        }
    };
    let scope = read::Scope {
        topics: &opts.topics,
        start_ns,
        end_ns,
        threads: opts.threads.unwrap_or_else(decompress::workers).max(1),
    };
    let mut damage = Vec::new();
    let (mut undecodable, mut first_undecodable) = (0, None);
    let read = match &opts.expression {
        None => source.read(input, &scope, out.sink(), &mut damage),
        Some(condition) => {
            let mut tested = expr::ExprSink::new(out.sink(), condition);
            let r = source.read(input, &scope, &mut tested, &mut damage);
            undecodable = tested.undecodable;
            first_undecodable = tested.first_undecodable.take();
            r
        }
    };
    if let Err(e) = read {
        out.abandon();
        return Err(e);
    }
    let (topics, bytes) = out.kept();
    let version_from = input.is_dir().then_some(input);
    let files = match out.finish(version_from) {
        Ok(f) => f,
        Err(e) => {
            // The output did not exist before: what is there is ours.
            let _ = if output.is_dir() {
                std::fs::remove_dir_all(output)
            } else {
                std::fs::remove_file(output)
            };
            return Err(e);
        }
    };
    Ok(FilterReport {
        files,
        messages: topics.values().sum(),
        topics,
        bytes,
        input_messages: source.messages(),
        damage,
        undecodable,
        first_undecodable,
    })
}
