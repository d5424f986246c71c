//! `cat`: the decoded messages of a bag, in the order they are stored, one
//! a line. With `--json` each line is one JSON object:
//! `{"topic":..,"log_time":ns,"type":..,"message":{..}}` (the message as
//! [`edgerec_format::print`] writes it: members in definition order, exact
//! integers, ROS 1 `time` as `{"secs","nsecs"}`); without it the line is
//! `SECONDS.NANOS TOPIC TYPE` and the message's JSON. A message that does
//! not decode is named on stderr (topic, time, byte offset, field) and the
//! rest are still printed; the count of such messages is the report's.

use std::io::Write;

use edgerec_format::print::write_json_line;

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
        // Straight into `out`: an image's JSON is megabytes.
        let written = if opts.json {
            write!(
                out,
                "{{\"topic\":{},\"log_time\":{},\"type\":{},\"message\":",
                json_str(m.topic),
                m.log_time,
                json_str(m.type_name)
            )
            .and_then(|()| serde_json::to_writer(&mut *out, &value).map_err(std::io::Error::from))
            .and_then(|()| out.write_all(b"}\n"))
        } else {
            write!(
                out,
                "{}.{:09} {} {} ",
                m.log_time / 1_000_000_000,
                m.log_time % 1_000_000_000,
                m.topic,
                m.type_name
            )
            .and_then(|()| write_json_line(&mut *out, &value))
        };
        written.map_err(out_err)?;
        rep.printed += 1;
        Ok(())
    });
    r?;
    out.flush().map_err(out_err)?;
    Ok(rep)
}
