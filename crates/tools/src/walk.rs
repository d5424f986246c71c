//! Every message of a bag of any kind, in the order it is stored (ROS 1:
//! chunk by chunk, by time inside a chunk; MCAP: file order, segment by
//! segment), with a decoder built once per connection or channel from the
//! definition the bag carries.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use edgerec_format::decode::DecodeError;
use edgerec_format::info::FileState;
use edgerec_format::messages::read_channels;
use edgerec_format::msgtype::{Dialect, TypeTable};
use edgerec_format::records::Schema;
use edgerec_format::value::MsgValue;
use edgerec_format::{cdr_decode, ros1_decode, FormatError};
use edgerec_rosbag1::{Filter, Time};

use crate::error::{Result, ToolError};
use crate::open::Input;

/// Which messages to visit. The default visits all.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only these topics (`None`: every topic).
    pub topics: Option<BTreeSet<String>>,
    /// Only messages logged at or after this time (ns since the epoch).
    pub start_ns: Option<u64>,
    /// Only messages logged at or before this time.
    pub end_ns: Option<u64>,
}

impl Selection {
    fn admits_time(&self, t: u64) -> bool {
        self.start_ns.is_none_or(|s| t >= s) && self.end_ns.is_none_or(|e| t <= e)
    }

    fn admits_topic(&self, topic: &str) -> bool {
        self.topics.as_ref().is_none_or(|t| t.contains(topic))
    }
}

/// A message's type table, or why its definition cannot give one.
#[derive(Debug)]
pub struct Decoder {
    table: std::result::Result<TypeTable, String>,
}

impl Decoder {
    /// The decoder for a message of `type_name` defined by `definition`
    /// in `dialect` (an empty definition is rosbag2's "unknown type").
    pub fn new(type_name: &str, definition: &str, dialect: Dialect) -> Decoder {
        // An empty ROS 2 schema is rosbag2's "type unknown"; an empty ROS 1
        // definition is a type without fields (std_msgs/Empty).
        let table = if definition.trim().is_empty() && dialect == Dialect::Ros2 {
            Err("the bag holds no definition for it (empty schema)".to_owned())
        } else {
            TypeTable::parse_with(type_name, definition, dialect).map_err(|e| e.to_string())
        };
        Decoder { table }
    }

    /// A decoder that cannot decode, saying why.
    pub fn unusable(why: impl Into<String>) -> Decoder {
        Decoder {
            table: Err(why.into()),
        }
    }

    /// The type table, or why there is none.
    pub fn table(&self) -> std::result::Result<&TypeTable, &str> {
        self.table.as_ref().map_err(String::as_str)
    }

    /// Decodes one message.
    pub fn decode<'a>(&'a self, data: &'a [u8]) -> std::result::Result<MsgValue<'a>, DecodeIssue> {
        let t = self
            .table
            .as_ref()
            .map_err(|w| DecodeIssue::Definition(w.clone()))?;
        match t.dialect() {
            Dialect::Ros2 => cdr_decode::decode(t, data),
            Dialect::Ros1 => ros1_decode::decode(t, data),
        }
        .map_err(DecodeIssue::Payload)
    }
}

/// Why a message did not decode.
#[derive(Debug)]
pub enum DecodeIssue {
    /// Its type has no usable definition.
    Definition(String),
    /// The bytes do not fit the definition.
    Payload(DecodeError),
}

impl std::fmt::Display for DecodeIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeIssue::Definition(w) => write!(f, "no usable definition: {w}"),
            DecodeIssue::Payload(e) => write!(f, "{e}"),
        }
    }
}

/// One message as the walk hands it over.
#[derive(Debug)]
pub struct Msg<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The type as the bag names it (`pkg/Type` in ROS 1, the schema name in MCAP).
    pub type_name: &'a str,
    /// Log time (ROS 1: the bag time), ns since the epoch.
    pub log_time: u64,
    /// The serialized message.
    pub data: &'a [u8],
    /// Where it is: `chunk at byte N` (ROS 1) or the MCAP file.
    pub place: Place<'a>,
    /// Its connection's or channel's decoder.
    pub decoder: &'a Decoder,
}

/// Where a message is stored, for errors.
#[derive(Debug, Clone, Copy)]
pub enum Place<'a> {
    /// In the ROS 1 chunk at this file offset, at this offset of its data.
    Ros1Chunk(u64, u32),
    /// In this MCAP file.
    Mcap(&'a Path),
}

impl std::fmt::Display for Place<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Ros1Chunk(c, o) => write!(f, "record at byte {o} of the chunk at byte {c}"),
            Place::Mcap(p) => write!(f, "in {}", p.display()),
        }
    }
}

/// Every topic of the input with its type, as the bag names it.
pub fn topics(input: &Input) -> Result<BTreeMap<String, String>> {
    Ok(match input {
        Input::Ros1(r) => r.with(|bag| {
            Ok(bag
                .connections()
                .values()
                .map(|c| (c.topic.clone(), c.msg_type.clone()))
                .collect())
        })?,
        Input::Mcap(info) => info
            .topics
            .iter()
            .map(|(t, tt)| (t.clone(), tt.type_name.clone()))
            .collect(),
    })
}

/// Refuses a topic the input does not have (naming those it has).
pub fn check_topics(input: &Input, wanted: &BTreeSet<String>) -> Result<()> {
    let have = topics(input)?;
    for t in wanted {
        if !have.contains_key(t) {
            return Err(ToolError::NoSuchTopic {
                path: input.path().to_path_buf(),
                topic: t.clone(),
                available: have.keys().cloned().collect(),
            });
        }
    }
    Ok(())
}

enum WalkError {
    Format(FormatError),
    Tool(ToolError),
}

impl From<FormatError> for WalkError {
    fn from(e: FormatError) -> Self {
        WalkError::Format(e)
    }
}

/// The dialect of an MCAP schema: `ros1msg` is ROS 1, the rest ROS 2.
fn mcap_dialect(schema: &Schema) -> Option<Dialect> {
    match schema.encoding.as_str() {
        "ros1msg" => Some(Dialect::Ros1),
        "ros2msg" => Some(Dialect::Ros2),
        _ => None,
    }
}

fn mcap_decoder(schema: Option<&Schema>, message_encoding: &str) -> Decoder {
    let Some(s) = schema else {
        return Decoder::unusable("the channel has no schema");
    };
    match (mcap_dialect(s), message_encoding) {
        (Some(Dialect::Ros2), "cdr") | (Some(Dialect::Ros1), "ros1" | "ros") => {
            let text = String::from_utf8_lossy(&s.data);
            Decoder::new(&s.name, &text, mcap_dialect(s).unwrap_or_default())
        }
        _ if s.encoding.is_empty() => Decoder::unusable("the bag holds no definition for it (empty schema)"),
        (_, enc) => Decoder::unusable(format!(
            "schema encoding {:?} with message encoding {enc:?} is not one the tools decode (ros2msg + cdr, ros1msg + ros1)",
            s.encoding
        )),
    }
}

/// Visits every message `sel` admits, stopping at the first error (the
/// bag's or `visit`'s); a visitor that returns [`ToolError::Enough`] ends
/// the walk with `Ok`.
pub fn walk<F>(input: &Input, sel: &Selection, visit: F) -> Result<()>
where
    F: FnMut(&Msg<'_>) -> Result<()>,
{
    match walk_all(input, sel, visit) {
        Err(ToolError::Enough) => Ok(()),
        other => other,
    }
}

fn walk_all<F>(input: &Input, sel: &Selection, mut visit: F) -> Result<()>
where
    F: FnMut(&Msg<'_>) -> Result<()>,
{
    match input {
        Input::Ros1(r) => r.with(|bag| {
            let path = r.path();
            let decoders: BTreeMap<u32, Decoder> = bag
                .connections()
                .values()
                .map(|c| {
                    (
                        c.id,
                        Decoder::new(&c.msg_type, &c.message_definition, Dialect::Ros1),
                    )
                })
                .collect();
            let filter = Filter {
                topics: sel.topics.clone(),
                start: sel.start_ns.map(Time::from_nanos),
                end: sel.end_ns.map(Time::from_nanos),
            };
            for m in bag.messages(&filter) {
                let m = m.map_err(ToolError::ros1(path))?;
                let Some(decoder) = decoders.get(&m.connection.id) else {
                    continue;
                };
                visit(&Msg {
                    topic: &m.connection.topic,
                    type_name: &m.connection.msg_type,
                    log_time: m.time_ns(),
                    data: &m.data,
                    place: Place::Ros1Chunk(m.chunk_pos, m.offset),
                    decoder,
                })?;
            }
            Ok(())
        }),
        Input::Mcap(info) => {
            for file in &info.files {
                let FileState::Closed(summary) = &file.state else {
                    continue;
                };
                let decoders: BTreeMap<u16, Decoder> = summary
                    .channels
                    .values()
                    .filter(|c| sel.admits_topic(&c.topic))
                    .map(|c| {
                        (
                            c.id,
                            mcap_decoder(summary.schemas.get(&c.schema_id), &c.message_encoding),
                        )
                    })
                    .collect();
                let ids: BTreeSet<u16> = decoders.keys().copied().collect();
                let r = read_channels(&file.path, summary, &ids, |m| {
                    if !sel.admits_time(m.log_time) {
                        return Ok(());
                    }
                    let (Some(ch), Some(decoder)) = (
                        summary.channels.get(&m.channel_id),
                        decoders.get(&m.channel_id),
                    ) else {
                        return Ok(());
                    };
                    let type_name = summary
                        .schemas
                        .get(&ch.schema_id)
                        .map(|s| s.name.as_str())
                        .unwrap_or("");
                    visit(&Msg {
                        topic: &ch.topic,
                        type_name,
                        log_time: m.log_time,
                        data: m.data,
                        place: Place::Mcap(&file.path),
                        decoder,
                    })
                    .map_err(WalkError::Tool)
                });
                match r {
                    Ok(()) => {}
                    Err(WalkError::Format(e)) => return Err(ToolError::mcap(&file.path)(e)),
                    Err(WalkError::Tool(e)) => return Err(e),
                }
            }
            Ok(())
        }
    }
}

/// The log time of the input's first message (0 when it has none), for
/// `--start +S`.
pub fn start_ns(input: &Input) -> Result<u64> {
    Ok(match input {
        Input::Ros1(r) => r.with(|bag| {
            Ok(bag
                .chunks()
                .iter()
                .map(|c| c.start_time.as_nanos())
                .min()
                .unwrap_or(0))
        })?,
        Input::Mcap(info) => info.start_ns,
    })
}

/// The MCAP files of the input that [`walk`] passes over (unfinished or
/// unreadable), each with why and the fix, for the commands to say so.
pub fn skipped_files(input: &Input) -> Vec<String> {
    let Input::Mcap(info) = input else {
        return Vec::new();
    };
    info.files
        .iter()
        .filter_map(|f| match &f.state {
            FileState::Closed(_) => None,
            FileState::Active => Some(format!(
                "{}: not closed (still recording, or left by a crash); its messages are not read: `edgerec recover` closes it",
                f.path.display()
            )),
            FileState::Broken(why) => Some(format!(
                "{}: unreadable ({why}); its messages are not read: `edgerec check` names the problem",
                f.path.display()
            )),
        })
        .collect()
}
