//! The read loop both sources run: block in `poll(2)` on the socket and
//! the stop's eventfd, read everything queued in `recvmmsg` batches, hand
//! each batch over with the clock map sampled for it, and at a fixed
//! period (whether packets flow or not) beat the liveness and run the
//! source's checks (link state, drop counters). No busy polling: with
//! nothing arriving the thread sleeps in the kernel until a packet, the
//! stop or the period.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use edgerec_source::clock::KernelClock;
use edgerec_source::{ClockMap, SourceError, SourceSink, Stop};

use crate::sys::{self, RecvBatch, Socket, Wake};

/// How often the periodic checks run (and, on a quiet socket, the longest
/// sleep): well within any stage deadline edgerec accepts (500 ms and up).
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(250);

/// Batches read back to back before the stop is looked at again: a socket
/// that never empties (a flood) still stops within a few milliseconds.
const BATCHES_PER_WAKE: usize = 64;

/// The longest wait without the stop's eventfd.
const NO_WAKER_POLL: Duration = Duration::from_millis(50);

/// What a source does with a batch: `(batch, count, clock map, recording
/// clock right after the read)`.
pub(crate) type OnBatch<'a> =
    dyn FnMut(&RecvBatch, usize, &ClockMap, u64) -> Result<(), SourceError> + 'a;

/// Reads `socket` until `stop` (then drains what is queued once more) or
/// until a callback or the socket fails. `what` names the socket in
/// errors (`recvmmsg on can0`).
pub(crate) fn read_until_stop(
    socket: &Socket,
    batch: &mut RecvBatch,
    sink: &SourceSink,
    stop: &Stop,
    what: &str,
    on_batch: &mut OnBatch<'_>,
    every: &mut dyn FnMut() -> Result<(), SourceError>,
) -> Result<(), SourceError> {
    let io = |source| SourceError::Io {
        context: what.to_owned(),
        source,
    };
    let mut next_check = Instant::now() + CHECK_EVERY;
    loop {
        let now = Instant::now();
        if now >= next_check {
            sink.alive();
            every()?;
            next_check = now + CHECK_EVERY;
        }
        let mut wait = next_check.saturating_duration_since(Instant::now());
        if stop.waker().is_none() {
            // No eventfd (descriptors ran out): the stop is polled, at a
            // tenth of the shortest stage deadline.
            wait = wait.min(NO_WAKER_POLL);
        }
        match sys::wait_readable(socket.as_fd(), stop.waker(), wait).map_err(io)? {
            Wake::Stop => return drain(socket, batch, sink, what, on_batch),
            Wake::Timeout => {
                if stop.is_requested() {
                    return drain(socket, batch, sink, what, on_batch);
                }
            }
            Wake::Readable => {
                for _ in 0..BATCHES_PER_WAKE {
                    if read_one(socket, batch, sink, what, on_batch)? == 0 {
                        break;
                    }
                }
                if stop.is_requested() {
                    return drain(socket, batch, sink, what, on_batch);
                }
            }
        }
    }
}

/// One `recvmmsg` and its batch handed over; the count read.
fn read_one(
    socket: &Socket,
    batch: &mut RecvBatch,
    sink: &SourceSink,
    what: &str,
    on_batch: &mut OnBatch<'_>,
) -> Result<usize, SourceError> {
    let n = batch.recv(socket).map_err(|source| SourceError::Io {
        context: what.to_owned(),
        source,
    })?;
    if n > 0 {
        let map = sink.clock_map(KernelClock::Realtime);
        let at = sink.now_ns();
        on_batch(batch, n, &map, at)?;
    }
    Ok(n)
}

/// What arrived before the stop is recorded too (a bounded number of
/// batches: the recording is ending).
fn drain(
    socket: &Socket,
    batch: &mut RecvBatch,
    sink: &SourceSink,
    what: &str,
    on_batch: &mut OnBatch<'_>,
) -> Result<(), SourceError> {
    for _ in 0..BATCHES_PER_WAKE {
        if read_one(socket, batch, sink, what, on_batch)? == 0 {
            break;
        }
    }
    Ok(())
}
