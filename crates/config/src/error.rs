//! The one error type of this crate: where in which file, which key, what is
//! wrong and, where there is something useful to say, how to fix it.

use std::fmt;
use std::path::PathBuf;

/// A configuration that cannot be used, located in its file.
///
/// Displayed in the form compilers use, so that editors and terminals can
/// jump to it:
///
/// ```text
/// config/edgerec.toml:12:1: storage.blok_size: unknown key; did you mean `block_size`? (valid keys: backend, block_size, ...)
/// ```
///
/// that is `path:line:column: key: message; hint`, leaving out the parts that
/// are `None`. Lines and columns count from 1; a column counts characters,
/// not bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, as given to [`Config::load`](crate::Config::load) or
    /// [`Config::parse`](crate::Config::parse).
    pub path: PathBuf,
    /// 1-based line of what the error is about: the value for a wrong or
    /// out-of-range value, the key for an unknown key, the table's header
    /// (or inline table's `{`) for a missing key. `None` only when the file
    /// could not be read at all.
    pub line: Option<usize>,
    /// 1-based column, in characters, on `line`.
    pub column: Option<usize>,
    /// The dotted key the error is about: `"storage.block_size"`,
    /// `"sources.synthetic[2].rate"`. `None` for syntax errors and for
    /// errors reading the file.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it: the nearest valid key, the accepted spellings, an
    /// example value.
    pub hint: Option<String>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        write!(f, ": ")?;
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        write!(f, "{}", self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |nl| nl + 1);
    let line = before.matches('\n').count() + 1;
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(line: Option<usize>, key: Option<&str>, hint: Option<&str>) -> ConfigError {
        ConfigError {
            path: PathBuf::from("config/edgerec.toml"),
            line,
            column: line.map(|_| 1),
            key: key.map(str::to_owned),
            message: "unknown key".to_owned(),
            hint: hint.map(str::to_owned),
        }
    }

    #[test]
    fn display_has_every_part_in_compiler_order() {
        let err = error(
            Some(12),
            Some("storage.blok_size"),
            Some("did you mean `block_size`?"),
        );
        assert_eq!(
            err.to_string(),
            "config/edgerec.toml:12:1: storage.blok_size: unknown key; did you mean `block_size`?"
        );
    }

    #[test]
    fn display_leaves_out_missing_parts() {
        assert_eq!(
            error(None, None, None).to_string(),
            "config/edgerec.toml: unknown key"
        );
        assert_eq!(
            error(Some(3), None, None).to_string(),
            "config/edgerec.toml:3:1: unknown key"
        );
    }

    #[test]
    fn line_column_counts_characters_from_one() {
        let text = "a = 1\nµ = \"é\"\n";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 4), (1, 5));
        assert_eq!(line_column(text, 6), (2, 1));
        // `=` after the two-byte `µ` and a space is the third character.
        assert_eq!(line_column(text, 9), (2, 3));
        assert_eq!(line_column(text, text.len()), (3, 1));
        assert_eq!(line_column(text, text.len() + 10), (3, 1));
    }
}
