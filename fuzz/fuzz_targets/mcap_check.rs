//! `edgerec check` and `edgerec info` on arbitrary bytes: an error or a
//! report, never a panic, an abort or an allocation past libFuzzer's
//! `-malloc_limit_mb`.
#![no_main]

use edgerec_format::{info, reader};
use libfuzzer_sys::fuzz_target;

mod scratch;

fuzz_target!(|data: &[u8]| {
    let path = scratch::dir().join("input.mcap");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let checked = reader::check_file(&path);
    let summary = reader::read_summary(&path);
    // A file check accepts has a summary that reads (the spec's optional
    // parts are filled in from the data section).
    if let Ok(rep) = &checked {
        let s = summary.as_ref().expect("check accepted what read_summary refused");
        if let Some(st) = &s.statistics {
            assert_eq!(st.message_count, rep.messages, "statistics against the data");
        }
    }
    let _ = info::inspect(&path);
});
