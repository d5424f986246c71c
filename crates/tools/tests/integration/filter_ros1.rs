//! `filter` of ROS 1 bags written by Debian's rosbag: the same expression
//! gives the same messages as Debian's `rosbag filter` (read back by
//! rosbag's `read_messages`), the output passes `rosbag info` and `rosbag
//! check`; a bag filtered into MCAP reads back in `mcap-ros1-support`, and
//! that MCAP file filtered back into a bag reads in rosbag.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::support::*;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn filter(args: &[&str]) -> std::process::Output {
    tools(std::iter::once("filter").chain(args.iter().copied()))
}

/// Debian's `rosbag filter IN OUT EXPR`.
fn rosbag_filter(bag: &Path, out: &Path, expr: &str) {
    let r = Command::new(ROSBAG)
        .args(["filter", s(bag), s(out), expr])
        .output()
        .unwrap();
    assert!(
        r.status.success(),
        "rosbag filter {expr}: {}",
        String::from_utf8_lossy(&r.stderr)
    );
}

/// `rosbag info` and `rosbag check` of a bag, both passing.
fn rosbag_accepts(bag: &Path) {
    for cmd in ["info", "check"] {
        let r = Command::new(ROSBAG).args([cmd, s(bag)]).output().unwrap();
        assert!(
            r.status.success(),
            "rosbag {cmd} {}: {}{}",
            bag.display(),
            String::from_utf8_lossy(&r.stdout),
            String::from_utf8_lossy(&r.stderr)
        );
    }
}

/// A ROS 1 decoded message's `header.stamp` in seconds, as rospy's
/// `to_sec()`.
fn stamp_secs(m: &Decoded) -> Option<f64> {
    let st = m.message.get("header")?.get("stamp")?;
    Some(st["secs"].as_f64()? + st["nsecs"].as_f64()? / 1e9)
}

#[test]
fn the_seeds_expression_keeps_what_rosbag_filter_keeps() {
    let Some(dir) = generated() else { return };
    let work = scratch("filter-ros1");
    for c in COMPRESSIONS {
        let bag = dir.join(format!("{c}.bag"));
        let all = rosbag_decodes(&bag, false);
        let mut stamps: Vec<f64> = all
            .iter()
            .filter(|m| m.topic == "/camera/image")
            .filter_map(stamp_secs)
            .collect();
        stamps.sort_by(f64::total_cmp);
        let threshold = stamps[stamps.len() / 2];
        let t_cut = all[all.len() / 2].log_time as f64 / 1e9;
        // The seed's form, on this bag's image topic, on every bag; the
        // other forms on one (rosbag filter takes a second or two each).
        let mut exprs = vec![format!(
            "topic == '/camera/image' and m.header.stamp.to_sec() > {threshold}"
        )];
        if c == "lz4" {
            exprs.push(format!("topic in ('/imu', '/tf') and t.to_sec() < {t_cut}"));
            exprs.push(format!(
                "not (topic == '/chatter') and (t.to_sec() >= {t_cut} or topic == '/tf_static')"
            ));
        }
        for (i, expr) in exprs.iter().enumerate() {
            let theirs = work.join(format!("{c}-{i}-rosbag.bag"));
            rosbag_filter(&bag, &theirs, expr);
            let ours = work.join(format!("{c}-{i}-edgerec.bag"));
            let r = filter(&[s(&bag), s(&ours), expr]);
            assert!(r.status.success(), "{expr}: {}", stderr(&r));
            rosbag_accepts(&ours);
            let want = rosbag_decodes(&theirs, false);
            assert!(!want.is_empty(), "{expr} keeps something");
            assert_same(
                &rosbag_decodes(&ours, false),
                &want,
                &format!("{c}: {expr}"),
            );
        }
    }
}

#[test]
fn a_bag_into_mcap_and_back_reads_as_rosbag_reads_the_selection() {
    let (Some(dir), Some(py)) = (generated(), venv()) else {
        return;
    };
    let work = scratch("filter-ros1-mcap");
    let bag = dir.join("bz2.bag");
    let all = rosbag_decodes(&bag, false);
    let t0 = all.iter().map(|m| m.log_time).min().unwrap();
    let kept: BTreeSet<&str> = ["/imu", "/tf_static", "/camera/image"].into();
    let start = t0 + 200_000_000;
    let want: Vec<Decoded> = all
        .iter()
        .filter(|m| kept.contains(m.topic.as_str()) && m.log_time >= start)
        .cloned()
        .collect();
    let mcap = work.join("cut.mcap");
    let r = filter(&[
        s(&bag),
        s(&mcap),
        "--topics",
        "/imu",
        "/tf_static",
        "/camera/image",
        "--start",
        "+0.2s",
    ]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert_same(
        &reader_decodes(&py, "mcap-ros1", &mcap),
        &want,
        "mcap-ros1 of the cut",
    );
    // And that MCAP file (ros1 profile) back into a ROS 1 bag, with an
    // expression on a field.
    let back = work.join("back.bag");
    let r = filter(&[
        s(&mcap),
        s(&back),
        "topic != '/imu' or m.linear_acceleration.z > 0",
    ]);
    assert!(r.status.success(), "{}", stderr(&r));
    rosbag_accepts(&back);
    let want_back: Vec<Decoded> = want
        .iter()
        .filter(|m| {
            m.topic != "/imu"
                || m.message["linear_acceleration"]["z"]
                    .as_f64()
                    .is_some_and(|z| z > 0.0)
        })
        .cloned()
        .collect();
    assert_same(
        &rosbag_decodes(&back, false),
        &want_back,
        "the bag from the MCAP file",
    );

    // A ROS 1 bag does not become a bag directory (that holds CDR).
    let r = filter(&[s(&bag), s(&work.join("dir"))]);
    assert_eq!(r.status.code(), Some(2));
    assert!(
        stderr(&r).contains("edgerec convert --to ros2"),
        "{}",
        stderr(&r)
    );
}
