//! QoS: what publishers offer, what edgerec asks for, and how rosbag2
//! writes the offers into a bag.
//!
//! The request follows rosbag2's `adapt_request_to_offers`: reliable only
//! if every publisher offers reliable, transient-local only if every
//! publisher offers it, else the weaker policy that matches them all.
//! Unlike rosbag2 (issue 967) the request is worked out again whenever a
//! publisher appears, so a topic first seen before its writer still gets
//! `/tf_static`'s latched message. A per-topic override replaces the
//! adaptation (rosbag2's `--qos-profile-overrides-path`).

use std::fmt::Write as _;

/// DDS reliability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reliability {
    /// Resent until acknowledged.
    Reliable,
    /// Sent once.
    BestEffort,
}

/// DDS durability (only the two kinds ROS 2 uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Durability {
    /// Only what is published after the match.
    Volatile,
    /// The writer keeps its history for late joiners ("latched").
    TransientLocal,
}

/// History.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum History {
    /// The last `n` samples.
    KeepLast(u32),
    /// Everything, within resource limits.
    KeepAll,
    /// Not known (a discovered writer's history is not announced).
    Unknown,
}

/// Liveliness kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Liveliness {
    /// Asserted by the participant.
    Automatic,
    /// Asserted per writer by publishing or asserting.
    ManualByTopic,
}

/// One publisher's offered QoS, as discovery reports it. Durations are
/// nanoseconds; `None` is infinite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QosProfile {
    /// History (unknown for discovered writers).
    pub history: History,
    /// Reliability.
    pub reliability: Reliability,
    /// Durability.
    pub durability: Durability,
    /// Deadline period.
    pub deadline: Option<u64>,
    /// Lifespan.
    pub lifespan: Option<u64>,
    /// Liveliness kind.
    pub liveliness: Liveliness,
    /// Liveliness lease duration.
    pub liveliness_lease: Option<u64>,
}

impl Default for QosProfile {
    /// The ROS 2 default publisher profile (reliable, volatile, keep last 10).
    fn default() -> Self {
        QosProfile {
            history: History::KeepLast(10),
            reliability: Reliability::Reliable,
            durability: Durability::Volatile,
            deadline: None,
            lifespan: None,
            liveliness: Liveliness::Automatic,
            liveliness_lease: None,
        }
    }
}

/// What edgerec asks of a topic's publishers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestQos {
    /// Reliability asked for.
    pub reliability: Reliability,
    /// Durability asked for.
    pub durability: Durability,
    /// The reader's history depth (keep last).
    pub depth: u32,
}

/// The reader history depth when no override sets one. Samples are taken
/// as they arrive, so this only has to cover a burst (a late joiner's
/// transient-local history arrives at once).
pub const DEFAULT_DEPTH: u32 = 100;

impl RequestQos {
    /// The request rosbag2 makes with no publisher known: reliable and
    /// volatile, which matches reliable volatile publishers only; it is
    /// worked out again when one appears.
    pub fn initial() -> Self {
        RequestQos {
            reliability: Reliability::Reliable,
            durability: Durability::Volatile,
            depth: DEFAULT_DEPTH,
        }
    }
}

/// A warning from the adaptation, for the log and the status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QosWarning {
    /// Some but not all publishers offer reliable: best effort is asked,
    /// and what a reliable publisher resends is not waited for.
    MixedReliability {
        /// Publishers offering reliable.
        reliable: usize,
        /// All publishers.
        of: usize,
    },
    /// Some but not all publishers offer transient-local: volatile is
    /// asked, so their latched messages are not received.
    MixedDurability {
        /// Publishers offering transient-local.
        transient_local: usize,
        /// All publishers.
        of: usize,
    },
}

impl std::fmt::Display for QosWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QosWarning::MixedReliability { reliable, of } => write!(
                f,
                "{reliable} of {of} publishers offer reliable: recording best effort to match all \
                 (messages a reliable publisher would resend can be lost)"
            ),
            QosWarning::MixedDurability {
                transient_local,
                of,
            } => write!(
                f,
                "{transient_local} of {of} publishers offer transient-local: recording volatile to \
                 match all (their latched messages are not received)"
            ),
        }
    }
}

/// The request that matches every offer, with what it gives up.
pub fn adapt(offers: &[QosProfile]) -> (RequestQos, Vec<QosWarning>) {
    let mut warnings = Vec::new();
    if offers.is_empty() {
        return (RequestQos::initial(), warnings);
    }
    let of = offers.len();
    let reliable = offers
        .iter()
        .filter(|o| o.reliability == Reliability::Reliable)
        .count();
    let transient_local = offers
        .iter()
        .filter(|o| o.durability == Durability::TransientLocal)
        .count();
    let reliability = if reliable == of {
        Reliability::Reliable
    } else {
        if reliable > 0 {
            warnings.push(QosWarning::MixedReliability { reliable, of });
        }
        Reliability::BestEffort
    };
    let durability = if transient_local == of {
        Durability::TransientLocal
    } else {
        if transient_local > 0 {
            warnings.push(QosWarning::MixedDurability {
                transient_local,
                of,
            });
        }
        Durability::Volatile
    };
    (
        RequestQos {
            reliability,
            durability,
            depth: DEFAULT_DEPTH,
        },
        warnings,
    )
}

/// How rosbag2 writes offered QoS profiles: Humble (metadata version 5)
/// writes policies as numbers and the list as a YAML string; Jazzy
/// (version 9) writes policy names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QosYamlStyle {
    /// Policies as `rmw_qos_*_policy_t` numbers.
    #[default]
    Humble,
    /// Policies as names (`reliable`, `keep_last`).
    Jazzy,
}

/// `RMW_DURATION_INFINITE` as rmw writes it: {9223372036, 854775807}.
const INFINITE: (u64, u64) = (9_223_372_036, 854_775_807);

/// A duration as rmw reports it, in nanoseconds; `None` for
/// `RMW_DURATION_INFINITE` (or longer). Zero (`RMW_DURATION_UNSPECIFIED`)
/// stays zero, so it is written back the way rmw reported it.
pub fn from_rmw_duration(d: std::time::Duration) -> Option<u64> {
    let infinite = std::time::Duration::new(INFINITE.0, INFINITE.1 as u32);
    if d >= infinite {
        return None;
    }
    u64::try_from(d.as_nanos()).ok()
}

fn duration(d: Option<u64>) -> (u64, u64) {
    match d {
        None => INFINITE,
        Some(ns) if ns >= 9_223_372_036_854_775_807 => INFINITE,
        Some(ns) => (ns / 1_000_000_000, ns % 1_000_000_000),
    }
}

/// The `offered_qos_profiles` value rosbag2 stores for a topic: a YAML
/// sequence of one mapping per publisher, as `YAML::Dump` writes it; no
/// offers give an empty string, as in rosbag2.
pub fn offered_profiles_yaml(offers: &[QosProfile], style: QosYamlStyle) -> String {
    let mut y = String::new();
    for (i, q) in offers.iter().enumerate() {
        if i > 0 {
            y.push('\n');
        }
        let (history, depth) = match (q.history, style) {
            (History::KeepLast(n), QosYamlStyle::Humble) => ("1".to_owned(), n),
            (History::KeepAll, QosYamlStyle::Humble) => ("2".to_owned(), 0),
            (History::Unknown, QosYamlStyle::Humble) => ("3".to_owned(), 0),
            (History::KeepLast(n), QosYamlStyle::Jazzy) => ("keep_last".to_owned(), n),
            (History::KeepAll, QosYamlStyle::Jazzy) => ("keep_all".to_owned(), 0),
            (History::Unknown, QosYamlStyle::Jazzy) => ("unknown".to_owned(), 0),
        };
        let names = style == QosYamlStyle::Jazzy;
        let reliability = match (q.reliability, names) {
            (Reliability::Reliable, false) => "1",
            (Reliability::BestEffort, false) => "2",
            (Reliability::Reliable, true) => "reliable",
            (Reliability::BestEffort, true) => "best_effort",
        };
        let durability = match (q.durability, names) {
            (Durability::TransientLocal, false) => "1",
            (Durability::Volatile, false) => "2",
            (Durability::TransientLocal, true) => "transient_local",
            (Durability::Volatile, true) => "volatile",
        };
        let liveliness = match (q.liveliness, names) {
            (Liveliness::Automatic, false) => "1",
            (Liveliness::ManualByTopic, false) => "3",
            (Liveliness::Automatic, true) => "automatic",
            (Liveliness::ManualByTopic, true) => "manual_by_topic",
        };
        let dur = |y: &mut String, key: &str, d: Option<u64>| {
            let (s, n) = duration(d);
            let _ = write!(y, "\n  {key}:\n    sec: {s}\n    nsec: {n}");
        };
        let _ = write!(
            y,
            "- history: {history}\n  depth: {depth}\n  reliability: {reliability}\n  durability: {durability}"
        );
        dur(&mut y, "deadline", q.deadline);
        dur(&mut y, "lifespan", q.lifespan);
        let _ = write!(y, "\n  liveliness: {liveliness}");
        dur(&mut y, "liveliness_lease_duration", q.liveliness_lease);
        y.push_str("\n  avoid_ros_namespace_conventions: false");
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(r: Reliability, d: Durability) -> QosProfile {
        QosProfile {
            reliability: r,
            durability: d,
            history: History::Unknown,
            ..Default::default()
        }
    }

    #[test]
    fn the_request_matches_every_offer() {
        use Durability::*;
        use Reliability::*;
        assert_eq!(adapt(&[]).0, RequestQos::initial());
        let (r, w) = adapt(&[offer(Reliable, TransientLocal)]);
        assert_eq!((r.reliability, r.durability), (Reliable, TransientLocal));
        assert!(w.is_empty());
        let (r, w) = adapt(&[offer(Reliable, TransientLocal), offer(BestEffort, Volatile)]);
        assert_eq!((r.reliability, r.durability), (BestEffort, Volatile));
        assert_eq!(
            w,
            [
                QosWarning::MixedReliability { reliable: 1, of: 2 },
                QosWarning::MixedDurability {
                    transient_local: 1,
                    of: 2
                }
            ]
        );
        let (r, w) = adapt(&[offer(BestEffort, Volatile), offer(BestEffort, Volatile)]);
        assert_eq!((r.reliability, r.durability), (BestEffort, Volatile));
        assert!(w.is_empty());
    }

    #[test]
    fn rmw_infinite_durations_become_none() {
        use std::time::Duration;
        assert_eq!(
            from_rmw_duration(Duration::new(9_223_372_036, 854_775_807)),
            None
        );
        assert_eq!(from_rmw_duration(Duration::MAX), None);
        assert_eq!(from_rmw_duration(Duration::ZERO), Some(0));
        assert_eq!(
            from_rmw_duration(Duration::new(1, 500_000_000)),
            Some(1_500_000_000)
        );
    }

    #[test]
    fn offered_profiles_are_written_as_rosbag2_writes_them() {
        let q = QosProfile {
            history: History::Unknown,
            reliability: Reliability::Reliable,
            durability: Durability::TransientLocal,
            deadline: None,
            lifespan: Some(1_500_000_000),
            liveliness: Liveliness::Automatic,
            liveliness_lease: None,
        };
        let h = offered_profiles_yaml(&[q], QosYamlStyle::Humble);
        assert_eq!(
            h,
            "- history: 3\n  depth: 0\n  reliability: 1\n  durability: 1\n  deadline:\n    sec: 9223372036\n    nsec: 854775807\n  lifespan:\n    sec: 1\n    nsec: 500000000\n  liveliness: 1\n  liveliness_lease_duration:\n    sec: 9223372036\n    nsec: 854775807\n  avoid_ros_namespace_conventions: false"
        );
        let j = offered_profiles_yaml(&[q, q], QosYamlStyle::Jazzy);
        assert!(j.starts_with("- history: unknown\n  depth: 0\n  reliability: reliable\n  durability: transient_local\n"));
        assert_eq!(j.matches("\n- history").count(), 1);
        assert_eq!(offered_profiles_yaml(&[], QosYamlStyle::Humble), "");
    }
}
