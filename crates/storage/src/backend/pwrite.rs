//! Blocking system calls behind the [`Engine`] interface: `pwrite(2)`,
//! `fdatasync(2)` and `fallocate(2)` run at submission and their results are
//! reaped afterwards. Serves both pwrite+O_DIRECT and buffered+fdatasync;
//! only the flags the file was opened with differ.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use super::{Done, Engine, Op, SubmitError};

/// Performs each operation synchronously on the submitting (I/O) thread.
pub(crate) struct PwriteEngine {
    /// Shared with the I/O thread; keeps the fd open for every call.
    file: Arc<File>,
    done: VecDeque<Done>,
}

impl PwriteEngine {
    pub(crate) fn new(file: Arc<File>) -> PwriteEngine {
        PwriteEngine {
            file,
            done: VecDeque::new(),
        }
    }

    fn run(&self, op: &Op) -> i32 {
        let fd = self.file.as_raw_fd();
        loop {
            let rc: isize = match op {
                Op::Write(w) => {
                    let Some(rest) = w.buf.as_slice().get(w.done..w.len) else {
                        return -libc::EINVAL;
                    };
                    // SAFETY: `rest` is a live borrow of the operation's own
                    // buffer, valid for rest.len() bytes for the whole call;
                    // fd is open because self.file owns it. pwrite only
                    // reads the buffer.
                    unsafe {
                        libc::pwrite(
                            fd,
                            rest.as_ptr().cast(),
                            rest.len(),
                            (w.offset + w.done as u64) as libc::off_t,
                        )
                    }
                }
                // SAFETY: fd is open (owned by self.file); no memory is passed.
                Op::Datasync { .. } => unsafe { libc::fdatasync(fd) as isize },
                Op::Fallocate { offset, len } => {
                    // SAFETY: fd is open (owned by self.file); no memory is passed.
                    unsafe {
                        libc::fallocate(fd, 0, *offset as libc::off_t, *len as libc::off_t) as isize
                    }
                }
            };
            if rc >= 0 {
                return i32::try_from(rc).unwrap_or(i32::MAX);
            }
            let errno = io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO);
            if errno != libc::EINTR {
                return -errno;
            }
        }
    }
}

impl Engine for PwriteEngine {
    fn submit(&mut self, op: Op) -> Result<(), SubmitError> {
        let result = self.run(&op);
        self.done.push_back(Done { op, result });
        Ok(())
    }

    fn reap(&mut self, _wait: bool, out: &mut Vec<Done>) -> io::Result<()> {
        out.extend(self.done.drain(..));
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.done.len()
    }
}
