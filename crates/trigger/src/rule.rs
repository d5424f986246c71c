//! When a rule fires and clears, from the truth of its condition message by
//! message: it fires once the condition has held continuously for
//! `hold_for`, stays fired until the first message where it does not
//! hold, and after that clear does not fire again within `cooldown`.
//!
//! Times are the messages' own (ns); the state never reads a clock, so
//! replaying a bag gives the events recording gave. A time earlier than
//! the one before it is tolerated: it counts as no time passed (nothing
//! underflows, nothing fires early).

/// An edge of a rule's event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// The condition has held from `since_ns` through `at_ns`, at least
    /// `hold_for`: the event starts.
    Fired {
        /// The message time at which it fired.
        at_ns: u64,
        /// The time of the first message of the run of true ones.
        since_ns: u64,
    },
    /// The first message after a fire where the condition does not hold:
    /// the event ends.
    Cleared {
        /// That message's time.
        at_ns: u64,
    },
}

/// Where a rule stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not fired. `since_ns`: start of the current run of true messages.
    /// `quiet_until_ns`: end of the cooldown after the last clear.
    Armed {
        since_ns: Option<u64>,
        quiet_until_ns: u64,
    },
    /// Fired and not yet cleared.
    Fired,
}

/// The hold and cooldown state of one rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleState {
    hold_for_ns: u64,
    cooldown_ns: u64,
    phase: Phase,
}

impl RuleState {
    /// A rule that fires after its condition holds for `hold_for_ns` (0: on
    /// the first true message) and rests `cooldown_ns` after each clear.
    pub fn new(hold_for_ns: u64, cooldown_ns: u64) -> Self {
        RuleState {
            hold_for_ns,
            cooldown_ns,
            phase: Phase::Armed {
                since_ns: None,
                quiet_until_ns: 0,
            },
        }
    }

    /// Whether the rule has fired and not yet cleared.
    pub fn is_fired(&self) -> bool {
        self.phase == Phase::Fired
    }

    /// Feeds the condition's truth for the message at `t_ns`.
    ///
    /// A run of true messages that starts during the cooldown counts from
    /// its first message, but the rule fires no earlier than the first
    /// message at or after the cooldown's end.
    pub fn update(&mut self, t_ns: u64, holds: bool) -> Option<Transition> {
        match (self.phase, holds) {
            (Phase::Fired, true) => None,
            (Phase::Fired, false) => {
                self.phase = Phase::Armed {
                    since_ns: None,
                    quiet_until_ns: t_ns.saturating_add(self.cooldown_ns),
                };
                Some(Transition::Cleared { at_ns: t_ns })
            }
            (Phase::Armed { quiet_until_ns, .. }, false) => {
                self.phase = Phase::Armed {
                    since_ns: None,
                    quiet_until_ns,
                };
                None
            }
            (
                Phase::Armed {
                    since_ns,
                    quiet_until_ns,
                },
                true,
            ) => {
                let since_ns = since_ns.unwrap_or(t_ns);
                let held = t_ns.saturating_sub(since_ns);
                if held >= self.hold_for_ns && t_ns >= quiet_until_ns {
                    self.phase = Phase::Fired;
                    Some(Transition::Fired {
                        at_ns: t_ns,
                        since_ns,
                    })
                } else {
                    self.phase = Phase::Armed {
                        since_ns: Some(since_ns),
                        quiet_until_ns,
                    };
                    None
                }
            }
        }
    }

    /// A message whose truth is unknown (a malformed payload the caller
    /// counts): it neither continues nor breaks a run of true messages and
    /// neither fires nor clears, so one garbled message in a long true run
    /// does not restart the hold, and one in a fired event does not end it.
    pub fn update_unknown(&mut self) -> Option<Transition> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn fired(at_ns: u64, since_ns: u64) -> Option<Transition> {
        Some(Transition::Fired { at_ns, since_ns })
    }

    fn cleared(at_ns: u64) -> Option<Transition> {
        Some(Transition::Cleared { at_ns })
    }

    #[test]
    fn zero_hold_fires_on_the_first_true_and_clears_on_the_first_false() {
        let mut r = RuleState::new(0, 0);
        assert_eq!(r.update(10, false), None);
        assert_eq!(r.update(20, true), fired(20, 20));
        assert!(r.is_fired());
        assert_eq!(r.update(30, true), None, "no second fire while fired");
        assert_eq!(r.update(40, false), cleared(40));
        assert_eq!(r.update(50, false), None);
        assert_eq!(r.update(60, true), fired(60, 60), "no cooldown");
    }

    #[test]
    fn fires_exactly_at_the_hold_boundary() {
        let mut r = RuleState::new(100 * MS, 0);
        assert_eq!(r.update(1_000 * MS, true), None);
        assert_eq!(r.update(1_050 * MS, true), None);
        assert_eq!(r.update(1_100 * MS - 1, true), None);
        assert_eq!(r.update(1_100 * MS, true), fired(1_100 * MS, 1_000 * MS));

        let mut r = RuleState::new(100 * MS, 0);
        r.update(0, true);
        // A sparse topic: the first message past the boundary fires.
        assert_eq!(r.update(250 * MS, true), fired(250 * MS, 0));
    }

    #[test]
    fn a_false_message_restarts_the_hold() {
        let mut r = RuleState::new(100 * MS, 0);
        let mut t = 0;
        // Flapping every 60 ms never holds 100 ms.
        for i in 0..50 {
            assert_eq!(r.update(t, i % 2 == 0), None, "at {t}");
            t += 60 * MS;
        }
        assert_eq!(r.update(t, true), None);
        assert_eq!(r.update(t + 60 * MS, true), None);
        assert_eq!(r.update(t + 100 * MS, true), fired(t + 100 * MS, t));
    }

    #[test]
    fn flapping_after_a_fire_gives_one_event_per_true_run() {
        let mut r = RuleState::new(0, 0);
        let mut events = Vec::new();
        for (i, holds) in [true, true, false, true, false, false, true]
            .iter()
            .enumerate()
        {
            events.extend(r.update(i as u64, *holds));
        }
        assert_eq!(
            events,
            [
                Transition::Fired {
                    at_ns: 0,
                    since_ns: 0
                },
                Transition::Cleared { at_ns: 2 },
                Transition::Fired {
                    at_ns: 3,
                    since_ns: 3
                },
                Transition::Cleared { at_ns: 4 },
                Transition::Fired {
                    at_ns: 6,
                    since_ns: 6
                },
            ]
        );
    }

    #[test]
    fn cooldown_counts_from_the_clear() {
        let mut r = RuleState::new(0, 1_000);
        assert_eq!(r.update(0, true), fired(0, 0));
        assert_eq!(r.update(500, false), cleared(500));
        assert_eq!(r.update(600, true), None, "in cooldown");
        assert_eq!(r.update(1_499, true), None, "in cooldown");
        // The run began in the cooldown; it fires at the cooldown's end
        // and says since when it has held.
        assert_eq!(r.update(1_500, true), fired(1_500, 600));
        assert_eq!(r.update(1_600, false), cleared(1_600));
        assert_eq!(r.update(2_000, false), None);
        assert_eq!(r.update(2_600, true), fired(2_600, 2_600));
    }

    #[test]
    fn hold_and_cooldown_together() {
        let mut r = RuleState::new(100, 1_000);
        r.update(0, true);
        assert_eq!(r.update(100, true), fired(100, 0));
        assert_eq!(r.update(200, false), cleared(200));
        // Holding from 1_150: cooldown over at 1_200, but hold needs 1_250.
        assert_eq!(r.update(1_150, true), None);
        assert_eq!(r.update(1_200, true), None);
        assert_eq!(r.update(1_250, true), fired(1_250, 1_150));
    }

    #[test]
    fn time_going_back_neither_underflows_nor_fires_early() {
        let mut r = RuleState::new(100, 0);
        assert_eq!(r.update(1_000, true), None);
        assert_eq!(r.update(5, true), None, "earlier than the run's start");
        assert_eq!(r.update(1_099, true), None);
        assert_eq!(r.update(1_100, true), fired(1_100, 1_000));
        assert_eq!(r.update(0, false), cleared(0));

        let mut r = RuleState::new(0, u64::MAX);
        assert_eq!(r.update(u64::MAX, true), fired(u64::MAX, u64::MAX));
        assert_eq!(r.update(u64::MAX, false), cleared(u64::MAX));
        assert_eq!(r.update(0, true), None, "cooldown saturates, never wraps");
    }

    #[test]
    fn unknown_messages_neither_hold_nor_break() {
        let mut r = RuleState::new(100, 0);
        assert_eq!(r.update(0, true), None);
        assert_eq!(r.update_unknown(), None);
        assert_eq!(r.update(100, true), fired(100, 0), "the run went on");
        assert_eq!(r.update_unknown(), None);
        assert!(r.is_fired(), "an unknown message does not clear");
        assert_eq!(r.update(200, false), cleared(200));
    }
}
