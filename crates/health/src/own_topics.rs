//! The recorder's own topics: what it knew about itself while recording,
//! stored beside the data so that a bag explains its own gaps. Each is an
//! ordinary source ([`PeriodicTopic`]): it goes through the same queues,
//! chunks and segments as sensor data and is counted the same way.
//!
//! - `/edgerec/status` (`std_msgs/msg/String`): the status snapshot as
//!   JSON, once a second;
//! - `/edgerec/clock` (`edgerec_msgs/msg/ClockQuality`): the clock's state,
//!   offset and grandmaster at every poll of the clock monitor, to plot.

use std::collections::BTreeMap;
use std::time::Duration;

use edgerec_clock::{ClockHandle, ClockState, ClockStatus};
use edgerec_format::bag::qos_profile_yaml;
use edgerec_format::cdr::{msg, ClockQualitySpec, Time};
use edgerec_format::msgdefs;
use edgerec_source::{ChannelSpec, PeriodicTopic, Produce};

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
