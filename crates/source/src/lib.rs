//! The source layer: everything that produces messages for the recorder
//! does it through this crate, and nothing here knows about MCAP chunks,
//! segments or the disk.
//!
//! - A [`Source`] runs on a thread of its own under the [`Supervisor`],
//!   which restarts it with exponential backoff when it returns an error,
//!   panics, or goes silent past its deadline; every other source goes on.
//! - It registers channels at any time through its [`SourceSink`] (any
//!   clone, any thread) into one shared [`ChannelTable`], and pushes
//!   [`Envelope`]s that never block: each channel has its own bounded
//!   queue, and the [`MemoryBudget`] keeps a reserve split between the
//!   channels, so a channel that floods drops only itself.
//! - A [`Stop`] ends a run: polled, waited on, or polled beside a socket
//!   through its eventfd.
//! - The recorder's chunker drains the queues through the [`Intake`].
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use edgerec_source::*;
//!
//! struct Hello;
//! impl Source for Hello {
//!     fn name(&self) -> String { "hello".into() }
//!     fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError> {
//!         let ch = sink.register(ChannelSpec {
//!             topic: "/hello".into(),
//!             type_name: "std_msgs/msg/String".into(),
//!             message_encoding: "cdr".into(),
//!             schema_encoding: "ros2msg".into(),
//!             schema: b"string data\n".to_vec(),
//!             metadata: Default::default(),
//!             latched: false,
//!         })?;
//!         while !stop.wait_timeout(Duration::from_millis(10)) {
//!             let t = sink.now_ns();
//!             let _ = sink.push(Envelope { channel: ch, log_time: t, publish_time: t, payload: vec![0, 1, 0, 0] });
//!         }
//!         Ok(())
//!     }
//! }
//!
//! let intake = Intake::new(1024, MemoryBudget::new(1 << 20), Arc::new(SystemClock));
//! let sup = Supervisor::start(&intake, vec![Box::new(Hello)], SupervisorOptions::default(), Box::new(|| {})).unwrap();
//! std::thread::sleep(Duration::from_millis(50));
//! assert!(sup.stop(Duration::from_secs(1)).not_stopped.is_empty());
//! assert!(intake.table().all()[0].counters.accepted.load(std::sync::atomic::Ordering::Relaxed) > 0);
//! ```
#![deny(missing_docs)]

pub mod backoff;
pub mod budget;
pub mod channel;
pub mod clock;
pub mod doorbell;
pub mod envelope;
pub mod error;
pub mod intake;
pub mod periodic;
pub mod queue;
mod returns;
pub mod sink;
pub mod source;
pub mod stop;
pub mod supervisor;
pub mod table;

pub use backoff::Backoff;
pub use budget::MemoryBudget;
pub use channel::{Channel, ChannelCounters, ChannelId, ChannelSpec};
pub use clock::{ClockMap, KernelClock, Monotone, RecordingClock, SystemClock};
pub use envelope::Envelope;
pub use error::{RegisterError, SourceError};
pub use intake::Intake;
pub use periodic::{PeriodicTopic, Produce};
pub use queue::{Charge, Queued};
pub use returns::RETURN_MAX_CAPACITY;
pub use sink::{Dropped, Liveness, SourceSink};
pub use source::Source;
pub use stop::Stop;
pub use supervisor::{
    panic_message, BeatFn, SourceState, SourceStatus, StopReport, Supervisor, SupervisorOptions,
    SupervisorView,
};
pub use table::ChannelTable;
