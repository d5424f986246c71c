//! Real-time scheduling for the storage stage's threads.
//!
//! The writer's I/O thread (and the caller's feeding thread, if it asks)
//! can run under `SCHED_FIFO`, so a loaded CPU (compressor threads, a
//! source at full rate) cannot delay the next write or the reaping of a
//! completion. Both threads sleep whenever there is nothing to write, so a
//! real-time priority for them alone cannot starve the rest of the system
//! (and the kernel's RT throttling, `sched_rt_runtime_us`, bounds them
//! anyway).

use std::sync::atomic::{AtomicBool, Ordering};

/// Highest `SCHED_FIFO` priority on Linux.
pub const MAX_REALTIME_PRIORITY: u8 = 99;

/// Puts the calling thread under `SCHED_FIFO` at `priority` (1..=99);
/// 0 puts it back to `SCHED_OTHER`. Needs `CAP_SYS_NICE` (or an
/// `RLIMIT_RTPRIO` at least `priority`).
pub fn set_current_thread_realtime(priority: u8) -> std::io::Result<()> {
    if priority > MAX_REALTIME_PRIORITY {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("real-time priority {priority} is above {MAX_REALTIME_PRIORITY}"),
        ));
    }
    let policy = if priority == 0 {
        libc::SCHED_OTHER
    } else {
        libc::SCHED_FIFO
    };
    let param = libc::sched_param {
        sched_priority: i32::from(priority),
    };
    // SAFETY: `param` is a valid, initialised sched_param that outlives the
    // call; pid 0 is the calling thread (Linux schedules threads, and
    // sched_setscheduler(0) applies to the caller only).
    let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The calling thread's policy and priority: `(SCHED_*, priority)`.
pub fn current_thread_scheduling() -> std::io::Result<(i32, i32)> {
    // SAFETY: pid 0 is the calling thread; no pointers are passed.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param the kernel writes into; pid 0
    // is the calling thread.
    let rc = unsafe { libc::sched_getparam(0, &mut param) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((policy, param.sched_priority))
}

static REFUSAL_LOGGED: AtomicBool = AtomicBool::new(false);

/// [`set_current_thread_realtime`] for a storage-stage thread named
/// `what`: does nothing for 0; a refusal is logged (once per process,
/// with the fix) and the thread goes on at normal priority, since
/// recording at normal priority beats not recording.
pub fn apply_realtime_priority(what: &str, priority: u8) -> bool {
    if priority == 0 {
        return false;
    }
    match set_current_thread_realtime(priority) {
        Ok(()) => {
            tracing::debug!("{what}: SCHED_FIFO priority {priority}");
            true
        }
        Err(e) => {
            if !REFUSAL_LOGGED.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "storage.realtime_priority = {priority}: SCHED_FIFO refused for {what} ({e}); \
                     recording at normal priority (the process needs CAP_SYS_NICE, e.g. root \
                     with CapabilityBoundingSet containing it, or LimitRTPRIO={priority}; \
                     set storage.realtime_priority = 0 to run without it on purpose)"
                );
            }
            false
        }
    }
}
