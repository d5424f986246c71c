//! Integration tests of edgerec-rosbag1 against bags written and read by
//! Debian's rosbag (tests/py/make_ros1_bags.py). Without Debian's
//! python3-rosbag each test skips, saying why (a failure under scripts/test).

mod mutation;
mod read;
mod refuse;
mod reindex;
mod support;
