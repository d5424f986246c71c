//! The upload's I/O runs in the kernel's idle class, so reading a
//! recording to send it takes only the disk time the recorder leaves:
//! BFQ serves an idle-class task when no other asks, mq-deadline (Linux
//! 5.14 on, the Orin's 5.15 included) dispatches its requests after the
//! others' and sends one that waited `prio_aging_expire` (10 s), and
//! `none` keeps the class but ignores it. The reads themselves go past
//! the page cache ([`crate::uncached`]: `O_DIRECT` where the file system
//! takes it), so they are the upload's own requests at its class and
//! leave the recording's pages alone. Inside the recorder the agent's
//! threads also run under `SCHED_IDLE` ([`low_cpu`]), so hashing and TLS
//! run only on a core the recording's own threads leave idle and give it
//! back the moment one of them wakes, and take what is idle otherwise.

/// The nice value the upload threads take besides (and instead, where
/// `SCHED_IDLE` is refused): a CFS weight of 110 against 1024 for nice 0.
pub const AGENT_NICE: i32 = 10;

/// Puts the calling thread (and the threads it starts after, which
/// inherit both) under `SCHED_IDLE`, at nice [`AGENT_NICE`] (Linux;
/// elsewhere nothing). Measured by `scripts/bench --offload`: at nice 10
/// alone the upload's hashing, preempted only at the scheduler's
/// granularity, held the recorder's wake-ups back enough to cost it more
/// than a quarter of its rate on two cores.
#[cfg(target_os = "linux")]
pub fn low_cpu() -> std::io::Result<()> {
    // SAFETY: gettid and setpriority take and return integers only;
    // PRIO_PROCESS with a thread id sets that thread's nice value.
    let r = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, AGENT_NICE)
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid
    // sched_param that outlives the call.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Elsewhere the upload keeps its CPU priority.
#[cfg(not(target_os = "linux"))]
pub fn low_cpu() -> std::io::Result<()> {
    Ok(())
}

/// `IOPRIO_CLASS_IDLE` (linux/ioprio.h).
#[cfg(target_os = "linux")]
const IOPRIO_CLASS_IDLE: i32 = 3;
/// `IOPRIO_CLASS_SHIFT`.
#[cfg(target_os = "linux")]
const IOPRIO_CLASS_SHIFT: i32 = 13;
/// `IOPRIO_WHO_PROCESS`: with id 0, the calling thread.
#[cfg(target_os = "linux")]
const IOPRIO_WHO_PROCESS: i32 = 1;

/// Puts the calling thread (and the threads it starts after) in the idle
/// I/O class (Linux; elsewhere nothing).
#[cfg(target_os = "linux")]
pub fn idle_io() -> std::io::Result<()> {
    // SAFETY: ioprio_set takes three integers and touches no memory of
    // ours.
    let r = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            0,
            IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Elsewhere the upload keeps its I/O priority.
#[cfg(not(target_os = "linux"))]
pub fn idle_io() -> std::io::Result<()> {
    Ok(())
}

/// The calling thread's I/O class (`IOPRIO_CLASS_*`).
#[cfg(target_os = "linux")]
pub fn io_class() -> std::io::Result<i32> {
    // SAFETY: as above; ioprio_get returns the priority or -1.
    let r = unsafe { libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((r as i32) >> IOPRIO_CLASS_SHIFT)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn low_cpu_is_inherited_by_the_threads_it_starts() {
        std::thread::spawn(|| {
            low_cpu().unwrap();
            // SAFETY: getpriority with a thread id returns its nice value.
            let nice = || unsafe {
                libc::getpriority(
                    libc::PRIO_PROCESS,
                    libc::syscall(libc::SYS_gettid) as libc::id_t,
                )
            };
            assert_eq!(nice(), AGENT_NICE);
            // SAFETY: sched_getscheduler(0) returns the calling thread's policy.
            let policy = || unsafe { libc::sched_getscheduler(0) };
            assert_eq!(policy(), libc::SCHED_IDLE);
            let child_policy = std::thread::spawn(policy).join().unwrap();
            assert_eq!(child_policy, libc::SCHED_IDLE);
            let child = std::thread::spawn(move || {
                // SAFETY: as above.
                unsafe {
                    libc::getpriority(
                        libc::PRIO_PROCESS,
                        libc::syscall(libc::SYS_gettid) as libc::id_t,
                    )
                }
            })
            .join()
            .unwrap();
            assert_eq!(child, AGENT_NICE);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_thread_and_the_threads_it_starts_are_idle() {
        std::thread::spawn(|| {
            idle_io().unwrap();
            assert_eq!(io_class().unwrap(), IOPRIO_CLASS_IDLE);
            let child = std::thread::spawn(|| io_class().unwrap()).join().unwrap();
            assert_eq!(child, IOPRIO_CLASS_IDLE);
        })
        .join()
        .unwrap();
    }
}
