//! `export csv`: a row per message, the values Debian's rosbag reads.

use crate::support::*;

#[test]
fn csv_rows_hold_what_rosbag_reads() {
    let Some(dir) = generated() else { return };
    let bag = dir.join("bz2.bag");
    let theirs: Vec<Decoded> = rosbag_decodes(&bag, false)
        .into_iter()
        .filter(|m| m.topic == "/imu")
        .collect();
    let work = scratch("csv");
    let out = work.join("imu.csv");
    let r = tools([
        "export",
        "csv",
        bag.to_str().unwrap(),
        "--topic",
        "/imu",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", stderr(&r));
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        &header[..4],
        [
            "log_time",
            "header.stamp.secs",
            "header.stamp.nsecs",
            "header.seq"
        ]
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), theirs.len());
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    for (row, m) in rows.iter().zip(&theirs) {
        assert_eq!(row[0].parse::<u64>().unwrap(), m.log_time);
        let z: f64 = row[col("linear_acceleration.z")].parse().unwrap();
        assert_eq!(z, m.message["linear_acceleration"]["z"].as_f64().unwrap());
        let w: f64 = row[col("angular_velocity.z")].parse().unwrap();
        assert_eq!(w, m.message["angular_velocity"]["z"].as_f64().unwrap());
        assert_eq!(
            row[col("header.frame_id")],
            m.message["header"]["frame_id"].as_str().unwrap()
        );
    }

    // --fields picks columns in the order given; a second run refuses to
    // write over the file.
    let out2 = work.join("pick.csv");
    let r = tools([
        "export",
        "csv",
        bag.to_str().unwrap(),
        "--topic",
        "/imu",
        "--fields",
        "linear_acceleration.z, header.stamp",
        "-o",
        out2.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", stderr(&r));
    let text = std::fs::read_to_string(&out2).unwrap();
    assert_eq!(
        text.lines().next().unwrap(),
        "log_time,linear_acceleration.z,header.stamp.secs,header.stamp.nsecs"
    );
    let r = tools([
        "export",
        "csv",
        bag.to_str().unwrap(),
        "--topic",
        "/imu",
        "-o",
        out2.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(1));
    let r = tools([
        "export",
        "csv",
        bag.to_str().unwrap(),
        "--topic",
        "/imu",
        "--fields",
        "a[",
        "-o",
        "-",
    ]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
}
