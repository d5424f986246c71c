//! Publishers seen by polling the graph (rcl's graph queries, as the r2r
//! backend does) rather than by discovery events: two polls are compared
//! to tell the [`Graph`](crate::graph::Graph) which publishers appeared or
//! changed and which left, the events the DDS backend gets from
//! `DCPSPublication`.

use std::collections::HashMap;

use crate::graph::{Gid, Publication};

/// What changed between two polls.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PollChanges {
    /// Publishers not in the previous poll, or announced differently.
    pub appeared: Vec<Publication>,
    /// Publishers in the previous poll and not in this one, in gid order.
    pub left: Vec<Gid>,
}

/// The publishers of the last poll.
#[derive(Debug, Default)]
pub struct PolledPublishers {
    last: HashMap<Gid, Publication>,
}

impl PolledPublishers {
    /// Takes a new poll (every publisher present now) and says what
    /// changed since the last one. `appeared` keeps the poll's order.
    pub fn update(&mut self, now: Vec<Publication>) -> PollChanges {
        let mut next = HashMap::with_capacity(now.len());
        let mut appeared = Vec::new();
        for p in now {
            if self.last.get(&p.gid) != Some(&p) && next.get(&p.gid) != Some(&p) {
                appeared.push(p.clone());
            }
            next.insert(p.gid, p);
        }
        let mut left: Vec<Gid> = self
            .last
            .keys()
            .filter(|g| !next.contains_key(*g))
            .copied()
            .collect();
        left.sort_unstable();
        self.last = next;
        PollChanges { appeared, left }
    }
}

/// An rmw endpoint gid as the graph's 16-byte [`Gid`]. rmw stores gids in
/// 24 bytes up to Humble and 16 from Jazzy; DDS RMWs fill the first 16 and
/// zero the rest, and any further byte is folded in so that two gids that
/// differ only there stay apart.
pub fn gid_from_rmw(bytes: &[u8]) -> Gid {
    let mut gid = [0u8; 16];
    for (i, b) in bytes.iter().enumerate() {
        gid[i % 16] ^= b;
    }
    gid
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qos::{QosProfile, Reliability};

    fn publ(n: u8, topic: &str, reliability: Reliability) -> Publication {
        Publication {
            gid: [n; 16],
            participant: [n; 16],
            topic: topic.into(),
            type_name: "std_msgs/msg/String".into(),
            qos: QosProfile {
                reliability,
                ..Default::default()
            },
            type_hash: None,
        }
    }

    #[test]
    fn a_poll_reports_newcomers_changes_and_leavers_once() {
        let mut p = PolledPublishers::default();
        let a = publ(1, "/a", Reliability::Reliable);
        let b = publ(2, "/b", Reliability::Reliable);
        let c = p.update(vec![a.clone(), b.clone()]);
        assert_eq!(c.appeared, [a.clone(), b.clone()]);
        assert!(c.left.is_empty());
        assert_eq!(p.update(vec![b.clone(), a.clone()]), PollChanges::default());

        let b2 = publ(2, "/b", Reliability::BestEffort);
        let c = p.update(vec![b2.clone()]);
        assert_eq!(c.appeared, [b2]);
        assert_eq!(c.left, [[1; 16]]);
        let c = p.update(Vec::new());
        assert_eq!(c.left, [[2; 16]]);
        assert!(p.update(Vec::new()).appeared.is_empty());
    }

    #[test]
    fn rmw_gids_of_16_and_24_bytes_map_onto_16() {
        let mut g24 = [0u8; 24];
        g24[..16].copy_from_slice(&[7; 16]);
        assert_eq!(gid_from_rmw(&g24), [7; 16]);
        assert_eq!(gid_from_rmw(&[7; 16]), [7; 16]);
        let mut other = g24;
        other[20] = 1;
        assert_ne!(gid_from_rmw(&other), gid_from_rmw(&g24));
    }
}
