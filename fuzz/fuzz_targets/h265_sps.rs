//! H.265 Annex B access units as edgerec reads them from encoders and from
//! recorded bags (`edgerec info`, `export video`, the segment cut): the
//! NAL unit split, the keyframe test and the SPS reader (picture size,
//! profile, level), compiled from the camera crate's own `nal.rs` and
//! `sps.rs` (the crate itself links GStreamer, which the fuzz build has
//! not). Any bytes give units inside the input and an SPS whose shown size
//! is within its coded size, or an error; never a panic.
#![no_main]

#[path = "../../crates/camera/src/nal.rs"]
#[allow(dead_code)]
mod nal;
#[path = "../../crates/camera/src/sps.rs"]
#[allow(dead_code)]
mod sps;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let units = nal::units(data);
    let types = nal::unit_types(data);
    assert!(units.len() <= types.len());
    let inside: usize = units.iter().map(|u| u.len()).sum();
    assert!(inside <= data.len());
    for u in &units {
        assert!(!u.is_empty());
        let _ = sps::parse(u);
    }
    let au = nal::AccessUnit::parse(data);
    assert_eq!(au.units, types.len());
    if let Some(Ok(s)) = sps::find(data) {
        assert!(s.width > 0 && s.height > 0, "{s:?}");
        assert!(s.width <= s.coded_width && s.height <= s.coded_height, "{s:?}");
    }
    // An SPS NAL unit on its own (the bytes after a type-33 header).
    let mut unit = vec![33 << 1, 1];
    unit.extend_from_slice(data);
    if let Ok(s) = sps::parse(&unit) {
        assert!(s.width <= s.coded_width && s.height <= s.coded_height, "{s:?}");
    }
});
