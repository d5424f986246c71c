//! `convert --to ros2`'s payload rewriting (ROS 1 serialization into CDR,
//! `edgerec_tools::ros2map`) driven by arbitrary definitions and payloads:
//! the definition is the input's text up to the first NUL, the rest the
//! ROS 1 payload. Whatever converts must decode as CDR with the generated
//! ROS 2 definition, and a payload the ROS 1 decoder accepts must convert.
#![no_main]

use edgerec_format::msgtype::{Dialect, TypeTable};
use edgerec_format::{cdr_decode, ros1_decode};
use edgerec_tools::ros2map::Ros2Type;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let Ok(text) = std::str::from_utf8(&data[..end]) else {
        return;
    };
    let payload = data.get(end + 1..).unwrap_or(&[]);
    let name = "fuzz_msgs/Root";
    let Ok(ros1) = TypeTable::parse_with(name, text, Dialect::Ros1) else {
        return;
    };
    let Ok(t) = Ros2Type::from_ros1(name, text) else {
        return;
    };
    let ros2 = TypeTable::parse_with(t.name(), t.definition(), Dialect::Ros2)
        .expect("from_ros1 checked that its definition parses");
    let mut cdr = Vec::new();
    let converted = t.convert(payload, &mut cdr);
    if ros1_decode::decode(&ros1, payload).is_ok() {
        assert!(converted.is_ok(), "ROS 1 decodes but does not convert: {converted:?}");
    }
    if converted.is_ok() {
        if let Err(e) = cdr_decode::decode(&ros2, &cdr) {
            panic!("converted but the CDR does not decode: {e}\n{}", t.definition());
        }
    }
});
