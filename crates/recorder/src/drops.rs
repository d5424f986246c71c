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

use edgerec_format::info::UPSTREAM_LOST_PREFIX;

/// Dropped plus lost, and lost upstream, per channel at the last closed
/// segment.
#[derive(Debug, Default)]
pub(crate) struct DropLedger {
    counted: BTreeMap<u16, (u64, u64)>,
}

impl DropLedger {
    /// Per topic, the drops since the last call; every topic is listed,
    /// with 0 where none (a topic recorded with two types adds both
    /// channels). A topic whose source reports upstream losses also gets
    /// an `upstream_lost <topic>` entry.
    pub(crate) fn take(&mut self, table: &ChannelTable) -> BTreeMap<String, String> {
        let mut sums: BTreeMap<String, (u64, Option<u64>)> = BTreeMap::new();
        for c in table.all() {
            let now = (
                c.counters.missing(),
                c.counters
                    .upstream_lost
                    .load(std::sync::atomic::Ordering::Relaxed),
            );
            let before = self.counted.insert(c.id.0, now).unwrap_or((0, 0));
            let e = sums.entry(c.spec.topic.clone()).or_default();
            e.0 += now.0.saturating_sub(before.0);
            if now.1 > 0 {
                *e.1.get_or_insert(0) += now.1.saturating_sub(before.1);
            }
        }
        let mut out = BTreeMap::new();
        for (topic, (drops, upstream)) in sums {
            if let Some(u) = upstream {
                out.insert(format!("{UPSTREAM_LOST_PREFIX}{topic}"), u.to_string());
            }
            out.insert(topic, drops.to_string());
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

    #[test]
    fn upstream_losses_have_their_own_keys_and_two_types_of_a_topic_add_up() {
        let t = ChannelTable::new(4);
        let spec = |ty: &str| edgerec_source::ChannelSpec {
            topic: "/x".into(),
            type_name: ty.into(),
            message_encoding: "cdr".into(),
            schema_encoding: "ros2msg".into(),
            schema: Vec::new(),
            metadata: BTreeMap::new(),
            latched: false,
        };
        let a = t.register(spec("a/msg/A")).unwrap();
        let b = t.register(spec("a/msg/B")).unwrap();
        let mut l = DropLedger::default();
        let c = |id| &t.get(id).unwrap().counters;
        c(a).dropped.fetch_add(2, Ordering::Relaxed);
        c(b).dropped.fetch_add(3, Ordering::Relaxed);
        let first = l.take(&t);
        assert_eq!(first["/x"], "5");
        assert!(!first.contains_key("upstream_lost /x"), "{first:?}");
        c(b).upstream_lost.store(7, Ordering::Relaxed);
        let second = l.take(&t);
        assert_eq!(
            (second["/x"].as_str(), second["upstream_lost /x"].as_str()),
            ("0", "7")
        );
        c(b).upstream_lost.store(9, Ordering::Relaxed);
        assert_eq!(l.take(&t)["upstream_lost /x"], "2");
    }
}
