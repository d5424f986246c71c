//! The control socket checks who asks, end to end through the binary: a
//! running recorder's socket takes connections from any local user, and
//! `edgerec ctl` run as another user (`nobody`, with and without the
//! configured groups) is refused with the group to join, or carried out
//! and said to be by that user; every request is in the recorder's
//! `edgerec::audit` log; and a client that sends a byte a second holds no
//! one else up.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");
const NOBODY: u32 = 65534;

use edgerec_testkit::KillOnDrop as Kill;

fn config(dir: &Path) -> String {
    format!(
        r#"
[recording]
root = "{d}/rec"
session_prefix = "ctl"

[retention]
min_free_bytes = 0
min_free_percent = 0

[clock]
ptp4l_socket = "{d}/no-ptp4l"

[health]
watchdog = ""
fault_file = "{d}/last-fault.json"
status_socket = "{d}/status.sock"
control_socket = "{d}/ctl.sock"
# The recorder runs as root here: its own group, root, controls; the
# group `users` (gid 100 on Debian) may read.
read_group = "users"

[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 100
"#,
        d = dir.display()
    )
}

/// `edgerec ctl VERB --socket SOCK` as uid/gid `nobody` with `groups` as
/// its supplementary groups.
fn ctl_as_nobody(sock: &Path, verb: &str, groups: &[libc::gid_t]) -> Output {
    as_nobody(&["ctl", "--socket", sock.to_str().unwrap(), verb], groups)
}

/// `edgerec ARGS...` as uid/gid `nobody` with `groups` as its
/// supplementary groups.
fn as_nobody(args: &[&str], groups: &[libc::gid_t]) -> Output {
    let groups = groups.to_vec();
    let mut c = Command::new(BIN);
    c.args(args);
    // SAFETY: between fork and exec only async-signal-safe calls
    // (setgroups, setgid, setuid) on memory the closure owns.
    unsafe {
        c.pre_exec(move || {
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                || libc::setgid(NOBODY) != 0
                || libc::setuid(NOBODY) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_control_socket_answers_by_who_asks_and_audits_it() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        edgerec_testkit::skip::skip(
            "asking as another user needs root (scripts/test runs as root)",
        );
        return;
    }
    let d = tempfile::tempdir().unwrap();
    // `nobody` must reach the socket in it.
    std::fs::set_permissions(
        d.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(&cfg, config(d.path())).unwrap();
    let log = d.path().join("edgerec.log");
    let child = Command::new(BIN)
        .args([
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--duration",
            "60s",
        ])
        .env("EDGEREC_LOG", "warn,edgerec::audit=info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut child = Kill(child);
    let sock = d.path().join("ctl.sock");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let o = Command::new(BIN)
            .args(["ctl", "--socket", sock.to_str().unwrap(), "is-paused"])
            .output()
            .unwrap();
        if o.status.success() {
            break;
        }
        assert!(Instant::now() < deadline, "no control socket: {}", text(&o));
        std::thread::sleep(Duration::from_millis(200));
    }

    // In no group: refused, reading and controlling, each naming the
    // group to join.
    let o = ctl_as_nobody(&sock, "is-paused", &[]);
    assert!(!o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("is-paused refused: nobody (uid 65534) is not in group `users` or `root`"),
        "{t}"
    );
    assert!(t.contains("usermod -aG users nobody"), "{t}");
    let o = ctl_as_nobody(&sock, "pause", &[]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("pause refused: nobody (uid 65534) is not in group `root`: join it (usermod -aG root nobody"), "{}", text(&o));

    // The status socket answers by the same rule.
    let status_sock = d.path().join("status.sock");
    let status = [
        "status",
        "--socket",
        status_sock.to_str().unwrap(),
        "--json",
    ];
    let o = as_nobody(&status, &[]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("status refused: nobody (uid 65534) is not in group `users` or `root`"),
        "{}",
        text(&o)
    );
    let o = as_nobody(&status, &[100]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    assert!(v["state"].is_string(), "{}", text(&o));

    // In the read group: it may read, not control.
    let o = ctl_as_nobody(&sock, "is-paused", &[100]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("\"paused\":false"), "{}", text(&o));
    let o = ctl_as_nobody(&sock, "pause", &[100]);
    assert!(!o.status.success(), "{}", text(&o));
    // `list` reads: the session being recorded, its segment open.
    let o = ctl_as_nobody(&sock, "list", &[100]);
    assert!(o.status.success(), "{}", text(&o));
    let reply: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    let list: serde_json::Value =
        serde_json::from_str(reply["message"].as_str().unwrap_or("")).unwrap_or_default();
    assert_eq!(list["sessions_total"], 1, "{}", text(&o));
    let seg = &list["sessions"][0]["files"][0];
    assert_eq!(
        (seg["state"].as_str(), seg["upload"].as_str()),
        (Some("recording"), Some("off")),
        "{list:#}"
    );

    // In the control group: the pause is carried out, and is by nobody.
    let o = ctl_as_nobody(&sock, "pause", &[0]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("\"paused\":true"), "{}", text(&o));
    // The status shows it within its next snapshot.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let status = Command::new(BIN)
            .args(["status", "--config", cfg.to_str().unwrap(), "--json"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap_or_default();
        if v["state"] == "paused" {
            let by = v["pause"]["by"].as_str().unwrap_or_default();
            assert!(by.starts_with("uid 65534 (nobody, pid "), "{v:#}");
            break;
        }
        assert!(Instant::now() < deadline, "no pause in the status: {v:#}");
        std::thread::sleep(Duration::from_millis(200));
    }

    // A client that sends a byte a second holds no one up.
    let mut slow = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    let trickle = std::thread::spawn(move || {
        let mut reply = String::new();
        for b in b"resume" {
            if slow.write_all(&[*b]).is_err() {
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        let _ = slow.read_to_string(&mut reply);
        reply
    });
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    let o = Command::new(BIN)
        .args(["ctl", "--socket", sock.to_str().unwrap(), "is-paused"])
        .output()
        .unwrap();
    let took = t0.elapsed();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        took < Duration::from_secs(2),
        "answered after {took:?} beside a slow client"
    );
    let slow_reply = trickle.join().unwrap();
    assert!(
        slow_reply.contains("no whole command line within"),
        "{slow_reply}"
    );
    // The slow client's bytes were not taken as a resume.
    assert!(text(&o).contains("\"paused\":true"), "{}", text(&o));

    // Every request that reached a command is in the audit log, with
    // who asked and what came of it.
    // SAFETY: kill(2) on our child's pid.
    unsafe { libc::kill(child.0.id() as i32, libc::SIGINT) };
    assert!(child.0.wait().unwrap().success());
    let log = std::fs::read_to_string(&log).unwrap();
    let audit: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("edgerec::audit"))
        .collect();
    assert!(
        audit.iter().any(|l| l.contains("uid 65534 (nobody, pid")
            && l.contains("pause: refused")
            && l.contains("accepted=false")),
        "{log}"
    );
    assert!(
        audit.iter().any(|l| l.contains("uid 65534 (nobody, pid")
            && l.contains("pause: done")
            && l.contains("uid=65534")
            && l.contains("accepted=true")),
        "{log}"
    );

    // And in the recording: /edgerec/audit holds the refused pause and
    // the one carried out (written while recording was paused: the
    // channel is kept through the hold), each with the uid.
    let session = std::fs::read_dir(d.path().join("rec"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .expect("a session directory");
    let cat = Command::new(BIN)
        .args(["cat", "--topic", "/edgerec/audit", "--json"])
        .arg(&session)
        .output()
        .unwrap();
    assert!(cat.status.success(), "{}", text(&cat));
    let records: Vec<serde_json::Value> = String::from_utf8_lossy(&cat.stdout)
        .lines()
        .map(|l| {
            let m: serde_json::Value = serde_json::from_str(l).unwrap();
            serde_json::from_str(m["message"]["data"].as_str().unwrap()).unwrap()
        })
        .collect();
    let by_nobody = |accepted: bool| {
        records.iter().any(|r| {
            r["uid"] == NOBODY
                && r["user"] == "nobody"
                && r["command"] == "pause"
                && r["surface"] == "control socket"
                && r["accepted"] == accepted
        })
    };
    assert!(by_nobody(false) && by_nobody(true), "{records:#?}");
    // Reading is not a control action: no is-paused in the recording.
    assert!(
        !records.iter().any(|r| r["command"] == "is-paused"),
        "{records:#?}"
    );
}
