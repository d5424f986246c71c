//! A trigger rule over the fields of messages any peer publishes
//! (`edgerec_trigger`): the first byte picks the message type, the text up
//! to the first NUL is the rule's `when`, the rest the CDR payload it reads.
//! Arbitrary rules and payloads give a result or an error, never a panic
//! and never an allocation the payload does not pay for.
#![no_main]

use edgerec_format::msgdefs;
use edgerec_format::msgtype::TypeTable;
use edgerec_trigger::Condition;
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
    if let Ok(compiled) = condition.compile(&types) {
        let _ = compiled.eval(payload);
    }
});
