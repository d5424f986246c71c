//! `edgerec upload`: wires `[offload]` and the paths given to
//! edgerec-offload, and reports on the terminal.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
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
    let plan = match upload::plan(paths, &settings) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("edgerec upload: {e}");
            return ExitCode::from(1);
        }
    };
    for s in &plan.skipped {
        eprintln!("edgerec upload: not sent: {s}");
    }
    let total: u64 = plan.files.iter().map(|f| f.size).sum();
    let live = !quiet && std::io::stderr().is_terminal();
    let uploader = Uploader::new(client, &settings);
    let stale = uploader.abandon_stale();
    if stale > 0 {
        eprintln!(
            "edgerec upload: abandoned {stale} cut upload(s) whose files are gone or changed"
        );
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
            eprintln!("edgerec upload: {}: {e}", path.display());
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
