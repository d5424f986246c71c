//! The watchdog path end to end on the host, with the test-only switch
//! (`--features fault-injection`: SIGUSR2 makes the storage stage hang).
//! systemd's watchdog is played by a datagram socket: `WATCHDOG=1` stops
//! within the stage deadline of the hang, the fault file names `storage`,
//! the status says `fault`; after the process is killed (what systemd or
//! the hardware watchdog would do), the next start recovers the unfinished
//! segment and reports the fault once. And each stage of the pipeline
//! panicked in turn (`EDGEREC_FAULT_PANIC=STAGE@MS`): the run ends in
//! fault within a stage deadline (exit 70, no hang), the fault file names
//! the dead stage, and the next start recovers the segment it left
//! `.active`. The hardware device itself is exercised on the QEMU board
//! (tests/qemu).
#![cfg(feature = "fault-injection")]

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

use edgerec_testkit::KillOnDrop as Kill;

fn config(d: &Path) -> String {
    format!(
        r#"
[recording]
root = "{d}/rec"
[retention]
min_free_bytes = 0
min_free_percent = 0
[storage]
sync_interval = "200ms"
[health]
watchdog = ""
stage_deadline = "1s"
fault_file = "{d}/last-fault.json"
status_socket = "{d}/edgerec.sock"
[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 200
"#,
        d = d.display()
    )
}

fn status(cfg: &Path) -> serde_json::Value {
    let o = Command::new(BIN)
        .args(["status", "--json", "--config", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ok() {
        assert!(t0.elapsed() < limit, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_hung_storage_stage_stops_the_watchdog_and_is_reported_at_the_next_start() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(&cfg, config(d.path())).unwrap();
    let sock = d.path().join("notify.sock");
    let notify = UnixDatagram::bind(&sock).unwrap();
    notify
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let pings: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let listening = Arc::new(AtomicBool::new(true));
    let listener = {
        let (pings, listening) = (pings.clone(), listening.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while listening.load(Ordering::Acquire) {
                if let Ok(n) = notify.recv(&mut buf) {
                    if &buf[..n] == b"WATCHDOG=1" {
                        pings.lock().unwrap().push(Instant::now());
                    }
                }
            }
        })
    };
    let run = |extra_env: bool| {
        let mut c = Command::new(BIN);
        c.args([
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--duration",
            "60s",
        ])
        .env("EDGEREC_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        if extra_env {
            c.env("NOTIFY_SOCKET", &sock)
                .env("WATCHDOG_USEC", "2000000");
        }
        Kill(c.spawn().unwrap())
    };

    let mut first = run(true);
    wait_for("a recording status", Duration::from_secs(20), || {
        d.path().join("edgerec.sock").exists()
            && status(&cfg)["stages"]
                .as_array()
                .is_some_and(|s| s.iter().any(|x| x["name"] == "storage"))
    });
    wait_for("systemd pings", Duration::from_secs(5), || {
        pings.lock().unwrap().len() >= 2
    });

    // Hang the storage stage.
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(first.0.id() as i32, libc::SIGUSR2);
    }
    let hung_at = Instant::now();
    wait_for("the fault file", Duration::from_secs(5), || {
        d.path().join("last-fault.json").exists()
    });
    let fault: serde_json::Value =
        serde_json::from_slice(&std::fs::read(d.path().join("last-fault.json")).unwrap()).unwrap();
    assert_eq!(fault["stage"], "storage", "{fault:#}");
    std::thread::sleep(Duration::from_millis(1500));
    // The last WATCHDOG=1 came within the deadline (1 s) plus one check
    // period (500 ms: a quarter of systemd's 2 s) of the hang, plus slack.
    let last = *pings.lock().unwrap().last().unwrap();
    let fed_after = last.saturating_duration_since(hung_at);
    assert!(
        fed_after <= Duration::from_millis(1500 + 300),
        "systemd was fed {fed_after:?} after the hang"
    );
    let s = status(&cfg);
    assert_eq!(s["state"], "fault", "{s:#}");
    assert!(
        s["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r == "stage storage stalled"),
        "{s:#}"
    );

    // systemd (or the board's watchdog) ends it the hard way.
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    listening.store(false, Ordering::Release);
    listener.join().unwrap();
    // The socket file stays behind a killed process; the next start
    // replaces it.
    let second = run(false);
    wait_for("the next start's status", Duration::from_secs(20), || {
        Command::new(BIN)
            .args(["status", "--json", "--config", cfg.to_str().unwrap()])
            .output()
            .is_ok_and(|o| {
                o.status.success()
                    && serde_json::from_slice::<serde_json::Value>(&o.stdout)
                        .is_ok_and(|v| v["state"] != "booting")
            })
    });
    let s = status(&cfg);
    assert_eq!(s["last_fault"]["stage"], "storage", "{s:#}");
    assert!(!d.path().join("last-fault.json").exists());
    assert!(d.path().join("last-fault.reported.json").exists());
    // The killed run's segment was recovered before the new one started.
    let session = std::fs::read_dir(d.path().join("rec"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .min()
        .unwrap();
    let names: Vec<String> = std::fs::read_dir(&session)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().any(|n| n.ends_with(".mcap")) && !names.iter().any(|n| n.ends_with(".active")),
        "{names:?}"
    );
    drop(second);
}

fn sessions(root: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(root)
        .map(|r| {
            r.map(|e| e.unwrap().path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn each_stage_that_panics_ends_the_run_in_fault_and_the_next_start_recovers() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    for stage in ["chunker", "compressor", "storage", "closer"] {
        let d = tempfile::tempdir().unwrap();
        let cfg = d.path().join("edgerec.toml");
        // Segments of 1 s, so the closer has work when it is its turn.
        std::fs::write(
            &cfg,
            config(d.path()) + "[segment]\nmax_duration = \"1s\"\n",
        )
        .unwrap();
        let t0 = Instant::now();
        let mut first = Kill(
            Command::new(BIN)
                .args([
                    "run",
                    "--config",
                    cfg.to_str().unwrap(),
                    "--duration",
                    "60s",
                ])
                .env("EDGEREC_LOG", "warn")
                .env("EDGEREC_FAULT_PANIC", format!("{stage}@2500"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        // The panic comes 2.5 s in; the run must end within one stage
        // deadline (1 s) of it, plus slack for a loaded machine.
        let code = loop {
            if let Some(st) = first.0.try_wait().unwrap() {
                break st.code();
            }
            assert!(
                t0.elapsed() < Duration::from_millis(2500 + 1000 + 2500),
                "{stage}: the run did not end after the panic (hang)"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        eprintln!("{stage}: ended {:?} after the start", t0.elapsed());
        assert_eq!(code, Some(70), "{stage}: exit code");
        let fault: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.path().join("last-fault.json")).unwrap())
                .unwrap();
        assert!(
            fault["stage"].as_str().unwrap().starts_with(stage),
            "{stage}: {fault:#}"
        );
        assert!(
            fault["message"].as_str().unwrap().contains("died"),
            "{stage}: {fault:#}"
        );
        let session = sessions(&d.path().join("rec")).remove(0);
        let before = files(&session);
        assert!(
            before.iter().any(|n| n.ends_with(".mcap.active")),
            "{stage}: the open segment is left .active: {before:?}"
        );

        // The next start recovers it, and records on.
        let o = Command::new(BIN)
            .args(["run", "--config", cfg.to_str().unwrap(), "--duration", "1s"])
            .env("EDGEREC_LOG", "warn")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{stage}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let after = files(&session);
        assert!(
            !after.iter().any(|n| n.ends_with(".active")),
            "{stage}: still unfinished after the next start: {after:?}"
        );
        let check = Command::new(BIN)
            .args(["check", session.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "{stage}: {}",
            String::from_utf8_lossy(&check.stdout)
        );
    }
}
