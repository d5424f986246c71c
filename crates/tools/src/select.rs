//! The `--start`/`--end` of `cat` and `export csv`: a time as seconds
//! since the epoch (`1700000000.25`, what `rosbag info` and
//! `ros2 bag info` print) or, with a leading `+`, seconds after the bag's
//! first message (`+2.5`).

use crate::error::{Result, ToolError};

/// A time as given on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSpec {
    /// Nanoseconds since the epoch.
    Absolute(u64),
    /// Nanoseconds after the bag's first message.
    AfterStart(u64),
}

const WHAT: &str =
    "give seconds since the epoch (1700000000.25) or seconds after the bag's first message (+2.5)";

impl TimeSpec {
    /// Parses `value` given to `flag`.
    pub fn parse(flag: &'static str, value: &str) -> Result<TimeSpec> {
        let bad = || ToolError::BadTime {
            flag,
            value: value.to_owned(),
            why: WHAT,
        };
        let (relative, text) = match value.trim().strip_prefix('+') {
            Some(rest) => (true, rest),
            None => (false, value.trim()),
        };
        let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
        if whole.is_empty() && frac.is_empty()
            || !whole.bytes().all(|b| b.is_ascii_digit())
            || !frac.bytes().all(|b| b.is_ascii_digit())
            || frac.len() > 9
        {
            return Err(bad());
        }
        let secs: u64 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| bad())?
        };
        let nanos: u64 = if frac.is_empty() {
            0
        } else {
            format!("{frac:0<9}").parse().map_err(|_| bad())?
        };
        let ns = secs
            .checked_mul(1_000_000_000)
            .and_then(|s| s.checked_add(nanos))
            .ok_or_else(bad)?;
        Ok(if relative {
            TimeSpec::AfterStart(ns)
        } else {
            TimeSpec::Absolute(ns)
        })
    }

    /// The time in ns since the epoch, for a bag starting at `start_ns`.
    pub fn resolve(self, start_ns: u64) -> u64 {
        match self {
            TimeSpec::Absolute(t) => t,
            TimeSpec::AfterStart(d) => start_ns.saturating_add(d),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_with_fractions_and_offsets() {
        assert_eq!(
            TimeSpec::parse("--start", "1700000000.25").unwrap(),
            TimeSpec::Absolute(1_700_000_000_250_000_000)
        );
        assert_eq!(
            TimeSpec::parse("--end", "+2.5").unwrap(),
            TimeSpec::AfterStart(2_500_000_000)
        );
        assert_eq!(
            TimeSpec::parse("--end", "7").unwrap().resolve(3),
            7_000_000_000
        );
        assert_eq!(
            TimeSpec::parse("--end", "+1").unwrap().resolve(3),
            1_000_000_003
        );
        for bad in [
            "",
            "+",
            "1e9",
            "-3",
            "1.2.3",
            "1.0000000001",
            "99999999999999999999",
        ] {
            let e = TimeSpec::parse("--start", bad).unwrap_err();
            assert!(
                e.to_string().contains("seconds since the epoch"),
                "{bad}: {e}"
            );
        }
    }
}
