//! The health side of a running recorder, end to end through the binary:
//! `edgerec status` (text and JSON) on a running recording shows the
//! health state and its reasons, the clock, storage, every source and the
//! metrics with their origins; the LEDs (a directory laid out like
//! /sys/class/leds) show the state; the Prometheus endpoint answers; and
//! the closed segments carry the clock's `edgerec.clock` record and the
//! `/edgerec/status` and `/edgerec/clock` topics.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

use edgerec_testkit::KillOnDrop as Kill;

fn config(dir: &Path, prom_port: u16) -> String {
    format!(
        r#"
[recording]
root = "{d}/rec"
session_prefix = "status"

[retention]
min_free_bytes = 0
min_free_percent = 0

[storage]
sync_interval = "200ms"
realtime_priority = 5

[mcap]
chunk_max_age = "100ms"

[clock]
# No ptp4l answers here: the clock is free-running and the data flagged.
ptp4l_socket = "{d}/no-ptp4l"
poll_interval = "200ms"

[health]
watchdog = ""
fault_file = "{d}/last-fault.json"
status_socket = "{d}/edgerec.sock"
prometheus = "127.0.0.1:{prom_port}"

[leds]
sysfs_root = "{d}/leds"

[leds.states]
booting = {{ "green" = "blink-fast" }}
idle = {{ "green" = "on" }}
recording = {{ "green" = "blink:900/100" }}
degraded = {{ "green" = "blink:900/100", "red" = "blink" }}
fault = {{ "red" = "on" }}

[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 200

[[sources.synthetic]]
topic = "/camera/image_raw"
type = "sensor_msgs/msg/Image"
rate = 10
payload_size = "100KiB"
"#,
        d = dir.display()
    )
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// A directory laid out like /sys/class/leds with a green and a red LED.
fn fake_leds(dir: &Path) {
    for led in ["green", "red"] {
        let dir = dir.join("leds").join(led);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("max_brightness"), "255\n").unwrap();
        std::fs::write(dir.join("brightness"), "0\n").unwrap();
        std::fs::write(dir.join("trigger"), "[none] timer\n").unwrap();
    }
}

/// A port of our own: bind 0, take the number, release it.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn status_of_a_running_recorder() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    fake_leds(d.path());
    let port = free_port();
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(&cfg, config(d.path(), port)).unwrap();
    // The previous run ended in a watchdog reset: its fault file is there.
    std::fs::write(
        d.path().join("last-fault.json"),
        r#"{"stage":"storage","deadline_ms":5000,"silent_for_ms":5200,"last_progress":4711,
            "at_unix_ns":1,"boot_id":null,"pid":1,"message":"storage stalled"}"#,
    )
    .unwrap();
    // A socket playing systemd, which also asks for watchdog pings; drained
    // on a thread: a datagram socket's queue is short (10 by default) and
    // a full one makes the sender drop messages.
    let notify = std::os::unix::net::UnixDatagram::bind(d.path().join("notify.sock")).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let listening = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let listener = {
        let heard = heard.clone();
        let listening = listening.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while listening.load(std::sync::atomic::Ordering::Acquire) {
                if let Ok(n) = notify.recv(&mut buf) {
                    heard
                        .lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&buf[..n]).into_owned());
                }
            }
        })
    };
    let child = Command::new(BIN)
        .args([
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--duration",
            "30s",
        ])
        .env("EDGEREC_LOG", "warn")
        .env("NOTIFY_SOCKET", d.path().join("notify.sock"))
        .env("WATCHDOG_USEC", "1000000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Kill(child);

    // Wait until the status has rates (two control ticks).
    let deadline = Instant::now() + Duration::from_secs(20);
    let json: serde_json::Value = loop {
        let o = Command::new(BIN)
            .args(["status", "--config", cfg.to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        if o.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            let imu_rate = v["channels"]
                .as_array()
                .and_then(|a| a.iter().find(|s| s["topic"] == "/imu"))
                .and_then(|s| s["rate_hz"].as_f64())
                .unwrap_or(0.0);
            if imu_rate > 0.0 && v["uptime_s"].as_f64().unwrap_or(0.0) >= 2.0 {
                break v;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no status with rates within 20 s"
        );
        std::thread::sleep(Duration::from_millis(300));
    };

    // The state and why: no PTP here, so the clock is free-running and
    // the recording is degraded by it, said in words.
    assert_eq!(json["schema"], 2);
    assert_eq!(json["state"], "degraded", "{json:#}");
    assert_eq!(json["reasons"][0], "clock unlocked", "{json:#}");
    // Clock: source, quality, the reason ptp4l did not answer.
    let clock = &json["clock"];
    assert_eq!(clock["source"], "realtime");
    assert_eq!(clock["state"], "free_running");
    assert_eq!(clock["unlocked"], true);
    assert!(
        clock["ptp4l_error"]
            .as_str()
            .unwrap()
            .contains(&format!("{}/no-ptp4l", d.path().display())),
        "{clock:#}"
    );
    // Storage: backend, a write rate, free space.
    let storage = &json["storage"];
    assert!(storage["backend"].as_str().unwrap().contains('+') || storage["backend"] == "buffered");
    assert!(storage["write_mb_s"].as_f64().unwrap() > 0.0, "{storage:#}");
    assert!(storage["free_bytes"].as_u64().unwrap() > 0);
    // storage.realtime_priority, read back from the kernel: SCHED_FIFO 5
    // on the storage stage's threads where the test may set it (root), and
    // said to be refused where it may not.
    let rt = &storage["realtime"];
    assert_eq!(rt["priority"], 5, "{storage:#}");
    let names = |k: &str| -> Vec<String> {
        rt[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e[0].as_str().unwrap().to_owned())
            .collect()
    };
    let (fifo, other) = (names("fifo"), names("other"));
    for t in ["edgerec-seq", "edgerec-io"] {
        assert!(
            fifo.iter().chain(&other).any(|n| n == t),
            "{t} missing: {rt:#}"
        );
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        assert!(other.is_empty(), "root, yet SCHED_FIFO refused: {rt:#}");
    } else {
        assert!(fifo.is_empty(), "SCHED_FIFO without CAP_SYS_NICE? {rt:#}");
    }
    // Sources: each synthetic one and the recorder's own topics, running
    // under the supervisor, none restarted.
    let sources = json["sources"].as_array().unwrap();
    for want in ["synthetic /imu", "/edgerec/status", "/edgerec/clock"] {
        let s = sources
            .iter()
            .find(|s| s["name"] == want)
            .unwrap_or_else(|| panic!("{want} missing from {sources:?}"));
        assert_eq!(s["state"], "running", "{s}");
        assert_eq!(s["restarts"], 0, "{s}");
    }
    // Channels: the two synthetic ones at about their rates, and the
    // recorder's own topics.
    let channels = json["channels"].as_array().unwrap();
    let rate = |t: &str| {
        channels
            .iter()
            .find(|s| s["topic"] == t)
            .unwrap_or_else(|| panic!("{t} missing"))["rate_hz"]
            .as_f64()
            .unwrap()
    };
    assert!((100.0..300.0).contains(&rate("/imu")), "{}", rate("/imu"));
    assert!((5.0..15.0).contains(&rate("/camera/image_raw")));
    assert!(rate("/edgerec/status") > 0.0);
    assert!(rate("/edgerec/clock") > 0.0);
    // Metrics, each with an origin; CPU from /proc/stat; GPU families say
    // why they have no source on this host.
    let metrics = json["metrics"].as_array().unwrap();
    let cpu = metrics.iter().find(|m| m["name"] == "cpu.load").unwrap();
    assert!(cpu["origin"].as_str().unwrap().contains("/proc/stat"));
    assert!(metrics
        .iter()
        .all(|m| !m["origin"].as_str().unwrap().is_empty()));
    let gpu = json["metric_sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["family"] == "gpu load")
        .unwrap();
    assert!(!gpu["origin"].as_str().unwrap().is_empty());
    // Every watched stage, fresh.
    let stages: Vec<&str> = json["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    for want in [
        "chunker",
        "compressor 0",
        "storage",
        "closer",
        "sources",
        "clock",
        "control",
    ] {
        assert!(stages.contains(&want), "{want} not in {stages:?}");
    }
    assert!(json["stages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["stalled"] == false));

    // The fault of the previous run is reported, and its file moved aside
    // so that the next start does not report it again.
    assert_eq!(json["last_fault"]["stage"], "storage", "{json:#}");
    assert_eq!(json["last_fault"]["last_progress"], 4711);
    assert!(!d.path().join("last-fault.json").exists());
    assert!(d.path().join("last-fault.reported.json").exists());
    // systemd's watchdog is fed under the heartbeat rule.
    assert!(json["watchdog"]["systemd_interval_ms"] == 1000, "{json:#}");

    // The text form names the same things with their origins.
    let o = Command::new(BIN)
        .args(["status", "--config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    let rt_line = if root {
        "realtime:  SCHED_FIFO 5 on "
    } else {
        "realtime:  SCHED_FIFO 5 asked for; at normal priority: "
    };
    assert!(text.contains(rt_line), "{text}");
    for want in [
        "state:     degraded: clock unlocked",
        "clock:     realtime, free_running",
        "storage:   ",
        "/imu",
        "synthetic /imu               running    restarts    0",
        "cpu.load",
        "/proc/stat",
        "source of gpu load",
        "stages:    ",
    ] {
        assert!(text.contains(want), "`{want}` missing from:\n{text}");
    }

    // LEDs show degraded: green blinks slowly, red blinks.
    let leds = d.path().join("leds");
    assert_eq!(read(&leds.join("green/trigger")), "timer");
    assert_eq!(read(&leds.join("green/delay_on")), "900");
    assert_eq!(read(&leds.join("green/delay_off")), "100");
    assert_eq!(read(&leds.join("red/trigger")), "timer");
    assert_eq!(read(&leds.join("red/delay_on")), "500");

    // Prometheus text on the configured port.
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    assert!(body.starts_with("HTTP/1.0 200 OK"), "{body}");
    assert!(
        body.contains("edgerec_state{state=\"degraded\"} 1"),
        "{body}"
    );
    assert!(
        body.contains("edgerec_topic_rate_hz{topic=\"/imu\"}"),
        "{body}"
    );

    // Stop cleanly: the socket goes away, the LEDs show idle.
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.0.id() as i32, libc::SIGTERM);
    }
    let status = child.0.wait().unwrap();
    assert!(status.success());
    // What systemd heard: READY=1 once started, STATUS= lines, WATCHDOG=1
    // (every 500 ms while healthy), STOPPING=1 at the end.
    std::thread::sleep(Duration::from_millis(300));
    listening.store(false, std::sync::atomic::Ordering::Release);
    listener.join().unwrap();
    let heard = heard.lock().unwrap().clone();
    let count = |p: &str| heard.iter().filter(|m| m.starts_with(p)).count();
    assert_eq!(count("READY=1"), 1, "{heard:?}");
    assert_eq!(count("STOPPING=1"), 1, "{heard:?}");
    assert!(count("WATCHDOG=1") >= 3, "{heard:?}");
    assert!(
        heard.iter().any(|m| m.starts_with("STATUS=degraded: ")),
        "{heard:?}"
    );
    let ready = heard.iter().position(|m| m == "READY=1").unwrap();
    let stopping = heard.iter().position(|m| m == "STOPPING=1").unwrap();
    assert!(ready < stopping);
    assert!(!d.path().join("edgerec.sock").exists());
    assert_eq!(read(&leds.join("green/trigger")), "none");
    assert_eq!(read(&leds.join("green/brightness")), "255");
    assert_eq!(read(&leds.join("red/brightness")), "0");

    // The recording carries the clock's record and the own topics.
    let session = std::fs::read_dir(d.path().join("rec"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    let seg = std::fs::read_dir(&session)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "mcap"))
        .unwrap();
    let info = Command::new(BIN)
        .args(["info", session.to_str().unwrap()])
        .output()
        .unwrap();
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(
        info.contains("clock free_running (") && info.contains(" polls flagged)"),
        "{info}"
    );
    let rb = edgerec_testkit::mcap_readback(&seg).unwrap();
    let clock_meta = rb
        .metadata
        .get("edgerec.clock")
        .expect("edgerec.clock metadata record");
    assert_eq!(clock_meta["source"], "realtime");
    assert_eq!(clock_meta["worst_state"], "free_running");
    assert!(clock_meta["polls"].parse::<u64>().unwrap() > 0);
    for topic in ["/edgerec/status", "/edgerec/clock"] {
        assert!(
            rb.messages.iter().any(|m| m.topic == topic),
            "{topic} not in the recording"
        );
    }
    let last_status = rb
        .messages
        .iter()
        .rev()
        .find(|m| m.topic == "/edgerec/status")
        .unwrap();
    // std_msgs/String CDR: 4-byte header, u32 length, text, NUL.
    let len = u32::from_le_bytes(last_status.data[4..8].try_into().unwrap()) as usize;
    let text = std::str::from_utf8(&last_status.data[8..8 + len - 1]).unwrap();
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(v["schema"], 2);
    drop(child);
}

/// `edgerec status --json` of the recorder configured in `cfg`, once it
/// answers one that `want` accepts (within 20 s).
fn status_until(
    cfg: &Path,
    what: &str,
    want: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let o = Command::new(BIN)
            .args(["status", "--config", cfg.to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        if o.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            if want(&v) {
                return v;
            }
            assert!(Instant::now() < deadline, "{what} not within 20 s: {v:#}");
        } else {
            assert!(Instant::now() < deadline, "no status within 20 s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// An operator's pause is a state of its own, saying who: `edgerec ctl
/// pause` on the control socket turns the status (text and JSON), the
/// `/diagnostics`-shaped reasons and the LEDs to `paused` with the uid and
/// pid that asked; `resume` turns them back.
#[test]
fn an_operators_pause_is_a_state_that_says_who() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    fake_leds(d.path());
    let port = free_port();
    let cfg = d.path().join("edgerec.toml");
    let text = config(d.path(), port)
        .replace(
            "prometheus = ",
            &format!(
                "control_socket = \"{}/ctl.sock\"\nprometheus = ",
                d.path().display()
            ),
        )
        .replacen(
            "[[sources.synthetic]]",
            "paused = { \"green\" = \"blink:100/900\" }\n\n[[sources.synthetic]]",
            1,
        );
    std::fs::write(&cfg, text).unwrap();
    let child = Command::new(BIN)
        .args([
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--duration",
            "30s",
        ])
        .env("EDGEREC_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _child = Kill(child);
    status_until(&cfg, "recording", |v| {
        v["state"] == "degraded" && v["uptime_s"].as_f64().unwrap_or(0.0) >= 1.0
    });
    let ctl = |verb: &str| {
        let o = Command::new(BIN)
            .args(["ctl", "--config", cfg.to_str().unwrap(), verb])
            .output()
            .unwrap();
        assert!(o.status.success(), "ctl {verb}: {o:?}");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let reply = ctl("pause");
    assert!(reply.contains("\"paused\":true"), "{reply}");
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let v = status_until(&cfg, "paused", |v| v["state"] == "paused");
    let by = v["pause"]["by"].as_str().unwrap();
    // `uid 0 (root, pid N)`: the user database names the uid.
    assert!(
        by.starts_with(&format!("uid {uid} (")) && by.contains("pid "),
        "{v:#}"
    );
    assert_eq!(v["reasons"][0], format!("paused by {by}"), "{v:#}");
    assert!(v["pause"]["since_unix_ns"].as_u64().unwrap() > 0);
    // The clock is still unlocked; it is listed after the pause.
    assert!(
        v["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "clock unlocked"),
        "{v:#}"
    );
    let t = Command::new(BIN)
        .args(["status", "--config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&t.stdout);
    assert!(
        t.starts_with(&format!("state:     paused: paused by {by}")),
        "{t}"
    );
    assert!(t.contains(&format!("paused:    by {by}, ")), "{t}");
    // The LEDs show the pause's own pattern (the red one is off).
    let leds = d.path().join("leds");
    let deadline = Instant::now() + Duration::from_secs(5);
    while read(&leds.join("green/delay_on")) != "100" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(read(&leds.join("green/trigger")), "timer");
    assert_eq!(read(&leds.join("green/delay_on")), "100");
    assert_eq!(read(&leds.join("green/delay_off")), "900");
    assert_eq!(read(&leds.join("red/brightness")), "0");

    let reply = ctl("resume");
    assert!(reply.contains("\"paused\":false"), "{reply}");
    let v = status_until(&cfg, "the end of the pause", |v| v["state"] != "paused");
    assert!(v["pause"].is_null(), "{v:#}");
    assert!(!v["reasons"].to_string().contains("paused by"), "{v:#}");
}
