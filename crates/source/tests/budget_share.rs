//! How the memory budget is shared between channels, at the sink: a
//! channel that fills the shared area and its own share of the reserve
//! is refused, and every other channel still has its share; releasing
//! gives everything back.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use edgerec_source::{ChannelSpec, Dropped, Envelope, Intake, MemoryBudget, SystemClock};

fn spec(topic: &str) -> ChannelSpec {
    ChannelSpec {
        topic: topic.into(),
        type_name: "edgerec_test/msg/Blob".into(),
        message_encoding: "cdr".into(),
        schema_encoding: "ros2msg".into(),
        schema: b"uint8[] data\n".to_vec(),
        metadata: BTreeMap::new(),
        latched: false,
    }
}

fn env(ch: edgerec_source::ChannelId, len: usize) -> Envelope {
    Envelope {
        channel: ch,
        log_time: 1,
        publish_time: 1,
        payload: vec![0; len],
    }
}

#[test]
fn a_flooding_channel_cannot_take_another_channels_share() {
    const MIB: usize = 1 << 20;
    // 16 MiB, of which 8 MiB is the reserve: 4 MiB each for two channels.
    let intake = Intake::new(
        1 << 20,
        MemoryBudget::with_reserve(16 << 20, 8 << 20),
        Arc::new(SystemClock),
    );
    let sink = intake.sink();
    let flood = sink.register(spec("/flood")).unwrap();
    let quiet = sink.register(spec("/quiet")).unwrap();
    let mut accepted = 0;
    loop {
        match sink.push(env(flood, MIB)) {
            Ok(()) => accepted += 1,
            Err(Dropped::Budget) => break,
            Err(e) => panic!("{e:?}"),
        }
    }
    // 8 MiB shared plus its 4 MiB share, less the envelope overheads.
    assert!((10..=12).contains(&accepted), "{accepted}");
    assert!(intake.budget().used() <= 12 << 20);
    // The quiet channel still gets its whole share.
    let mut quiet_ok = 0;
    for _ in 0..(3 * MIB / 4096) {
        sink.push(env(quiet, 4096 - 64)).unwrap();
        quiet_ok += 1;
    }
    assert!(quiet_ok > 700);
    assert!(intake.budget().used() <= intake.budget().limit());
    let table = intake.table();
    let f = table.get(flood).unwrap();
    assert_eq!(f.counters.dropped.load(Ordering::Relaxed), 1);
    assert_eq!(
        table
            .get(quiet)
            .unwrap()
            .counters
            .dropped
            .load(Ordering::Relaxed),
        0
    );
    // Drain everything the way the chunker does: the budget comes back to 0.
    for ch in table.all() {
        let mut out = Vec::new();
        while intake.pop_into(&ch, &mut out, 256) > 0 {}
        for q in out {
            intake.release(&ch, q.charge);
        }
    }
    assert_eq!(intake.budget().used(), 0);
    assert!(sink.push(env(flood, MIB)).is_ok(), "room again");
}

#[test]
fn unknown_channels_and_closed_or_paused_intakes_are_counted() {
    let intake = Intake::new(4, MemoryBudget::new(1 << 20), Arc::new(SystemClock));
    let sink = intake.sink();
    let ch = sink.register(spec("/a")).unwrap();
    assert_eq!(
        sink.push(env(edgerec_source::ChannelId(9), 1)),
        Err(Dropped::UnknownChannel)
    );
    assert_eq!(intake.table().unknown_channel_pushes(), 1);
    for _ in 0..4 {
        sink.push(env(ch, 1)).unwrap();
    }
    assert_eq!(sink.push(env(ch, 1)), Err(Dropped::QueueFull));
    intake.set_paused(true);
    assert_eq!(sink.push(env(ch, 1)), Err(Dropped::Paused));
    intake.set_paused(false);
    intake.close();
    assert_eq!(sink.push(env(ch, 1)), Err(Dropped::Closed));
    let dropped = intake
        .table()
        .get(ch)
        .unwrap()
        .counters
        .dropped
        .load(Ordering::Relaxed);
    assert_eq!(dropped, 3, "queue full, paused, closed");
}
