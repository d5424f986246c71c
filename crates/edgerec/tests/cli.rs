//! End-to-end: the `edgerec` binary records synthetic sensors; the result
//! is read back by three independent readers (the `mcap` crate with every
//! CRC, Python `mcap` + `mcap-ros2-support`, Python `rosbags`) and by our
//! own `check`. Plus the CLI contracts: exit codes, signals, info.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

fn config(root: &Path, compression: &str, extra: &str) -> String {
    format!(
        r#"
[recording]
root = "{root}"
session_prefix = "test"

[health]
# No hardware watchdog in tests; socket and fault file beside the root.
watchdog = ""
status_socket = "{root}.sock"
fault_file = "{root}.fault.json"

[retention]
# Tests must not depend on how full the machine's disk is.
min_free_bytes = 0
min_free_percent = 0

[storage]
sync_interval = "200ms"

[mcap]
compression = "{compression}"
chunk_size = "1MiB"
chunk_max_age = "100ms"

[pipeline]
memory_budget = "128MiB"

[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 500

[[sources.synthetic]]
topic = "/lidar/points"
type = "sensor_msgs/msg/PointCloud2"
rate = 10
payload_size = "256KiB"

[[sources.synthetic]]
topic = "/camera/image_raw"
type = "sensor_msgs/msg/Image"
rate = 30
payload_size = 921600

[[sources.synthetic]]
topic = "/status"
type = "std_msgs/msg/String"
rate = 50
payload_size = 100
latched = true
{extra}
"#,
        root = root.display()
    )
}

fn edgerec(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("EDGEREC_LOG", "warn")
        .output()
        .expect("run edgerec")
}

fn session_dir(root: &Path) -> PathBuf {
    let mut v: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(v.len(), 1, "one session directory in {}", root.display());
    v.remove(0)
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn record(compression: &str, secs: &str) -> (tempfile::TempDir, PathBuf, serde_json::Value) {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("rec");
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(&cfg, config(&root, compression, "")).unwrap();
    let report = d.path().join("report.json");
    let o = edgerec(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--duration",
        secs,
        "--report-json",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let dir = session_dir(&root);
    (d, dir, r)
}

/// The three readers on one recording.
fn verify_with_every_reader(dir: &Path, report: &serde_json::Value, report_path: &Path) {
    let segs: Vec<PathBuf> = edgerec_format::bag::segment_files(dir).unwrap();
    assert!(!segs.is_empty());
    for s in &segs {
        assert!(
            s.extension().is_some_and(|e| e == "mcap"),
            "unfinished segment left: {}",
            s.display()
        );
    }
    // 1. The mcap crate, every CRC.
    let mut per_topic: std::collections::BTreeMap<String, Vec<u32>> = Default::default();
    for s in &segs {
        let rb =
            edgerec_testkit::mcap_readback(s).unwrap_or_else(|e| panic!("{}: {e}", s.display()));
        assert_eq!(rb.messages.len() as u64, rb.message_count);
        assert!(rb.metadata.contains_key("edgerec.drops"));
        let mut started = std::collections::BTreeSet::new();
        for m in rb.messages {
            let seqs = per_topic.entry(m.topic.clone()).or_default();
            // A latched channel's last message opens every later segment
            // again, with its sequence number: count it once.
            let first_here = started.insert(m.topic.clone());
            if first_here && seqs.last() == Some(&m.sequence) {
                continue;
            }
            seqs.push(m.sequence);
        }
    }
    for c in report["channels"].as_array().unwrap() {
        let topic = c["topic"].as_str().unwrap();
        let written = c["written"].as_u64().unwrap();
        let seqs = per_topic.get(topic).cloned().unwrap_or_default();
        assert_eq!(seqs.len() as u64, written, "{topic}");
        assert!(written > 0, "{topic} recorded nothing");
        // The MCAP sequence field counts accepted messages per channel:
        // gap-free and in order.
        assert!(
            seqs.iter().enumerate().all(|(i, s)| *s == i as u32),
            "{topic}: {seqs:?}"
        );
    }
    // 2. Our own check.
    let o = edgerec(&["check", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    // 3 + 4. The Python readers.
    match edgerec_testkit::python() {
        Some(py) => {
            let script = edgerec_testkit::workspace_root().join("tests/py/verify_bag.py");
            let o = Command::new(py)
                .arg(script)
                .arg(dir)
                .arg(report_path)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "Python readers rejected the bag:\n{}",
                text(&o)
            );
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(out.contains("verified"), "{out}");
        }
        None => eprintln!(
            "SKIP Python readers: no virtual environment (set EDGEREC_PYTHON or run scripts/test)"
        ),
    }
}

#[test]
fn records_every_compression_and_three_readers_agree() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    for comp in ["none", "lz4", "zstd"] {
        let (d, dir, report) = record(comp, "2s");
        assert_eq!(report["drops"].as_u64(), Some(0), "{comp}: {report}");
        let backend = report["backend"].as_str().unwrap();
        assert!(!backend.is_empty());
        verify_with_every_reader(&dir, &report, &d.path().join("report.json"));
        // metadata.yaml lists the segment and the topics.
        let meta = std::fs::read_to_string(dir.join("metadata.yaml")).unwrap();
        assert!(meta.contains("storage_identifier: mcap"), "{meta}");
        assert!(meta.contains("name: /camera/image_raw\n"), "{meta}");
        // Closed segments are read-only.
        use std::os::unix::fs::PermissionsExt;
        for s in edgerec_format::bag::segment_files(&dir).unwrap() {
            assert_eq!(
                std::fs::metadata(&s).unwrap().permissions().mode() & 0o777,
                0o444
            );
        }
    }
}

#[test]
fn splits_lose_duplicate_and_reorder_nothing() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("rec");
    let cfg = d.path().join("edgerec.toml");
    let extra = "\n[segment]\nmax_bytes = \"16MiB\"\n";
    std::fs::write(&cfg, config(&root, "lz4", extra)).unwrap();
    let report = d.path().join("report.json");
    let o = edgerec(&[
        "run",
        "--config",
        cfg.to_str().unwrap(),
        "--duration",
        "3s",
        "--report-json",
        report.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let dir = session_dir(&root);
    let segs = edgerec_format::bag::segment_files(&dir).unwrap();
    assert!(segs.len() >= 3, "{} segments: {segs:?}", segs.len());
    for (i, s) in segs.iter().enumerate() {
        let name = s.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.ends_with(&format!("_{i}.mcap")), "{name}");
    }
    verify_with_every_reader(&dir, &r, &report);
    // metadata.yaml lists every segment.
    let meta = std::fs::read_to_string(dir.join("metadata.yaml")).unwrap();
    for s in &segs {
        let name = s.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            meta.contains(&format!("- path: {name}\n")),
            "{name} not in\n{meta}"
        );
    }
}

#[test]
fn config_error_exits_78_and_creates_nothing() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("rec");
    let cfg = d.path().join("bad.toml");
    let text_cfg = config(&root, "none", "").replace("chunk_size =", "chunk_sise =");
    std::fs::write(&cfg, text_cfg).unwrap();
    let o = edgerec(&["run", "--config", cfg.to_str().unwrap(), "--duration", "1s"]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.toml:22:1"), "{err}");
    assert!(err.contains("chunk_size"), "{err}");
    assert!(!root.exists(), "nothing may be created on a config error");

    let o = edgerec(&[
        "run",
        "--config",
        d.path().join("missing.toml").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.toml"));
}

/// Five bytes a fuzzer found that panicked inside toml_edit 0.23 (exit
/// 101): `check` and `run` both exit 78 naming the file, line and column.
#[test]
fn check_and_run_of_the_toml_edit_span_panic_exit_78_naming_the_file() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("span.toml");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/finds/config_parse/config-toml-edit-span-panic.toml"),
        &cfg,
    )
    .unwrap();
    let o = edgerec(&["check", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with("INVALID ") && out.contains("span.toml:1:2"),
        "{out}"
    );
    let o = edgerec(&["run", "--config", cfg.to_str().unwrap(), "--duration", "1s"]);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("span.toml:1:2"),
        "{}",
        text(&o)
    );
}

/// Every subcommand's `--help` ends with an example to copy.
#[test]
fn every_subcommand_help_shows_an_example() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    for sub in [
        "run", "record", "info", "cat", "convert", "reindex", "export", "import", "check",
        "recover", "status", "leds", "ctl", "offload", "upload", "version",
    ] {
        let o = edgerec(&[sub, "--help"]);
        assert!(o.status.success(), "{sub}: {}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        let example = out
            .lines()
            .skip_while(|l| *l != "Example:")
            .nth(1)
            .unwrap_or_else(|| panic!("{sub} --help has no example:\n{out}"));
        assert!(
            example.trim_start().starts_with(&format!("edgerec {sub}")),
            "{sub}: {example}"
        );
    }
}

#[test]
fn sigterm_and_sigint_finish_every_file_cleanly() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("rec");
        let cfg = d.path().join("edgerec.toml");
        std::fs::write(&cfg, config(&root, "zstd", "")).unwrap();
        let report = d.path().join("report.json");
        let child = Command::new(BIN)
            .args([
                "run",
                "--config",
                cfg.to_str().unwrap(),
                "--report-json",
                report.to_str().unwrap(),
            ])
            .env("EDGEREC_LOG", "warn")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // 1.5 s into the recording, not after the spawn: an emulated
        // start-up (user-mode QEMU, a debug build) can take most of that,
        // and /edgerec/status is published once a second.
        assert!(
            edgerec_testkit::wait_for_active_segment(&root, Duration::from_secs(60)),
            "no segment opened in 60 s"
        );
        std::thread::sleep(Duration::from_millis(1500));
        // SAFETY: kill(2) on the pid of a child we own and have not reaped.
        assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "signal {sig}: {}", text(&o));
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
        let dir = session_dir(&root);
        verify_with_every_reader(&dir, &r, &report);
    }
}

#[test]
fn check_names_a_corrupt_chunk_and_info_describes_the_bag() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let (_d, dir, report) = record("none", "1s");
    let o = edgerec(&["info", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for want in [
        "Files:",
        "Duration:",
        "Messages:",
        "/imu",
        "sensor_msgs/msg/Imu",
        "Frequency:",
    ] {
        assert!(out.contains(want), "info lacks {want}:\n{out}");
    }
    assert!(
        out.contains(&format!(
            "Messages:          {}",
            report["messages_written"]
        )),
        "{out}"
    );

    let seg = edgerec_format::bag::segment_files(&dir).unwrap().remove(0);
    let mut bytes = std::fs::read(&seg).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&seg, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(&seg, &bytes).unwrap();
    let o = edgerec(&["check", seg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("INVALID") && out.contains("at byte"), "{out}");
}

/// The two files a fuzzer found crashing `edgerec check` (a panic, exit
/// 101, and an abort allocating 2 TiB): each is one INVALID line naming
/// the chunk's offset and the field, exit 1.
#[test]
fn check_of_the_fuzz_finds_says_invalid_and_exits_1() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../format/tests/data/fuzz");
    for name in ["check-capacity-overflow.mcap", "check-alloc-2tib.mcap"] {
        let f = fuzz.join(name);
        let o = edgerec(&["check", f.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        let line = out
            .lines()
            .find(|l| l.starts_with("INVALID"))
            .unwrap_or_else(|| panic!("{name}: no INVALID line: {}", text(&o)));
        assert!(
            line.contains("at byte 70") && line.contains("chunk.uncompressed_size"),
            "{line}"
        );
    }
}

/// A file `info` cannot read is listed as UNREADABLE and makes the exit
/// status 1 (it was 0); a valid file written without CRCs says so in
/// `check` instead of claiming every CRC verified.
#[test]
fn info_of_an_unreadable_file_exits_1_and_check_names_absent_crcs() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // A ROS 1 bag whose first record is garbage: the ROS 1 reader's error,
    // naming the file and the byte, and exit 1.
    let bag = dir.path().join("old.bag");
    std::fs::write(&bag, b"#ROSBAG V2.0\nnot a bag past its first line").unwrap();
    let o = edgerec(&["info", bag.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("old.bag") && e.contains("at byte 13"),
        "{}",
        text(&o)
    );
    // An MCAP file that is not one: listed as UNREADABLE, exit 1.
    let bag = dir.path().join("broken.mcap");
    std::fs::write(&bag, b"not an MCAP file at all").unwrap();
    let o = edgerec(&["info", bag.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("UNREADABLE"),
        "{}",
        text(&o)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("1 file(s)"),
        "{}",
        text(&o)
    );

    let f = dir.path().join("no-crc.mcap");
    let file = std::fs::File::create(&f).unwrap();
    let mut w = mcap::WriteOptions::new()
        .profile("ros2")
        .calculate_chunk_crcs(false)
        .calculate_data_section_crc(false)
        .calculate_summary_section_crc(false)
        .create(std::io::BufWriter::new(file))
        .unwrap();
    let schema = w
        .add_schema("std_msgs/msg/String", "ros2msg", b"string data")
        .unwrap();
    let ch = w
        .add_channel(schema, "/s", "cdr", &Default::default())
        .unwrap();
    let header = mcap::records::MessageHeader {
        channel_id: ch,
        sequence: 0,
        log_time: 1,
        publish_time: 1,
    };
    w.write_to_known_channel(&header, &[0, 1, 0, 0, 1, 0, 0, 0, 0])
        .unwrap();
    w.finish().unwrap();
    drop(w);
    let o = edgerec(&["check", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("3 CRC(s) absent"), "{out}");
    let o = edgerec(&["info", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}
