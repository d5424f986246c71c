//! The naive writer a user would write: the `mcap` crate's `Writer` over a
//! `BufWriter<File>`, one thread generating and writing, `fsync` at the end
//! so the data is as durable as edgerec's. It writes the same messages as
//! edgerec's synthetic source (same encoder, same sizes), uncompressed like
//! the edgerec run it is compared with, for a fixed time, and prints one
//! JSON line: bytes, messages, seconds (including finish and fsync).
//!
//! usage: edgerec-naive-writer DIR (image|string) PAYLOAD_BYTES SECONDS

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use edgerec_config::{Rate, SyntheticChannel, SyntheticKind};
use edgerec_source::{RecordingClock, SystemClock};
use edgerec_synthetic::SyntheticSource;

fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 5 {
        bail!("usage: {} DIR (image|string) PAYLOAD_BYTES SECONDS", a[0]);
    }
    let dir = std::path::PathBuf::from(&a[1]);
    let kind = match a[2].as_str() {
        "image" => SyntheticKind::Image,
        "string" => SyntheticKind::String,
        k => bail!("unknown kind {k}"),
    };
    let payload: u64 = a[3].parse().context("PAYLOAD_BYTES")?;
    let secs: f64 = a[4].parse().context("SECONDS")?;
    let cfg = SyntheticChannel {
        payload_size: payload,
        ..SyntheticChannel::new("/naive", kind, Rate::Max)
    };
    let src = SyntheticSource::new(cfg);
    let clock = SystemClock;
    let path = dir.join("naive.mcap");
    let file = std::fs::File::create(&path).with_context(|| path.display().to_string())?;
    let opts = mcap::WriteOptions::new().profile("ros2").compression(None);
    let mut w = opts.create(BufWriter::new(file))?;
    let schema = w.add_schema("sensor_msgs/msg/Image", "ros2msg", b"")?;
    let ch = w.add_channel(schema, "/naive", "cdr", &BTreeMap::new())?;
    let start = Instant::now();
    let limit = Duration::from_secs_f64(secs);
    let mut seq = 0u64;
    let mut bytes = 0u64;
    while start.elapsed() < limit {
        for _ in 0..64 {
            let now = clock.now_ns();
            let msg = src.encode(seq, now);
            bytes += msg.len() as u64;
            w.write_to_known_channel(
                &mcap::records::MessageHeader {
                    channel_id: ch,
                    sequence: seq as u32,
                    log_time: now,
                    publish_time: now,
                },
                &msg,
            )?;
            seq += 1;
        }
    }
    w.finish()?;
    let mut inner = w.into_inner();
    inner.flush()?;
    let file = inner.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?;
    file.sync_all()?;
    let total = start.elapsed().as_secs_f64();
    let file_bytes = std::fs::metadata(&path)?.len();
    println!(
        "{}",
        serde_json::json!({
            "messages": seq, "payload_bytes": bytes, "file_bytes": file_bytes,
            "seconds": total,
        })
    );
    std::fs::remove_file(&path)?;
    Ok(())
}
