//! The recorder's health as one word and its reasons: a pure function of
//! what the other parts report, with one fixed precedence (booting first,
//! then fault > disk-full > paused > degraded > recording > idle), so the
//! status snapshot, `systemctl status` and the LEDs always agree on what
//! to show.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The one-word health shown on the LEDs and in the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HealthState {
    /// Starting up: recovering old segments, opening sources.
    Booting,
    /// Running, not recording.
    Idle,
    /// Recording, nothing wrong.
    Recording,
    /// Recording or idle with a problem that loses or taints data but does
    /// not stop the recorder (clock unlocked, drops, disk low, a source
    /// restarting).
    Degraded,
    /// Storage failed or a stage stalled: needs attention now.
    Fault,
    /// The disk is full and recording is paused.
    DiskFull,
    /// An operator paused the recording (`edgerec ctl pause`, a ROS 2
    /// `pause` service): sources run, nothing is written.
    Paused,
}

impl HealthState {
    /// Every state, in declaration order.
    pub const ALL: [HealthState; 7] = [
        HealthState::Booting,
        HealthState::Idle,
        HealthState::Recording,
        HealthState::Degraded,
        HealthState::Fault,
        HealthState::DiskFull,
        HealthState::Paused,
    ];

    /// The state's name as written in the configuration and the status:
    /// `booting`, `idle`, `recording`, `degraded`, `fault`, `disk-full`,
    /// `paused`.
    pub fn name(self) -> &'static str {
        match self {
            HealthState::Booting => "booting",
            HealthState::Idle => "idle",
            HealthState::Recording => "recording",
            HealthState::Degraded => "degraded",
            HealthState::Fault => "fault",
            HealthState::DiskFull => "disk-full",
            HealthState::Paused => "paused",
        }
    }
}

impl fmt::Display for HealthState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a [`HealthState`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown health state `{0}` (health states: booting, idle, recording, degraded, fault, disk-full, paused)")]
pub struct UnknownHealthState(pub String);

impl FromStr for HealthState {
    type Err = UnknownHealthState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HealthState::ALL
            .into_iter()
            .find(|state| state.name() == s)
            .ok_or_else(|| UnknownHealthState(s.to_owned()))
    }
}

/// What the other parts of the recorder report, gathered once per
/// evaluation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HealthInputs {
    /// Still starting up.
    pub booting: bool,
    /// A session is being recorded.
    pub recording: bool,
    /// Storage failed; the text says how.
    pub storage_fault: Option<String>,
    /// The disk is full and recording is paused.
    pub disk_full: bool,
    /// Who paused the recording, while an operator has it paused.
    pub paused_by: Option<String>,
    /// The recording clock is not locked (see `edgerec-clock`).
    pub clock_unlocked: bool,
    /// Topics whose drop counters rose within the drops window (see
    /// [`DropTrend`]).
    pub drops_rising: Vec<String>,
    /// Free space is below the configured threshold.
    pub disk_low: bool,
    /// Sources being restarted after a failure.
    pub sources_restarting: Vec<String>,
    /// Sources that failed for good (an error no restart cures), with
    /// the error.
    pub sources_failed: Vec<(String, String)>,
    /// Stages past their heartbeat deadline.
    pub stalled: Vec<String>,
    /// The fleet link has been down longer than its keepalive; the text
    /// says for how long and why. Degraded, never a fault: the recording
    /// does not depend on it.
    pub link_down: Option<String>,
}

/// The state to show for `inputs`, and every problem found, most severe
/// first, as short sentences ("clock unlocked", "drops rising on
/// /camera/raw"). Booting wins over everything (problems are still
/// listed); then fault, disk-full, degraded, recording, idle. The reasons
/// are empty when nothing is wrong.
pub fn evaluate(inputs: &HealthInputs) -> (HealthState, Vec<String>) {
    let mut reasons = Vec::new();
    let mut fault = false;
    if let Some(why) = &inputs.storage_fault {
        reasons.push(format!("storage failed: {why}"));
        fault = true;
    }
    for stage in &inputs.stalled {
        reasons.push(format!("stage {stage} stalled"));
        fault = true;
    }
    if inputs.disk_full {
        reasons.push("disk full".to_owned());
    }
    if let Some(who) = &inputs.paused_by {
        reasons.push(format!("paused by {who}"));
    }
    let before_degraded = reasons.len();
    if inputs.clock_unlocked {
        reasons.push("clock unlocked".to_owned());
    }
    for topic in &inputs.drops_rising {
        reasons.push(format!("drops rising on {topic}"));
    }
    if inputs.disk_low && !inputs.disk_full {
        reasons.push("disk low".to_owned());
    }
    for source in &inputs.sources_restarting {
        reasons.push(format!("source {source} restarting"));
    }
    for (source, error) in &inputs.sources_failed {
        reasons.push(format!("source {source} failed: {error}"));
    }
    if let Some(why) = &inputs.link_down {
        reasons.push(why.clone());
    }
    let degraded = reasons.len() > before_degraded;
    let state = if inputs.booting {
        HealthState::Booting
    } else if fault {
        HealthState::Fault
    } else if inputs.disk_full {
        HealthState::DiskFull
    } else if inputs.paused_by.is_some() && inputs.recording {
        HealthState::Paused
    } else if degraded {
        HealthState::Degraded
    } else if inputs.recording {
        HealthState::Recording
    } else {
        HealthState::Idle
    };
    (state, reasons)
}

/// Tells whether a drop counter is rising: fed the counter's total about
/// once a second, it answers whether the total increased within the last
/// `window` (default 10 s). A counter that goes down (a restarted source)
/// is taken as a new baseline, not as drops.
#[derive(Debug, Clone)]
pub struct DropTrend {
    window: Duration,
    last_total: Option<u64>,
    last_increase: Option<Instant>,
}

impl Default for DropTrend {
    fn default() -> Self {
        DropTrend::new(Duration::from_secs(10))
    }
}

impl DropTrend {
    /// A trend that counts increases within the last `window`.
    pub fn new(window: Duration) -> DropTrend {
        DropTrend {
            window,
            last_total: None,
            last_increase: None,
        }
    }

    /// Takes the counter's `total` at `now` and says whether drops are
    /// rising. The first sample is the baseline: drops before the first
    /// sample do not count.
    pub fn sample(&mut self, now: Instant, total: u64) -> bool {
        if let Some(last) = self.last_total {
            if total > last {
                self.last_increase = Some(now);
            }
        }
        self.last_total = Some(total);
        self.is_rising(now)
    }

    /// Whether the counter increased within the window before `now`.
    pub fn is_rising(&self, now: Instant) -> bool {
        self.last_increase
            .is_some_and(|at| now.saturating_duration_since(at) <= self.window)
    }

    /// The window.
    pub fn window(&self) -> Duration {
        self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for state in HealthState::ALL {
            assert_eq!(state.to_string().parse::<HealthState>(), Ok(state));
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{state}\""));
        }
        assert_eq!(HealthState::DiskFull.to_string(), "disk-full");
        assert!("diskfull".parse::<HealthState>().is_err());
    }

    #[test]
    fn idle_and_recording() {
        assert_eq!(
            evaluate(&HealthInputs::default()),
            (HealthState::Idle, vec![])
        );
        let inputs = HealthInputs {
            recording: true,
            ..HealthInputs::default()
        };
        assert_eq!(evaluate(&inputs), (HealthState::Recording, vec![]));
    }

    #[test]
    fn a_fleet_link_down_degrades_and_never_faults() {
        let inputs = HealthInputs {
            recording: true,
            link_down: Some("fleet link down for 40 s: I/O: connection refused".to_owned()),
            ..HealthInputs::default()
        };
        assert_eq!(
            evaluate(&inputs),
            (
                HealthState::Degraded,
                vec!["fleet link down for 40 s: I/O: connection refused".to_owned()]
            )
        );
    }

    #[test]
    fn precedence() {
        let mut inputs = HealthInputs {
            recording: true,
            clock_unlocked: true,
            drops_rising: vec!["/camera/raw".to_owned()],
            ..HealthInputs::default()
        };
        let (state, reasons) = evaluate(&inputs);
        assert_eq!(state, HealthState::Degraded);
        assert_eq!(reasons, ["clock unlocked", "drops rising on /camera/raw"]);

        inputs.disk_full = true;
        inputs.disk_low = true;
        let (state, reasons) = evaluate(&inputs);
        assert_eq!(state, HealthState::DiskFull);
        assert_eq!(reasons[0], "disk full");
        assert!(!reasons.iter().any(|r| r == "disk low"));

        inputs.stalled = vec!["storage".to_owned()];
        let (state, reasons) = evaluate(&inputs);
        assert_eq!(state, HealthState::Fault);
        assert_eq!(reasons[0], "stage storage stalled");

        inputs.booting = true;
        assert_eq!(evaluate(&inputs).0, HealthState::Booting);
    }

    #[test]
    fn an_operators_pause_shows_above_degraded_and_below_disk_full() {
        let mut inputs = HealthInputs {
            recording: true,
            clock_unlocked: true,
            paused_by: Some("uid 1000 (alice, pid 42)".to_owned()),
            ..HealthInputs::default()
        };
        let (state, reasons) = evaluate(&inputs);
        assert_eq!(state, HealthState::Paused);
        assert_eq!(
            reasons,
            ["paused by uid 1000 (alice, pid 42)", "clock unlocked"]
        );
        inputs.disk_full = true;
        assert_eq!(evaluate(&inputs).0, HealthState::DiskFull);
        // Nothing recorded, nothing to pause.
        let idle = HealthInputs {
            paused_by: Some("uid 0".to_owned()),
            ..HealthInputs::default()
        };
        assert_eq!(evaluate(&idle).0, HealthState::Idle);
    }

    #[test]
    fn storage_fault_and_restarts() {
        let inputs = HealthInputs {
            storage_fault: Some("EIO on /data".to_owned()),
            sources_restarting: vec!["lidar".to_owned()],
            ..HealthInputs::default()
        };
        let (state, reasons) = evaluate(&inputs);
        assert_eq!(state, HealthState::Fault);
        assert_eq!(
            reasons,
            ["storage failed: EIO on /data", "source lidar restarting"]
        );
        let failed = HealthInputs {
            recording: true,
            sources_failed: vec![("can0".to_owned(), "no such device".to_owned())],
            ..HealthInputs::default()
        };
        assert_eq!(
            evaluate(&failed),
            (
                HealthState::Degraded,
                vec!["source can0 failed: no such device".to_owned()]
            )
        );
    }

    #[test]
    fn drop_trend() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut trend = DropTrend::default();
        assert!(!trend.sample(t0, 5), "the first sample is the baseline");
        assert!(!trend.sample(t0 + s(1), 5));
        assert!(trend.sample(t0 + s(2), 6));
        assert!(trend.sample(t0 + s(12), 6), "still within 10 s");
        assert!(!trend.sample(t0 + s(13), 6));
        assert!(!trend.sample(t0 + s(14), 0), "a reset is a new baseline");
        assert!(trend.sample(t0 + s(15), 1));
    }
}
