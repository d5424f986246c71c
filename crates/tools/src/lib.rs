//! The bag tools that need no Linux: what `edgerec info`, `check`, `cat`,
//! `export csv`, `convert`, `filter` and `reindex` do with ROS 1 bags, MCAP files and
//! rosbag2 bag directories. Pure Rust over `edgerec-format` and
//! `edgerec-rosbag1`, with no io_uring, sysfs or GStreamer, so it builds
//! for any target; the `edgerec` binary and the any-OS `edgerec-tools`
//! binary wire these commands ([`cli`]).
//!
//! [`open`] tells the kinds apart by their first bytes, [`walk`] visits
//! messages of any kind with a decoder per connection or channel, and each
//! command is one module.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod cat;
pub mod check;
pub mod cli;
pub mod convert;
pub mod csv;
pub mod error;
pub mod filter;
pub mod info;
pub mod open;
pub mod reindex;
pub mod ros2map;
pub mod select;
pub mod walk;

pub use error::{Result, ToolError};
pub use open::{kind, open, Input, Kind};
