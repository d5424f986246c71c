//! The bag tools that need no Linux: what `edgerec info`, `check`, `cat`,
//! `export csv`, `convert` and `reindex` do with ROS 1 bags, MCAP files and
//! rosbag2 bag directories. Pure Rust over `edgerec-format` and
//! `edgerec-rosbag1`, with no io_uring, sysfs or GStreamer, so it builds
//! for any target; the `edgerec` binary wires these commands.
#![deny(missing_docs)]
#![forbid(unsafe_code)]
