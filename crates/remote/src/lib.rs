//! The fleet link: one outbound connection from the vehicle to the fleet's
//! MQTT broker over TLS with the vehicle's own certificate, beside the
//! recorder and never in its path (the recorder does not depend on this
//! crate; nothing here is called while a message is recorded).
//!
//! - [`settings`]: `[remote]` turned into what the link needs (the
//!   broker, the files, the vehicle's name and its topics);
//! - [`topics`]: the topics under the vehicle's prefix;
//! - [`tls`]: the rustls configuration (the broker's CA, the vehicle's
//!   certificate and owner-only key), every file bounded before it is read;
//! - [`command`], [`commands`], [`journal`]: the fleet's commands on
//!   `cmd` (parsed and bounded, allowed, not expired, journaled so a
//!   repeat runs nothing twice) and the replies on `reply`;
//! - [`alerts`]: alerts raised and cleared from the status snapshot;
//! - [`logfwd`]: warnings and errors forwarded, rate-limited;
//! - [`outbox`]: what waits for the link, bounded, the oldest dropped
//!   first and counted;
//! - [`link`]: the connection (rumqttc: keepalive, a persistent session,
//!   QoS 1, the last will), its reconnection with backoff, the retained
//!   status and the link's own state for the health side;
//! - [`error`]: what can go wrong, each with its place and its fix.
//!
//! The vehicle publishes, under its prefix (`edgerec/<vehicle_id>` by
//! default), `connection` (retained: `{"online":true,...}` once connected,
//! the last will's `{"online":false,"reason":"link lost"}` when the broker
//! stops hearing it, `"reason":"stopped"` on a clean stop) and `status`
//! (retained: the recorder's status snapshot, the same JSON `edgerec status
//! --json` prints, when it changed and at most every `status_interval`),
//! `alerts`, `log` and `reply`; it takes commands on `cmd`.

pub mod alerts;
pub mod command;
pub mod commands;
pub mod error;
pub mod journal;
#[cfg(feature = "link")]
pub mod link;
#[cfg(feature = "link")]
pub mod logfwd;
pub mod outbox;
pub mod settings;
#[cfg(feature = "link")]
pub mod tls;
pub mod topics;

pub use error::RemoteError;

/// Now on the system clock, ms since the Unix epoch (0 before it): the
/// times in replies, alerts, log lines and the command journal.
pub(crate) fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
#[cfg(feature = "link")]
pub use link::{Link, LinkHandle, LinkStatus};
pub use settings::Settings;
