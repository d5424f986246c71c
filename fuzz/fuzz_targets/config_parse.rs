//! The configuration reader on arbitrary text: a `Config` or an error
//! naming its place, never a panic. The text is read as the service reads
//! it, its paths held to the appliance's rooms (`/data`, `/run/edgerec`).
#![no_main]

use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let rooms = edgerec_config::Rooms {
            data: Some(PathBuf::from("/data")),
            runtime: Some(PathBuf::from("/run/edgerec")),
            // An Orin's 32 GiB.
            memory: Some(32 << 30),
        };
        let _ = edgerec_config::Config::parse_in(text, Path::new("fuzz.toml"), &rooms);
    }
});
