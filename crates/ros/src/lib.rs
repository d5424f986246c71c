//! The ROS 2 source: records live topics from the ROS 2 graph.
//!
//! Everything that decides lives here and is shared by both backends:
//! which topics ([`selection`]), what QoS to ask for ([`qos`],
//! [`overrides`]), how ROS names map onto DDS ([`names`]), how a topic
//! becomes a channel with its schema and offered QoS ([`channels`]), and
//! how publishers come and go ([`graph`]). The `dds` backend (default
//! feature) talks to the graph through Cyclone DDS with no ROS install:
//! it records raw CDR without type support, the way zenoh-plugin-ros2dds
//! does. The `r2r` backend (feature `r2r`) goes through rcl on an
//! installed ROS 2, so it records over any RMW (Fast DDS shared memory,
//! Zenoh), polling the graph ([`polled`]) and replacing a subscription
//! without gaps or copies ([`overlap`]).
#![deny(missing_docs)]

pub mod audit;
pub mod cdr_reader;
pub mod channels;
pub mod control;
#[cfg(feature = "dds")]
pub mod dds;
pub mod diagnostics;
pub mod discovery_info;
pub mod graph;
pub mod health;
pub mod image;
pub mod names;
pub mod options;
pub mod overlap;
pub mod overrides;
pub mod polled;
pub mod qos;
#[cfg(feature = "r2r")]
pub mod r2r;
pub mod rate_limit;
pub mod selection;
pub mod services;
pub mod setup;
pub mod stats;

pub use options::RosOptions;
pub use selection::{SelectionOptions, TopicSelection};

/// What went wrong in the ROS source; each says where and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum RosError {
    /// A selection option is wrong.
    #[error("ros.{what}: {reason}")]
    Selection {
        /// The option.
        what: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The QoS override file is wrong.
    #[error("{path}:{line}: {reason}")]
    Overrides {
        /// The file.
        path: String,
        /// The line (0 when the file could not be read).
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The middleware refused a call.
    #[error("{call}: {reason}")]
    Middleware {
        /// The call (`dds_create_participant on domain 7`).
        call: String,
        /// What it returned, and the likely fix.
        reason: String,
    },
}
