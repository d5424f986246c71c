//! Reading fields of CDR payloads by path: real message types built with
//! the crate's CDR writer, big-endian payloads, and payloads that are cut
//! short or random.

use std::borrow::Cow;
use std::sync::Arc;

use edgerec_format::cdr::{msg, CdrWriter, DiagnosticStatusSpec, Time};
use edgerec_format::cdr_read::{FieldPath, PathErrorKind, ReadError, Value, ValueKind};
use edgerec_format::msgdefs;
use edgerec_format::msgtype::TypeTable;

fn types(name: &str) -> Arc<TypeTable> {
    let def = msgdefs::lookup(name).expect("embedded");
    Arc::new(TypeTable::parse(def.name, def.text()).expect("parses"))
}

fn path(types: &Arc<TypeTable>, text: &str) -> FieldPath {
    FieldPath::resolve(types, text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn read<'a>(types: &Arc<TypeTable>, text: &str, payload: &'a [u8]) -> Value<'a> {
    path(types, text)
        .read(payload)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn s(v: &str) -> Value<'static> {
    Value::Str(Cow::Owned(v.to_owned()))
}

fn imu(frame_id: &str) -> Vec<u8> {
    let cov = [
        [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
        [1.0; 9],
        [2.0, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7, 2.8],
    ];
    msg::imu(
        Time {
            sec: 1_700_000_000,
            nanosec: 42,
        },
        frame_id,
        [0.1, 0.2, 0.3, 0.9],
        [-1.0, -2.0, -3.0],
        [-4.5, 0.25, 9.81],
        cov,
    )
}

#[test]
fn imu_fields_at_every_frame_id_alignment() {
    let t = types("sensor_msgs/msg/Imu");
    for len in 0..17 {
        let frame = "f".repeat(len);
        let b = imu(&frame);
        assert_eq!(read(&t, "header.frame_id", &b), s(&frame));
        assert_eq!(read(&t, "header.stamp.sec", &b), Value::Int(1_700_000_000));
        assert_eq!(read(&t, "header.stamp.nanosec", &b), Value::UInt(42));
        assert_eq!(read(&t, "orientation.w", &b), Value::Float(0.9));
        assert_eq!(read(&t, "orientation_covariance[4]", &b), Value::Float(0.4));
        assert_eq!(read(&t, "angular_velocity.y", &b), Value::Float(-2.0));
        assert_eq!(read(&t, "linear_acceleration.x", &b), Value::Float(-4.5));
        assert_eq!(read(&t, "linear_acceleration.z", &b), Value::Float(9.81));
        assert_eq!(
            read(&t, "linear_acceleration_covariance[8]", &b),
            Value::Float(2.8)
        );
    }
    let p = path(&t, "linear_acceleration.x");
    assert_eq!(p.kind(), ValueKind::Float);
    assert_eq!(p.as_str(), "linear_acceleration.x");
}

struct Battery<'a> {
    voltage: f32,
    current: f32,
    status: u8,
    present: bool,
    cells: &'a [f32],
    location: &'a str,
    serial: &'a str,
}

fn battery(b: &Battery<'_>) -> Vec<u8> {
    let mut w = CdrWriter::new();
    w.header(Time { sec: 5, nanosec: 6 }, "battery_link")
        .f32(b.voltage)
        .f32(25.0) // temperature
        .f32(b.current)
        .f32(f32::NAN) // charge
        .f32(10.0) // capacity
        .f32(12.0) // design_capacity
        .f32(0.5) // percentage
        .u8(b.status)
        .u8(1) // health
        .u8(2) // technology
        .bool(b.present)
        .sequence_len(b.cells.len());
    for c in b.cells {
        w.f32(*c);
    }
    w.sequence_len(0) // cell_temperature
        .string(b.location)
        .string(b.serial);
    w.finish()
}

const BATTERY: Battery<'static> = Battery {
    voltage: 12.5,
    current: -1.5,
    status: 3,
    present: true,
    cells: &[4.25, 4.0, 4.125],
    location: "slot 1",
    serial: "SN-0042",
};

#[test]
fn battery_state_fields() {
    let t = types("sensor_msgs/msg/BatteryState");
    let b = battery(&BATTERY);
    assert_eq!(read(&t, "voltage", &b), Value::Float(12.5));
    assert_eq!(read(&t, "current", &b), Value::Float(-1.5));
    assert!(matches!(read(&t, "charge", &b), Value::Float(x) if x.is_nan()));
    assert_eq!(read(&t, "power_supply_status", &b), Value::UInt(3));
    assert_eq!(read(&t, "power_supply_technology", &b), Value::UInt(2));
    assert_eq!(read(&t, "present", &b), Value::Bool(true));
    assert_eq!(read(&t, "cell_voltage[0]", &b), Value::Float(4.25));
    assert_eq!(read(&t, "cell_voltage[2]", &b), Value::Float(4.125));
    assert_eq!(read(&t, "location", &b), s("slot 1"));
    assert_eq!(read(&t, "serial_number", &b), s("SN-0042"));
    assert_eq!(
        path(&t, "cell_voltage[3]").read(&b),
        Err(ReadError::NotPresent { index: 3, len: 3 })
    );
    assert_eq!(
        path(&t, "cell_temperature[0]").read(&b),
        Err(ReadError::NotPresent { index: 0, len: 0 })
    );
    assert!(!ReadError::NotPresent { index: 0, len: 0 }.is_malformed());
    // Strings borrow from the payload.
    assert!(matches!(
        read(&t, "location", &b),
        Value::Str(Cow::Borrowed(_))
    ));

    let none = battery(&Battery {
        cells: &[],
        present: false,
        ..BATTERY
    });
    assert_eq!(read(&t, "present", &none), Value::Bool(false));
    assert_eq!(read(&t, "serial_number", &none), s("SN-0042"));
}

fn laser_scan(ranges: &[f32], intensities: &[f32]) -> Vec<u8> {
    let mut w = CdrWriter::new();
    w.header(Time::default(), "laser");
    for v in [-1.5f32, 1.5, 0.01, 0.0, 0.1, 0.05, 30.0] {
        w.f32(v);
    }
    w.sequence_len(ranges.len());
    for r in ranges {
        w.f32(*r);
    }
    w.sequence_len(intensities.len());
    for i in intensities {
        w.f32(*i);
    }
    w.finish()
}

#[test]
fn laser_scan_ranges() {
    let t = types("sensor_msgs/LaserScan");
    let b = laser_scan(&[0.25, 1.0, 2.5], &[7.0, 8.0]);
    assert_eq!(read(&t, "ranges[0]", &b), Value::Float(0.25));
    assert_eq!(read(&t, "ranges[2]", &b), Value::Float(2.5));
    assert_eq!(read(&t, "intensities[1]", &b), Value::Float(8.0));
    assert_eq!(read(&t, "range_max", &b), Value::Float(30.0));
    let empty = laser_scan(&[], &[]);
    assert!(matches!(
        path(&t, "ranges[0]").read(&empty),
        Err(ReadError::NotPresent { index: 0, len: 0 })
    ));
}

fn diagnostics() -> Vec<u8> {
    msg::diagnostic_array(
        Time { sec: 9, nanosec: 0 },
        &[
            DiagnosticStatusSpec {
                level: 0,
                name: "motors",
                message: "ok",
                hardware_id: "m1",
                values: &[],
            },
            DiagnosticStatusSpec {
                level: 2,
                name: "battery",
                message: "low",
                hardware_id: "",
                values: &[("voltage", "11.2"), ("temp", "40")],
            },
        ],
    )
}

#[test]
fn diagnostic_array_nested_sequences() {
    let t = types("diagnostic_msgs/msg/DiagnosticArray");
    let b = diagnostics();
    assert_eq!(read(&t, "status[0].level", &b), Value::UInt(0));
    assert_eq!(read(&t, "status[1].level", &b), Value::UInt(2));
    assert_eq!(read(&t, "status[1].name", &b), s("battery"));
    assert_eq!(read(&t, "status[1].hardware_id", &b), s(""));
    assert_eq!(read(&t, "status[1].values[1].key", &b), s("temp"));
    assert_eq!(read(&t, "status[1].values[0].value", &b), s("11.2"));
    assert_eq!(
        path(&t, "status[0].values[0].key").read(&b),
        Err(ReadError::NotPresent { index: 0, len: 0 })
    );
    assert_eq!(
        path(&t, "status[2].level").read(&b),
        Err(ReadError::NotPresent { index: 2, len: 2 })
    );
}

#[test]
fn std_msgs_string() {
    let t = types("std_msgs/String");
    assert_eq!(
        read(&t, "data", &msg::string("DISENGAGED")),
        s("DISENGAGED")
    );
    assert_eq!(read(&t, "data", &msg::string("")), s(""));
    // Bad UTF-8 is read lossily.
    let mut w = CdrWriter::new();
    w.sequence_len(3);
    let mut b = w.finish();
    b.extend_from_slice(&[b'a', 0xFF, 0]);
    assert_eq!(read(&t, "data", &b), s("a\u{FFFD}"));
}

#[test]
fn an_empty_primitive_sequence_has_no_padding() {
    let t = Arc::new(TypeTable::parse("p/T", "float64[] a\nuint8 b\nfloat64 c\n").unwrap());
    let mut w = CdrWriter::new();
    w.sequence_len(0).u8(7).f64(1.5);
    let b = w.finish();
    // Count, b, padding to 8 from after the header (none after the count), c.
    assert_eq!(b.len(), 4 + 4 + 1 + 3 + 8);
    assert_eq!(read(&t, "b", &b), Value::UInt(7));
    assert_eq!(read(&t, "c", &b), Value::Float(1.5));
}

/// Big-endian CDR, alignment from after the header, as a big-endian host
/// sends it.
#[derive(Default)]
struct BigEndian(Vec<u8>);

impl BigEndian {
    fn align(&mut self, n: usize) -> &mut Self {
        while self.0.len() % n != 0 {
            self.0.push(0);
        }
        self
    }
    fn raw<const N: usize>(&mut self, bytes: [u8; N]) -> &mut Self {
        self.align(N).0.extend_from_slice(&bytes);
        self
    }
    fn string(&mut self, v: &str) -> &mut Self {
        self.raw((v.len() as u32 + 1).to_be_bytes());
        self.0.extend_from_slice(v.as_bytes());
        self.0.push(0);
        self
    }
    fn finish(&self) -> Vec<u8> {
        [&[0u8, 0, 0, 0][..], &self.0].concat()
    }
}

#[test]
fn big_endian_battery_state() {
    let t = types("sensor_msgs/BatteryState");
    let mut w = BigEndian::default();
    w.raw(5i32.to_be_bytes())
        .raw(6u32.to_be_bytes())
        .string("bat");
    for v in [11.75f32, 25.0, 2.5, 1.0, 10.0, 12.0, 0.5] {
        w.raw(v.to_be_bytes());
    }
    w.raw([1u8]).raw([1u8]).raw([2u8]).raw([1u8]);
    w.raw(2u32.to_be_bytes())
        .raw(3.5f32.to_be_bytes())
        .raw(3.25f32.to_be_bytes());
    w.raw(0u32.to_be_bytes()).string("left").string("SN");
    let b = w.finish();
    assert_eq!(read(&t, "header.stamp.sec", &b), Value::Int(5));
    assert_eq!(read(&t, "header.frame_id", &b), s("bat"));
    assert_eq!(read(&t, "voltage", &b), Value::Float(11.75));
    assert_eq!(read(&t, "current", &b), Value::Float(2.5));
    assert_eq!(read(&t, "power_supply_status", &b), Value::UInt(1));
    assert_eq!(read(&t, "cell_voltage[1]", &b), Value::Float(3.25));
    assert_eq!(read(&t, "serial_number", &b), s("SN"));

    let imu_t = types("sensor_msgs/Imu");
    let mut w = BigEndian::default();
    w.raw((-3i32).to_be_bytes())
        .raw(7u32.to_be_bytes())
        .string("i");
    for i in 0..37 {
        w.raw(f64::from(i).to_be_bytes());
    }
    let b = w.finish();
    assert_eq!(read(&imu_t, "header.stamp.sec", &b), Value::Int(-3));
    // orientation 4, covariance 9, angular_velocity 3, covariance 9: x is the 25th.
    assert_eq!(
        read(&imu_t, "linear_acceleration.x", &b),
        Value::Float(25.0)
    );
}

#[test]
fn encapsulations_other_than_plain_cdr_are_refused() {
    let t = types("std_msgs/String");
    let p = path(&t, "data");
    let mut b = msg::string("x");
    b[1] = 0x03; // PL_CDR_LE
    assert_eq!(p.read(&b), Err(ReadError::Encapsulation(0x0003)));
    assert_eq!(p.read(&[0, 1]), Err(ReadError::NoHeader { len: 2 }));
    assert!(p.read(&[0, 1, 0, 0]).unwrap_err().is_malformed());
}

#[test]
fn a_huge_count_is_refused_before_any_loop() {
    let t = types("diagnostic_msgs/DiagnosticArray");
    let mut b = diagnostics();
    // The status count follows the stamp (8) and the empty frame id (5),
    // padded to 16 after the header.
    assert_eq!(&b[20..24], &2u32.to_le_bytes());
    b[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    match path(&t, "status[1].level").read(&b) {
        Err(ReadError::CountTooLarge { offset, count, .. }) => {
            assert_eq!((offset, count), (20, u32::MAX));
        }
        other => panic!("{other:?}"),
    }
    let s = types("std_msgs/String");
    let mut b = msg::string("abc");
    b[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        path(&s, "data").read(&b),
        Err(ReadError::CountTooLarge {
            count: u32::MAX,
            ..
        })
    ));
}

/// Every path of every fixture, with its full payload.
fn fixtures() -> Vec<(Arc<TypeTable>, Vec<&'static str>, Vec<u8>)> {
    vec![
        (
            types("sensor_msgs/Imu"),
            vec![
                "header.frame_id",
                "orientation.w",
                "linear_acceleration.x",
                "linear_acceleration_covariance[8]",
            ],
            imu("imu_link"),
        ),
        (
            types("sensor_msgs/BatteryState"),
            vec!["voltage", "present", "cell_voltage[2]", "serial_number"],
            battery(&BATTERY),
        ),
        (
            types("sensor_msgs/LaserScan"),
            vec!["ranges[0]", "intensities[1]"],
            laser_scan(&[1.0, 2.0], &[3.0, 4.0]),
        ),
        (
            types("diagnostic_msgs/DiagnosticArray"),
            vec!["status[0].level", "status[1].values[1].value"],
            diagnostics(),
        ),
        (types("std_msgs/String"), vec!["data"], msg::string("hello")),
    ]
}

#[test]
fn truncation_at_every_offset_errors_and_never_panics() {
    for (t, paths, full) in fixtures() {
        let paths: Vec<FieldPath> = paths.iter().map(|p| path(&t, p)).collect();
        let last = paths.last().expect("a path");
        for cut in 0..full.len() {
            let short = &full[..cut];
            for p in &paths {
                match p.read(short) {
                    Ok(v) => assert_eq!(Ok(v), p.read(&full), "{p} cut at {cut}"),
                    Err(e) => assert!(e.is_malformed(), "{p} cut at {cut}: {e}"),
                }
            }
            // The last path of each fixture ends the payload, so every cut breaks it.
            assert!(last.read(short).is_err(), "{last} cut at {cut}");
        }
    }
}

#[test]
fn random_and_mutated_payloads_never_panic() {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let fixtures = fixtures();
    let mut errors = 0;
    for round in 0..20_000 {
        let (t, paths, full) = &fixtures[round % fixtures.len()];
        let mut b = if round % 2 == 0 {
            let len = (next() % 96) as usize;
            let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if b.len() >= 2 && round % 4 == 0 {
                b[..2].copy_from_slice(&[0, (round / 4 % 2) as u8]);
            }
            b
        } else {
            full.clone()
        };
        if round % 2 == 1 {
            for _ in 0..1 + next() % 4 {
                let at = (next() as usize) % b.len();
                b[at] = next() as u8;
            }
            // Counts and lengths are where garbage hurts most.
            let at = 4 + (next() as usize % (b.len() - 4)) / 4 * 4;
            if at + 4 <= b.len() && next() % 2 == 0 {
                b[at..at + 4].copy_from_slice(&(next() as u32 | 0x8000_0000).to_le_bytes());
            }
        }
        for p in paths {
            if path(t, p).read(&b).is_err() {
                errors += 1;
            }
        }
    }
    assert!(errors > 1000, "garbage is noticed: {errors}");
}

#[test]
fn path_errors_say_what_to_write() {
    let t = types("sensor_msgs/BatteryState");
    let err = |p: &str| FieldPath::resolve(&t, p).unwrap_err();

    let e = err("voltge");
    assert_eq!(e.offset, 0);
    let text = e.to_string();
    assert!(
        text.starts_with(
            "unknown field `voltge` of sensor_msgs/msg/BatteryState (fields: header, voltage, temperature, "
        ),
        "{text}"
    );
    let e = err("header.stamp.sek");
    assert_eq!(e.offset, 13);
    assert!(
        matches!(e.kind, PathErrorKind::UnknownField { ref type_name, .. } if type_name == "builtin_interfaces/msg/Time")
    );

    let e = err("voltage[0]");
    assert_eq!(e.offset, 7);
    assert_eq!(
        e.to_string(),
        "`voltage` is a float32, not an array; remove the `[...]`"
    );
    let e = err("voltage.x");
    assert_eq!(e.offset, 8);
    assert_eq!(e.to_string(), "`voltage` is a float32; it has no fields");
    let e = err("header");
    assert_eq!(
        e.to_string(),
        "`header` is a std_msgs/msg/Header message; name one of its fields (stamp, frame_id)"
    );
    let e = err("cell_voltage");
    assert_eq!(
        e.to_string(),
        "`cell_voltage` is an array; name one element, e.g. `cell_voltage[0]`"
    );
    for (bad, offset) in [
        ("", 0),
        ("voltage.", 8),
        ("cell_voltage[", 13),
        ("cell_voltage[1", 14),
        ("cell_voltage[x]", 13),
        ("cell_voltage[99999999999999999999]", 13),
        ("voltage..x", 8),
        ("voltage x", 7),
        ("9volt", 0),
    ] {
        let e = err(bad);
        assert!(matches!(e.kind, PathErrorKind::Syntax(_)), "{bad}: {e}");
        assert_eq!(e.offset, offset, "{bad}: {e}");
    }

    let imu = types("sensor_msgs/Imu");
    let e = FieldPath::resolve(&imu, "orientation_covariance[9]").unwrap_err();
    assert_eq!(
        e.to_string(),
        "index 9 is past the end of `orientation_covariance`, an array of 9"
    );
    assert_eq!(e.offset, 22);
    let diag = types("diagnostic_msgs/DiagnosticArray");
    let e = FieldPath::resolve(&diag, "status.level").unwrap_err();
    assert_eq!(e.offset, 7);
}

#[test]
fn wstrings_are_refused_at_resolve() {
    let t = Arc::new(TypeTable::parse("p/T", "int32 a\nwstring w\nint32 b\nP[] ps\n================================================================================\nMSG: p/P\nwstring name\n").unwrap());
    assert!(FieldPath::resolve(&t, "a").is_ok());
    for bad in ["w", "b", "ps[1].name"] {
        let e = FieldPath::resolve(&t, bad).unwrap_err();
        assert!(
            matches!(e.kind, PathErrorKind::WString { .. }),
            "{bad}: {e}"
        );
    }
}
