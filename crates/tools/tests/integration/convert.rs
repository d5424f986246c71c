//! `convert` output read by readers nobody here wrote: Foxglove's `mcap`
//! with `mcap-ros1-support` (ros1 profile), `rosbags` and
//! `mcap-ros2-support` (`--to ros2`), each equal, field by field, to what
//! Debian's rosbag reads from the source bag.

use crate::support::*;

#[test]
fn ros1_mcap_reads_back_in_mcap_ros1_support_as_rosbag_reads_the_bag() {
    let (Some(dir), Some(py)) = (generated(), venv()) else {
        return;
    };
    let work = scratch("convert-ros1");
    for c in COMPRESSIONS {
        let bag = dir.join(format!("{c}.bag"));
        let out = work.join(format!("{c}.mcap"));
        let r = tools(["convert", bag.to_str().unwrap(), out.to_str().unwrap()]);
        assert!(r.status.success(), "{}", stderr(&r));
        let chk = tools(["check", out.to_str().unwrap()]);
        assert!(chk.status.success(), "{}", stdout(&chk));
        let theirs = rosbag_decodes(&bag, false);
        assert_same(
            &reader_decodes(&py, "mcap-ros1", &out),
            &theirs,
            &format!("mcap-ros1 of {c}"),
        );
        // And edgerec reads its own conversion as it reads the bag.
        assert_same(
            &cat_json(&out),
            &theirs,
            &format!("cat of the ros1 MCAP of {c}"),
        );
    }
}

#[test]
fn ros2_bag_reads_back_in_rosbags_and_mcap_ros2_support_as_rosbag_reads_the_bag() {
    let (Some(dir), Some(py)) = (generated(), venv()) else {
        return;
    };
    let work = scratch("convert-ros2");
    for c in COMPRESSIONS {
        let bag = dir.join(format!("{c}.bag"));
        let out = work.join(format!("{c}_ros2"));
        let r = tools([
            "convert",
            "--to",
            "ros2",
            bag.to_str().unwrap(),
            out.to_str().unwrap(),
        ]);
        assert!(r.status.success(), "{}", stderr(&r));
        let said = stdout(&r);
        assert!(said.contains("917 messages"), "{said}");
        assert!(out.join("metadata.yaml").is_file());
        let theirs = rosbag_decodes(&bag, true);
        assert_eq!(theirs.len(), 917);
        assert_same(
            &reader_decodes(&py, "rosbags", &out),
            &theirs,
            &format!("rosbags of {c}"),
        );
        assert_same(
            &reader_decodes(&py, "mcap-ros2", &out),
            &theirs,
            &format!("mcap-ros2 of {c}"),
        );
        // The latched /tf_static is offered transient-local, the others not.
        let meta = std::fs::read_to_string(out.join("metadata.yaml")).unwrap();
        assert!(meta.contains("tf2_msgs/msg/TFMessage"), "{meta}");
        let info = tools(["info", out.to_str().unwrap()]);
        assert!(info.status.success(), "{}", stderr(&info));
    }
}

#[test]
fn convert_refuses_an_existing_output_and_leaves_it() {
    let Some(dir) = generated() else { return };
    let work = scratch("convert-exists");
    let bag = dir.join("lz4.bag");
    let out = work.join("x.mcap");
    std::fs::write(&out, "precious").unwrap();
    let r = tools(["convert", bag.to_str().unwrap(), out.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(1));
    assert!(stderr(&r).contains("exists already"), "{}", stderr(&r));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "precious");
    let d = work.join("d");
    std::fs::create_dir(&d).unwrap();
    let r = tools([
        "convert",
        "--to",
        "ros2",
        bag.to_str().unwrap(),
        d.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(1));
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
}

/// diagnostic_msgs/DiagnosticStatus as ROS 1 concatenates it: constants,
/// comments, a nested type.
const DIAGNOSTIC_STATUS: &str =
    "# This message holds the status of an individual component of the robot.\n\
# \n\
\n\
# Possible levels of operations\n\
byte OK=0\n\
byte WARN=1\n\
byte ERROR=2\n\
byte STALE=3\n\
\n\
byte level # level of operation enumerated above \n\
string name # a description of the test/component reporting\n\
string message # a description of the status\n\
string hardware_id # a hardware unique string\n\
KeyValue[] values # an array of values associated with the status\n\
\n\
================================================================================\n\
MSG: diagnostic_msgs/KeyValue\n\
string key # what to label this value when viewing\n\
string value # a value to track over time\n";

#[test]
fn a_type_with_constants_converts_and_reads_back_in_rosbags_and_mcap_ros2_support() {
    use edgerec_rosbag1::{BagWriter, Connection, Time};
    let Some(py) = venv() else { return };
    let work = scratch("convert-constants");
    let bag = work.join("diag.bag");
    let mut w = BagWriter::new(std::io::BufWriter::new(
        std::fs::File::create(&bag).unwrap(),
    ))
    .unwrap();
    w.add_connection(Connection::new(
        0,
        "/diagnostics_status",
        "diagnostic_msgs/DiagnosticStatus",
        "d0ce08bc6e5ba34c7754f563a9cabaf1",
        DIAGNOSTIC_STATUS,
    ))
    .unwrap();
    let s = |out: &mut Vec<u8>, t: &str| {
        out.extend((t.len() as u32).to_le_bytes());
        out.extend(t.as_bytes());
    };
    for i in 0..3u8 {
        let mut m = vec![i];
        s(&mut m, "motor");
        s(&mut m, "hot");
        s(&mut m, "m1");
        m.extend(1u32.to_le_bytes());
        s(&mut m, "t");
        s(&mut m, &format!("{}", 80 + i));
        w.write(
            0,
            Time {
                sec: 1_700_000_000 + u32::from(i),
                nsec: 5,
            },
            &m,
        )
        .unwrap();
    }
    w.finish().unwrap();
    let out = work.join("diag_ros2");
    let r = tools([
        "convert",
        "--to",
        "ros2",
        bag.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", stderr(&r));
    let schema = std::fs::read(out.join("diag_ros2_0.mcap")).unwrap();
    let text = String::from_utf8_lossy(&schema);
    assert!(
        text.contains("int8 WARN=1\nint8 ERROR=2"),
        "the constants are in the schema"
    );
    for kind in ["rosbags", "mcap-ros2"] {
        let got = reader_decodes(&py, kind, &out);
        assert_eq!(got.len(), 3, "{kind}");
        for (i, m) in got.iter().enumerate() {
            assert_eq!(
                m.type_name, "diagnostic_msgs/msg/DiagnosticStatus",
                "{kind}"
            );
            let mut want = serde_json::json!({"level": i, "name": "motor", "message": "hot",
                "hardware_id": "m1", "values": [{"key": "t", "value": format!("{}", 80 + i)}]});
            if kind == "rosbags" {
                // rosbags' message classes carry the constants beside the
                // fields, with the values the schema gave them.
                for (k, v) in [("OK", 0), ("WARN", 1), ("ERROR", 2), ("STALE", 3)] {
                    want[k] = v.into();
                }
            }
            assert_eq!(m.message, want, "{kind} message {i}");
        }
    }
}
