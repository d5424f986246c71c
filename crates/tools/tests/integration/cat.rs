//! `cat` prints every message Debian's rosbag reads, field by field.

use crate::support::*;

#[test]
fn cat_json_equals_what_rosbag_reads_field_by_field() {
    let Some(dir) = generated() else { return };
    for c in COMPRESSIONS {
        let bag = dir.join(format!("{c}.bag"));
        let theirs = rosbag_decodes(&bag, false);
        let ours = cat_json(&bag);
        assert_eq!(ours.len(), theirs.len(), "{c}: message count");
        assert!(
            ours.len() > 900,
            "{c}: the generated bag holds {} messages",
            ours.len()
        );
        assert_same(&ours, &theirs, &format!("cat --json {c}.bag"));
    }
}

#[test]
fn cat_selects_topics_times_and_a_limit() {
    let Some(dir) = generated() else { return };
    let bag = dir.join("lz4.bag");
    let all = rosbag_decodes(&bag, false);
    let imu: Vec<_> = all.iter().filter(|m| m.topic == "/imu").collect();
    let (t0, t1) = (imu[10].log_time, imu[20].log_time);
    let secs = |t: u64| format!("{}.{:09}", t / 1_000_000_000, t % 1_000_000_000);
    let out = tools([
        "cat",
        bag.to_str().unwrap(),
        "--json",
        "--topic",
        "/imu",
        "--start",
        &secs(t0),
        "--end",
        &secs(t1),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 11, "imu messages 10..=20");
    assert_eq!(lines[0]["log_time"].as_u64(), Some(t0));
    assert_eq!(lines[10]["log_time"].as_u64(), Some(t1));
    assert_eq!(lines[3]["message"], imu[13].message);

    // Relative to the first message, and a limit.
    let first = all.iter().map(|m| m.log_time).min().unwrap();
    let out = tools([
        "cat",
        bag.to_str().unwrap(),
        "--topic",
        "/chatter",
        "--topic",
        "/tf",
        "--start",
        &format!("+{}", secs(t0 - first)),
        "-n",
        "5",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 5, "{text}");
    for l in text.lines() {
        let mut parts = l.splitn(4, ' ');
        let (t, topic) = (parts.next().unwrap(), parts.next().unwrap());
        assert!(topic == "/chatter" || topic == "/tf", "{l}");
        let (s, ns) = t.split_once('.').unwrap();
        let ns: u64 = s.parse::<u64>().unwrap() * 1_000_000_000 + ns.parse::<u64>().unwrap();
        assert!(ns >= t0, "{l}");
    }
}

#[test]
fn cat_refuses_what_it_cannot_do_naming_the_fix() {
    let Some(dir) = generated() else { return };
    let bag = dir.join("none.bag");
    let out = tools(["cat", bag.to_str().unwrap(), "--topic", "/nope"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(
        e.contains("no topic \"/nope\"") && e.contains("/imu"),
        "{e}"
    );

    let out = tools(["cat", bag.to_str().unwrap(), "--start", "yesterday"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("seconds since the epoch"),
        "{}",
        stderr(&out)
    );

    let out = tools(["cat", dir.join("encrypted.bag").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("encrypted"), "{}", stderr(&out));

    let junk = scratch("cat-junk").join("notes.txt");
    std::fs::write(&junk, "hello").unwrap();
    let out = tools(["cat", junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("neither a ROS 1 bag"),
        "{}",
        stderr(&out)
    );
}
