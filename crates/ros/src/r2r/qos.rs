//! QoS between rmw's profiles (as r2r carries them) and edgerec's: a
//! publisher's offer as discovery reports it, and edgerec's request as
//! the profile a subscription is made with.

use ::r2r::qos::{DurabilityPolicy, HistoryPolicy, LivelinessPolicy, ReliabilityPolicy};

use crate::qos::{
    from_rmw_duration, Durability, History, Liveliness, QosProfile, Reliability, RequestQos,
};

/// A publisher's offer. A policy rmw does not state (system default,
/// unknown) is taken as the weaker one, so the adapted request still
/// matches the publisher whatever it really offers.
pub(super) fn offered(q: &::r2r::QosProfile) -> QosProfile {
    QosProfile {
        history: match q.history {
            HistoryPolicy::KeepLast => {
                History::KeepLast(u32::try_from(q.depth).unwrap_or(u32::MAX))
            }
            HistoryPolicy::KeepAll => History::KeepAll,
            _ => History::Unknown,
        },
        reliability: match q.reliability {
            ReliabilityPolicy::Reliable => Reliability::Reliable,
            _ => Reliability::BestEffort,
        },
        durability: match q.durability {
            DurabilityPolicy::TransientLocal => Durability::TransientLocal,
            _ => Durability::Volatile,
        },
        deadline: from_rmw_duration(q.deadline),
        lifespan: from_rmw_duration(q.lifespan),
        liveliness: match q.liveliness {
            LivelinessPolicy::ManualByTopic => Liveliness::ManualByTopic,
            _ => Liveliness::Automatic,
        },
        liveliness_lease: from_rmw_duration(q.liveliness_lease_duration),
    }
}

/// The profile a subscription asks with: keep last `depth`, the requested
/// reliability and durability, the rest rmw's defaults (which match any
/// deadline, lifespan and liveliness offered).
pub(super) fn request(r: &RequestQos) -> ::r2r::QosProfile {
    let depth = usize::try_from(r.depth).unwrap_or(usize::MAX);
    let q = ::r2r::QosProfile::default().keep_last(depth);
    let q = match r.reliability {
        Reliability::Reliable => q.reliable(),
        Reliability::BestEffort => q.best_effort(),
    };
    match r.durability {
        Durability::Volatile => q.volatile(),
        Durability::TransientLocal => q.transient_local(),
    }
}
