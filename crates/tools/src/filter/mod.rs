//! `filter`: the part of a bag that matters, as a new bag: kept topics
//! ([`topics`]), an expression over the messages' fields ([`expr`]) and a
//! log-time window (`--start` inclusive, `--end`
//! exclusive, as `mcap filter`), from an MCAP file or a rosbag2 bag
//! directory into an MCAP file or a new bag directory ([`write`]).
//!
//! Streaming: one input chunk and one output chunk in memory at a time,
//! whatever the input's size. Chunks that cannot hold a kept message (by
//! their index: channels and time range) are not read. An input file that
//! is cut or corrupt is filtered up to the damage ([`read`]); the output is
//! still complete and valid, and the damage is reported for the command to
//! warn and end non-zero. The output is refused when it exists.

pub mod expr;
pub mod read;
pub mod topics;
pub mod write;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use edgerec_format::chunk::Compression;
use edgerec_format::info::FileState;

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
    /// `--to`'s value: `mcap`, `dir` or `bag`.
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

/// Filters `input` into `output` (which must not exist).
pub fn filter(input: &Path, output: &Path, opts: &FilterOptions) -> Result<FilterReport> {
    let to = opts.to.unwrap_or_else(|| OutputKind::of(output));
    if kind(input)? == Kind::Ros1 {
        return Err(ToolError::Usage(format!(
            "{}: filter reads MCAP files and rosbag2 bag directories; for a ROS 1 bag, `edgerec convert` it to MCAP first",
            input.display()
        )));
    }
    if to == OutputKind::Ros1 {
        return Err(ToolError::Usage(format!(
            "{}: filter writes an MCAP file (.mcap) or a rosbag2 bag directory; name the output so, or give --to mcap or --to dir",
            output.display()
        )));
    }
    if output.exists() {
        return Err(ToolError::OutputExists {
            path: output.to_path_buf(),
        });
    }
    let crate::open::Input::Mcap(info) = crate::open::open(input)? else {
        return Err(ToolError::NotABag {
            path: input.to_path_buf(),
            what: "read as a ROS 1 bag after being taken for MCAP".to_owned(),
        });
    };
    let all_closed = info
        .files
        .iter()
        .all(|f| matches!(f.state, FileState::Closed(_)));
    if all_closed {
        for t in opts.topics.names() {
            if !info.topics.contains_key(t) {
                return Err(ToolError::NoSuchTopic {
                    path: input.to_path_buf(),
                    topic: t.clone(),
                    available: info.topics.keys().cloned().collect(),
                });
            }
        }
    }
    let relative = matches!(opts.start, Some(TimeSpec::AfterStart(_)))
        || matches!(opts.end, Some(TimeSpec::AfterStart(_)));
    let has_closed = info
        .files
        .iter()
        .any(|f| matches!(f.state, FileState::Closed(_)));
    if relative && (!has_closed || info.messages == 0) {
        return Err(ToolError::Usage(format!(
            "{}: a time after the bag's start (+...) needs the start, which only a closed file with messages gives; give an absolute time, or `edgerec recover` the bag first",
            input.display()
        )));
    }
    let first = if has_closed { info.start_ns } else { 0 };
    let start_ns = opts.start.map_or(0, |s| s.resolve(first));
    let end_ns = opts.end.map_or(u64::MAX, |e| e.resolve(first));
    if end_ns <= start_ns {
        return Err(ToolError::Usage(format!(
            "--start ({start_ns} ns) is not before --end ({end_ns} ns): the window keeps nothing"
        )));
    }
    let compression = opts
        .compression
        .unwrap_or_else(|| input_compression(&info.compressions));
    let target = match to {
        OutputKind::Mcap => write::Target::File(output.to_path_buf()),
        _ => write::Target::Dir(output.to_path_buf()),
    };
    let scope = read::Scope {
        topics: &opts.topics,
        start_ns,
        end_ns,
    };
    let mut out = write::McapOut::new(target, compression)?;
    let mut damage = Vec::new();
    let (mut undecodable, mut first_undecodable) = (0, None);
    let read = match &opts.expression {
        None => read_all(&info.files, &scope, &mut out, &mut damage),
        Some(condition) => {
            let mut tested = expr::ExprSink::new(&mut out, condition);
            let r = read_all(&info.files, &scope, &mut tested, &mut damage);
            undecodable = tested.undecodable;
            first_undecodable = tested.first_undecodable.take();
            r
        }
    };
    if let Err(e) = read {
        out.abandon();
        return Err(e);
    }
    let topics = out.topic_counts();
    let bytes = out.bytes;
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
        input_messages: info.messages,
        damage,
        undecodable,
        first_undecodable,
    })
}

fn read_all(
    files: &[edgerec_format::info::FileEntry],
    scope: &read::Scope<'_>,
    sink: &mut dyn read::Sink,
    damage: &mut Vec<Damage>,
) -> Result<()> {
    for file in files {
        if let Some(d) = read::read_file(file, scope, sink)? {
            damage.push(d);
        }
    }
    Ok(())
}
