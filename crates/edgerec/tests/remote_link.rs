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
journal = "{d}/remote/commands.jsonl"

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
    // A source that fails every second: its warnings go to the fleet.
    let flaky = "\n[[sources.synthetic]]\ntopic = \"/flaky\"\ntype = \"std_msgs/msg/String\"\nrate = 10\nfault = \"error-every:1s\"\n";
    std::fs::write(&cfg, config(d.path(), &broker) + flaky).unwrap();
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
    // The flaky source's warnings, forwarded.
    let warning = fleet
        .until(Duration::from_secs(20), |t, p| {
            t == "edgerec/robot-7/log" && p["level"] == "WARN"
        })
        .unwrap_or_else(|| panic!("no warning forwarded:\n{}", why()));
    assert!(
        warning["message"].as_str().unwrap_or("").contains("/flaky")
            || warning.to_string().contains("flaky"),
        "{warning}"
    );
    assert!(warning["at"].as_i64().unwrap_or(0) > 0, "{warning}");

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

/// config/demo.toml's synthetic vehicle and test camera, recording under
/// `dir` in `mixed` mode (the IMU and the status all the time, the lidar
/// and the cameras in clips), with the link to `b` taking every command.
fn demo_config(dir: &Path, b: &Broker) -> String {
    let demo = std::fs::read_to_string(edgerec_testkit::workspace_root().join("config/demo.toml"))
        .unwrap()
        .replace("\"./data", &format!("\"{}", dir.display()))
        .replace(
            "session_prefix = \"demo\"",
            "session_prefix = \"fleet\"\nmode = \"mixed\"\ncontinuous_topics = [\"/imu/data\", \"/vehicle/status\"]",
        )
        ;
    let t = b.tls.display();
    format!(
        "{demo}\n[clock]\nptp4l_socket = \"{d}/no-ptp4l\"\n\n[retention]\nmin_free_bytes = 0\nmin_free_percent = 0\n\n\
         [triggers]\npre = \"1s\"\npost = \"1s\"\n\n\
         [remote]\nbroker = \"mqtts://127.0.0.1:{port}\"\nca_file = \"{t}/ca.pem\"\ncert_file = \"{t}/vehicle.pem\"\n\
         key_file = \"{t}/vehicle.key\"\nvehicle_id = \"robot-7\"\nkeepalive = \"5s\"\nstatus_interval = \"1s\"\n\
         allow = [\"trigger\", \"pause\", \"resume\", \"split\", \"status\", \"list\"]\njournal = \"{d}/remote/commands.jsonl\"\n",
        d = dir.display(),
        port = b.port,
    )
}

/// The replies to command `id` until one with a final status (or a
/// refusal), in order.
fn replies_to(
    fleet: &mut edgerec_testkit::mqtt::Watch,
    id: &str,
    why: &dyn Fn() -> String,
) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    loop {
        let r = fleet
            .until(Duration::from_secs(20), |t, p| {
                t == "edgerec/robot-7/reply" && p["id"] == id
            })
            .unwrap_or_else(|| panic!("replies to {id}: {out:?}\n{}", why()));
        let last = r["status"] != "accepted";
        out.push(r);
        if last {
            return out;
        }
    }
}

/// The one session directory under `root` (besides `events/`).
fn session_dir(root: &Path) -> std::path::PathBuf {
    std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("fleet_"))
        })
        .expect("a session")
}

fn cat(session: &Path, topic: &str) -> Vec<serde_json::Value> {
    let o = Command::new(BIN)
        .args(["cat", "--topic", topic, "--json"])
        .arg(session)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn the_fleet_triggers_a_clip_and_a_command_delivered_twice_runs_once() {
    if !ready() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let mut broker = Broker::start(d.path(), "robot-7");
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(&cfg, demo_config(d.path(), &broker)).unwrap();
    let mut fleet = broker.watch("edgerec/robot-7/#", "fleet");
    let log = d.path().join("run.log");
    let mut child = Kill(run(&cfg, &log));
    let broker_log = d.path().join("mosquitto.log");
    let why = || {
        format!(
            "{}\n--- broker ---\n{}",
            std::fs::read_to_string(&log).unwrap_or_default(),
            std::fs::read_to_string(&broker_log).unwrap_or_default()
        )
    };
    fleet
        .until(Duration::from_secs(30), |t, p| {
            t == "edgerec/robot-7/connection" && p["online"] == true
        })
        .unwrap_or_else(|| panic!("never online:\n{}", why()));
    edgerec_testkit::wait_for_active_segment(d.path(), Duration::from_secs(20));
    // The pre-roll fills.
    std::thread::sleep(Duration::from_millis(1500));

    let trigger = r#"{"id":"trig-1","command":"trigger","reason":"near miss at gate 3","issued_by":"ops/alice"}"#;
    assert!(broker.publish("edgerec/robot-7/cmd", trigger, "fleet"));
    let r = replies_to(&mut fleet, "trig-1", &why);
    let statuses: Vec<&str> = r
        .iter()
        .map(|r| r["status"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(statuses, ["accepted", "done"], "{r:?}");
    assert!(
        r[1]["result"]
            .as_str()
            .unwrap_or("")
            .starts_with("event ctl recorded"),
        "{r:?}"
    );
    // The retained status shows the clip once it is written.
    fleet
        .until(Duration::from_secs(20), |t, p| {
            t == "edgerec/robot-7/status" && p["events"]["clips"].as_u64() == Some(1)
        })
        .unwrap_or_else(|| panic!("no clip in the status:\n{}", why()));
    let clips: Vec<_> = std::fs::read_dir(d.path().join("events"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(clips.len(), 1, "{clips:?}");
    assert!(
        clips[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("ctl_"),
        "{clips:?}"
    );

    // Delivered again: not run, the first answer back.
    assert!(broker.publish("edgerec/robot-7/cmd", trigger, "fleet"));
    let r = replies_to(&mut fleet, "trig-1", &why);
    assert_eq!(
        (r[0]["status"].as_str(), r[0]["duplicate"].as_bool()),
        (Some("done"), Some(true)),
        "{r:?}"
    );
    // An unknown command, a malformed one: refused with the reason.
    assert!(broker.publish(
        "edgerec/robot-7/cmd",
        r#"{"id":"x-1","command":"reboot"}"#,
        "fleet"
    ));
    let r = replies_to(&mut fleet, "x-1", &why);
    assert_eq!(r[0]["status"], "rejected");
    assert!(
        r[0]["reason"]
            .as_str()
            .unwrap()
            .contains("unknown command `reboot`"),
        "{r:?}"
    );

    // The broker dies and comes back: the link returns, a repeat of
    // trig-1 is still not run, and the recording never stopped.
    broker.kill();
    std::thread::sleep(Duration::from_secs(2));
    broker.start_again();
    let mut fleet = broker.watch("edgerec/robot-7/#", "fleet");
    fleet
        .until(Duration::from_secs(60), |t, p| {
            t == "edgerec/robot-7/status"
                && p["remote"]["connected"] == true
                && p["remote"]["connects"].as_u64() >= Some(2)
        })
        .unwrap_or_else(|| panic!("the link never came back:\n{}", why()));
    assert!(broker.publish("edgerec/robot-7/cmd", trigger, "fleet"));
    let r = replies_to(&mut fleet, "trig-1", &why);
    assert_eq!(r[0]["duplicate"], true, "{r:?}");
    assert!(broker.publish(
        "edgerec/robot-7/cmd",
        r#"{"id":"l-1","command":"list"}"#,
        "fleet"
    ));
    let r = replies_to(&mut fleet, "l-1", &why);
    let list = &r.last().unwrap()["result"];
    assert_eq!(list["sessions_total"], 1, "{list:#}");
    assert_eq!(list["clips_total"], 1, "{list:#}");
    // The list is what is on disk: the session's segments (the last one
    // open) and the clip's file.
    let session = session_dir(d.path());
    let listed: Vec<&str> = list["sessions"][0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    assert_eq!(
        list["sessions"][0]["name"].as_str(),
        session.file_name().and_then(|n| n.to_str()),
        "{list:#}"
    );
    assert!(
        listed.last().is_some_and(|f| f.ends_with(".mcap.active")),
        "{list:#}"
    );
    for f in &listed {
        let closed = f.trim_end_matches(".active");
        assert!(
            session.join(f).exists() || session.join(closed).exists(),
            "{f} listed, not on disk"
        );
    }
    let clip_file = &list["clips"][0]["files"][0];
    assert!(clip_file["messages"].as_u64().unwrap_or(0) > 0, "{list:#}");
    assert!(
        clip_file["start_ns"].as_u64() < clip_file["end_ns"].as_u64(),
        "{list:#}"
    );

    // A pause shows in the retained status, with who asked; then resume.
    let wall_ns = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    let pause_from = wall_ns();
    assert!(broker.publish(
        "edgerec/robot-7/cmd",
        r#"{"id":"p-1","command":"pause","issued_by":"ops/bob"}"#,
        "fleet"
    ));
    let r = replies_to(&mut fleet, "p-1", &why);
    assert_eq!(
        (
            r.last().unwrap()["status"].as_str(),
            r.last().unwrap()["paused"].as_bool()
        ),
        (Some("done"), Some(true)),
        "{r:?}"
    );
    let paused = fleet
        .until(Duration::from_secs(20), |t, p| {
            t == "edgerec/robot-7/status" && p["pause"].is_object()
        })
        .unwrap_or_else(|| panic!("no pause in the status:\n{}", why()));
    let by = paused["pause"]["by"].as_str().unwrap_or("");
    assert!(
        by.starts_with("the fleet (command p-1 via mqtts://127.0.0.1:")
            && by.ends_with(", issued by ops/bob)"),
        "{by}"
    );
    assert_eq!(paused["state"], "paused", "{paused:#}");
    assert!(broker.publish(
        "edgerec/robot-7/cmd",
        r#"{"id":"r-1","command":"resume"}"#,
        "fleet"
    ));
    let r = replies_to(&mut fleet, "r-1", &why);
    assert_eq!(r.last().unwrap()["paused"], false, "{r:?}");
    let pause_to = wall_ns();

    // SAFETY: kill with a child's pid and a signal number.
    assert_eq!(unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) }, 0);
    let st = child.0.wait().unwrap();
    assert!(st.success(), "{st}\n{}", why());
    let clips = std::fs::read_dir(d.path().join("events")).unwrap().count();
    assert_eq!(clips, 1, "the trigger ran once");

    // In the recording: the fleet's trigger in /edgerec/audit, with the
    // command's id and who issued it; /imu without a gap.
    let session = session_dir(d.path());
    let audit: Vec<serde_json::Value> = cat(&session, "/edgerec/audit")
        .iter()
        .filter_map(|m| serde_json::from_str(m["message"]["data"].as_str()?).ok())
        .collect();
    let fleet_trigger = |accepted: bool| {
        audit.iter().any(|a| {
            a["surface"] == "fleet link"
                && a["command_id"] == "trig-1"
                && a["issued_by"] == "ops/alice"
                && a["accepted"] == accepted
        })
    };
    assert!(
        fleet_trigger(true) && fleet_trigger(false),
        "the run and the refused repeats: {audit:#?}"
    );
    let imu = cat(&session, "/imu/data");
    let times: Vec<u64> = imu.iter().filter_map(|m| m["log_time"].as_u64()).collect();
    assert!(times.len() > 2000, "{} /imu/data messages", times.len());
    // No gap but the operator's pause (the broker's restart made none).
    let gap = times
        .windows(2)
        .filter(|w| w[1] < pause_from || w[0] > pause_to)
        .map(|w| w[1].saturating_sub(w[0]))
        .max()
        .unwrap_or(0);
    assert!(
        gap < 200_000_000,
        "a {} ms gap in /imu/data",
        gap / 1_000_000
    );
}
