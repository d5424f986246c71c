//! A `sensor_msgs/msg/Image` from any peer on the graph, decoded for a
//! `topic` camera (`edgerec_ros::image::decode`): arbitrary bytes give an
//! image or an error, never a panic, and never an allocation the bytes do
//! not pay for (libFuzzer's -malloc_limit_mb makes one a crash). What
//! decodes is the picture the sizes promised, repacked from bytes present.
#![no_main]

use edgerec_ros::image::decode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(img) = decode(data, 0) {
        assert!(img.width > 0 && img.height > 0, "{}x{}", img.width, img.height);
        // Each output row is a row of the input, padded by at most 3
        // bytes: never more than 4 bytes out for each byte in.
        assert!(
            img.data.len() <= 4 * data.len(),
            "{} bytes from a {}-byte message",
            img.data.len(),
            data.len()
        );
    }
});
