//! `filter`'s expression: a [`Sink`] in front of the writer that keeps a
//! message only when the expression holds for it.
//!
//! The expression is the trigger rule language with what `filter` adds
//! ([`edgerec_trigger::Env::filter`]): `topic`, `t` (the log time),
//! `rosbag filter`'s `m.` prefix, `.to_sec()`/`.to_nsec()`, `in` lists and
//! single quotes. It is compiled once per channel against the channel's
//! own schema: a comparison with `topic` is settled then, so a channel the
//! expression can never keep is dropped whole (its chunks are not even
//! read when nothing else in them is kept) and one it always keeps is
//! copied without a test. Otherwise each message is tested by reading only
//! the fields the expression names from its bytes (CDR, or ROS 1
//! serialization for a ROS 1 definition), skipping the rest.
//! A message whose bytes do not fit its schema is not kept and is counted.

use std::collections::BTreeMap;
use std::path::Path;

use edgerec_format::msgtype::{Dialect, TypeTable};
use edgerec_format::records::{Channel, MessageRef, Schema};
use edgerec_trigger::{Compiled, Condition, Env, ExprError};

use crate::error::{Result, ToolError};
use crate::filter::read::Sink;

/// How one channel's messages are tested.
enum Test {
    /// Every message is kept.
    All,
    /// Each message is tested.
    Each(Box<Compiled>),
}

/// The expression, in front of `inner`.
pub(crate) struct ExprSink<'a> {
    inner: &'a mut dyn Sink,
    condition: &'a Condition,
    schemas: BTreeMap<u16, Schema>,
    tests: BTreeMap<u16, Test>,
    /// Messages whose bytes did not fit their schema (not kept).
    pub undecodable: u64,
    /// The first such message: topic, log time and why.
    pub first_undecodable: Option<String>,
}

impl<'a> ExprSink<'a> {
    /// Tests what reaches `inner` with `condition`.
    pub fn new(inner: &'a mut dyn Sink, condition: &'a Condition) -> Self {
        ExprSink {
            inner,
            condition,
            schemas: BTreeMap::new(),
            tests: BTreeMap::new(),
            undecodable: 0,
            first_undecodable: None,
        }
    }

    fn refuse(&self, c: &Channel, type_name: &str, error: ExprError) -> ToolError {
        ToolError::Expression(Box::new(crate::error::ExpressionError {
            text: self.condition.text().to_owned(),
            context: format!(" (on {}, of type {type_name})", c.topic),
            error,
        }))
    }

    /// The test for channel `c`, or `None` when no message of it is kept.
    fn test_for(&self, c: &Channel) -> Result<Option<Test>> {
        let schema = self.schemas.get(&c.schema_id);
        let type_name = schema.map_or("(no schema)", |s| s.name.as_str());
        let dialect = match (
            schema.map(|s| s.encoding.as_str()),
            c.message_encoding.as_str(),
        ) {
            (Some("ros2msg"), "cdr") => Some(Dialect::Ros2),
            (Some("ros1msg"), "ros1" | "ros") => Some(Dialect::Ros1),
            _ => None,
        };
        // Without a usable definition the expression still settles
        // `topic` and reads `t`: an empty type has no fields, so any field
        // it names is refused, naming the type.
        let parsed = match (schema, dialect) {
            (Some(s), Some(d)) => {
                TypeTable::parse_with(&s.name, &String::from_utf8_lossy(&s.data), d).ok()
            }
            _ => None,
        };
        let table = match parsed {
            Some(t) => t,
            None => TypeTable::parse_with(type_name, "", Dialect::Ros1)
                .or_else(|_| TypeTable::parse_with("unknown/Undefined", "", Dialect::Ros1))
                .map_err(|e| ToolError::Definition {
                    topic: c.topic.clone(),
                    type_name: type_name.to_owned(),
                    why: e.to_string(),
                })?,
        };
        let compiled = self
            .condition
            .compile_in(&table, &Env::filter(&c.topic))
            .map_err(|e| self.refuse(c, type_name, e))?;
        match compiled.constant() {
            Some(true) => Ok(Some(Test::All)),
            Some(false) => Ok(None),
            // Without a definition the empty table refused every field
            // above: what is left reads `t` alone.
            None => Ok(Some(Test::Each(Box::new(compiled)))),
        }
    }
}

impl Sink for ExprSink<'_> {
    fn begin_file(&mut self, path: &Path, profile: &str) -> Result<()> {
        self.schemas.clear();
        self.tests.clear();
        self.inner.begin_file(path, profile)
    }

    fn schema(&mut self, s: &Schema) -> Result<()> {
        self.schemas.insert(s.id, s.clone());
        self.inner.schema(s)
    }

    fn channel(&mut self, c: &Channel) -> Result<bool> {
        match self.test_for(c)? {
            Some(test) => {
                self.tests.insert(c.id, test);
                self.inner.channel(c)
            }
            None => Ok(false),
        }
    }

    fn message(&mut self, m: &MessageRef<'_>) -> Result<()> {
        let keep = match self.tests.get(&m.channel_id) {
            Some(Test::All) => true,
            Some(Test::Each(c)) => match c.holds_at(m.data, m.log_time) {
                Ok(b) => b,
                Err(e) => {
                    self.undecodable += 1;
                    if self.first_undecodable.is_none() {
                        self.first_undecodable = Some(format!(
                            "channel {} at {} ns: {e}",
                            m.channel_id, m.log_time
                        ));
                    }
                    false
                }
            },
            None => false,
        };
        if keep {
            self.inner.message(m)?;
        }
        Ok(())
    }

    fn metadata(&mut self, name: &str, map: &BTreeMap<String, String>) -> Result<()> {
        self.inner.metadata(name, map)
    }
}
