//! The configuration reader on arbitrary text: a `Config` or an error
//! naming its place, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = edgerec_config::Config::parse(text, std::path::Path::new("fuzz.toml"));
    }
});
