//! The health state on LEDs through the kernel's LED class
//! (`/sys/class/leds/<name>/{trigger,brightness,max_brightness}`, and the
//! `timer` trigger's `delay_on`/`delay_off`): a board names its LEDs in the
//! configuration, each state maps to patterns, and only LEDs whose pattern
//! changes are written, so showing the same state every second costs
//! nothing. A missing LED is a warning, never a reason to stop recording.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::state::HealthState;

/// Shortest and longest `blink:ON/OFF` time, in ms (as the configuration
/// accepts them).
const DELAY_MS: (u32, u32) = (1, 60_000);

/// How one LED shows a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum LedPattern {
    /// Dark: trigger `none`, brightness 0.
    Off,
    /// Lit: trigger `none`, brightness `max_brightness`.
    On,
    /// The kernel's `timer` trigger.
    Blink {
        /// Lit time per period, in ms.
        on_ms: u32,
        /// Dark time per period, in ms.
        off_ms: u32,
    },
}

/// A string that is not an [`LedPattern`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem}; patterns: \"off\", \"on\", \"blink\" (500/500 ms), \"blink-fast\" (100/100 ms), \"blink:ON_MS/OFF_MS\" (1 to 60000 ms each)")]
pub struct LedPatternError {
    problem: String,
}

impl FromStr for LedPattern {
    type Err = LedPatternError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let problem = |problem: String| LedPatternError { problem };
        match s {
            "off" => Ok(LedPattern::Off),
            "on" => Ok(LedPattern::On),
            "blink" => Ok(LedPattern::Blink {
                on_ms: 500,
                off_ms: 500,
            }),
            "blink-fast" => Ok(LedPattern::Blink {
                on_ms: 100,
                off_ms: 100,
            }),
            _ => {
                let Some(times) = s.strip_prefix("blink:") else {
                    return Err(problem(format!("unknown LED pattern `{s}`")));
                };
                let (on, off) = times
                    .split_once('/')
                    .ok_or_else(|| problem(format!("`{s}` needs ON_MS/OFF_MS after `blink:`")))?;
                let ms = |part: &str| {
                    let ms: u32 = part
                        .trim()
                        .parse()
                        .map_err(|_| problem(format!("`{part}` in `{s}` is not a number of ms")))?;
                    if (DELAY_MS.0..=DELAY_MS.1).contains(&ms) {
                        Ok(ms)
                    } else {
                        Err(problem(format!(
                            "{ms} ms in `{s}` is outside {}..{} ms",
                            DELAY_MS.0, DELAY_MS.1
                        )))
                    }
                };
                Ok(LedPattern::Blink {
                    on_ms: ms(on)?,
                    off_ms: ms(off)?,
                })
            }
        }
    }
}

impl fmt::Display for LedPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LedPattern::Off => f.write_str("off"),
            LedPattern::On => f.write_str("on"),
            LedPattern::Blink { on_ms, off_ms } => write!(f, "blink:{on_ms}/{off_ms}"),
        }
    }
}

impl TryFrom<String> for LedPattern {
    type Error = LedPatternError;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl From<LedPattern> for String {
    fn from(pattern: LedPattern) -> String {
        pattern.to_string()
    }
}

/// For each health state, the LEDs to set and how. An LED named for some
/// state but not for the one shown is turned off.
pub type LedMap = BTreeMap<HealthState, Vec<(String, LedPattern)>>;

/// A configuration's `[leds.states]` that does not make an [`LedMap`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedMapError {
    /// The state name is not a health state.
    #[error(transparent)]
    State(#[from] crate::state::UnknownHealthState),
    /// A pattern does not parse.
    #[error("LED `{led}` in state `{state}`: {source}")]
    Pattern {
        /// The state.
        state: HealthState,
        /// The LED.
        led: String,
        /// What is wrong with the pattern.
        source: LedPatternError,
    },
}

/// Builds an [`LedMap`] from the configuration's form: state name ->
/// [(LED name, pattern string)] (`edgerec_config::LedsConfig::states`).
pub fn led_map_from_strings(
    states: &[(String, Vec<(String, String)>)],
) -> Result<LedMap, LedMapError> {
    let mut map = LedMap::new();
    for (state, leds) in states {
        let state: HealthState = state.parse()?;
        let entry = map.entry(state).or_default();
        for (led, pattern) in leds {
            let pattern = pattern.parse().map_err(|source| LedMapError::Pattern {
                state,
                led: led.clone(),
                source,
            })?;
            entry.push((led.clone(), pattern));
        }
    }
    Ok(map)
}

/// Which configured LEDs exist, and what is shown, for the status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedsStatus {
    /// LEDs found under the sysfs root.
    pub present: Vec<String>,
    /// LEDs named in the map but absent (their directories are missing).
    pub missing: Vec<String>,
    /// The state last shown.
    pub showing: Option<HealthState>,
    /// The last failed write, if any (e.g. permission denied).
    pub last_error: Option<String>,
}

struct Led {
    name: String,
    dir: PathBuf,
    present: bool,
    max_brightness: u32,
    /// What was last written successfully; `None` = unknown, write next.
    current: Option<LedPattern>,
}

/// The LEDs of one board, driven from a [`LedMap`].
pub struct Leds {
    map: LedMap,
    leds: Vec<Led>,
    showing: Option<HealthState>,
    writes: u64,
    last_error: Option<String>,
}

impl fmt::Debug for Leds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leds")
            .field("status", &self.status())
            .finish()
    }
}

impl Leds {
    /// The LEDs named in `map`, under `sysfs_root` (`/sys/class/leds`, or a
    /// directory laid out like it in tests). Each LED missing there is
    /// logged once, as a warning naming its path, and skipped from then on.
    /// Nothing is written until [`show`](Leds::show).
    pub fn new(sysfs_root: PathBuf, map: LedMap) -> Leds {
        let mut names: Vec<String> = map
            .values()
            .flat_map(|leds| leds.iter().map(|(name, _)| name.clone()))
            .collect();
        names.sort();
        names.dedup();
        let leds = names
            .into_iter()
            .map(|name| {
                let dir = sysfs_root.join(&name);
                let valid = !name.is_empty() && !name.contains('/') && name != "." && name != "..";
                let present = valid && dir.is_dir();
                if !valid {
                    tracing::warn!("`{name}` is not an LED name; it is skipped");
                } else if !present {
                    tracing::warn!(
                        "LED {} not found; it is skipped (check the board's LED names in [leds.states])",
                        dir.display()
                    );
                }
                let max_brightness = if present {
                    read_max_brightness(&dir)
                } else {
                    1
                };
                Led {
                    name,
                    dir,
                    present,
                    max_brightness,
                    current: None,
                }
            })
            .collect();
        Leds {
            map,
            leds,
            showing: None,
            writes: 0,
            last_error: None,
        }
    }

    /// Shows `state`: every present LED gets the state's pattern, or off
    /// when the state does not name it. Only LEDs whose pattern changes are
    /// written; showing the state already shown writes nothing. A failed
    /// write is logged and retried at the next change of state.
    pub fn show(&mut self, state: HealthState) {
        if self.showing == Some(state) {
            return;
        }
        let wanted_list = self.map.get(&state);
        for led in self.leds.iter_mut().filter(|led| led.present) {
            let wanted = wanted_list
                .and_then(|list| list.iter().find(|(name, _)| *name == led.name))
                .map_or(LedPattern::Off, |(_, pattern)| *pattern);
            if led.current == Some(wanted) {
                continue;
            }
            match apply(led, wanted, &mut self.writes) {
                Ok(()) => led.current = Some(wanted),
                Err(err) => {
                    tracing::warn!("LED {}: cannot show {wanted}: {err}", led.name);
                    self.last_error = Some(err.to_string());
                    led.current = None;
                }
            }
        }
        self.showing = Some(state);
    }

    /// Present and missing LEDs and the state shown.
    pub fn status(&self) -> LedsStatus {
        let names = |present: bool| -> Vec<String> {
            self.leds
                .iter()
                .filter(|led| led.present == present)
                .map(|led| led.name.clone())
                .collect()
        };
        LedsStatus {
            present: names(true),
            missing: names(false),
            showing: self.showing,
            last_error: self.last_error.clone(),
        }
    }

    /// How many sysfs attribute writes have been made so far (each write
    /// of `trigger`, `brightness`, `delay_on` or `delay_off` counts one);
    /// tests use it to see that an unchanged state writes nothing.
    pub fn writes(&self) -> u64 {
        self.writes
    }
}

fn read_max_brightness(dir: &Path) -> u32 {
    let path = dir.join("max_brightness");
    match fs::read_to_string(&path) {
        Ok(text) => match text.trim().parse::<u32>() {
            Ok(max) if max > 0 => max,
            _ => {
                tracing::warn!(
                    "{}: `{}` is not a brightness; using 1",
                    path.display(),
                    text.trim()
                );
                1
            }
        },
        // Absent on some test layouts and odd drivers: 1 is "on" for every
        // LED class device.
        Err(_) => 1,
    }
}

fn apply(led: &Led, pattern: LedPattern, writes: &mut u64) -> io::Result<()> {
    match pattern {
        LedPattern::Off | LedPattern::On => {
            // Setting the trigger to none first stops a running timer;
            // the kernel turns the LED off as it removes a trigger.
            write_attr(&led.dir, "trigger", "none", writes)?;
            let brightness = if pattern == LedPattern::On {
                led.max_brightness
            } else {
                0
            };
            write_attr(&led.dir, "brightness", &brightness.to_string(), writes)
        }
        LedPattern::Blink { on_ms, off_ms } => {
            // On a real LED class device delay_on/delay_off appear only
            // once the timer trigger is set; a test directory just gets
            // the files created.
            write_attr(&led.dir, "trigger", "timer", writes)?;
            let deadline = Instant::now() + UDEV_WAIT;
            retry_denied(deadline, || {
                write_attr(&led.dir, "delay_on", &on_ms.to_string(), writes)
            })?;
            retry_denied(deadline, || {
                write_attr(&led.dir, "delay_off", &off_ms.to_string(), writes)
            })
        }
    }
}

/// How long a blink waits for the board's udev rule. The kernel makes
/// `delay_on` and `delay_off` anew, owned by root, each time the trigger
/// becomes `timer`, and announces it with a change event (TRIGGER=timer);
/// the rule (udev/61-edgerec-devices.rules) gives them to the recorder's
/// group. The recorder, not root, may try before the rule has run.
const UDEV_WAIT: Duration = Duration::from_millis(250);

/// `write` again every 5 ms while it is refused for permission, until
/// `deadline`; any other outcome at once.
fn retry_denied(deadline: Instant, mut write: impl FnMut() -> io::Result<()>) -> io::Result<()> {
    loop {
        match write() {
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

fn write_attr(dir: &Path, attr: &str, value: &str, writes: &mut u64) -> io::Result<()> {
    let path = dir.join(attr);
    let written = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .and_then(|mut file| file.write_all(value.as_bytes()));
    *writes += 1;
    written.map_err(|err| io::Error::new(err.kind(), format!("{}: {err}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_delay_is_written_once_udev_gives_it_to_the_group() {
        let mut tries = 0;
        let r = retry_denied(Instant::now() + Duration::from_secs(5), || {
            tries += 1;
            if tries < 3 {
                Err(io::Error::from(io::ErrorKind::PermissionDenied))
            } else {
                Ok(())
            }
        });
        assert!(r.is_ok());
        assert_eq!(tries, 3);
    }

    #[test]
    fn a_delay_still_refused_at_the_deadline_is_an_error_and_others_are_not_retried() {
        let start = Instant::now();
        let r = retry_denied(start + Duration::from_millis(30), || {
            Err(io::Error::from(io::ErrorKind::PermissionDenied))
        });
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
        assert!(start.elapsed() >= Duration::from_millis(30));
        let mut tries = 0;
        let r = retry_denied(Instant::now() + Duration::from_secs(5), || {
            tries += 1;
            Err(io::Error::from(io::ErrorKind::NotFound))
        });
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::NotFound);
        assert_eq!(tries, 1);
    }

    #[test]
    fn patterns_parse() {
        assert_eq!("off".parse(), Ok(LedPattern::Off));
        assert_eq!("on".parse(), Ok(LedPattern::On));
        assert_eq!(
            "blink".parse(),
            Ok(LedPattern::Blink {
                on_ms: 500,
                off_ms: 500
            })
        );
        assert_eq!(
            "blink-fast".parse(),
            Ok(LedPattern::Blink {
                on_ms: 100,
                off_ms: 100
            })
        );
        assert_eq!(
            "blink:200/1800".parse(),
            Ok(LedPattern::Blink {
                on_ms: 200,
                off_ms: 1800
            })
        );
        for pattern in ["off", "on", "blink:500/500", "blink:1/60000"] {
            let parsed: LedPattern = pattern.parse().unwrap();
            assert_eq!(parsed.to_string(), pattern);
        }
    }

    #[test]
    fn pattern_errors_say_what_is_wrong() {
        let err = |s: &str| s.parse::<LedPattern>().unwrap_err().to_string();
        assert!(
            err("flash").starts_with("unknown LED pattern `flash`"),
            "{}",
            err("flash")
        );
        assert!(err("blink:100").contains("needs ON_MS/OFF_MS"));
        assert!(err("blink:x/100").contains("`x` in `blink:x/100` is not a number"));
        assert!(err("blink:0/100").contains("outside 1..60000 ms"));
        assert!(err("ON").contains("blink-fast"), "lists the patterns");
    }

    #[test]
    fn serde_as_strings() {
        let json = serde_json::to_string(&LedPattern::Blink {
            on_ms: 100,
            off_ms: 900,
        })
        .unwrap();
        assert_eq!(json, "\"blink:100/900\"");
        let back: LedPattern = serde_json::from_str("\"blink-fast\"").unwrap();
        assert_eq!(back, "blink:100/100".parse().unwrap());
        assert!(serde_json::from_str::<LedPattern>("\"dim\"").is_err());
    }

    #[test]
    fn map_from_config_strings() {
        let states = vec![(
            "disk-full".to_owned(),
            vec![("error".to_owned(), "blink-fast".to_owned())],
        )];
        let map = led_map_from_strings(&states).unwrap();
        assert_eq!(
            map[&HealthState::DiskFull],
            [(
                "error".to_owned(),
                LedPattern::Blink {
                    on_ms: 100,
                    off_ms: 100
                }
            )]
        );
        let bad = vec![("lost".to_owned(), vec![])];
        assert!(led_map_from_strings(&bad).is_err());
        let bad = vec![(
            "fault".to_owned(),
            vec![("error".to_owned(), "strobe".to_owned())],
        )];
        let err = led_map_from_strings(&bad).unwrap_err().to_string();
        assert!(
            err.starts_with("LED `error` in state `fault`: unknown LED pattern"),
            "{err}"
        );
    }
}
