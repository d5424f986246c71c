//! Connection records (op 0x07): the outer header names the connection id
//! and topic, the data is a second header block, the publisher's
//! connection header (`topic`, `type`, `md5sum`, `message_definition`,
//! `callerid`, `latching`). One topic may have several connections (one
//! per publisher); rosbag writes each one at its first message, inside
//! that chunk, and all of them again at the index.

use crate::error::{Error, Place, Result};
use crate::records::{self, op, Fields};

/// One connection of a bag.
///
/// The typed fields are read from [`Connection::header`]; the writer
/// writes `header` as it is, so fields this crate does not know survive a
/// reindex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// The connection id messages refer to (`conn`).
    pub id: u32,
    /// The topic of the outer header.
    pub topic: String,
    /// The message type, `pkg/Type`.
    pub msg_type: String,
    /// The type's md5sum.
    pub md5sum: String,
    /// The full message definition (the `.msg` text with `MSG:` sections).
    pub message_definition: String,
    /// The publishing node, when the recorder stored it.
    pub callerid: Option<String>,
    /// Whether the publisher latched (`latching=1`).
    pub latching: bool,
    /// The connection header, field by field, in file order.
    pub header: Vec<(String, Vec<u8>)>,
}

impl Connection {
    /// A connection with the fields rosbag's Python writer stores.
    pub fn new(
        id: u32,
        topic: &str,
        msg_type: &str,
        md5sum: &str,
        message_definition: &str,
    ) -> Connection {
        Connection {
            id,
            topic: topic.to_owned(),
            msg_type: msg_type.to_owned(),
            md5sum: md5sum.to_owned(),
            message_definition: message_definition.to_owned(),
            callerid: None,
            latching: false,
            header: vec![
                ("topic".into(), topic.as_bytes().to_vec()),
                ("type".into(), msg_type.as_bytes().to_vec()),
                ("md5sum".into(), md5sum.as_bytes().to_vec()),
                (
                    "message_definition".into(),
                    message_definition.as_bytes().to_vec(),
                ),
            ],
        }
    }

    /// Adds or replaces a connection header field, keeping the typed
    /// fields in step.
    pub fn set(&mut self, name: &str, value: &[u8]) {
        match self.header.iter_mut().find(|(n, _)| n == name) {
            Some((_, v)) => *v = value.to_vec(),
            None => self.header.push((name.to_owned(), value.to_vec())),
        }
        let text = || String::from_utf8_lossy(value).into_owned();
        match name {
            "type" => self.msg_type = text(),
            "md5sum" => self.md5sum = text(),
            "message_definition" => self.message_definition = text(),
            "callerid" => self.callerid = Some(text()),
            "latching" => self.latching = value == b"1",
            _ => {}
        }
    }

    /// Parses a connection record's header and data.
    pub fn parse(fields: &Fields<'_>, data: &[u8]) -> Result<Connection> {
        let id = fields.u32(op::CONNECTION, "conn")?;
        let topic = fields.text(op::CONNECTION, "topic")?;
        let inner = Fields::parse(data, fields.at())?;
        let text = |name: &'static str| inner.text(op::CONNECTION, name);
        Ok(Connection {
            id,
            topic,
            msg_type: text("type")?,
            md5sum: text("md5sum")?,
            // rosbag requires it too, but a missing definition only costs
            // decoding, not reading: keep the messages.
            message_definition: text("message_definition").unwrap_or_default(),
            callerid: text("callerid").ok(),
            latching: inner.get("latching") == Some(b"1"),
            header: inner
                .iter()
                .map(|(n, v)| (String::from_utf8_lossy(n).into_owned(), v.to_vec()))
                .collect(),
        })
    }

    /// Appends the connection record.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut h = Vec::new();
        records::put_field(&mut h, "op", &[op::CONNECTION]);
        records::put_field(&mut h, "conn", &self.id.to_le_bytes());
        records::put_field(&mut h, "topic", self.topic.as_bytes());
        let mut data = Vec::new();
        for (n, v) in &self.header {
            records::put_field(&mut data, n, v);
        }
        records::put_record(out, &h, &data);
    }
}

/// Checks that a record at `at` is a connection record and parses it.
pub fn expect(fields: &Fields<'_>, data: &[u8], at: Place) -> Result<Connection> {
    let found = fields.op()?;
    if found != op::CONNECTION {
        return Err(Error::UnexpectedOp {
            at,
            expected: "connection",
            expected_op: op::CONNECTION,
            found,
        });
    }
    Connection::parse(fields, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_parse_round_trip() {
        let mut c = Connection::new(4, "/tf_static", "tf2_msgs/TFMessage", "abc", "def");
        c.set("callerid", b"/node");
        c.set("latching", b"1");
        let mut out = Vec::new();
        c.encode(&mut out);
        let rec = records::split(&out, 0, |o| Place::File(o as u64))
            .unwrap()
            .unwrap();
        let f = Fields::parse(rec.header, Place::File(0)).unwrap();
        assert_eq!(expect(&f, rec.data, Place::File(0)).unwrap(), c);
        assert!(c.latching);
        assert_eq!(c.callerid.as_deref(), Some("/node"));
    }
}
