//! The `--start`/`--end` of `cat`, `export csv` and `filter`: a time as
//! seconds since the epoch (`1700000000.25`, what `rosbag info` and
//! `ros2 bag info` print, or `1700000000.25s`), nanoseconds since the epoch
//! (`1700000000250000000ns`, or a bare integer of 16 digits or more: no
//! date since 1970-04 has fewer in nanoseconds, none before year 300
//! million has as many in seconds), an RFC 3339 time
//! (`2023-11-14T22:13:20.25Z`), or with a leading `+`, a time after the
//! bag's first message (`+2.5`, `+2.5s`, `+250ms`, `+40us`, `+7ns`).

use crate::error::{Result, ToolError};

/// A time as given on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSpec {
    /// Nanoseconds since the epoch.
    Absolute(u64),
    /// Nanoseconds after the bag's first message.
    AfterStart(u64),
}

const WHAT: &str = "give seconds since the epoch (1700000000.25), nanoseconds (1700000000250000000ns), an RFC 3339 time (2023-11-14T22:13:20.25Z) or a time after the bag's first message (+2.5s, +250ms)";

/// Bare integers with at least this many digits are nanoseconds.
const NS_DIGITS: usize = 16;

impl TimeSpec {
    /// Parses `value` given to `flag`.
    pub fn parse(flag: &'static str, value: &str) -> Result<TimeSpec> {
        let bad = || ToolError::BadTime {
            flag,
            value: value.to_owned(),
            why: WHAT,
        };
        let text = value.trim();
        if let Some(rest) = text.strip_prefix('+') {
            let ns = duration_ns(rest).ok_or_else(bad)?;
            return Ok(TimeSpec::AfterStart(ns));
        }
        if text.contains('T') || text.contains('t') {
            let ts: jiff::Timestamp = text.parse().map_err(|_| bad())?;
            let ns = u64::try_from(ts.as_nanosecond()).map_err(|_| bad())?;
            return Ok(TimeSpec::Absolute(ns));
        }
        if text.len() >= NS_DIGITS && text.bytes().all(|b| b.is_ascii_digit()) {
            return Ok(TimeSpec::Absolute(text.parse().map_err(|_| bad())?));
        }
        duration_ns(text).map(TimeSpec::Absolute).ok_or_else(bad)
    }

    /// The time in ns since the epoch, for a bag starting at `start_ns`.
    pub fn resolve(self, start_ns: u64) -> u64 {
        match self {
            TimeSpec::Absolute(t) => t,
            TimeSpec::AfterStart(d) => start_ns.saturating_add(d),
        }
    }
}

/// `12.5`, `12.5s`, `250ms`, `40us`, `7ns` in nanoseconds (a bare number
/// is seconds); `None` when it is none of these or does not fit.
fn duration_ns(text: &str) -> Option<u64> {
    let (num, scale): (&str, u32) = if let Some(n) = text.strip_suffix("ns") {
        (n, 0)
    } else if let Some(n) = text.strip_suffix("us") {
        (n, 3)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 6)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 9)
    } else {
        (text, 9)
    };
    let (whole, frac) = num.split_once('.').unwrap_or((num, ""));
    if whole.is_empty() && frac.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > scale as usize
    {
        return None;
    }
    let unit = 10u64.pow(scale);
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let frac: u64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<width$}", width = scale as usize)
            .parse()
            .ok()?
    };
    whole.checked_mul(unit)?.checked_add(frac)
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
        assert_eq!(
            TimeSpec::parse("--start", "1700000000.25s").unwrap(),
            TimeSpec::Absolute(1_700_000_000_250_000_000)
        );
        assert_eq!(
            TimeSpec::parse("--start", "1700000000250000000").unwrap(),
            TimeSpec::Absolute(1_700_000_000_250_000_000)
        );
        assert_eq!(
            TimeSpec::parse("--start", "1700000000250000000ns").unwrap(),
            TimeSpec::Absolute(1_700_000_000_250_000_000)
        );
        assert_eq!(
            TimeSpec::parse("--start", "2023-11-14T22:13:20.25Z").unwrap(),
            TimeSpec::Absolute(1_700_000_000_250_000_000)
        );
        assert_eq!(
            TimeSpec::parse("--start", "2023-11-14T23:13:20.25+01:00").unwrap(),
            TimeSpec::Absolute(1_700_000_000_250_000_000)
        );
        assert_eq!(
            TimeSpec::parse("--end", "+12.5s").unwrap(),
            TimeSpec::AfterStart(12_500_000_000)
        );
        assert_eq!(
            TimeSpec::parse("--end", "+250ms").unwrap(),
            TimeSpec::AfterStart(250_000_000)
        );
        assert_eq!(
            TimeSpec::parse("--end", "+1.5us").unwrap(),
            TimeSpec::AfterStart(1_500)
        );
        assert_eq!(
            TimeSpec::parse("--end", "+7ns").unwrap(),
            TimeSpec::AfterStart(7)
        );
        for bad in [
            "",
            "+1.5ns",
            "+1.0000001ms",
            "1969-12-31T23:59:59Z",
            "2023-11-14T22:13:20",
            "12h",
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
