//! `[[trigger]] health = [...]`: each tick's health reasons, and an event
//! under the rule's name when one of its conditions begins.

use edgerec_config::Config;
use edgerec_health::edges::ConditionEdges;
use edgerec_recorder::StatusHandle;

/// The rules that fire on health conditions, and what was active.
pub struct HealthTriggers {
    rules: Vec<(String, Vec<String>)>,
    edges: ConditionEdges,
}

impl HealthTriggers {
    /// The `health` rules of `cfg` (none in `continuous` mode).
    pub fn new(cfg: &Config) -> Self {
        HealthTriggers {
            rules: cfg
                .trigger
                .iter()
                .filter(|r| !r.health.is_empty())
                .map(|r| (r.name.clone(), r.health.clone()))
                .collect(),
            edges: ConditionEdges::default(),
        }
    }

    /// Feeds one tick's reasons; fires the rules whose conditions began.
    pub fn observe(&mut self, reasons: &[String], handle: &StatusHandle) {
        if self.rules.is_empty() {
            return;
        }
        for (condition, reason) in self.edges.update(reasons) {
            for (name, conditions) in &self.rules {
                if conditions.iter().any(|c| c == condition) {
                    handle.trigger(name, &format!("health: {reason}"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use edgerec_health::edges::condition_of;
    use edgerec_health::state::{evaluate, HealthInputs};

    /// Every condition the configuration accepts is one the health side
    /// reports, so no rule waits for a name that never comes.
    #[test]
    fn every_configurable_condition_is_reported() {
        let inputs = HealthInputs {
            recording: true,
            clock_unlocked: true,
            drops_rising: vec!["/a".into()],
            disk_low: true,
            sources_restarting: vec!["s".into()],
            ..HealthInputs::default()
        };
        let (_, reasons) = evaluate(&inputs);
        let reported: Vec<&str> = reasons.iter().filter_map(|r| condition_of(r)).collect();
        for c in edgerec_config::HEALTH_CONDITIONS {
            assert!(reported.contains(&c), "{c} is never reported");
        }
    }
}
