//! The bounded hand-over of `sensor_msgs/msg/Image`s from the ROS 2 source
//! that receives the topic to the camera that encodes it ([`ImageTap`] /
//! [`ImageFeed`]); the images are decoded and checked by
//! [`edgerec_ros::image`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

pub use edgerec_ros::image::{decode, gst_format, ImageError, RawImage, ENCODINGS};

/// Images waiting for the encoder at most: a slow encoder drops the newest
/// (counted), it never holds up the DDS reader.
pub const FEED_DEPTH: usize = 4;

/// The ROS 2 source's end: offers each received image of the input topic.
#[derive(Clone)]
pub struct ImageTap {
    tx: SyncSender<RawImage>,
    stats: Arc<FeedStats>,
}

/// What a tap refused, for the camera to count.
#[derive(Debug, Default)]
pub struct FeedStats {
    /// Images dropped because the encoder was behind.
    pub dropped: AtomicU64,
    /// Images refused: not decodable, or sizes that do not fit their data.
    /// Counted with the channel's losses before the encoder.
    pub bad: AtomicU64,
    /// When each publisher's refusal was last logged.
    logged: Mutex<BadLog>,
}

impl FeedStats {
    /// Images received that will not be frames: dropped while the encoder
    /// was behind, or refused.
    pub fn lost(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed) + self.bad.load(Ordering::Relaxed)
    }
}

/// How often a refused image is logged: once a minute per publisher, and
/// at most [`BadLog::MAX_PER_MINUTE`] lines a minute in all, so a peer
/// flooding bad images (or many peers) cannot flood the log.
#[derive(Debug, Default)]
struct BadLog {
    /// Publisher -> when its last refusal was logged.
    last: HashMap<u64, Instant>,
    /// Lines logged in the current minute, and when it began.
    minute: Option<(Instant, u32)>,
}

impl BadLog {
    const PERIOD: Duration = Duration::from_secs(60);
    const MAX_PER_MINUTE: u32 = 16;

    /// Whether a refusal from `publisher` at `now` is logged.
    fn should_log(&mut self, publisher: u64, now: Instant) -> bool {
        if self
            .last
            .get(&publisher)
            .is_some_and(|t| now.duration_since(*t) < Self::PERIOD)
        {
            return false;
        }
        let (start, lines) = self.minute.get_or_insert((now, 0));
        if now.duration_since(*start) >= Self::PERIOD {
            *start = now;
            *lines = 0;
        }
        if *lines >= Self::MAX_PER_MINUTE {
            return false;
        }
        *lines += 1;
        // Bounded: publishers not heard from for a minute are forgotten.
        self.last
            .retain(|_, t| now.duration_since(*t) < Self::PERIOD);
        self.last.insert(publisher, now);
        true
    }
}

impl std::fmt::Debug for ImageTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageTap").finish_non_exhaustive()
    }
}

/// The camera's end.
#[derive(Debug)]
pub struct ImageFeed {
    pub(crate) rx: Receiver<RawImage>,
    pub(crate) stats: Arc<FeedStats>,
}

/// A tap and its feed.
pub fn feed() -> (ImageTap, ImageFeed) {
    let (tx, rx) = sync_channel(FEED_DEPTH);
    let stats = Arc::new(FeedStats::default());
    (
        ImageTap {
            tx,
            stats: stats.clone(),
        },
        ImageFeed { rx, stats },
    )
}

impl ImageTap {
    /// Offers one received message from `publisher` (the DDS publication
    /// handle); never blocks. A refused image is counted and logged once a
    /// minute per publisher; the next good one is encoded as usual.
    pub fn offer(&self, payload: &[u8], received_ns: u64, publisher: u64) {
        match decode(payload, received_ns) {
            Ok(img) => match self.tx.try_send(img) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                Err(TrySendError::Full(_)) => {
                    self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                }
            },
            Err(e) => {
                let n = self.stats.bad.fetch_add(1, Ordering::Relaxed) + 1;
                let log = self
                    .stats
                    .logged
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .should_log(publisher, Instant::now());
                if log {
                    tracing::warn!(
                        "image topic: an image from publisher {publisher:#x} is refused: {e} \
                         ({n} refused so far, counted as lost before the encoder; logged once \
                         a minute per publisher)"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgerec_format::cdr::{msg, Time};

    #[test]
    fn a_full_feed_drops_and_counts() {
        let (tap, feed) = feed();
        let m = msg::image(Time::default(), "", 2, 2, "mono8", 0, 2, &[1, 2, 3, 4]);
        for _ in 0..FEED_DEPTH + 3 {
            tap.offer(&m, 1, 7);
        }
        tap.offer(&[1, 2, 3], 1, 7);
        assert_eq!(feed.stats.dropped.load(Ordering::Relaxed), 3);
        assert_eq!(feed.stats.bad.load(Ordering::Relaxed), 1);
        assert_eq!(feed.rx.try_iter().count(), FEED_DEPTH);
    }

    #[test]
    fn refusals_are_logged_once_a_minute_per_publisher_and_bounded() {
        let mut log = BadLog::default();
        let t0 = Instant::now();
        assert!(log.should_log(1, t0));
        assert!(!log.should_log(1, t0 + Duration::from_secs(59)));
        assert!(log.should_log(2, t0 + Duration::from_secs(1)));
        assert!(log.should_log(1, t0 + Duration::from_secs(61)));
        // Many publishers: at most 16 lines a minute in all.
        let mut log = BadLog::default();
        let logged = (0..100).filter(|p| log.should_log(*p, t0)).count();
        assert_eq!(logged, BadLog::MAX_PER_MINUTE as usize);
        assert!(log.should_log(500, t0 + Duration::from_secs(60)));
        assert!(log.last.len() <= BadLog::MAX_PER_MINUTE as usize);
    }
}
