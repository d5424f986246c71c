//! Cross-checks `msgdefs` and `cdr` against two independent implementations:
//! Python `rosbags` (its ROS 2 Humble type store, CDR decoder and encoder) and
//! `mcap-ros2-support` (a CDR decoder built from the schema text).
//!
//! Writes every embedded definition, the definitions of a workspace package
//! resolved from a `msg_paths`-style directory, and one CDR sample per
//! builder case, with the field values it encoded, to a scratch directory,
//! then runs `tests/py/msgdefs_check.py` on it. The interpreter is `$EDGEREC_PYTHON`, or
//! the workspace's `.venv/bin/python`; with neither (or without the Python
//! packages) the test prints why and skips.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use edgerec_format::cdr::{
    msg, CanFrameSpec, ClockQualitySpec, DiagnosticStatusSpec, FdFrameSpec, PointFieldSpec, Time,
};
use edgerec_format::msgdefs;

/// Exit status msgdefs_check.py uses for "reference packages not importable".
const SKIP_STATUS: i32 = 77;

/// Just enough JSON for the expected values.
enum J {
    I(i64),
    F(f64),
    B(bool),
    S(String),
    L(Vec<J>),
    O(Vec<(&'static str, J)>),
}

impl J {
    fn s(v: &str) -> J {
        J::S(v.to_owned())
    }

    fn floats(v: &[f64]) -> J {
        J::L(v.iter().map(|&x| J::F(x)).collect())
    }

    fn bytes(v: &[u8]) -> J {
        J::L(v.iter().map(|&x| J::I(x.into())).collect())
    }

    fn write(&self, out: &mut String) {
        match self {
            J::I(v) => write!(out, "{v}").unwrap(),
            // Debug prints the shortest text that reads back as the same f64.
            J::F(v) => {
                assert!(v.is_finite(), "JSON has no NaN or infinity");
                write!(out, "{v:?}").unwrap()
            }
            J::B(v) => write!(out, "{v}").unwrap(),
            J::S(v) => {
                out.push('"');
                for c in v.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        c if u32::from(c) < 0x20 => write!(out, "\\u{:04x}", u32::from(c)).unwrap(),
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            J::L(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            J::O(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    J::s(k).write(out);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

fn time(t: Time) -> J {
    J::O(vec![
        ("sec", J::I(t.sec.into())),
        ("nanosec", J::I(t.nanosec.into())),
    ])
}

fn header(stamp: Time, frame_id: &str) -> J {
    J::O(vec![("stamp", time(stamp)), ("frame_id", J::s(frame_id))])
}

fn xyz(v: [f64; 3]) -> J {
    J::O(vec![
        ("x", J::F(v[0])),
        ("y", J::F(v[1])),
        ("z", J::F(v[2])),
    ])
}

struct Sample {
    id: String,
    type_name: &'static str,
    cdr: Vec<u8>,
    expected: J,
}

fn samples() -> Vec<Sample> {
    let mut out = Vec::new();

    for data in ["hello, edgerec", "", "température °C \"quoted\" \\ tab\t"] {
        let cdr = msg::string(data);
        let mut again = vec![0xAA];
        msg::string_into(&mut again, data);
        assert_eq!(again[1..], cdr[..]);
        out.push(Sample {
            id: format!("string_{}", data.len()),
            type_name: "std_msgs/msg/String",
            cdr,
            expected: J::O(vec![("data", J::s(data))]),
        });
    }

    // Every frame id length from 0 to 8 puts the quaternion after a different
    // amount of padding (0..7 bytes).
    let covariances = [
        [1e-3, 0.0, 0.0, 0.0, 2e-3, 0.0, 0.0, 0.0, 3e-3],
        [-1.0, 0.5, 0.25, 0.125, 1e300, -2.5e-7, 7.0, 8.0, 9.0],
        [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
    ];
    for len in 0..=8 {
        let frame_id = &"imu_link"[..len];
        let stamp = if len == 3 {
            // -1.7 s, as builtin_interfaces documents it.
            Time {
                sec: -2,
                nanosec: 300_000_000,
            }
        } else {
            Time::from(1_700_000_000_000_000_000 + len as u64 * 1_000_123)
        };
        let orientation = [0.5, -0.5, 0.5, -0.5 + len as f64];
        let angular_velocity = [0.01, -0.02, 0.03 * len as f64];
        let linear_acceleration = [0.0, -0.0, 9.80665];
        let cdr = msg::imu(
            stamp,
            frame_id,
            orientation,
            angular_velocity,
            linear_acceleration,
            covariances,
        );
        out.push(Sample {
            id: format!("imu_frame{len}"),
            type_name: "sensor_msgs/msg/Imu",
            cdr,
            expected: J::O(vec![
                ("header", header(stamp, frame_id)),
                (
                    "orientation",
                    J::O(vec![
                        ("x", J::F(orientation[0])),
                        ("y", J::F(orientation[1])),
                        ("z", J::F(orientation[2])),
                        ("w", J::F(orientation[3])),
                    ]),
                ),
                ("orientation_covariance", J::floats(&covariances[0])),
                ("angular_velocity", xyz(angular_velocity)),
                ("angular_velocity_covariance", J::floats(&covariances[1])),
                ("linear_acceleration", xyz(linear_acceleration)),
                ("linear_acceleration_covariance", J::floats(&covariances[2])),
            ]),
        });
    }

    // x, y, z as float32 and an intensity byte, 13 bytes a point, 2 x 3 points.
    let fields = [
        PointFieldSpec {
            name: "x",
            offset: 0,
            datatype: PointFieldSpec::FLOAT32,
            count: 1,
        },
        PointFieldSpec {
            name: "y",
            offset: 4,
            datatype: PointFieldSpec::FLOAT32,
            count: 1,
        },
        PointFieldSpec {
            name: "z",
            offset: 8,
            datatype: PointFieldSpec::FLOAT32,
            count: 1,
        },
        PointFieldSpec {
            name: "intensity",
            offset: 12,
            datatype: PointFieldSpec::UINT8,
            count: 1,
        },
    ];
    let cloud: Vec<u8> = (0..2 * 3 * 13).map(|i| (i * 7 + 3) as u8).collect();
    let stamp = Time::from(1_700_000_001_500_000_000);
    for (i, frame_id) in ["lidar", "velodyne_top"].into_iter().enumerate() {
        let dense = i == 0;
        let cdr = if i == 0 {
            msg::point_cloud2(stamp, frame_id, 2, 3, &fields, false, 13, 39, &cloud, dense)
        } else {
            let mut buf = Vec::new();
            msg::point_cloud2_into(
                &mut buf,
                stamp,
                frame_id,
                2,
                3,
                &fields,
                false,
                13,
                39,
                cloud.len(),
                |d| {
                    for (j, b) in d.iter_mut().enumerate() {
                        *b = (j * 7 + 3) as u8;
                    }
                },
                dense,
            );
            buf
        };
        let field_json = fields
            .iter()
            .map(|f| {
                J::O(vec![
                    ("name", J::s(f.name)),
                    ("offset", J::I(f.offset.into())),
                    ("datatype", J::I(f.datatype.into())),
                    ("count", J::I(f.count.into())),
                ])
            })
            .collect();
        out.push(Sample {
            id: format!("point_cloud2_{frame_id}"),
            type_name: "sensor_msgs/msg/PointCloud2",
            cdr,
            expected: J::O(vec![
                ("header", header(stamp, frame_id)),
                ("height", J::I(2)),
                ("width", J::I(3)),
                ("fields", J::L(field_json)),
                ("is_bigendian", J::B(false)),
                ("point_step", J::I(13)),
                ("row_step", J::I(39)),
                ("data", J::bytes(&cloud)),
                ("is_dense", J::B(dense)),
            ]),
        });
    }

    // A 4x3 rgb8 image (copied) and a 3x2 mono16 big-endian one (in place).
    let rgb: Vec<u8> = (0..3 * 4 * 3).map(|i| (255 - i) as u8).collect();
    let stamp = Time::from(1_700_000_002_000_000_001);
    // frame_id, height, width, encoding, is_bigendian, step, data
    type ImageCase = (&'static str, u32, u32, &'static str, u8, u32, Vec<u8>);
    let cases: [ImageCase; 2] = [
        ("camera_optical", 3, 4, "rgb8", 0, 12, rgb),
        ("depth", 2, 3, "mono16", 1, 6, (1..=12).collect()),
    ];
    for (i, (frame_id, height, width, encoding, big, step, data)) in cases.into_iter().enumerate() {
        let cdr = if i == 0 {
            msg::image(stamp, frame_id, height, width, encoding, big, step, &data)
        } else {
            let mut buf = Vec::new();
            msg::image_into(
                &mut buf,
                stamp,
                frame_id,
                height,
                width,
                encoding,
                big,
                step,
                data.len(),
                |px| px.copy_from_slice(&data),
            );
            buf
        };
        out.push(Sample {
            id: format!("image_{encoding}"),
            type_name: "sensor_msgs/msg/Image",
            cdr,
            expected: J::O(vec![
                ("header", header(stamp, frame_id)),
                ("height", J::I(height.into())),
                ("width", J::I(width.into())),
                ("encoding", J::s(encoding)),
                ("is_bigendian", J::I(big.into())),
                ("step", J::I(step.into())),
                ("data", J::bytes(&data)),
            ]),
        });
    }

    // An H.265 access unit: VPS NAL start (Annex B), odd length.
    let au = [0u8, 0, 0, 1, 0x40, 0x01, 0x0c, 0x01, 0xff, 0xff, 0x01];
    let stamp = Time::from(1_700_000_003_033_333_333);
    for (frame_id, format) in [("cam0", "h265"), ("", "h264")] {
        out.push(Sample {
            id: format!("compressed_video_{format}"),
            type_name: "foxglove_msgs/msg/CompressedVideo",
            cdr: msg::compressed_video(stamp, frame_id, &au, format),
            expected: J::O(vec![
                ("timestamp", time(stamp)),
                ("frame_id", J::s(frame_id)),
                ("data", J::bytes(&au)),
                ("format", J::s(format)),
            ]),
        });
    }

    let statuses = [
        DiagnosticStatusSpec {
            level: 0,
            name: "edgerec: storage",
            message: "OK",
            hardware_id: "nvme0n1",
            values: &[("free_bytes", "123456789"), ("write_MBps", "1402.5")],
        },
        DiagnosticStatusSpec {
            level: 2,
            name: "edgerec: clock",
            message: "PTP servo unlocked",
            hardware_id: "",
            values: &[],
        },
    ];
    let stamp = Time::from(1_700_000_004_000_000_000);
    for n in [0, 2] {
        let status_json = statuses[..n]
            .iter()
            .map(|s| {
                J::O(vec![
                    ("level", J::I(s.level.into())),
                    ("name", J::s(s.name)),
                    ("message", J::s(s.message)),
                    ("hardware_id", J::s(s.hardware_id)),
                    (
                        "values",
                        J::L(
                            s.values
                                .iter()
                                .map(|(k, v)| J::O(vec![("key", J::s(k)), ("value", J::s(v))]))
                                .collect(),
                        ),
                    ),
                ])
            })
            .collect();
        out.push(Sample {
            id: format!("diagnostic_array_{n}"),
            type_name: "diagnostic_msgs/msg/DiagnosticArray",
            cdr: msg::diagnostic_array(stamp, &statuses[..n]),
            expected: J::O(vec![
                ("header", header(stamp, "")),
                ("status", J::L(status_json)),
            ]),
        });
    }
    // The clock monitor's sample: unaligned fields after a u8 and a bool
    // exercise the int64 padding.
    for (n, q) in [
        ClockQualitySpec {
            state: 3,
            offset_ns: -42,
            offset_valid: true,
            offset_origin: "ptp4l master_offset",
            mean_path_delay_ns: 1_234,
            port_state: "SLAVE",
            grandmaster: "0a1b2c.fffe.3d4e5f",
            gm_present: true,
            source: "realtime",
        },
        ClockQualitySpec {
            state: 0,
            offset_ns: 0,
            offset_valid: false,
            offset_origin: "",
            mean_path_delay_ns: 0,
            port_state: "",
            grandmaster: "",
            gm_present: false,
            source: "phc /dev/ptp0",
        },
    ]
    .iter()
    .enumerate()
    {
        out.push(Sample {
            id: format!("clock_quality_{n}"),
            type_name: "edgerec_msgs/msg/ClockQuality",
            cdr: msg::clock_quality(stamp, q),
            expected: J::O(vec![
                ("stamp", time(stamp)),
                ("state", J::I(q.state.into())),
                ("offset_ns", J::I(q.offset_ns)),
                ("offset_valid", J::B(q.offset_valid)),
                ("offset_origin", J::s(q.offset_origin)),
                ("mean_path_delay_ns", J::I(q.mean_path_delay_ns)),
                ("port_state", J::s(q.port_state)),
                ("grandmaster", J::s(q.grandmaster)),
                ("gm_present", J::B(q.gm_present)),
                ("source", J::s(q.source)),
            ]),
        });
    }
    // CAN frames: a classic one with 3 bytes (padded to the fixed 8), an
    // extended remote request, an error frame; FD frames of 0, 12 and 64
    // bytes (the bounded sequence's count, then the bytes).
    let stamp = Time::from(1_700_000_005_000_000_123);
    for (n, f) in [
        CanFrameSpec {
            id: 0x123,
            is_rtr: false,
            is_extended: false,
            is_error: false,
            dlc: 3,
            data: &[0xde, 0xad, 0xbe],
        },
        CanFrameSpec {
            id: 0x1234_5678,
            is_rtr: true,
            is_extended: true,
            is_error: false,
            dlc: 8,
            data: &[],
        },
        CanFrameSpec {
            id: 0x40,
            is_rtr: false,
            is_extended: false,
            is_error: true,
            dlc: 8,
            data: &[0, 0, 0, 0, 0, 0, 0x7f, 0x80],
        },
    ]
    .iter()
    .enumerate()
    {
        let mut padded = [0u8; 8];
        padded[..f.data.len()].copy_from_slice(f.data);
        let mut cdr = Vec::new();
        msg::can_frame_into(&mut cdr, stamp, "can0", f);
        out.push(Sample {
            id: format!("can_frame_{n}"),
            type_name: "can_msgs/msg/Frame",
            cdr,
            expected: J::O(vec![
                ("header", header(stamp, "can0")),
                ("id", J::I(f.id.into())),
                ("is_rtr", J::B(f.is_rtr)),
                ("is_extended", J::B(f.is_extended)),
                ("is_error", J::B(f.is_error)),
                ("dlc", J::I(f.dlc.into())),
                ("data", J::bytes(&padded)),
            ]),
        });
    }
    let long: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37)).collect();
    for (n, data) in [&long[..0], &long[..12], &long[..]].iter().enumerate() {
        let f = FdFrameSpec {
            id: if n == 1 { 0x1abc_def0 } else { 0x7ff },
            is_extended: n == 1,
            is_error: false,
            data,
        };
        let mut cdr = Vec::new();
        msg::fd_frame_into(&mut cdr, stamp, "can1 brs", &f);
        out.push(Sample {
            id: format!("fd_frame_{n}"),
            type_name: "ros2_socketcan_msgs/msg/FdFrame",
            cdr,
            expected: J::O(vec![
                ("header", header(stamp, "can1 brs")),
                ("id", J::I(f.id.into())),
                ("is_extended", J::B(f.is_extended)),
                ("is_error", J::B(false)),
                ("len", J::I(data.len() as i64)),
                ("data", J::bytes(data)),
            ]),
        });
    }
    // UDP packets: empty, odd-sized, an Ouster-sized one.
    let big: Vec<u8> = (0..24_896u32).map(|i| (i * 7 % 251) as u8).collect();
    for (n, (source, data)) in [
        ("127.0.0.1:7502", &big[..0]),
        ("192.168.1.201:7502", &big[..3]),
        ("10.0.0.5:2368", &big[..]),
    ]
    .iter()
    .enumerate()
    {
        let mut cdr = Vec::new();
        msg::packet_into(&mut cdr, stamp, source, data);
        out.push(Sample {
            id: format!("packet_{n}"),
            type_name: "edgerec_msgs/msg/Packet",
            cdr,
            expected: J::O(vec![
                ("stamp", time(stamp)),
                ("source", J::s(source)),
                ("data", J::bytes(data)),
            ]),
        });
    }
    out
}

/// `$EDGEREC_PYTHON` (a path, or a bare name looked up in `PATH`), else the
/// workspace's `.venv/bin/python`; `Err` says why neither is there.
fn python() -> Result<PathBuf, String> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    let from_env = match std::env::var_os("EDGEREC_PYTHON") {
        Some(p) => {
            let p = PathBuf::from(p);
            if p.components().count() == 1 || p.exists() {
                return Ok(p);
            }
            format!("EDGEREC_PYTHON={} does not exist", p.display())
        }
        None => "EDGEREC_PYTHON is not set".to_owned(),
    };
    if venv.exists() {
        return Ok(venv);
    }
    Err(format!("{from_env} and {} does not exist", venv.display()))
}

fn write_inputs(dir: &Path) {
    std::fs::create_dir_all(dir.join("defs")).unwrap();
    std::fs::create_dir_all(dir.join("samples")).unwrap();

    let mut index = String::new();
    for def in msgdefs::all() {
        let file = format!("defs/{}.msg", def.name.replace('/', "__"));
        std::fs::write(dir.join(&file), def.text()).unwrap();
        writeln!(index, "{}\t{}\t{file}", def.name, def.encoding).unwrap();
    }
    std::fs::write(dir.join("defs.tsv"), index).unwrap();

    let mut index = String::new();
    for s in samples() {
        let cdr = format!("samples/{}.cdr", s.id);
        let json = format!("samples/{}.json", s.id);
        std::fs::write(dir.join(&cdr), &s.cdr).unwrap();
        let mut text = String::new();
        s.expected.write(&mut text);
        std::fs::write(dir.join(&json), text).unwrap();
        writeln!(index, "{}\t{}\t{cdr}\t{json}", s.id, s.type_name).unwrap();
    }
    std::fs::write(dir.join("samples.tsv"), index).unwrap();

    write_directory_definitions(dir);
}

/// A workspace package as `ros.msg_paths` finds it (`<share>/my_pkg/msg/`),
/// its types using embedded ones and each other, resolved by
/// `DefinitionResolver`. Each line of `dirdefs.tsv`: name, encoding, file
/// and the top-level fields the `.msg` declares (`name:type,...`, types as
/// rosbags names them).
fn write_directory_definitions(dir: &Path) {
    let share = dir.join("share");
    let msg = share.join("my_pkg/msg");
    std::fs::create_dir_all(&msg).unwrap();
    std::fs::create_dir_all(dir.join("dirdefs")).unwrap();
    std::fs::write(
        msg.join("Thing.msg"),
        "# A workspace type.\nstd_msgs/Header header\ngeometry_msgs/Pose pose\n\
         Other[] others\nuint8 KIND_A=1 # a constant\nstring<=8 label\n",
    )
    .unwrap();
    std::fs::write(
        msg.join("Other.msg"),
        "float64[3] v\ngeometry_msgs/Twist twist\n",
    )
    .unwrap();
    let fields = [
        (
            "my_pkg/msg/Thing",
            "header:std_msgs/msg/Header,pose:geometry_msgs/msg/Pose,\
             others:my_pkg/msg/Other,label:string",
        ),
        (
            "my_pkg/msg/Other",
            "v:float64,twist:geometry_msgs/msg/Twist",
        ),
    ];
    let resolver = msgdefs::DefinitionResolver::new(vec![share]);
    let mut index = String::new();
    for (name, fields) in fields {
        let schema = resolver.resolve(name).unwrap();
        let file = format!("dirdefs/{}.msg", name.replace('/', "__"));
        std::fs::write(dir.join(&file), &*schema.data).unwrap();
        writeln!(
            index,
            "{}\t{}\t{file}\t{fields}",
            schema.name, schema.encoding
        )
        .unwrap();
    }
    std::fs::write(dir.join("dirdefs.tsv"), index).unwrap();
}

#[test]
fn definitions_and_cdr_match_rosbags_and_mcap_ros2() {
    let python = match python() {
        Ok(p) => p,
        Err(why) => {
            edgerec_testkit::skip::skip(why);
            return;
        }
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/py/msgdefs_check.py");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("msgdefs_rosbags-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    write_inputs(&dir);

    let out = Command::new(&python)
        .arg(&script)
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
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
        "{} {} {} failed ({}); inputs kept in {}:\n{report}",
        python.display(),
        script.display(),
        dir.display(),
        out.status,
        dir.display()
    );
    // Shown with --nocapture: one line per check.
    println!("{report}");
    let _ = std::fs::remove_dir_all(&dir);
}
