//! `cat`: the decoded messages of a bag, in the order they are stored, one
//! a line. With `--json` each line is one JSON object:
//! `{"topic":..,"log_time":ns,"type":..,"message":{..}}` (the message as
//! [`edgerec_format::print`] writes it: members in definition order, exact
//! integers, ROS 1 `time` as `{"secs","nsecs"}`); without it the line is
//! `SECONDS.NANOS TOPIC TYPE` and the message's JSON. A message that does
//! not decode is named on stderr (topic, time, byte offset, field) and the
//! rest are still printed; the count of such messages is the report's.

use std::io::Write;

use crate::error::{Result, ToolError};
use crate::open::Input;
use crate::walk::{walk, DecodeIssue, Msg, Selection};

/// How `cat` prints.
#[derive(Debug, Clone, Default)]
pub struct CatOptions {
    /// Which messages.
    pub selection: Selection,
    /// One JSON object a line.
    pub json: bool,
    /// Stop after this many messages.
    pub limit: Option<u64>,
}

/// What `cat` printed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CatReport {
    /// Messages printed.
    pub printed: u64,
    /// Messages that did not decode (each named on stderr).
    pub undecodable: u64,
}

/// A JSON string literal.
pub(crate) fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

/// Prints the messages `opts` selects to `out`; problems with single
/// messages go to `warn`.
pub fn cat<W: Write, E: Write>(
    input: &Input,
    opts: &CatOptions,
    out: &mut W,
    warn: &mut E,
) -> Result<CatReport> {
    let mut rep = CatReport::default();
    let path = input.path().to_path_buf();
    let out_err = |e: std::io::Error| ToolError::Io {
        path: "standard output".into(),
        source: e,
    };
    let mut line = String::new();
    let r = walk(input, &opts.selection, |m: &Msg<'_>| {
        if opts.limit.is_some_and(|l| rep.printed >= l) {
            return Err(ToolError::Enough);
        }
        let value = match m.decoder.decode(m.data) {
            Ok(v) => v,
            Err(issue) => {
                rep.undecodable += 1;
                let why = match &issue {
                    DecodeIssue::Definition(w) => format!("its type has no usable definition: {w}"),
                    DecodeIssue::Payload(e) => format!("does not decode: {e}"),
                };
                let _ = writeln!(
                    warn,
                    "{}: {} message at {} ns ({}) of type {}: {why}",
                    path.display(),
                    m.topic,
                    m.log_time,
                    m.place,
                    m.type_name
                );
                return Ok(());
            }
        };
        line.clear();
        let body = edgerec_format::print::json_line(&value);
        if opts.json {
            line.push_str(&format!(
                "{{\"topic\":{},\"log_time\":{},\"type\":{},\"message\":{body}}}\n",
                json_str(m.topic),
                m.log_time,
                json_str(m.type_name)
            ));
        } else {
            line.push_str(&format!(
                "{}.{:09} {} {} {body}\n",
                m.log_time / 1_000_000_000,
                m.log_time % 1_000_000_000,
                m.topic,
                m.type_name
            ));
        }
        out.write_all(line.as_bytes()).map_err(out_err)?;
        rep.printed += 1;
        Ok(())
    });
    r?;
    out.flush().map_err(out_err)?;
    Ok(rep)
}
