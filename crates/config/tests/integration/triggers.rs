//! `recording.mode`, `[triggers]` and `[[trigger]]`: what a rule accepts,
//! where its `when` starts (for errors found once the topic's type is
//! known), and the errors for combinations that cannot work.

use std::path::Path;
use std::time::Duration;

use edgerec_config::{Config, ConfigError, RecordingMode};

fn parse(text: &str) -> Result<Config, Box<ConfigError>> {
    Config::parse(text, Path::new("edgerec.toml")).map_err(Box::new)
}

#[track_caller]
fn error(text: &str) -> ConfigError {
    match parse(text) {
        Ok(config) => panic!("accepted {text:?} as {:?}", config.trigger),
        Err(err) => *err,
    }
}

const TRIGGERED: &str = "[recording]\nmode = \"triggered\"\n";

#[test]
fn a_rule_takes_the_defaults_of_triggers() {
    let text = format!(
        "{TRIGGERED}[triggers]\npre = \"20s\"\n\n[[trigger]]\nname = \"low_battery\"\n\
         topic = \"/battery\"\nwhen = \"voltage < 12.1\"\nfor = \"3s\"\npost = \"5s\"\n"
    );
    let cfg = parse(&text).unwrap();
    assert_eq!(cfg.recording.mode, RecordingMode::Triggered);
    let rule = &cfg.trigger[0];
    assert_eq!(rule.name, "low_battery");
    assert_eq!(rule.topic, "/battery");
    assert_eq!(rule.hold_for, Duration::from_secs(3));
    assert_eq!(rule.pre_or(&cfg.triggers), Duration::from_secs(20));
    assert_eq!(rule.post_or(&cfg.triggers), Duration::from_secs(5));
    assert_eq!(rule.cooldown_or(&cfg.triggers), Duration::ZERO);
    assert!(rule.topics.is_empty());
    // The expression's first character: line 9, after `when = "`.
    let when = &rule.when;
    assert_eq!(when.text, "voltage < 12.1");
    assert_eq!((when.line, when.column), (9, 9));
    assert_eq!(when.key, "trigger[0].when");
    let err = when.error_at(11, "no such thing", None);
    assert_eq!(
        err.to_string(),
        "edgerec.toml:9:19: trigger[0].when: no such thing"
    );
}

#[test]
fn rules_need_a_mode_that_makes_clips() {
    let err = error("[[trigger]]\nname = \"t\"\ntopic = \"/battery\"\n");
    assert_eq!(err.line, Some(1));
    assert!(
        err.message.contains("recording.mode = \"continuous\""),
        "{err}"
    );
    assert!(err.hint.unwrap().contains("mode = \"triggered\""));
}

#[test]
fn mixed_needs_continuous_topics() {
    let err = error("[recording]\nmode = \"mixed\"\n");
    assert_eq!(
        (err.line, err.key.as_deref()),
        (Some(2), Some("recording.mode"))
    );
    assert!(err.hint.unwrap().contains("continuous_topics"));
    let cfg =
        parse("[recording]\nmode = \"mixed\"\ncontinuous_topics = [\"/tf\", \"/odom\"]\n").unwrap();
    assert_eq!(cfg.recording.continuous_topics, ["/tf", "/odom"]);
    let err = error("[recording]\nmode = \"mixed\"\ncontinuous_topics = [\"tf\"]\n");
    assert_eq!(err.line, Some(3));
    assert!(err.message.contains("must start with `/`"), "{err}");
}

#[test]
fn names_are_checked_and_unique() {
    let err = error(&format!(
        "{TRIGGERED}[[trigger]]\nname = \"low battery\"\ntopic = \"/b\"\n"
    ));
    assert_eq!(err.line, Some(4));
    assert!(err.message.contains("not a trigger name"), "{err}");
    let err = error(&format!(
        "{TRIGGERED}[[trigger]]\nname = \"a\"\ntopic = \"/b\"\n[[trigger]]\nname = \"a\"\ntopic = \"/c\"\n"
    ));
    assert_eq!(err.line, Some(7));
    assert!(err.message.contains("duplicate trigger name `a`"), "{err}");
    assert!(err.hint.unwrap().contains("trigger[0] (line 4)"));
    let err = error(&format!("{TRIGGERED}[[trigger]]\nname = \"a\"\n"));
    assert!(err.message.contains("nothing to fire on"), "{err}");
    assert!(err.hint.unwrap().contains("every = "));
}

#[test]
fn a_rule_fires_on_one_thing() {
    let cfg = parse(&format!(
        "{TRIGGERED}[[trigger]]\nname = \"sample\"\nevery = \"10min\"\npre = \"0s\"\npost = \"30s\"\n\
         [[trigger]]\nname = \"button\"\ngpio = \"gpiochip0:17\"\nedge = \"falling\"\n\
         [[trigger]]\nname = \"clock\"\nhealth = [\"clock-unlocked\", \"drops\"]\n"
    ))
    .unwrap();
    assert_eq!(cfg.trigger[0].every, Some(Duration::from_secs(600)));
    assert_eq!(cfg.trigger[1].gpio, "gpiochip0:17");
    assert_eq!(cfg.trigger[1].edge, edgerec_config::GpioEdge::Falling);
    assert_eq!(cfg.trigger[1].debounce, Duration::from_millis(50));
    assert_eq!(cfg.trigger[2].health, ["clock-unlocked", "drops"]);
    let err = error(&format!(
        "{TRIGGERED}[[trigger]]\nname = \"a\"\ntopic = \"/b\"\nevery = \"1min\"\n"
    ));
    assert_eq!(
        (err.line, err.key.as_deref()),
        (Some(6), Some("trigger[0].every"))
    );
    assert!(err.message.contains("already fires on `topic`"), "{err}");
    let err = error(&format!(
        "{TRIGGERED}[[trigger]]\nname = \"a\"\nevery = \"1min\"\nwhen = \"x > 1\"\n"
    ));
    assert_eq!(err.key.as_deref(), Some("trigger[0].when"));
    let err = error(&format!(
        "{TRIGGERED}[[trigger]]\nname = \"a\"\ngpio = \"17\"\n"
    ));
    assert!(err.message.contains("not a GPIO line"), "{err}");
    let err = error(&format!(
        "{TRIGGERED}[[trigger]]\nname = \"a\"\nhealth = [\"clock_unlocked\"]\n"
    ));
    assert!(
        err.hint
            .as_deref()
            .unwrap()
            .contains("did you mean `clock-unlocked`"),
        "{err}"
    );
}

#[test]
fn windows_are_bounded() {
    let err = error(&format!(
        "{TRIGGERED}[[trigger]]\nname = \"a\"\ntopic = \"/b\"\npre = \"11min\"\n"
    ));
    assert_eq!(
        (err.line, err.key.as_deref()),
        (Some(6), Some("trigger[0].pre"))
    );
    let err = error("[triggers]\nmemory_budget = \"10KiB\"\n");
    assert_eq!(err.key.as_deref(), Some("triggers.memory_budget"));
}
