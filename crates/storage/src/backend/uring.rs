//! io_uring behind the [`Engine`] interface. The ring is created (and its
//! opcodes probed) by [`setup`] when the file is opened, so a refusal can
//! pick another backend; it then moves to the I/O thread, which alone uses
//! it. Every submitted operation sits in a slot of [`UringEngine`], indexed
//! by the SQE's `user_data`, until its CQE is reaped: the slot owns the
//! buffer the kernel reads.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use io_uring::{opcode, register::Probe, types, IoUring};

use super::{Done, Engine, Op, SubmitError};
use crate::error::errno_text;

/// The opcodes the engine uses; all exist since Linux 5.6.
const REQUIRED_OPCODES: [(u8, &str); 3] = [
    (opcode::Write::CODE, "IORING_OP_WRITE"),
    (opcode::Fsync::CODE, "IORING_OP_FSYNC"),
    (opcode::Fallocate::CODE, "IORING_OP_FALLOCATE"),
];

/// Creates a ring for `queue_depth` writes plus the one fsync and one
/// fallocate the I/O thread may have in flight beside them, and checks the
/// kernel supports every opcode used. `Err` is the reason, in words, e.g.
/// `"io_uring_setup: ENOSYS (Function not implemented)"`.
/// `injected_errno` makes setup fail as if the kernel had refused.
pub(crate) fn setup(queue_depth: usize, injected_errno: Option<i32>) -> Result<IoUring, String> {
    if let Some(errno) = injected_errno {
        return Err(format!("io_uring_setup: {} (injected)", errno_text(errno)));
    }
    let entries = u32::try_from((queue_depth + 2).next_power_of_two())
        .map_err(|_| format!("io_uring_setup: queue depth {queue_depth} too large"))?;
    let ring = IoUring::new(entries).map_err(|e| {
        let errno = e.raw_os_error().unwrap_or(libc::EIO);
        let mut reason = format!("io_uring_setup: {}", errno_text(errno));
        if errno == libc::EPERM {
            if let Ok(v) = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled") {
                if v.trim() != "0" {
                    reason.push_str(&format!(" (kernel.io_uring_disabled={})", v.trim()));
                }
            }
        }
        reason
    })?;
    let mut probe = Probe::new();
    ring.submitter().register_probe(&mut probe).map_err(|e| {
        format!(
            "io_uring_register(PROBE): {}",
            errno_text(e.raw_os_error().unwrap_or(libc::EIO))
        )
    })?;
    for (code, name) in REQUIRED_OPCODES {
        if !probe.is_supported(code) {
            return Err(format!(
                "io_uring probe: {name} not supported by this kernel"
            ));
        }
    }
    Ok(ring)
}

/// An io_uring and the operations it holds.
pub(crate) struct UringEngine {
    ring: IoUring,
    /// Shared with the I/O thread; keeps the fd open while SQEs name it.
    file: Arc<File>,
    /// `slots[user_data]` owns the operation (and its buffer) of an SQE
    /// until its CQE is reaped.
    slots: Vec<Option<Op>>,
    free: Vec<usize>,
    in_flight: usize,
}

impl UringEngine {
    pub(crate) fn new(ring: IoUring, file: Arc<File>) -> UringEngine {
        UringEngine {
            ring,
            file,
            slots: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
        }
    }

    fn entry_for(&self, op: &Op) -> Result<io_uring::squeue::Entry, i32> {
        let fd = types::Fd(self.file.as_raw_fd());
        Ok(match op {
            Op::Write(w) => {
                let rest = w.buf.as_slice().get(w.done..w.len).ok_or(libc::EINVAL)?;
                let len = u32::try_from(rest.len()).map_err(|_| libc::EINVAL)?;
                opcode::Write::new(fd, rest.as_ptr(), len)
                    .offset(w.offset + w.done as u64)
                    .build()
            }
            Op::Datasync { .. } => opcode::Fsync::new(fd)
                .flags(types::FsyncFlags::DATASYNC)
                .build(),
            Op::Fallocate { offset, len } => opcode::Fallocate::new(fd, *len)
                .offset(*offset)
                .mode(0)
                .build(),
        })
    }

    /// io_uring_enter to hand queued SQEs to the kernel, optionally waiting
    /// for one completion. EINTR retries; EAGAIN/EBUSY (completion queue
    /// pressure) returns so the caller can reap first; the SQEs stay queued.
    fn enter(&mut self, wait: bool) -> io::Result<()> {
        loop {
            let r = if wait {
                self.ring.submit_and_wait(1)
            } else {
                self.ring.submit()
            };
            match r {
                Ok(_) => return Ok(()),
                Err(e) => match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN) | Some(libc::EBUSY) => return Ok(()),
                    _ => return Err(e),
                },
            }
        }
    }
}

impl Engine for UringEngine {
    fn submit(&mut self, op: Op) -> Result<(), SubmitError> {
        let entry = match self.entry_for(&op) {
            Ok(e) => e,
            Err(errno) => return Err(SubmitError::NotQueued(op, errno)),
        };
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        let entry = entry.user_data(slot as u64);
        // SAFETY: the SQE points into the operation's buffer (for a write),
        // a heap block that does not move when the Op value moves. The Op is
        // stored in slots[slot] right here and leaves it only in reap(), when
        // the CQE carrying this user_data has been consumed, or never (Drop
        // leaks what it cannot reap). So the buffer outlives the kernel's use
        // of it. The fd stays open because self.file owns it for the life of
        // the engine, which outlives every SQE for the same reason.
        let pushed = unsafe { self.ring.submission().push(&entry) };
        if pushed.is_err() {
            // Full: the ring is sized for every operation the I/O thread
            // allows in flight, so this means SQEs not yet entered; enter
            // them and retry once.
            if let Err(e) = self.enter(false) {
                return Err(SubmitError::Broken(e));
            }
            // SAFETY: as above.
            if unsafe { self.ring.submission().push(&entry) }.is_err() {
                self.free.push(slot);
                return Err(SubmitError::NotQueued(op, libc::EBUSY));
            }
        }
        self.slots[slot] = Some(op);
        self.in_flight += 1;
        self.enter(false).map_err(SubmitError::Broken)
    }

    fn reap(&mut self, wait: bool, out: &mut Vec<Done>) -> io::Result<()> {
        if wait && self.in_flight > 0 && self.ring.completion().is_empty() {
            self.enter(true)?;
        }
        let mut cq = self.ring.completion();
        cq.sync();
        for cqe in &mut cq {
            let slot = cqe.user_data() as usize;
            match self.slots.get_mut(slot).and_then(Option::take) {
                Some(op) => {
                    self.free.push(slot);
                    self.in_flight -= 1;
                    out.push(Done {
                        op,
                        result: cqe.result(),
                    });
                }
                None => tracing::warn!(
                    user_data = slot,
                    "io_uring completion for an empty slot ignored"
                ),
            }
        }
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }
}

impl Drop for UringEngine {
    fn drop(&mut self) {
        // Normally nothing is in flight here (the I/O thread drains before
        // it exits). If something is (a panic unwinding), wait for it: freeing
        // a buffer the kernel still reads would put whatever reuses the
        // memory into the file.
        let mut done = Vec::new();
        while self.in_flight > 0 {
            if let Err(e) = self.reap(true, &mut done) {
                tracing::warn!(
                    in_flight = self.in_flight,
                    error = %e,
                    "cannot reap io_uring completions; leaking their buffers"
                );
                for op in self.slots.drain(..).flatten() {
                    std::mem::forget(op);
                }
                return;
            }
            done.clear();
        }
    }
}
