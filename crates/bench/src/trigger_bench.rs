//! What rule triggers cost, two ways, in one run:
//!
//! 1. Per message: three rules of the kind users write (a BatteryState
//!    voltage, an Imu acceleration combination, a DiagnosticArray status
//!    level), each message decoded by the rule's compiled field paths and
//!    fed to its hold/cooldown state, timed on the thread's CPU clock over
//!    many messages; reported as ns per message and as a share of one core
//!    at 1 kHz.
//! 2. In the recorder: a 1 kHz synthetic BatteryState recorded in `mixed`
//!    mode (the battery continuous), alternately with no rule and with
//!    `voltage < 12.1` on it; the process's CPU time over each run
//!    (getrusage), the difference with the rule is the whole cost (the
//!    lane to the events stage, the stage, the decoding) at 1 kHz.
//!
//! Prints one JSON object. `--short` for CI (fewer messages and rounds).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgerec_config::{Config, Located, Rate, RecordingMode, SyntheticChannel, SyntheticKind};
use edgerec_format::cdr::{msg, DiagnosticStatusSpec, Time};
use edgerec_format::msgdefs;
use edgerec_format::msgtype::TypeTable;
use edgerec_recorder::events::{RulePlan, TriggerPlan};
use edgerec_recorder::{Recorder, RecorderOptions};
use edgerec_source::{Source, SystemClock};
use edgerec_synthetic::SyntheticSource;
use edgerec_trigger::{Condition, RuleState};

/// CPU time of this thread, ns.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time of the whole process (user + system), ns.
fn process_cpu_ns() -> u64 {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid out pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One rule on `n` payloads cycling through `payloads`: ns per message.
fn per_message(type_name: &str, when: &str, payloads: &[Vec<u8>], n: usize) -> anyhow::Result<f64> {
    let def = msgdefs::lookup(type_name).ok_or_else(|| anyhow::anyhow!("no {type_name}"))?;
    let types = TypeTable::parse(def.name, def.text())?;
    let compiled = Condition::parse(when)
        .map_err(|e| anyhow::anyhow!("{when}: {e}"))?
        .compile(&types)
        .map_err(|e| anyhow::anyhow!("{when}: {e}"))?;
    let mut state = RuleState::new(0, 0);
    let mut fired = 0u64;
    let t0 = thread_cpu_ns();
    for i in 0..n {
        let p = &payloads[i % payloads.len()];
        let holds = compiled.holds(p).unwrap_or(false);
        if state.update(i as u64 * 1_000_000, holds).is_some() {
            fired += 1;
            // What the stage does when a rule fires: read the values.
            std::hint::black_box(compiled.values(p).ok());
        }
    }
    let ns = (thread_cpu_ns() - t0) as f64 / n as f64;
    std::hint::black_box(fired);
    Ok(ns)
}

fn synthetic(kind: SyntheticKind, topic: &str) -> SyntheticSource {
    SyntheticSource::new(SyntheticChannel::new(topic, kind, Rate::Hz(1000.0)))
}

/// Payloads of a 1 kHz stream of `kind`, a sixth of them past the rule's
/// threshold so that the rule fires and clears.
fn stream(kind: SyntheticKind) -> Vec<Vec<u8>> {
    let s = synthetic(kind, "/x");
    (0..600u64).map(|i| s.encode(i, i * 1_000_000)).collect()
}

fn diagnostics() -> Vec<Vec<u8>> {
    (0..600u32)
        .map(|i| {
            let level = if i % 6 == 0 { 2 } else { 0 };
            let values = [("temperature", "61.5"), ("load", "0.42")];
            let statuses = [
                DiagnosticStatusSpec {
                    level,
                    name: "edgerec: storage",
                    message: "ok",
                    hardware_id: "nvme0",
                    values: &values,
                },
                DiagnosticStatusSpec {
                    level: 0,
                    name: "edgerec: clock",
                    message: "locked",
                    hardware_id: "",
                    values: &[],
                },
            ];
            msg::diagnostic_array(
                Time {
                    sec: i as i32,
                    nanosec: 0,
                },
                &statuses,
            )
        })
        .collect()
}

/// CPU time of one `secs`-long recording of a 1 kHz battery in `mixed`
/// mode, with or without the rule; ns.
fn recording_cpu(dir: &Path, secs: f64, with_rule: bool) -> anyhow::Result<u64> {
    let mut cfg = Config::default();
    cfg.recording.root = dir.to_path_buf();
    cfg.recording.mode = RecordingMode::Mixed;
    cfg.recording.continuous_topics = vec!["/battery".into()];
    cfg.storage.backend = edgerec_config::StorageBackend::Buffered;
    cfg.storage.preallocate = 1 << 20;
    cfg.retention.min_free_bytes = 0;
    cfg.retention.min_free_percent = 0;
    let mut opts = RecorderOptions::from_config(&cfg);
    opts.compressor_threads = 1;
    let mut plan = TriggerPlan::from_config(&cfg).ok_or_else(|| anyhow::anyhow!("no plan"))?;
    if with_rule {
        plan.rules.push(RulePlan {
            name: "low".into(),
            topic: "/battery".into(),
            every_ns: None,
            when: Located {
                text: "voltage < 12.1".into(),
                ..Located::default()
            },
            hold_for_ns: 0,
            pre_ns: 0,
            post_ns: 0,
            cooldown_ns: 0,
            topics: vec!["/battery".into()],
        });
    }
    opts.triggers = Some(plan);
    let mut ch = SyntheticChannel::new("/battery", SyntheticKind::BatteryState, Rate::Hz(1000.0));
    // Above the threshold throughout: the cost measured is evaluating,
    // not writing clips.
    ch.voltage = edgerec_config::VoltageProfile::constant(12.6);
    let sources: Vec<Box<dyn Source>> = vec![Box::new(SyntheticSource::new(ch))];
    let c0 = process_cpu_ns();
    let rec = Recorder::start(opts, sources, Arc::new(SystemClock))?;
    std::thread::sleep(Duration::from_secs_f64(secs));
    let report = rec.stop()?;
    let used = process_cpu_ns() - c0;
    anyhow::ensure!(report.status.drops() == 0, "drops in the bench run");
    let _ = std::fs::remove_dir_all(&report.session_dir);
    Ok(used)
}

fn main() -> anyhow::Result<()> {
    let short = std::env::args().any(|a| a == "--short");
    let dir = std::env::args()
        .skip_while(|a| a != "--dir")
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("edgerec-trigger-bench"));
    std::fs::create_dir_all(&dir)?;
    let (n, rounds, secs) = if short {
        (100_000, 3, 2.0)
    } else {
        (1_000_000, 5, 10.0)
    };
    let cases = [
        (
            "sensor_msgs/msg/BatteryState",
            "voltage < 12.1",
            stream(SyntheticKind::BatteryState),
        ),
        (
            "sensor_msgs/msg/Imu",
            "linear_acceleration.x < -4.0 or (linear_acceleration.z > 12.0 and not (angular_velocity.z == 0))",
            stream(SyntheticKind::Imu),
        ),
        (
            "diagnostic_msgs/msg/DiagnosticArray",
            "status[0].level >= 2 and status[0].name == \"edgerec: storage\"",
            diagnostics(),
        ),
    ];
    let mut per = Vec::new();
    for (ty, when, payloads) in &cases {
        let runs: Vec<f64> = (0..rounds)
            .map(|_| per_message(ty, when, payloads, n))
            .collect::<anyhow::Result<_>>()?;
        let ns = median(runs);
        per.push(serde_json::json!({
            "type": ty, "when": when, "ns_per_message": ns,
            "core_percent_at_1khz": ns * 1000.0 / 1e9 * 100.0,
        }));
    }
    let started = Instant::now();
    let mut without = Vec::new();
    let mut with = Vec::new();
    for _ in 0..rounds {
        without.push(recording_cpu(&dir, secs, false)? as f64);
        with.push(recording_cpu(&dir, secs, true)? as f64);
    }
    let extra: Vec<f64> = with
        .iter()
        .zip(&without)
        .map(|(w, o)| (w - o) / 1e9 / secs * 100.0)
        .collect();
    let out = serde_json::json!({
        "per_message": per,
        "recorder_1khz_battery": {
            "seconds_per_run": secs,
            "rounds": rounds,
            "cpu_percent_without_rule": median(without.iter().map(|c| c / 1e9 / secs * 100.0).collect()),
            "cpu_percent_with_rule": median(with.iter().map(|c| c / 1e9 / secs * 100.0).collect()),
            "rule_cost_core_percent": median(extra),
            "wall_s": started.elapsed().as_secs_f64(),
        },
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
