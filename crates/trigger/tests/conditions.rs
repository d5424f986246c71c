//! Conditions compiled against embedded message types and evaluated on
//! payloads built with the format crate's CDR writer.

use std::borrow::Cow;

use edgerec_format::cdr::{msg, CdrWriter, DiagnosticStatusSpec, Time};
use edgerec_format::cdr_read::{PathErrorKind, Value};
use edgerec_format::{msgdefs, msgtype::TypeTable};
use edgerec_trigger::{Compiled, Condition, EvalError, ExprErrorKind, Reading};

fn types(name: &str) -> TypeTable {
    let def = msgdefs::lookup(name).expect("embedded");
    TypeTable::parse(def.name, def.text()).expect("parses")
}

fn compile(types: &TypeTable, text: &str) -> Compiled {
    Condition::parse(text)
        .and_then(|c| c.compile(types))
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn compile_err(types: &TypeTable, text: &str) -> edgerec_trigger::ExprError {
    Condition::parse(text)
        .and_then(|c| c.compile(types))
        .expect_err(text)
}

struct Battery {
    voltage: f32,
    current: f32,
    temperature: f32,
    status: u8,
    present: bool,
    cells: &'static [f32],
}

fn battery(b: &Battery) -> Vec<u8> {
    let mut w = CdrWriter::new();
    w.header(Time { sec: 1, nanosec: 0 }, "battery")
        .f32(b.voltage)
        .f32(b.temperature)
        .f32(b.current)
        .f32(1.0)
        .f32(10.0)
        .f32(12.0)
        .f32(0.5)
        .u8(b.status)
        .u8(1)
        .u8(2)
        .bool(b.present)
        .sequence_len(b.cells.len());
    for c in b.cells {
        w.f32(*c);
    }
    w.sequence_len(0).string("slot").string("SN");
    w.finish()
}

const OK: Battery = Battery {
    voltage: 12.5,
    current: 1.0,
    temperature: 25.0,
    status: 2,
    present: true,
    cells: &[4.0, 4.25, 4.25],
};

#[test]
fn battery_conditions() {
    let t = types("sensor_msgs/BatteryState");
    let low = compile(&t, "voltage < 12.1");
    assert!(!low.holds(&battery(&OK)).unwrap());
    assert!(low
        .holds(&battery(&Battery {
            voltage: 12.0,
            ..OK
        }))
        .unwrap());

    let combo = compile(&t, "(voltage < 12.1 and current > 2) or not present");
    assert!(!combo.holds(&battery(&OK)).unwrap());
    assert!(combo
        .holds(&battery(&Battery {
            present: false,
            ..OK
        }))
        .unwrap());
    let draining = battery(&Battery {
        voltage: 11.0,
        current: 2.5,
        ..OK
    });
    let outcome = combo.eval(&draining).unwrap();
    assert!(outcome.holds);
    assert_eq!(
        outcome.values,
        [
            Reading {
                path: "voltage".into(),
                value: Value::Float(11.0)
            },
            Reading {
                path: "current".into(),
                value: Value::Float(2.5)
            },
            Reading {
                path: "present".into(),
                value: Value::Bool(true)
            },
        ]
    );
    // Not holding: nothing is collected.
    assert!(combo.eval(&battery(&OK)).unwrap().values.is_empty());

    // uint8 against an integer: exact; against a float: as f64.
    assert!(compile(&t, "power_supply_status == 2")
        .holds(&battery(&OK))
        .unwrap());
    assert!(compile(&t, "power_supply_status != 3")
        .holds(&battery(&OK))
        .unwrap());
    assert!(compile(&t, "power_supply_status < 2.5")
        .holds(&battery(&OK))
        .unwrap());
    // A literal on the left.
    assert!(compile(&t, "12.1 > voltage")
        .holds(&battery(&Battery {
            voltage: 12.0,
            ..OK
        }))
        .unwrap());
    // Field against field.
    assert!(compile(&t, "cell_voltage[1] == cell_voltage[2]")
        .holds(&battery(&OK))
        .unwrap());
    assert!(compile(&t, "cell_voltage[0] < cell_voltage[1]")
        .holds(&battery(&OK))
        .unwrap());
    // Bare booleans and constants.
    assert!(compile(&t, "present").holds(&battery(&OK)).unwrap());
    assert!(compile(&t, "present == true and not false")
        .holds(&battery(&OK))
        .unwrap());
    assert!(!compile(&t, "present != true").holds(&battery(&OK)).unwrap());
}

#[test]
fn absent_elements_and_nan_are_unknown() {
    let t = types("sensor_msgs/BatteryState");
    let none = battery(&Battery { cells: &[], ..OK });
    let nan = battery(&Battery {
        temperature: f32::NAN,
        ..OK
    });
    for (text, payload, holds) in [
        ("cell_voltage[0] < 3.0", &none, false),
        ("not (cell_voltage[0] < 3.0)", &none, false),
        ("cell_voltage[0] < 3.0 or present", &none, true),
        ("cell_voltage[0] < 3.0 and present", &none, false),
        ("not (cell_voltage[0] < 3.0 and false)", &none, true),
        ("temperature > 60", &nan, false),
        ("not (temperature > 60)", &nan, false),
        ("temperature != 25", &nan, false),
        ("temperature != 25", &battery(&OK), false),
    ] {
        assert_eq!(compile(&t, text).holds(payload).unwrap(), holds, "{text}");
    }
    // The values of a condition that holds leave absent fields out.
    let c = compile(&t, "cell_voltage[0] < 3.0 or present");
    let o = c.eval(&none).unwrap();
    assert_eq!(o.values.len(), 1);
    assert_eq!(o.values[0].path, "present");
}

#[test]
fn imu_laser_scan_diagnostics_and_strings() {
    let imu = types("sensor_msgs/Imu");
    let c = compile(&imu, "linear_acceleration.x < -4.0");
    let bump = msg::imu(
        Time::default(),
        "imu_link",
        [0.0, 0.0, 0.0, 1.0],
        [0.0; 3],
        [-4.5, 0.0, 9.81],
        [[0.0; 9]; 3],
    );
    assert!(c.holds(&bump).unwrap());
    assert!(compile(&imu, "header.frame_id == \"imu_link\"")
        .holds(&bump)
        .unwrap());

    let scan = types("sensor_msgs/LaserScan");
    let near = compile(&scan, "ranges[0] < 0.5");
    let mut w = CdrWriter::new();
    w.header(Time::default(), "laser");
    for v in [0.0f32; 7] {
        w.f32(v);
    }
    w.sequence_len(2).f32(0.25).f32(3.0).sequence_len(0);
    assert!(near.holds(&w.finish()).unwrap());

    let diag = types("diagnostic_msgs/DiagnosticArray");
    let error = compile(&diag, "status[0].level >= 2");
    let payload = |level| {
        msg::diagnostic_array(
            Time::default(),
            &[DiagnosticStatusSpec {
                level,
                name: "motor",
                message: "",
                hardware_id: "",
                values: &[],
            }],
        )
    };
    assert!(!error.holds(&payload(1)).unwrap());
    assert!(error.holds(&payload(2)).unwrap());
    assert!(!error
        .holds(&msg::diagnostic_array(Time::default(), &[]))
        .unwrap());
    assert!(compile(&diag, "status[0].name == \"motor\"")
        .holds(&payload(0))
        .unwrap());

    let s = types("std_msgs/String");
    let c = compile(&s, "data == \"DISENGAGED\"");
    assert!(c.holds(&msg::string("DISENGAGED")).unwrap());
    assert!(!c.holds(&msg::string("ENGAGED")).unwrap());
    let o = c.eval(&msg::string("DISENGAGED")).unwrap();
    assert_eq!(
        o.values[0].value,
        Value::Str(Cow::Owned("DISENGAGED".into()))
    );
    assert!(compile(&s, "data != \"say \\\"hi\\\"\"")
        .holds(&msg::string("say hi"))
        .unwrap());
    assert!(!compile(&s, "data != \"say \\\"hi\\\"\"")
        .holds(&msg::string("say \"hi\""))
        .unwrap());
}

#[test]
fn integers_compare_exactly() {
    let t = TypeTable::parse("p/T", "uint64 big\nint64 neg\n").unwrap();
    let mut w = CdrWriter::new();
    w.u64(u64::MAX).i64(-9_007_199_254_740_993); // not representable as f64
    let b = w.finish();
    assert!(compile(&t, "big == 18446744073709551615")
        .holds(&b)
        .unwrap());
    assert!(!compile(&t, "big < 18446744073709551615").holds(&b).unwrap());
    assert!(compile(&t, "neg < -9007199254740992").holds(&b).unwrap());
    assert!(compile(&t, "neg < big").holds(&b).unwrap());
}

#[test]
fn malformed_payloads_are_errors_not_truth() {
    let t = types("sensor_msgs/BatteryState");
    let c = compile(&t, "voltage < 12.1");
    let good = battery(&OK);
    match c.eval(&good[..10]) {
        Err(EvalError::Malformed { path, source }) => {
            assert_eq!(path, "voltage");
            assert!(source.is_malformed());
        }
        other => panic!("{other:?}"),
    }
    for cut in 0..good.len() {
        let _ = c.holds(&good[..cut]);
    }
}

#[test]
fn compile_errors_name_the_fix() {
    let t = types("sensor_msgs/BatteryState");
    let e = compile_err(&t, "(voltge < 12.1)");
    assert_eq!(e.column, 2);
    assert!(e.to_string().starts_with(
        "at column 2: unknown field `voltge` of sensor_msgs/msg/BatteryState (fields: header, voltage, temperature, "
    ), "{e}");
    let e = compile_err(&t, "present and header.stamp.sek > 0");
    assert_eq!(e.column, 26, "{e}");
    assert!(matches!(
        e.kind,
        ExprErrorKind::Path(PathErrorKind::UnknownField { .. })
    ));

    let e = compile_err(&t, "location == 3");
    assert_eq!(e.column, 1);
    assert!(
        e.to_string()
            .starts_with("at column 1: comparing a string field with a number;"),
        "{e}"
    );
    let e = compile_err(&t, "3 == location");
    assert!(
        e.to_string()
            .contains("comparing a number with a string field"),
        "{e}"
    );
    let e = compile_err(&t, "voltage == \"12\"");
    assert!(
        e.to_string()
            .contains("comparing a numeric field with a string"),
        "{e}"
    );
    let e = compile_err(&t, "present == 1");
    assert!(
        e.to_string()
            .contains("comparing a boolean field with a number"),
        "{e}"
    );
    let e = compile_err(&t, "location < \"b\"");
    assert_eq!(
        e.kind,
        ExprErrorKind::Ordering {
            op: "<",
            what: "strings"
        }
    );
    let e = compile_err(&t, "voltage and present");
    assert_eq!(
        e.to_string(),
        "at column 1: `voltage` is a float32 field, not a condition; compare it, e.g. `voltage > 0`"
    );
    let e = compile_err(&t, "present or location");
    assert_eq!(e.column, 12);
    assert!(e.to_string().contains("location == \"...\""), "{e}");
    assert_eq!(
        compile_err(&t, "1 < 2").kind,
        ExprErrorKind::ConstantComparison
    );
    assert!(matches!(
        compile_err(&t, "3").kind,
        ExprErrorKind::NotACondition { .. }
    ));
    assert!(matches!(
        compile_err(&t, "voltage < -18446744073709551615").kind,
        ExprErrorKind::IntegerOutOfRange(_)
    ));
    let e = compile_err(&t, "cell_voltage < 3");
    assert!(e.to_string().contains("e.g. `cell_voltage[0]`"), "{e}");
    let e = compile_err(&t, "header < 3");
    assert!(e.to_string().contains("std_msgs/msg/Header message"), "{e}");
}

#[test]
fn each_field_is_resolved_once() {
    let t = types("sensor_msgs/BatteryState");
    let c = compile(&t, "voltage < 12 or voltage > 15 or current > 2");
    let paths: Vec<&str> = c.fields().iter().map(|f| f.as_str()).collect();
    assert_eq!(paths, ["voltage", "current"]);
    assert_eq!(c.text(), "voltage < 12 or voltage > 15 or current > 2");
}

fn filter_compile(
    types: &TypeTable,
    topic: &str,
    text: &str,
) -> Result<Compiled, edgerec_trigger::ExprError> {
    Condition::parse(text).and_then(|c| c.compile_in(types, &edgerec_trigger::Env::filter(topic)))
}

fn imu_at(sec: i32, nanosec: u32) -> Vec<u8> {
    msg::imu(
        Time { sec, nanosec },
        "imu_link",
        [0.0, 0.0, 0.0, 1.0],
        [0.0; 3],
        [1.5, 0.0, 9.81],
        [[0.0; 9]; 3],
    )
}

#[test]
fn rosbag_filter_forms_topic_stamps_and_log_time() {
    let imu = types("sensor_msgs/Imu");
    let at = |sec| imu_at(sec, 500_000_000);
    let holds = |text: &str, topic: &str, payload: &[u8], t: u64| {
        filter_compile(&imu, topic, text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .holds_at(payload, t)
            .unwrap()
    };
    // The seed's own expression, quotes and all.
    let seed = "topic == '/camera/image_raw' and m.header.stamp.to_sec() > 100";
    assert!(holds(seed, "/camera/image_raw", &at(100), 0), "100.5 > 100");
    assert!(!holds(seed, "/camera/image_raw", &at(99), 0));
    assert!(!holds(seed, "/imu", &at(100), 0));
    // Settled by the topic alone: the other side is not even compiled,
    // as Python does not evaluate it.
    let c = filter_compile(&imu, "/tf", "topic == '/imu' and m.no_such_field > 1").unwrap();
    assert_eq!(c.constant(), Some(false));
    let c = filter_compile(&imu, "/imu", "topic in ('/a', \"/imu\")").unwrap();
    assert_eq!(c.constant(), Some(true));
    let c = filter_compile(&imu, "/imu", "topic not in ['/a', '/imu',]").unwrap();
    assert_eq!(c.constant(), Some(false));
    // Stamps as times in ns, against numbers with units.
    assert!(holds("header.stamp > 100s", "/imu", &at(100), 0));
    assert!(holds("header.stamp == 100500ms", "/imu", &at(100), 0));
    assert!(holds(
        "m.header.stamp.to_nsec() == 100500000000",
        "/imu",
        &at(100),
        0
    ));
    assert!(!holds("header.stamp >= 100.6s", "/imu", &at(100), 0));
    // The log time: t, t.to_sec(), t.to_nsec().
    assert!(holds("t.to_sec() > 1.5", "/imu", &at(0), 1_600_000_000));
    assert!(!holds("t.to_sec() > 1.5", "/imu", &at(0), 1_500_000_000));
    assert!(holds(
        "t >= 1500ms and t < 2s",
        "/imu",
        &at(0),
        1_500_000_000
    ));
    assert!(holds("t.to_nsec() == 7", "/imu", &at(0), 7));
    // `in` over numbers, and fields as before.
    assert!(holds(
        "m.linear_acceleration.x in (1, 1.5)",
        "/imu",
        &at(0),
        0
    ));
    assert!(holds("header.frame_id == 'imu_link'", "/imu", &at(0), 0));
}

#[test]
fn what_is_not_the_language_is_refused_by_column() {
    let imu = types("sensor_msgs/Imu");
    let err = |text: &str| filter_compile(&imu, "/imu", text).expect_err(text);
    let e = err("__import__('os').system('rm -rf /')");
    assert_eq!(e.column, 11);
    assert!(
        matches!(e.kind, ExprErrorKind::Call(ref f) if f == "__import__"),
        "{e}"
    );
    assert!(e.to_string().contains("not Python"), "{e}");
    let e = err("m.header.stamp.to_sec() > 1 and open('x')");
    assert_eq!(e.column, 37);
    let e = err("header.stamp > 100");
    assert_eq!(e.column, 1);
    assert!(e.to_string().contains("`header.stamp` is a time"), "{e}");
    let e = err("linear_acceleration.x > 1s");
    assert_eq!(e.column, 25);
    assert!(
        e.to_string().contains("`linear_acceleration.x` is not one"),
        "{e}"
    );
    let e = err("m.no_such_field > 1");
    assert_eq!(e.column, 3, "{e}");
    assert!(
        matches!(
            e.kind,
            ExprErrorKind::Path(PathErrorKind::UnknownField { .. })
        ),
        "{e}"
    );
    let e = err("header.frame_id.to_sec() > 1");
    assert!(e.to_string().contains("is not a time"), "{e}");
    let e = err("topic > '/a'");
    assert!(matches!(e.kind, ExprErrorKind::Ordering { .. }), "{e}");
    let e = err("topic == 3");
    assert!(matches!(e.kind, ExprErrorKind::Mismatch { .. }), "{e}");
    let e = err("topic in ('/a' '/b')");
    assert_eq!(e.column, 16);
    assert!(e.to_string().contains("`,` or `)`"), "{e}");
    let e = err("x == 1.5ns");
    assert!(matches!(e.kind, ExprErrorKind::BadNumber(_)), "{e}");
    // Outside filter, `topic`, `t` and `m.` are plain field names.
    let e = Condition::parse("topic == 'x'")
        .unwrap()
        .compile(&imu)
        .unwrap_err();
    assert!(matches!(e.kind, ExprErrorKind::Path(_)), "{e}");
}
