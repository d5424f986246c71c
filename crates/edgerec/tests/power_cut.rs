//! The crash test (issue 3, item 4): `edgerec run` is killed with
//! SIGKILL at random moments, the session is recovered (by `edgerec
//! recover`, or by the start-up recovery of the next `edgerec run`), and
//! for every trial the recovered segment passes `edgerec check` and the
//! `mcap` crate's read-back with every CRC, every channel holds a gap-free
//! prefix of its sequence (the MCAP sequence field and the sequence each
//! synthetic message carries in its payload), and the messages lost are
//! only recent ones.
//!
//! SIGKILL loses what the process held in memory: the open chunk (at most
//! `chunk_max_age` of messages), chunks on their way through the
//! compressors and the sequencer, and the storage writer's partial block,
//! which reaches the file with the next sync tick (at most
//! `sync_interval` late; the sequencer checks every 20 ms, the bound below
//! keeps the 50 ms it was written with). What this proves is crash
//! consistency and how soon data reaches the kernel, not durability: a
//! SIGKILL leaves the kernel and its page cache running, so every byte
//! handed to the kernel survives it, and this test would pass with every
//! fdatasync removed (it depends on the partial block being written at
//! each tick, not on its being synced). The power-cut proof, where
//! unsynced data is really lost, is the emulated board's `power-cut`
//! scenario (`tests/qemu/run.py`, QEMU killed mid-recording).
//!
//! Seeds: `EDGEREC_POWER_CUT_SEED=<n>` repeats a run (each trial prints its
//! seed); `EDGEREC_POWER_CUT_TRIALS` changes the number of trials (20).
//! (The file and variable names are older than this distinction.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

const SYNC_INTERVAL_MS: u64 = 200;
const CHUNK_MAX_AGE_MS: u64 = 100;
/// The sequencer checks the sync policy every 20 ms now (pipeline.rs);
/// the bound keeps the 50 ms tick it was measured with.
const TICK_MS: u64 = 50;
/// Scheduling on this 2-core machine, with the test's own reading and a
/// debug build: the recorder's 6 threads (3 sources, chunker, compressor,
/// sequencer/storage) share 2 cores, so a thread that is due can wait one
/// or two scheduler slices (a few ms each) per hand-over, and there are
/// four hand-overs between a message and its write (source -> chunker ->
/// compressor -> sequencer -> io_uring). 150 ms is generous for that and
/// is the figure the issue's bar leaves room for.
const SCHEDULING_MARGIN_MS: u64 = 150;

/// Added to the bound under user-mode QEMU only: there every hand-over is
/// emulated, and on the 2-core CI machine with other work running a
/// thread that is due was seen to wait over a second (a loss of 1477 ms
/// against the native bound of 601). The bound there checks that the same
/// code keeps losing only a recent window on arm64, not the native figure.
const EMULATION_MARGIN_MS: u64 = 1500;

const IMAGE_BYTES: usize = 100 << 10;

/// (topic, rate in Hz).
const CHANNELS: [(&str, u64); 3] = [("/imu", 1000), ("/camera/image_raw", 30), ("/status", 100)];

fn config(root: &Path, compression: &str) -> String {
    format!(
        r#"
[recording]
root = "{root}"
session_prefix = "cut"

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
sync_interval = "{SYNC_INTERVAL_MS}ms"
preallocate = "16MiB"

[mcap]
compression = "{compression}"
chunk_max_age = "{CHUNK_MAX_AGE_MS}ms"

[pipeline]
memory_budget = "64MiB"

[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 1000

[[sources.synthetic]]
topic = "/camera/image_raw"
type = "sensor_msgs/msg/Image"
rate = 30
payload_size = {IMAGE_BYTES}

[[sources.synthetic]]
topic = "/status"
type = "std_msgs/msg/String"
rate = 100
"#,
        root = root.display()
    )
}

/// splitmix64: the seeded choices of a trial.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn edgerec(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("EDGEREC_LOG", "info")
        .output()
        .expect("run edgerec")
}

fn session_dirs(root: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|rd| {
            rd.map(|e| e.unwrap().path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The sequence number a synthetic message carries in its payload.
fn embedded_seq(topic: &str, data: &[u8]) -> u64 {
    match topic {
        "/imu" => {
            // CDR: 4-byte encapsulation, then header.stamp (8 bytes),
            // frame_id (u32 length incl. NUL + chars), padding to 8, then
            // orientation (4 x f64) and its covariance (9 x f64):
            // angular_velocity.x follows. Alignment counts from after the
            // encapsulation.
            let len = u32::from_le_bytes(data[12..16].try_into().unwrap()) as usize;
            let body = (8 + 4 + len).div_ceil(8) * 8;
            let at = 4 + body + 32 + 72;
            f64::from_le_bytes(data[at..at + 8].try_into().unwrap()) as u64
        }
        "/camera/image_raw" => {
            // `data` is the last field.
            let d = &data[data.len() - IMAGE_BYTES..];
            u64::from_le_bytes(d[..8].try_into().unwrap())
        }
        "/status" => {
            let at = data
                .windows(4)
                .position(|w| w == b"seq=")
                .expect("seq= in the String");
            std::str::from_utf8(&data[at + 4..at + 24])
                .unwrap()
                .parse()
                .unwrap()
        }
        other => panic!("unexpected topic {other}"),
    }
}

/// What one trial measured.
struct Trial {
    /// Loss window per topic: kill time minus the last kept log time, ms.
    loss_ms: BTreeMap<String, f64>,
    messages: u64,
}

/// Verifies the recovered session `dir` of a run killed at `kill_ns`.
fn verify(dir: &Path, kill_ns: u64, label: &str) -> Trial {
    let segs = edgerec_format::bag::segment_files(dir).unwrap();
    assert_eq!(segs.len(), 1, "{label}: segments {segs:?}");
    let seg = &segs[0];
    assert!(
        seg.extension().is_some_and(|e| e == "mcap"),
        "{label}: not recovered: {}",
        seg.display()
    );
    let o = edgerec(&["check", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{label}: check\n{}", text(&o));
    let rb = edgerec_testkit::mcap_readback(seg).unwrap_or_else(|e| panic!("{label}: {e}"));
    assert!(rb
        .metadata
        .contains_key(edgerec_format::recover::RECOVERED_METADATA));
    assert!(dir.join("metadata.yaml").exists(), "{label}");
    let mut last: BTreeMap<String, (u32, u64)> = BTreeMap::new();
    for m in &rb.messages {
        let next = last.get(&m.topic).map_or(0, |(s, _)| s + 1);
        assert_eq!(
            m.sequence, next,
            "{label}: {} MCAP sequence is not gap-free",
            m.topic
        );
        // edgerec's own topics (/edgerec/status, /edgerec/clock) carry
        // no sequence of their own; the MCAP one is checked above.
        if !m.topic.starts_with("/edgerec/") {
            assert_eq!(
                embedded_seq(&m.topic, &m.data),
                m.sequence as u64,
                "{label}: {} embedded sequence",
                m.topic
            );
        }
        assert!(
            m.log_time <= kill_ns,
            "{label}: a message logged after the kill"
        );
        last.insert(m.topic.clone(), (m.sequence, m.log_time));
    }
    let mut loss_ms = BTreeMap::new();
    for (topic, hz) in CHANNELS {
        let (_, t) = last
            .get(topic)
            .unwrap_or_else(|| panic!("{label}: nothing of {topic} survived"));
        let loss = (kill_ns - t) as f64 / 1e6;
        // One message period: a channel's last message is up to that old
        // even when nothing was lost.
        let period_ms = 1000 / hz;
        let emulation = if edgerec_testkit::qemu_user().is_some() {
            EMULATION_MARGIN_MS
        } else {
            0
        };
        let bound = SYNC_INTERVAL_MS
            + TICK_MS
            + 2 * CHUNK_MAX_AGE_MS
            + period_ms
            + SCHEDULING_MARGIN_MS
            + emulation;
        assert!(
            loss <= bound as f64,
            "{label}: {topic} lost {loss:.1} ms before the kill, more than {bound} ms"
        );
        loss_ms.insert(topic.to_string(), loss);
    }
    Trial {
        loss_ms,
        messages: rb.messages.len() as u64,
    }
}

#[test]
fn sigkill_at_random_moments_loses_only_the_last_window() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let base: u64 = std::env::var("EDGEREC_POWER_CUT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| realtime_ns() % 1_000_000_007);
    let trials: u64 = std::env::var("EDGEREC_POWER_CUT_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    eprintln!(
        "crash (SIGKILL): {trials} trials, EDGEREC_POWER_CUT_SEED={base}; bound per channel = \
         sync_interval {SYNC_INTERVAL_MS} + tick {TICK_MS} + 2 x chunk_max_age {CHUNK_MAX_AGE_MS} \
         + one message period + scheduling {SCHEDULING_MARGIN_MS} ms"
    );
    // Under user-mode QEMU the start-up alone (exec, dynamic loading,
    // configuration, the recovery scan) takes a good part of the 0.5 s
    // minimum, so a kill could land before the first chunk could possibly
    // be durable: there each delay counts from the first chunk's write
    // (the status's bytes_written) instead of the spawn.
    let emulated = edgerec_testkit::qemu_user();
    if let Some(q) = &emulated {
        eprintln!(
            "{q}: each kill delay counts from the first chunk's write, not the spawn; \
             the bound gets {EMULATION_MARGIN_MS} ms more"
        );
    }
    let mut worst: (f64, String) = (0.0, String::new());
    let mut early = 0;
    let mut worst_per_topic: BTreeMap<String, f64> = BTreeMap::new();
    for trial in 0..trials {
        let seed = base.wrapping_mul(1000).wrapping_add(trial);
        let mut rng = Rng(seed);
        let delay_ms = 500 + rng.next() % 2000;
        let compression = ["none", "lz4", "zstd"][(rng.next() % 3) as usize];
        // Every fourth trial relies on the start-up recovery of the next run.
        let at_start = trial % 4 == 3;
        let label = format!(
            "trial {trial} seed {seed} ({compression}, kill after {delay_ms} ms, {})",
            if at_start {
                "start-up recovery"
            } else {
                "edgerec recover"
            }
        );

        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("rec");
        let cfg = d.path().join("edgerec.toml");
        std::fs::write(&cfg, config(&root, compression)).unwrap();
        let mut child = Command::new(BIN)
            .args(["run", "--quiet", "--config", cfg.to_str().unwrap()])
            .env("EDGEREC_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        if emulated.is_some() {
            assert!(
                edgerec_testkit::wait_for_active_segment(&root, Duration::from_secs(60)),
                "{label}: no segment opened in 60 s"
            );
            // And until the first message is written: emulated, the
            // sources and the first chunk can come well after the file
            // (seen in CI: nothing of /imu durable 573 ms after it).
            let t = std::time::Instant::now();
            loop {
                let written = Command::new(BIN)
                    .args(["status", "--json", "--config", cfg.to_str().unwrap()])
                    .output()
                    .ok()
                    .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
                    .and_then(|v| v["storage"]["bytes_written"].as_u64())
                    .unwrap_or(0);
                if written > 0 {
                    break;
                }
                assert!(
                    t.elapsed() < Duration::from_secs(60),
                    "{label}: nothing written in 60 s"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        std::thread::sleep(Duration::from_millis(delay_ms));
        // SAFETY: kill(2) on the pid of a child we own and have not reaped.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGKILL) }, 0);
        let kill_ns = realtime_ns();
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
        let dirs = session_dirs(&root);
        assert_eq!(dirs.len(), 1, "{label}");
        let dir = dirs[0].clone();

        // The recovery's "stopped:" line: how the file ended.
        let stopped = |out: &str| {
            out.split(['\n', ';'])
                .find_map(|l| {
                    l.trim()
                        .strip_prefix("stopped:")
                        .map(|s| s.trim().to_string())
                })
                .unwrap_or_default()
        };
        let how;
        if at_start {
            let o = edgerec(&[
                "run",
                "--quiet",
                "--config",
                cfg.to_str().unwrap(),
                "--duration",
                "1s",
            ]);
            assert!(o.status.success(), "{label}: run\n{}", text(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(
                err.contains("recovery: ") && err.contains("(exit 0)"),
                "{label}: start-up recovery not reported\n{err}"
            );
            let after = session_dirs(&root);
            assert_eq!(after.len(), 2, "{label}: a new session beside the old");
            let new = after.iter().find(|p| **p != dir).unwrap();
            how = stopped(&err);
            let o = edgerec(&["check", new.to_str().unwrap()]);
            assert!(o.status.success(), "{label}: new session\n{}", text(&o));
        } else {
            let o = edgerec(&["recover", dir.to_str().unwrap()]);
            let out = String::from_utf8_lossy(&o.stdout);
            if o.status.code() == Some(1) && out.contains("NOTHING RECOVERABLE") {
                // Killed before the header reached the file.
                eprintln!("{label}: killed before anything was written");
                early += 1;
                continue;
            }
            assert_eq!(o.status.code(), Some(0), "{label}: recover\n{}", text(&o));
            how = stopped(&out);
        }
        let t = verify(&dir, kill_ns, &label);
        let (topic, loss) = t
            .loss_ms
            .iter()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(k, v)| (k.clone(), *v))
            .unwrap();
        let per: Vec<String> = t
            .loss_ms
            .iter()
            .map(|(k, v)| format!("{k} {v:.1}"))
            .collect();
        eprintln!(
            "{label}: {} messages kept; loss window ms: {}; stopped {how}",
            t.messages,
            per.join(", ")
        );
        if loss > worst.0 {
            worst = (loss, format!("{label}, {topic}"));
        }
        for (k, v) in &t.loss_ms {
            let w = worst_per_topic.entry(k.clone()).or_insert(0.0);
            *w = w.max(*v);
        }
    }
    assert!(
        early <= trials / 4,
        "{early} of {trials} trials were killed before anything was written"
    );
    let per: Vec<String> = worst_per_topic
        .iter()
        .map(|(k, v)| format!("{k} {v:.1}"))
        .collect();
    eprintln!(
        "crash (SIGKILL): worst loss {:.1} ms ({}); per channel: {}; {} of {trials} trials killed before the first write",
        worst.0,
        worst.1,
        per.join(", "),
        early
    );
}

/// `edgerec recover` exit codes over files and directories (those of
/// `mcap recover`): 0 clean, 3 a corrupt record skipped, 1 nothing
/// recoverable, the worst over a directory; `info` marks the result.
#[test]
fn recover_command_exit_codes() {
    // DDS peers, GStreamer, the recorder: a hang fails here, named.
    let _limit = edgerec_testkit::time_limit(std::time::Duration::from_secs(600));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    use edgerec_format::chunk::{ChunkBuilder, ChunkCompressor, Compression};
    use edgerec_format::records::{Channel, Schema};
    use edgerec_format::writer::{McapWriter, PROFILE_ROS2};

    // Three chunks; returns the bytes and where the second chunk is.
    let mut w = McapWriter::new(Vec::new(), PROFILE_ROS2, "test").unwrap();
    w.add_schema(&Schema {
        id: 1,
        name: "std_msgs/msg/String".into(),
        encoding: "ros2msg".into(),
        data: b"string data".to_vec(),
    })
    .unwrap();
    w.add_channel(&Channel {
        id: 1,
        schema_id: 1,
        topic: "/chatter".into(),
        message_encoding: "cdr".into(),
        metadata: Default::default(),
    })
    .unwrap();
    let mut z = ChunkCompressor::new(Compression::Zstd { level: 3 }).unwrap();
    let mut second = 0..0;
    for c in 0..3u32 {
        let mut b = ChunkBuilder::new(1 << 16);
        for i in 0..50u32 {
            let s = format!("seq={} {}", c * 50 + i, "x".repeat(200));
            b.push(
                1,
                c * 50 + i,
                1000 + (c * 50 + i) as u64,
                0,
                &s.into_bytes(),
            );
        }
        let ci = w.write_chunk(&b.take().seal(&mut z)).unwrap();
        if c == 1 {
            let s = ci.chunk_start_offset as usize;
            second = s..s + ci.chunk_length as usize;
        }
    }
    let (bytes, _) = w.finish().unwrap();

    let d = tempfile::tempdir().unwrap();
    let bag = d.path().join("bag");
    std::fs::create_dir(&bag).unwrap();
    let clean = bag.join("bag_0.mcap.active");
    std::fs::write(&clean, &bytes[..second.end + 5]).unwrap();
    let o = edgerec(&["recover", clean.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("kept:      100 messages"));
    let o = edgerec(&["info", bag.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("recovered: kept"),
        "{}",
        text(&o)
    );

    let mut flipped = bytes.clone();
    flipped[(second.start + second.end) / 2] ^= 1;
    std::fs::write(bag.join("bag_1.mcap.active"), &flipped).unwrap();
    std::fs::write(bag.join("bag_2.mcap.active"), b"").unwrap();
    let one = bag.join("bag_1.mcap.active");
    let o = edgerec(&["recover", one.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("CORRUPT"));

    // The directory: bag_2 holds nothing (1), the worst; it stays.
    std::fs::write(bag.join("bag_3.mcap.active"), &flipped).unwrap();
    let o = edgerec(&["recover", bag.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(bag.join("bag_2.mcap.active").exists());
    assert!(bag.join("bag_3.mcap").exists());
    let meta = std::fs::read_to_string(bag.join("metadata.yaml")).unwrap();
    assert!(meta.contains("bag_3.mcap"), "{meta}");
    // Run again: only the unrecoverable file is left, still 1.
    let o = edgerec(&["recover", bag.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}
