//! Offload inside `edgerec run` (`offload.upload = "all"`): a 10 s
//! recording in mixed mode, segments closed every 3 s and an event clip
//! every 3 s, sent as they close to a real S3 server over TLS (PyPI
//! moto[server] on loopback with a CA the test makes). When the run ends
//! the queue is empty and boto3 reads back every segment, the session's
//! metadata.yaml and manifest, and every clip's files and manifest, byte
//! for byte; nothing local is deleted. With `upload = "events"` only the
//! clip and the segments its window overlaps are sent.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use edgerec_testkit::s3::Moto;

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The session directory under `root`, holding at least `min` closed
/// segments.
fn session_with_segments(root: &Path, min: usize) -> PathBuf {
    let session = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir() && p.file_name().is_some_and(|n| n != "events"))
        .expect("a session directory");
    let segments = files_in(&session)
        .iter()
        .filter(|f| f.ends_with(".mcap"))
        .count();
    assert!(
        segments >= min,
        "{segments} segments: {:?}",
        files_in(&session)
    );
    session
}

/// boto3's objects under `robot-7/<dir's name>/` against the files of
/// `dir`: every file byte for byte, and the manifest listing them all.
fn assert_at_store(server: &Moto, dir: &Path) {
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let prefix = format!("robot-7/{name}/");
    let v = server.verify("fleet-recordings", &prefix, dir);
    let objects = v.as_object().unwrap();
    let local = files_in(dir);
    let mut keys: Vec<String> = objects
        .keys()
        .map(|k| k.strip_prefix(&prefix).unwrap().to_owned())
        .collect();
    keys.sort();
    let mut want = local.clone();
    want.push("manifest.json".to_owned());
    want.sort();
    assert_eq!(keys, want, "{}: {v:#}", dir.display());
    for f in &local {
        assert_eq!(v[format!("{prefix}{f}")]["equal"], true, "{f}: {v:#}");
    }
    let m: serde_json::Value =
        serde_json::from_str(&server.get("fleet-recordings", &format!("{prefix}manifest.json")))
            .unwrap();
    let mut listed: Vec<String> = m["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap().to_owned())
        .collect();
    listed.sort();
    assert_eq!(listed, local, "{m:#}");
}

/// A recording under `root` of one 120 KB point cloud at 10 Hz, segments
/// of `segment` (a duration), with `extra` (sections) after it.
fn lidar_config(root: &Path, prefix: &str, segment: &str, extra: &str) -> String {
    format!(
        r#"
[recording]
root = "{root}"
session_prefix = "{prefix}"

[segment]
max_duration = "{segment}"

[health]
watchdog = ""
fault_file = "{root}/last-fault.json"
status_socket = "{root}/status.sock"

[[sources.synthetic]]
topic = "/lidar/points"
type = "sensor_msgs/msg/PointCloud2"
rate = 10
payload_size = "120KB"

{extra}"#,
        root = root.display(),
    )
}

/// moto over TLS with the bucket made, and the `[offload]` section that
/// sends to it as `upload` says.
fn tls_store(dir: &Path, upload: &str) -> (Moto, String) {
    let tls = dir.join("tls");
    std::fs::create_dir(&tls).unwrap();
    let server = Moto::start_tls(&tls, false);
    server.make_bucket("fleet-recordings");
    let creds = server.credentials_file(dir);
    let section = format!(
        r#"
[offload]
endpoint = "{endpoint}"
ca_file = "{ca}"
bucket = "fleet-recordings"
vehicle_id = "robot-7"
credentials_file = "{creds}"
journal_dir = "{journal}"
upload = "{upload}"
"#,
        endpoint = server.endpoint,
        ca = tls.join("ca.pem").display(),
        creds = creds.display(),
        journal = dir.join("journal").display(),
    );
    (server, section)
}

/// `edgerec run` of `cfg` for `duration`, its output piped.
fn spawn_run(cfg: &Path, duration: &str) -> std::process::Child {
    Command::new(BIN)
        .args([
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--duration",
            duration,
        ])
        .env("EDGEREC_LOG", "info")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for the run to succeed: its stdout, stderr and `offload:` line.
fn wait_run(child: std::process::Child) -> (String, String, String) {
    let run = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&run.stdout).into_owned();
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "edgerec run: {out}{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("offload:"))
        .unwrap_or_else(|| panic!("no offload line: {out}"))
        .to_owned();
    println!("{line}");
    (out, err, line)
}

/// A mixed-mode recording cut every 2 s with `offload`: `/imu` at 200 Hz
/// recorded continuously, `/imu_raw` at 100 Hz in event clips (1 s before
/// an event, 1 s after), a control socket for `edgerec ctl trigger`.
fn trigger_config(root: &Path, offload: &str) -> String {
    format!(
        r#"
[recording]
root = "{root}"
session_prefix = "demo"
mode = "mixed"
continuous_topics = ["/imu"]

[segment]
max_duration = "2s"

[health]
watchdog = ""
fault_file = "{root}/last-fault.json"
status_socket = "{root}/status.sock"
control_socket = "{root}/control.sock"

[triggers]
pre = "1s"
post = "1s"

[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 200

# What the clip records (mixed mode: the topics not recorded continuously).
[[sources.synthetic]]
topic = "/imu_raw"
type = "sensor_msgs/msg/Imu"
rate = 100

{offload}"#,
        root = root.display(),
    )
}

/// A temporary directory with moto over TLS and [`trigger_config`]
/// sending to it as `upload` says (and `extra` lines of `[offload]`):
/// the directory, the server, the recordings root, the configuration.
fn trigger_run(upload: &str, extra: &str) -> (tempfile::TempDir, Moto, PathBuf, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let (server, offload) = tls_store(d.path(), upload);
    let root = d.path().join("data");
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(&cfg, trigger_config(&root, &format!("{offload}{extra}"))).unwrap();
    (d, server, root, cfg)
}

/// `edgerec ctl trigger` of the recorder `cfg` runs.
fn ctl_trigger(cfg: &Path) {
    let ctl = Command::new(BIN)
        .args([
            "ctl",
            "--config",
            cfg.to_str().unwrap(),
            "trigger",
            "--reason",
            "hard brake",
        ])
        .output()
        .unwrap();
    assert!(ctl.status.success(), "{ctl:?}");
}

#[test]
fn a_running_recorder_sends_each_segment_and_clip_as_it_closes() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (server, offload) = tls_store(d.path(), "all");
    let root = d.path().join("data");
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[recording]
root = "{root}"
session_prefix = "demo"
mode = "mixed"
continuous_topics = ["/imu"]

[segment]
max_duration = "3s"

[health]
watchdog = ""
fault_file = "{root}/last-fault.json"
status_socket = "{root}/status.sock"

[triggers]
pre = "1s"
post = "1s"

[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 400

[[sources.synthetic]]
topic = "/lidar/points"
type = "sensor_msgs/msg/PointCloud2"
rate = 10
payload_size = "120KB"

[[trigger]]
name = "sample"
every = "3s"
topics = ["/imu", "/lidar/points"]

{offload}"#,
            root = root.display(),
        ),
    )
    .unwrap();
    let child = spawn_run(&cfg, "10s");
    // Segments close at 3 s and 6 s: by 8 s, while it still records, the
    // store holds the first of them.
    std::thread::sleep(Duration::from_secs(8));
    let early = server.verify("fleet-recordings", "robot-7/demo_", &root);
    let early: Vec<&String> = early
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.ends_with(".mcap"))
        .collect();
    let (_, err, line) = wait_run(child);
    assert!(line.contains(" 0 waiting"), "{line}\n{err}");
    assert!(line.contains("0 failed tries"), "{line}\n{err}");

    let session = session_with_segments(&root, 3);
    assert_at_store(&server, &session);
    let clips: Vec<PathBuf> = std::fs::read_dir(root.join("events"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert!(clips.len() >= 2, "{clips:?}");
    for clip in &clips {
        assert_at_store(&server, clip);
    }
    assert!(
        line.contains(&format!("{} event clips", clips.len())),
        "{line}"
    );
    // Sent as they closed: segments were at the store while the recorder
    // still recorded.
    assert!(
        !early.is_empty(),
        "no segment at the store 8 s into the run\n{err}"
    );
}

/// A store that cannot be reached (nothing listens on its port): the
/// recording goes on, the files wait and are tried again, and the stop
/// takes `drain_on_stop` (2 s) more, not the 5 minutes a request may be
/// retried; the last lines say what is left. Nothing local is deleted.
#[test]
fn a_store_that_is_down_does_not_hold_the_stop() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let root = d.path().join("data");
    let creds = d.path().join("credentials");
    std::fs::write(
        &creds,
        "[default]\naws_access_key_id = k\naws_secret_access_key = s\n",
    )
    .unwrap();
    std::fs::set_permissions(&creds, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[recording]
root = "{root}"
session_prefix = "demo"

[segment]
max_duration = "1s"

[health]
watchdog = ""
fault_file = "{root}/last-fault.json"
status_socket = "{root}/status.sock"

[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 400

[offload]
endpoint = "http://127.0.0.1:{port}"
allow_http = true
bucket = "fleet-recordings"
credentials_file = "{creds}"
journal_dir = "{journal}"
upload = "all"
drain_on_stop = "2s"
"#,
            root = root.display(),
            creds = creds.display(),
            journal = d.path().join("journal").display(),
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let run = Command::new(BIN)
        .args(["run", "--config", cfg.to_str().unwrap(), "--duration", "4s"])
        .env("EDGEREC_LOG", "warn")
        .output()
        .unwrap();
    let took = started.elapsed();
    let out = String::from_utf8_lossy(&run.stdout).into_owned();
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "edgerec run: {out}{err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("offload:"))
        .unwrap_or_else(|| panic!("no offload line: {out}"));
    println!("{line} (the run took {took:?})");
    assert!(line.starts_with("offload:   0 files sent"), "{line}");
    assert!(!line.contains(" 0 waiting"), "{line}");
    assert!(err.contains("not sent when the recording stopped"), "{err}");
    // 4 s of recording, 2 s of draining, and the start and stop around
    // them; a request retried for its full 5 minutes would be far past.
    assert!(took < Duration::from_secs(20), "{took:?}\n{err}");
    session_with_segments(&root, 3);
}

/// `offload.upload = "events"`: a 12 s recording cut every 2 s, and one
/// `edgerec ctl trigger` 6 s in (1 s of pre-roll, 1 s after). Afterwards
/// the store holds the clip, and of the session only the segments the
/// clip's window overlaps (with metadata.yaml and the manifest, which names
/// every other segment as left out); the rest stays on the vehicle.
#[test]
fn events_only_sends_the_clip_and_the_segments_it_overlaps() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let (_d, server, root, cfg) = trigger_run("events", "");
    let child = spawn_run(&cfg, "12s");
    std::thread::sleep(Duration::from_secs(6));
    ctl_trigger(&cfg);
    let (out, err, line) = wait_run(child);
    assert!(line.contains(" 0 waiting"), "{line}\n{err}");
    assert!(line.contains("1 event clips"), "{line}\n{err}");

    let clips: Vec<PathBuf> = std::fs::read_dir(root.join("events"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(clips.len(), 1, "{clips:?}");
    assert_at_store(&server, &clips[0]);
    let clip_name = clips[0].file_name().unwrap().to_string_lossy().into_owned();
    let clip: serde_json::Value = serde_json::from_str(&server.get(
        "fleet-recordings",
        &format!("robot-7/{clip_name}/manifest.json"),
    ))
    .unwrap();
    let (c0, c1) = (
        clip["start_ns"]
            .as_u64()
            .unwrap_or_else(|| panic!("{clip:#}\n{out}")),
        clip["end_ns"].as_u64().unwrap(),
    );

    let session = session_with_segments(&root, 5);
    let name = session.file_name().unwrap().to_string_lossy().into_owned();
    let prefix = format!("robot-7/{name}/");
    let v = server.verify("fleet-recordings", &prefix, &session);
    let m: serde_json::Value =
        serde_json::from_str(&server.get("fleet-recordings", &format!("{prefix}manifest.json")))
            .unwrap();
    let sent: Vec<&serde_json::Value> = m["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["file"].as_str().unwrap().ends_with(".mcap"))
        .collect();
    assert!(!sent.is_empty(), "{m:#}");
    for f in &sent {
        let file = f["file"].as_str().unwrap();
        assert_eq!(v[format!("{prefix}{file}")]["equal"], true, "{file}: {v:#}");
        let (s, e) = (
            f["start_ns"].as_u64().unwrap(),
            f["end_ns"].as_u64().unwrap(),
        );
        // The window is the clip's, give or take a message (100 Hz).
        let slack = 50_000_000;
        assert!(
            s <= c1 + slack && c0 <= e + slack,
            "{file} ({s}..{e}) is outside the clip {c0}..{c1}"
        );
    }
    let segments: Vec<String> = files_in(&session)
        .into_iter()
        .filter(|f| f.ends_with(".mcap"))
        .collect();
    let left_out: Vec<&str> = m["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(sent.len() + left_out.len(), segments.len(), "{m:#}");
    for l in &left_out {
        assert!(
            l.ends_with("no event overlaps it (offload.upload = \"events\")"),
            "{l}"
        );
        let file = l.split(':').next().unwrap();
        assert!(
            v.get(format!("{prefix}{file}")).is_none(),
            "{file} was sent: {v:#}"
        );
    }
    assert!(!left_out.is_empty(), "{m:#}");
    assert!(v.get(format!("{prefix}metadata.yaml")).is_some(), "{v:#}");
}

/// The route to the store goes out through a metered interface (here
/// `lo`, the kernel's own answer for a store on loopback): with
/// `upload = "all"` only the clip and the segments its window overlaps
/// are sent; the other segments wait (said at the stop), and none of them
/// is at the store.
#[test]
fn a_metered_link_sends_only_what_an_event_overlaps() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let (_d, server, root, cfg) = trigger_run(
        "all",
        "metered_interfaces = [\"lo\"]\ndrain_on_stop = \"3s\"\n",
    );
    let child = spawn_run(&cfg, "10s");
    std::thread::sleep(Duration::from_secs(5));
    ctl_trigger(&cfg);
    let (_, err, line) = wait_run(child);
    assert!(err.contains("offload: link metered (lo)"), "{err}");
    assert!(line.contains("1 event clips"), "{line}\n{err}");
    assert!(!line.contains(" 0 waiting"), "{line}\n{err}");
    let clips: Vec<PathBuf> = std::fs::read_dir(root.join("events"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(clips.len(), 1, "{clips:?}");
    assert_at_store(&server, &clips[0]);
    let session = session_with_segments(&root, 4);
    let name = session.file_name().unwrap().to_string_lossy().into_owned();
    let v = server.verify("fleet-recordings", &format!("robot-7/{name}/"), &session);
    let sent: Vec<&String> = v.as_object().unwrap().keys().collect();
    let segments = files_in(&session)
        .into_iter()
        .filter(|f| f.ends_with(".mcap"))
        .count();
    // A 2 s window overlaps two or three 2 s segments of five or more.
    // (The trigger's record in the latched /edgerec/audit is repeated at
    // the head of every later segment with its first time: a segment's
    // span is its new messages', or every later one would overlap.)
    assert!(!sent.is_empty() && sent.len() <= 3, "{sent:?}");
    assert!(sent.len() < segments, "{sent:?} of {segments}");
    assert!(
        v.get(format!("robot-7/{name}/manifest.json")).is_none(),
        "{v:#}"
    );
}

/// Retention with offload: a first run sends its session (the ledger in
/// the journal directory remembers it); a second run records while the
/// store cannot be reached, under a cap its recording crosses. Retention
/// deletes the first session's files first, as at the store, then files of
/// the second that were never sent, and says so on the last lines; the
/// second run does not queue what the first one sent.
#[test]
fn retention_frees_what_is_at_the_store_first_and_counts_what_never_got_there() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (server, offload) = tls_store(d.path(), "all");
    let root = d.path().join("data");
    let config = |offload: &str, cap: &str| {
        let retention = format!(
            "[retention]\nmax_total_bytes = {cap}\nmin_free_percent = 0\nmin_free_bytes = 0\n{offload}"
        );
        lidar_config(&root, "demo", "1s", &retention)
    };
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(&cfg, config(&offload, "1073741824")).unwrap();
    let (out, err, line) = wait_run(spawn_run(&cfg, "4s"));
    assert!(line.contains(" 0 waiting"), "{line}\n{err}");
    let first = session_with_segments(&root, 3);
    assert_at_store(&server, &first);
    let first_files: Vec<PathBuf> = files_in(&first)
        .iter()
        .filter(|f| f.ends_with(".mcap"))
        .map(|f| first.join(f))
        .collect();
    let ledger = d.path().join("journal").join("sent.jsonl");
    assert!(
        std::fs::read_to_string(&ledger).unwrap().lines().count() >= first_files.len(),
        "{out}"
    );

    // The store is gone; the cap is below what the two runs record.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let dead = offload
        .lines()
        .map(|l| {
            if l.starts_with("endpoint") {
                format!("endpoint = \"http://127.0.0.1:{port}\"\nallow_http = true")
            } else if l.starts_with("ca_file") {
                String::new()
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let dead = format!("{dead}\ndrain_on_stop = \"1s\"\n");
    let first_bytes: u64 = first_files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    // Half of what the first run holds: it goes, then files never sent.
    std::fs::write(&cfg, config(&dead, &format!("{}", first_bytes / 2))).unwrap();
    let (out, err, _) = wait_run(spawn_run(&cfg, "4s"));
    for f in &first_files {
        assert!(!f.exists(), "{} is still there\n{out}", f.display());
    }
    assert!(
        out.contains("deleted after they reached the store"),
        "{out}\n{err}"
    );
    assert!(
        out.contains("deleted before offload sent them: they never reached the store"),
        "{out}\n{err}"
    );
    assert!(err.contains("was deleted before offload sent it"), "{err}");
    assert!(
        !err.contains("of earlier runs not at the store yet"),
        "the first run's files were queued again: {err}"
    );
}

/// `edgerec offload VERB` of a running recorder: its stdout, and whether
/// it exited 0.
fn offload_ctl(cfg: &Path, verb: &str) -> (bool, String) {
    let o = Command::new(BIN)
        .args(["offload", verb, "--config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

/// Offload paused by the operator sends nothing, and says so in
/// `edgerec offload status` and `edgerec status --json` (the queue by
/// class, the rate, the link); resumed, the queue drains before the end.
/// Each command is logged with who gave it.
#[test]
fn offload_pauses_resumes_and_shows_its_queue_while_it_runs() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let (_d, server, root, cfg) = trigger_run("all", "");
    let child = spawn_run(&cfg, "12s");
    // The control socket answers once the recorder runs.
    let t0 = std::time::Instant::now();
    loop {
        let (ok, out) = offload_ctl(&cfg, "pause");
        if ok {
            assert!(out.contains("offload paused (by uid "), "{out}");
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "{out}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Three 2 s segments close while it is paused.
    std::thread::sleep(Duration::from_secs(6));
    let (ok, out) = offload_ctl(&cfg, "status");
    assert!(ok, "{out}");
    let st: serde_json::Value =
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(
        st["link"].as_str().unwrap().starts_with("paused by uid "),
        "{st:#}"
    );
    let segments = st["queue"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["class"] == "segments")
        .unwrap_or_else(|| panic!("{st:#}"));
    assert!(segments["files"].as_u64().unwrap() >= 2, "{st:#}");
    assert!(segments["oldest_s"].as_f64().unwrap() > 1.0, "{st:#}");
    let early = server.verify("fleet-recordings", "robot-7/demo_", &root);
    assert!(
        !early
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.ends_with(".mcap")),
        "sent while paused: {early:#}"
    );
    let status = Command::new(BIN)
        .args(["status", "--json", "--config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&status.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&status.stdout)));
    let o = &v["offload"];
    assert!(
        o["link"].as_str().unwrap().starts_with("paused by uid "),
        "{o:#}"
    );
    assert!(o["queue"].as_array().unwrap().len() == 3, "{o:#}");
    assert!(
        o.get("rate_bytes_per_s").is_some_and(|r| r.is_u64()),
        "{o:#}"
    );

    let (ok, out) = offload_ctl(&cfg, "resume");
    assert!(ok && out.contains("offload resumed"), "{out}");
    let (ok, out) = offload_ctl(&cfg, "retry");
    assert!(ok, "{out}");
    let (_, err, line) = wait_run(child);
    assert!(line.contains(" 0 waiting"), "{line}\n{err}");
    assert!(err.contains("offload: paused by uid "), "{err}");
    assert!(err.contains("offload: resumed by uid "), "{err}");
    let session = session_with_segments(&root, 5);
    assert_at_store(&server, &session);
}

/// The bar: a 20 s run of `scripts/demo`'s sources (config/demo.toml: IMU,
/// lidar, raw camera, status, an H.265 test camera; its own segmenting) in
/// mixed mode, the cameras in event clips, `edgerec ctl trigger` 5 s in,
/// and `[offload]` to the TLS server. Afterwards the queue is empty, every
/// file of the session and of the clip is in the bucket byte for byte
/// (boto3), and the clip's upload started before the first segment's.
#[test]
fn the_demo_with_a_trigger_sends_the_clip_first_and_everything_whole() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (server, offload) = tls_store(d.path(), "all");
    let root = d.path().join("data");
    let demo = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/demo.toml"),
    )
    .unwrap();
    let demo = demo.replace("\"./data", &format!("\"{}", root.display()));
    let mixed = demo.replace(
        "session_prefix = \"demo\"",
        "session_prefix = \"demo\"\nmode = \"mixed\"\ncontinuous_topics = [\"/imu/data\", \"/lidar/points\", \"/vehicle/status\"]",
    );
    assert_ne!(mixed, demo, "config/demo.toml names its session prefix");
    let with_ctl = mixed.replacen(
        "[health]\n",
        &format!(
            "[health]\ncontrol_socket = \"{}\"\n",
            root.join("control.sock").display()
        ),
        1,
    );
    assert_ne!(with_ctl, mixed, "config/demo.toml has a [health] table");
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(
        &cfg,
        format!("{with_ctl}\n[triggers]\npre = \"2s\"\npost = \"2s\"\n{offload}"),
    )
    .unwrap();
    let child = spawn_run(&cfg, "20s");
    std::thread::sleep(Duration::from_secs(5));
    ctl_trigger(&cfg);
    let (_, err, line) = wait_run(child);
    assert!(line.contains(" 0 waiting"), "{line}\n{err}");
    assert!(line.contains("1 event clips"), "{line}\n{err}");
    let clips: Vec<PathBuf> = std::fs::read_dir(root.join("events"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(clips.len(), 1, "{clips:?}");
    assert_at_store(&server, &clips[0]);
    let session = session_with_segments(&root, 1);
    assert_at_store(&server, &session);
    // The order the agent started them in.
    let started: Vec<&str> = err
        .lines()
        .filter_map(|l| l.split("offload: sending ").nth(1))
        .collect();
    let clip_at = started
        .iter()
        .position(|l| l.starts_with(&*clips[0].to_string_lossy()))
        .unwrap_or_else(|| panic!("the clip was never started: {started:?}"));
    let segment_at = started
        .iter()
        .position(|l| l.starts_with(&*session.to_string_lossy()) && l.contains(".mcap "))
        .unwrap_or_else(|| panic!("no segment was started: {started:?}"));
    assert!(clip_at < segment_at, "{started:#?}");
    assert!(
        started[clip_at].contains("(clips, "),
        "{}",
        started[clip_at]
    );
}

/// An 8 Mbit/s uplink: the recorder in a network namespace of the test's,
/// the store (moto) in another, a veth pair between them shaped by a
/// token bucket (`tc qdisc ... tbf rate 8mbit`; this kernel has no
/// netem). Lidar at 2.4 MB/s fills 2 s segments faster than the link
/// empties them, so they queue; a clip triggered 6 s in still starts
/// before a segment that closed before it was triggered, and afterwards
/// everything is at the store whole.
#[test]
fn a_late_clip_overtakes_older_segments_on_an_8_mbit_uplink() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    if let Some(why) = edgerec_testkit::netns::skip_reason() {
        edgerec_testkit::skip::skip(why);
        return;
    }
    let vehicle = edgerec_testkit::netns::Netns::new();
    let fleet = edgerec_testkit::netns::Netns::new();
    let (uplink, _) = vehicle.link_to(&fleet, "10.77.0.1", "10.77.0.2");
    let tc = vehicle
        .command("tc")
        .args([
            "qdisc", "add", "dev", &uplink, "root", "tbf", "rate", "8mbit",
        ])
        .args(["burst", "32kbit", "latency", "400ms"])
        .status()
        .unwrap();
    assert!(tc.success(), "tc tbf on {uplink}");
    let server = Moto::start_in(fleet.name(), "10.77.0.2");
    server.make_bucket("fleet-recordings");
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("data");
    let creds = server.credentials_file(d.path());
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[recording]
root = "{root}"
session_prefix = "demo"
mode = "mixed"
continuous_topics = ["/lidar/points"]

[segment]
max_duration = "2s"

[health]
watchdog = ""
fault_file = "{root}/last-fault.json"
status_socket = "{root}/status.sock"
control_socket = "{root}/control.sock"

[triggers]
pre = "1s"
post = "1s"

[[sources.synthetic]]
topic = "/lidar/points"
type = "sensor_msgs/msg/PointCloud2"
rate = 10
payload_size = "240KB"

[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 100

[offload]
endpoint = "{endpoint}"
allow_http = true
bucket = "fleet-recordings"
vehicle_id = "robot-7"
credentials_file = "{creds}"
journal_dir = "{journal}"
part_size = "5MiB"
upload = "all"
drain_on_stop = "60s"
"#,
            root = root.display(),
            endpoint = server.endpoint,
            creds = creds.display(),
            journal = d.path().join("journal").display(),
        ),
    )
    .unwrap();
    let child = vehicle
        .command(BIN)
        .args([
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--duration",
            "10s",
        ])
        .env("EDGEREC_LOG", "info")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(6));
    ctl_trigger(&cfg);
    let (_, err, line) = wait_run(child);
    assert!(line.contains(" 0 waiting"), "{line}\n{err}");
    let clips: Vec<PathBuf> = std::fs::read_dir(root.join("events"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(clips.len(), 1, "{clips:?}");
    let session = session_with_segments(&root, 4);
    assert_at_store(&server, &clips[0]);
    assert_at_store(&server, &session);
    // In the order the log says: closed (the recorder), then started
    // (offload).
    let lines: Vec<&str> = err.lines().collect();
    let at = |needle: &str, what: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {what} ({needle}) in the log:\n{err}"))
    };
    let clip = clips[0].to_string_lossy().into_owned();
    let event = at("event ctl: ", "the event");
    let clip_started = at(&format!("offload: sending {clip} "), "the clip's upload");
    let overtaken: Vec<String> = files_in(&session)
        .into_iter()
        .filter(|f| f.ends_with(".mcap"))
        .filter(|f| {
            let path = session.join(f).to_string_lossy().into_owned();
            let closed = at(&format!("closed {path} "), "a segment's close");
            let started = at(&format!("offload: sending {path} "), "a segment's upload");
            closed < event && started > clip_started
        })
        .collect();
    assert!(
        !overtaken.is_empty(),
        "the clip went after every segment closed before it was triggered:\n{err}"
    );
}

/// The store down for 30 s while recording (a fault proxy in front of
/// moto closes its port after two parts are acknowledged): the recording
/// goes on without a drop, the queue grows (the status says how many files
/// wait), and once the store is back it drains; afterwards every segment
/// and the session's manifest are at the store byte for byte.
#[test]
fn a_store_down_for_30_s_while_recording_loses_nothing() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let server = Moto::start();
    server.make_bucket("fleet-recordings");
    let proxy = edgerec_testkit::s3::FaultProxy::start(&server, "down", 30.0);
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("data");
    let creds = server.credentials_file(d.path());
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
[recording]
root = "{root}"
session_prefix = "demo"

[segment]
max_duration = "5s"

[health]
watchdog = ""
fault_file = "{root}/last-fault.json"
status_socket = "{root}/status.sock"

[[sources.synthetic]]
topic = "/lidar/points"
type = "sensor_msgs/msg/PointCloud2"
rate = 10
payload_size = "240KB"

[offload]
endpoint = "{endpoint}"
allow_http = true
bucket = "fleet-recordings"
vehicle_id = "robot-7"
credentials_file = "{creds}"
journal_dir = "{journal}"
part_size = "5MiB"
upload = "all"
drain_on_stop = "90s"
"#,
            root = root.display(),
            endpoint = proxy.endpoint,
            creds = creds.display(),
            journal = d.path().join("journal").display(),
        ),
    )
    .unwrap();
    let child = spawn_run(&cfg, "40s");
    // 25 s in, the store has been down for about 18 s.
    std::thread::sleep(Duration::from_secs(25));
    let status = Command::new(BIN)
        .args(["status", "--json", "--config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&status.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&status.stdout)));
    let waiting: u64 = v["offload"]["queue"]
        .as_array()
        .unwrap_or_else(|| panic!("{v:#}"))
        .iter()
        .map(|c| c["files"].as_u64().unwrap())
        .sum();
    let (out, err, line) = wait_run(child);
    let log = proxy.log();
    assert!(
        log.iter().any(|l| l["status"] == "down 30 s") && log.iter().any(|l| l["status"] == "up"),
        "the store never went down and up: {log:?}"
    );
    assert!(
        waiting >= 2,
        "{waiting} files waiting while the store was down: {v:#}"
    );
    assert!(line.contains(" 0 waiting"), "{line}\n{err}");
    let recorded = out
        .lines()
        .find(|l| l.starts_with("recorded:"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(recorded.contains(", 0 dropped,"), "{recorded}");
    let session = session_with_segments(&root, 7);
    assert_at_store(&server, &session);
}

/// A power cut (SIGKILL) leaves the open segment `.active`; the next
/// `edgerec run` recovers it at start and only then looks for earlier
/// runs' files the store lacks, so the recovered segment is sent with the
/// rest (found on the QEMU board: picked up before recovery, it was
/// skipped as `.active` and the session called complete without it).
#[test]
fn a_segment_a_power_cut_left_open_is_sent_after_recovery() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (server, offload) = tls_store(d.path(), "all");
    let root = d.path().join("data");
    let config = |offload: &str| lidar_config(&root, "cut", "5s", offload);
    // 1. Recording without offload, killed with a segment open.
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(&cfg, config("")).unwrap();
    let mut first = spawn_run(&cfg, "60s");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let session = loop {
        let active = std::fs::read_dir(&root).ok().and_then(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir() && p.file_name().is_some_and(|n| n != "events"))
                .find(|s| {
                    let f = files_in(s);
                    f.iter().any(|f| f.ends_with(".mcap"))
                        && f.iter().any(|f| f.ends_with(".mcap.active"))
                })
        });
        if let Some(s) = active {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no session with a closed segment and an open one within 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // 2.5 s into the 5 s segment: past two 1 s syncs, so it holds whole
    // chunks, and well before it closes.
    std::thread::sleep(Duration::from_millis(2500));
    first.kill().unwrap();
    let _ = first.wait();
    let open: Vec<String> = files_in(&session)
        .into_iter()
        .filter(|f| f.ends_with(".active"))
        .collect();
    assert_eq!(open.len(), 1, "{:?}", files_in(&session));

    // 2. The next run, with offload: recovery, then the pick-up.
    std::fs::write(&cfg, config(&offload)).unwrap();
    let (_, err, line) = wait_run(spawn_run(&cfg, "2s"));
    assert!(line.contains(" 0 waiting"), "{line}\n{err}");
    let recovered = open[0].trim_end_matches(".active");
    assert!(
        files_in(&session).iter().any(|f| f == recovered),
        "{recovered} not recovered: {:?}\n{err}",
        files_in(&session)
    );
    assert!(!files_in(&session).iter().any(|f| f.ends_with(".active")));
    // Every file of the cut session, the recovered one too, at the store
    // byte for byte and in its manifest.
    assert_at_store(&server, &session);
}
