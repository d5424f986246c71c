//! Aligned memory for `O_DIRECT`: [`AlignedBuf`] is one block whose address
//! is aligned for direct I/O, and [`BufferPool`] is the fixed set of them a
//! writer allocates once and recycles, so the write path never allocates.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// A zero-initialised heap block aligned to `align` bytes. It owns its
/// allocation uniquely, so moving the `AlignedBuf` value (into an in-flight
/// table, through a channel) never moves the memory the kernel sees.
pub(crate) struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: AlignedBuf owns its allocation exclusively (no aliasing pointers
// are kept anywhere else), so handing it to another thread is like sending a
// Box<[u8]>.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// Allocates `len` zeroed bytes aligned to `align` (a power of two).
    /// Returns `None` for a zero length, an invalid alignment, or when the
    /// allocator refuses.
    pub(crate) fn new_zeroed(len: usize, align: usize) -> Option<AlignedBuf> {
        if len == 0 {
            return None;
        }
        let layout = Layout::from_size_align(len, align).ok()?;
        // SAFETY: the layout has a non-zero size (checked above); the result
        // is checked for null before use. Zeroed memory means every byte is
        // initialised, so slices over it are valid from the start.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw)?;
        Some(AlignedBuf { ptr, layout })
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.layout.size()
    }

    /// Address alignment in bytes.
    pub(crate) fn align(&self) -> usize {
        self.layout.align()
    }

    /// Start of the block. The pointer stays valid as long as this
    /// `AlignedBuf` is alive, wherever the value is moved.
    #[cfg(test)]
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr points to layout.size() initialised bytes (zeroed at
        // allocation) owned by self; the shared borrow of self prevents
        // concurrent mutation.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in as_slice; the exclusive borrow of self makes this the
        // only live reference to the bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr was returned by alloc_zeroed with exactly this layout
        // and is freed only here, once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("ptr", &self.ptr)
            .field("len", &self.len())
            .field("align", &self.align())
            .finish()
    }
}

/// The writer's fixed set of blocks: allocated once at open, taken to be
/// filled, handed to the I/O thread, and put back when the kernel is done.
pub(crate) struct BufferPool {
    free: Vec<AlignedBuf>,
    capacity: usize,
}

impl BufferPool {
    /// `count` blocks of `block_size` bytes, each aligned to `align`.
    pub(crate) fn new(count: usize, block_size: usize, align: usize) -> Option<BufferPool> {
        let mut free = Vec::with_capacity(count);
        for _ in 0..count {
            free.push(AlignedBuf::new_zeroed(block_size, align)?);
        }
        Some(BufferPool {
            free,
            capacity: count,
        })
    }

    /// A free block, or `None` when every block is in use.
    pub(crate) fn take(&mut self) -> Option<AlignedBuf> {
        self.free.pop()
    }

    /// Returns a block; it may hold stale data (callers zero what they pad).
    pub(crate) fn put(&mut self, buf: AlignedBuf) {
        debug_assert!(
            self.free.len() < self.capacity,
            "more buffers returned than allocated"
        );
        self.free.push(buf);
    }

    /// Blocks currently free.
    #[cfg(test)]
    pub(crate) fn available(&self) -> usize {
        self.free.len()
    }

    /// Blocks allocated at creation.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }
}

/// `len` rounded up to a multiple of `align` (a power of two): the length of
/// a zero-padded partial block.
pub(crate) fn padded_len(len: usize, align: usize) -> usize {
    debug_assert!(align.is_power_of_two());
    (len + align - 1) & !(align - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buf_is_aligned_and_zeroed() {
        for align in [512usize, 4096, 65536] {
            let b = AlignedBuf::new_zeroed(3 * align, align).expect("alloc");
            assert_eq!(b.as_ptr() as usize % align, 0, "align {align}");
            assert_eq!(b.len(), 3 * align);
            assert_eq!(b.align(), align);
            assert!(b.as_slice().iter().all(|&x| x == 0));
        }
        assert!(AlignedBuf::new_zeroed(0, 4096).is_none());
        assert!(
            AlignedBuf::new_zeroed(4096, 3000).is_none(),
            "non power of two"
        );
    }

    #[test]
    fn buffer_survives_moves() {
        let mut b = AlignedBuf::new_zeroed(4096, 4096).expect("alloc");
        b.as_mut_slice()[..4].copy_from_slice(b"abcd");
        let addr = b.as_ptr() as usize;
        // Move it to another thread and back, as the I/O thread does.
        let back = std::thread::spawn(move || {
            assert_eq!(
                b.as_ptr() as usize,
                addr,
                "moving the owner must not move the block"
            );
            b
        })
        .join()
        .expect("thread");
        assert_eq!(back.as_ptr() as usize, addr);
        assert_eq!(&back.as_slice()[..4], b"abcd");
    }

    #[test]
    fn pool_exhaustion_and_return() {
        let mut pool = BufferPool::new(3, 8192, 4096).expect("pool");
        assert_eq!(pool.capacity(), 3);
        let a = pool.take().expect("1");
        let b = pool.take().expect("2");
        let c = pool.take().expect("3");
        assert!(
            pool.take().is_none(),
            "pool must be exhausted after capacity takes"
        );
        assert_eq!(pool.available(), 0);
        pool.put(b);
        assert_eq!(pool.available(), 1);
        let b2 = pool.take().expect("returned buffer is reusable");
        assert_eq!(b2.len(), 8192);
        assert_eq!(b2.as_ptr() as usize % 4096, 0);
        pool.put(a);
        pool.put(b2);
        pool.put(c);
        assert_eq!(pool.available(), 3);
    }

    #[test]
    fn padding_rounds_up_to_alignment() {
        assert_eq!(padded_len(0, 4096), 0);
        assert_eq!(padded_len(1, 4096), 4096);
        assert_eq!(padded_len(4095, 4096), 4096);
        assert_eq!(padded_len(4096, 4096), 4096);
        assert_eq!(padded_len(4097, 4096), 8192);
        assert_eq!(padded_len(513, 512), 1024);
    }
}
