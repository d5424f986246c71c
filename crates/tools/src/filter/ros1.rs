//! ROS 1 bags in `filter`: a bag read into the same [`Sink`] as an MCAP
//! file, and [`Ros1Out`], the sink that writes a ROS 1 bag.
//!
//! In: each connection becomes what `edgerec convert` makes of it (a
//! `ros1msg` schema with the connection's definition, a channel with the
//! `ros1` encoding and the `callerid`, `latching` and `md5sum` metadata),
//! each message its bytes with the bag time as log and publish time, so
//! the MCAP writer and the expression work unchanged. The bag is read
//! through its index (or a scan when it has none), one chunk at a time,
//! only the chunks that hold a kept connection; a chunk that does not
//! read ends the reading there (damage, as for MCAP).
//!
//! Out: a connection per channel (topic, type, md5sum, definition,
//! callerid, latching), the message bytes unchanged at their log time, in
//! rosbag's layout (uncompressed chunks of 768 KiB, an index), under a
//! `.part` name published when whole. Only ROS 1 messages can go into a
//! ROS 1 bag: a CDR channel is refused, naming the way that works.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use edgerec_format::bag;
use edgerec_format::records::{Channel, MessageRef, Schema};
use edgerec_format::FormatError;
use edgerec_rosbag1::{Bag, BagWriter, Connection, Filter, Time};

use crate::error::{Result, ToolError};
use crate::filter::read::{Damage, Scope, Sink};
use crate::filter::write::part_of;

/// The schema encoding of ROS 1 definitions in MCAP.
const ROS1MSG: &str = "ros1msg";

/// Reads the open ROS 1 bag `bag` (at `path`) into `sink`: `Err` is the
/// sink's error; damage met while reading is `Ok(Some(_))`.
pub(crate) fn read_bag(
    bag: &mut Bag<BufReader<File>>,
    path: &Path,
    scope: &Scope<'_>,
    sink: &mut dyn Sink,
) -> Result<Option<Damage>> {
    sink.begin_file(path, crate::convert::PROFILE_ROS1)?;
    let connections: Vec<_> = bag.connections().values().cloned().collect();
    // Schemas by (type, definition); channels numbered from 1 in
    // connection order.
    let mut schemas: BTreeMap<(String, String), u16> = BTreeMap::new();
    let mut channel_of: BTreeMap<u32, u16> = BTreeMap::new();
    let mut topics: BTreeSet<String> = BTreeSet::new();
    for (i, c) in connections.iter().enumerate() {
        let key = (c.msg_type.clone(), c.message_definition.clone());
        let next = schemas.len() + 1;
        let schema_id = match schemas.get(&key) {
            Some(id) => *id,
            None => {
                let id = u16::try_from(next).map_err(|_| {
                    ToolError::Usage(format!("{}: more than 65535 message types", path.display()))
                })?;
                sink.schema(&Schema {
                    id,
                    name: c.msg_type.clone(),
                    encoding: ROS1MSG.to_owned(),
                    data: c.message_definition.as_bytes().to_vec(),
                })?;
                schemas.insert(key, id);
                id
            }
        };
        let id = u16::try_from(i + 1).map_err(|_| {
            ToolError::Usage(format!("{}: more than 65535 connections", path.display()))
        })?;
        let channel = channel_for(c, id, schema_id);
        if scope.topics.admits(&c.topic) && sink.channel(&channel)? {
            channel_of.insert(c.id, id);
            topics.insert(c.topic.clone());
        }
    }
    if channel_of.is_empty() {
        return Ok(None);
    }
    let filter = Filter {
        topics: Some(topics),
        start: Some(Time::from_nanos(scope.start_ns)),
        end: (scope.end_ns != u64::MAX).then(|| Time::from_nanos(scope.end_ns)),
    };
    let mut sequence: BTreeMap<u16, u32> = BTreeMap::new();
    for m in bag.messages(&filter) {
        let m = match m {
            Ok(m) => m,
            Err(e) => {
                // The reader's error names its place.
                return Ok(Some(Damage {
                    path: path.to_path_buf(),
                    offset: None,
                    what: e.to_string(),
                }));
            }
        };
        let Some(&channel_id) = channel_of.get(&m.connection.id) else {
            continue;
        };
        let t = m.time_ns();
        // The bag's end is inclusive, the window's is not.
        if !(t >= scope.start_ns && t < scope.end_ns) {
            continue;
        }
        let seq = sequence.entry(channel_id).or_insert(0);
        *seq = seq.wrapping_add(1);
        sink.message(&MessageRef {
            channel_id,
            sequence: *seq,
            log_time: t,
            publish_time: t,
            data: &m.data,
        })?;
    }
    Ok(None)
}

/// The MCAP channel of a ROS 1 connection, as `edgerec convert` writes it.
pub(crate) fn channel_for(c: &Connection, id: u16, schema_id: u16) -> Channel {
    let mut metadata = BTreeMap::from([
        (
            "latching".to_owned(),
            if c.latching { "1" } else { "0" }.to_owned(),
        ),
        ("md5sum".to_owned(), c.md5sum.clone()),
    ]);
    if let Some(caller) = &c.callerid {
        metadata.insert("callerid".to_owned(), caller.clone());
    }
    Channel {
        id,
        schema_id,
        topic: c.topic.clone(),
        message_encoding: "ros1".to_owned(),
        metadata,
    }
}

/// The [`Sink`] that writes a ROS 1 bag.
pub(crate) struct Ros1Out {
    part: PathBuf,
    dest: PathBuf,
    w: Option<BagWriter<BufWriter<File>>>,
    /// The current input file's schemas by its ids.
    in_schemas: BTreeMap<u16, Schema>,
    /// The current input file's kept channels: its id to a connection id.
    in_channels: BTreeMap<u16, u32>,
    /// Connections by what makes them one: topic, type, md5sum,
    /// definition, callerid, latching.
    connections: BTreeMap<(String, String, String, String, String, bool), u32>,
    /// Messages kept per connection.
    counts: BTreeMap<u32, u64>,
    topic_of: BTreeMap<u32, String>,
    /// Bytes of message data kept.
    pub bytes: u64,
}

impl Ros1Out {
    /// A writer of the new bag `dest`.
    pub fn new(dest: &Path) -> Result<Ros1Out> {
        let part = part_of(dest);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&part)
            .map_err(ToolError::io(&part))?;
        let w =
            BagWriter::new(BufWriter::with_capacity(1 << 20, f)).map_err(ToolError::ros1(&part))?;
        Ok(Ros1Out {
            part,
            dest: dest.to_path_buf(),
            w: Some(w),
            in_schemas: BTreeMap::new(),
            in_channels: BTreeMap::new(),
            connections: BTreeMap::new(),
            counts: BTreeMap::new(),
            topic_of: BTreeMap::new(),
            bytes: 0,
        })
    }

    /// Messages kept per topic.
    pub fn topic_counts(&self) -> BTreeMap<String, u64> {
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for (conn, n) in &self.counts {
            if let Some(t) = self.topic_of.get(conn) {
                *out.entry(t.clone()).or_default() += n;
            }
        }
        out
    }

    fn writer(&mut self) -> Result<&mut BagWriter<BufWriter<File>>> {
        let part = self.part.clone();
        self.w
            .as_mut()
            .ok_or_else(|| ToolError::ros1(&part)(edgerec_rosbag1::Error::WriterFailed))
    }

    /// Writes the index, syncs and publishes the bag; returns its path.
    pub fn finish(mut self) -> Result<PathBuf> {
        let part = self.part.clone();
        let Some(w) = self.w.take() else {
            return Err(ToolError::ros1(&part)(edgerec_rosbag1::Error::WriterFailed));
        };
        let (mut out, _) = w.finish().map_err(ToolError::ros1(&part))?;
        out.flush().map_err(ToolError::io(&part))?;
        out.get_ref().sync_all().map_err(ToolError::io(&part))?;
        drop(out);
        bag::publish(&part, &self.dest)
            .map_err(|e| ToolError::mcap(&self.dest)(FormatError::Publish(e)))?;
        Ok(self.dest.clone())
    }

    /// Removes what was written (after an error).
    pub fn abandon(mut self) {
        self.w.take();
        let _ = std::fs::remove_file(&self.part);
    }
}

impl Sink for Ros1Out {
    fn begin_file(&mut self, _path: &Path, _profile: &str) -> Result<()> {
        self.in_schemas.clear();
        self.in_channels.clear();
        Ok(())
    }

    fn schema(&mut self, s: &Schema) -> Result<()> {
        self.in_schemas.insert(s.id, s.clone());
        Ok(())
    }

    fn channel(&mut self, c: &Channel) -> Result<bool> {
        let schema = self.in_schemas.get(&c.schema_id);
        let ros1 = schema.is_some_and(|s| s.encoding == ROS1MSG)
            && matches!(c.message_encoding.as_str(), "ros1" | "ros");
        let Some(schema) = schema.filter(|_| ros1) else {
            return Err(ToolError::Usage(format!(
                "{}: its messages are {} ({}), and a ROS 1 bag holds ROS 1 messages only: filter into an .mcap file or a bag directory instead",
                c.topic,
                c.message_encoding,
                schema.map_or("no schema", |s| s.encoding.as_str())
            )));
        };
        let Some(md5sum) = c.metadata.get("md5sum").filter(|m| !m.is_empty()) else {
            return Err(ToolError::Usage(format!(
                "{}: the channel carries no md5sum, which a ROS 1 bag's connection needs (`edgerec convert` and `mcap convert` write it): filter into an .mcap file instead",
                c.topic
            )));
        };
        let definition = String::from_utf8_lossy(&schema.data).into_owned();
        let callerid = c.metadata.get("callerid").cloned().unwrap_or_default();
        let latching = c.metadata.get("latching").is_some_and(|l| l == "1");
        let key = (
            c.topic.clone(),
            schema.name.clone(),
            md5sum.clone(),
            definition.clone(),
            callerid.clone(),
            latching,
        );
        let id = match self.connections.get(&key) {
            Some(id) => *id,
            None => {
                let id = u32::try_from(self.connections.len())
                    .map_err(|_| ToolError::Usage("more than 2^32 connections".to_owned()))?;
                let mut conn = Connection::new(id, &c.topic, &schema.name, md5sum, &definition);
                if !callerid.is_empty() {
                    conn.set("callerid", callerid.as_bytes());
                }
                if latching {
                    conn.set("latching", b"1");
                }
                let part = self.part.clone();
                self.writer()?
                    .add_connection(conn)
                    .map_err(ToolError::ros1(&part))?;
                self.connections.insert(key, id);
                self.topic_of.insert(id, c.topic.clone());
                id
            }
        };
        self.in_channels.insert(c.id, id);
        Ok(true)
    }

    fn message(&mut self, m: &MessageRef<'_>) -> Result<()> {
        let Some(&conn) = self.in_channels.get(&m.channel_id) else {
            return Ok(());
        };
        let Some(w) = self.w.as_mut() else {
            return Err(ToolError::ros1(&self.part)(
                edgerec_rosbag1::Error::WriterFailed,
            ));
        };
        // The path is copied only for an error: this runs per message.
        w.write(conn, Time::from_nanos(m.log_time), m.data)
            .map_err(|source| ToolError::Ros1 {
                path: self.part.clone(),
                source,
            })?;
        *self.counts.entry(conn).or_default() += 1;
        self.bytes += m.data.len() as u64;
        Ok(())
    }

    /// ROS 1 bags have no place for them.
    fn metadata(&mut self, _name: &str, _map: &BTreeMap<String, String>) -> Result<()> {
        Ok(())
    }
}
