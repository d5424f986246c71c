//! The recorder's own topics: what it knew about itself while recording,
//! stored beside the data so that a bag explains its own gaps. Each is an
//! ordinary source ([`PeriodicTopic`]): it goes through the same queues,
//! chunks and segments as sensor data and is counted the same way.
//!
//! - `/edgerec/status` (`std_msgs/msg/String`): the status snapshot as
//!   JSON, once a second;
//! - `/edgerec/clock` (`edgerec_msgs/msg/ClockQuality`): the clock's state,
//!   offset and grandmaster at every poll of the clock monitor, to plot;
//! - `/edgerec/audit` (`std_msgs/msg/String`, latched): each operator's
//!   command that changes something, carried out or refused, as JSON with
//!   who asked, so a gap in the data says who made it. Latched, so it is
//!   kept through the operator's own pause, and the last record is
//!   repeated at the head of each segment.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use edgerec_clock::{ClockHandle, ClockState, ClockStatus};
use edgerec_format::bag::qos_profile_yaml;
use edgerec_format::cdr::{msg, ClockQualitySpec, Time};
use edgerec_format::msgdefs;
use edgerec_source::{
    ChannelSpec, Envelope, PeriodicTopic, Produce, Source, SourceError, SourceSink, Stop,
};

/// The channel of one of the recorder's own topics, with its embedded
/// definition.
fn spec(topic: &str, type_name: &'static str) -> ChannelSpec {
    // Both types are embedded (a test in the format crate keeps every
    // embedded definition present); an empty schema would still record.
    let def = msgdefs::lookup(type_name);
    let mut metadata = BTreeMap::new();
    metadata.insert(
        "offered_qos_profiles".to_string(),
        qos_profile_yaml(true, false, 10),
    );
    ChannelSpec {
        topic: topic.to_owned(),
        type_name: type_name.to_owned(),
        message_encoding: "cdr".into(),
        schema_encoding: def
            .map(|d| d.encoding.to_string())
            .unwrap_or_else(|| "ros2msg".into()),
        schema: def
            .map(|d| d.text().as_bytes().to_vec())
            .unwrap_or_default(),
        metadata,
        latched: false,
    }
}

/// Most audit records waiting for `/edgerec/audit`; past it the newest
/// are counted, and a record saying how many follows.
pub const AUDIT_BACKLOG: usize = 1024;

/// The audit records waiting to be written, bounded.
#[derive(Debug, Default)]
pub struct AuditRecords {
    inner: Mutex<(VecDeque<String>, u64)>,
}

impl AuditRecords {
    /// Queues one record (JSON); past [`AUDIT_BACKLOG`] it is counted
    /// instead.
    pub fn push(&self, json: String) {
        let mut q = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if q.0.len() < AUDIT_BACKLOG {
            q.0.push_back(json);
        } else {
            q.1 += 1;
        }
    }

    /// The next record to write: a count of those left out first, when
    /// the queue has room again.
    pub fn pop(&self) -> Option<String> {
        let mut q = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if q.1 > 0 && q.0.len() < AUDIT_BACKLOG {
            let n = std::mem::take(&mut q.1);
            return Some(format!("{{\"audit_records_left_out\":{n}}}"));
        }
        q.0.pop_front()
    }
}

/// `/edgerec/audit`: the records of `records`, one `std_msgs/msg/String`
/// each, looked for every `period`; latched. Its channel is made with the
/// first record, so a recording nobody steered has no empty channel.
pub fn audit_topic(period: Duration, records: Arc<AuditRecords>) -> AuditTopic {
    let mut spec = spec("/edgerec/audit", "std_msgs/msg/String");
    spec.latched = true;
    spec.metadata.insert(
        "offered_qos_profiles".to_string(),
        qos_profile_yaml(true, true, 1),
    );
    AuditTopic {
        spec,
        period,
        records,
    }
}

/// The source behind [`audit_topic`].
#[derive(Debug)]
pub struct AuditTopic {
    spec: ChannelSpec,
    period: Duration,
    records: Arc<AuditRecords>,
}

impl Source for AuditTopic {
    fn name(&self) -> String {
        self.spec.topic.clone()
    }

    fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError> {
        let mut channel = None;
        // Once more after the stop, for a record of the last moment.
        let mut last = false;
        loop {
            while let Some(json) = self.records.pop() {
                let ch = match channel {
                    Some(c) => c,
                    None => *channel.insert(sink.register(self.spec.clone())?),
                };
                let t = sink.now_ns();
                // A refused push is counted as a drop on this channel.
                let _ = sink.push(Envelope {
                    channel: ch,
                    log_time: t,
                    publish_time: t,
                    payload: msg::string(&json),
                });
            }
            sink.alive();
            if last {
                return Ok(());
            }
            last = stop.is_requested();
            stop.wait_timeout(self.period);
        }
    }
}

/// `/edgerec/status`: `text()` (the snapshot as JSON) as a
/// `std_msgs/msg/String` every `period`.
pub fn status_topic(
    period: Duration,
    mut text: impl FnMut() -> Option<String> + Send + 'static,
) -> PeriodicTopic {
    let produce: Produce = Box::new(move |_| text().map(|t| msg::string(&t)));
    PeriodicTopic::new(
        spec("/edgerec/status", "std_msgs/msg/String"),
        period,
        produce,
    )
}

/// `/edgerec/clock`: the clock monitor's status as an
/// `edgerec_msgs/msg/ClockQuality` every `period` (its poll interval).
pub fn clock_topic(period: Duration, clock: ClockHandle) -> PeriodicTopic {
    let produce: Produce = Box::new(move |now| Some(clock_quality(now, &clock.status())));
    PeriodicTopic::new(
        spec("/edgerec/clock", "edgerec_msgs/msg/ClockQuality"),
        period,
        produce,
    )
}

/// The `ClockQuality` message for a clock status taken at `now`.
pub fn clock_quality(now: u64, s: &ClockStatus) -> Vec<u8> {
    let ptp = s.ptp4l.as_ref();
    let port_state = ptp.map(|p| p.port_state.to_string()).unwrap_or_default();
    msg::clock_quality(
        Time::from(now),
        &ClockQualitySpec {
            state: match s.state {
                ClockState::FreeRunning => 0,
                ClockState::Unlocked => 1,
                ClockState::Holdover => 2,
                ClockState::Locked => 3,
            },
            offset_ns: s.last_offset_ns.unwrap_or(0),
            offset_valid: s.last_offset_ns.is_some(),
            offset_origin: s.offset_origin.as_deref().unwrap_or(""),
            mean_path_delay_ns: ptp.map(|p| p.mean_path_delay_ns as i64).unwrap_or(0),
            port_state: &port_state,
            grandmaster: ptp.map(|p| p.gm_identity.as_str()).unwrap_or(""),
            gm_present: ptp.is_some_and(|p| p.gm_present),
            source: &s.source,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_audit_backlog_is_bounded_and_says_what_it_left_out() {
        let r = AuditRecords::default();
        for i in 0..AUDIT_BACKLOG + 5 {
            r.push(format!("{{\"n\":{i}}}"));
        }
        assert_eq!(r.pop().as_deref(), Some("{\"n\":0}"));
        // Room again: the count comes next.
        assert_eq!(r.pop().as_deref(), Some("{\"audit_records_left_out\":5}"));
        let mut n = 1;
        while let Some(x) = r.pop() {
            assert_eq!(x, format!("{{\"n\":{n}}}"));
            n += 1;
        }
        assert_eq!(n, AUDIT_BACKLOG);
    }
}
