//! `edgerec-dds-count`: the bare DDS receiver of `scripts/bench --ros`.
//! Subscribes to each `TOPIC=TYPE` with the QoS edgerec would ask of a
//! reliable publisher, counts and discards every sample until SIGINT or
//! SIGTERM (or `--seconds`), then prints `{"TOPIC": {"messages": N, "bytes": B}, ...}` and its CPU
//! time. Runs in the benchmark's network namespace.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use edgerec_ros::dds::count::CountingReader;
use edgerec_ros::qos::RequestQos;

fn main() -> anyhow::Result<()> {
    let mut seconds = 10.0;
    let mut topics = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--seconds" {
            seconds = args.next().context("--seconds N")?.parse()?;
        } else if let Some((t, ty)) = a.split_once('=') {
            topics.push((t.to_owned(), ty.to_owned()));
        } else {
            bail!("usage: edgerec-dds-count [--seconds S] TOPIC=pkg/msg/Type ...");
        }
    }
    let readers = topics
        .iter()
        .map(|(t, ty)| {
            CountingReader::new(0, t, ty, &RequestQos::initial()).map(|r| (t.clone(), r))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs_f64(seconds)
        && !stop.load(std::sync::atomic::Ordering::Relaxed)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut out = serde_json::Map::new();
    for (t, r) in &readers {
        let (m, b) = r.counts();
        out.insert(t.clone(), serde_json::json!({"messages": m, "bytes": b}));
    }
    // SAFETY: getrusage fills a zeroed struct for this process.
    let cpu = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
        t(u.ru_utime) + t(u.ru_stime)
    };
    out.insert("cpu_s".into(), serde_json::json!(cpu));
    println!("{}", serde_json::Value::Object(out));
    Ok(())
}
