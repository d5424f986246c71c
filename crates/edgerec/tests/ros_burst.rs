//! A burst of discoveries costs bounded memory and is counted: a real DDS
//! peer (Python cyclonedds in a network namespace, as rmw_cyclonedds)
//! makes 1,000 topics, a writer and one sample each, as fast as Cyclone
//! makes them (about a second), while `edgerec run` records every topic
//! (`ros.all`) with `ros.max_topics = 200`. The first 200 are recorded;
//! the other 800 publications are refused and counted in `edgerec status
//! --json` (`ros.refused.topic_cap`); the run exits 0. Its peak RSS
//! (wait4's `ru_maxrss`, the kernel's VmHWM at exit) stays within the
//! same recorder's with no peer plus `pipeline.memory_budget`.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use edgerec_testkit::netns::{self, Netns};

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

/// `pipeline.memory_budget` of both runs, MiB.
const BUDGET_MIB: u64 = 64;

/// Waits for `child` (the recorder, run by `ip netns exec`, which execs
/// it) and returns its peak RSS in KiB; panics unless it exited 0.
fn wait_peak_kib(child: Child, limit: Duration, stderr: &std::path::Path) -> u64 {
    let t = Instant::now();
    loop {
        if let Some((st, kib)) = edgerec_testkit::reap_with_peak_rss(child.id()).unwrap() {
            assert!(
                libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0,
                "edgerec run: wait status {st:#x}\n{}",
                std::fs::read_to_string(stderr).unwrap_or_default()
            );
            return kib;
        }
        assert!(t.elapsed() < limit, "edgerec run did not end in {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `edgerec run` in `ns` for `secs`, recording every topic of the graph.
fn recorder(ns: &Netns, dir: &std::path::Path, secs: u32) -> (Child, std::path::PathBuf) {
    let data = dir.join("data");
    let cfg = dir.join("edgerec.toml");
    std::fs::write(
        &cfg,
        format!(
            "[recording]\nroot = \"{r}\"\n\n[health]\nwatchdog = \"\"\n\
             fault_file = \"{r}/last-fault.json\"\nstatus_socket = \"{r}/edgerec.sock\"\n\n\
             [pipeline]\nmemory_budget = \"{BUDGET_MIB}MiB\"\n\n\
             [ros]\nenabled = true\nall = true\nmax_topics = 200\n",
            r = data.display()
        ),
    )
    .unwrap();
    let stderr = dir.join("stderr.txt");
    let child = ns
        .command(BIN)
        .args(["run", "--config", cfg.to_str().unwrap()])
        .args(["--duration", &format!("{secs}s")])
        .env("EDGEREC_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    (child, stderr)
}

#[test]
fn a_burst_of_a_thousand_topics_is_capped_counted_and_bounded_in_memory() {
    // DDS peers and the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(600));
    if let Some(why) = netns::skip_reason() {
        why.report();
        return;
    }
    if let Some(q) = edgerec_testkit::qemu_user() {
        edgerec_testkit::skip::skip_allowed(
            edgerec_testkit::skip::Allowed::QemuUser,
            format!("{q}: the peak RSS would be the emulator's"),
        );
        return;
    }
    let _dds = netns::dds_serial();

    // The allowance: the same recorder with nobody on the graph.
    let quiet_ns = Netns::new();
    let quiet = tempfile::tempdir().unwrap();
    let (child, stderr) = recorder(&quiet_ns, quiet.path(), 8);
    let base_kib = wait_peak_kib(child, Duration::from_secs(60), &stderr);

    let ns = Netns::new();
    let tmp = tempfile::tempdir().unwrap();
    let (child, stderr) = recorder(&ns, tmp.path(), 12);
    let burst = ns
        .command(netns::python())
        .arg(netns::ros2peer())
        .args([
            "burst",
            "--topic",
            "/burst/t",
            "--type",
            "std_msgs/msg/Header",
        ])
        .args(["--topics", "1000", "--linger", "6"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = burst.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "burst peer: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let summary = String::from_utf8_lossy(&o.stdout).into_owned();
    println!("burst peer: {}", summary.trim());
    // The status, asked while the recorder runs.
    let status = ns
        .command(BIN)
        .args(["status", "--json", "--socket"])
        .arg(tmp.path().join("data/edgerec.sock"))
        .output()
        .unwrap();
    let peak_kib = wait_peak_kib(child, Duration::from_secs(60), &stderr);
    assert!(
        status.status.success(),
        "edgerec status: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let snapshot: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let refused = &snapshot["ros"]["refused"];
    let recorded = snapshot["channels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["topic"]
                .as_str()
                .is_some_and(|t| t.starts_with("/burst/"))
        })
        .count();
    println!("recorded {recorded} of the burst's topics; refused {refused}");
    assert_eq!(recorded, 200, "{snapshot:#}");
    assert_eq!(refused["topic_cap"].as_u64(), Some(800), "{snapshot:#}");
    let bound = base_kib + (BUDGET_MIB << 10);
    println!(
        "peak RSS {peak_kib} KiB; with nobody on the graph {base_kib} KiB, + the {BUDGET_MIB} MiB \
         pipeline budget = {bound} KiB"
    );
    assert!(
        peak_kib <= bound,
        "peak RSS {peak_kib} KiB over {bound} KiB (a quiet run {base_kib} KiB + the budget)"
    );
}
