//! The ROS 1 bag reader on arbitrary bytes, through the index and by a
//! scan: the summary, every message, and each message decoded with its
//! connection's own definition (so the ROS 1 definition parser and
//! decoder see what a damaged bag carries). Errors are fine; a panic, an
//! abort or an allocation past `-malloc_limit_mb` is a crash.
#![no_main]

use std::collections::BTreeMap;
use std::io::Cursor;

use edgerec_format::msgtype::{Dialect, TypeTable};
use edgerec_format::{print, ros1_decode};
use edgerec_rosbag1::{Bag, Filter};
use libfuzzer_sys::fuzz_target;

fn read_all(mut bag: Bag<Cursor<&[u8]>>) {
    let _ = bag.summary();
    let mut tables: BTreeMap<u32, Option<TypeTable>> = BTreeMap::new();
    for m in bag.messages(&Filter::default()).take(10_000) {
        let Ok(m) = m else { break };
        let c = &m.connection;
        let table = tables.entry(c.id).or_insert_with(|| {
            TypeTable::parse_with(&c.msg_type, &c.message_definition, Dialect::Ros1).ok()
        });
        if let Some(t) = table {
            if let Ok(v) = ros1_decode::decode(t, &m.data) {
                let _ = print::json_line(&v);
                let _ = print::flatten(&v);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(bag) = Bag::from_reader(Cursor::new(data)) {
        read_all(bag);
    }
    if let Ok(bag) = Bag::scan_reader(Cursor::new(data)) {
        read_all(bag);
    }
});
