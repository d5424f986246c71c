//! One recorded topic's raw subscription: the stream r2r fills while the
//! node spins, emptied into the sink on the same thread right after each
//! spin, and, while its QoS is adapted again, the subscription it replaces
//! next to it (see [`crate::overlap`]).

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use edgerec_source::{ChannelId, Envelope, SourceSink};
use futures_core::Stream;

use crate::graph::TopicKey;
use crate::overlap::{Overlap, Side};
use crate::qos::RequestQos;
use crate::stats::TopicCounters;
use crate::RosError;

use super::{qos, rcl_error};

/// What `Node::subscribe_raw` returns: serialized messages (CDR with its
/// encapsulation header), nothing else.
pub(super) type RawStream = Box<dyn Stream<Item = Vec<u8>> + Unpin>;

/// Why a subscription was not made.
#[derive(Debug)]
pub(super) enum OpenError {
    /// r2r was built without this type (`Error::InvalidMessageType`): it
    /// needs type support even for raw bytes.
    NotInTypeTable(String),
    /// rcl refused.
    Middleware(RosError),
}

/// Subscribes to `key` with `request`.
pub(super) fn open(
    node: &mut ::r2r::Node,
    key: &TopicKey,
    request: &RequestQos,
) -> Result<RawStream, OpenError> {
    match node.subscribe_raw(&key.topic, &key.type_name, qos::request(request)) {
        Ok(s) => Ok(Box::new(s)),
        Err(::r2r::Error::InvalidMessageType { msgtype }) => {
            Err(OpenError::NotInTypeTable(format!(
                "{}: {msgtype} is not in r2r's generated type table, so it cannot be \
                 subscribed to and is not recorded (source the package that defines it \
                 before building edgerec)",
                key.topic
            )))
        }
        Err(e) => Err(OpenError::Middleware(rcl_error(
            format!("subscribe_raw {} ({})", key.topic, key.type_name),
            e,
        ))),
    }
}

/// A recorded topic.
pub(super) struct Subscription {
    key: TopicKey,
    channel: ChannelId,
    counters: Arc<TopicCounters>,
    stream: RawStream,
    /// The subscription this one replaces, while both deliver.
    old: Option<RawStream>,
    overlap: Option<Overlap>,
}

impl Subscription {
    /// A topic recorded into `channel` from `stream`.
    pub(super) fn new(
        key: TopicKey,
        channel: ChannelId,
        counters: Arc<TopicCounters>,
        stream: RawStream,
    ) -> Self {
        Subscription {
            key,
            channel,
            counters,
            stream,
            old: None,
            overlap: None,
        }
    }

    /// Goes on with `stream`, made with another QoS. The current one keeps
    /// delivering for [`crate::overlap::OLD_KEPT`]; a replacement still in
    /// progress drops its oldest subscription and starts over.
    pub(super) fn replace(&mut self, stream: RawStream, now: Instant) {
        self.old = Some(std::mem::replace(&mut self.stream, stream));
        self.overlap = Some(Overlap::new(now));
    }

    /// Pushes what r2r has handed over into the sink; never blocks. Run
    /// after every spin, it keeps r2r's channel (10 deep, full means
    /// dropped) from holding more than the one message a spin adds.
    pub(super) fn drain(
        &mut self,
        sink: &SourceSink,
        cx: &mut Context<'_>,
        now: Instant,
    ) -> Result<(), RosError> {
        let Subscription {
            key,
            channel,
            counters,
            stream,
            old,
            overlap,
        } = self;
        let mut put = |side: Side, payload: Vec<u8>| {
            deliver(sink, *channel, counters, overlap.as_mut(), side, payload)
        };
        if let Some(o) = old.as_mut() {
            if !take(o, cx, |p| put(Side::Old, p)) {
                *old = None;
            }
        }
        if !take(stream, cx, |p| put(Side::New, p)) {
            return Err(RosError::Middleware {
                call: format!("subscription {} ({})", key.topic, key.type_name),
                reason: "r2r closed its stream while the node was alive".into(),
            });
        }
        if let Some(o) = &self.overlap {
            if self.old.is_some() && o.old_can_go(now) {
                // Dropping the stream makes r2r destroy the subscription
                // when it next takes a message for it.
                self.old = None;
            }
            if o.done(now, self.old.is_none()) {
                self.old = None;
                self.overlap = None;
            }
        }
        Ok(())
    }

    /// The topic.
    pub(super) fn key(&self) -> &TopicKey {
        &self.key
    }
}

/// Hands every message ready in `stream` to `f`; false once the stream
/// has ended.
fn take(stream: &mut RawStream, cx: &mut Context<'_>, mut f: impl FnMut(Vec<u8>)) -> bool {
    loop {
        match Pin::new(&mut *stream).poll_next(cx) {
            Poll::Ready(Some(payload)) => f(payload),
            Poll::Ready(None) => return false,
            Poll::Pending => return true,
        }
    }
}

fn deliver(
    sink: &SourceSink,
    channel: ChannelId,
    counters: &TopicCounters,
    overlap: Option<&mut Overlap>,
    side: Side,
    payload: Vec<u8>,
) {
    if let Some(o) = overlap {
        if !o.keep(side, &payload) {
            counters.duplicates.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
    counters.received.fetch_add(1, Ordering::Relaxed);
    // subscribe_raw discards the message info: no source timestamp.
    let t = sink.now_ns();
    // A refusal (queue full, budget spent, paused) is counted on the
    // channel by the sink.
    let _ = sink.push(Envelope {
        channel,
        log_time: t,
        publish_time: t,
        payload,
    });
}
