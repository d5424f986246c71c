//! What waits for the link: bounded, the oldest dropped first and counted,
//! so a long outage costs old telemetry, never memory.

use std::collections::VecDeque;

/// One message to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its topic.
    pub topic: String,
    /// Its payload.
    pub payload: Vec<u8>,
    /// Whether the broker keeps it for later subscribers.
    pub retain: bool,
}

/// A bounded queue of messages.
#[derive(Debug)]
pub struct Outbox {
    items: VecDeque<Message>,
    cap: usize,
    dropped: u64,
}

impl Outbox {
    /// An empty outbox that holds at most `cap` messages (at least 1).
    pub fn new(cap: usize) -> Outbox {
        Outbox {
            items: VecDeque::new(),
            cap: cap.max(1),
            dropped: 0,
        }
    }

    /// Queues `m`; when full, the oldest message is dropped (and counted)
    /// to make room.
    pub fn push(&mut self, m: Message) {
        if self.items.len() >= self.cap {
            self.items.pop_front();
            self.dropped += 1;
        }
        self.items.push_back(m);
    }

    /// The oldest message, left in place.
    pub fn front(&self) -> Option<&Message> {
        self.items.front()
    }

    /// Takes the oldest message.
    pub fn pop(&mut self) -> Option<Message> {
        self.items.pop_front()
    }

    /// Messages waiting.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Messages dropped to make room since the start.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(n: u8) -> Message {
        Message {
            topic: "t".into(),
            payload: vec![n],
            retain: false,
        }
    }

    #[test]
    fn full_drops_the_oldest_and_counts_it() {
        let mut o = Outbox::new(3);
        for n in 0..5 {
            o.push(m(n));
        }
        assert_eq!(o.len(), 3);
        assert_eq!(o.dropped(), 2);
        let left: Vec<u8> = std::iter::from_fn(|| o.pop())
            .map(|m| m.payload[0])
            .collect();
        assert_eq!(left, vec![2, 3, 4]);
        assert!(o.is_empty());
    }
}
