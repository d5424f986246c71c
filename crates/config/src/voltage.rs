//! A synthetic battery's voltage over time (`sources.synthetic[].voltage`):
//! a piecewise constant profile written `"12.6, 11.8@3s, 12.6@6s"`, each
//! step `VOLTS@DURATION` counted from the source's first message, the first
//! step's `@` optional (it starts at 0 s), the times strictly increasing.
//! The grammar lives here; the reader in `readers.rs` only places its
//! errors in the file.

use std::fmt;
use std::time::Duration;

use crate::units::{parse_duration, Time};

/// Highest voltage a step may have: far above any robot's pack; the bound
/// is there to refuse `inf` and values no battery has.
const MAX_VOLTS: f32 = 1000.0;

/// One step of a [`VoltageProfile`]: `volts` from `from` until the next
/// step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VoltageStep {
    /// Offset from the source's first message at which the step starts.
    pub from: Duration,
    /// The voltage, in volts.
    pub volts: f32,
}

/// A piecewise constant voltage over the time since a source's first
/// message. Always has at least one step, and the first starts at 0 s.
///
/// ```
/// use std::time::Duration;
/// use edgerec_config::VoltageProfile;
///
/// let p = VoltageProfile::parse("12.6, 11.8@3s, 12.6@6s").unwrap();
/// assert_eq!(p.at(Duration::from_millis(2999)), 12.6);
/// assert_eq!(p.at(Duration::from_secs(3)), 11.8);
/// assert_eq!(p.at(Duration::from_secs(60)), 12.6);
/// assert_eq!(p.to_string(), "12.6, 11.8@3s, 12.6@6s");
/// assert_eq!(VoltageProfile::default().at(Duration::ZERO), 12.6);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct VoltageProfile {
    steps: Vec<VoltageStep>,
}

/// Why a voltage profile was refused: what is wrong, and how to write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoltageProfileError {
    /// What is wrong, naming the step.
    pub message: String,
    /// How to write a profile.
    pub hint: String,
}

impl VoltageProfile {
    /// The voltage of a channel that sets none: a full 3-cell lithium-ion
    /// pack.
    pub const DEFAULT_VOLTS: f32 = 12.6;

    /// How a profile is written, the hint of every error.
    pub const FORMS: &'static str = "write VOLTS, then VOLTS@DURATION for each later step, \
         times increasing from the source's first message, such as \
         voltage = \"12.6, 11.8@3s, 12.6@6s\"";

    /// The same voltage forever.
    pub fn constant(volts: f32) -> Self {
        VoltageProfile {
            steps: vec![VoltageStep {
                from: Duration::ZERO,
                volts,
            }],
        }
    }

    /// Reads `"12.6, 11.8@3s, 12.6@6s"`.
    pub fn parse(text: &str) -> Result<Self, VoltageProfileError> {
        let refuse = |message: String| VoltageProfileError {
            message,
            hint: Self::FORMS.to_owned(),
        };
        if text.trim().is_empty() {
            return Err(refuse("is empty".to_owned()));
        }
        let mut steps: Vec<VoltageStep> = Vec::new();
        for (index, part) in text.split(',').map(str::trim).enumerate() {
            let n = index + 1;
            if part.is_empty() {
                return Err(refuse(format!("step {n} is empty")));
            }
            let (volts_text, from) = match part.split_once('@') {
                Some((volts, at)) => {
                    let from = parse_duration(at.trim())
                        .map_err(|err| refuse(format!("step {n} `{part}`: {}", err.message)))?;
                    (volts.trim(), from)
                }
                None if index == 0 => (part, Duration::ZERO),
                None => {
                    return Err(refuse(format!(
                        "step {n} `{part}` has no `@DURATION`; only the first step may leave it out"
                    )))
                }
            };
            let volts = match volts_text.parse::<f32>() {
                Ok(v) if v.is_finite() && v > 0.0 && v <= MAX_VOLTS => v,
                Ok(_) => {
                    return Err(refuse(format!(
                    "step {n} `{part}`: the voltage must be more than 0 and at most {MAX_VOLTS} V"
                )))
                }
                Err(_) => {
                    return Err(refuse(format!(
                        "step {n} `{part}`: `{volts_text}` is not a number of volts"
                    )))
                }
            };
            if let Some(before) = steps.last() {
                if from <= before.from {
                    return Err(refuse(format!(
                        "step {n} `{part}` starts at {}, not after the step before it ({})",
                        Time(from),
                        Time(before.from)
                    )));
                }
            }
            steps.push(VoltageStep { from, volts });
        }
        // `steps` holds at least one step: an empty text was refused above
        // and every part is either pushed or an error.
        if let Some(first) = steps.first().filter(|s| !s.from.is_zero()) {
            return Err(refuse(format!(
                "the first step starts at {}, not at 0s",
                Time(first.from)
            )));
        }
        Ok(VoltageProfile { steps })
    }

    /// The voltage `offset` after the source's first message.
    pub fn at(&self, offset: Duration) -> f32 {
        // The steps are few (a handful in any real profile) and sorted, so a
        // scan from the end costs less than a binary search's setup.
        self.steps
            .iter()
            .rev()
            .find(|step| step.from <= offset)
            .map_or(Self::DEFAULT_VOLTS, |step| step.volts)
    }

    /// The steps, the first at 0 s, in increasing time.
    pub fn steps(&self) -> &[VoltageStep] {
        &self.steps
    }
}

impl Default for VoltageProfile {
    /// A constant [`DEFAULT_VOLTS`](Self::DEFAULT_VOLTS).
    fn default() -> Self {
        Self::constant(Self::DEFAULT_VOLTS)
    }
}

impl fmt::Display for VoltageProfile {
    /// The TOML spelling: `12.6, 11.8@3s, 12.6@6s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, step) in self.steps.iter().enumerate() {
            if index == 0 && step.from.is_zero() {
                write!(f, "{}", step.volts)?;
            } else {
                write!(f, ", {}@{}", step.volts, Time(step.from))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> String {
        match VoltageProfile::parse(text) {
            Ok(p) => panic!("accepted {text:?} as {p:?}"),
            Err(err) => {
                assert_eq!(err.hint, VoltageProfile::FORMS);
                err.message
            }
        }
    }

    #[test]
    fn steps_hold_until_the_next_one() {
        let p = VoltageProfile::parse("12.6, 11.8@3s, 12.6@6s").expect("valid");
        let ms = Duration::from_millis;
        assert_eq!(p.at(ms(0)), 12.6);
        assert_eq!(p.at(ms(2999)), 12.6);
        assert_eq!(p.at(ms(3000)), 11.8);
        assert_eq!(p.at(ms(5999)), 11.8);
        assert_eq!(p.at(ms(6000)), 12.6);
        assert_eq!(p.steps().len(), 3);
        let explicit = VoltageProfile::parse("12.6@0s,11.8@3000ms , 12.6@6s").expect("valid");
        assert_eq!(explicit, p);
        assert_eq!(
            VoltageProfile::parse("11.1")
                .expect("valid")
                .at(ms(1 << 40)),
            11.1
        );
    }

    #[test]
    fn bad_profiles_name_the_step() {
        assert_eq!(refused(""), "is empty");
        assert_eq!(refused("  "), "is empty");
        assert_eq!(
            refused("12.6, x@3s"),
            "step 2 `x@3s`: `x` is not a number of volts"
        );
        assert_eq!(
            refused("12.6@3s, 11.8@1s"),
            "step 2 `11.8@1s` starts at 1s, not after the step before it (3s)"
        );
        assert_eq!(
            refused("12.6, 11.8@3s, 12.0@3s"),
            "step 3 `12.0@3s` starts at 3s, not after the step before it (3s)"
        );
        assert_eq!(refused("12.6@1s"), "the first step starts at 1s, not at 0s");
        assert_eq!(
            refused("12.6, 11.8"),
            "step 2 `11.8` has no `@DURATION`; only the first step may leave it out"
        );
        assert_eq!(refused("12.6,,11@2s"), "step 2 is empty");
        assert_eq!(
            refused("-1"),
            "step 1 `-1`: the voltage must be more than 0 and at most 1000 V"
        );
        assert!(refused("12.6, 11@3").starts_with("step 2 `11@3`: "));
    }
}
