use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgerec_ros::channels::EmbeddedDefinitions;
use edgerec_ros::dds::DdsSource;
use edgerec_ros::{RosOptions, SelectionOptions};
use edgerec_source::*;
use edgerec_testkit::netns::{self, Netns};

#[test]
fn records_a_python_publisher() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    if let Some(why) = netns::skip_reason() {
        why.report();
        return;
    }
    let _serial = netns::dds_serial();
    let ns = Netns::new();
    ns.enter();
    let intake = Intake::new(1024, MemoryBudget::new(64 << 20), Arc::new(SystemClock));
    let opts = RosOptions {
        selection: SelectionOptions {
            all: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let src = DdsSource::new(opts, Arc::new(EmbeddedDefinitions)).unwrap();
    let sup = Supervisor::start(
        &intake,
        vec![Box::new(src)],
        SupervisorOptions::default(),
        Box::new(|| {}),
    )
    .unwrap();
    let script = r#"
import time
from dataclasses import dataclass
from cyclonedds.domain import DomainParticipant
from cyclonedds.topic import Topic
from cyclonedds.pub import DataWriter
from cyclonedds.core import Qos, Policy
from cyclonedds.idl import IdlStruct
@dataclass
class String_(IdlStruct, typename="std_msgs::msg::dds_::String_"):
    data: str
dp = DomainParticipant(0)
t = Topic(dp, "rt/chatter", String_)
w = DataWriter(dp, t, qos=Qos(Policy.Reliability.Reliable(max_blocking_time=100_000_000), Policy.DataRepresentation(use_cdrv0_representation=True)))
time.sleep(1.5)
for i in range(20):
    w.write(String_(data=f"hello {i}"))
    time.sleep(0.01)
time.sleep(0.5)
"#;
    let st = ns
        .command(netns::python())
        .args(["-c", script])
        .status()
        .unwrap();
    assert!(st.success());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let chans = intake.table().all();
        let got: u64 = chans
            .iter()
            .map(|c| c.counters.accepted.load(Ordering::Relaxed))
            .sum();
        if got >= 20 || Instant::now() > deadline {
            assert_eq!(chans.len(), 1, "{chans:?}");
            assert_eq!(chans[0].spec.topic, "/chatter");
            assert_eq!(chans[0].spec.type_name, "std_msgs/msg/String");
            assert_eq!(got, 20);
            let mut out = Vec::new();
            intake.pop_into(&chans[0], &mut out, 100);
            let first = &out[0].env.payload;
            assert_eq!(&first[..4], &[0, 1, 0, 0]);
            assert!(String::from_utf8_lossy(first).contains("hello 0"));
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(sup.stop(Duration::from_secs(5)).not_stopped.is_empty());
}

#[test]
fn a_topic_published_with_two_types_is_two_channels() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    if let Some(why) = netns::skip_reason() {
        why.report();
        return;
    }
    let _serial = netns::dds_serial();
    let ns = Netns::new();
    ns.enter();
    let intake = Intake::new(1024, MemoryBudget::new(64 << 20), Arc::new(SystemClock));
    let opts = RosOptions {
        selection: SelectionOptions {
            topics: vec!["/dual".into()],
            ..Default::default()
        },
        ..Default::default()
    };
    let src = DdsSource::new(opts, Arc::new(EmbeddedDefinitions)).unwrap();
    let stats = src.stats();
    let sup = Supervisor::start(
        &intake,
        vec![Box::new(src)],
        SupervisorOptions::default(),
        Box::new(|| {}),
    )
    .unwrap();
    let publish = |ty: &str| {
        ns.command(netns::python())
            .arg(netns::ros2peer())
            .args([
                "publish", "--topic", "/dual", "--type", ty, "--count", "20", "--rate", "50",
            ])
            .args([
                "--wait-readers",
                "1",
                "--wait-timeout",
                "20",
                "--depth",
                "0",
                "--linger",
                "0.5",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut a = publish("std_msgs/msg/String");
    let mut b = publish("sensor_msgs/msg/Imu");
    assert!(a.wait().unwrap().success() && b.wait().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(5);
    let counts = loop {
        let mut c: Vec<(String, u64)> = intake
            .table()
            .all()
            .iter()
            .map(|c| {
                (
                    c.spec.type_name.clone(),
                    c.counters.accepted.load(Ordering::Relaxed),
                )
            })
            .collect();
        c.sort();
        if c.iter().map(|x| x.1).sum::<u64>() >= 40 || Instant::now() > deadline {
            break c;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(
        counts,
        [
            ("sensor_msgs/msg/Imu".to_owned(), 20),
            ("std_msgs/msg/String".to_owned(), 20)
        ]
    );
    assert!(
        stats
            .warnings()
            .iter()
            .any(|w| w.contains("separate channels")),
        "{:?}",
        stats.warnings()
    );
    assert!(sup.stop(Duration::from_secs(5)).not_stopped.is_empty());
}

/// Runs `ros2peer.py publish` in `ns` with `args` and waits for it.
fn publish_and_wait(ns: &Netns, args: &[&str]) {
    let st = ns
        .command(netns::python())
        .arg(netns::ros2peer())
        .arg("publish")
        .args(args)
        .args([
            "--wait-readers",
            "1",
            "--wait-timeout",
            "20",
            "--depth",
            "0",
            "--linger",
            "0.3",
        ])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "publish {args:?}");
}

/// Accepted messages per topic, waiting until `total` arrived or 5 s.
fn accepted(intake: &Intake, total: u64) -> Vec<(String, u64)> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut c: Vec<(String, u64)> = intake
            .table()
            .all()
            .iter()
            .map(|c| {
                (
                    c.spec.topic.clone(),
                    c.counters.accepted.load(Ordering::Relaxed),
                )
            })
            .collect();
        c.sort();
        if c.iter().map(|x| x.1).sum::<u64>() >= total || Instant::now() > deadline {
            return c;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_publisher_that_leaves_and_returns_continues_its_channel_and_selection_holds() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    if let Some(why) = netns::skip_reason() {
        why.report();
        return;
    }
    let _serial = netns::dds_serial();
    let ns = Netns::new();
    ns.enter();
    let intake = Intake::new(1024, MemoryBudget::new(64 << 20), Arc::new(SystemClock));
    let opts = RosOptions {
        selection: SelectionOptions {
            regex: Some("/sel/.*".into()),
            exclude: Some("/sel/no.*".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let src = DdsSource::new(opts, Arc::new(EmbeddedDefinitions)).unwrap();
    let sup = Supervisor::start(
        &intake,
        vec![Box::new(src)],
        SupervisorOptions::default(),
        Box::new(|| {}),
    )
    .unwrap();
    let string = [
        "--type",
        "std_msgs/msg/String",
        "--count",
        "10",
        "--rate",
        "50",
    ];
    publish_and_wait(&ns, &[&["--topic", "/sel/yes"][..], &string[..]].concat());
    // Gone (its writer deleted), then back: the same channel goes on.
    std::thread::sleep(Duration::from_millis(500));
    publish_and_wait(&ns, &[&["--topic", "/sel/yes"][..], &string[..]].concat());
    // Excluded, and not matched: never subscribed, so no reader matches
    // them; they publish without waiting.
    for t in ["/sel/no", "/other"] {
        let st = ns
            .command(netns::python())
            .arg(netns::ros2peer())
            .args([
                "publish",
                "--topic",
                t,
                "--type",
                "std_msgs/msg/String",
                "--count",
                "5",
                "--rate",
                "50",
            ])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
    }
    assert_eq!(accepted(&intake, 20), [("/sel/yes".to_owned(), 20)]);
    assert_eq!(
        intake.table().all().len(),
        1,
        "one channel for both runs of the publisher"
    );
    assert!(sup.stop(Duration::from_secs(5)).not_stopped.is_empty());
}
