//! Sizes and durations written with units (`"4 MiB"`, `"500ms"`), parsed
//! exactly: the arithmetic is done on integers, so `"1.5MiB"` is exactly
//! 1572864 bytes and `"0.1s"` exactly 100 ms, and a value that does not come
//! out whole (`"1.5B"`, `"0.5ns"`) is refused rather than rounded.

use std::fmt;
use std::time::Duration;

/// Why [`parse_size`] or [`parse_duration`] refused a string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct UnitError {
    /// What is wrong, e.g. "ambiguous size unit `G`".
    pub message: String,
    /// How to write it instead, when there is something useful to say.
    pub hint: Option<String>,
}

impl UnitError {
    fn new(message: impl Into<String>, hint: Option<String>) -> Self {
        UnitError {
            message: message.into(),
            hint,
        }
    }
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

const SIZE_UNITS_HINT: &str =
    "size units: B, KiB, MiB, GiB, TiB (powers of 1024) or kB, MB, GB, TB (powers of 1000)";
const DURATION_UNITS_HINT: &str = "duration units: ns, us, ms, s, m, h";

/// Parses a byte size: `"4096"`, `"512KiB"`, `"4 MiB"`, `"1.5GiB"`, `"1MB"`.
///
/// Binary units (KiB, MiB, GiB, TiB, also written Ki, Mi, Gi, Ti) are powers
/// of 1024; decimal units (kB, MB, GB, TB) powers of 1000; units match
/// without regard to case. A bare `K`, `M`, `G` or `T` is refused as
/// ambiguous: storage vendors and operating systems disagree on what `1G` is,
/// and a preallocation 7 % smaller than meant is a silent surprise.
///
/// ```
/// use edgerec_config::parse_size;
/// assert_eq!(parse_size("4 MiB"), Ok(4 << 20));
/// assert_eq!(parse_size("1.2MB"), Ok(1_200_000));
/// assert!(parse_size("1G").unwrap_err().hint.unwrap().contains("GiB"));
/// ```
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let (number, unit) = split_number(text, "size", "\"4MiB\"")?;
    let multiplier = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" | "ki" => KIB,
        "mib" | "mi" => MIB,
        "gib" | "gi" => GIB,
        "tib" | "ti" => TIB,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "k" | "m" | "g" | "t" => {
            let prefix = unit.to_ascii_uppercase();
            let binary = size_units(number, prefix_multiplier(&prefix, 1024));
            let decimal = size_units(number, prefix_multiplier(&prefix, 1000));
            return Err(UnitError::new(
                format!("ambiguous size unit `{unit}`"),
                Some(format!(
                    "write \"{number}{prefix}iB\" ({binary} bytes) or \"{number}{prefix}B\" ({decimal} bytes)"
                )),
            ));
        }
        _ => {
            return Err(UnitError::new(
                format!("unknown size unit `{unit}`"),
                Some(SIZE_UNITS_HINT.to_owned()),
            ))
        }
    };
    let bytes = scale(number, multiplier).ok_or_else(|| {
        UnitError::new(
            format!("`{}` is not a whole number of bytes", text.trim()),
            None,
        )
    })?;
    u64::try_from(bytes)
        .map_err(|_| UnitError::new(format!("`{}` is too large", text.trim()), None))
}

/// Parses a duration: `"250us"`, `"500ms"`, `"1s"`, `"1.5s"`, `"5m"`, `"1h"`.
///
/// The unit is required: a bare `"1"` is refused, since a reader cannot tell
/// whether a second or a millisecond was meant. `µs` is accepted for `us`,
/// `min` for `m`.
///
/// ```
/// use std::time::Duration;
/// use edgerec_config::parse_duration;
/// assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
/// assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
/// assert!(parse_duration("1").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let (number, unit) = split_number(text, "duration", "\"1s\"")?;
    let nanos_per_unit: u64 = match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "" => {
            return Err(UnitError::new(
                "a duration needs a unit",
                Some(format!("write \"{number}s\" or \"{number}ms\"")),
            ))
        }
        _ => {
            return Err(UnitError::new(
                format!("unknown duration unit `{unit}`"),
                Some(DURATION_UNITS_HINT.to_owned()),
            ))
        }
    };
    let nanos = scale(number, nanos_per_unit).ok_or_else(|| {
        UnitError::new(
            format!("`{}` is not a whole number of nanoseconds", text.trim()),
            None,
        )
    })?;
    let secs = u64::try_from(nanos / 1_000_000_000)
        .map_err(|_| UnitError::new(format!("`{}` is too long", text.trim()), None))?;
    // The remainder is below 10^9 and so fits in u32.
    Ok(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

/// Splits `"  1.5 GiB "` into `("1.5", "GiB")`, refusing a missing or
/// malformed number.
fn split_number<'t>(
    text: &'t str,
    what: &str,
    example: &str,
) -> Result<(&'t str, &'t str), UnitError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(UnitError::new(
            format!("empty {what}"),
            Some(format!("write a number with a unit, e.g. {example}")),
        ));
    }
    if text.starts_with('-') {
        return Err(UnitError::new(
            format!("a {what} must not be negative"),
            None,
        ));
    }
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = (&text[..end], text[end..].trim_start());
    let well_formed = match number.split_once('.') {
        None => !number.is_empty(),
        Some((int, frac)) => {
            !int.is_empty() && !frac.is_empty() && frac.bytes().all(|b| b.is_ascii_digit())
        }
    };
    if !well_formed {
        return Err(UnitError::new(
            format!("`{text}` is not a {what}"),
            Some(format!("write a number with a unit, e.g. {example}")),
        ));
    }
    Ok((number, unit))
}

/// `number * multiplier` for a decimal `number` ("12" or "1.25"), exact;
/// `None` when the product is not whole or overflows.
fn scale(number: &str, multiplier: u64) -> Option<u128> {
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let denominator = 10u128.checked_pow(u32::try_from(frac.len()).ok()?)?;
    let digits: u128 = format!("{int}{frac}").parse().ok()?;
    let product = digits.checked_mul(u128::from(multiplier))?;
    (product % denominator == 0).then_some(product / denominator)
}

fn prefix_multiplier(prefix: &str, base: u64) -> u64 {
    let exponent = match prefix {
        "K" => 1,
        "M" => 2,
        "G" => 3,
        _ => 4,
    };
    base.pow(exponent)
}

fn size_units(number: &str, multiplier: u64) -> String {
    match scale(number, multiplier) {
        Some(bytes) => bytes.to_string(),
        None => "not whole".to_owned(),
    }
}

/// A byte count for messages: `4 MiB`, `1200000 bytes`.
pub(crate) struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        for (unit, name) in [(TIB, "TiB"), (GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")] {
            if n >= unit && n % unit == 0 {
                return write!(f, "{} {name}", n / unit);
            }
        }
        if n == 1 {
            write!(f, "1 byte")
        } else {
            write!(f, "{n} bytes")
        }
    }
}

/// A duration for messages, in the largest unit that divides it: `500ms`,
/// `1s`, `1500ms`.
pub(crate) struct Time(pub Duration);

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        if nanos == 0 {
            return write!(f, "0s");
        }
        let units: [(u128, &str); 6] = [
            (3_600_000_000_000, "h"),
            (60_000_000_000, "m"),
            (1_000_000_000, "s"),
            (1_000_000, "ms"),
            (1_000, "us"),
            (1, "ns"),
        ];
        let (per, name) = units
            .into_iter()
            .find(|(per, _)| nanos % per == 0)
            .unwrap_or((1, "ns"));
        write!(f, "{}{name}", nanos / per)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_bytes_and_binary_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("12B"), Ok(12));
        assert_eq!(parse_size("512KiB"), Ok(512 * 1024));
        assert_eq!(parse_size("4 MiB"), Ok(4 << 20));
        assert_eq!(parse_size("  1GiB "), Ok(1 << 30));
        assert_eq!(parse_size("2TiB"), Ok(2 << 40));
        assert_eq!(parse_size("64Mi"), Ok(64 << 20));
        assert_eq!(parse_size("1.5MiB"), Ok(3 << 19));
        assert_eq!(parse_size("4mib"), Ok(4 << 20));
    }

    #[test]
    fn sizes_in_decimal_units() {
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert_eq!(parse_size("1.2 MB"), Ok(1_200_000));
        assert_eq!(parse_size("3kB"), Ok(3_000));
        assert_eq!(parse_size("3KB"), Ok(3_000));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("1TB"), Ok(1_000_000_000_000));
    }

    #[test]
    fn single_letter_size_units_are_ambiguous() {
        for text in ["1G", "1g", "4M", "512K", "1T"] {
            let err = parse_size(text).unwrap_err();
            assert!(err.message.starts_with("ambiguous size unit"), "{text}");
        }
        let err = parse_size("1G").unwrap_err();
        assert_eq!(err.message, "ambiguous size unit `G`");
        assert_eq!(
            err.hint.as_deref(),
            Some("write \"1GiB\" (1073741824 bytes) or \"1GB\" (1000000000 bytes)")
        );
    }

    #[test]
    fn malformed_sizes_are_refused() {
        assert_eq!(parse_size("").unwrap_err().message, "empty size");
        assert_eq!(
            parse_size("MiB").unwrap_err().message,
            "`MiB` is not a size"
        );
        assert_eq!(
            parse_size("1.MiB").unwrap_err().message,
            "`1.MiB` is not a size"
        );
        assert_eq!(
            parse_size(".5MiB").unwrap_err().message,
            "`.5MiB` is not a size"
        );
        assert_eq!(
            parse_size("1.2.3").unwrap_err().message,
            "`1.2.3` is not a size"
        );
        assert_eq!(
            parse_size("-4KiB").unwrap_err().message,
            "a size must not be negative"
        );
        let err = parse_size("4 megabytes").unwrap_err();
        assert_eq!(err.message, "unknown size unit `megabytes`");
        assert_eq!(err.hint.as_deref(), Some(SIZE_UNITS_HINT));
        assert_eq!(
            parse_size("1.5B").unwrap_err().message,
            "`1.5B` is not a whole number of bytes"
        );
    }

    #[test]
    fn sizes_that_overflow_are_refused() {
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(
            parse_size("18446744073709551616").unwrap_err().message,
            "`18446744073709551616` is too large"
        );
        assert!(parse_size("16777216TiB").is_err());
        assert!(parse_size("99999999999999999999999999999999999999999").is_err());
    }

    #[test]
    fn durations_with_units() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("5min"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("250µs"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse_duration(" 10 ms "), Ok(Duration::from_millis(10)));
        assert_eq!(parse_duration("0.1s"), Ok(Duration::from_millis(100)));
    }

    #[test]
    fn durations_without_unit_are_refused_with_a_hint() {
        let err = parse_duration("1").unwrap_err();
        assert_eq!(err.message, "a duration needs a unit");
        assert_eq!(err.hint.as_deref(), Some("write \"1s\" or \"1ms\""));
    }

    #[test]
    fn malformed_durations_are_refused() {
        let err = parse_duration("3 fortnights").unwrap_err();
        assert_eq!(err.message, "unknown duration unit `fortnights`");
        assert_eq!(err.hint.as_deref(), Some(DURATION_UNITS_HINT));
        assert_eq!(
            parse_duration("1S").unwrap_err().message,
            "unknown duration unit `S`"
        );
        assert_eq!(
            parse_duration("-1s").unwrap_err().message,
            "a duration must not be negative"
        );
        assert_eq!(
            parse_duration("0.5ns").unwrap_err().message,
            "`0.5ns` is not a whole number of nanoseconds"
        );
        assert_eq!(
            parse_duration("s").unwrap_err().message,
            "`s` is not a duration"
        );
    }

    #[test]
    fn sizes_and_durations_display_in_their_largest_whole_unit() {
        assert_eq!(Size(4 << 20).to_string(), "4 MiB");
        assert_eq!(Size(1536).to_string(), "1536 bytes");
        assert_eq!(Size(64 << 30).to_string(), "64 GiB");
        assert_eq!(Size(1_200_000).to_string(), "1200000 bytes");
        assert_eq!(Size(1).to_string(), "1 byte");
        assert_eq!(Time(Duration::from_millis(500)).to_string(), "500ms");
        assert_eq!(Time(Duration::from_millis(1500)).to_string(), "1500ms");
        assert_eq!(Time(Duration::from_secs(60)).to_string(), "1m");
        assert_eq!(Time(Duration::ZERO).to_string(), "0s");
    }
}
