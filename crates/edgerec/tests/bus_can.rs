//! CAN on this host: what can be checked without a CAN socket.
//!
//! - A `[[can]]` on a kernel without SocketCAN is a configuration error:
//!   exit 78, the entry and the fix named, nothing created. (Recording
//!   frames from vcan with cangen and candump beside it runs on the
//!   emulated aarch64 board, whose Debian kernel has the modules:
//!   `tests/qemu`, scenario `can`.)
//! - `import candump` then `export candump` gives a log back byte for byte,
//!   for every kind of frame (standard, extended, remote with and without a
//!   length, error frames, raw DLCs above 8, CAN FD with each flag) on two
//!   interfaces; the imported bag passes `edgerec check`, and two readers
//!   that share no code with edgerec (Python `mcap` + `mcap-ros2-support`,
//!   `tests/py/verify_can_bag.py`) decode it to the same log.
//! - A log that does not parse names its line and column and creates no
//!   bag; an existing bag is never overwritten.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

fn edgerec(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

/// `edgerec import candump LOG -o BAG`.
fn import(log: &Path, bag: &Path) -> Output {
    edgerec(&[
        "import",
        "candump",
        log.to_str().unwrap(),
        "-o",
        bag.to_str().unwrap(),
    ])
}

/// `edgerec export candump BAG [--topic T]... -o OUT`.
fn export(bag: &Path, out: &Path, topics: &[&str]) -> Output {
    let mut args = vec!["export", "candump", bag.to_str().unwrap()];
    for t in topics {
        args.extend(["--topic", t]);
    }
    args.extend(["-o", out.to_str().unwrap()]);
    edgerec(&args)
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_can_interface_without_socketcan_is_a_configuration_error() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let Some(why) = edgerec_bus::can_unsupported() else {
        // Not lost coverage: the other side of the same question.
        println!(
            "this kernel has SocketCAN, so [[can]] is no configuration error here; \
             recording from vcan is tested on the QEMU board (tests/qemu, scenario can)"
        );
        return;
    };
    println!("this host: {why}");
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("rec");
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(
        &cfg,
        format!(
            "[recording]\nroot = \"{}\"\n[health]\nwatchdog = \"\"\nstatus_socket = \"\"\n\n[[can]]\ninterface = \"can0\"\n",
            root.display()
        ),
    )
    .unwrap();
    let o = edgerec(&["run", "--config", cfg.to_str().unwrap(), "--duration", "1s"]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("can[0] (can0)"), "{t}");
    assert!(t.contains("no SocketCAN"), "{t}");
    assert!(t.contains("load the can and can-raw modules"), "{t}");
    assert!(!root.exists(), "nothing is created before the error");
}

/// A log with every kind of frame on two interfaces, in time order.
const LOG: &str = "\
(1700000000.000001) can0 123#DEADBEEF
(1700000000.000002) can0 7FF#
(1700000000.000100) can0 12345678#0011223344556677
(1700000000.000101) can0 00000001#01
(1700000000.000200) can0 321#R
(1700000000.000201) can0 321#R5
(1700000000.000202) can0 1ABCDEF0#R8
(1700000000.000300) can0 20000080#0000000000000000
(1700000000.000301) can0 20000004#0004000000000060
(1700000000.000400) can0 100#1122334455667788_E
(1700000000.000500) can0 123##0
(1700000000.000501) can0 123##1112233
(1700000000.000502) can0 1FFFFFFF##5000102030405060708090A0B0C0D0E0F
(1700000000.000503) can0 456##4000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F
(1700000000.000504) can0 456##2AA
(1700000000.500000) can1 0C1#0102
(1700000001.000000) can0 123#DEADBEEF
(1700000001.000001) can1 18FEF100#FFFFFFFFFFFFFFFF
";

#[test]
fn candump_logs_round_trip_through_import_and_export_byte_for_byte() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("in.log");
    std::fs::write(&log, LOG).unwrap();
    let bag = d.path().join("imported");
    let o = import(&log, &bag);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("imported 18 frames"), "{}", text(&o));
    let o = edgerec(&["check", bag.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let o = edgerec(&["info", bag.to_str().unwrap()]);
    let info = text(&o);
    for (topic, ty, n) in [
        ("/can/can0 ", "can_msgs/msg/Frame", "Count: 11"),
        (
            "/can/can0/fd",
            "ros2_socketcan_msgs/msg/FdFrame",
            "Count: 5",
        ),
        ("/can/can1 ", "can_msgs/msg/Frame", "Count: 2"),
    ] {
        let line = info
            .lines()
            .find(|l| l.contains(topic))
            .unwrap_or_else(|| panic!("{topic} not in\n{info}"));
        assert!(line.contains(ty) && line.contains(n), "{line}");
    }

    // Every topic, merged by time: the log itself.
    let out = d.path().join("out.log");
    let o = export(&bag, &out, &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), LOG);
    // Again through the imported bag: import(export(import(log))) changes
    // nothing either.
    let bag2 = d.path().join("again");
    let o = import(&out, &bag2);
    assert!(o.status.success(), "{}", text(&o));
    let out2 = d.path().join("out2.log");
    let o = export(&bag2, &out2, &[]);
    assert!(o.status.success());
    assert_eq!(std::fs::read_to_string(&out2).unwrap(), LOG);

    // One topic: only its lines.
    let one = d.path().join("can1.log");
    let o = export(&bag, &one, &["/can/can1"]);
    assert!(o.status.success(), "{}", text(&o));
    let want: String = LOG
        .lines()
        .filter(|l| l.contains(" can1 "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(std::fs::read_to_string(&one).unwrap(), want);

    // An independent decoder of the bag gives the same log.
    match edgerec_testkit::python() {
        None => edgerec_testkit::skip::skip(
            "verify_can_bag.py: no Python readers (.venv; scripts/test makes it)",
        ),
        Some(py) => {
            let o = Command::new(py)
                .arg(edgerec_testkit::workspace_root().join("tests/py/verify_can_bag.py"))
                .arg(&bag)
                .output()
                .unwrap();
            if o.status.code() == Some(77) {
                edgerec_testkit::skip::skip(format!(
                    "verify_can_bag.py: {}",
                    String::from_utf8_lossy(&o.stderr)
                ));
            } else {
                assert!(o.status.success(), "{}", text(&o));
                assert_eq!(String::from_utf8_lossy(&o.stdout), LOG);
            }
        }
    }
}

#[test]
fn a_bad_log_names_its_line_and_column_and_makes_no_bag() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("bad.log");
    std::fs::write(&log, "(1.000000) can0 123#00\n(1.000001) can0 12#00\n").unwrap();
    let bag = d.path().join("bag");
    let o = import(&log, &bag);
    assert_eq!(o.status.code(), Some(1));
    let t = text(&o);
    assert!(
        t.contains(&format!("{}:2:17: the id has 2 hex digits", log.display())),
        "{t}"
    );
    assert!(!bag.exists(), "no bag from a log that does not read");

    // An existing directory is never written into.
    std::fs::write(&log, "(1.000000) can0 123#00\n").unwrap();
    std::fs::create_dir(&bag).unwrap();
    let o = import(&log, &bag);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("already exists"), "{}", text(&o));
    assert_eq!(std::fs::read_dir(&bag).unwrap().count(), 0);

    // An export of a topic that is not there lists the CAN topics.
    let good = d.path().join("good");
    let o = import(&log, &good);
    assert!(o.status.success(), "{}", text(&o));
    let o = export(&good, &d.path().join("x.log"), &["/can/can9"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("no topic /can/can9 in the bag; its CAN topics: /can/can0"),
        "{}",
        text(&o)
    );
    assert!(!Path::new(&d.path().join("x.log")).exists());
    let o = edgerec(&[
        "export",
        "pcap",
        good.to_str().unwrap(),
        "-o",
        d.path().join("x.pcap").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("no UDP packet messages"), "{}", text(&o));
}
