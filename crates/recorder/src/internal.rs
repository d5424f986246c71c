//! The recorder's own topics: what it knew about itself while recording,
//! stored beside the data so that a bag explains its own gaps. A
//! [`PeriodicTopic`] is an ordinary [`Source`]: it goes through the same
//! queues, chunks and segments as sensor data, is counted the same way and
//! is repeated at no cost when nothing else is recorded.
//!
//! - `/edgerec/status` (`std_msgs/msg/String`): the status snapshot as
//!   JSON, once a second;
//! - `/edgerec/clock` (`edgerec_msgs/msg/ClockQuality`): the clock's state,
//!   offset and grandmaster at every poll of the clock monitor, to plot.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use edgerec_clock::{ClockHandle, ClockState, ClockStatus};
use edgerec_format::bag::qos_profile_yaml;
use edgerec_format::cdr::{msg, ClockQualitySpec, Time};
use edgerec_format::msgdefs;

use crate::envelope::{ChannelId, Envelope};
use crate::source::{ChannelSpec, Source, SourceError, SourceSink, StopFlag};

/// Builds one message's CDR payload for the time given (ns on the
/// recording clock); `None` skips this period.
pub type Produce = Box<dyn FnMut(u64) -> Option<Vec<u8>> + Send>;

/// A topic the recorder writes about itself at a fixed period.
pub struct PeriodicTopic {
    topic: String,
    type_name: &'static str,
    period: Duration,
    produce: Produce,
    channel: Option<ChannelId>,
}

impl std::fmt::Debug for PeriodicTopic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeriodicTopic")
            .field("topic", &self.topic)
            .field("type_name", &self.type_name)
            .field("period", &self.period)
            .finish()
    }
}

impl PeriodicTopic {
    /// A topic of `type_name` (an embedded definition) built by `produce`
    /// every `period`.
    pub fn new(
        topic: impl Into<String>,
        type_name: &'static str,
        period: Duration,
        produce: Produce,
    ) -> Self {
        Self {
            topic: topic.into(),
            type_name,
            period,
            produce,
            channel: None,
        }
    }

    /// `/edgerec/status`: `text()` (the snapshot as JSON) as a
    /// `std_msgs/msg/String` every `period`.
    pub fn status(
        period: Duration,
        mut text: impl FnMut() -> Option<String> + Send + 'static,
    ) -> Self {
        Self::new(
            "/edgerec/status",
            "std_msgs/msg/String",
            period,
            Box::new(move |_| text().map(|t| msg::string(&t))),
        )
    }

    /// `/edgerec/clock`: the clock monitor's status as an
    /// `edgerec_msgs/msg/ClockQuality` every `period` (its poll interval).
    pub fn clock(period: Duration, clock: ClockHandle) -> Self {
        Self::new(
            "/edgerec/clock",
            "edgerec_msgs/msg/ClockQuality",
            period,
            Box::new(move |now| Some(clock_quality(now, &clock.status()))),
        )
    }
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

impl Source for PeriodicTopic {
    fn name(&self) -> String {
        self.topic.clone()
    }

    fn register(&mut self, sink: &mut SourceSink) -> Result<(), SourceError> {
        let def = msgdefs::lookup(self.type_name).ok_or_else(|| {
            SourceError::Other(format!(
                "no embedded message definition for {}",
                self.type_name
            ))
        })?;
        let mut metadata = BTreeMap::new();
        metadata.insert(
            "offered_qos_profiles".to_string(),
            qos_profile_yaml(true, false, 10),
        );
        self.channel = Some(sink.register(ChannelSpec {
            topic: self.topic.clone(),
            type_name: def.name.to_string(),
            message_encoding: "cdr".into(),
            schema_encoding: def.encoding.to_string(),
            schema: def.text().as_bytes().to_vec(),
            metadata,
            latched: false,
        })?);
        Ok(())
    }

    fn run(mut self: Box<Self>, sink: SourceSink, stop: StopFlag) -> Result<(), SourceError> {
        let Some(channel) = self.channel else {
            return Err(SourceError::Other("run before register".into()));
        };
        let mut next = Instant::now();
        while !stop.is_set() {
            let now = Instant::now();
            if now >= next {
                let t = sink.now_ns();
                if let Some(payload) = (self.produce)(t) {
                    // A refused push is counted as a drop on this channel
                    // like any other.
                    let _ = sink.push(Envelope {
                        channel,
                        log_time: t,
                        publish_time: t,
                        payload,
                    });
                }
                next += self.period;
                if next < now {
                    // Fell behind (suspended, overloaded): skip, do not burst.
                    next = now + self.period;
                }
            }
            sink.alive();
            std::thread::sleep(
                next.saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(50)),
            );
        }
        Ok(())
    }
}
