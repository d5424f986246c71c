//! The one way a test skips all or part of its work.
//!
//! A skip is lost coverage. Where `scripts/test` runs the tests (it sets
//! `EDGEREC_TEST_NO_SKIP=1`) a skip fails the test, naming it, unless its
//! reason is on the short list of [`Allowed`] reasons: what this machine
//! truly cannot have, each naming where that coverage lives instead. So an
//! install step that breaks (a Python reader missing from `.venv`, a
//! Debian package, binfmt_misc) turns the run red instead of quietly
//! removing tests.
//!
//! Elsewhere (`cargo test` by hand, `scripts/check`) a skip prints
//! `SKIP <test>: <why>`, which libtest shows only for a failing test or
//! with `--show-output` (`scripts/test-aarch64` lists them that way).

use std::fmt::Display;

/// The environment switch `scripts/test` sets: skips fail unless allowed.
pub const NO_SKIP_ENV: &str = "EDGEREC_TEST_NO_SKIP";

/// The reasons a test may skip under `scripts/test`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowed {
    /// Hardware this machine (and CI's) has not: a PTP hardware clock, an
    /// NVIDIA encoder, a Jetson's cameras, SocketCAN in this kernel. The
    /// QEMU board (`scripts/qemu-test`: vcan, the i6300esb watchdog, GPIO)
    /// and a Jetson cover what can be covered.
    NoHardware,
    /// Emulated code under user-mode QEMU (`scripts/test-aarch64`): a
    /// syscall or ioctl it does not implement (io_uring, SIOCETHTOOL,
    /// SO_MEMINFO, IP_MULTICAST_IF for Cyclone DDS) or a rate it cannot keep
    /// (x265enc in real time, UDP at 100k packets/s). The same test runs
    /// natively on the host, and the QEMU board runs io_uring and the
    /// recorder on an arm64 kernel. Refused where the test runs natively.
    QemuUser,
    /// A test that acts on the machine itself and runs only when asked
    /// (arming a real `/dev/watchdog`, which resets the machine if the test
    /// dies): the QEMU board arms its emulated watchdog instead.
    OptIn,
}

impl Allowed {
    fn label(self) -> &'static str {
        match self {
            Allowed::NoHardware => "no such hardware here",
            Allowed::QemuUser => "user-mode QEMU",
            Allowed::OptIn => "opt-in",
        }
    }
}

/// Whether skips fail (`scripts/test` sets [`NO_SKIP_ENV`] to `1`).
pub fn strict() -> bool {
    std::env::var(NO_SKIP_ENV).as_deref() == Ok("1")
}

fn test_name() -> String {
    std::thread::current().name().unwrap_or("test").to_owned()
}

/// Skips the rest of this test (the caller returns) for a reason that is
/// not on the allowed list: something scripts/test installs or sets up is
/// missing. Under scripts/test this panics, naming the test and the
/// reason; elsewhere it prints `SKIP <test>: <why>`.
#[track_caller]
pub fn skip(why: impl Display) {
    let test = test_name();
    if strict() {
        panic!(
            "SKIP {test}: {why}\n  a skip fails under scripts/test ({NO_SKIP_ENV}=1): install \
             what it needs (scripts/test's setup stage does), or, if no machine like this can \
             have it, give the test a reason from edgerec_testkit::skip::Allowed"
        );
    }
    println!("SKIP {test}: {why}");
}

/// Skips all or part of this test for an [`Allowed`] reason; never fails,
/// except that [`Allowed::QemuUser`] is refused under scripts/test where
/// the test does not run under user-mode QEMU.
#[track_caller]
pub fn skip_allowed(reason: Allowed, why: impl Display) {
    let test = test_name();
    if reason == Allowed::QemuUser && crate::qemu_user().is_none() && strict() {
        panic!(
            "SKIP {test}: {why}\n  the reason given is user-mode QEMU, but this test runs \
             natively"
        );
    }
    println!("SKIP {test} [{}]: {why}", reason.label());
}

/// A reason to skip, allowed or not, for a helper to return and its caller
/// to [`report`](Skip::report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    /// `Some` when the reason is on the allowed list.
    pub allowed: Option<Allowed>,
    /// What is missing or refused, and where it comes from.
    pub why: String,
}

impl Skip {
    /// Something scripts/test installs or sets up is missing.
    pub fn missing(why: impl Into<String>) -> Skip {
        Skip {
            allowed: None,
            why: why.into(),
        }
    }

    /// An allowed reason.
    pub fn allowed(reason: Allowed, why: impl Into<String>) -> Skip {
        Skip {
            allowed: Some(reason),
            why: why.into(),
        }
    }

    /// The same reason, its text prefixed with `context` (`"{context}:
    /// {why}"`), for a test that skips one part of several.
    pub fn context(self, context: impl Display) -> Skip {
        Skip {
            why: format!("{context}: {}", self.why),
            ..self
        }
    }

    /// [`skip`] or [`skip_allowed`], as the reason is; the caller returns
    /// (or leaves out the part it skips).
    #[track_caller]
    pub fn report(&self) {
        match self.allowed {
            Some(reason) => skip_allowed(reason, &self.why),
            None => skip(&self.why),
        }
    }
}

impl Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The environment is the process's: these run in one test so that no
    // other test sees the switch flip.
    #[test]
    fn skips_fail_under_the_switch_unless_allowed() {
        std::env::remove_var(NO_SKIP_ENV);
        skip("nothing to see");
        skip_allowed(Allowed::QemuUser, "natively, outside scripts/test: a print");
        std::env::set_var(NO_SKIP_ENV, "1");
        let err = std::panic::catch_unwind(|| skip("rosbags is not importable"))
            .expect_err("a skip under the switch panics");
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            msg.contains("skips_fail_under_the_switch_unless_allowed"),
            "{msg}"
        );
        assert!(msg.contains("rosbags is not importable"), "{msg}");
        skip_allowed(Allowed::NoHardware, "no /dev/ptp0");
        skip_allowed(Allowed::OptIn, "set EDGEREC_TEST_REAL_WATCHDOG=1");
        let qemu = std::panic::catch_unwind(|| skip_allowed(Allowed::QemuUser, "no io_uring"));
        assert_eq!(qemu.is_err(), crate::qemu_user().is_none());
        std::env::remove_var(NO_SKIP_ENV);
    }
}
