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
    if let Some(why) = netns::skip_reason() {
        println!("SKIP records_a_python_publisher: {why}");
        return;
    }
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
