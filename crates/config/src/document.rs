//! From TOML text to a validated [`Config`]: the parsed document (which
//! keeps the byte span of every key and value) is walked table by table
//! against the schema (`config.rs`), so that every error, whether a misspelt
//! key, a wrong type or a value out of range, points at the line and column
//! it is about. This file holds the walking and the readers of plain values
//! (strings, integers, sizes, durations, choices); the schema says which key
//! is read how.

use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use toml_edit::{Item, TableLike, Value};

use crate::error::line_column;
use crate::schema::{self, Result, Section};
use crate::units::{parse_duration, parse_size, Size, Time, UnitError};
use crate::{Config, ConfigError};

pub(crate) fn parse(text: &str, origin: &Path, rooms: &crate::Rooms) -> Result<Config> {
    let cx = Cx { text, origin };
    let document = toml_edit::Document::parse(text).map_err(|err| cx.syntax_error(&err))?;
    let root = Table {
        path: String::new(),
        name: "the top level".to_owned(),
        table: document.as_table(),
        span: None,
    };
    let config = Config::read(&cx, &root)?;
    crate::rooms::check(&cx, &root, &config, rooms)?;
    Ok(config)
}

/// A table of the document (a `[header]` table, an inline table, a dotted
/// table or the root) with the dotted path that leads to it.
pub(crate) struct Table<'d> {
    /// `"storage"`, `"sources.synthetic[2]"`; empty for the root.
    pub(crate) path: String,
    /// How a message names the table: `"[storage]"`, `"the top level"`.
    pub(crate) name: String,
    pub(crate) table: &'d dyn TableLike,
    pub(crate) span: Option<Range<usize>>,
}

/// A key of a [`Table`] and its value.
pub(crate) struct Field<'d> {
    /// Dotted path: `"storage.block_size"`.
    pub(crate) key: String,
    /// The key as written in its table: `"block_size"`.
    name: &'d str,
    key_span: Option<Range<usize>>,
    pub(crate) item: &'d Item,
}

impl<'d> Field<'d> {
    /// Where a message about the value points: the value, else its key.
    pub(crate) fn span(&self) -> Option<Range<usize>> {
        self.item.span().or_else(|| self.key_span.clone())
    }

    /// The value as a table, which messages name `[key]`.
    pub(crate) fn table(&self, cx: &Cx) -> Result<Table<'d>> {
        match self.item.as_table_like() {
            Some(table) => Ok(Table {
                span: self.span(),
                path: self.key.clone(),
                name: format!("[{}]", self.name),
                table,
            }),
            None => Err(cx.at(
                self,
                format!("expected a table, found {}", a(self.item.type_name())),
                Some(format!(
                    "write [{}] and its keys on the lines below it",
                    self.name
                )),
            )),
        }
    }

    /// The entries of an array of tables, written either as `[[key]]`
    /// tables or as an inline array of inline tables; `entry` says what one
    /// entry is ("channel").
    pub(crate) fn entries(&self, cx: &Cx, entry: &str) -> Result<Vec<Table<'d>>> {
        let name = format!("[[{}]]", self.key);
        let table = |index: usize, table: &'d dyn TableLike, span: Option<Range<usize>>| Table {
            path: format!("{}[{index}]", self.key),
            name: name.clone(),
            table,
            span,
        };
        match self.item {
            Item::ArrayOfTables(array) => Ok(array
                .iter()
                .enumerate()
                .map(|(index, entry)| table(index, entry, entry.span()))
                .collect()),
            Item::Value(Value::Array(array)) => array
                .iter()
                .enumerate()
                .map(|(index, value)| match value.as_inline_table() {
                    Some(entry) => Ok(table(index, entry, value.span())),
                    None => Err(cx.error(
                        value.span(),
                        Some(format!("{}[{index}]", self.key)),
                        format!("expected a table, found {}", a(value.type_name())),
                        None,
                    )),
                })
                .collect(),
            item => Err(cx.at(
                self,
                format!("expected an array of tables, found {}", a(item.type_name())),
                Some(format!(
                    "write one {name} table (double brackets) per {entry}"
                )),
            )),
        }
    }
}

impl<'d> Table<'d> {
    fn key_path(&self, key: &str) -> String {
        schema::join(&self.path, key)
    }

    /// The key `key` and its value, `None` when absent.
    pub(crate) fn field(&self, key: &str) -> Option<Field<'d>> {
        let (found, item) = self.table.get_key_value(key)?;
        Some(Field {
            key: self.key_path(key),
            name: found.get(),
            key_span: found.span(),
            item,
        })
    }

    /// The key `key` of the table `table` below this one, `None` when
    /// either is absent or `table` is not a table.
    pub(crate) fn field_in(&self, table: &str, key: &str) -> Option<Field<'d>> {
        let table = self.field(table)?;
        let (found, item) = table.item.as_table_like()?.get_key_value(key)?;
        Some(Field {
            key: schema::join(&table.key, key),
            name: found.get(),
            key_span: found.span(),
            item,
        })
    }

    /// The error for the required key `key`, which the table lacks; it
    /// points at the table's header.
    pub(crate) fn missing(&self, cx: &Cx, key: &str, hint: &str) -> ConfigError {
        cx.error(
            self.span.clone(),
            Some(self.key_path(key)),
            format!("missing required key `{key}`"),
            Some(hint.to_owned()),
        )
    }

    /// Refuses the first key that is not in `valid`, suggesting the nearest
    /// valid one, or the table it belongs in.
    pub(crate) fn check_keys(&self, cx: &Cx, valid: &[&str]) -> Result<()> {
        for (key, _) in self.table.iter() {
            if valid.contains(&key) {
                continue;
            }
            let listing = valid.join(", ");
            let hint = if let Some(near) = nearest(key, valid.iter().copied()) {
                format!("did you mean `{near}`? (valid keys: {listing})")
            } else if let Some(home) = schema::tables()
                .into_iter()
                .find(|home| home.keys.contains(&key) && home.name != self.name)
            {
                format!(
                    "`{key}` belongs in {}, not {} (valid keys here: {listing})",
                    home.name, self.name
                )
            } else {
                format!("valid keys: {listing}")
            };
            let span = self.table.key(key).and_then(|k| k.span());
            return Err(cx.error(span, Some(self.key_path(key)), "unknown key", Some(hint)));
        }
        Ok(())
    }
}

/// The text being parsed and its file name, for building errors.
pub(crate) struct Cx<'t> {
    text: &'t str,
    origin: &'t Path,
}

impl Cx<'_> {
    pub(crate) fn error(
        &self,
        span: Option<Range<usize>>,
        key: Option<String>,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> ConfigError {
        let position = span.map(|span| line_column(self.text, span.start));
        ConfigError {
            path: self.origin.to_path_buf(),
            line: position.map(|(line, _)| line),
            column: position.map(|(_, column)| column),
            key,
            message: message.into(),
            hint,
        }
    }

    /// An error about `field`'s value.
    pub(crate) fn at(
        &self,
        field: &Field,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> ConfigError {
        self.error(field.span(), Some(field.key.clone()), message, hint)
    }

    /// A string value with the place of its first character: after the
    /// opening quote (one for a basic or literal string, three for a
    /// multi-line one).
    pub(crate) fn located(&self, field: &Field) -> Result<crate::Located> {
        let text = self.string(field)?;
        let start = field.span().map_or(0, |span| {
            let raw = self.text.get(span.clone()).unwrap_or("");
            let quote = if raw.starts_with("\"\"\"") || raw.starts_with("'''") {
                3
            } else {
                1
            };
            span.start + quote
        });
        let (line, column) = line_column(self.text, start);
        Ok(crate::Located {
            text: text.to_owned(),
            path: self.origin.to_path_buf(),
            key: field.key.clone(),
            line,
            column,
        })
    }

    pub(crate) fn line(&self, span: Option<Range<usize>>) -> Option<usize> {
        span.map(|span| line_column(self.text, span.start).0)
    }

    fn syntax_error(&self, err: &toml_edit::TomlError) -> ConfigError {
        let mut message = err.message().trim().to_owned();
        // toml_edit says only "duplicate key"; the span names it.
        if let Some(span) = err.span() {
            if message == "duplicate key" {
                if let Some(key) = self.text.get(span.clone()) {
                    message = format!("duplicate key `{}`", key.trim());
                }
            }
        }
        self.error(err.span(), None, message, None)
    }

    fn unit_error(&self, field: &Field, err: UnitError) -> ConfigError {
        self.at(field, err.message, err.hint)
    }

    pub(crate) fn wrong_type(
        &self,
        field: &Field,
        expected: &str,
        hint: Option<String>,
    ) -> ConfigError {
        self.at(
            field,
            format!("expected {expected}, found {}", a(field.item.type_name())),
            hint,
        )
    }

    pub(crate) fn string<'d>(&self, field: &Field<'d>) -> Result<&'d str> {
        field.item.as_str().ok_or_else(|| {
            let hint = match field.item.as_value() {
                Some(Value::Integer(_) | Value::Float(_) | Value::Boolean(_)) => field
                    .span()
                    .and_then(|span| self.text.get(span))
                    .map(|raw| format!("put it in quotes: \"{raw}\"")),
                _ => None,
            };
            self.wrong_type(field, "a string", hint)
        })
    }

    pub(crate) fn boolean(&self, field: &Field) -> Result<bool> {
        field.item.as_bool().ok_or_else(|| {
            self.wrong_type(field, "a boolean", Some("write true or false".to_owned()))
        })
    }

    pub(crate) fn integer_in(&self, field: &Field, (low, high): (i64, i64)) -> Result<i64> {
        let Some(value) = field.item.as_integer() else {
            let hint = field
                .item
                .as_str()
                .filter(|text| text.trim().parse::<i64>().is_ok())
                .map(|text| format!("write {} without quotes", text.trim()));
            return Err(self.wrong_type(field, "an integer", hint));
        };
        if !(low..=high).contains(&value) {
            return Err(self.at(
                field,
                format!("must be from {low} to {high}, got {value}"),
                None,
            ));
        }
        Ok(value)
    }

    /// A byte count: an integer, or a string with a unit.
    pub(crate) fn size(&self, field: &Field) -> Result<u64> {
        match field.item.as_value() {
            Some(Value::Integer(value)) => u64::try_from(*value.value())
                .map_err(|_| self.at(field, "a size must not be negative", None)),
            Some(Value::String(value)) => {
                parse_size(value.value()).map_err(|err| self.unit_error(field, err))
            }
            _ => Err(self.wrong_type(
                field,
                "a size (an integer in bytes or a string such as \"4MiB\")",
                None,
            )),
        }
    }

    pub(crate) fn size_in(&self, field: &Field, (low, high): (u64, u64)) -> Result<u64> {
        let size = self.size(field)?;
        if !(low..=high).contains(&size) {
            return Err(self.at(
                field,
                format!(
                    "must be from {} to {}, got {}",
                    Size(low),
                    Size(high),
                    Size(size)
                ),
                None,
            ));
        }
        Ok(size)
    }

    pub(crate) fn power_of_two_size(
        &self,
        field: &Field,
        size: u64,
        (low, high): (u64, u64),
    ) -> Result<()> {
        let in_range = (low..=high).contains(&size);
        if size.is_power_of_two() && in_range {
            return Ok(());
        }
        let hint = in_range.then(|| {
            let (below, above) = nearest_powers_of_two(size);
            format!(
                "the nearest powers of two are {} and {}",
                Size(below),
                Size(above)
            )
        });
        Err(self.at(
            field,
            format!(
                "must be a power of two from {} to {}, got {}",
                Size(low),
                Size(high),
                Size(size)
            ),
            hint,
        ))
    }

    /// A duration: a string with a unit; a bare number is refused.
    fn duration(&self, field: &Field) -> Result<Duration> {
        match field.item.as_value() {
            Some(Value::String(value)) => {
                parse_duration(value.value()).map_err(|err| self.unit_error(field, err))
            }
            Some(number @ (Value::Integer(_) | Value::Float(_))) => {
                let number = match number {
                    Value::Integer(value) => value.value().to_string(),
                    Value::Float(value) => value.value().to_string(),
                    _ => unreachable!("matched above"),
                };
                Err(self.at(
                    field,
                    "a duration needs a unit",
                    Some(format!("write \"{number}s\" or \"{number}ms\"")),
                ))
            }
            _ => Err(self.wrong_type(field, "a duration (a string such as \"500ms\")", None)),
        }
    }

    pub(crate) fn duration_in(
        &self,
        field: &Field,
        (low, high): (Duration, Duration),
    ) -> Result<Duration> {
        let duration = self.duration(field)?;
        if !(low..=high).contains(&duration) {
            return Err(self.at(
                field,
                format!(
                    "must be from {} to {}, got {}",
                    Time(low),
                    Time(high),
                    Time(duration)
                ),
                None,
            ));
        }
        Ok(duration)
    }

    /// One of `options`, spelt as `name` spells them.
    pub(crate) fn choice<T: Copy>(
        &self,
        field: &Field,
        options: &[T],
        name: fn(&T) -> &'static str,
    ) -> Result<T> {
        let names: Vec<&str> = options.iter().map(name).collect();
        let listing = names.join(", ");
        let Some(text) = field.item.as_str() else {
            return Err(self.wrong_type(
                field,
                "a string",
                Some(format!("valid values: {listing}")),
            ));
        };
        if let Some(option) = options.iter().find(|option| name(option) == text) {
            return Ok(*option);
        }
        let hint = match nearest(text, names.iter().copied()) {
            Some(near) => format!("did you mean `{near}`? (valid values: {listing})"),
            None => format!("valid values: {listing}"),
        };
        Err(self.at(field, format!("unknown value `{text}`"), Some(hint)))
    }
}

/// The candidate nearest to `word` by edit distance (a swap of two
/// neighbouring letters counting as one edit), when near enough to be what
/// was meant: within a third of the word's length, as cargo does.
pub(crate) fn nearest<'c>(
    word: &str,
    candidates: impl Iterator<Item = &'c str>,
) -> Option<&'c str> {
    let limit = word.chars().count().max(3) / 3;
    candidates
        .map(|candidate| {
            let distance = if candidate.eq_ignore_ascii_case(word) {
                0
            } else {
                strsim::damerau_levenshtein(word, candidate)
            };
            (distance, candidate)
        })
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// The powers of two just below and just above `n` (not itself one).
pub(crate) fn nearest_powers_of_two(n: u64) -> (u64, u64) {
    let above = n.checked_next_power_of_two().unwrap_or(1 << 63);
    (above / 2, above)
}

/// `"an integer"`, `"a string"`.
fn a(type_name: &str) -> String {
    let article = if type_name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {type_name}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{StorageConfig, SyntheticKind};

    #[test]
    fn nearest_finds_typos_and_ignores_strangers() {
        let keys = StorageConfig::KEYS.iter().copied();
        assert_eq!(nearest("blok_size", keys.clone()), Some("block_size"));
        assert_eq!(nearest("BACKEND", keys.clone()), Some("backend"));
        assert_eq!(nearest("queue", keys.clone()), None);
        assert_eq!(nearest("x", keys.clone()), None);
        assert_eq!(nearest("sync_intreval", keys), Some("sync_interval"));
        let types = SyntheticKind::ALL.map(|kind| kind.ros_type());
        assert_eq!(
            nearest("sensor_msgs/Imu", types.iter().copied()),
            Some("sensor_msgs/msg/Imu")
        );
    }

    #[test]
    fn articles() {
        assert_eq!(a("integer"), "an integer");
        assert_eq!(a("inline table"), "an inline table");
        assert_eq!(a("string"), "a string");
    }

    #[test]
    fn powers_of_two_around() {
        assert_eq!(nearest_powers_of_two(3000), (2048, 4096));
        assert_eq!(nearest_powers_of_two(100), (64, 128));
    }
}
