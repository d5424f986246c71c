//! Which topics `filter` keeps: `--topics` by name, `--regex` by pattern
//! (either admits; neither given admits every topic), then `--exclude`
//! takes away. Patterns match the whole topic name, as `mcap filter`'s do
//! (`/camera_(front|back)` matches those two topics only).

use std::collections::BTreeSet;

use regex::Regex;

use crate::error::{Result, ToolError};

/// The longest pattern accepted (a command-line argument, not a program).
const MAX_PATTERN: usize = 4096;

/// A compiled topic selection.
#[derive(Debug, Clone, Default)]
pub struct Topics {
    names: BTreeSet<String>,
    include: Vec<Regex>,
    exclude: Vec<Regex>,
}

fn compile(flag: &str, pattern: &str) -> Result<Regex> {
    if pattern.len() > MAX_PATTERN {
        return Err(ToolError::Usage(format!(
            "{flag}: the pattern is {} bytes, more than {MAX_PATTERN}",
            pattern.len()
        )));
    }
    Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
        ToolError::Usage(format!(
            "{flag} {pattern:?} is not a regular expression: {e}"
        ))
    })
}

impl Topics {
    /// The selection of `names` (`--topics`), `regex` (`--regex`) and
    /// `exclude` (`--exclude`); a pattern that does not compile is refused,
    /// naming it.
    pub fn new(names: &[String], regex: &[String], exclude: &[String]) -> Result<Topics> {
        Ok(Topics {
            names: names.iter().cloned().collect(),
            include: regex
                .iter()
                .map(|p| compile("--regex", p))
                .collect::<Result<_>>()?,
            exclude: exclude
                .iter()
                .map(|p| compile("--exclude", p))
                .collect::<Result<_>>()?,
        })
    }

    /// The topics named with `--topics`.
    pub fn names(&self) -> &BTreeSet<String> {
        &self.names
    }

    /// True when `topic` is kept.
    pub fn admits(&self, topic: &str) -> bool {
        let wanted = (self.names.is_empty() && self.include.is_empty())
            || self.names.contains(topic)
            || self.include.iter().any(|r| r.is_match(topic));
        wanted && !self.exclude.iter().any(|r| r.is_match(topic))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn names_patterns_and_exclusions() {
        let all = Topics::new(&[], &[], &[]).unwrap();
        assert!(all.admits("/anything"));
        let t = Topics::new(&s(&["/imu"]), &s(&["/camera_(front|back)"]), &[]).unwrap();
        assert!(t.admits("/imu"));
        assert!(t.admits("/camera_front"));
        assert!(
            !t.admits("/camera_front/info"),
            "patterns match whole names"
        );
        assert!(!t.admits("/imu2"));
        let t = Topics::new(&[], &[], &s(&["/camera/.*"])).unwrap();
        assert!(t.admits("/imu"));
        assert!(!t.admits("/camera/image_raw"));
        let t = Topics::new(&s(&["/camera/image_raw"]), &[], &s(&["/camera/.*"])).unwrap();
        assert!(!t.admits("/camera/image_raw"), "--exclude wins");
    }

    #[test]
    fn a_bad_pattern_is_named() {
        let e = Topics::new(&[], &s(&["/a("]), &[]).unwrap_err();
        assert!(e.to_string().contains("--regex \"/a(\""), "{e}");
        assert_eq!(e.exit_code(), 2);
        let long = "a".repeat(MAX_PATTERN + 1);
        let e = Topics::new(&[], &[], &[long]).unwrap_err();
        assert!(e.to_string().contains("--exclude"), "{e}");
    }
}
