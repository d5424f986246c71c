//! `export csv`: one topic as CSV, a row per message. The first column is
//! `log_time` (ns since the epoch); the rest are the message's scalars
//! named by path (`header.stamp.sec`, `linear_acceleration.x`,
//! `ranges[3]`), the header stamp first, or with `--fields` the paths the
//! list names. The columns are fixed by the first message; a later
//! message lacking one (a shorter sequence) leaves its cell empty, and
//! scalars a later message has beyond them (a longer sequence) are counted
//! in the report, not added.

use std::collections::{HashMap, HashSet};
use std::io::Write;

use edgerec_format::print::{csv_cell, flatten, FieldSelection};
use edgerec_format::value::Value;

use crate::error::{MessageError, Result, ToolError};
use crate::open::Input;
use crate::walk::{walk, DecodeIssue, Msg, Selection};

/// What `export csv` wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CsvReport {
    /// Rows (messages).
    pub rows: u64,
    /// Columns, `log_time` included.
    pub columns: usize,
    /// Messages with values past the first message's columns (dropped).
    pub wider_rows: u64,
}

/// Writes the messages of `topic` that `sel` admits to `out` as CSV.
pub fn export_csv<W: Write>(
    input: &Input,
    topic: &str,
    fields: Option<&FieldSelection>,
    sel: &Selection,
    out: &mut W,
) -> Result<CsvReport> {
    let mut sel = sel.clone();
    sel.topics = Some([topic.to_owned()].into_iter().collect());
    crate::walk::check_topics(
        input,
        sel.topics.as_ref().map_or(&Default::default(), |t| t),
    )?;
    let path = input.path().to_path_buf();
    let out_err = |e: std::io::Error| ToolError::Io {
        path: "the CSV output".into(),
        source: e,
    };
    let mut columns: Option<Vec<String>> = None;
    let mut known: HashSet<String> = HashSet::new();
    let mut rep = CsvReport::default();
    let mut line = String::new();
    walk(input, &sel, |m: &Msg<'_>| {
        let value = m.decoder.decode(m.data).map_err(|issue| match issue {
            DecodeIssue::Definition(why) => ToolError::Definition {
                topic: m.topic.to_owned(),
                type_name: m.type_name.to_owned(),
                why,
            },
            DecodeIssue::Payload(e) => ToolError::Decode(Box::new(MessageError {
                path: path.clone(),
                topic: m.topic.to_owned(),
                type_name: m.type_name.to_owned(),
                time_ns: m.log_time,
                place: m.place.to_string(),
                why: format!("does not decode: {e}"),
            })),
        })?;
        let cells: Vec<(String, Option<Value<'_>>)> = match fields {
            Some(f) => f.columns(&value),
            None => flatten(&value)
                .into_iter()
                .map(|(n, v)| (n, Some(v)))
                .collect(),
        };
        line.clear();
        match &columns {
            None => {
                line.push_str("log_time");
                for (name, _) in &cells {
                    line.push(',');
                    line.push_str(&csv_cell(Some(&Value::Str(name.as_str().into()))));
                }
                line.push('\n');
                line.push_str(&m.log_time.to_string());
                for (_, v) in &cells {
                    line.push(',');
                    line.push_str(&csv_cell(v.as_ref()));
                }
                rep.columns = cells.len() + 1;
                known = cells.iter().map(|(n, _)| n.clone()).collect();
                columns = Some(cells.into_iter().map(|(n, _)| n).collect());
            }
            Some(names) => {
                line.push_str(&m.log_time.to_string());
                let same =
                    cells.len() == names.len() && cells.iter().zip(names).all(|((a, _), b)| a == b);
                if same {
                    for (_, v) in &cells {
                        line.push(',');
                        line.push_str(&csv_cell(v.as_ref()));
                    }
                } else {
                    let by_name: HashMap<&str, &Option<Value<'_>>> =
                        cells.iter().map(|(n, v)| (n.as_str(), v)).collect();
                    if cells.iter().any(|(n, _)| !known.contains(n)) {
                        rep.wider_rows += 1;
                    }
                    for n in names {
                        line.push(',');
                        line.push_str(&csv_cell(by_name.get(n.as_str()).and_then(|v| v.as_ref())));
                    }
                }
            }
        }
        line.push('\n');
        out.write_all(line.as_bytes()).map_err(out_err)?;
        rep.rows += 1;
        Ok(())
    })?;
    out.flush().map_err(out_err)?;
    Ok(rep)
}
