//! The stop/wake contract between the supervisor and a running source.
//!
//! A [`Stop`] is requested once per run of a source (the recording ends,
//! or the supervisor gives up on a stalled run). A source sees it three
//! ways, and picks what fits how it waits:
//! - it polls [`Stop::is_requested`] between messages;
//! - it sleeps with [`Stop::wait_timeout`] instead of `thread::sleep`, which
//!   returns at once when stop is requested;
//! - it blocks in `poll(2)`/`epoll` on its socket **and** on
//!   [`Stop::waker`], an eventfd that becomes readable when stop is
//!   requested: a CAN or UDP source blocked in `recv` wakes without a
//!   timeout. Where the eventfd cannot be made (no file descriptors left),
//!   `waker` is `None` and the source must fall back to bounded timeouts
//!   (at most a tenth of the stage deadline), which every source must
//!   support anyway.

use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// A stop request for one run of a source; cheap to clone.
#[derive(Clone)]
pub struct Stop {
    inner: Arc<Inner>,
}

struct Inner {
    requested: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
    waker: Option<OwnedFd>,
}

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stop")
            .field("requested", &self.is_requested())
            .finish()
    }
}

impl Default for Stop {
    fn default() -> Self {
        Self::new()
    }
}

impl Stop {
    /// A stop not yet requested, with its eventfd when one can be made.
    pub fn new() -> Self {
        // SAFETY: eventfd(2) with an initial count and flags; it returns a
        // new descriptor that nothing else owns, or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        let waker = if fd >= 0 {
            // SAFETY: `fd` was just returned by eventfd and is owned by
            // nobody else; OwnedFd closes it once.
            Some(unsafe { OwnedFd::from_raw_fd(fd) })
        } else {
            tracing::warn!(
                "no eventfd for a source's stop waker ({}); it falls back to timeouts",
                std::io::Error::last_os_error()
            );
            None
        };
        Stop {
            inner: Arc::new(Inner {
                requested: AtomicBool::new(false),
                lock: Mutex::new(()),
                cv: Condvar::new(),
                waker,
            }),
        }
    }

    /// True once stop was requested.
    #[inline]
    pub fn is_requested(&self) -> bool {
        self.inner.requested.load(Ordering::Acquire)
    }

    /// Requests stop: wakes [`wait_timeout`](Self::wait_timeout) and makes
    /// the waker readable. Idempotent.
    pub fn request(&self) {
        if self.inner.requested.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(fd) = &self.inner.waker {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to an eventfd we own;
            // a failure (counter overflow, impossible from 0) only means
            // the fd is already readable.
            let _ = unsafe {
                libc::write(
                    std::os::fd::AsRawFd::as_raw_fd(fd),
                    (&one as *const u64).cast(),
                    8,
                )
            };
        }
        let _guard = self
            .inner
            .lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.inner.cv.notify_all();
    }

    /// Sleeps up to `timeout`; returns early, true, when stop is requested
    /// (also when it already was). False when the time ran out.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut guard = self
            .inner
            .lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        loop {
            if self.is_requested() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            guard = self
                .inner
                .cv
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// An eventfd that becomes readable (POLLIN) when stop is requested,
    /// to poll beside a socket. Never read it: it stays readable.
    pub fn waker(&self) -> Option<BorrowedFd<'_>> {
        self.inner.waker.as_ref().map(|fd| fd.as_fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn wait_returns_when_requested_from_another_thread() {
        let s = Stop::new();
        assert!(!s.wait_timeout(Duration::from_millis(5)));
        let s2 = s.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            s2.request();
        });
        let t0 = Instant::now();
        assert!(s.wait_timeout(Duration::from_secs(10)));
        assert!(t0.elapsed() < Duration::from_secs(5));
        t.join().unwrap();
        assert!(s.is_requested());
        assert!(s.wait_timeout(Duration::ZERO));
    }

    #[test]
    fn the_waker_wakes_a_poll_on_a_socket() {
        let s = Stop::new();
        let (a, _b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let waker = s.waker().expect("eventfd").as_raw_fd();
        let s2 = s.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            s2.request();
        });
        let mut fds = [
            libc::pollfd {
                fd: a.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: waker,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfd entries in a live array; -1 = no timeout.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, 10_000) };
        assert_eq!(n, 1);
        assert_eq!(fds[0].revents, 0, "the socket had nothing");
        assert_ne!(fds[1].revents & libc::POLLIN, 0, "the waker woke the poll");
        t.join().unwrap();
    }
}
