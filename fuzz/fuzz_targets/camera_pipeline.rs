//! A camera's `pipeline` on arbitrary text: refused with a place, or one
//! chain whose written-out form parses back to the same chain (what the
//! camera is built from is what was checked), never a panic.
#![no_main]

use edgerec_config::gst_chain;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match gst_chain::parse(text) {
        Ok(chain) => {
            let written = chain.describe();
            let again = gst_chain::parse(&written)
                .unwrap_or_else(|e| panic!("{written:?} written from {text:?} is refused: {e}"));
            assert_eq!(again, chain, "{text:?} -> {written:?}");
            // A value may hold the letters "sink" (`method=rocsink`, a
            // word); no element may be one.
            assert!(
                chain.element_names().all(|n| !n.ends_with("sink")),
                "{written:?}"
            );
        }
        Err(e) => assert!(e.offset <= text.len().max(gst_chain::MAX_BYTES)),
    }
});
