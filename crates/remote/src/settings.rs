//! `[remote]` turned into what the link needs.

use std::path::PathBuf;
use std::time::Duration;

use edgerec_config::Config;

use crate::topics::Topics;
use crate::RemoteError;

/// The link's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `remote.broker` as written, for messages.
    pub broker: String,
    /// The broker's host name or address.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// CA certificates (PEM) of the broker's; empty = the system's.
    pub ca_file: PathBuf,
    /// The vehicle's certificate (PEM).
    pub cert_file: PathBuf,
    /// Its private key (PEM, owner-only).
    pub key_file: PathBuf,
    /// The MQTT client id.
    pub vehicle_id: String,
    /// The topics.
    pub topics: Topics,
    /// MQTT keepalive, and how long the link may be down before the
    /// health state says so.
    pub keepalive: Duration,
    /// The retained status at most this often.
    pub status_interval: Duration,
    /// Messages kept while the link is down.
    pub queue: usize,
    /// The commands this vehicle takes from the fleet.
    pub allow: Vec<String>,
    /// Where executed command ids are journaled; empty = memory only.
    pub journal: PathBuf,
}

impl Settings {
    /// The link's settings, or `None` when `remote.broker` is empty.
    pub fn from_config(cfg: &Config) -> Result<Option<Settings>, RemoteError> {
        let r = &cfg.remote;
        if r.broker.is_empty() {
            return Ok(None);
        }
        let (host, port) = edgerec_config::remote::parse_broker(&r.broker)
            .map_err(|why| RemoteError::Config(format!("remote.broker `{}`: {why}", r.broker)))?;
        let vehicle_id = if !r.vehicle_id.is_empty() {
            r.vehicle_id.clone()
        } else if !cfg.offload.vehicle_id.is_empty() {
            cfg.offload.vehicle_id.clone()
        } else {
            edgerec_offload::settings::host_name()
        };
        let prefix = if r.topic_prefix.is_empty() {
            format!("edgerec/{vehicle_id}")
        } else {
            r.topic_prefix.clone()
        };
        Ok(Some(Settings {
            broker: r.broker.clone(),
            host,
            port,
            ca_file: r.ca_file.clone(),
            cert_file: r.cert_file.clone(),
            key_file: r.key_file.clone(),
            topics: Topics::new(&prefix),
            vehicle_id,
            keepalive: r.keepalive,
            status_interval: r.status_interval,
            queue: r.queue as usize,
            allow: r.allow.clone(),
            journal: r.journal.clone(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Config {
        Config::parse(text, std::path::Path::new("edgerec.toml")).expect("config")
    }

    #[test]
    fn no_broker_no_link() {
        assert_eq!(Settings::from_config(&parse("")).unwrap(), None);
    }

    #[test]
    fn the_vehicle_is_named_by_remote_then_offload() {
        let base = "[remote]\nbroker = \"mqtts://127.0.0.1:8884\"\ncert_file = \"/v.pem\"\nkey_file = \"/v.key\"\n";
        let s = Settings::from_config(&parse(&format!("{base}vehicle_id = \"r7\"\n")))
            .unwrap()
            .unwrap();
        assert_eq!((s.host.as_str(), s.port), ("127.0.0.1", 8884));
        assert_eq!(s.vehicle_id, "r7");
        assert_eq!(s.topics.status, "edgerec/r7/status");
        let s = Settings::from_config(&parse(&format!(
            "{base}topic_prefix = \"fleet/eu/r8\"\n[offload]\nvehicle_id = \"r8\"\n"
        )))
        .unwrap()
        .unwrap();
        assert_eq!(s.vehicle_id, "r8");
        assert_eq!(s.topics.connection, "fleet/eu/r8/connection");
    }
}
