//! One recorded topic's DDS reader and its listener, which count what
//! they receive, and what DDS reports lost upstream, in the topic's
//! [`TopicCounters`].

use std::collections::HashMap;
use std::ffi::c_void;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use cyclors::dds_entity_t;
use edgerec_source::{ChannelId, SourceSink};

use super::ffi::{self, Participant};
use crate::graph::TopicKey;
use crate::names;
use crate::qos::RequestQos;
use crate::setup::TapFn;
use crate::stats::{StatsTable, TopicCounters};
use crate::RosError;

/// What a reader's listener works with; lives in a Box whose address is
/// the listener's argument, freed only after the reader is deleted.
struct ListenerCtx {
    sink: SourceSink,
    /// The channel it is recorded on; none when it is only tapped.
    channel: Option<ChannelId>,
    tap: Option<TapFn>,
    counters: Arc<TopicCounters>,
    failure: Mutex<Option<String>>,
    /// The last source timestamp of each writer (publication handle) seen
    /// by any reader of this topic. A remade reader skips what is not newer
    /// (the transient-local history it is sent again).
    last_seen: Arc<Mutex<HashMap<u64, i64>>>,
    skip_seen: bool,
}

unsafe extern "C" fn on_data(reader: dds_entity_t, arg: *mut c_void) {
    // SAFETY: `arg` is the ListenerCtx of this reader, alive until the
    // reader is deleted (TopicReader::drop deletes it first, and deletion
    // waits for this call to return).
    let ctx = unsafe { &*(arg as *const ListenerCtx) };
    // A panic must not unwind into C: it is caught and ends the run.
    let r = std::panic::catch_unwind(AssertUnwindSafe(|| take_all(reader, ctx)));
    if let Err(p) = r {
        let mut f = ctx.failure.lock().unwrap_or_else(|p| p.into_inner());
        f.get_or_insert_with(|| {
            format!(
                "listener panicked: {}",
                edgerec_source::supervisor::panic_message(&*p)
            )
        });
    }
}

fn take_all(reader: dds_entity_t, ctx: &ListenerCtx) {
    ffi::take_raw(reader, |s, bytes| {
        {
            let mut seen = ctx.last_seen.lock().unwrap_or_else(|p| p.into_inner());
            let last = seen.entry(s.publication_handle).or_insert(i64::MIN);
            if ctx.skip_seen && s.source_timestamp <= *last {
                ctx.counters.duplicates.fetch_add(1, Ordering::Relaxed);
                return;
            }
            *last = (*last).max(s.source_timestamp);
        }
        ctx.counters.received.fetch_add(1, Ordering::Relaxed);
        let log_time = ctx.sink.now_ns();
        if let Some(tap) = &ctx.tap {
            tap(bytes, log_time, s.publication_handle);
        }
        let Some(channel) = ctx.channel else {
            ctx.sink.alive();
            return;
        };
        let publish_time = u64::try_from(s.source_timestamp)
            .ok()
            .filter(|t| *t > 0)
            .unwrap_or(log_time);
        // Charged to the budget before it is copied; a refusal (budget
        // spent, queue full, paused) is counted on the channel by the sink.
        let _ = ctx.sink.push_copy(channel, log_time, publish_time, bytes);
    });
}

/// A recorded topic's reader.
pub struct TopicReader {
    key: TopicKey,
    topic: dds_entity_t,
    reader: dds_entity_t,
    ctx: *mut ListenerCtx,
    /// DDS loss counts of readers this one replaced.
    base: (u64, u64),
    polled: Mutex<(u64, u64)>,
}

// SAFETY: `ctx` is only dereferenced by the listener (through Cyclone) and
// freed in drop after the reader is deleted; the struct moves between
// threads only as a whole.
unsafe impl Send for TopicReader {}

impl TopicReader {
    /// Creates the topic and its reader; data flows into `channel` and to
    /// the tap, each when there is one.
    pub fn new(
        dp: &Participant,
        key: &TopicKey,
        request: &RequestQos,
        sink: &SourceSink,
        (channel, tap): (Option<ChannelId>, Option<TapFn>),
        stats: &StatsTable,
    ) -> Result<Self, RosError> {
        let dds_type = names::dds_type(&key.type_name).ok_or_else(|| RosError::Middleware {
            call: format!("subscribe {}", key.topic),
            reason: format!("{} is not a pkg/msg/Type name", key.type_name),
        })?;
        let topic = dp.blob_topic(&names::dds_topic(&key.topic), &dds_type)?;
        let ctx = Box::new(ListenerCtx {
            sink: sink.clone(),
            channel,
            tap,
            counters: stats.counters(key),
            failure: Mutex::new(None),
            last_seen: Arc::new(Mutex::new(HashMap::new())),
            skip_seen: false,
        });
        Self::with_ctx(dp, key.clone(), topic, request, ctx, (0, 0))
    }

    fn with_ctx(
        dp: &Participant,
        key: TopicKey,
        topic: dds_entity_t,
        request: &RequestQos,
        ctx: Box<ListenerCtx>,
        base: (u64, u64),
    ) -> Result<Self, RosError> {
        let ctx = Box::into_raw(ctx);
        // SAFETY: `ctx` lives until drop, after the reader is deleted;
        // on_data catches panics.
        let reader = unsafe { dp.blob_reader(topic, request, on_data, ctx as *mut c_void) };
        match reader {
            Ok(reader) => Ok(TopicReader {
                key,
                topic,
                reader,
                ctx,
                base,
                polled: Mutex::new((0, 0)),
            }),
            Err(e) => {
                // SAFETY: no reader was made, so nothing else has `ctx`.
                drop(unsafe { Box::from_raw(ctx) });
                Err(e)
            }
        }
    }

    /// A new reader with `request` on the same topic and channel, made
    /// before this one is deleted so nothing published in between is
    /// missed; what both receive is kept once.
    pub fn remake(self, dp: &Participant, request: &RequestQos) -> Result<Self, RosError> {
        self.poll_loss();
        let polled = *self.polled.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: `self.ctx` is alive until self is dropped below.
        let old = unsafe { &*self.ctx };
        let ctx = Box::new(ListenerCtx {
            sink: old.sink.clone(),
            channel: old.channel,
            tap: old.tap.clone(),
            counters: old.counters.clone(),
            failure: Mutex::new(None),
            last_seen: old.last_seen.clone(),
            skip_seen: true,
        });
        let base = (self.base.0 + polled.0, self.base.1 + polled.1);
        let new = Self::with_ctx(dp, self.key.clone(), self.topic, request, ctx, base)?;
        drop(self);
        Ok(new)
    }

    /// Reads DDS's lost and rejected counts into the topic's counters.
    pub fn poll_loss(&self) {
        let (lost, rejected) = ffi::loss_counts(self.reader);
        *self.polled.lock().unwrap_or_else(|p| p.into_inner()) = (lost, rejected);
        // SAFETY: ctx is alive while self is.
        let ctx = unsafe { &*self.ctx };
        let c = &ctx.counters;
        let (lost, rejected) = (self.base.0 + lost, self.base.1 + rejected);
        c.lost.store(lost, Ordering::Relaxed);
        c.rejected.store(rejected, Ordering::Relaxed);
        // On the channel too: the status and each file's edgerec.drops.
        if let Some(ch) = ctx.channel {
            ctx.sink.set_upstream_lost(ch, lost + rejected);
        }
    }

    /// Why the listener failed, if it did.
    pub fn failure(&self) -> Option<String> {
        // SAFETY: ctx is alive while self is.
        let ctx = unsafe { &*self.ctx };
        ctx.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The topic's name.
    pub fn topic(&self) -> &str {
        &self.key.topic
    }
}

impl Drop for TopicReader {
    fn drop(&mut self) {
        ffi::delete(self.reader);
        // SAFETY: the reader is deleted and Cyclone waited for its listener,
        // so nothing uses ctx any more; it came from Box::into_raw.
        drop(unsafe { Box::from_raw(self.ctx) });
    }
}
