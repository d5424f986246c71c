//! `edgerec upload` end to end: `edgerec run` records the demo
//! (config/demo.toml) for 10 s, then `edgerec upload` sends the session
//! directory to a real S3 server over TLS (PyPI moto[server] on loopback
//! with a CA the test makes, `tests/py/s3peer.py`) with the credentials
//! in an owner-only shared-credentials file; boto3 reads every object
//! back byte for byte.
//! The session manifest follows: each file's SHA-256 (boto3's), the
//! messages and start time metadata.yaml holds. Run again, it sends
//! nothing ("already there"). A credentials file
//! others can read is refused with exit 78 and the `chmod` that fixes it;
//! a missing bucket ends with exit 1 and the fix; nothing local is ever
//! deleted.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use edgerec_testkit::s3::Moto;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

/// `[offload]` for `bucket` at `endpoint`: https with the CA in `tls`,
/// or http.
fn offload(root: &Path, endpoint: &str, tls: Option<&Path>, bucket: &str, creds: &Path) -> String {
    let tls = match tls {
        Some(dir) => format!("ca_file = \"{}\"", dir.join("ca.pem").display()),
        None => "allow_http = true".to_owned(),
    };
    format!(
        r#"
[offload]
endpoint = "{endpoint}"
{tls}
bucket = "{bucket}"
vehicle_id = "robot-7"
key_template = "{{vehicle}}/{{date}}/{{session}}/{{file}}"
credentials_file = "{creds}"
journal_dir = "{journal}"
part_size = "5MiB"
concurrency = 4
"#,
        creds = creds.display(),
        journal = journal_dir(root).display(),
    )
}

/// A recording of two synthetic topics into `root`, sent to `server`.
fn config(cfg: &Path, root: &Path, server: &Moto, bucket: &str, creds: &Path) {
    config_at(
        cfg,
        root,
        &server.endpoint,
        server.tls.as_deref(),
        bucket,
        creds,
    )
}

/// The same, sent to `endpoint` (a fault proxy in front of a server).
fn config_at(
    cfg: &Path,
    root: &Path,
    endpoint: &str,
    tls: Option<&Path>,
    bucket: &str,
    creds: &Path,
) {
    std::fs::write(
        cfg,
        format!(
            r#"
[recording]
root = "{root}"
session_prefix = "demo"

[health]
watchdog = ""
fault_file = "{root}/last-fault.json"
status_socket = "{root}/status.sock"

[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 400

[[sources.synthetic]]
topic = "/camera/image_raw"
type = "sensor_msgs/msg/Image"
rate = 20
payload_size = 921600
{offload}"#,
            root = root.display(),
            offload = offload(root, endpoint, tls, bucket, creds),
        ),
    )
    .unwrap();
}

/// `scripts/demo`'s configuration (config/demo.toml: IMU, lidar, camera
/// topics and an H.265 test camera) recording into `root`, sent to
/// `server`.
fn demo_config(cfg: &Path, root: &Path, server: &Moto, bucket: &str, creds: &Path) {
    let demo = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/demo.toml"),
    )
    .unwrap();
    assert!(
        demo.contains("\"./data\""),
        "config/demo.toml records into ./data"
    );
    let demo = demo.replace("\"./data", &format!("\"{}", root.display()));
    std::fs::write(
        cfg,
        format!(
            "{demo}\n{}",
            offload(root, &server.endpoint, server.tls.as_deref(), bucket, creds)
        ),
    )
    .unwrap();
}

/// The upload journal beside the recordings.
fn journal_dir(root: &Path) -> std::path::PathBuf {
    root.parent().unwrap().join("journal")
}

fn upload(cfg: &Path, session: &Path) -> Output {
    Command::new(BIN)
        .args(["upload", "--config", cfg.to_str().unwrap()])
        .arg(session)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_recorded_session_reaches_the_bucket_byte_for_byte() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let tls = d.path().join("tls");
    std::fs::create_dir(&tls).unwrap();
    let server = Moto::start_tls(&tls, false);
    server.make_bucket("fleet-recordings");
    let root = d.path().join("data");
    let creds = server.credentials_file(d.path());
    let cfg = d.path().join("edgerec.toml");
    demo_config(&cfg, &root, &server, "fleet-recordings", &creds);

    let run = Command::new(BIN)
        .args([
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--duration",
            "10s",
        ])
        .env("EDGEREC_LOG", "warn")
        .output()
        .unwrap();
    assert!(run.status.success(), "edgerec run: {}", text(&run));
    let session = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir() && p.file_name().is_some_and(|n| n != "events"))
        .expect("a session directory");
    let name = session.file_name().unwrap().to_string_lossy().into_owned();
    let local: Vec<String> = {
        let mut v: Vec<String> = std::fs::read_dir(&session)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert!(local.iter().any(|f| f.ends_with(".mcap")), "{local:?}");
    assert!(local.contains(&"metadata.yaml".to_owned()), "{local:?}");

    let o = upload(&cfg, &session);
    assert!(o.status.success(), "edgerec upload: {}", text(&o));
    let summary = String::from_utf8_lossy(&o.stdout).into_owned();
    println!("{}", summary.trim());
    assert!(
        summary.starts_with(&format!("{} sent", local.len())),
        "{summary}"
    );

    // boto3 reads every file back, byte for byte, under the template,
    // and the session manifest.
    let v = server.verify("fleet-recordings", "robot-7/", &session);
    let objects = v.as_object().unwrap();
    assert_eq!(objects.len(), local.len() + 1, "{v:#}");
    let date = edgerec_offload::key::date_from_session(&name).unwrap();
    for f in &local {
        let key = format!("robot-7/{date}/{name}/{f}");
        assert_eq!(v[&key]["equal"], true, "{key}: {v:#}");
    }
    // The manifest: every file with boto3's SHA-256 of it, and the
    // messages and time range the recorder wrote in metadata.yaml.
    let m: serde_json::Value = serde_json::from_str(&server.get(
        "fleet-recordings",
        &format!("robot-7/{date}/{name}/manifest.json"),
    ))
    .unwrap();
    assert_eq!(
        (m["vehicle"].as_str(), m["session"].as_str()),
        (Some("robot-7"), Some(name.as_str()))
    );
    let files = m["files"].as_array().unwrap();
    assert_eq!(files.len(), local.len(), "{m:#}");
    for f in files {
        let key = format!("robot-7/{date}/{name}/{}", f["file"].as_str().unwrap());
        assert_eq!(f["sha256"], v[&key]["sha256"], "{key}: {m:#}");
    }
    let meta = std::fs::read_to_string(session.join("metadata.yaml")).unwrap();
    let field = |name: &str| -> u64 {
        meta.lines()
            .find_map(|l| l.trim().strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in metadata.yaml: {meta}"))
    };
    let messages = field("message_count:");
    assert!(messages > 1000, "{meta}");
    assert_eq!(m["messages"], messages, "{m:#}");
    let start = field("nanoseconds_since_epoch:");
    assert_eq!(m["start_ns"], start, "{m:#}");
    assert!(
        m["end_ns"].as_u64().unwrap() > start + 2_000_000_000,
        "{m:#}"
    );

    // Again: nothing to send, nothing deleted.
    let o = upload(&cfg, &session);
    assert!(o.status.success(), "edgerec upload: {}", text(&o));
    let again = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        again.starts_with("0 sent (0.0 MB")
            && again.contains(&format!("{} already there", local.len()))
            && again.contains("1 of 1 session manifests"),
        "{again}"
    );
    assert_eq!(std::fs::read_dir(&session).unwrap().count(), local.len());

    // A credentials file others can read: exit 78, the fix named.
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = upload(&cfg, &session);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(text(&o).contains("chmod 600"), "{}", text(&o));
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o600)).unwrap();

    // A bucket that does not exist: exit 1, the fix named.
    demo_config(&cfg, &root, &server, "no-such-bucket", &creds);
    let o = upload(&cfg, &session);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("NoSuchBucket") && text(&o).contains("offload.bucket"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read_dir(&session).unwrap().count(), local.len());
}

/// Part numbers an `edgerec upload` log says it sent.
fn parts_sent(log: &str) -> Vec<u32> {
    let mut v: Vec<u32> = log
        .lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once(": part ")?;
            let (n, tail) = rest.split_once(" of ")?;
            tail.ends_with(" sent").then(|| n.parse().ok())?
        })
        .collect();
    v.sort_unstable();
    v
}

/// `offload.max_rate` paces what goes to the connection, all parts
/// together: 12 MiB in 5 MiB parts sent four at a time at 4 MB/s take at
/// least 3 s (on loopback they take a fraction of a second without it),
/// and arrive byte for byte.
#[test]
fn max_rate_caps_the_parts_together() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let (server, d, root, session) = moto_and_session();
    std::fs::write(
        session.join("demo_20261206T101500Z_0.mcap"),
        edgerec_testkit::noise(12 << 20, 1),
    )
    .unwrap();
    let creds = server.credentials_file(d.path());
    let cfg = d.path().join("edgerec.toml");
    config(&cfg, &root, &server, "fleet-recordings", &creds);
    let capped = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("concurrency = 4", "concurrency = 4\nmax_rate = \"4MB\"");
    std::fs::write(&cfg, capped).unwrap();
    let started = std::time::Instant::now();
    let out = upload(&cfg, &session);
    let took = started.elapsed();
    assert!(out.status.success(), "{}", text(&out));
    let want = (12u64 << 20) as f64 / 4e6;
    assert!(
        took.as_secs_f64() >= want * 0.95,
        "12 MiB at 4 MB/s took {took:?} (at least {want:.1} s)"
    );
    let v = server.verify("fleet-recordings", "robot-7/", &session);
    let key = v
        .as_object()
        .unwrap()
        .keys()
        .find(|k| k.ends_with("_0.mcap"))
        .unwrap_or_else(|| panic!("{v:#}"))
        .clone();
    assert_eq!(v[&key]["equal"], true, "{v:#}");
}

/// moto with the bucket `fleet-recordings`, and an empty session
/// directory `demo_20261206T101500Z` under `<tempdir>/data`.
fn moto_and_session() -> (Moto, tempfile::TempDir, PathBuf, PathBuf) {
    let server = Moto::start();
    server.make_bucket("fleet-recordings");
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("data");
    let session = root.join("demo_20261206T101500Z");
    std::fs::create_dir_all(&session).unwrap();
    (server, d, root, session)
}

/// SIGKILL in the middle of a multipart upload, then `edgerec upload`
/// again: it goes on from the journal, sends only the parts the journal
/// did not record as acknowledged (at most the one in flight when killed
/// among those the store has), and the object boto3 reads back is the
/// file, byte for byte. The journal is empty afterwards.
#[test]
fn a_killed_upload_goes_on_and_sends_no_acknowledged_part_again() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let (server, d, root, session) = moto_and_session();
    // 60 MiB of noise: twelve 5 MiB parts.
    let data = edgerec_testkit::noise(60 << 20, 1);
    std::fs::write(session.join("demo_20261206T101500Z_0.mcap"), &data).unwrap();
    let creds = server.credentials_file(d.path());
    let cfg = d.path().join("edgerec.toml");
    config(&cfg, &root, &server, "fleet-recordings", &creds);
    let one_at_a_time = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("concurrency = 4", "concurrency = 1");
    std::fs::write(&cfg, one_at_a_time).unwrap();

    let log1 = d.path().join("first.log");
    let mut child = Command::new(BIN)
        .args(["upload", "--config", cfg.to_str().unwrap()])
        .arg(&session)
        .env("EDGEREC_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log1).unwrap())
        .spawn()
        .unwrap();
    // Killed once the journal holds three acknowledged parts.
    let journal = journal_dir(&root);
    let t0 = std::time::Instant::now();
    let acked = loop {
        let lines = std::fs::read_dir(&journal)
            .ok()
            .and_then(|mut rd| rd.next())
            .and_then(|e| e.ok())
            .and_then(|e| std::fs::read_to_string(e.path()).ok())
            .map(|t| t.lines().count().saturating_sub(1))
            .unwrap_or(0);
        if lines >= 3 {
            break lines;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the upload ended before it was killed"
        );
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no part acknowledged in 60 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let journaled: Vec<u32> = std::fs::read_dir(&journal)
        .unwrap()
        .flatten()
        .flat_map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap()
                .lines()
                .skip(1)
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter_map(|v| v["part"].as_u64().map(|n| n as u32))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        journaled.len() >= acked && journaled.len() < 12,
        "{journaled:?}"
    );

    let o = Command::new(BIN)
        .args(["upload", "--config", cfg.to_str().unwrap()])
        .arg(&session)
        .env("EDGEREC_LOG", "info")
        .output()
        .unwrap();
    let log = text(&o);
    assert!(o.status.success(), "edgerec upload again: {log}");
    let again = parts_sent(&log);
    println!("killed after parts {journaled:?} were journaled; the second run sent {again:?}");
    for n in &journaled {
        assert!(
            !again.contains(n),
            "part {n} was acknowledged and sent again: {log}"
        );
    }
    let mut all: Vec<u32> = journaled.iter().chain(&again).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (1..=12).collect::<Vec<u32>>(), "{log}");
    assert!(log.contains("going on with the upload cut before"), "{log}");

    let v = server.verify("fleet-recordings", "robot-7/", &session);
    let objects = v.as_object().unwrap();
    assert_eq!(objects.len(), 2, "{v:#}");
    for (key, o) in objects {
        if !key.ends_with("/manifest.json") {
            assert_eq!(o["equal"], true, "{key}: {o}");
        }
    }
    assert_eq!(std::fs::read_dir(&journal).unwrap().count(), 0);
}

/// A store that answers wrong keys' 403 (InvalidAccessKeyId), and one
/// that answers CreateMultipartUpload with an HTML page (a captive
/// portal): `edgerec upload` ends with exit 1 and an error that names the
/// fix or what was wrong with the reply; the session is untouched.
#[test]
fn refused_keys_and_garbage_replies_are_clear_errors_and_delete_nothing() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let (server, d, root, session) = moto_and_session();
    // Larger than a part: a multipart upload.
    std::fs::write(
        session.join("demo_20261206T101500Z_0.mcap"),
        vec![7u8; 6 << 20],
    )
    .unwrap();
    std::fs::write(
        session.join("metadata.yaml"),
        b"rosbag2_bagfile_information:\n",
    )
    .unwrap();
    let before: Vec<_> = std::fs::read_dir(&session)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let creds = server.credentials_file(d.path());
    let cfg = d.path().join("edgerec.toml");
    for (fault, want) in [
        (
            "deny",
            // The first request is a HEAD, whose 403 has no body (as at
            // S3): the status names the fix.
            ["answered 403", "check the credentials"],
        ),
        (
            "garbage",
            ["CreateMultipartUpload", "reply is not understood"],
        ),
    ] {
        let proxy = edgerec_testkit::s3::FaultProxy::start(&server, fault, 0.0);
        config_at(
            &cfg,
            &root,
            &proxy.endpoint,
            None,
            "fleet-recordings",
            &creds,
        );
        let o = upload(&cfg, &session);
        let log = text(&o);
        assert_eq!(o.status.code(), Some(1), "{fault}: {log}");
        for w in want {
            assert!(log.contains(w), "{fault}: no `{w}` in: {log}");
        }
        let after: Vec<_> = std::fs::read_dir(&session)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(after.len(), before.len(), "{fault}: {after:?}");
    }
}
