//! Test builds only (`--features fault-injection`): the switches that make
//! a stage of the pipeline hang or panic on purpose, so tests can prove
//! that the watchdog and the stage-death path catch it. Never in the image.
//!
//! - SIGUSR2 makes the storage stage hang (the QEMU watchdog scenario);
//! - `EDGEREC_FAULT_PANIC=STAGE@MS` makes stage `chunker`, `compressor`,
//!   `storage` or `closer` panic MS milliseconds after the start.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use edgerec_recorder::stage::FaultSwitch;

/// Installs the switches and returns them for the recorder's `Watch`.
pub fn install() -> anyhow::Result<Arc<FaultSwitch>> {
    let f = Arc::new(FaultSwitch::default());
    signal_hook::flag::register(signal_hook::consts::SIGUSR2, f.stall_storage.clone())
        .context("installing the fault-injection signal handler")?;
    tracing::warn!("built with fault-injection: SIGUSR2 makes the storage stage hang");
    if let Ok(spec) = std::env::var("EDGEREC_FAULT_PANIC") {
        let (stage, ms) = spec
            .split_once('@')
            .and_then(|(s, ms)| Some((s.to_owned(), ms.parse::<u64>().ok()?)))
            .with_context(|| format!("EDGEREC_FAULT_PANIC={spec}: expected STAGE@MILLISECONDS"))?;
        tracing::warn!("fault injection: stage {stage} panics {ms} ms after the start");
        let f2 = f.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            f2.panic_stage(&stage);
        });
    }
    Ok(f)
}
