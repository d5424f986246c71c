//! `edgerec import candump` on arbitrary text: each line is a frame or an
//! error naming its column, never a panic; a line that parses prints back
//! (as `export candump` writes it) to a line that parses to the same time,
//! interface and frame.
#![no_main]

use edgerec_bus::candump;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for line in text.lines() {
        let Ok(Some(l)) = candump::parse_line(line) else {
            continue;
        };
        let mut out = String::new();
        candump::format_line(l.time_ns, &l.interface, &l.frame, &mut out);
        let again = candump::parse_line(&out)
            .unwrap_or_else(|e| panic!("{line:?} printed as {out:?}, which does not parse: {e}"))
            .expect("a printed line is not blank");
        assert_eq!(again, l, "{line:?} printed as {out:?}");
    }
});
