//! Append-only file writing in aligned blocks for recording to NVMe.
//!
//! [`DirectFile`] accepts bytes of any size, copies them into a fixed pool
//! of aligned blocks and writes each full block from a dedicated I/O thread
//! through the best backend the kernel allows: io_uring with `O_DIRECT`,
//! else `pwrite(2)` with `O_DIRECT`, else buffered `pwrite(2)` with
//! `fdatasync(2)` ([`Backend`]). [`DirectFile::tick`] makes data durable
//! every `sync_interval` without blocking the caller;
//! [`DirectFile::durable_offset`] tells how much is; [`DirectFile::close`]
//! pads the last block, truncates the file to its logical length and syncs
//! it. After a failed write the writer refuses more data and close keeps
//! only the good contiguous prefix. The crate knows nothing of MCAP.
//!
//! ```no_run
//! use edgerec_storage::{DirectFile, WriterOptions};
//!
//! # fn main() -> Result<(), edgerec_storage::StorageError> {
//! let mut file = DirectFile::create("/data/bag_0.mcap".as_ref(), &WriterOptions::default())?;
//! println!("writing with {} ({:?})", file.backend(), file.fallback_reason());
//! file.write_all(b"\x89MCAP0\r\n")?;
//! file.tick()?; // from the recording loop, every 50-100 ms
//! let durable = file.sync()?;
//! assert_eq!(durable, file.logical_len());
//! let report = file.close()?;
//! assert_eq!(report.truncated_after_error, None);
//! # Ok(())
//! # }
//! ```

#![deny(missing_docs)]

mod align;
mod backend;
mod blockdev;
mod direct_file;
mod error;
mod io_thread;
mod sched;

pub use backend::{Backend, BackendChoice};
#[doc(hidden)]
pub use direct_file::Faults;
pub use direct_file::{CloseReport, DirectFile, DurableOffset, StorageStats, WriterOptions};
pub use error::{ErrorKind, StorageError};
pub use sched::{
    apply_realtime_priority, current_thread_scheduling, is_storage_thread,
    set_current_thread_realtime, storage_stage_scheduling, thread_scheduling, ThreadCounts,
    MAX_REALTIME_PRIORITY,
};
