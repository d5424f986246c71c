//! `[[trigger]] gpio = "CHIP:LINE"`: each such rule's line is requested
//! before the recording starts and watched while it runs, and each
//! debounced edge asks the recorder for that rule's event clip (its pre,
//! post, topics and cooldown come with the name). A line that cannot be
//! requested fails the start before anything is created: a button that
//! silently does nothing is worse than a recorder that says why it will
//! not run.

use std::sync::{Arc, OnceLock};

use anyhow::Context;
use edgerec_config::{Config, GpioEdge};
use edgerec_health::gpio::{EdgeSelect, LineSpec, LineWatcher};
use edgerec_recorder::StatusHandle;

/// The consumer label the lines carry (`gpioinfo` shows it).
const CONSUMER: &str = "edgerec";

/// The watched lines; dropping this stops them and releases the lines.
pub struct GpioTriggers {
    _watchers: Vec<LineWatcher>,
}

/// Where the edges find the recorder once it runs.
pub type RecorderSlot = Arc<OnceLock<StatusHandle>>;

/// Starts a watcher for every `[[trigger]]` with a `gpio`; the error names
/// the rule (`trigger[i].gpio`), the line and the fix. Edges before
/// `slot` is set (the recorder is starting) are logged and let go.
pub fn start(cfg: &Config, slot: RecorderSlot) -> anyhow::Result<GpioTriggers> {
    let mut watchers = Vec::new();
    for (i, rule) in cfg.trigger.iter().enumerate() {
        if rule.gpio.is_empty() {
            continue;
        }
        let what = || format!("trigger[{i}].gpio = \"{}\" (rule {})", rule.gpio, rule.name);
        let spec = LineSpec::parse(&rule.gpio)
            .with_context(what)?
            .with_edge(match rule.edge {
                GpioEdge::Rising => EdgeSelect::Rising,
                GpioEdge::Falling => EdgeSelect::Falling,
                GpioEdge::Both => EdgeSelect::Both,
            })
            .with_debounce(rule.debounce);
        let (name, gpio, slot) = (rule.name.clone(), rule.gpio.clone(), slot.clone());
        let on_edge = Box::new(move |edge: edgerec_health::gpio::Edge| {
            let dir = if edge.rising { "rising" } else { "falling" };
            let reason = format!("gpio {gpio} {dir} edge");
            let Some(handle) = slot.get() else {
                tracing::warn!("trigger {name}: {reason} while the recording was starting");
                return;
            };
            if handle.trigger(&name, &reason) {
                tracing::info!("trigger {name}: {reason}");
            } else {
                tracing::warn!("trigger {name}: {reason}, but the recording makes no clips now");
            }
        });
        let w = LineWatcher::start(&spec, CONSUMER, on_edge).with_context(what)?;
        tracing::info!(
            "trigger {}: watching {} ({} line {}, {} edge, debounce {} ms{})",
            rule.name,
            rule.gpio,
            w.chip_label(),
            w.offset(),
            rule.edge.as_str(),
            rule.debounce.as_millis(),
            if w.kernel_debounce() {
                ", also in the kernel"
            } else {
                ""
            }
        );
        watchers.push(w);
    }
    Ok(GpioTriggers {
        _watchers: watchers,
    })
}
