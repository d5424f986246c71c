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

/// Buffers kept per channel: at least half the chunker's batch of 256, so
/// a 1 MHz channel gets most of its buffers back (with 64 the chunker
/// freed three in four across threads, and the 1 MHz benchmark dropped).
pub(crate) type ReturnPool = heapless::mpmc::Queue<Vec<u8>, 128>;

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
/// 128 x 4 KiB = 512 KiB per channel that sends small messages). A pool is
/// made for a channel only when its first small buffer comes back.
pub const RETURN_MAX_CAPACITY: usize = 4 << 10;
