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

/// `(comm, policy, rt_priority)` of every thread of this process, read
/// from `/proc/self/task/*/stat` (fields 2, 41 and 40): what the kernel
/// schedules each thread with (policy 1 is `SCHED_FIFO`). Empty where
/// `/proc` cannot be read.
pub fn thread_scheduling() -> Vec<(String, u32, u32)> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for t in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue; // the thread ended meanwhile
        };
        if let Some(entry) = parse_task_stat(&stat) {
            out.push(entry);
        }
    }
    out
}

/// `(comm, policy, rt_priority)` from one `/proc/*/task/*/stat` line. The
/// comm is between the first `(` and the last `)` (it may hold either).
fn parse_task_stat(stat: &str) -> Option<(String, u32, u32)> {
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let comm = stat.get(open + 1..close)?.to_owned();
    // Fields after the comm start at field 3.
    let rest: Vec<&str> = stat.get(close + 2..)?.split_whitespace().collect();
    let field = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<u32>().ok());
    Some((comm, field(41)?, field(40)?))
}

/// Whether the thread named `comm` is one of the storage stage's, the
/// threads `storage.realtime_priority` covers: the sequencer
/// (`edgerec-seq`), the I/O thread (`edgerec-io`), the segment closer
/// (`edgerec-close`) and io_uring's workers (`iou-wrk-<tid>`).
pub fn is_storage_thread(comm: &str) -> bool {
    matches!(comm, "edgerec-seq" | "edgerec-io" | "edgerec-close") || comm.starts_with("iou-wrk")
}

/// Thread names and how many threads carry each.
pub type ThreadCounts = Vec<(String, u32)>;

/// The storage stage's threads now, as the kernel schedules them: those
/// under `SCHED_FIFO` at `priority`, and the others (where it was refused),
/// each as `(name, count)` with io_uring's workers counted as `iou-wrk`.
pub fn storage_stage_scheduling(priority: u8) -> (ThreadCounts, ThreadCounts) {
    let mut fifo = std::collections::BTreeMap::new();
    let mut other = std::collections::BTreeMap::new();
    for (comm, policy, rt) in thread_scheduling() {
        if !is_storage_thread(&comm) {
            continue;
        }
        let name = if comm.starts_with("iou-wrk") {
            "iou-wrk".to_owned()
        } else {
            comm
        };
        let map = if policy == libc::SCHED_FIFO as u32 && rt == u32::from(priority) {
            &mut fifo
        } else {
            &mut other
        };
        *map.entry(name).or_insert(0u32) += 1;
    }
    (fifo.into_iter().collect(), other.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_stat_comm_may_hold_spaces_and_parens() {
        // A real line's layout: pid (comm) state ... rt_priority policy ...
        let mut fields: Vec<String> = (3..=52).map(|n| n.to_string()).collect();
        fields[40 - 3] = "10".into(); // rt_priority
        fields[41 - 3] = "1".into(); // policy: SCHED_FIFO
        let line = format!("4242 (iou (wrk) 1) {}", fields.join(" "));
        assert_eq!(
            parse_task_stat(&line),
            Some(("iou (wrk) 1".to_owned(), 1, 10))
        );
        assert_eq!(parse_task_stat("4242 (cut"), None);
        assert_eq!(parse_task_stat("4242 (short) S 1 2"), None);
    }

    #[test]
    fn storage_threads_are_the_stage_and_nothing_else() {
        for t in ["edgerec-seq", "edgerec-io", "edgerec-close", "iou-wrk-4242"] {
            assert!(is_storage_thread(t), "{t}");
        }
        for t in [
            "edgerec",
            "edgerec-chunk",
            "edgerec-zip0",
            "edgerec-ctl",
            "iou-sqp-1",
        ] {
            assert!(!is_storage_thread(t), "{t}");
        }
    }

    #[test]
    fn this_process_reads_its_own_threads() {
        let threads = thread_scheduling();
        assert!(
            !threads.is_empty(),
            "/proc/self/task lists at least this thread"
        );
        // Test threads run under SCHED_OTHER (0) at rt priority 0.
        assert!(threads
            .iter()
            .any(|(_, policy, rt)| *policy == 0 && *rt == 0));
        // Only storage threads are counted (other tests of this binary may
        // run DirectFiles meanwhile, so which ones is not fixed).
        let (fifo, other) = storage_stage_scheduling(10);
        for (name, n) in fifo.iter().chain(&other) {
            assert!(is_storage_thread(name) && *n > 0, "{name} {n}");
        }
    }
}
