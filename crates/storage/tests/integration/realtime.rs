//! `WriterOptions::realtime_priority`: the I/O thread runs under
//! SCHED_FIFO at the configured priority, read back from the kernel
//! (`/proc/self/task/<tid>/stat`), and the data it writes is unchanged.

use crate::util::{append, assert_file_is_pattern, opts};
use edgerec_storage::{
    current_thread_scheduling, set_current_thread_realtime, BackendChoice, DirectFile,
};
use std::time::{Duration, Instant};

/// Why this host refuses SCHED_FIFO, tried on a scratch thread.
fn refusal() -> Option<String> {
    std::thread::spawn(|| set_current_thread_realtime(1).err().map(|e| e.to_string()))
        .join()
        .expect("probe thread")
}

#[test]
fn io_thread_runs_sched_fifo_at_the_configured_priority() {
    let test = "io_thread_runs_sched_fifo_at_the_configured_priority";
    if let Some(why) = refusal() {
        edgerec_testkit::skip::skip(format!(
            "{test}: SCHED_FIFO refused here ({why}): needs CAP_SYS_NICE"
        ));
        return;
    }
    // A priority no other test uses, so the thread found is this file's.
    const PRIO: u8 = 37;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("rt.bin");
    // pwrite+O_DIRECT falls back to buffered where O_DIRECT is refused;
    // the I/O thread is the same for every backend.
    let mut o = opts(BackendChoice::Auto);
    o.realtime_priority = PRIO;
    let mut f = DirectFile::create(&path, &o).expect("create");
    // The thread sets its policy as its first step; give it a moment.
    let until = Instant::now() + Duration::from_secs(5);
    let found = loop {
        let io: Vec<_> = edgerec_storage::thread_scheduling()
            .into_iter()
            .filter(|(comm, policy, rt)| {
                comm == "edgerec-io" && *policy == libc::SCHED_FIFO as u32 && *rt == PRIO as u32
            })
            .collect();
        if !io.is_empty() || Instant::now() > until {
            break io;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(
        found.len(),
        1,
        "one edgerec-io thread under SCHED_FIFO {PRIO}; threads: {:?}",
        edgerec_storage::thread_scheduling()
            .into_iter()
            .filter(|t| t.0.starts_with("edgerec"))
            .collect::<Vec<_>>()
    );
    let len = 5 * (1 << 20) + 12_345;
    append(&mut f, len).expect("write");
    f.close().expect("close");
    assert_file_is_pattern(&path, len as u64);
    // This (test) thread was never touched.
    assert_eq!(
        current_thread_scheduling().expect("sched_getscheduler").0,
        libc::SCHED_OTHER
    );
}

#[test]
fn priorities_outside_1_to_99_are_refused_and_0_is_normal() {
    let e = std::thread::spawn(|| set_current_thread_realtime(100))
        .join()
        .expect("thread")
        .expect_err("priority 100");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
    let back = std::thread::spawn(|| {
        set_current_thread_realtime(0)?;
        current_thread_scheduling()
    })
    .join()
    .expect("thread")
    .expect("SCHED_OTHER needs no privilege");
    assert_eq!(back, (libc::SCHED_OTHER, 0));
}
