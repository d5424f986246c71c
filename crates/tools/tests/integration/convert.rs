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
