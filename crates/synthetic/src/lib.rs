//! Synthetic sensors: real, decodable CDR at a configured rate.
//!
//! Each configured channel (`[[sources.synthetic]]`) is its own
//! [`edgerec_source::Source`] (own thread, own channel queue), like
//! independent sensors. Every message carries its per-channel sequence
//! number so a reader can prove nothing was lost, duplicated or reordered;
//! [`encode`] documents where, and what the rest of each message holds.
//! [`battery`] is a `sensor_msgs/msg/BatteryState` whose voltage follows a
//! configured profile over time (`voltage = "12.6, 11.8@3s, 12.6@6s"`), a
//! signal for event triggers to watch. [`fault`] injects failures on purpose
//! (`fault = "panic-every:2s"`, `"error-every:2s"`, `"stall-for:5s"`,
//! `"malformed-every:10"`), to test the supervisor, to check an
//! installation's restart and health reporting, and to feed readers
//! payloads they must reject.
//!
//! ```
//! use edgerec_config::{Rate, SyntheticChannel, SyntheticKind};
//! use edgerec_synthetic::SyntheticSource;
//! let imu = SyntheticSource::new(SyntheticChannel::new("/imu", SyntheticKind::Imu, Rate::Hz(400.0)));
//! let cdr = imu.encode(7, 1_000_000_000);
//! assert_eq!(&cdr[..4], &[0, 1, 0, 0]);
//! ```
#![deny(missing_docs)]

pub mod battery;
pub mod encode;
pub mod fault;
mod source;

pub use encode::{
    data_len, expected_imu, fill_pattern, image_geometry, string_template, SyntheticSource,
    POINT_FIELDS,
};
