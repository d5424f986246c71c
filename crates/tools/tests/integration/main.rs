//! Integration tests of the `edgerec-tools` commands against files nobody
//! here wrote: ROS 1 bags written by Debian's rosbag
//! (tests/py/make_ros1_bags.py), checked against what Debian's rosbag reads
//! (tests/py/ros1_oracle.py) and `rosbag info`; conversions read back by
//! Foxglove's `mcap` with `mcap-ros1-support` and `mcap-ros2-support` and
//! by `rosbags` (tests/py/read_converted.py); MCAP files from the
//! reference writers (tests/py/write_reference_mcaps.py). Without Debian's
//! rosbag or the venv each test skips, saying why (a failure under
//! scripts/test).

mod support;

mod cat;
mod check;
mod convert;
mod csv;
mod filter;
mod filter_ros1;
mod info;
mod reference;
mod reindex;
