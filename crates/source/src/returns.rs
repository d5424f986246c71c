//! Payload buffers the chunker hands back to their channel once copied, so
//! small messages cost no malloc/free pair split across two threads
//! (measured on the 1 MHz benchmark: that pair and its arena lock were the
//! largest cost). A fixed-capacity lock-free queue per channel; a full
//! pool just frees the buffer.
//!
//! heapless deprecates its mpmc queue because a thread pre-empted inside
//! `enqueue`/`dequeue` can make the others' calls fail until it resumes
//! (heapless issue 583); it stays safe, and is fit where a failed call can
//! be dropped. Here it can: a failed return frees the buffer, a failed take
//! allocates one.

/// Buffers kept per channel.
pub(crate) type ReturnPool = heapless::mpmc::Queue<Vec<u8>, 64>;

/// An empty pool.
#[expect(
    deprecated,
    reason = "a failed enqueue/dequeue only costs an allocation here"
)]
pub(crate) fn return_pool() -> ReturnPool {
    ReturnPool::new()
}

/// Largest payload buffer worth returning: bigger ones are few per second,
/// and a pool of them would hold memory the budget does not see (at most
/// 64 x 16 KiB = 1 MiB per channel that sends small messages).
pub const RETURN_MAX_CAPACITY: usize = 16 << 10;
