//! GPIO input lines that fire event triggers: a line is named `CHIP:LINE`
//! ([`LineSpec`]), requested as an input with edge detection through the
//! Linux GPIO character device (uAPI v2, `/dev/gpiochipN`), and watched by
//! a thread ([`LineWatcher`]) that hands each debounced edge to a callback.
//! Stopping or dropping the watcher releases the line within about 100 ms.
//!
//! ```no_run
//! use edgerec_health::gpio::{LineSpec, LineWatcher};
//! let spec = LineSpec::parse("gpiochip0:17")?;
//! let watcher = LineWatcher::start(&spec, "edgerec", Box::new(|edge| {
//!     println!("{} edge at {} ns", if edge.rising { "rising" } else { "falling" }, edge.timestamp_ns);
//! }))?;
//! // ... later:
//! watcher.stop();
//! # Ok::<(), edgerec_health::gpio::GpioError>(())
//! ```

mod debounce;
mod error;
mod spec;
mod sys;
mod watcher;

pub use debounce::Debouncer;
pub use error::GpioError;
pub use spec::{EdgeSelect, LineRef, LineSpec};
pub use watcher::{Edge, LineWatcher, OnEdge};
