//! A trigger rule over the fields of messages any peer publishes
//! (`edgerec_trigger`), and an `edgerec filter` expression (the same
//! language with `topic`, `t`, `m.`, `in` lists and `.to_sec()`): the first
//! byte picks the message type and, with its high bit, the filter's
//! environment; the text up to the first NUL is the expression, the rest
//! the CDR payload it reads (its first 8 bytes also the log time).
//! Arbitrary expressions and payloads give a result or an error, never a
//! panic and never an allocation the payload does not pay for.
#![no_main]

use edgerec_format::msgdefs;
use edgerec_format::msgtype::TypeTable;
use edgerec_trigger::{Condition, Env};
use libfuzzer_sys::fuzz_target;

/// Types rules are written over in the field: scalars, strings, nested
/// sequences of structs, arrays.
const TYPES: [&str; 5] = [
    "sensor_msgs/BatteryState",
    "sensor_msgs/Imu",
    "diagnostic_msgs/DiagnosticArray",
    "sensor_msgs/LaserScan",
    "sensor_msgs/NavSatFix",
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let name = TYPES[usize::from(pick) % TYPES.len()];
    let Some(def) = msgdefs::lookup(name) else {
        panic!("{name} is embedded");
    };
    let types = TypeTable::parse(def.name, def.text()).expect("an embedded definition parses");
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    let Ok(text) = std::str::from_utf8(&rest[..end]) else {
        return;
    };
    let payload = rest.get(end + 1..).unwrap_or(&[]);
    let Ok(condition) = Condition::parse(text) else {
        return;
    };
    if pick & 0x80 == 0 {
        if let Ok(compiled) = condition.compile(&types) {
            let _ = compiled.eval(payload);
        }
        return;
    }
    let topic = ["/imu", "/camera/image_raw", "/a"][usize::from(pick >> 5 & 3) % 3];
    if let Ok(compiled) = condition.compile_in(&types, &Env::filter(topic)) {
        let t = payload
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes);
        let _ = compiled.holds_at(payload, t);
        let _ = compiled.constant();
    }
});
