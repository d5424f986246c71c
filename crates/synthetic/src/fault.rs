//! Fault injection (`sources.synthetic[].fault`): when, in one run of a
//! synthetic source, the configured fault strikes. Times count from the
//! start of the run, so `panic-every:2s` panics two seconds into every run;
//! `malformed-every:N` counts messages instead, from the source's first
//! (across restarts, like the sequence numbers), see [`is_malformed`].

use std::time::{Duration, Instant};

use edgerec_config::SourceFault;

/// How long a `stall-for` source runs normally before it stalls.
pub const STALL_AFTER: Duration = Duration::from_secs(1);

/// What the source must do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strike {
    /// Nothing: produce as usual.
    None,
    /// Panic.
    Panic,
    /// Return an error.
    Error,
    /// Stop producing and stop showing liveness for this long.
    Stall(Duration),
}

/// The fault schedule of one run.
#[derive(Debug, Clone)]
pub struct FaultPlan {
    fault: Option<SourceFault>,
    started: Instant,
    stalled: bool,
}

impl FaultPlan {
    /// The schedule of a run that starts at `started`.
    pub fn new(fault: Option<SourceFault>, started: Instant) -> Self {
        Self {
            fault,
            started,
            stalled: false,
        }
    }

    /// What to do at `now`; a stall strikes once per run.
    pub fn check(&mut self, now: Instant) -> Strike {
        let ran = now.saturating_duration_since(self.started);
        match self.fault {
            None => Strike::None,
            Some(SourceFault::PanicEvery(d)) if ran >= d => Strike::Panic,
            Some(SourceFault::ErrorEvery(d)) if ran >= d => Strike::Error,
            Some(SourceFault::StallFor(d)) if !self.stalled && ran >= STALL_AFTER => {
                self.stalled = true;
                Strike::Stall(d)
            }
            Some(_) => Strike::None,
        }
    }

    /// The configured fault as written in the config.
    pub fn describe(&self) -> String {
        match self.fault {
            None => "none".into(),
            Some(SourceFault::PanicEvery(d)) => format!("panic-every:{}ms", d.as_millis()),
            Some(SourceFault::ErrorEvery(d)) => format!("error-every:{}ms", d.as_millis()),
            Some(SourceFault::StallFor(d)) => format!("stall-for:{}ms", d.as_millis()),
            Some(fault @ SourceFault::MalformedEvery(_)) => fault.to_string(),
        }
    }
}

/// Bytes a malformed message keeps: only the CDR encapsulation header, so
/// that any decoder, even one that reads a single field, runs out of bytes.
pub const MALFORMED_LEN: usize = 4;

/// Whether message `seq` (counted from 0) is cut short by `fault`: under
/// `malformed-every:N` the Nth, 2Nth, ... message counted from 1, that is
/// every `seq` with `(seq + 1) % N == 0`.
#[inline]
pub fn is_malformed(fault: Option<SourceFault>, seq: u64) -> bool {
    match fault {
        Some(SourceFault::MalformedEvery(n)) => n > 0 && (seq + 1) % n == 0,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fault_strikes_at_its_time_in_the_run() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let ms = Duration::from_millis;
        let mut none = FaultPlan::new(None, t0);
        assert_eq!(none.check(t0 + s(100)), Strike::None);
        let mut p = FaultPlan::new(Some(SourceFault::PanicEvery(s(2))), t0);
        assert_eq!(p.check(t0 + ms(1999)), Strike::None);
        assert_eq!(p.check(t0 + s(2)), Strike::Panic);
        let mut e = FaultPlan::new(Some(SourceFault::ErrorEvery(s(2))), t0);
        assert_eq!(e.check(t0 + ms(500)), Strike::None);
        assert_eq!(e.check(t0 + s(3)), Strike::Error);
        let mut st = FaultPlan::new(Some(SourceFault::StallFor(s(5))), t0);
        assert_eq!(st.check(t0 + ms(999)), Strike::None);
        assert_eq!(st.check(t0 + s(1)), Strike::Stall(s(5)));
        assert_eq!(st.check(t0 + s(7)), Strike::None, "once per run");
        assert_eq!(st.describe(), "stall-for:5000ms");
        let mut m = FaultPlan::new(Some(SourceFault::MalformedEvery(3)), t0);
        assert_eq!(m.check(t0 + s(100)), Strike::None, "counts, not times");
        assert_eq!(m.describe(), "malformed-every:3");
    }

    #[test]
    fn malformed_every_counts_messages_from_one() {
        let every3 = Some(SourceFault::MalformedEvery(3));
        let hit: Vec<u64> = (0..10).filter(|&seq| is_malformed(every3, seq)).collect();
        assert_eq!(hit, [2, 5, 8], "messages 3, 6 and 9");
        let every1 = Some(SourceFault::MalformedEvery(1));
        assert!((0..5).all(|seq| is_malformed(every1, seq)));
        assert!(!is_malformed(None, 2));
        assert!(!is_malformed(
            Some(SourceFault::PanicEvery(Duration::from_secs(1))),
            2
        ));
    }
}
