//! `CHIP:LINE`, the way a configuration names a GPIO input line.

use std::path::PathBuf;
use std::time::Duration;

use super::GpioError;

/// Which edges of the line fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeSelect {
    /// Low to high.
    Rising,
    /// High to low.
    Falling,
    /// Either.
    Both,
}

/// A line on a chip: its offset, or the name the device tree gives it
/// (`gpio-line-names`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineRef {
    /// The line's offset on the chip (`17`).
    Offset(u32),
    /// The line's name (`BUTTON`), looked up when the line is requested.
    Name(String),
}

impl std::fmt::Display for LineRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LineRef::Offset(o) => write!(f, "line {o}"),
            LineRef::Name(n) => write!(f, "line \"{n}\""),
        }
    }
}

/// One GPIO input line to watch: where it is, which edges count and how
/// long a switch may bounce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineSpec {
    /// The chip's character device (`/dev/gpiochip0`).
    pub chip: PathBuf,
    /// The line on it.
    pub line: LineRef,
    /// The edges that fire. Default [`EdgeSelect::Rising`].
    pub edge: EdgeSelect,
    /// Edges closer than this to the last accepted one are dropped; also
    /// asked of the kernel, which then reports a level only once it has
    /// been stable this long. Default 50 ms.
    pub debounce: Duration,
}

impl LineSpec {
    /// Parses `CHIP:LINE`: the chip as a name under /dev (`gpiochip0`) or
    /// a path (`/dev/gpiochip2`), the line as its offset (`17`) or its name
    /// (`BUTTON`). The split is at the last `:`, so a path may hold one.
    pub fn parse(text: &str) -> Result<LineSpec, GpioError> {
        let bad = |why: &str| GpioError::Spec {
            text: text.to_owned(),
            why: why.to_owned(),
        };
        let (chip, line) = text
            .rsplit_once(':')
            .ok_or_else(|| bad("no `:` between the chip and the line"))?;
        let (chip, line) = (chip.trim(), line.trim());
        if chip.is_empty() {
            return Err(bad("the chip is missing"));
        }
        if line.is_empty() {
            return Err(bad("the line is missing"));
        }
        let chip = if chip.contains('/') {
            PathBuf::from(chip)
        } else {
            PathBuf::from("/dev").join(chip)
        };
        let line = if line.bytes().all(|b| b.is_ascii_digit()) {
            LineRef::Offset(
                line.parse()
                    .map_err(|_| bad("the line offset is too large"))?,
            )
        } else {
            LineRef::Name(line.to_owned())
        };
        Ok(LineSpec {
            chip,
            line,
            edge: EdgeSelect::Rising,
            debounce: Duration::from_millis(50),
        })
    }

    /// The same line with these edges.
    pub fn with_edge(mut self, edge: EdgeSelect) -> Self {
        self.edge = edge;
        self
    }

    /// The same line with this debounce period.
    pub fn with_debounce(mut self, debounce: Duration) -> Self {
        self.debounce = debounce;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_under_dev_and_an_offset() {
        let s = LineSpec::parse("gpiochip0:17").unwrap();
        assert_eq!(s.chip, PathBuf::from("/dev/gpiochip0"));
        assert_eq!(s.line, LineRef::Offset(17));
        assert_eq!(s.edge, EdgeSelect::Rising);
        assert_eq!(s.debounce, Duration::from_millis(50));
    }

    #[test]
    fn a_path_and_a_line_name() {
        let s = LineSpec::parse("/dev/gpiochip2:BUTTON").unwrap();
        assert_eq!(s.chip, PathBuf::from("/dev/gpiochip2"));
        assert_eq!(s.line, LineRef::Name("BUTTON".into()));
        // The last `:` splits, so a line name is never cut at a path's.
        let s = LineSpec::parse("/dev/by:id/chip:PQ.05").unwrap();
        assert_eq!(s.chip, PathBuf::from("/dev/by:id/chip"));
        assert_eq!(s.line, LineRef::Name("PQ.05".into()));
    }

    #[test]
    fn builders_set_edge_and_debounce() {
        let s = LineSpec::parse("gpiochip1:3")
            .unwrap()
            .with_edge(EdgeSelect::Both)
            .with_debounce(Duration::ZERO);
        assert_eq!((s.edge, s.debounce), (EdgeSelect::Both, Duration::ZERO));
    }

    #[test]
    fn malformed_specs_say_what_is_wrong() {
        for (text, why) in [
            ("gpiochip0", "no `:`"),
            (":17", "chip is missing"),
            ("gpiochip0:", "line is missing"),
            ("gpiochip0:99999999999", "too large"),
        ] {
            let e = LineSpec::parse(text).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains(text), "{text}: {e}");
            assert!(
                e.contains("gpiochip0:17"),
                "the example is in the message: {e}"
            );
        }
    }
}
