//! The drop ledger: each segment's `edgerec.drops` holds exactly the
//! messages dropped or lost while it was the open segment, so the files
//! of a session add up to the status's totals.
//!
//! The sequencer takes the ledger when it hands a segment to the closer
//! (not when the closer gets to it, which is after the next segment has
//! opened and would count the drops in between twice), and a segment
//! abandoned after a storage failure takes none: its drops go to the next
//! segment that closes.

use std::collections::BTreeMap;

use edgerec_source::ChannelTable;

/// Dropped plus lost per channel at the last closed segment.
#[derive(Debug, Default)]
pub(crate) struct DropLedger {
    counted: BTreeMap<u16, u64>,
}

impl DropLedger {
    /// Per topic, the drops since the last call; every channel is listed,
    /// with 0 where none.
    pub(crate) fn take(&mut self, table: &ChannelTable) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for c in table.all() {
            let now = c.counters.missing();
            let before = self.counted.insert(c.id.0, now).unwrap_or(0);
            out.insert(c.spec.topic.clone(), now.saturating_sub(before).to_string());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn each_drop_is_counted_once() {
        let t = ChannelTable::new(4);
        let spec = |topic: &str| edgerec_source::ChannelSpec {
            topic: topic.into(),
            type_name: "a/msg/B".into(),
            message_encoding: "cdr".into(),
            schema_encoding: "ros2msg".into(),
            schema: Vec::new(),
            metadata: BTreeMap::new(),
            latched: false,
        };
        let a = t.register(spec("/a")).unwrap();
        let mut l = DropLedger::default();
        t.get(a)
            .unwrap()
            .counters
            .dropped
            .fetch_add(3, Ordering::Relaxed);
        assert_eq!(l.take(&t)["/a"], "3");
        let b = t.register(spec("/b")).unwrap();
        t.get(a)
            .unwrap()
            .counters
            .lost
            .fetch_add(2, Ordering::Relaxed);
        t.get(b)
            .unwrap()
            .counters
            .dropped
            .fetch_add(1, Ordering::Relaxed);
        let second = l.take(&t);
        assert_eq!((second["/a"].as_str(), second["/b"].as_str()), ("2", "1"));
        assert_eq!(l.take(&t)["/a"], "0");
    }
}
