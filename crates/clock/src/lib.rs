//! The recording clock and how good it is.
//!
//! [`Clock`] stamps messages: CLOCK_REALTIME (the default; on the appliance
//! phc2sys disciplines it to the NIC's PTP hardware clock), CLOCK_TAI, or a
//! PTP hardware clock itself, named by device (`/dev/ptp0`) or by network
//! interface. [`phc`] measures a PHC's offset to the system clock with the
//! best ioctl the driver has. [`pmc`] is a native client of ptp4l's
//! management socket (what `pmc -u -b 0` does, without running it).
//! [`quality`] turns ptp4l's answers and the PHC offset into a
//! [`ClockState`] (locked, holdover, unlocked, free running) with injected
//! time, and [`ClockMonitor`] runs all of it on a thread, once a second,
//! for the status and for each segment's `edgerec.clock` metadata.
//!
//! ```
//! use std::time::Duration;
//! use edgerec_clock::{Clock, ClockMonitor, ClockSource, MonitorOptions};
//!
//! # fn main() -> Result<(), edgerec_clock::ClockError> {
//! let clock = Clock::open(&ClockSource::Realtime)?;
//! let log_time = clock.now_ns(); // per message: one vDSO call
//! assert!(log_time > 1_600_000_000_000_000_000);
//!
//! let monitor = ClockMonitor::start(
//!     MonitorOptions {
//!         // ptp4l's uds_address; a missing socket is a state, not an error
//!         ptp4l_socket: Some("/var/run/ptp4l".into()),
//!         poll_interval: Duration::from_millis(100),
//!         ..MonitorOptions::default()
//!     },
//!     || { /* pet the watchdog heartbeat */ },
//! )?;
//! let status = monitor.handle().status();
//! println!("{}: {} since {} ({})", status.source, status.state, status.since_ns, status.reason);
//! if status.unlocked {
//!     // flag the data recorded now
//! }
//! let metadata = monitor.handle().segment_summary(); // at each segment split
//! assert_eq!(metadata["source"], "realtime");
//! monitor.stop();
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod clock;
mod error;
pub mod monitor;
pub mod phc;
pub mod pmc;
pub mod quality;
mod sys;

pub use clock::{Clock, ClockSource};
pub use error::ClockError;
pub use monitor::{ClockHandle, ClockMonitor, ClockStatus, MonitorOptions, SEGMENT_METADATA_NAME};
pub use phc::{OffsetMethod, PhcDevice, PhcOffset};
pub use pmc::{PmcClient, PortState, Ptp4lStatus};
pub use quality::{ClockQuality, ClockState, OffsetStats, QualityConfig, QualityMachine};
