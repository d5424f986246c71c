//! The `upload` command of `edgerec` (on the vehicle) and of
//! `edgerec-tools` (on a laptop, any OS): `[offload]` of the configuration
//! and the paths given, sent with progress on a terminal and a summary;
//! the binaries only parse their arguments and call [`run`].

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::{credentials, s3::Client, upload, FileOutcome, OffloadError, Settings, Uploader};
use edgerec_config::Config;

/// The exit code of a configuration or credentials error (EX_CONFIG).
pub const EXIT_CONFIG: u8 = 78;

/// Runs the command as `name` (`edgerec upload`) with the configuration
/// file `config`; its exit code: 0 every file is at the store, 1 one
/// could not be sent, [`EXIT_CONFIG`] for the configuration or the
/// credentials.
pub fn run(name: &str, config: &Path, paths: &[PathBuf], quiet: bool) -> u8 {
    let cfg = match Config::load(config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{name}: {e}");
            return EXIT_CONFIG;
        }
    };
    let (settings, client) = match connect(&cfg) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{name}: {}: {e}", config.display());
            return EXIT_CONFIG;
        }
    };
    let plan = match upload::plan(paths, &settings) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{name}: {e}");
            return 1;
        }
    };
    for s in &plan.skipped {
        eprintln!("{name}: not sent: {s}");
    }
    let total: u64 = plan.files.iter().map(|f| f.size).sum();
    let live = !quiet && std::io::stderr().is_terminal();
    let uploader = Uploader::new(client, &settings);
    let stale = uploader.abandon_stale();
    if stale > 0 {
        eprintln!("{name}: abandoned {stale} cut upload(s) whose files are gone or changed");
    }
    let started = Instant::now();
    let progress = |done: u64| {
        if live {
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
    let mut outcome = |path: &Path, key: &str, r: &Result<FileOutcome, OffloadError>| {
        match r {
        Ok(FileOutcome::Sent {
            bytes,
            parts,
            reused,
            ..
        }) => tracing::info!(
            "{} -> {key} ({bytes} bytes, {parts} parts, {reused} of them from an upload cut before)",
            path.display()
        ),
        Ok(FileOutcome::Skipped { .. }) => {
            tracing::info!("{} -> {key}: already there", path.display())
        }
        Err(e) => {
            if live {
                eprintln!();
            }
            eprintln!("{name}: {}: {e}", path.display());
        }
    }
    };
    let report = uploader.send(&plan, &settings.vehicle, &progress, &mut outcome);
    if live {
        eprintln!();
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{} sent ({:.1} MB in {secs:.1} s, {:.1} MB/s), {} already there, {} failed, \
         {} not tried, {} left out, {} of {} session manifests; bucket {} at {}",
        report.sent,
        report.sent_bytes as f64 / 1e6,
        report.sent_bytes as f64 / 1e6 / secs.max(0.001),
        report.skipped,
        report.failed.len(),
        report.not_tried,
        plan.skipped.len(),
        report.manifests,
        plan.sessions.len(),
        settings.bucket,
        settings.endpoint
    );
    if report.failed.is_empty() && report.not_tried == 0 {
        0
    } else {
        1
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
