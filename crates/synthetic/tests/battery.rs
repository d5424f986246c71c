//! A synthetic battery channel run as a source: its BatteryState messages,
//! decoded here by offsets (no shared decoder), follow the voltage profile
//! from the stamp of the first message, and `malformed-every` cuts the
//! right messages to their encapsulation header.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgerec_config::{Rate, SourceFault, SyntheticChannel, SyntheticKind, VoltageProfile};
use edgerec_format::cdr::ENCAPSULATION_HEADER;
use edgerec_source::{Intake, MemoryBudget, RecordingClock, Source, Stop};
use edgerec_synthetic::SyntheticSource;

/// A clock that moves 50 ms on every read, so that a few hundred messages
/// cover the whole profile in well under a second of test time.
struct SteppingClock(AtomicU64);

const STEP_NS: u64 = 50_000_000;
const T0_NS: u64 = 1_700_000_000_000_000_000;

impl RecordingClock for SteppingClock {
    fn now_ns(&self) -> u64 {
        self.0.fetch_add(STEP_NS, Ordering::Relaxed)
    }
}

/// A little-endian CDR cursor; alignment counts from byte 4.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(b: &'a [u8]) -> Self {
        assert_eq!(b[..4], ENCAPSULATION_HEADER);
        Cursor { b, at: 4 }
    }
    fn align(&mut self, n: usize) {
        self.at = 4 + (self.at - 4).div_ceil(n) * n;
    }
    fn take<const N: usize>(&mut self) -> [u8; N] {
        self.align(N.min(4));
        let out = self.b[self.at..self.at + N]
            .try_into()
            .expect("N bytes in range");
        self.at += N;
        out
    }
    fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    fn f32(&mut self) -> f32 {
        f32::from_le_bytes(self.take())
    }
    fn string(&mut self) -> String {
        let len = self.u32() as usize;
        let s = &self.b[self.at..self.at + len];
        self.at += len;
        assert_eq!(s.last(), Some(&0), "string ends with NUL");
        String::from_utf8(s[..len - 1].to_vec()).expect("utf-8")
    }
    fn f32_seq(&mut self) -> Vec<f32> {
        let n = self.u32() as usize;
        (0..n).map(|_| self.f32()).collect()
    }
}

/// The fields of `sensor_msgs/msg/BatteryState` the test checks.
#[derive(Debug)]
struct Battery {
    stamp_ns: u64,
    frame_id: String,
    voltage: f32,
    percentage: f32,
    flags: [u8; 4],
    cell_voltage: Vec<f32>,
    cell_temperature: Vec<f32>,
    location: String,
    serial_number: String,
}

fn decode(payload: &[u8]) -> Battery {
    let mut c = Cursor::new(payload);
    let sec = c.u32() as u64;
    let nanosec = c.u32() as u64;
    let frame_id = c.string();
    let voltage = c.f32();
    let [_temperature, _current, _charge, _capacity, _design] = [(); 5].map(|_| c.f32());
    let percentage = c.f32();
    let flags = [c.u8(), c.u8(), c.u8(), c.u8()];
    let cell_voltage = c.f32_seq();
    let cell_temperature = c.f32_seq();
    let location = c.string();
    let serial_number = c.string();
    assert_eq!(c.at, payload.len(), "no bytes after serial_number");
    Battery {
        stamp_ns: sec * 1_000_000_000 + nanosec,
        frame_id,
        voltage,
        percentage,
        flags,
        cell_voltage,
        cell_temperature,
        location,
        serial_number,
    }
}

/// Runs `cfg` as a source until it has made `n` messages; returns their
/// (publish time, payload).
fn run(cfg: SyntheticChannel, n: u64) -> Vec<(u64, Vec<u8>)> {
    let intake = Intake::new(
        4096,
        MemoryBudget::new(64 << 20),
        Arc::new(SteppingClock(AtomicU64::new(T0_NS))),
    );
    let stop = Arc::new(Stop::new());
    let sink = intake.sink();
    let runner = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut source = SyntheticSource::new(cfg);
            source.run(&sink, &stop)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let channel = loop {
        let made = intake.table().all().first().cloned();
        if let Some(ch) = made.filter(|ch| ch.counters.accepted.load(Ordering::Relaxed) >= n) {
            break ch;
        }
        assert!(
            Instant::now() < deadline,
            "the source made too few messages"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    stop.request();
    runner.join().expect("no panic").expect("runs cleanly");
    let mut queued = Vec::new();
    while intake.pop_into(&channel, &mut queued, 1024) > 0 {}
    queued
        .into_iter()
        .map(|q| (q.env.publish_time, q.env.payload))
        .collect()
}

#[test]
fn battery_voltage_follows_the_profile_and_malformed_every_cuts_every_nth() {
    let cfg = SyntheticChannel {
        frame_id: "battery_link".into(),
        voltage: VoltageProfile::parse("12.6, 11.8@3s, 12.6@6s").expect("valid"),
        fault: Some(SourceFault::MalformedEvery(7)),
        ..SyntheticChannel::new("/battery", SyntheticKind::BatteryState, Rate::Hz(2000.0))
    };
    // 200 messages at >= 50 ms of stamp each: past the 6 s step.
    let messages = run(cfg, 200);
    assert!(messages.len() >= 200, "{} messages", messages.len());
    let origin = messages[0].0;
    let mut first_low = None;
    let mut first_back = None;
    for (i, (publish, payload)) in messages.iter().enumerate() {
        if (i + 1) % 7 == 0 {
            assert_eq!(payload[..], ENCAPSULATION_HEADER, "message {} cut", i + 1);
            continue;
        }
        let b = decode(payload);
        assert_eq!(b.stamp_ns, *publish, "header.stamp is the message time");
        assert_eq!(b.serial_number, format!("seq={i:020}"));
        assert_eq!(b.frame_id, "battery_link");
        assert_eq!(b.location, "synthetic");
        assert_eq!(b.flags, [2, 1, 2, 1], "discharging, good, li-ion, present");
        let offset = Duration::from_nanos(b.stamp_ns - origin);
        let want = if offset < Duration::from_secs(3) || offset >= Duration::from_secs(6) {
            12.6
        } else {
            11.8
        };
        assert_eq!(b.voltage, want, "message {i} at {offset:?}");
        assert_eq!(b.cell_voltage, [want / 3.0; 3]);
        assert_eq!(b.cell_temperature, [25.0; 3]);
        assert!((0.0..=1.0).contains(&b.percentage));
        if want == 11.8 && first_low.is_none() {
            first_low = Some(offset);
        }
        if first_low.is_some() && want == 12.6 && first_back.is_none() {
            first_back = Some(offset);
        }
    }
    // The first message read at 11.8 V is exactly the first whole one
    // stamped at or after start + 3 s.
    let predicted = messages
        .iter()
        .enumerate()
        .filter(|(i, _)| (i + 1) % 7 != 0)
        .map(|(_, (publish, _))| Duration::from_nanos(publish - origin))
        .find(|offset| *offset >= Duration::from_secs(3));
    assert_eq!(first_low, predicted);
    let back = first_back.expect("the voltage came back to 12.6 V");
    assert!(back >= Duration::from_secs(6), "{back:?}");
}

#[test]
fn voltage_counts_from_the_first_message_not_from_each_stamp() {
    let cfg = SyntheticChannel {
        voltage: VoltageProfile::parse("12.6, 11.8@3s").expect("valid"),
        ..SyntheticChannel::new("/battery", SyntheticKind::BatteryState, Rate::Hz(10.0))
    };
    let mut source = SyntheticSource::new(cfg);
    assert_eq!(source.start_at(T0_NS), T0_NS);
    assert_eq!(source.start_at(T0_NS + 1), T0_NS, "set once");
    let s = 1_000_000_000;
    assert_eq!(decode(&source.encode(0, T0_NS)).voltage, 12.6);
    assert_eq!(decode(&source.encode(1, T0_NS + 3 * s - 1)).voltage, 12.6);
    assert_eq!(decode(&source.encode(2, T0_NS + 3 * s)).voltage, 11.8);
    assert_eq!(decode(&source.encode(3, T0_NS + 100 * s)).voltage, 11.8);
}
