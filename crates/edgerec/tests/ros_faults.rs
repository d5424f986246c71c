//! A ROS 2 set-up that cannot work is a start-up error with exit 78 and a
//! message naming the cause, before any bag is created: a domain outside
//! 0..232, and a DDS that cannot start (here `CYCLONEDDS_URI` naming a
//! network interface that does not exist). Run in a network namespace of
//! its own, like every DDS test.

use edgerec_testkit::netns::{self, Netns};

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

#[test]
fn a_ros_setup_that_cannot_work_is_a_startup_error() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    if let Some(why) = netns::skip_reason() {
        why.report();
        return;
    }
    let ns = Netns::new();
    let tmp = tempfile::tempdir().unwrap();
    let cases = [
        ("ROS_DOMAIN_ID", "999", "ROS_DOMAIN_ID"),
        (
            "CYCLONEDDS_URI",
            "<CycloneDDS><Domain Id=\"any\"><General><Interfaces><NetworkInterface name=\"edgerec-nonexistent0\"/></Interfaces></General></Domain></CycloneDDS>",
            "cannot start",
        ),
    ];
    for (i, (var, value, want)) in cases.iter().enumerate() {
        let bag = tmp.path().join(format!("bag{i}"));
        let out = ns
            .command(BIN)
            .args(["record", "-a", "--quiet", "-o"])
            .arg(&bag)
            .env(var, value)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{var}={value}: {err}");
        assert!(err.contains(want), "{var}: {err}");
        assert!(!bag.exists(), "{var}: nothing is created");
    }
}
