//! Clock quality: a pure state machine fed once per poll with what ptp4l and
//! the PHC-to-system measurement say, with time injected by the caller, and
//! an accumulator of offsets per recording segment.
//!
//! - `Locked`: every offset known is within the threshold (1 us by
//!   default), continuously for `lock_time` (10 s), with ptp4l's port in
//!   SLAVE and a grandmaster present.
//! - `Holdover`: was locked, then the grandmaster or sync was lost (or
//!   ptp4l stopped answering) less than `holdover_max` (60 s) ago; the
//!   oscillator is coasting on its last frequency.
//! - `Unlocked`: synchronising but not locked yet, an offset beyond the
//!   threshold (which breaks a lock at once), or sync lost for longer than
//!   `holdover_max`.
//! - `FreeRunning`: no PTP information at all (no ptp4l answering and no
//!   PHC offset), e.g. plain realtime with nothing to compare.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::pmc::{PortState, Ptp4lStatus};

/// The quality of the recording clock, from best to worst (the derived
/// order is that severity: `max` of two states is the worse one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockState {
    /// Synchronised within the threshold for at least `lock_time`.
    Locked,
    /// Was locked; sync lost less than `holdover_max` ago.
    Holdover,
    /// Synchronising, or synchronised badly.
    Unlocked,
    /// No PTP information at all.
    FreeRunning,
}

impl ClockState {
    /// The name used in status, logs and metadata: `locked`, `holdover`,
    /// `unlocked`, `free_running`.
    pub fn name(self) -> &'static str {
        match self {
            ClockState::Locked => "locked",
            ClockState::Holdover => "holdover",
            ClockState::Unlocked => "unlocked",
            ClockState::FreeRunning => "free_running",
        }
    }

    /// Whether data stamped in this state is flagged as not synchronised:
    /// every state but `Locked` and `Holdover`.
    pub fn flags_data(self) -> bool {
        matches!(self, ClockState::Unlocked | ClockState::FreeRunning)
    }
}

impl fmt::Display for ClockState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The thresholds of the state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QualityConfig {
    /// An offset counts as good when its absolute value is below this, ns.
    pub lock_threshold_ns: u64,
    /// How long offsets must stay good before the clock is `Locked`.
    pub lock_time: Duration,
    /// How long after losing sync a locked clock stays in `Holdover`.
    pub holdover_max: Duration,
}

impl Default for QualityConfig {
    fn default() -> Self {
        QualityConfig {
            lock_threshold_ns: 1_000,
            lock_time: Duration::from_secs(10),
            holdover_max: Duration::from_secs(60),
        }
    }
}

/// What ptp4l said in one poll, as far as quality goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ptp4lSync {
    /// The state of the port following the master.
    pub port_state: PortState,
    /// Whether a grandmaster is present.
    pub gm_present: bool,
    /// This clock minus its master, ns.
    pub master_offset_ns: i64,
}

impl From<&Ptp4lStatus> for Ptp4lSync {
    fn from(s: &Ptp4lStatus) -> Self {
        Ptp4lSync {
            port_state: s.port_state,
            gm_present: s.gm_present,
            master_offset_ns: s.master_offset_ns,
        }
    }
}

/// The inputs of one poll. Every field is optional: what is absent is
/// simply not known this time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncInput {
    /// ptp4l's answer, if it answered.
    pub ptp4l: Option<Ptp4lSync>,
    /// The offset of the system clock to the PHC phc2sys copies from, as
    /// [`phc2sys_residual_ns`] reduces it, where one is configured.
    pub phc_offset_ns: Option<i64>,
    /// A fault that makes the recording clock wrong now (e.g. its PHC can
    /// no longer be read): counts as an offset beyond the threshold.
    pub fault: Option<String>,
}

/// The PHC-to-system offset phc2sys leaves, as the part of `offset_ns`
/// beyond whole seconds (in -0.5 s..0.5 s): phc2sys keeps CLOCK_REALTIME at
/// PHC minus the TAI-UTC offset (37 s since 2017) when the PHC runs PTP
/// time, or at PHC itself when it runs UTC, and either way the difference is
/// whole seconds.
pub fn phc2sys_residual_ns(offset_ns: i64) -> i64 {
    const SEC: i64 = 1_000_000_000;
    let rem = offset_ns.rem_euclid(SEC);
    if rem >= SEC / 2 {
        rem - SEC
    } else {
        rem
    }
}

/// The machine's verdict: a state, since when, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClockQuality {
    /// The state.
    pub state: ClockState,
    /// When the state began, in the time base the caller feeds.
    pub since_ns: u64,
    /// Why, in words (the offsets and states that decided it).
    pub reason: String,
}

/// The clock-quality state machine. Pure: the caller passes the time of
/// each poll (any monotonic ns) and what it learned.
#[derive(Debug, Clone)]
pub struct QualityMachine {
    config: QualityConfig,
    quality: ClockQuality,
    /// Since when every offset has been good, while it has.
    good_since: Option<u64>,
    /// The last poll that was `Locked`, until a bad offset or the end of
    /// holdover forgets it.
    last_locked: Option<u64>,
}

/// One poll's evidence.
enum Verdict {
    /// No PTP information.
    Nothing,
    /// Sync or grandmaster lost: holdover applies.
    Lost(String),
    /// An offset beyond the threshold, or a fault: a lock breaks at once.
    Bad(String),
    /// Every known offset within the threshold; the worst of them.
    Good(String),
}

impl QualityMachine {
    /// A machine in `FreeRunning` ("no poll yet") from `now_ns`.
    pub fn new(config: QualityConfig, now_ns: u64) -> QualityMachine {
        QualityMachine {
            config,
            quality: ClockQuality {
                state: ClockState::FreeRunning,
                since_ns: now_ns,
                reason: "no poll yet".to_string(),
            },
            good_since: None,
            last_locked: None,
        }
    }

    /// The thresholds.
    pub fn config(&self) -> &QualityConfig {
        &self.config
    }

    /// The current verdict.
    pub fn quality(&self) -> &ClockQuality {
        &self.quality
    }

    /// Feeds one poll at `now_ns` and returns the new verdict.
    pub fn update(&mut self, now_ns: u64, input: &SyncInput) -> &ClockQuality {
        let lock_ns = duration_ns(self.config.lock_time);
        let holdover_ns = duration_ns(self.config.holdover_max);
        let in_holdover =
            |last: Option<u64>| last.is_some_and(|t| now_ns.saturating_sub(t) <= holdover_ns);
        let (state, reason) = match self.verdict(input) {
            Verdict::Good(what) => {
                let since = *self.good_since.get_or_insert(now_ns);
                let good_for = now_ns.saturating_sub(since);
                if good_for >= lock_ns {
                    self.last_locked = Some(now_ns);
                    (
                        ClockState::Locked,
                        format!("{what}, for {}", secs(good_for)),
                    )
                } else {
                    let why = format!(
                        "{what}, for {} of the {} needed to lock",
                        secs(good_for),
                        secs(lock_ns)
                    );
                    if in_holdover(self.last_locked) {
                        (ClockState::Holdover, format!("re-acquiring: {why}"))
                    } else {
                        self.last_locked = None;
                        (ClockState::Unlocked, why)
                    }
                }
            }
            Verdict::Bad(why) => {
                self.good_since = None;
                self.last_locked = None;
                (ClockState::Unlocked, why)
            }
            Verdict::Lost(why) => {
                self.good_since = None;
                self.lost_or_nothing(now_ns, holdover_ns, why, ClockState::Unlocked)
            }
            Verdict::Nothing => {
                self.good_since = None;
                let why = "no PTP information: ptp4l not answering and no PHC offset".to_string();
                self.lost_or_nothing(now_ns, holdover_ns, why, ClockState::FreeRunning)
            }
        };
        if state != self.quality.state {
            self.quality.since_ns = now_ns;
            self.quality.state = state;
        }
        self.quality.reason = reason;
        &self.quality
    }

    /// Holdover while the last lock is recent enough, else `otherwise`.
    fn lost_or_nothing(
        &mut self,
        now_ns: u64,
        holdover_ns: u64,
        why: String,
        otherwise: ClockState,
    ) -> (ClockState, String) {
        match self.last_locked {
            Some(t) if now_ns.saturating_sub(t) <= holdover_ns => (
                ClockState::Holdover,
                format!(
                    "{why}; last locked {} ago, holdover ends after {}",
                    secs(now_ns.saturating_sub(t)),
                    secs(holdover_ns)
                ),
            ),
            Some(_) => {
                self.last_locked = None;
                (
                    otherwise,
                    format!("{why}; holdover of {} expired", secs(holdover_ns)),
                )
            }
            None => (otherwise, why),
        }
    }

    fn verdict(&self, input: &SyncInput) -> Verdict {
        if let Some(fault) = &input.fault {
            return Verdict::Bad(fault.clone());
        }
        let threshold = self.config.lock_threshold_ns;
        let mut good = Vec::new();
        if let Some(p) = &input.ptp4l {
            if !p.gm_present {
                return Verdict::Lost(format!(
                    "ptp4l port {}, no grandmaster present",
                    p.port_state
                ));
            }
            if p.port_state != PortState::Slave {
                return Verdict::Lost(format!(
                    "ptp4l port {} (not SLAVE: the servo is not locked to the grandmaster)",
                    p.port_state
                ));
            }
            if p.master_offset_ns.unsigned_abs() >= threshold {
                return Verdict::Bad(format!(
                    "ptp4l master offset {} ns beyond the {threshold} ns threshold",
                    p.master_offset_ns
                ));
            }
            good.push(format!(
                "ptp4l SLAVE, master offset {} ns",
                p.master_offset_ns
            ));
        }
        if let Some(offset) = input.phc_offset_ns {
            if offset.unsigned_abs() >= threshold {
                return Verdict::Bad(format!(
                    "system clock {offset} ns off the PHC (beyond whole seconds), beyond the \
                     {threshold} ns threshold: phc2sys is not running or not locked"
                ));
            }
            good.push(format!("system clock {offset} ns off the PHC"));
        }
        if good.is_empty() {
            Verdict::Nothing
        } else {
            Verdict::Good(good.join(", "))
        }
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// ns as seconds for reasons: `9.5 s`.
fn secs(ns: u64) -> String {
    format!("{:.1} s", ns as f64 / 1e9)
}

/// Count, min, max, mean and RMS of offsets, per recording segment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OffsetStats {
    count: u64,
    min_ns: i64,
    max_ns: i64,
    sum: f64,
    sum_sq: f64,
}

impl OffsetStats {
    /// Empty.
    pub fn new() -> OffsetStats {
        OffsetStats::default()
    }

    /// Adds one offset.
    pub fn push(&mut self, offset_ns: i64) {
        if self.count == 0 {
            self.min_ns = offset_ns;
            self.max_ns = offset_ns;
        } else {
            self.min_ns = self.min_ns.min(offset_ns);
            self.max_ns = self.max_ns.max(offset_ns);
        }
        let x = offset_ns as f64;
        self.count += 1;
        self.sum += x;
        self.sum_sq += x * x;
    }

    /// How many offsets were added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The smallest (most negative), if any.
    pub fn min_ns(&self) -> Option<i64> {
        (self.count > 0).then_some(self.min_ns)
    }

    /// The largest, if any.
    pub fn max_ns(&self) -> Option<i64> {
        (self.count > 0).then_some(self.max_ns)
    }

    /// The mean, if any.
    pub fn mean_ns(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }

    /// The root mean square (the offset's typical magnitude, bias
    /// included), if any.
    pub fn rms_ns(&self) -> Option<f64> {
        (self.count > 0).then(|| (self.sum_sq / self.count as f64).sqrt())
    }

    /// Returns the statistics so far and starts over (at a segment split).
    pub fn take(&mut self) -> OffsetStats {
        std::mem::take(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn slave(offset: i64) -> SyncInput {
        SyncInput {
            ptp4l: Some(Ptp4lSync {
                port_state: PortState::Slave,
                gm_present: true,
                master_offset_ns: offset,
            }),
            ..SyncInput::default()
        }
    }

    fn no_gm() -> SyncInput {
        SyncInput {
            ptp4l: Some(Ptp4lSync {
                port_state: PortState::Listening,
                gm_present: false,
                master_offset_ns: 0,
            }),
            ..SyncInput::default()
        }
    }

    /// Feeds `input` every second from `from` to `to` (inclusive) and
    /// returns the states seen.
    fn run(m: &mut QualityMachine, from: u64, to: u64, input: &SyncInput) -> Vec<ClockState> {
        (from..=to).map(|t| m.update(t * S, input).state).collect()
    }

    #[test]
    fn locks_after_lock_time_of_good_offsets() {
        let mut m = QualityMachine::new(QualityConfig::default(), 0);
        assert_eq!(m.quality().state, ClockState::FreeRunning);
        let states = run(&mut m, 1, 10, &slave(300));
        assert!(
            states.iter().all(|s| *s == ClockState::Unlocked),
            "{states:?}"
        );
        assert!(
            m.quality().reason.contains("9.0 s of the 10.0 s needed"),
            "{}",
            m.quality().reason
        );
        assert_eq!(m.update(11 * S, &slave(-250)).state, ClockState::Locked);
        assert_eq!(m.quality().since_ns, 11 * S);
        assert!(m.quality().reason.contains("master offset -250 ns"));
        m.update(12 * S, &slave(10));
        assert_eq!(
            m.quality().since_ns,
            11 * S,
            "since stays while the state does"
        );
    }

    #[test]
    fn holdover_on_grandmaster_loss_then_unlocked_after_holdover_max() {
        let mut m = QualityMachine::new(QualityConfig::default(), 0);
        run(&mut m, 0, 20, &slave(100));
        assert_eq!(m.quality().state, ClockState::Locked);
        // The grandmaster goes away at 21 s: holdover until 20 s + 60 s.
        let states = run(&mut m, 21, 80, &no_gm());
        assert!(
            states.iter().all(|s| *s == ClockState::Holdover),
            "{states:?}"
        );
        assert_eq!(m.quality().since_ns, 21 * S);
        assert!(
            m.quality().reason.contains("no grandmaster present"),
            "{}",
            m.quality().reason
        );
        assert_eq!(m.update(81 * S, &no_gm()).state, ClockState::Unlocked);
        assert!(m.quality().reason.contains("holdover of 60.0 s expired"));
        // Back: unlocked until lock_time has passed again.
        run(&mut m, 82, 91, &slave(5));
        assert_eq!(m.quality().state, ClockState::Unlocked);
        assert_eq!(m.update(92 * S, &slave(5)).state, ClockState::Locked);
    }

    #[test]
    fn a_short_loss_reacquires_through_holdover() {
        let mut m = QualityMachine::new(QualityConfig::default(), 0);
        run(&mut m, 0, 20, &slave(100));
        run(&mut m, 21, 25, &no_gm());
        assert_eq!(m.quality().state, ClockState::Holdover);
        // Sync returns: still holdover (inside the window) while re-locking.
        let states = run(&mut m, 26, 35, &slave(100));
        assert!(
            states.iter().all(|s| *s == ClockState::Holdover),
            "{states:?}"
        );
        assert!(m.quality().reason.starts_with("re-acquiring"));
        assert_eq!(m.update(36 * S, &slave(100)).state, ClockState::Locked);
    }

    #[test]
    fn an_offset_spike_breaks_the_lock_at_once() {
        let mut m = QualityMachine::new(QualityConfig::default(), 0);
        run(&mut m, 0, 15, &slave(-400));
        assert_eq!(m.quality().state, ClockState::Locked);
        assert_eq!(m.update(16 * S, &slave(25_000)).state, ClockState::Unlocked);
        assert!(m
            .quality()
            .reason
            .contains("25000 ns beyond the 1000 ns threshold"));
        // And no holdover after a spike: the clock was wrong, not coasting.
        assert_eq!(m.update(17 * S, &no_gm()).state, ClockState::Unlocked);
        run(&mut m, 18, 27, &slave(0));
        assert_eq!(m.quality().state, ClockState::Unlocked);
        assert_eq!(m.update(28 * S, &slave(0)).state, ClockState::Locked);
    }

    #[test]
    fn uncalibrated_is_unlocked_and_nothing_is_free_running() {
        let mut m = QualityMachine::new(QualityConfig::default(), 0);
        let uncal = SyncInput {
            ptp4l: Some(Ptp4lSync {
                port_state: PortState::Uncalibrated,
                gm_present: true,
                master_offset_ns: 12,
            }),
            ..SyncInput::default()
        };
        assert_eq!(m.update(S, &uncal).state, ClockState::Unlocked);
        assert!(m.quality().reason.contains("UNCALIBRATED"));
        assert_eq!(
            m.update(2 * S, &SyncInput::default()).state,
            ClockState::FreeRunning
        );
        // Locked, then ptp4l stops answering: holdover, then free running.
        run(&mut m, 3, 14, &slave(0));
        assert_eq!(m.quality().state, ClockState::Locked);
        assert_eq!(
            m.update(15 * S, &SyncInput::default()).state,
            ClockState::Holdover
        );
        assert_eq!(
            m.update(75 * S, &SyncInput::default()).state,
            ClockState::FreeRunning
        );
    }

    #[test]
    fn phc_offset_alone_and_together_with_ptp4l() {
        let cfg = QualityConfig {
            lock_threshold_ns: 500,
            lock_time: Duration::from_secs(2),
            holdover_max: Duration::from_secs(5),
        };
        let mut m = QualityMachine::new(cfg, 0);
        let phc = |ns| SyncInput {
            phc_offset_ns: Some(ns),
            ..SyncInput::default()
        };
        run(&mut m, 0, 2, &phc(-100));
        assert_eq!(
            m.quality().state,
            ClockState::Locked,
            "{}",
            m.quality().reason
        );
        assert_eq!(m.update(3 * S, &phc(900)).state, ClockState::Unlocked);
        assert!(m.quality().reason.contains("phc2sys"));
        let both = |ptp, sys| SyncInput {
            phc_offset_ns: Some(sys),
            ..slave(ptp)
        };
        run(&mut m, 4, 6, &both(10, 20));
        assert_eq!(m.quality().state, ClockState::Locked);
        assert!(m
            .quality()
            .reason
            .contains("master offset 10 ns, system clock 20 ns off the PHC"));
        assert_eq!(
            m.update(7 * S, &both(10, 2_000)).state,
            ClockState::Unlocked
        );
        let fault = SyncInput {
            fault: Some("PHC /dev/ptp0 unreadable".into()),
            ..slave(0)
        };
        run(&mut m, 8, 11, &slave(0));
        assert_eq!(m.update(12 * S, &fault).state, ClockState::Unlocked);
        assert_eq!(m.quality().reason, "PHC /dev/ptp0 unreadable");
    }

    #[test]
    fn residual_to_whole_seconds() {
        assert_eq!(phc2sys_residual_ns(37_000_000_120), 120);
        assert_eq!(phc2sys_residual_ns(36_999_999_900), -100);
        assert_eq!(phc2sys_residual_ns(-250), -250);
        assert_eq!(phc2sys_residual_ns(-37_000_000_250), -250);
        assert_eq!(phc2sys_residual_ns(400_000_000), 400_000_000);
        assert_eq!(phc2sys_residual_ns(600_000_000), -400_000_000);
    }

    #[test]
    fn states_order_by_severity() {
        assert!(ClockState::Locked < ClockState::Holdover);
        assert!(ClockState::Holdover < ClockState::Unlocked);
        assert!(ClockState::Unlocked < ClockState::FreeRunning);
        assert_eq!(
            ClockState::Locked.max(ClockState::Unlocked),
            ClockState::Unlocked
        );
        assert!(!ClockState::Holdover.flags_data());
        assert!(ClockState::FreeRunning.flags_data());
    }

    #[test]
    fn offset_stats_accumulate_and_reset() {
        let mut s = OffsetStats::new();
        assert_eq!(
            (s.count(), s.min_ns(), s.mean_ns(), s.rms_ns()),
            (0, None, None, None)
        );
        for x in [3, -4, 5, -12] {
            s.push(x);
        }
        assert_eq!(s.count(), 4);
        assert_eq!(s.min_ns(), Some(-12));
        assert_eq!(s.max_ns(), Some(5));
        assert_eq!(s.mean_ns(), Some(-2.0));
        // sqrt((9 + 16 + 25 + 144) / 4) = sqrt(48.5)
        assert!((s.rms_ns().unwrap() - 48.5f64.sqrt()).abs() < 1e-9);
        let taken = s.take();
        assert_eq!(taken.count(), 4);
        assert_eq!(s.count(), 0);
        assert_eq!(s.max_ns(), None);
        s.push(-7);
        assert_eq!((s.min_ns(), s.max_ns()), (Some(-7), Some(-7)));
    }
}
