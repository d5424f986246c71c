//! The recorder's warnings and errors, forwarded to the fleet on
//! `<prefix>/log`: a `tracing` layer the binary installs beside its log
//! output, sending once the link is attached, rate-limited (a burst of
//! [`BURST`], then one every [`EVERY`]); what the limit holds back is
//! counted and said in the next line sent (`"suppressed": n`). rumqttc's
//! own lines are not forwarded (they are about the link itself).
//!
//! Line: `{"level": "WARN" | "ERROR", "target", "message", "fields":
//! {...}, "at": unix_ms, "suppressed": n}`, the message at most
//! [`MAX_MESSAGE`] bytes.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// Lines sent at once before the rate applies.
pub const BURST: u32 = 20;

/// Then one line this often.
pub const EVERY: Duration = Duration::from_secs(3);

/// A message (and each field) is cut to this many bytes.
pub const MAX_MESSAGE: usize = 2048;

/// Where forwarded lines go (the link's outbox), once attached.
pub type LogSink = Box<dyn Fn(Vec<u8>) + Send + Sync>;

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
    suppressed: u64,
}

/// The layer; [`LogForward::attach`] gives it the sink.
#[derive(Clone)]
pub struct LogForward {
    sink: Arc<OnceLock<LogSink>>,
    bucket: Arc<Mutex<Bucket>>,
}

impl Default for LogForward {
    fn default() -> Self {
        LogForward {
            sink: Arc::new(OnceLock::new()),
            bucket: Arc::new(Mutex::new(Bucket {
                tokens: f64::from(BURST),
                at: Instant::now(),
                suppressed: 0,
            })),
        }
    }
}

impl LogForward {
    /// Sends from now on to `sink`; false when already attached.
    pub fn attach(&self, sink: LogSink) -> bool {
        self.sink.set(sink).is_ok()
    }

    /// Takes a token; `None` when over the rate (counted), else the count
    /// held back since the last line sent.
    fn take(&self) -> Option<u64> {
        let mut b = self.bucket.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let refill = now.duration_since(b.at).as_secs_f64() / EVERY.as_secs_f64();
        b.tokens = (b.tokens + refill).min(f64::from(BURST));
        b.at = now;
        if b.tokens < 1.0 {
            b.suppressed += 1;
            return None;
        }
        b.tokens -= 1.0;
        Some(std::mem::take(&mut b.suppressed))
    }
}

fn cut(mut s: String) -> String {
    if s.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

#[derive(Default)]
struct Fields {
    message: String,
    fields: Map<String, Value>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut text = String::new();
        let _ = write!(text, "{value:?}");
        if field.name() == "message" {
            self.message = cut(text);
        } else if self.fields.len() < 32 {
            self.fields
                .insert(field.name().to_owned(), Value::String(cut(text)));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = cut(value.to_owned());
        } else if self.fields.len() < 32 {
            self.fields.insert(
                field.name().to_owned(),
                Value::String(cut(value.to_owned())),
            );
        }
    }
}

impl<S: Subscriber> Layer<S> for LogForward {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() > Level::WARN || meta.target().starts_with("rumqttc") {
            return;
        }
        let Some(sink) = self.sink.get() else {
            return;
        };
        let Some(suppressed) = self.take() else {
            return;
        };
        let mut f = Fields::default();
        event.record(&mut f);
        let at = crate::unix_ms();
        let line = json!({
            "level": meta.level().as_str(),
            "target": meta.target(),
            "message": f.message,
            "fields": f.fields,
            "at": at,
            "suppressed": suppressed,
        });
        sink(line.to_string().into_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn warnings_and_errors_go_out_rate_limited_with_the_count_held_back() {
        let fwd = LogForward::default();
        let got: Arc<Mutex<Vec<Value>>> = Arc::default();
        let g = got.clone();
        let subscriber = tracing_subscriber::registry().with(fwd.clone());
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!("before the link: not kept");
            assert!(fwd.attach(Box::new(move |b| {
                g.lock().unwrap().push(serde_json::from_slice(&b).unwrap());
            })));
            tracing::info!("info is not forwarded");
            tracing::warn!(path = "/data/x", "disk slow");
            tracing::error!(target: "rumqttc::state", "not forwarded either");
            for i in 0..30 {
                tracing::error!("burst {i}");
            }
        });
        let got = got.lock().unwrap();
        assert_eq!(got.len(), BURST as usize, "{got:#?}");
        assert_eq!(got[0]["level"], "WARN");
        assert_eq!(got[0]["message"], "disk slow");
        assert_eq!(got[0]["fields"]["path"], "/data/x");
        assert_eq!(got[1]["message"], "burst 0");
        assert!(got.iter().all(|l| l["suppressed"] == 0));
        // The next one after the refill says how many were held back.
        drop(got);
        let mut b = fwd.bucket.lock().unwrap();
        b.at -= EVERY;
        drop(b);
        assert_eq!(fwd.take(), Some(11));
    }

    #[test]
    fn long_messages_are_cut_on_a_character() {
        let s = cut("é".repeat(MAX_MESSAGE));
        assert!(s.len() <= MAX_MESSAGE + '…'.len_utf8());
        assert!(s.ends_with('…'));
    }
}
