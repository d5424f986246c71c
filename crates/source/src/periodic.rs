//! A topic written at a fixed period from a closure: the recorder's own
//! topics (`/edgerec/status`, `/edgerec/clock`) go through the same
//! queues, chunks and segments as sensor data, and are counted the same
//! way.

use std::time::{Duration, Instant};

use crate::channel::ChannelSpec;
use crate::envelope::Envelope;
use crate::error::SourceError;
use crate::sink::SourceSink;
use crate::source::Source;
use crate::stop::Stop;

/// Builds one message's payload for the time given (ns on the recording
/// clock); `None` skips this period.
pub type Produce = Box<dyn FnMut(u64) -> Option<Vec<u8>> + Send>;

/// A topic written every `period`.
pub struct PeriodicTopic {
    spec: ChannelSpec,
    period: Duration,
    produce: Produce,
}

impl std::fmt::Debug for PeriodicTopic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeriodicTopic")
            .field("topic", &self.spec.topic)
            .field("period", &self.period)
            .finish()
    }
}

impl PeriodicTopic {
    /// The channel `spec`, one message from `produce` every `period`.
    pub fn new(spec: ChannelSpec, period: Duration, produce: Produce) -> Self {
        Self {
            spec,
            period,
            produce,
        }
    }
}

impl Source for PeriodicTopic {
    fn name(&self) -> String {
        self.spec.topic.clone()
    }

    fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError> {
        let channel = sink.register(self.spec.clone())?;
        let mut next = Instant::now();
        while !stop.is_requested() {
            let now = Instant::now();
            if now >= next {
                let t = sink.now_ns();
                if let Some(payload) = (self.produce)(t) {
                    // A refused push is counted as a drop on this channel
                    // like any other.
                    let _ = sink.push(Envelope {
                        channel,
                        log_time: t,
                        publish_time: t,
                        payload,
                    });
                }
                next += self.period;
                if next < now {
                    // Fell behind (suspended, overloaded): skip, do not burst.
                    next = now + self.period;
                }
            }
            sink.alive();
            stop.wait_timeout(
                next.saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(100)),
            );
        }
        Ok(())
    }
}
