//! A time limit of a test's own, for tests that can hang on something
//! outside them (a DDS peer, GStreamer, a server, an emulator): past it
//! the test's name is printed as `TIMEOUT <test>` and the test process
//! exits with status 124, so a hang fails in minutes and names the test
//! instead of running a whole `scripts/test` stage into its limit.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Exit status of a test process stopped by its time limit (`timeout`'s).
pub const TIMEOUT_STATUS: i32 = 124;

/// Held for the life of a test; dropping it ends the limit.
#[must_use = "the limit ends when this is dropped"]
pub struct TimeLimit {
    done: Arc<(Mutex<bool>, Condvar)>,
}

/// Starts a limit of `limit` for the calling test (ten times that under
/// user-mode QEMU, whose emulated code runs 5-20 times slower).
pub fn time_limit(limit: Duration) -> TimeLimit {
    let limit = if crate::qemu_user().is_some() {
        limit * 10
    } else {
        limit
    };
    let test = std::thread::current().name().unwrap_or("test").to_owned();
    let done = Arc::new((Mutex::new(false), Condvar::new()));
    let watched = Arc::clone(&done);
    let named = test.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("time-limit {test}"))
        .spawn(move || {
            let test = named;
            let (lock, cvar) = &*watched;
            let finished = lock.lock().unwrap_or_else(|p| p.into_inner());
            let (finished, _) = cvar
                .wait_timeout_while(finished, limit, |f| !*f)
                .unwrap_or_else(|p| p.into_inner());
            if !*finished {
                eprintln!(
                    "TIMEOUT {test}: still running after its own limit of {} s; the test \
                     process exits {TIMEOUT_STATUS}",
                    limit.as_secs()
                );
                std::process::exit(TIMEOUT_STATUS);
            }
        });
    if let Err(e) = spawned {
        eprintln!("{test}: no time limit (cannot start its thread: {e})");
    }
    TimeLimit { done }
}

impl Drop for TimeLimit {
    fn drop(&mut self) {
        let (lock, cvar) = &*self.done;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cvar.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_within_its_limit_is_left_alone() {
        let limit = time_limit(Duration::from_millis(200));
        std::thread::sleep(Duration::from_millis(20));
        drop(limit);
        // Past the limit: the process is still here.
        std::thread::sleep(Duration::from_millis(400));
    }

    #[test]
    fn a_test_past_its_limit_exits_124_naming_itself() {
        if std::env::var_os("EDGEREC_LIMIT_CHILD").is_some() {
            let _limit = time_limit(Duration::from_millis(100));
            std::thread::sleep(Duration::from_secs(30));
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                "limit::tests::a_test_past_its_limit_exits_124_naming_itself",
                "--nocapture",
            ])
            .env("EDGEREC_LIMIT_CHILD", "1")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(TIMEOUT_STATUS), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("TIMEOUT limit::tests::a_test_past_its_limit_exits_124_naming_itself"),
            "{err}"
        );
    }
}
