//! A trigger rule on a ROS 2 topic: a Python `cyclonedds` peer (as
//! rmw_cyclonedds publishes) sends `sensor_msgs/msg/BatteryState` on
//! `/battery` at 20 Hz, the voltage dipping from 12.6 V to 11.8 V for 2 s
//! (`ros2peer.py publish --voltage`), in a network namespace of its own
//! with `edgerec record` in `triggered` mode and a `voltage < 12.1` rule.
//! One clip: the message that fired is the peer's first at 11.8 V, the
//! one that ended it its first at 12.6 V again; the clip holds every
//! /battery message from the trigger minus `pre` to the end plus `post`,
//! byte for byte as published, and the event's values say 11.8 V.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use edgerec_testkit::netns::{self, Netns};

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

/// The `seq:<n>` of the header's frame_id and the voltage of a
/// BatteryState as ros2peer.py writes it (XCDR1, little endian; alignment
/// counted from the end of the 4-byte encapsulation header).
fn battery(payload: &[u8]) -> Option<(u64, f32)> {
    let body = payload.get(4..)?;
    let u32_at = |at: usize| Some(u32::from_le_bytes(body.get(at..at + 4)?.try_into().ok()?));
    let len = u32_at(8)? as usize;
    let frame = body.get(12..12 + len)?;
    let frame = std::str::from_utf8(frame.strip_suffix(&[0])?).ok()?;
    let seq = frame.strip_prefix("seq:")?.parse().ok()?;
    let at = (12 + len).div_ceil(4) * 4;
    Some((seq, f32::from_bits(u32_at(at)?)))
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

/// Waits for a finished clip (its `metadata.yaml`) under `events`.
fn wait_for_clip(events: &Path, limit: Duration) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        let done = std::fs::read_dir(events)
            .map(|d| d.flatten().any(|e| e.path().join("metadata.yaml").exists()))
            .unwrap_or(false);
        if done {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn a_voltage_dip_on_a_ros_topic_makes_a_clip_of_its_messages() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    if let Some(why) = netns::skip_reason() {
        why.report();
        return;
    }
    let _dds = netns::dds_serial();
    let ns = Netns::new();
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("data");
    let cfg = tmp.path().join("edgerec.toml");
    std::fs::write(
        &cfg,
        format!(
            "[recording]\nroot = \"{r}\"\nmode = \"triggered\"\n\n\
             [health]\nwatchdog = \"\"\nfault_file = \"\"\nstatus_socket = \"\"\n\n\
             [triggers]\npre = \"1s\"\npost = \"1s\"\n\n\
             [[trigger]]\nname = \"low_battery\"\ntopic = \"/battery\"\nwhen = \"voltage < 12.1\"\n",
            r = root.display()
        ),
    )
    .unwrap();
    let bag = tmp.path().join("bag");
    let edgerec = ns
        .command(BIN)
        .args(["record", "/battery", "--config"])
        .arg(&cfg)
        .arg("-o")
        .arg(&bag)
        .args(["--quiet", "-p", "50"])
        .env("EDGEREC_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // 6 s at 20 Hz: 1.5 s at 12.6 V (more than `pre`), 2 s at 11.8 V,
    // 2.5 s at 12.6 V (more than `post`).
    let record = tmp.path().join("battery.jsonl");
    let publisher = ns
        .command(netns::python())
        .arg(netns::ros2peer())
        .args([
            "publish",
            "--topic",
            "/battery",
            "--type",
            "sensor_msgs/msg/BatteryState",
            "--voltage",
            "12.6, 11.8@1.5s, 12.6@3.5s",
            "--rate",
            "20",
            "--count",
            "120",
            "--depth",
            "0",
            "--wait-readers",
            "1",
            "--wait-timeout",
            "20",
            "--start-delay",
            "0.3",
        ])
        .arg("--record")
        .arg(&record)
        .output()
        .unwrap();
    assert!(
        publisher.status.success(),
        "publisher: {}{}",
        String::from_utf8_lossy(&publisher.stdout),
        String::from_utf8_lossy(&publisher.stderr)
    );
    println!(
        "publisher: {}",
        String::from_utf8_lossy(&publisher.stdout).trim()
    );
    // `edgerec record -o DIR` records under DIR's parent (the recording
    // root it sets, whatever the configuration says): clips go beside the
    // bag.
    let events = tmp.path().join("events");
    let finished = wait_for_clip(&events, Duration::from_secs(20));
    // SAFETY: kill(2) on our child's pid (`ip netns exec` execs edgerec).
    unsafe { libc::kill(edgerec.id() as i32, libc::SIGINT) };
    let out = edgerec.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "edgerec record: {}\n{stderr}",
        out.status
    );
    assert!(
        finished,
        "no clip finished under {}\n{stderr}",
        events.display()
    );

    // What the peer published: seq -> (bytes, voltage).
    let sent: Vec<(Vec<u8>, f32)> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let bytes = unhex(v["cdr_hex"].as_str().unwrap());
            let (seq, volts) = battery(&bytes).unwrap();
            assert_eq!(seq, v["seq"].as_u64().unwrap());
            (bytes, volts)
        })
        .collect();
    let first_low = sent.iter().position(|s| s.1 < 12.1).unwrap() as u64;
    let first_high = first_low
        + sent[first_low as usize..]
            .iter()
            .position(|s| s.1 >= 12.1)
            .unwrap() as u64;

    let clips: Vec<_> = std::fs::read_dir(&events).unwrap().flatten().collect();
    assert_eq!(clips.len(), 1, "{clips:?}");
    let dir = clips[0].path();
    let check = Command::new(BIN).arg("check").arg(&dir).output().unwrap();
    assert!(
        check.status.success(),
        "edgerec check: {}",
        String::from_utf8_lossy(&check.stdout)
    );
    let mcap = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "mcap"))
        .unwrap();
    let rb = edgerec_testkit::mcap_readback(&mcap).unwrap();
    let ev = &rb.metadata["edgerec.event"];
    println!(
        "edgerec.event {ev:?}\nedgerec.clip {:?}",
        rb.metadata["edgerec.clip"]
    );
    assert_eq!(ev["rule"], "low_battery");
    assert!(
        ev["values"] == "voltage=11.8" || ev["values"] == "voltage=11.800000190734863",
        "{ev:?}"
    );
    let num = |k: &str| ev[k].parse::<u64>().unwrap();
    let (at, end) = (num("trigger_time_ns"), num("end_ns"));
    let (start, stop) = (at - num("pre_ns"), end + num("post_ns"));

    let msgs: Vec<_> = rb
        .messages
        .iter()
        .filter(|m| m.topic == "/battery")
        .collect();
    assert_eq!(rb.topics.len(), 1, "{:?}", rb.topics);
    assert!(!msgs.is_empty());
    let seqs: Vec<u64> = msgs.iter().map(|m| battery(&m.data).unwrap().0).collect();
    for (m, &seq) in msgs.iter().zip(&seqs) {
        assert_eq!(
            m.data, sent[seq as usize].0,
            "seq {seq} differs from what was published"
        );
        assert!(
            (start..=stop).contains(&m.log_time),
            "seq {seq} outside the window"
        );
    }
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "not every message of the window: {seqs:?}"
    );
    let seq_at = |t: u64| {
        msgs.iter()
            .zip(&seqs)
            .find(|(m, _)| m.log_time == t)
            .map(|(_, &s)| s)
    };
    assert_eq!(seq_at(at), Some(first_low), "the message that fired");
    assert_eq!(seq_at(end), Some(first_high), "the message that ended it");
    // The first and the last within a period of the window's edges, or
    // the longest gap the clip shows when delivery was late by more (a
    // loaded machine): a message before (after) would have been in it.
    let longest = msgs
        .windows(2)
        .map(|w| w[1].log_time - w[0].log_time)
        .max()
        .unwrap();
    let slack = longest.max(50_000_000) + 1_000_000;
    let (first, last) = (msgs[0].log_time, msgs[msgs.len() - 1].log_time);
    assert!(
        first - start <= slack && stop - last <= slack,
        "/battery from {} ms after the start to {} ms before the end (slack {} ms)",
        (first - start) / 1_000_000,
        (stop - last) / 1_000_000,
        slack / 1_000_000
    );
    println!(
        "clip: /battery seq {}..={} ({} messages), fired at seq {first_low}, ended at seq {first_high}",
        seqs[0],
        seqs[seqs.len() - 1],
        seqs.len()
    );
}

/// The ROS 2 service `~/trigger` (`std_srvs/srv/Trigger`, here
/// `/edgerec/trigger`) on a `triggered` recording with no rule: it answers
/// success and makes a `ctl` clip of the topic around the call.
#[test]
fn the_trigger_service_makes_a_clip() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    if let Some(why) = netns::skip_reason() {
        why.report();
        return;
    }
    let _dds = netns::dds_serial();
    let ns = Netns::new();
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("edgerec.toml");
    std::fs::write(
        &cfg,
        "[recording]\nmode = \"triggered\"\n\n\
         [health]\nwatchdog = \"\"\nfault_file = \"\"\nstatus_socket = \"\"\n\n\
         [triggers]\npre = \"1s\"\npost = \"1s\"\n",
    )
    .unwrap();
    let bag = tmp.path().join("bag");
    let edgerec = ns
        .command(BIN)
        .args(["record", "/battery", "--services", "--config"])
        .arg(&cfg)
        .arg("-o")
        .arg(&bag)
        .args(["--quiet", "-p", "50"])
        .env("EDGEREC_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // 5 s of a steady battery at 20 Hz; the call comes 2.5 s in.
    let publisher = ns
        .command(netns::python())
        .arg(netns::ros2peer())
        .args([
            "publish",
            "--topic",
            "/battery",
            "--type",
            "sensor_msgs/msg/BatteryState",
            "--voltage",
            "12.6",
            "--rate",
            "20",
            "--count",
            "100",
            "--depth",
            "0",
            "--wait-readers",
            "1",
            "--wait-timeout",
            "20",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let events = tmp.path().join("events");
    // The recorder's node answers once its services are discovered; the
    // peer waits up to 10 s for them.
    std::thread::sleep(Duration::from_millis(2_500));
    let reply = ns.call_service("/edgerec/trigger", "std_srvs/srv/Trigger");
    let publisher = publisher.wait_with_output().unwrap();
    assert!(
        publisher.status.success(),
        "publisher: {}",
        String::from_utf8_lossy(&publisher.stderr)
    );
    let finished = wait_for_clip(&events, Duration::from_secs(20));
    // SAFETY: kill(2) on our child's pid (`ip netns exec` execs edgerec).
    unsafe { libc::kill(edgerec.id() as i32, libc::SIGINT) };
    let out = edgerec.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "edgerec record: {}\n{stderr}",
        out.status
    );
    let v: serde_json::Value = serde_json::from_str(&reply).unwrap();
    assert!(v.to_string().contains("\"success\":true"), "{reply}");
    assert!(finished, "no clip under {}\n{stderr}", events.display());
    let clips: Vec<_> = std::fs::read_dir(&events).unwrap().flatten().collect();
    assert_eq!(clips.len(), 1, "{clips:?}");
    let dir = clips[0].path();
    let check = Command::new(BIN).arg("check").arg(&dir).output().unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    let mcap = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "mcap"))
        .unwrap();
    let rb = edgerec_testkit::mcap_readback(&mcap).unwrap();
    assert_eq!(rb.metadata["edgerec.event"]["rule"], "ctl");
    let battery: Vec<_> = rb
        .messages
        .iter()
        .filter(|m| m.topic == "/battery")
        .collect();
    // About 2 s of a 20 Hz topic.
    assert!(
        (30..=45).contains(&battery.len()),
        "{} /battery messages in a 2 s clip",
        battery.len()
    );
    println!(
        "service reply {reply}; clip of {} /battery messages",
        battery.len()
    );
}
