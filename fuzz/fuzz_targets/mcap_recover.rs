//! `edgerec recover` on an arbitrary `.mcap.active` file: an error or a
//! report, never a panic; whatever it writes passes `check` and holds the
//! messages the report says it kept.
#![no_main]

use edgerec_format::{reader, recover};
use libfuzzer_sys::fuzz_target;

mod scratch;

fuzz_target!(|data: &[u8]| {
    let dir = scratch::dir().join("recover");
    let _ = std::fs::remove_dir_all(&dir);
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let path = dir.join("x_0.mcap.active");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Ok(report) = recover::recover_file(&path) {
        if let Some(out) = &report.output {
            let rep = reader::check_file(out)
                .unwrap_or_else(|e| panic!("recovered file does not check: {e}"));
            assert_eq!(rep.messages, report.messages_kept(), "{report:?}");
        }
    }
});
