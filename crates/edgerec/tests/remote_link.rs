//! The fleet link end to end through the binary: `edgerec run` with
//! `[remote]` connects out to a real broker (Debian's Mosquitto on
//! loopback, TLS with client certificates, an ACL per vehicle), and the
//! fleet (a PyPI paho-mqtt client) sees the vehicle online, its retained
//! status with the recording in it, "stopped" after a clean stop and the
//! last will's "link lost" after a SIGKILL; a broker that is down makes
//! the recorder degraded, never stops it recording.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use edgerec_testkit::mqtt::{mosquitto, Broker};
use edgerec_testkit::KillOnDrop as Kill;

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

fn config(dir: &Path, b: &Broker) -> String {
    format!(
        r#"
[recording]
root = "{d}/rec"
session_prefix = "fleet"

[retention]
min_free_bytes = 0
min_free_percent = 0

[clock]
ptp4l_socket = "{d}/no-ptp4l"

[health]
watchdog = ""
fault_file = "{d}/last-fault.json"
status_socket = "{d}/status.sock"

[remote]
broker = "mqtts://127.0.0.1:{port}"
ca_file = "{t}/ca.pem"
cert_file = "{t}/vehicle.pem"
key_file = "{t}/vehicle.key"
vehicle_id = "robot-7"
keepalive = "5s"
status_interval = "1s"

[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 100
"#,
        d = dir.display(),
        port = b.port,
        t = b.tls.display(),
    )
}

fn ready() -> bool {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return false;
    }
    if mosquitto().is_none() {
        edgerec_testkit::skip::skip("mosquitto is not installed (scripts/test installs it)");
        return false;
    }
    true
}

fn run(cfg: &Path, log: &Path) -> Child {
    Command::new(BIN)
        .args([
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--duration",
            "120s",
        ])
        .env("EDGEREC_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

fn status_json(dir: &Path) -> serde_json::Value {
    let o = Command::new(BIN)
        .args(["status", "--socket"])
        .arg(dir.join("status.sock"))
        .arg("--json")
        .output()
        .unwrap();
    serde_json::from_slice(&o.stdout).unwrap_or_default()
}

#[test]
fn the_fleet_sees_the_vehicle_its_status_and_how_it_went_away() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let broker = Broker::start(d.path(), "robot-7");
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(&cfg, config(d.path(), &broker)).unwrap();
    let mut fleet = broker.watch("edgerec/robot-7/#", "fleet");
    let log = d.path().join("run1.log");
    let child = Kill(run(&cfg, &log));
    let why = || {
        format!(
            "{}\n--- broker ---\n{}",
            std::fs::read_to_string(&log).unwrap_or_default(),
            broker.log_text()
        )
    };

    let online = fleet
        .until(Duration::from_secs(30), |t, p| {
            t == "edgerec/robot-7/connection" && p["online"] == true
        })
        .unwrap_or_else(|| panic!("the vehicle never came online:\n{}", why()));
    assert_eq!(online["vehicle"], "robot-7");
    // The retained status is the recorder's own snapshot: recording, the
    // channel with its rate, and the link itself connected.
    let status = fleet
        .until(Duration::from_secs(30), |t, p| {
            // (degraded too: no ptp4l here, the clock is unlocked)
            t == "edgerec/robot-7/status"
                && (p["state"] == "recording" || p["state"] == "degraded")
                && p["remote"]["connected"] == true
                && p["channels"].as_array().is_some_and(|c| {
                    c.iter().any(|c| {
                        c["topic"] == "/imu" && c["rate_hz"].as_f64().unwrap_or(0.0) > 50.0
                    })
                })
        })
        .unwrap_or_else(|| panic!("no status with the recording:\n{}", why()));
    assert_eq!(status["remote"]["prefix"], "edgerec/robot-7", "{status:#}");
    assert!(
        status["storage"].is_object() && status["clock"].is_object(),
        "{status:#}"
    );
    // `edgerec status` says the same.
    let local = status_json(d.path());
    assert_eq!(local["remote"]["connected"], true, "{local:#}");
    let text = Command::new(BIN)
        .args(["status", "--socket"])
        .arg(d.path().join("status.sock"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains("remote:    connected to mqtts://127.0.0.1:"),
        "{text}"
    );

    // A clean stop (SIGTERM): "stopped".
    // SAFETY: kill with a child's pid and a signal number.
    assert_eq!(unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) }, 0);
    let mut child = child;
    let _ = child.0.wait();
    let off = fleet
        .until(Duration::from_secs(15), |t, p| {
            t == "edgerec/robot-7/connection" && p["online"] == false
        })
        .unwrap_or_else(|| panic!("no offline message after SIGTERM:\n{}", why()));
    assert_eq!(off["reason"], "stopped", "{off}");

    // SIGKILL: the broker publishes the last will (after 1.5 keepalives).
    let log2 = d.path().join("run2.log");
    let mut child = Kill(run(&cfg, &log2));
    fleet
        .until(Duration::from_secs(30), |t, p| {
            t == "edgerec/robot-7/connection" && p["online"] == true
        })
        .unwrap_or_else(|| panic!("the second run never came online:\n{}", why()));
    let _ = child.0.kill();
    let _ = child.0.wait();
    let killed = Instant::now();
    let will = fleet
        .until(Duration::from_secs(20), |t, p| {
            t == "edgerec/robot-7/connection" && p["online"] == false
        })
        .unwrap_or_else(|| panic!("no last will after SIGKILL:\n{}", why()));
    assert_eq!(will["reason"], "link lost", "{will}");
    assert!(
        killed.elapsed() < Duration::from_secs(15),
        "{:?}",
        killed.elapsed()
    );
}

#[test]
fn a_broker_that_is_down_degrades_the_recorder_and_the_recording_goes_on() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(d.path(), "robot-7");
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(&cfg, config(d.path(), &broker)).unwrap();
    broker.kill();
    let log = d.path().join("run.log");
    let _child = Kill(run(&cfg, &log));
    // keepalive 5 s: degraded past it, naming the link and why.
    let deadline = Instant::now() + Duration::from_secs(30);
    let v = loop {
        let v = status_json(d.path());
        let down = v["reasons"].as_array().is_some_and(|r| {
            r.iter()
                .any(|r| r.as_str().unwrap_or("").starts_with("fleet link down for"))
        });
        if down {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "never degraded by the link: {v:#}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(v["state"], "degraded", "{v:#}");
    assert_eq!(v["remote"]["connected"], false, "{v:#}");
    assert!(v["remote"]["last_error"].is_string(), "{v:#}");
    let imu = v["channels"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["topic"] == "/imu").cloned())
        .unwrap_or_default();
    assert!(
        imu["written"].as_u64().unwrap_or(0) > 100,
        "recording goes on: {v:#}"
    );

    // The broker comes back: so does the link, and the state.
    broker.start_again();
    let mut fleet = broker.watch("edgerec/robot-7/status", "fleet");
    let back = fleet
        .until(Duration::from_secs(60), |_, p| {
            p["remote"]["connected"] == true
        })
        .unwrap_or_else(|| {
            panic!(
                "the link never came back:\n{}\n{}",
                std::fs::read_to_string(&log).unwrap_or_default(),
                broker.log_text()
            )
        });
    assert!(
        !back["reasons"].as_array().is_some_and(|r| r
            .iter()
            .any(|r| r.as_str().unwrap_or("").starts_with("fleet link"))),
        "{back:#}"
    );
}
