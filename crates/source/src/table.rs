//! The channel table: every channel of every source, registered at any
//! time from any thread, looked up without a lock.
//!
//! Ids are dense (1, 2, ...) and never reused, so the table is an array
//! indexed by id. It is allocated in blocks of 256 slots as channels
//! arrive (a recording of a dozen topics holds one block, not 65534
//! slots), and each slot is written once: a lookup is two atomic loads,
//! which a push at 1 MHz can afford where a lock shared by every producer
//! and the chunker could not.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::channel::{Channel, ChannelCounters, ChannelId, ChannelSpec};
use crate::error::RegisterError;
use crate::queue::ChannelQueue;

const BLOCK: usize = 256;
/// Ids 1..=65534: MCAP channel ids are u16, and 65535 stays unused so an
/// id never wraps.
const MAX_ID: usize = u16::MAX as usize - 1;
const BLOCKS: usize = (MAX_ID + 1).div_ceil(BLOCK);

type Block = Box<[OnceLock<Arc<Channel>>]>;

/// Every channel known to the recorder, id -> channel.
#[derive(Debug)]
pub struct ChannelTable {
    blocks: Box<[OnceLock<Block>]>,
    /// Ids 1..=count are published.
    count: AtomicUsize,
    /// topic -> id; held only while registering.
    topics: Mutex<BTreeMap<(String, String), ChannelId>>,
    queue_capacity: usize,
    /// Pushes that named a channel id no source registered.
    unknown: AtomicU64,
}

impl ChannelTable {
    /// An empty table whose channels each queue at most `queue_capacity`
    /// messages.
    pub fn new(queue_capacity: usize) -> Self {
        Self {
            blocks: (0..BLOCKS).map(|_| OnceLock::new()).collect(),
            count: AtomicUsize::new(0),
            topics: Mutex::new(BTreeMap::new()),
            queue_capacity,
            unknown: AtomicU64::new(0),
        }
    }

    /// Declares a channel and returns its id. A channel is a topic and a
    /// type: the same topic with another type is another channel (a ROS 2
    /// topic published with two types is recorded as two, never mixed).
    /// Declaring a topic and type again with the same data
    /// ([`ChannelSpec::same_data`]) returns the id it has: a source
    /// restarted after a failure, or a second thread of a source, gets the
    /// same channel; with another schema or encoding it is refused.
    pub fn register(&self, spec: ChannelSpec) -> Result<ChannelId, RegisterError> {
        let mut topics = self.topics.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (spec.topic.clone(), spec.type_name.clone());
        if let Some(&id) = topics.get(&key) {
            let existing = self
                .get(id)
                .expect("an id in the topic index is published before the lock is released");
            if existing.spec.same_data(&spec) {
                return Ok(id);
            }
            let what = if existing.spec.message_encoding != spec.message_encoding {
                "message encoding"
            } else if existing.spec.schema_encoding != spec.schema_encoding {
                "schema encoding"
            } else {
                "schema"
            };
            return Err(RegisterError::SchemaConflict {
                topic: spec.topic,
                type_name: spec.type_name,
                what,
            });
        }
        let n = self.count.load(Ordering::Acquire) + 1;
        if n > MAX_ID {
            return Err(RegisterError::TooManyChannels { topic: spec.topic });
        }
        let id = ChannelId(n as u16);
        let block =
            self.blocks[n / BLOCK].get_or_init(|| (0..BLOCK).map(|_| OnceLock::new()).collect());
        tracing::debug!("channel {} is {} ({})", id.0, spec.topic, spec.type_name);
        topics.insert(key, id);
        let channel = Arc::new(Channel {
            id,
            spec,
            counters: ChannelCounters::default(),
            queue: ChannelQueue::new(self.queue_capacity),
            floor_bytes: AtomicU64::new(0),
            returns: std::sync::OnceLock::new(),
            keyed: std::sync::atomic::AtomicBool::new(false),
        });
        // Set once: ids only grow, under the lock.
        let _ = block[n % BLOCK].set(channel);
        self.count.store(n, Ordering::Release);
        Ok(id)
    }

    /// The channel with this id.
    #[inline]
    pub fn get(&self, id: ChannelId) -> Option<&Arc<Channel>> {
        let n = id.0 as usize;
        self.blocks.get(n / BLOCK)?.get()?.get(n % BLOCK)?.get()
    }

    /// How many channels there are (ids 1..=len).
    #[inline]
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// True before the first registration.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every channel, in id order.
    pub fn all(&self) -> Vec<Arc<Channel>> {
        (1..=self.len())
            .filter_map(|n| self.get(ChannelId(n as u16)).cloned())
            .collect()
    }

    /// Counts a push for an id that is not in the table.
    pub(crate) fn count_unknown(&self) {
        self.unknown.fetch_add(1, Ordering::Relaxed);
    }

    /// Pushes refused because their channel id was never registered: a
    /// bug in a source, shown in the status rather than lost silently.
    pub fn unknown_channel_pushes(&self) -> u64 {
        self.unknown.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(topic: &str, ty: &str) -> ChannelSpec {
        ChannelSpec {
            topic: topic.into(),
            type_name: ty.into(),
            message_encoding: "cdr".into(),
            schema_encoding: "ros2msg".into(),
            schema: b"int32 x\n".to_vec(),
            metadata: BTreeMap::new(),
            latched: false,
        }
    }

    #[test]
    fn registering_again_returns_the_same_channel() {
        let t = ChannelTable::new(8);
        let a = t.register(spec("/a", "std_msgs/msg/Int32")).unwrap();
        let b = t.register(spec("/b", "std_msgs/msg/Int32")).unwrap();
        assert_eq!((a, b), (ChannelId(1), ChannelId(2)));
        let mut again = spec("/a", "std_msgs/msg/Int32");
        again.metadata.insert("k".into(), "v".into());
        assert_eq!(t.register(again).unwrap(), a);
        assert!(
            t.get(a).unwrap().spec.metadata.is_empty(),
            "first spec kept"
        );
        // Another type on the same topic: another channel.
        let c = t.register(spec("/a", "std_msgs/msg/String")).unwrap();
        assert_eq!(c, ChannelId(3));
        assert_eq!(t.register(spec("/a", "std_msgs/msg/String")).unwrap(), c);
        // The same type with another definition: refused.
        let mut other = spec("/a", "std_msgs/msg/Int32");
        other.schema = b"int64 x\n".to_vec();
        let err = t.register(other).unwrap_err();
        assert!(
            matches!(err, RegisterError::SchemaConflict { what: "schema", .. }),
            "{err}"
        );
        assert_eq!(t.len(), 3);
        assert!(t.get(ChannelId(0)).is_none());
        assert!(t.get(ChannelId(4)).is_none());
        assert!(t.get(ChannelId(u16::MAX)).is_none());
    }

    #[test]
    fn registers_from_many_threads_into_one_table() {
        let t = Arc::new(ChannelTable::new(8));
        let hs: Vec<_> = (0..4)
            .map(|k| {
                let t = t.clone();
                std::thread::spawn(move || {
                    (0..300)
                        .map(|i| {
                            t.register(spec(&format!("/t{}", i % 150), "x/msg/Y"))
                                .unwrap()
                        })
                        .map(|id| (k, id))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(t.len(), 150, "one channel per topic across blocks");
        let all = t.all();
        assert_eq!(all.len(), 150);
        for (i, c) in all.iter().enumerate() {
            assert_eq!(c.id.0 as usize, i + 1);
        }
    }

    #[test]
    fn refuses_past_the_last_id() {
        let t = ChannelTable::new(1);
        for i in 0..MAX_ID {
            t.register(spec(&format!("/{i}"), "a/msg/B")).unwrap();
        }
        assert!(matches!(
            t.register(spec("/one-more", "a/msg/B")),
            Err(RegisterError::TooManyChannels { .. })
        ));
        assert!(t.get(ChannelId(MAX_ID as u16)).is_some());
    }
}
