//! Cross-checks the wire encodings edgerec uses to speak ROS 2 itself
//! (`diagnostics`, `services`, `discovery_info`) against Python rosbags, a
//! CDR codec that shares no code with edgerec: for every sample, rosbags'
//! `serialize_cdr` of the same values must give the same bytes, and its
//! `deserialize_cdr` of ours the same values.
//!
//! Writes the samples to a scratch directory and runs
//! `tests/py/ros_wire_check.py` on it with `$EDGEREC_PYTHON`, the
//! workspace's `.venv/bin/python` or `python3`; where none of them has
//! rosbags, the test prints why and skips.

#[allow(dead_code)]
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use edgerec_ros::diagnostics::{self, level, DiagnosticStatus, Time};
use edgerec_ros::discovery_info::{self, GidWire, NodeEntities};
use edgerec_ros::graph::Gid;
use edgerec_ros::services::{self, RequestHeader, Response, ServiceKind};

/// Exit status ros_wire_check.py uses for "rosbags cannot be imported".
const SKIP_STATUS: i32 = 77;

struct Sample {
    id: String,
    /// rosbags type store: `humble` or `jazzy`.
    store: &'static str,
    type_name: &'static str,
    /// Definition to register first, for types no store holds.
    msg_def: Option<&'static str>,
    cdr: Vec<u8>,
    /// The values as JSON, every string as its UTF-8 bytes in hex.
    json: String,
}

/// A string value: its UTF-8 bytes in hex, so nothing needs escaping.
fn s(v: &str) -> String {
    let mut out = String::from("\"");
    for b in v.bytes() {
        write!(out, "{b:02x}").unwrap();
    }
    out.push('"');
    out
}

fn time(t: Time) -> String {
    format!(r#"{{"sec":{},"nanosec":{}}}"#, t.sec, t.nanosec)
}

fn list<T>(items: &[T], each: impl Fn(&T) -> String) -> String {
    let items: Vec<String> = items.iter().map(each).collect();
    format!("[{}]", items.join(","))
}

fn diagnostic_samples(out: &mut Vec<Sample>) {
    let values: Vec<(String, String)> = vec![
        ("free".into(), "12.5 GiB".into()),
        ("".into(), "".into()),
        ("path".into(), r#"C:\rec "quoted""#.into()),
        ("température".into(), "°C".into()),
        ("k".into(), "v".repeat(7)),
    ];
    let names = ["edgerec: storage", "", "e", "edgerec: source /imu"];
    let messages = ["", "ok", r#"température 85 °C, "hot" \ fan"#, "one line"];
    let hardware = ["/dev/nvme0n1", "", "phc /dev/ptp0", "x"];
    let cases: Vec<(Time, &str, Vec<DiagnosticStatus<'_>>)> = vec![
        (
            Time {
                sec: -2,
                nanosec: 300_000_000,
            },
            "base",
            vec![],
        ),
        (
            Time::default(),
            "",
            vec![DiagnosticStatus {
                level: level::STALE,
                name: "",
                message: "",
                hardware_id: "",
                values: &[],
            }],
        ),
        (
            Time::from(1_700_000_000_123_456_789),
            "edgerec",
            (0..4)
                .map(|i| DiagnosticStatus {
                    level: i as u8,
                    name: names[i],
                    message: messages[i],
                    hardware_id: hardware[i],
                    values: &values[i..],
                })
                .collect(),
        ),
    ];
    for (n, (stamp, frame_id, statuses)) in cases.iter().enumerate() {
        let json = format!(
            r#"{{"header":{{"stamp":{},"frame_id":{}}},"status":{}}}"#,
            time(*stamp),
            s(frame_id),
            list(statuses, |st| format!(
                r#"{{"level":{},"name":{},"message":{},"hardware_id":{},"values":{}}}"#,
                st.level,
                s(st.name),
                s(st.message),
                s(st.hardware_id),
                list(st.values, |(k, v)| format!(
                    r#"{{"key":{},"value":{}}}"#,
                    s(k),
                    s(v)
                ))
            ))
        );
        out.push(Sample {
            id: format!("diagnostic_array_{n}"),
            store: "humble",
            type_name: diagnostics::DIAGNOSTIC_ARRAY_TYPE,
            msg_def: None,
            cdr: diagnostics::diagnostic_array(*stamp, frame_id, statuses),
            json,
        });
    }
    for (n, text) in [
        "",
        r#"{"state":"recording","paused":false,"path":"C:\\rec","note":"é"}"#,
    ]
    .iter()
    .enumerate()
    {
        out.push(Sample {
            id: format!("status_string_{n}"),
            store: "humble",
            type_name: diagnostics::STRING_TYPE,
            msg_def: None,
            cdr: diagnostics::status_string(text),
            json: format!(r#"{{"data":{}}}"#, s(text)),
        });
    }
}

/// Response bodies as their .srv types (registered under msg names: the
/// stores hold no srv types), and whole framed payloads as a struct that
/// starts with rmw_cyclonedds' request header.
fn service_samples(out: &mut Vec<Sample>) {
    const EMPTY: &str = "";
    const IS_PAUSED: &str = "bool paused";
    const TRIGGER: &str = "bool success\nstring message";
    const FRAMED_EMPTY: &str = "uint64 guid\nint64 seq\nuint8 structure_needs_at_least_one_member";
    const FRAMED_IS_PAUSED: &str = "uint64 guid\nint64 seq\nbool paused";
    const FRAMED_TRIGGER: &str = "uint64 guid\nint64 seq\nbool success\nstring message";

    let headers = [
        RequestHeader {
            client: 0x0102_0304_0506_0708,
            sequence: 1,
        },
        RequestHeader {
            client: u64::MAX,
            sequence: i64::MIN,
        },
    ];
    let messages = ["", "o", "ok", "not recording: disk full", "déclenché"];
    for (h, header) in headers.iter().enumerate() {
        let framed = |fields: &str| {
            format!(
                r#"{{"guid":{},"seq":{}{fields}}}"#,
                header.client, header.sequence
            )
        };
        let dummy = r#","structure_needs_at_least_one_member":0"#;
        for kind in ServiceKind::ALL {
            out.push(Sample {
                id: format!("{}_request_{h}", kind.name()),
                store: "humble",
                type_name: "edgerec_test/msg/FramedEmpty",
                msg_def: Some(FRAMED_EMPTY),
                cdr: services::encode_request(kind, *header),
                json: framed(dummy),
            });
        }
        let mut cases: Vec<(ServiceKind, Response, String)> = vec![
            (ServiceKind::Pause, Response::Empty, dummy.into()),
            (ServiceKind::Resume, Response::Empty, dummy.into()),
            (ServiceKind::SplitBagfile, Response::Empty, dummy.into()),
        ];
        for paused in [false, true] {
            let fields = format!(r#","paused":{paused}"#);
            cases.push((ServiceKind::IsPaused, Response::IsPaused { paused }, fields));
        }
        for (n, message) in messages.iter().enumerate() {
            let success = n % 2 == 0;
            let fields = format!(r#","success":{success},"message":{}"#, s(message));
            let response = Response::Trigger {
                success,
                message: (*message).into(),
            };
            cases.push((ServiceKind::Trigger, response, fields));
        }
        for (n, (kind, response, fields)) in cases.into_iter().enumerate() {
            let cdr = services::encode_response(kind, *header, &response).unwrap();
            let (body_type, body_def, framed_type, framed_def) = match kind {
                ServiceKind::IsPaused => (
                    "rosbag2_interfaces/msg/IsPaused_Response",
                    IS_PAUSED,
                    "edgerec_test/msg/FramedIsPaused",
                    FRAMED_IS_PAUSED,
                ),
                ServiceKind::Trigger => (
                    "std_srvs/msg/Trigger_Response",
                    TRIGGER,
                    "edgerec_test/msg/FramedTrigger",
                    FRAMED_TRIGGER,
                ),
                _ => (
                    "rosbag2_interfaces/msg/Pause_Response",
                    EMPTY,
                    "edgerec_test/msg/FramedEmpty",
                    FRAMED_EMPTY,
                ),
            };
            // The body alone: the 16-byte header keeps its alignment.
            let body = [&cdr[..4], &cdr[4 + services::REQUEST_HEADER_LEN..]].concat();
            let body_fields = fields.strip_prefix(',').unwrap_or_default();
            out.push(Sample {
                id: format!("{}_response_{h}_{n}", kind.name()),
                store: "humble",
                type_name: body_type,
                msg_def: Some(body_def),
                cdr: body,
                json: format!("{{{body_fields}}}"),
            });
            out.push(Sample {
                id: format!("{}_reply_{h}_{n}", kind.name()),
                store: "humble",
                type_name: framed_type,
                msg_def: Some(framed_def),
                cdr,
                json: framed(&fields),
            });
        }
    }
}

fn discovery_samples(out: &mut Vec<Sample>) {
    let gid = |n: u8| -> Gid {
        let mut g = [
            0x01, 0x10, 0x2a, 0x3b, 9, 8, 7, 6, 5, 4, 3, 2, 0, 0, 0, 0xc1,
        ];
        g[12..14].copy_from_slice(&[n, n.wrapping_mul(3)]);
        g
    };
    let readers: Vec<Gid> = (1..4).map(gid).collect();
    let writers: Vec<Gid> = (4..9).map(gid).collect();
    let cases: Vec<Vec<NodeEntities<'_>>> = vec![
        vec![],
        vec![NodeEntities {
            namespace: "/",
            name: "edgerec",
            readers: &readers,
            writers: &writers,
        }],
        vec![
            NodeEntities {
                namespace: "/robot/arm",
                name: "edgerec",
                readers: &[],
                writers: &writers[..1],
            },
            NodeEntities {
                namespace: "/",
                name: "n",
                readers: &readers[..2],
                writers: &[],
            },
        ],
    ];
    for (store, wire) in [("humble", GidWire::Bytes24), ("jazzy", GidWire::Bytes16)] {
        let gid_json = |g: &Gid| {
            let mut data = g.to_vec();
            data.resize(wire.size(), 0);
            format!(r#"{{"data":{}}}"#, list(&data, |b| b.to_string()))
        };
        for (n, nodes) in cases.iter().enumerate() {
            let participant = gid(0);
            let json = format!(
                r#"{{"gid":{},"node_entities_info_seq":{}}}"#,
                gid_json(&participant),
                list(nodes, |node| format!(
                    r#"{{"node_namespace":{},"node_name":{},"reader_gid_seq":{},"writer_gid_seq":{}}}"#,
                    s(node.namespace),
                    s(node.name),
                    list(node.readers, gid_json),
                    list(node.writers, gid_json)
                ))
            );
            out.push(Sample {
                id: format!("participant_entities_info_{store}_{n}"),
                store,
                type_name: discovery_info::ROS_TYPE,
                msg_def: None,
                cdr: discovery_info::encode(&participant, nodes, wire),
                json,
            });
        }
    }
}

fn write_inputs(dir: &Path, samples: &[Sample]) {
    std::fs::create_dir_all(dir.join("samples")).unwrap();
    let mut index = String::new();
    for s in samples {
        let def = match s.msg_def {
            Some(text) => {
                let file = format!("samples/{}.msg", s.id);
                std::fs::write(dir.join(&file), text).unwrap();
                file
            }
            None => "-".into(),
        };
        let cdr = format!("samples/{}.cdr", s.id);
        let json = format!("samples/{}.json", s.id);
        std::fs::write(dir.join(&cdr), &s.cdr).unwrap();
        std::fs::write(dir.join(&json), &s.json).unwrap();
        writeln!(
            index,
            "{}\t{}\t{}\t{def}\t{cdr}\t{json}",
            s.id, s.store, s.type_name
        )
        .unwrap();
    }
    std::fs::write(dir.join("samples.tsv"), index).unwrap();
}

#[test]
fn wire_encodings_match_rosbags() {
    let mut samples = Vec::new();
    diagnostic_samples(&mut samples);
    service_samples(&mut samples);
    discovery_samples(&mut samples);

    let python = edgerec_testkit::netns::python();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/py/ros_wire_check.py");
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("wire_rosbags-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    write_inputs(&dir, &samples);

    let out = match Command::new(&python).arg(&script).arg(&dir).output() {
        Ok(out) => out,
        Err(e) => {
            edgerec_testkit::skip::skip(format!("cannot run {}: {e}", python.display()));
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
    };
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.code() == Some(SKIP_STATUS) {
        edgerec_testkit::skip::skip(format!("{}: {report}", python.display()));
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    assert!(
        out.status.success(),
        "{} {} failed ({}); inputs kept in {}:\n{report}",
        python.display(),
        script.display(),
        out.status,
        dir.display()
    );
    // Two lines a sample; a silent pass of nothing would be a broken check.
    assert_eq!(
        report.lines().filter(|l| l.starts_with("ok ")).count(),
        2 * samples.len()
    );
    println!("{report}");
    let _ = std::fs::remove_dir_all(&dir);
}
