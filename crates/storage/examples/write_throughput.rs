//! Sequential write throughput of each backend on this machine.
//!
//! `cargo run --release -p edgerec-storage --example write_throughput -- DIR [MIB]`
//!
//! Writes MIB MiB (default 1024) in 300 000-byte pieces (about an MCAP
//! chunk) to a new file in DIR with every backend, with tick() after every
//! piece and close() at the end, and prints MiB/s and the writer's
//! statistics. The files are removed afterwards.

use std::path::PathBuf;
use std::time::Instant;

use edgerec_storage::{BackendChoice, DirectFile, WriterOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(args.next().ok_or("usage: write_throughput DIR [MIB]")?);
    let mib: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1024);
    let piece = vec![0x5au8; 300_000];
    let total = mib << 20;
    for choice in [
        BackendChoice::IoUring,
        BackendChoice::PwriteDirect,
        BackendChoice::Buffered,
    ] {
        let path = dir.join(format!("throughput-{choice:?}.bin"));
        let opts = WriterOptions {
            backend: choice,
            ..WriterOptions::default()
        };
        let mut f = match DirectFile::create(&path, &opts) {
            Ok(f) => f,
            Err(e) => {
                println!("{choice:?}: {e}");
                continue;
            }
        };
        let start = Instant::now();
        let mut written = 0;
        while written < total {
            f.write_all(&piece)?;
            f.tick()?;
            written += piece.len();
        }
        let stats = f.stats();
        let report = f.close()?;
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{:<20} {:>8.0} MiB/s  {} MiB in {:.2} s  writes {} syncs {} max write {} us max sync {} us",
            report.backend.to_string(),
            report.logical_len as f64 / (1u64 << 20) as f64 / secs,
            report.logical_len >> 20,
            secs,
            stats.writes,
            stats.syncs,
            stats.max_write_latency_us,
            stats.max_sync_latency_us,
        );
        std::fs::remove_file(&path)?;
    }
    Ok(())
}
