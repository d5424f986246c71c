//! Prints decoded messages ([`MsgValue`] trees, ROS 1 and ROS 2 alike):
//! one JSON object a line for `cat`, and named scalar columns for
//! `export csv`.
//!
//! JSON: members in wire order; byte arrays as arrays of numbers, like
//! other arrays; integers exact (a `uint64` above 2^53 stays exact in the
//! text even where a JavaScript reader would round it); `float32` values as
//! the exact `float64` they widen to (`0.10000000149011612`, as ROS 1's
//! Python reader prints them); and since JSON has no NaN or infinity,
//! those are the strings `"NaN"`, `"Infinity"` and `"-Infinity"` (the
//! words Python's `json` uses), not `null`, so they stay apart from each
//! other and from a missing value.
//!
//! CSV: [`flatten`] names each scalar by its path (`header.stamp.sec`,
//! `position.x`, `ranges[0]`, `data[3]` for a byte) and puts the header
//! stamp first when the message has one; [`FieldSelection`] picks the
//! columns of `--fields a.b,c[0]`; [`csv_cell`] writes one value.
//!
//! ```
//! use std::borrow::Cow;
//! use edgerec_format::print::{flatten, json_line, FieldSelection};
//! use edgerec_format::value::{MsgValue, Value};
//!
//! let m = MsgValue::Struct(vec![
//!     (Cow::Borrowed("ranges"), MsgValue::Array(vec![MsgValue::Float(1.5), MsgValue::Float(f64::NAN)])),
//!     (Cow::Borrowed("header"), MsgValue::Struct(vec![
//!         (Cow::Borrowed("stamp"), MsgValue::Struct(vec![(Cow::Borrowed("sec"), MsgValue::Int(7))])),
//!     ])),
//! ]);
//! assert_eq!(json_line(&m), r#"{"ranges":[1.5,"NaN"],"header":{"stamp":{"sec":7}}}"#);
//! let cols = flatten(&m);
//! assert_eq!(cols[0], ("header.stamp.sec".to_owned(), Value::Int(7)));
//! assert_eq!(cols[1].0, "ranges[0]");
//! let pick = FieldSelection::parse("ranges[1], header.stamp").unwrap();
//! let names: Vec<String> = pick.columns(&m).into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["ranges[1]", "header.stamp.sec"]);
//! ```

use std::borrow::Cow;
use std::io;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

use crate::cdr_read::{split_path, PathError};
use crate::value::{MsgValue, Value};

impl Serialize for MsgValue<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            MsgValue::Bool(b) => s.serialize_bool(*b),
            MsgValue::Int(i) => s.serialize_i64(*i),
            MsgValue::UInt(u) => s.serialize_u64(*u),
            MsgValue::Float(f) => serialize_float(*f, s),
            MsgValue::Str(text) => s.serialize_str(text),
            MsgValue::Bytes(bytes) => {
                let mut seq = s.serialize_seq(Some(bytes.len()))?;
                for b in bytes.iter() {
                    seq.serialize_element(b)?;
                }
                seq.end()
            }
            MsgValue::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            MsgValue::Struct(members) => {
                let mut map = s.serialize_map(Some(members.len()))?;
                for (name, value) in members {
                    map.serialize_entry(name.as_ref(), value)?;
                }
                map.end()
            }
        }
    }
}

fn serialize_float<S: Serializer>(f: f64, s: S) -> Result<S::Ok, S::Error> {
    if f.is_nan() {
        s.serialize_str("NaN")
    } else if f == f64::INFINITY {
        s.serialize_str("Infinity")
    } else if f == f64::NEG_INFINITY {
        s.serialize_str("-Infinity")
    } else {
        s.serialize_f64(f)
    }
}

/// Writes `value` as one line of JSON, newline included.
pub fn write_json_line<W: io::Write>(mut w: W, value: &MsgValue<'_>) -> io::Result<()> {
    serde_json::to_writer(&mut w, value).map_err(io::Error::from)?;
    w.write_all(b"\n")
}

/// `value` as JSON text on one line, without the newline.
pub fn json_line(value: &MsgValue<'_>) -> String {
    let mut buf = Vec::new();
    // Writing to a Vec cannot fail, and our Serialize never errors.
    if serde_json::to_writer(&mut buf, value).is_err() {
        return String::new();
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// Every scalar of `value` with its path as the column name: members by
/// name joined with `.`, elements (bytes too) by `[i]`; a scalar root is
/// named `value`. The columns of `header.stamp` come first when the
/// message has them; the rest keep wire order.
pub fn flatten<'v>(value: &'v MsgValue<'_>) -> Vec<(String, Value<'v>)> {
    let mut out = Vec::new();
    let mut name = String::new();
    if value.scalar().is_some() {
        name.push_str("value");
    }
    push_leaves(value, &mut name, &mut out);
    let stamp = |n: &str| n.starts_with("header.stamp.");
    if out.iter().any(|(n, _)| stamp(n)) && !out.first().is_some_and(|(n, _)| stamp(n)) {
        let (mut first, rest): (Vec<_>, Vec<_>) = out.into_iter().partition(|(n, _)| stamp(n));
        first.extend(rest);
        return first;
    }
    out
}

/// Appends the scalars under `value` to `out`, names prefixed by `name`.
fn push_leaves<'v>(value: &'v MsgValue<'_>, name: &mut String, out: &mut Vec<(String, Value<'v>)>) {
    let len = name.len();
    match value {
        MsgValue::Struct(members) => {
            for (member, v) in members {
                if !name.is_empty() {
                    name.push('.');
                }
                name.push_str(member);
                push_leaves(v, name, out);
                name.truncate(len);
            }
        }
        MsgValue::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                name.push_str(&format!("[{i}]"));
                push_leaves(v, name, out);
                name.truncate(len);
            }
        }
        MsgValue::Bytes(bytes) => {
            for (i, b) in bytes.iter().enumerate() {
                out.push((format!("{name}[{i}]"), Value::UInt((*b).into())));
            }
        }
        leaf => {
            if let Some(v) = leaf.scalar() {
                out.push((name.clone(), v));
            }
        }
    }
}

/// Why a `--fields` list did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{selector}`: {error} (at character {})", .error.offset)]
pub struct SelectionError {
    /// The selector as written.
    pub selector: String,
    /// What is wrong, where in the selector.
    pub error: PathError,
}

/// One step of a selector: a member, maybe indexed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    name: String,
    index: Option<usize>,
}

/// The fields a `--fields a.b,c[0]` list names, in its order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSelection {
    selectors: Vec<(String, Vec<Step>)>,
}

impl FieldSelection {
    /// Parses a comma-separated list of paths (`name` or `name[N]` parts
    /// joined by `.`); spaces around each path are ignored.
    pub fn parse(spec: &str) -> Result<FieldSelection, SelectionError> {
        let mut selectors = Vec::new();
        for raw in spec.split(',') {
            let text = raw.trim();
            let err = |error| SelectionError {
                selector: text.to_owned(),
                error,
            };
            let parts = split_path(text).map_err(err)?;
            let mut steps = Vec::with_capacity(parts.len());
            for p in parts {
                let index = match p.index {
                    None => None,
                    Some(i) => Some(usize::try_from(i).map_err(|_| {
                        err(PathError {
                            offset: p.index_at,
                            kind: crate::cdr_read::PathErrorKind::Syntax("the index is too large"),
                        })
                    })?),
                };
                steps.push(Step {
                    name: p.name.to_owned(),
                    index,
                });
            }
            selectors.push((text.to_owned(), steps));
        }
        Ok(FieldSelection { selectors })
    }

    /// The paths as written.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.selectors.iter().map(|(t, _)| t.as_str())
    }

    /// The columns the selection names in `value`, in selection order: a
    /// path to a scalar is one column, a path to a message or array is the
    /// [`flatten`]ed columns under it (names from the root), and a path
    /// this message does not have (an index past the end of this
    /// message's sequence, a member of another type) is one column named
    /// as written with no value, so CSV rows keep their columns.
    pub fn columns<'v>(&self, value: &'v MsgValue<'_>) -> Vec<(String, Option<Value<'v>>)> {
        let mut out = Vec::new();
        for (text, steps) in &self.selectors {
            match find(value, steps) {
                None => out.push((text.clone(), None)),
                Some(Found::Scalar(v)) => out.push((text.clone(), Some(v))),
                Some(Found::Tree(tree)) => {
                    let mut name = text.clone();
                    let mut cols = Vec::new();
                    push_leaves(tree, &mut name, &mut cols);
                    out.extend(cols.into_iter().map(|(n, v)| (n, Some(v))));
                }
            }
        }
        out
    }
}

/// What a path names: a subtree, or one byte of a byte array.
enum Found<'v, 'a> {
    Tree(&'v MsgValue<'a>),
    Scalar(Value<'v>),
}

fn find<'v, 'a>(root: &'v MsgValue<'a>, steps: &[Step]) -> Option<Found<'v, 'a>> {
    let mut at = root;
    for (n, step) in steps.iter().enumerate() {
        let member = at.get(&step.name)?;
        at = match (step.index, member) {
            (None, v) => v,
            (Some(i), MsgValue::Array(items)) => items.get(i)?,
            (Some(i), MsgValue::Bytes(bytes)) => {
                let b = bytes.get(i)?;
                // A byte has no members.
                return (n + 1 == steps.len()).then(|| Found::Scalar(Value::UInt((*b).into())));
            }
            (Some(_), _) => return None,
        };
    }
    Some(match at.scalar() {
        Some(v) => Found::Scalar(v),
        None => Found::Tree(at),
    })
}

/// One CSV cell (RFC 4180): numbers as Rust writes them (floats in their
/// shortest exact form: `0.1`, `1e300`, `NaN`, `inf`, `-inf`), booleans as
/// `true`/`false`, strings quoted when they hold a comma, quote, CR or LF.
/// A missing value is an empty cell.
pub fn csv_cell(v: Option<&Value<'_>>) -> Cow<'static, str> {
    match v {
        None => Cow::Borrowed(""),
        Some(Value::Bool(b)) => Cow::Borrowed(if *b { "true" } else { "false" }),
        Some(Value::Int(i)) => Cow::Owned(i.to_string()),
        Some(Value::UInt(u)) => Cow::Owned(u.to_string()),
        Some(Value::Float(f)) => Cow::Owned(format!("{f:?}")),
        Some(Value::Str(s)) => {
            if s.contains([',', '"', '\r', '\n']) {
                Cow::Owned(format!("\"{}\"", s.replace('"', "\"\"")))
            } else {
                Cow::Owned(s.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &'static str) -> Cow<'static, str> {
        Cow::Borrowed(s)
    }

    fn odometry_like() -> MsgValue<'static> {
        MsgValue::Struct(vec![
            (b("status"), MsgValue::Int(-1)),
            (
                b("header"),
                MsgValue::Struct(vec![
                    (
                        b("stamp"),
                        MsgValue::Struct(vec![
                            (b("secs"), MsgValue::UInt(10)),
                            (b("nsecs"), MsgValue::UInt(20)),
                        ]),
                    ),
                    (b("frame_id"), MsgValue::Str(b("map, \"odom\""))),
                ]),
            ),
            (
                b("position"),
                MsgValue::Struct(vec![(b("x"), MsgValue::Float(0.1))]),
            ),
            (
                b("ranges"),
                MsgValue::Array(vec![
                    MsgValue::Float(f64::INFINITY),
                    MsgValue::Float(f64::NEG_INFINITY),
                ]),
            ),
            (b("data"), MsgValue::Bytes(Cow::Borrowed(&[0, 255]))),
            (
                b("points"),
                MsgValue::Array(vec![MsgValue::Struct(vec![(
                    b("ok"),
                    MsgValue::Bool(true),
                )])]),
            ),
            (b("big"), MsgValue::UInt(u64::MAX)),
        ])
    }

    #[test]
    fn json_keeps_order_exact_integers_and_names_non_finite_floats() {
        let line = json_line(&odometry_like());
        assert_eq!(
            line,
            r#"{"status":-1,"header":{"stamp":{"secs":10,"nsecs":20},"frame_id":"map, \"odom\""},"position":{"x":0.1},"ranges":["Infinity","-Infinity"],"data":[0,255],"points":[{"ok":true}],"big":18446744073709551615}"#
        );
        let mut out = Vec::new();
        write_json_line(&mut out, &odometry_like()).unwrap();
        assert_eq!(out, format!("{line}\n").into_bytes());
        let parsed: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["big"], serde_json::json!(u64::MAX));
    }

    #[test]
    fn flatten_names_paths_and_puts_the_stamp_first() {
        let m = odometry_like();
        let cols = flatten(&m);
        let names: Vec<&str> = cols.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "header.stamp.secs",
                "header.stamp.nsecs",
                "status",
                "header.frame_id",
                "position.x",
                "ranges[0]",
                "ranges[1]",
                "data[0]",
                "data[1]",
                "points[0].ok",
                "big",
            ]
        );
        assert_eq!(cols[7].1, Value::UInt(0));
        assert_eq!(
            flatten(&MsgValue::Int(3)),
            [("value".to_owned(), Value::Int(3))]
        );
    }

    #[test]
    fn selection_picks_scalars_subtrees_and_marks_missing() {
        let m = odometry_like();
        let sel =
            FieldSelection::parse("position.x, header.stamp,data[1],ranges[5],nope,data[0].x")
                .unwrap();
        assert_eq!(
            sel.paths().collect::<Vec<_>>(),
            [
                "position.x",
                "header.stamp",
                "data[1]",
                "ranges[5]",
                "nope",
                "data[0].x"
            ]
        );
        let cols = sel.columns(&m);
        assert_eq!(
            cols,
            [
                ("position.x".to_owned(), Some(Value::Float(0.1))),
                ("header.stamp.secs".to_owned(), Some(Value::UInt(10))),
                ("header.stamp.nsecs".to_owned(), Some(Value::UInt(20))),
                ("data[1]".to_owned(), Some(Value::UInt(255))),
                ("ranges[5]".to_owned(), None),
                ("nope".to_owned(), None),
                ("data[0].x".to_owned(), None),
            ]
        );
        let err = FieldSelection::parse("a,b[x]").unwrap_err();
        assert_eq!(err.selector, "b[x]");
        assert_eq!(err.error.offset, 2);
        assert!(FieldSelection::parse("a,,b").is_err());
    }

    #[test]
    fn csv_cells() {
        assert_eq!(csv_cell(None), "");
        assert_eq!(csv_cell(Some(&Value::Float(0.1))), "0.1");
        assert_eq!(csv_cell(Some(&Value::Float(1e300))), "1e300");
        assert_eq!(csv_cell(Some(&Value::Float(f64::NAN))), "NaN");
        assert_eq!(csv_cell(Some(&Value::Int(-4))), "-4");
        assert_eq!(csv_cell(Some(&Value::Bool(false))), "false");
        assert_eq!(csv_cell(Some(&Value::Str(b("plain")))), "plain");
        assert_eq!(csv_cell(Some(&Value::Str(b("a,\"b\"")))), "\"a,\"\"b\"\"\"");
    }
}
