//! `edgerec upload`: wires `[offload]` and the paths given to
//! edgerec-offload, and reports on the terminal.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use edgerec_config::Config;
use edgerec_offload::{
    credentials, s3::Client, upload, FileOutcome, OffloadError, Settings, Uploader,
};

const EXIT_CONFIG: u8 = 78;

/// Runs the command; its exit code.
pub fn run(config: &Path, paths: &[PathBuf], quiet: bool) -> ExitCode {
    let cfg = match Config::load(config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("edgerec upload: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let (settings, client) = match connect(&cfg) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("edgerec upload: {}: {e}", config.display());
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let mut skipped = Vec::new();
    let files = match upload::plan(paths, &settings, &mut skipped) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("edgerec upload: {e}");
            return ExitCode::from(1);
        }
    };
    for s in &skipped {
        eprintln!("edgerec upload: not sent: {s}");
    }
    let total: u64 = files.iter().map(|f| f.size).sum();
    let live = !quiet && std::io::stderr().is_terminal();
    let uploader = Uploader::new(client, &settings);
    let stale = uploader.abandon_stale();
    if stale > 0 {
        eprintln!(
            "edgerec upload: abandoned {stale} cut upload(s) whose files are gone or changed"
        );
    }
    let started = Instant::now();
    let done_before = AtomicU64::new(0);
    let (mut sent, mut skipped_n, mut sent_bytes, mut failed) = (0u64, 0u64, 0u64, Vec::new());
    for f in &files {
        let base = done_before.load(Ordering::Relaxed);
        let progress = |bytes: u64| {
            if live {
                let done = base + bytes;
                let secs = started.elapsed().as_secs_f64().max(0.001);
                let rate = done as f64 / secs;
                let eta = if rate > 0.0 {
                    (total.saturating_sub(done)) as f64 / rate
                } else {
                    0.0
                };
                eprint!(
                    "\r{:>6.1} of {:.1} MB  {:>6.1} MB/s  ETA {:>4.0} s   ",
                    done as f64 / 1e6,
                    total as f64 / 1e6,
                    rate / 1e6,
                    eta
                );
                let _ = std::io::stderr().flush();
            }
        };
        match uploader.upload(f, &progress) {
            Ok(FileOutcome::Sent {
                bytes,
                parts,
                reused,
            }) => {
                sent += 1;
                sent_bytes += bytes;
                tracing::info!(
                    "{} -> {} ({bytes} bytes, {parts} parts, {reused} of them from an upload cut before)",
                    f.path.display(),
                    f.key
                );
            }
            Ok(FileOutcome::Skipped) => skipped_n += 1,
            Err(e) => {
                if live {
                    eprintln!();
                }
                eprintln!("edgerec upload: {}: {e}", f.path.display());
                // The same refusal (credentials, the bucket) would meet
                // every other file.
                let fatal = matches!(
                    e,
                    OffloadError::Refused {
                        status: 401 | 403 | 404,
                        ..
                    }
                );
                failed.push(f.path.clone());
                if fatal {
                    break;
                }
            }
        }
        done_before.fetch_add(f.size, Ordering::Relaxed);
    }
    if live {
        eprintln!();
    }
    let secs = started.elapsed().as_secs_f64();
    let not_tried = files.len() - sent as usize - skipped_n as usize - failed.len();
    println!(
        "{sent} sent ({:.1} MB in {secs:.1} s, {:.1} MB/s), {skipped_n} already there, {} failed, \
         {not_tried} not tried, {} left out; bucket {} at {}",
        sent_bytes as f64 / 1e6,
        sent_bytes as f64 / 1e6 / secs.max(0.001),
        failed.len(),
        skipped.len(),
        settings.bucket,
        settings.endpoint
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The settings of `[offload]` and a client of its store with its
/// credentials.
fn connect(cfg: &Config) -> Result<(Settings, Client), Box<OffloadError>> {
    let settings = Settings::from_config(&cfg.offload)?;
    let secret = credentials::load(&settings.credentials_file, &settings.profile)?;
    let client = Client::new(&settings, &secret)?;
    Ok((settings, client))
}
