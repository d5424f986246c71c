//! `[[can]]` and `[[udp]]` of the configuration into the CAN and UDP
//! sources. A `[[can]]` on a kernel without SocketCAN is a configuration
//! error (it can never record); a missing or down interface is not: its
//! source retries with backoff, since a USB adapter or a link may come.

use edgerec_bus::{can_unsupported, CanSource, UdpSource};
use edgerec_config::Config;
use edgerec_source::Source;

/// The bus sources, in the order of the file.
pub fn sources(cfg: &Config) -> anyhow::Result<Vec<Box<dyn Source>>> {
    let mut out: Vec<Box<dyn Source>> = Vec::new();
    if !cfg.can.is_empty() {
        if let Some(why) = can_unsupported() {
            anyhow::bail!(
                "can[0] ({}): {why}; load the can and can-raw modules, or remove the [[can]] entries",
                cfg.can[0].interface
            );
        }
    }
    for c in &cfg.can {
        out.push(Box::new(CanSource::new(c)));
    }
    for u in &cfg.udp {
        out.push(Box::new(UdpSource::new(u)));
    }
    Ok(out)
}
