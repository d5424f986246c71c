//! When a health condition begins: the control loop's reasons, read once
//! a tick, turned into the named conditions a `[[trigger]] health = [...]`
//! rule fires on (`clock-unlocked`, `drops`, `disk-low`,
//! `source-restarting`), and the ones that were not there the tick
//! before. The names are the configuration's
//! (`edgerec_config::HEALTH_CONDITIONS`); the reasons' wording is
//! [`crate::state::evaluate`]'s.

use std::collections::BTreeMap;

/// The condition a reason of [`crate::state::evaluate`] is an instance
/// of, when it is one a trigger can fire on.
pub fn condition_of(reason: &str) -> Option<&'static str> {
    if reason == "clock unlocked" {
        Some("clock-unlocked")
    } else if reason.starts_with("drops rising on ") {
        Some("drops")
    } else if reason == "disk low" {
        Some("disk-low")
    } else if reason.starts_with("source ") && reason.ends_with(" restarting") {
        Some("source-restarting")
    } else {
        None
    }
}

/// Tells which conditions began since the last tick.
#[derive(Debug, Default)]
pub struct ConditionEdges {
    active: BTreeMap<&'static str, String>,
}

impl ConditionEdges {
    /// Feeds one tick's reasons; returns each condition that began, with
    /// the reason that shows it (the first, when several do).
    pub fn update(&mut self, reasons: &[String]) -> Vec<(&'static str, String)> {
        let mut now: BTreeMap<&'static str, String> = BTreeMap::new();
        for r in reasons {
            if let Some(c) = condition_of(r) {
                now.entry(c).or_insert_with(|| r.clone());
            }
        }
        let began = now
            .iter()
            .filter(|(c, _)| !self.active.contains_key(*c))
            .map(|(c, r)| (*c, r.clone()))
            .collect();
        self.active = now;
        began
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{evaluate, HealthInputs};

    #[test]
    fn every_condition_is_read_from_evaluates_wording() {
        let inputs = HealthInputs {
            recording: true,
            clock_unlocked: true,
            drops_rising: vec!["/camera".into()],
            disk_low: true,
            sources_restarting: vec!["synthetic /imu".into()],
            ..HealthInputs::default()
        };
        let (_, reasons) = evaluate(&inputs);
        let found: Vec<_> = reasons.iter().filter_map(|r| condition_of(r)).collect();
        assert_eq!(
            found,
            ["clock-unlocked", "drops", "disk-low", "source-restarting"]
        );
    }

    #[test]
    fn a_condition_fires_when_it_begins_not_while_it_lasts() {
        let mut e = ConditionEdges::default();
        assert!(e.update(&[]).is_empty());
        let unlocked = vec!["clock unlocked".to_owned()];
        assert_eq!(
            e.update(&unlocked),
            [("clock-unlocked", "clock unlocked".to_owned())]
        );
        assert!(e.update(&unlocked).is_empty());
        let both = vec!["clock unlocked".to_owned(), "drops rising on /a".to_owned()];
        assert_eq!(
            e.update(&both),
            [("drops", "drops rising on /a".to_owned())]
        );
        assert!(e.update(&[]).is_empty());
        assert_eq!(
            e.update(&unlocked).len(),
            1,
            "it begins again after it ended"
        );
        assert!(e.update(&["stage storage stalled".to_owned()]).is_empty());
    }
}
