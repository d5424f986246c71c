//! The machinery behind the schema in `config.rs`. A `section!` table makes
//! each row, `name: Type = default, rule;`, into a struct field with its
//! docs, its default, its place in the table's key list and its reading; a
//! row may name its TOML key apart from its field (`kind as "type"`), add
//! `, required "hint"` (the file must set the key; the default only fills
//! the struct until it is read) and `, then check` (a cross-key check run
//! after the row whether or not the file sets the key), and a table may end
//! with `check f;`, run after all its rows. Rows are read in order and a rule
//! sees the rows above it, so a key whose range depends on another comes
//! after it. A rule is a value that implements [`Rule`]: one of those below
//! (`duration(ms(10)..=secs(60))`, `int(1..=128)`, `choice(..)`, `table()`,
//! `array_of_tables(..)`) or a reader of its own (`readers.rs`).

use std::marker::PhantomData;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use crate::document::{nearest_powers_of_two, Cx, Field, Table};
use crate::error::ConfigError;

pub(crate) type Result<T> = std::result::Result<T, ConfigError>;

/// A TOML table of the schema: a struct made by `section!`.
pub(crate) trait Section: Sized {
    /// The table's keys, in the order of its rows.
    const KEYS: &'static [&'static str];

    /// Reads the table, refusing a key that is not in [`Section::KEYS`].
    fn read(cx: &Cx, table: &Table) -> Result<Self>;

    /// Adds the tables nested in this one, whose dotted path is `path`.
    fn tables(path: &str, out: &mut Vec<TableKeys>);
}

/// A table and its keys, to tell where a key written in the wrong table
/// belongs.
#[derive(Debug)]
pub(crate) struct TableKeys {
    /// How messages name the table: `"[storage]"`, `"[[sources.synthetic]]"`.
    pub(crate) name: String,
    /// Its keys, in the order of the schema's rows.
    pub(crate) keys: &'static [&'static str],
}

/// Every table of the configuration below the top level, depth first in
/// the order of the schema's rows.
pub(crate) fn tables() -> Vec<TableKeys> {
    let mut out = Vec::new();
    <crate::Config as Section>::tables("", &mut out);
    out
}

/// How one key's value is read from the file into a `T` of the table `C`.
pub(crate) trait Rule<C, T> {
    /// Reads `field`; `config` holds the values of the rows above it (and
    /// defaults below).
    fn read(&self, cx: &Cx, field: &Field, config: &C) -> Result<T>;

    /// Adds the tables this key holds, when it holds any; `path` is the
    /// key's dotted path.
    fn tables(&self, _path: &str, _out: &mut Vec<TableKeys>) {}
}

/// `rule.read(...)`, with the table and value types taken from the row.
pub(crate) fn read_row<C, T, R: Rule<C, T>>(
    rule: &R,
    cx: &Cx,
    field: &Field,
    config: &C,
) -> Result<T> {
    rule.read(cx, field, config)
}

/// `rule.tables(...)`, with the table and value types taken from the row.
pub(crate) fn tables_of<C, T, R: Rule<C, T>>(rule: &R, path: &str, out: &mut Vec<TableKeys>) {
    rule.tables(path, out);
}

/// `"storage.block_size"` from `"storage"` and `"block_size"`.
pub(crate) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// A rule that is a function of the field and the rows above it.
pub(crate) struct ReadWith<F>(F);

impl<C, T, F> Rule<C, T> for ReadWith<F>
where
    F: Fn(&Cx, &Field, &C) -> Result<T>,
{
    fn read(&self, cx: &Cx, field: &Field, config: &C) -> Result<T> {
        (self.0)(cx, field, config)
    }
}

/// A rule that reads the value with `read`, which may look at the rows
/// above it.
pub(crate) fn read_with_config<C, T, F>(read: F) -> ReadWith<F>
where
    F: Fn(&Cx, &Field, &C) -> Result<T>,
{
    ReadWith(read)
}

/// A rule that reads the value with `read`, on its own.
pub(crate) fn read<C, T>(
    read: fn(&Cx, &Field) -> Result<T>,
) -> ReadWith<impl Fn(&Cx, &Field, &C) -> Result<T>> {
    ReadWith(move |cx: &Cx, field: &Field, _: &C| read(cx, field))
}

pub(crate) const KIB: u64 = 1 << 10;
pub(crate) const MIB: u64 = 1 << 20;
pub(crate) const GIB: u64 = 1 << 30;
pub(crate) const TIB: u64 = 1 << 40;

/// `n` nanoseconds.
pub(crate) const fn ns(n: u64) -> Duration {
    Duration::from_nanos(n)
}

/// `n` microseconds.
pub(crate) const fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

/// `n` milliseconds.
pub(crate) const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `n` seconds.
pub(crate) const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// `n` minutes.
pub(crate) const fn mins(n: u64) -> Duration {
    Duration::from_secs(n * 60)
}

/// `n` hours.
pub(crate) const fn hours(n: u64) -> Duration {
    Duration::from_secs(n * 3600)
}

/// `true` or `false`.
pub(crate) fn boolean<C>() -> impl Rule<C, bool> {
    read(|cx, field| cx.boolean(field))
}

/// Any string.
pub(crate) fn string<C>() -> impl Rule<C, String> {
    read(|cx, field| cx.string(field).map(str::to_owned))
}

/// A path; empty means none.
pub(crate) fn path<C>() -> impl Rule<C, PathBuf> {
    read(|cx, field| cx.string(field).map(PathBuf::from))
}

/// A path that must be given.
pub(crate) fn non_empty_path<C>() -> impl Rule<C, PathBuf> {
    read(|cx, field| {
        let path = cx.string(field)?;
        if path.is_empty() {
            return Err(cx.at(field, "must not be empty", None));
        }
        Ok(PathBuf::from(path))
    })
}

/// An integer in `range`.
pub(crate) fn int<C, T>(range: RangeInclusive<T>) -> impl Rule<C, T>
where
    T: Copy + TryInto<i64> + TryFrom<i64>,
{
    let bounds = i64_bounds(&range);
    read_with_config(move |cx: &Cx, field: &Field, _: &C| {
        let value = cx.integer_in(field, bounds)?;
        into_row_type(cx, field, value, bounds)
    })
}

/// An integer in `range` that is a power of two.
pub(crate) fn power_of_two<C, T>(range: RangeInclusive<T>) -> impl Rule<C, T>
where
    T: Copy + TryInto<i64> + TryFrom<i64>,
{
    let bounds = i64_bounds(&range);
    read_with_config(move |cx: &Cx, field: &Field, _: &C| {
        let value = cx.integer_in(field, bounds)?;
        let unsigned = u64::try_from(value).unwrap_or(0);
        if !unsigned.is_power_of_two() {
            let (below, above) = nearest_powers_of_two(unsigned);
            return Err(cx.at(
                field,
                format!(
                    "must be a power of two from {} to {}, got {value}",
                    bounds.0, bounds.1
                ),
                Some(format!("the nearest powers of two are {below} and {above}")),
            ));
        }
        into_row_type(cx, field, value, bounds)
    })
}

/// `range` in i64, as TOML writes integers; a bound of u64 beyond i64 is
/// beyond what a file can write anyway.
fn i64_bounds<T: Copy + TryInto<i64>>(range: &RangeInclusive<T>) -> (i64, i64) {
    let low = (*range.start()).try_into().unwrap_or(i64::MAX);
    let high = (*range.end()).try_into().unwrap_or(i64::MAX);
    (low, high)
}

/// `value`, read within `bounds`, as the row's type. The bounds are written
/// in that type, so it fits; the error is for a range that was not.
fn into_row_type<T: TryFrom<i64>>(
    cx: &Cx,
    field: &Field,
    value: i64,
    (low, high): (i64, i64),
) -> Result<T> {
    T::try_from(value).map_err(|_| {
        cx.at(
            field,
            format!("must be from {low} to {high}, got {value}"),
            None,
        )
    })
}

/// A size (bytes, or a string with a unit), any.
pub(crate) fn bytes<C>() -> impl Rule<C, u64> {
    read(|cx, field| cx.size(field))
}

/// A size in `range`.
pub(crate) fn size<C>(range: RangeInclusive<u64>) -> impl Rule<C, u64> {
    let bounds = (*range.start(), *range.end());
    read_with_config(move |cx: &Cx, field: &Field, _: &C| cx.size_in(field, bounds))
}

/// A size in `range` that is a power of two.
pub(crate) fn power_of_two_size<C>(range: RangeInclusive<u64>) -> impl Rule<C, u64> {
    let bounds = (*range.start(), *range.end());
    read_with_config(move |cx: &Cx, field: &Field, _: &C| {
        let size = cx.size(field)?;
        cx.power_of_two_size(field, size, bounds)?;
        Ok(size)
    })
}

/// A duration (a string with a unit) in `range`.
pub(crate) fn duration<C>(range: RangeInclusive<Duration>) -> impl Rule<C, Duration> {
    let bounds = (*range.start(), *range.end());
    read_with_config(move |cx: &Cx, field: &Field, _: &C| cx.duration_in(field, bounds))
}

/// One of `options`, spelt as `name` spells them.
pub(crate) fn choice<C, T: Copy + 'static>(
    options: &'static [T],
    name: fn(&T) -> &'static str,
) -> impl Rule<C, T> {
    read_with_config(move |cx: &Cx, field: &Field, _: &C| cx.choice(field, options, name))
}

/// A table of its own: `[storage]`.
pub(crate) struct Subtable<T>(PhantomData<fn() -> T>);

/// The key holds a table, read by its own `section!`.
pub(crate) fn table<T: Section>() -> Subtable<T> {
    Subtable(PhantomData)
}

impl<C, T: Section> Rule<C, T> for Subtable<T> {
    fn read(&self, cx: &Cx, field: &Field, _: &C) -> Result<T> {
        T::read(cx, &field.table(cx)?)
    }

    fn tables(&self, path: &str, out: &mut Vec<TableKeys>) {
        out.push(TableKeys {
            name: format!("[{path}]"),
            keys: T::KEYS,
        });
        T::tables(path, out);
    }
}

/// Checks an entry of an array of tables against those before it: it is
/// given the entries read so far, the new one last.
pub(crate) type EachEntry<T> = fn(&Cx, &[Table], &[T]) -> Result<()>;

/// An array of tables: `[[sources.synthetic]]`.
pub(crate) struct ArrayOfTables<T> {
    /// What one entry is, for the hint: "channel".
    entry: &'static str,
    each: EachEntry<T>,
}

/// The key holds an array of tables, each read by its own `section!` and
/// then checked by `each`.
pub(crate) fn array_of_tables<T: Section>(
    entry: &'static str,
    each: EachEntry<T>,
) -> ArrayOfTables<T> {
    ArrayOfTables { entry, each }
}

impl<C, T: Section> Rule<C, Vec<T>> for ArrayOfTables<T> {
    fn read(&self, cx: &Cx, field: &Field, _: &C) -> Result<Vec<T>> {
        let entries = field.entries(cx, self.entry)?;
        let mut values = Vec::with_capacity(entries.len());
        for (index, entry) in entries.iter().enumerate() {
            values.push(T::read(cx, entry)?);
            (self.each)(cx, &entries[..=index], &values)?;
        }
        Ok(values)
    }

    fn tables(&self, path: &str, out: &mut Vec<TableKeys>) {
        out.push(TableKeys {
            name: format!("[[{path}]]"),
            keys: T::KEYS,
        });
        T::tables(path, out);
    }
}

/// The TOML key of a row: the field's name, or the name after `as`.
macro_rules! key {
    ($field:ident) => {
        stringify!($field)
    };
    ($field:ident $key:literal) => {
        $key
    };
}
pub(crate) use key;

/// One TOML table, one row per key: see the module's docs.
macro_rules! section {
    (
        $(#[$meta:meta])*
        pub struct $name:ident $(with $default:ident)? {
            $(
                $(#[doc = $doc:literal])*
                $field:ident $(as $key:literal)?: $ty:ty = $init:expr, $rule:expr
                    $(, required $hint:expr)?
                    $(, then $then:expr)?;
            )*
        }
        $(check $check:expr;)?
    ) => {
        $(#[$meta])*
        pub struct $name {
            $(
                $(#[doc = $doc])*
                pub $field: $ty,
            )*
        }

        impl $name {
            /// Every key at its default, a required one at a value that
            /// only stands until the key is read.
            fn seed() -> Self {
                $name {
                    $($field: $init,)*
                }
            }
        }

        $(
            impl $default for $name {
                fn default() -> Self {
                    Self::seed()
                }
            }
        )?

        impl $crate::schema::Section for $name {
            const KEYS: &'static [&'static str] = &[$($crate::schema::key!($field $($key)?)),*];

            fn read(
                cx: &$crate::document::Cx,
                table: &$crate::document::Table,
            ) -> $crate::schema::Result<Self> {
                table.check_keys(cx, Self::KEYS)?;
                let mut config = Self::seed();
                $(
                    let key = $crate::schema::key!($field $($key)?);
                    match table.field(key) {
                        Some(field) => {
                            config.$field = $crate::schema::read_row(&$rule, cx, &field, &config)?;
                        }
                        None => {
                            $(return Err(table.missing(cx, key, &$hint));)?
                        }
                    }
                    $(($then)(cx, table, &config)?;)?
                )*
                $(($check)(cx, table, &config)?;)?
                Ok(config)
            }

            fn tables(path: &str, out: &mut Vec<$crate::schema::TableKeys>) {
                $(
                    $crate::schema::tables_of::<Self, $ty, _>(
                        &$rule,
                        &$crate::schema::join(path, $crate::schema::key!($field $($key)?)),
                        out,
                    );
                )*
            }
        }
    };
}
pub(crate) use section;
