//! What the configuration asks of the events stage: the mode, which
//! channels go where, the windows and the rules.

use std::collections::BTreeSet;
use std::path::PathBuf;

use edgerec_config::{Config, Located, RecordingMode};

/// Where the recorder's own topics live: they are recorded all the time
/// in every mode (status, clock quality, `/edgerec/events`).
pub const OWN_PREFIX: &str = "/edgerec/";

/// The topic every event is published on, in the continuous bag.
pub const EVENTS_TOPIC: &str = "/edgerec/events";

/// One `[[trigger]]` rule, with the `[triggers]` defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct RulePlan {
    /// Its name.
    pub name: String,
    /// The topic its condition reads; empty for a rule that fires on
    /// something else (a period, a GPIO line, health conditions, which
    /// come in through [`crate::StatusHandle::trigger`] under its name).
    pub topic: String,
    /// A periodic sample: fire every this long, ns.
    pub every_ns: Option<u64>,
    /// The condition; empty = every message fires.
    pub when: Located,
    /// How long the condition must hold, ns.
    pub hold_for_ns: u64,
    /// Pre-roll, ns.
    pub pre_ns: u64,
    /// Post-trigger window, ns.
    pub post_ns: u64,
    /// Cooldown after an event ends, ns.
    pub cooldown_ns: u64,
    /// What its clips record; empty = every clip channel.
    pub topics: Vec<String>,
}

/// The events stage's whole plan.
#[derive(Debug, Clone, PartialEq)]
pub struct TriggerPlan {
    /// `triggered` or `mixed` (a `continuous` recording has no plan).
    pub mode: RecordingMode,
    /// `mixed`: the topics recorded all the time.
    pub continuous: BTreeSet<String>,
    /// Where clips go: `<recording.root>/events`.
    pub events_root: PathBuf,
    /// `triggers.pre`, ns (the window of `ctl trigger`).
    pub pre_ns: u64,
    /// `triggers.post`, ns.
    pub post_ns: u64,
    /// `triggers.memory_budget`, bytes.
    pub memory_budget: u64,
    /// `triggers.disk_budget`: bytes the clips may take on disk together.
    pub disk_budget: u64,
    /// The rules.
    pub rules: Vec<RulePlan>,
}

fn ns(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl TriggerPlan {
    /// The plan of `cfg`; `None` in `continuous` mode.
    pub fn from_config(cfg: &Config) -> Option<TriggerPlan> {
        if cfg.recording.mode == RecordingMode::Continuous {
            return None;
        }
        let t = &cfg.triggers;
        Some(TriggerPlan {
            mode: cfg.recording.mode,
            continuous: cfg.recording.continuous_topics.iter().cloned().collect(),
            events_root: cfg.recording.root.join("events"),
            pre_ns: ns(t.pre),
            post_ns: ns(t.post),
            memory_budget: t.memory_budget,
            disk_budget: t.disk_budget,
            rules: cfg
                .trigger
                .iter()
                .map(|r| RulePlan {
                    name: r.name.clone(),
                    topic: r.topic.clone(),
                    every_ns: r.every.map(ns),
                    when: r.when.clone(),
                    hold_for_ns: ns(r.hold_for),
                    pre_ns: ns(r.pre_or(t)),
                    post_ns: ns(r.post_or(t)),
                    cooldown_ns: ns(r.cooldown_or(t)),
                    topics: r.topics.clone(),
                })
                .collect(),
        })
    }

    /// Whether `topic` goes to the continuous segments.
    pub fn is_continuous(&self, topic: &str) -> bool {
        topic.starts_with(OWN_PREFIX)
            || (self.mode == RecordingMode::Mixed && self.continuous.contains(topic))
    }

    /// Whether `topic` is kept in the pre-roll ring: every clip channel,
    /// and a continuous one (`mixed`) that a rule's `topics` names, so
    /// that its clips hold it too (`/tf` around the camera). A continuous
    /// topic no rule names stays out: copying a 100 MB/s continuous stream
    /// into the ring would cost memory and CPU for clips that do not want
    /// it.
    pub fn is_in_ring(&self, topic: &str) -> bool {
        if topic.starts_with(OWN_PREFIX) {
            return false;
        }
        !self.is_continuous(topic)
            || self
                .rules
                .iter()
                .any(|r| r.topics.iter().any(|t| t == topic))
    }

    /// Whether a rule reads `topic`.
    pub fn is_rule_topic(&self, topic: &str) -> bool {
        !topic.is_empty() && self.rules.iter().any(|r| r.topic == topic)
    }

    /// The rule called `name`.
    pub fn rule(&self, name: &str) -> Option<&RulePlan> {
        self.rules.iter().find(|r| r.name == name)
    }

    /// The longest pre-roll any clip can ask for: what the ring keeps.
    pub fn longest_pre_ns(&self) -> u64 {
        self.rules
            .iter()
            .map(|r| r.pre_ns)
            .chain(std::iter::once(self.pre_ns))
            .max()
            .unwrap_or(0)
    }
}
