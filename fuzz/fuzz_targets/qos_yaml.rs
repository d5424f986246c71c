//! rosbag2's QoS override YAML (`edgerec_ros::overrides::parse_overrides`,
//! serde_norway on libyaml's parser): any text gives overrides or an error
//! with a line inside the text, never a panic, and anchors or nesting never
//! expand past the text's size.
#![no_main]

use edgerec_ros::overrides::parse_overrides;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_overrides(text) {
        Ok(overrides) => {
            for (topic, o) in &overrides {
                assert!(topic.starts_with('/'), "{topic:?} accepted");
                // Every accepted override gives a request.
                let _ = o.request();
            }
        }
        Err((line, reason)) => {
            // libyaml counts a line at each YAML line break: \n, \r\n, \r,
            // NEL, LS and PS; the end of the text is one line past the last.
            let breaks = text.replace("\r\n", "\n").matches(['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}']).count();
            assert!(line <= breaks + 2, "line {line} of {text:?}: {reason}");
            assert!(!reason.is_empty());
        }
    }
});
