//! The ROS 2 CDR and ROS 1 decoders driven by arbitrary definitions and
//! payloads. The first byte picks the dialect and whether the definition
//! is one of the embedded ones (by index) or the input's own text, which
//! runs to the first NUL; the rest is the payload. Every decoded tree is
//! printed and flattened too.
#![no_main]

use edgerec_format::msgtype::{Dialect, TypeTable};
use edgerec_format::{cdr_decode, msgdefs, print, ros1_decode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let dialect = if mode & 1 == 0 { Dialect::Ros2 } else { Dialect::Ros1 };
    let (name, text, payload): (String, String, &[u8]) = if mode & 2 == 0 {
        let Some((&pick, payload)) = rest.split_first() else {
            return;
        };
        let all = msgdefs::all();
        let def = &all[usize::from(pick) % all.len()];
        (def.name.to_string(), def.text().to_string(), payload)
    } else {
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        let Ok(text) = std::str::from_utf8(&rest[..end]) else {
            return;
        };
        let payload = rest.get(end + 1..).unwrap_or(&[]);
        ("fuzz_msgs/msg/Root".to_string(), text.to_string(), payload)
    };
    let Ok(table) = TypeTable::parse_with(&name, &text, dialect) else {
        return;
    };
    let decoded = match dialect {
        Dialect::Ros2 => cdr_decode::decode(&table, payload),
        Dialect::Ros1 => ros1_decode::decode(&table, payload),
    };
    if let Ok(v) = decoded {
        let _ = print::json_line(&v);
        let _ = print::flatten(&v);
    }
});
