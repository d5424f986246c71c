//! Health of the recorder: heartbeats from every stage, the hardware and
//! systemd watchdogs they feed, the fault file written before a reset, the
//! health state and the LEDs that show it, metrics with their origins, and
//! the status snapshot served on a local socket and written into the
//! recording.
#![deny(missing_docs)]

pub mod access;
pub mod control;
pub mod ctl;
pub mod edges;
pub mod fault;
mod file_kind;
pub mod gpio;
pub mod heartbeat;
pub mod leds;
pub mod metrics;
pub mod notify;
pub mod own_topics;
pub mod state;
pub mod status;
pub mod watchdog;
