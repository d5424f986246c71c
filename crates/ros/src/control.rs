//! The commands an operator gives a running recorder: pause, resume,
//! split, is-paused, trigger, and offload's status, pause, resume and
//! retry (the control socket only). One model serves both ways in: the ROS 2
//! services ([`crate::services`]: rosbag2's `~/pause`, `~/resume`,
//! `~/is_paused`, `~/split_bagfile` and edgerec's `~/trigger`) and the
//! local control socket that `edgerec ctl` talks to. Its text form is what
//! `edgerec ctl` takes after `ctl`, one command a line:
//!
//! ```text
//! pause | resume | split | is-paused | status | list
//! trigger [--name NAME] [--pre DURATION] [--post DURATION] [--reason TEXT]
//! offload-status | offload-pause | offload-resume | offload-retry
//! ```
//!
//! `--name` names the event clip (letters, digits, `_`, `-`); `--pre` and
//! `--post` set how much before and after the event the clip keeps
//! (`20s`, `500ms`, `2min`; 0 to 1 h; else the rule's or `[triggers]`');
//! `--reason` takes the rest of the line, so it comes last.
//!
//! ```
//! use edgerec_ros::control::{Command, Window};
//!
//! let c: Command = "trigger --reason door opened".parse().unwrap();
//! assert_eq!(c, Command::Trigger { name: String::new(), reason: "door opened".into(), window: Window::default() });
//! assert_eq!(c.to_string(), "trigger --reason door opened");
//! let c: Command = "trigger --name brake --reason hard brake".parse().unwrap();
//! assert_eq!(c, Command::Trigger { name: "brake".into(), reason: "hard brake".into(), window: Window::default() });
//! let c: Command = "trigger --pre 30s --post 2s".parse().unwrap();
//! assert_eq!(c.to_string(), "trigger --pre 30s --post 2s");
//! assert_eq!(Command::from_args(["split"]).unwrap(), Command::Split);
//! ```

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::audit::{AuditSink, Audited, Surface};
use crate::rate_limit::{RateLimiter, RateLimits, Refusals, Requester};

/// One operator command.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Command {
    /// Stop writing messages; sources keep running (rosbag2 `~/pause`).
    Pause,
    /// Write messages again (rosbag2 `~/resume`).
    Resume,
    /// Ask whether recording is paused (rosbag2 `~/is_paused`).
    IsPaused,
    /// Close the current file and go on in a new one (rosbag2
    /// `~/split_bagfile`).
    Split,
    /// Mark an event worth keeping (edgerec `~/trigger`).
    Trigger {
        /// The event clip's name (letters, digits, `_`, `-`); empty when
        /// none was given (the clip is then called `ctl`).
        name: String,
        /// Why, in the operator's words; empty when none was given. Never
        /// holds a line break, nor white space at either end.
        reason: String,
        /// How much before and after the event its clip keeps; unset
        /// parts are the rule's (or `[triggers]`').
        window: Window,
    },
    /// The recorder's status snapshot, as JSON (what `edgerec status
    /// --json` prints).
    Status,
    /// The sessions, segments and event clips on the vehicle with their
    /// time ranges and upload state, as JSON.
    List,
    /// Offload to the fleet's store: its status, or pause, resume or
    /// retry it (`edgerec offload VERB`; control socket only).
    Offload(OffloadVerb),
}

/// The longest `--pre` or `--post` a trigger may ask for.
pub const MAX_WINDOW: Duration = Duration::from_secs(3600);

/// A trigger's own clip window: how much before (`pre`) and after
/// (`post`) the event; `None` = the rule's or `[triggers]`' value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Window {
    /// Before the event (at most what the pre-roll ring holds).
    pub pre: Option<Duration>,
    /// After the event.
    pub post: Option<Duration>,
}

/// A window part from its text (`20s`, `500ms`, `2min`), 0 to
/// [`MAX_WINDOW`]; `option` names it in the error.
pub fn parse_window(option: &'static str, text: &str) -> Result<Duration, ControlError> {
    let bad = || ControlError::BadWindow {
        option,
        text: text.to_owned(),
    };
    let d = edgerec_config::parse_duration(text).map_err(|_| bad())?;
    if d > MAX_WINDOW {
        return Err(bad());
    }
    Ok(d)
}

/// A window part as the text form writes it (`20s`, `1500ms`).
fn window_text(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else if d.subsec_nanos() % 1_000_000 == 0 {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}ns", d.as_nanos())
    }
}

/// What `edgerec offload` asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OffloadVerb {
    /// The queue, the rate and the link, as JSON.
    Status,
    /// Stop sending after the request in flight.
    Pause,
    /// Send again.
    Resume,
    /// Try every waiting file now.
    Retry,
}

/// The words of the text form, in the order `edgerec ctl --help` lists them.
pub const VERBS: [&str; 11] = [
    "pause",
    "resume",
    "split",
    "is-paused",
    "status",
    "list",
    "trigger",
    "offload-status",
    "offload-pause",
    "offload-resume",
    "offload-retry",
];

/// Why a command's text was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// No command at all.
    #[error("no command given (one of: {})", VERBS.join(", "))]
    Empty,
    /// The first word is not a command.
    #[error("unknown command {word:?} (one of: {})", VERBS.join(", "))]
    UnknownCommand {
        /// The word.
        word: String,
    },
    /// A command got an argument it does not take.
    #[error("{command} does not take {arg:?}")]
    UnexpectedArgument {
        /// The command's word.
        command: &'static str,
        /// The argument.
        arg: String,
    },
    /// `--reason` with no text after it.
    #[error("trigger --reason needs a text")]
    MissingReason,
    /// `--name` with no name after it, or one that cannot name a clip.
    #[error("trigger --name needs a name of 1 to 64 letters, digits, `_` and `-`, got {0:?}")]
    BadName(String),
    /// A line break in the command (the socket carries one command a line).
    #[error("a command is one line; the text holds a line break")]
    LineBreak,
    /// `--pre` or `--post` without a duration, or one out of range.
    #[error("trigger {option} needs a duration from 0 s to 1 h (20s, 500ms, 2min), got {text:?}")]
    BadWindow {
        /// `--pre` or `--post`.
        option: &'static str,
        /// What was given.
        text: String,
    },
}

impl Command {
    /// Whether it changes what the recorder does (pause, resume, split,
    /// trigger, the offload's pause, resume and retry), as against only
    /// asking (is-paused, the offload's status).
    pub fn changes_anything(&self) -> bool {
        !matches!(
            self,
            Command::IsPaused
                | Command::Status
                | Command::List
                | Command::Offload(OffloadVerb::Status)
        )
    }

    /// The command's word in the text form (`is-paused`).
    pub fn verb(&self) -> &'static str {
        match self {
            Command::Pause => "pause",
            Command::Resume => "resume",
            Command::IsPaused => "is-paused",
            Command::Split => "split",
            Command::Status => "status",
            Command::List => "list",
            Command::Trigger { .. } => "trigger",
            Command::Offload(OffloadVerb::Status) => "offload-status",
            Command::Offload(OffloadVerb::Pause) => "offload-pause",
            Command::Offload(OffloadVerb::Resume) => "offload-resume",
            Command::Offload(OffloadVerb::Retry) => "offload-retry",
        }
    }

    /// A trigger, its reason trimmed; refuses a reason with a line break.
    pub fn trigger(reason: &str) -> Result<Command, ControlError> {
        Command::named_trigger("", reason)
    }

    /// A trigger whose clip is called `name` (empty: `ctl`).
    pub fn named_trigger(name: &str, reason: &str) -> Result<Command, ControlError> {
        Command::windowed_trigger(name, reason, Window::default())
    }

    /// A trigger whose clip is called `name` and keeps `window` around
    /// the event.
    pub fn windowed_trigger(
        name: &str,
        reason: &str,
        window: Window,
    ) -> Result<Command, ControlError> {
        if reason.contains(['\n', '\r']) || name.contains(['\n', '\r']) {
            return Err(ControlError::LineBreak);
        }
        for (option, d) in [("--pre", window.pre), ("--post", window.post)] {
            if d.is_some_and(|d| d > MAX_WINDOW) {
                return Err(ControlError::BadWindow {
                    option,
                    text: d.map(window_text).unwrap_or_default(),
                });
            }
        }
        Ok(Command::Trigger {
            name: check_name(name)?,
            reason: reason.trim().to_owned(),
            window,
        })
    }

    /// The command from its words, as the shell split them after
    /// `edgerec ctl`: `["trigger", "--reason", "door opened"]`. `--reason`
    /// also takes its text joined with `=`.
    pub fn from_args<I, S>(args: I) -> Result<Command, ControlError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut args = args.into_iter();
        let verb = args.next().ok_or(ControlError::Empty)?;
        let command = parse_verb(verb.as_ref())?;
        let (mut name, mut reason) = (None::<String>, None::<String>);
        let (mut pre, mut post) = (None::<String>, None::<String>);
        while let Some(arg) = args.next() {
            let arg = arg.as_ref();
            if !matches!(command, Command::Trigger { .. }) {
                return Err(unexpected(&command, arg));
            }
            let bad_window = |option| ControlError::BadWindow {
                option,
                text: String::new(),
            };
            let (slot, rest, missing) = if let Some(rest) = arg.strip_prefix("--reason") {
                (&mut reason, rest, ControlError::MissingReason)
            } else if let Some(rest) = arg.strip_prefix("--name") {
                (&mut name, rest, ControlError::BadName(String::new()))
            } else if let Some(rest) = arg.strip_prefix("--pre") {
                (&mut pre, rest, bad_window("--pre"))
            } else if let Some(rest) = arg.strip_prefix("--post") {
                (&mut post, rest, bad_window("--post"))
            } else {
                return Err(unexpected(&command, arg));
            };
            if slot.is_some() {
                return Err(unexpected(&command, arg));
            }
            let value = match rest {
                "" => args.next().ok_or(missing)?.as_ref().to_owned(),
                joined => match joined.strip_prefix('=') {
                    Some(text) => text.to_owned(),
                    None => return Err(unexpected(&command, arg)),
                },
            };
            *slot = Some(value);
        }
        match command {
            Command::Trigger { .. } => {
                let window = Window {
                    pre: pre.map(|t| parse_window("--pre", &t)).transpose()?,
                    post: post.map(|t| parse_window("--post", &t)).transpose()?,
                };
                Command::windowed_trigger(
                    name.as_deref().unwrap_or(""),
                    reason.as_deref().unwrap_or(""),
                    window,
                )
            }
            c => Ok(c),
        }
    }
}

/// A clip name: 1 to 64 letters, digits, `_` and `-` (or none).
fn check_name(name: &str) -> Result<String, ControlError> {
    let ok = name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(name.to_owned())
    } else {
        Err(ControlError::BadName(name.to_owned()))
    }
}

fn parse_verb(word: &str) -> Result<Command, ControlError> {
    Ok(match word {
        "pause" => Command::Pause,
        "resume" => Command::Resume,
        "split" => Command::Split,
        "is-paused" => Command::IsPaused,
        "status" => Command::Status,
        "list" => Command::List,
        "trigger" => Command::Trigger {
            name: String::new(),
            reason: String::new(),
            window: Window::default(),
        },
        "offload-status" => Command::Offload(OffloadVerb::Status),
        "offload-pause" => Command::Offload(OffloadVerb::Pause),
        "offload-resume" => Command::Offload(OffloadVerb::Resume),
        "offload-retry" => Command::Offload(OffloadVerb::Retry),
        "" => return Err(ControlError::Empty),
        _ => {
            return Err(ControlError::UnknownCommand {
                word: word.to_owned(),
            })
        }
    })
}

fn unexpected(command: &Command, arg: &str) -> ControlError {
    ControlError::UnexpectedArgument {
        command: command.verb(),
        arg: arg.to_owned(),
    }
}

impl FromStr for Command {
    type Err = ControlError;

    /// One line of the text form: the command's word, then for `trigger`
    /// optionally `--reason` and the rest of the line as the reason (kept
    /// as written inside, trimmed at the ends). White space around the
    /// line is ignored.
    fn from_str(line: &str) -> Result<Command, ControlError> {
        if line.contains(['\n', '\r']) {
            return Err(ControlError::LineBreak);
        }
        let line = line.trim();
        let (verb, rest) = line
            .split_once(char::is_whitespace)
            .map_or((line, ""), |(v, r)| (v, r.trim_start()));
        let command = parse_verb(verb)?;
        if rest.is_empty() {
            return Ok(command);
        }
        if !matches!(command, Command::Trigger { .. }) {
            return Err(unexpected(&command, rest));
        }
        // Options (`--name NAME`, `--pre D`, `--post D`, each also with
        // `=`), then `--reason` and the rest of the line.
        let (mut name, mut window) = (None::<&str>, Window::default());
        let mut rest = rest;
        loop {
            if rest.is_empty() {
                return Command::windowed_trigger(name.unwrap_or(""), "", window);
            }
            if let Some(text) = rest.strip_prefix("--reason") {
                return match text {
                    "" => Err(ControlError::MissingReason),
                    t if t.starts_with([' ', '\t', '=']) => {
                        Command::windowed_trigger(name.unwrap_or(""), &t[1..], window)
                    }
                    _ => Err(unexpected(&command, rest)),
                };
            }
            let Some((option, after)) = ["--name", "--pre", "--post"]
                .into_iter()
                .find_map(|o| rest.strip_prefix(o).map(|a| (o, a)))
            else {
                return Err(unexpected(&command, rest));
            };
            let missing = || match option {
                "--name" => ControlError::BadName(String::new()),
                o => ControlError::BadWindow {
                    option: if o == "--pre" { "--pre" } else { "--post" },
                    text: String::new(),
                },
            };
            let after = match after.strip_prefix('=') {
                Some(a) => a,
                None if after.starts_with([' ', '\t']) => after.trim_start(),
                None if after.is_empty() => return Err(missing()),
                None => return Err(unexpected(&command, rest)),
            };
            let (word, more) = after
                .split_once(char::is_whitespace)
                .map_or((after, ""), |(w, m)| (w, m.trim_start()));
            if word.is_empty() {
                return Err(missing());
            }
            let taken = match option {
                "--name" => name.replace(word).is_some(),
                "--pre" => window.pre.replace(parse_window("--pre", word)?).is_some(),
                _ => window.post.replace(parse_window("--post", word)?).is_some(),
            };
            if taken {
                return Err(unexpected(&command, rest));
            }
            rest = more;
        }
    }
}

impl fmt::Display for Command {
    /// The one-line text form; it parses back to the same command.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Trigger {
                name,
                reason,
                window,
            } => {
                f.write_str("trigger")?;
                if !name.is_empty() {
                    write!(f, " --name {name}")?;
                }
                if let Some(d) = window.pre {
                    write!(f, " --pre {}", window_text(d))?;
                }
                if let Some(d) = window.post {
                    write!(f, " --post {}", window_text(d))?;
                }
                if !reason.is_empty() {
                    write!(f, " --reason {reason}")?;
                }
                Ok(())
            }
            c => f.write_str(c.verb()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trigger(reason: &str) -> Command {
        Command::Trigger {
            name: String::new(),
            reason: reason.into(),
            window: Window::default(),
        }
    }

    #[test]
    fn trigger_names() {
        let want = Command::Trigger {
            name: "hard_brake-2".into(),
            reason: "brake at 0.6 g".into(),
            window: Window::default(),
        };
        for line in [
            "trigger --name hard_brake-2 --reason brake at 0.6 g",
            "trigger --name=hard_brake-2 --reason=brake at 0.6 g",
        ] {
            assert_eq!(line.parse::<Command>().unwrap(), want, "{line:?}");
        }
        assert_eq!(want.to_string().parse::<Command>().unwrap(), want);
        assert_eq!(
            Command::from_args([
                "trigger",
                "--reason",
                "brake at 0.6 g",
                "--name",
                "hard_brake-2"
            ])
            .unwrap(),
            want
        );
        let named = Command::from_args(["trigger", "--name=x"]).unwrap();
        assert_eq!(named.to_string(), "trigger --name x");
        assert_eq!(named.to_string().parse::<Command>().unwrap(), named);
        assert!(matches!(
            "trigger --name a/b".parse::<Command>(),
            Err(ControlError::BadName(n)) if n == "a/b"
        ));
        assert!(matches!(
            Command::from_args(["trigger", "--name"]),
            Err(ControlError::BadName(_))
        ));
    }

    #[test]
    fn trigger_windows() {
        let want = Command::Trigger {
            name: "drift".into(),
            reason: "lane drift".into(),
            window: Window {
                pre: Some(Duration::from_secs(30)),
                post: Some(Duration::from_millis(1500)),
            },
        };
        for line in [
            "trigger --name drift --pre 30s --post 1500ms --reason lane drift",
            "trigger --pre=30s --name=drift --post 1.5s --reason=lane drift",
        ] {
            assert_eq!(line.parse::<Command>().unwrap(), want, "{line:?}");
        }
        assert_eq!(
            want.to_string(),
            "trigger --name drift --pre 30s --post 1500ms --reason lane drift"
        );
        assert_eq!(want.to_string().parse::<Command>().unwrap(), want);
        assert_eq!(
            Command::from_args([
                "trigger",
                "--post",
                "1500ms",
                "--reason",
                "lane drift",
                "--pre=30s",
                "--name",
                "drift"
            ])
            .unwrap(),
            want
        );
        let only_post = "trigger --post 0s".parse::<Command>().unwrap();
        assert_eq!(only_post.to_string(), "trigger --post 0s");
        for bad in [
            "trigger --pre",
            "trigger --pre 2h",
            "trigger --post soon",
            "trigger --pre -1s",
        ] {
            assert!(
                matches!(bad.parse::<Command>(), Err(ControlError::BadWindow { .. })),
                "{bad}: {:?}",
                bad.parse::<Command>()
            );
        }
        assert!(matches!(
            Command::from_args(["trigger", "--post", "61min"]),
            Err(ControlError::BadWindow {
                option: "--post",
                ..
            })
        ));
        assert!(matches!(
            "trigger --pre 1s --pre 2s".parse::<Command>(),
            Err(ControlError::UnexpectedArgument { .. })
        ));
        assert!(!Command::Status.changes_anything() && !Command::List.changes_anything());
    }

    #[test]
    fn every_verb_parses_from_a_line_and_from_args() {
        let all = [
            Command::Pause,
            Command::Resume,
            Command::Split,
            Command::IsPaused,
            Command::Status,
            Command::List,
            trigger(""),
            Command::Offload(OffloadVerb::Status),
            Command::Offload(OffloadVerb::Pause),
            Command::Offload(OffloadVerb::Resume),
            Command::Offload(OffloadVerb::Retry),
        ];
        for (verb, c) in VERBS.iter().zip(&all) {
            assert_eq!(verb.parse::<Command>().unwrap(), *c);
            assert_eq!(Command::from_args([verb]).unwrap(), *c);
            assert_eq!(c.verb(), *verb);
            assert_eq!(c.to_string(), *verb);
        }
    }

    #[test]
    fn trigger_reasons() {
        for line in [
            "trigger --reason door opened",
            "  trigger   --reason   door opened  ",
            "trigger --reason=door opened",
            "trigger\t--reason\tdoor opened",
        ] {
            assert_eq!(
                line.parse::<Command>().unwrap(),
                trigger("door opened"),
                "{line:?}"
            );
        }
        // Spacing inside the reason is kept.
        assert_eq!(
            "trigger --reason a  b".parse::<Command>().unwrap(),
            trigger("a  b")
        );
        assert_eq!(
            Command::from_args(["trigger", "--reason", " door opened "]).unwrap(),
            trigger("door opened")
        );
        assert_eq!(
            Command::from_args(["trigger", "--reason=x=y"]).unwrap(),
            trigger("x=y")
        );
        assert_eq!(
            Command::from_args(["trigger", "--reason", ""]).unwrap(),
            trigger("")
        );
    }

    #[test]
    fn display_round_trips() {
        for c in [
            Command::Pause,
            Command::IsPaused,
            trigger(""),
            trigger("x"),
            trigger("--reason"),
            trigger("émoji 🚗 and  two spaces"),
            trigger("a=b --reason c"),
        ] {
            let line = c.to_string();
            assert_eq!(line.parse::<Command>().unwrap(), c, "{line:?}");
            let words: Vec<&str> = match line.split_once(" --reason ") {
                Some((verb, reason)) => vec![verb, "--reason", reason],
                None => vec![&line],
            };
            assert_eq!(Command::from_args(words).unwrap(), c, "{line:?}");
        }
    }

    #[test]
    fn bad_commands_say_why() {
        let none: [&str; 0] = [];
        assert_eq!(Command::from_args(none), Err(ControlError::Empty));
        assert_eq!("".parse::<Command>(), Err(ControlError::Empty));
        assert_eq!("   ".parse::<Command>(), Err(ControlError::Empty));
        assert_eq!(
            "is_paused".parse::<Command>(),
            Err(ControlError::UnknownCommand {
                word: "is_paused".into()
            })
        );
        let err = "stop".parse::<Command>().unwrap_err();
        assert!(err.to_string().contains("is-paused"), "{err}");
        assert_eq!(
            "pause now".parse::<Command>(),
            Err(ControlError::UnexpectedArgument {
                command: "pause",
                arg: "now".into()
            })
        );
        assert_eq!(
            Command::from_args(["split", "--reason", "x"]),
            Err(ControlError::UnexpectedArgument {
                command: "split",
                arg: "--reason".into()
            })
        );
        assert_eq!(
            "trigger --reason".parse::<Command>(),
            Err(ControlError::MissingReason)
        );
        assert_eq!(
            Command::from_args(["trigger", "--reason"]),
            Err(ControlError::MissingReason)
        );
        assert_eq!(
            "trigger --reasonable".parse::<Command>(),
            Err(ControlError::UnexpectedArgument {
                command: "trigger",
                arg: "--reasonable".into()
            })
        );
        assert_eq!(
            Command::from_args(["trigger", "--reason", "a", "--reason", "b"]),
            Err(ControlError::UnexpectedArgument {
                command: "trigger",
                arg: "--reason".into()
            })
        );
        assert_eq!(
            Command::from_args(["trigger", "door"]),
            Err(ControlError::UnexpectedArgument {
                command: "trigger",
                arg: "door".into()
            })
        );
        assert_eq!(
            "trigger --reason a\nb".parse::<Command>(),
            Err(ControlError::LineBreak)
        );
        assert_eq!(
            Command::from_args(["trigger", "--reason", "a\r\nb"]),
            Err(ControlError::LineBreak)
        );
        assert_eq!("pause\n".parse::<Command>(), Err(ControlError::LineBreak));
    }
}

/// What a command acts on: the running recorder, as the binary wires it.
pub trait Controls: Send + Sync {
    /// Stop writing messages (sources keep running; nothing counts as a
    /// drop); `who` asked, and the status shows it.
    fn pause(&self, who: &str);
    /// Write messages again; `who` asked.
    fn resume(&self, who: &str);
    /// True while paused.
    fn is_paused(&self) -> bool;
    /// Close the open segment and start the next.
    fn split(&self);
    /// Mark an event whose clip is called `name` (empty: `ctl`) and
    /// keeps `window` around it; `Err` says why it was not taken.
    fn trigger(&self, name: &str, reason: &str, window: Window) -> Result<String, String>;
    /// The recorder's status snapshot as JSON.
    fn status(&self) -> Result<String, String> {
        Err("the status is not served here".to_owned())
    }
    /// The sessions, segments and clips on the vehicle as JSON.
    fn list(&self) -> Result<String, String> {
        Err("the recordings are not listed here".to_owned())
    }
    /// Offload's status (JSON), or pause, resume or retry it as `who`
    /// asked; `Err` when offload is off.
    fn offload(&self, verb: OffloadVerb, who: &str) -> Result<String, String> {
        let _ = (verb, who);
        Err("offload is off: set offload.upload = \"all\" or \"events\"".to_owned())
    }
}

/// The controls, set once the recorder runs (the ROS source starts
/// before it, and answers "not ready" until then), and the rate limits
/// every way in shares: a requester's triggers count the same on the
/// socket and on the ROS 2 services.
#[derive(Clone, Default)]
pub struct ControlSlot(Arc<SlotInner>);

#[derive(Default)]
struct SlotInner {
    controls: OnceLock<Arc<dyn Controls>>,
    limiter: RateLimiter,
    audit: OnceLock<AuditSink>,
}

impl ControlSlot {
    /// An empty slot whose work-making commands are held to `limits`.
    pub fn new(limits: RateLimits) -> Self {
        ControlSlot(Arc::new(SlotInner {
            controls: OnceLock::new(),
            limiter: RateLimiter::new(limits),
            audit: OnceLock::new(),
        }))
    }

    /// Sets where each audited request goes besides the log; false when
    /// already set.
    pub fn set_audit(&self, sink: AuditSink) -> bool {
        self.0.audit.set(sink).is_ok()
    }

    /// The audit trail of one request that reached a command on
    /// `surface`: the log ([`crate::audit::log`]), then the sink.
    pub fn audit(&self, surface: Surface, who: &Requester, command: &Command, reply: &Reply) {
        let a = Audited {
            surface,
            who,
            command,
            reply,
        };
        crate::audit::log(&a);
        if let Some(sink) = self.0.audit.get() {
            sink(&a);
        }
    }

    /// Sets the controls once the recorder runs; false when already set.
    pub fn set(&self, controls: Arc<dyn Controls>) -> bool {
        self.0.controls.set(controls).is_ok()
    }

    /// What the rate limits refused since the start.
    pub fn refusals(&self) -> Refusals {
        self.0.limiter.refusals()
    }

    /// The rate limits in force.
    pub fn limits(&self) -> RateLimits {
        self.0.limiter.limits()
    }
}

/// The outcome of one command, for the socket's JSON line and the ROS
/// services' responses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The command was carried out.
    pub ok: bool,
    /// Paused after the command.
    pub paused: bool,
    /// What happened, or why not.
    pub message: String,
}

impl Reply {
    /// One JSON object: `{"ok":true,"paused":false,"message":"..."}`.
    pub fn json(&self) -> String {
        let mut m = String::with_capacity(self.message.len() + 2);
        for c in self.message.chars() {
            match c {
                '"' => m.push_str("\\\""),
                '\\' => m.push_str("\\\\"),
                c if (c as u32) < 0x20 => m.push_str(&format!("\\u{:04x}", c as u32)),
                c => m.push(c),
            }
        }
        format!(
            "{{\"ok\":{},\"paused\":{},\"message\":\"{m}\"}}",
            self.ok, self.paused
        )
    }
}

/// Carries out `cmd` on `c`.
pub fn execute(c: &dyn Controls, cmd: &Command) -> Reply {
    execute_as(c, cmd, "an unnamed requester")
}

/// [`execute`], saying who asked (the offload commands log it).
pub fn execute_as(c: &dyn Controls, cmd: &Command, who: &str) -> Reply {
    let (ok, message) = match cmd {
        Command::Pause => {
            c.pause(who);
            (true, "recording paused".to_owned())
        }
        Command::Resume => {
            c.resume(who);
            (true, "recording resumed".to_owned())
        }
        Command::IsPaused => (
            true,
            if c.is_paused() { "paused" } else { "recording" }.to_owned(),
        ),
        Command::Split => {
            c.split();
            (
                true,
                "the open segment is closed at its next chunk".to_owned(),
            )
        }
        Command::Trigger {
            name,
            reason,
            window,
        } => match c.trigger(name, reason, *window) {
            Ok(m) => (true, m),
            Err(m) => (false, m),
        },
        Command::Status => match c.status() {
            Ok(m) => (true, m),
            Err(m) => (false, m),
        },
        Command::List => match c.list() {
            Ok(m) => (true, m),
            Err(m) => (false, m),
        },
        Command::Offload(v) => match c.offload(*v, who) {
            Ok(m) => (true, m),
            Err(m) => (false, m),
        },
    };
    Reply {
        ok,
        paused: c.is_paused(),
        message,
    }
}

/// Carries out `cmd` from `who` with the controls in `slot`, or says
/// they are not ready yet, or that `who` is over its rate limit (for the
/// commands that make work: `trigger` and `split`).
pub fn execute_in(slot: &ControlSlot, cmd: &Command, who: &Requester) -> Reply {
    let Some(c) = slot.0.controls.get() else {
        return Reply {
            ok: false,
            paused: false,
            message: "the recorder is still starting; try again".into(),
        };
    };
    if matches!(cmd, Command::Trigger { .. } | Command::Split) {
        if let Err(refused) = slot.0.limiter.check(who, cmd.verb(), Instant::now()) {
            return Reply {
                ok: false,
                paused: c.is_paused(),
                message: refused.to_string(),
            };
        }
    }
    execute_as(c.as_ref(), cmd, &who.to_string())
}

#[cfg(test)]
mod controls_tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

    #[derive(Default)]
    struct Fake {
        paused: AtomicBool,
        splits: AtomicU32,
    }

    impl Controls for Fake {
        fn pause(&self, _: &str) {
            self.paused.store(true, Ordering::Relaxed);
        }
        fn resume(&self, _: &str) {
            self.paused.store(false, Ordering::Relaxed);
        }
        fn is_paused(&self) -> bool {
            self.paused.load(Ordering::Relaxed)
        }
        fn split(&self) {
            self.splits.fetch_add(1, Ordering::Relaxed);
        }
        fn trigger(&self, _: &str, _: &str, _: Window) -> Result<String, String> {
            Err("no trigger \"configured\"".into())
        }
    }

    #[test]
    fn commands_act_and_reply() {
        let f = Fake::default();
        assert!(execute(&f, &Command::Pause).paused);
        assert!(execute(&f, &Command::IsPaused).paused);
        assert!(!execute(&f, &Command::Resume).paused);
        execute(&f, &Command::Split);
        assert_eq!(f.splits.load(Ordering::Relaxed), 1);
        let r = execute(&f, &Command::trigger("x").unwrap());
        assert!(!r.ok);
        assert_eq!(
            r.json(),
            "{\"ok\":false,\"paused\":false,\"message\":\"no trigger \\\"configured\\\"\"}"
        );
        let slot: ControlSlot = Default::default();
        let who = Requester::Unknown;
        assert!(!execute_in(&slot, &Command::Pause, &who).ok);
    }

    #[test]
    fn triggers_and_splits_are_limited_per_requester_and_counted() {
        let slot = ControlSlot::new(RateLimits {
            per_second: 1,
            burst: 3,
        });
        assert!(slot.set(Arc::new(Fake::default())));
        assert!(!slot.set(Arc::new(Fake::default())));
        let a = Requester::Local {
            uid: 1000,
            pid: 7,
            user: None,
        };
        let b = Requester::RosClient { id: "0f".into() };
        for _ in 0..3 {
            assert!(execute_in(&slot, &Command::Split, &a).ok);
        }
        let r = execute_in(&slot, &Command::Split, &a);
        assert!(!r.ok);
        assert!(
            r.message.starts_with("split refused: uid 1000 (pid 7)"),
            "{}",
            r.message
        );
        // Pause and resume are not limited; another requester has its own.
        for _ in 0..10 {
            assert!(execute_in(&slot, &Command::Pause, &a).ok);
        }
        assert!(execute_in(&slot, &Command::Split, &b).ok);
        // A trigger past the limit never reaches the recorder (the fake
        // refuses every trigger it gets with its own message).
        let r = execute_in(&slot, &Command::trigger("x").unwrap(), &a);
        assert!(r.message.starts_with("trigger refused"), "{}", r.message);
        let refused = slot.refusals();
        assert_eq!(refused.by_command["split"], 1);
        assert_eq!(refused.by_command["trigger"], 1);
        assert_eq!(refused.by_requester["uid 1000"], 2);
    }
}
