//! A camera as a [`Source`]: one GStreamer pipeline per run, pulled on the
//! supervisor's thread for it. An error on the bus, an end of stream (a
//! camera unplugged, an RTSP server gone) or a pipeline that will not start
//! ends the run with an error, and the supervisor starts it again with
//! backoff; the new pipeline's encoder starts on a keyframe. Every other
//! source keeps recording meanwhile.
//!
//! What can be known before recording starts is checked in
//! [`CameraSource::new`]: GStreamer itself, the encoder (and why it was
//! chosen), every element the pipeline needs, and that the description
//! parses. Those are start-up errors, not restarts.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use edgerec_config::{CameraConfig, CameraSourceKind};
use edgerec_source::{ChannelId, Envelope, Source, SourceError, SourceSink, Stop};
use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;

use crate::argus::SensorStamps;
use crate::encoder::{self, EncodeSettings, Selection};
use crate::image::{ImageFeed, RawImage};
use crate::launch;
use crate::message;
use crate::nal::AccessUnit;
use crate::timing::{monotonic_ns, FrameGaps, Monotone};

pub use crate::image::{feed, ImageTap};

/// How long one pull waits for a frame before the loop looks at the bus,
/// the stop request and the key-unit requests again.
const PULL_WAIT: Duration = Duration::from_millis(50);

/// How long a camera may give no frame after it started before the run is
/// an error (a v4l2 device that opens but never streams).
const FIRST_FRAME_WAIT: Duration = Duration::from_secs(10);

/// How long a camera that has been delivering may go without a frame
/// before the run is an error (an encoder or driver that stalls without a
/// word on the bus: seen with x265enc starved of CPU at 1080p); the
/// supervisor then restarts it. Not for topic cameras, whose input may
/// just be quiet.
const STALL_WAIT: Duration = Duration::from_secs(3);

/// Frames the appsink holds at most (the camera thread takes each at once;
/// this is slack for a thread that was not scheduled).
const SINK_BUFFERS: u32 = 60;

/// Why a camera cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum CameraError {
    /// GStreamer could not be initialised.
    #[error("GStreamer: {0}")]
    Init(String),
    /// A missing encoder or element, or a description that does not parse.
    #[error("camera `{camera}`: {reason}")]
    Setup {
        /// The camera's name.
        camera: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
}

/// Initialises GStreamer once per process.
pub fn init() -> Result<(), CameraError> {
    gst::init().map_err(|e| CameraError::Init(e.to_string()))
}

/// Which of `elements` GStreamer lacks (for tests and probes that skip
/// when a plugin is not installed).
pub fn missing_elements(elements: &[&str]) -> Result<Vec<String>, CameraError> {
    init()?;
    Ok(elements
        .iter()
        .filter(|e| gst::ElementFactory::find(e).is_none())
        .map(|e| e.to_string())
        .collect())
}

/// What a camera records and how, shared with the status.
#[derive(Debug, Default)]
pub struct CameraStats {
    /// Access units recorded.
    pub frames: std::sync::atomic::AtomicU64,
    /// Of them keyframes.
    pub keyframes: std::sync::atomic::AtomicU64,
    /// Frames lost before the encoder (timestamp or frame-number gaps).
    pub lost: std::sync::atomic::AtomicU64,
}

/// One camera.
pub struct CameraSource {
    cfg: CameraConfig,
    topic: String,
    selection: Selection,
    settings: EncodeSettings,
    description: String,
    /// Survive restarts: the channel's stamps keep increasing.
    stamps: Monotone,
    gaps: FrameGaps,
    stats: Arc<CameraStats>,
    feed: Option<ImageFeed>,
    /// argus: the sensor's stamps and frame numbers, by PTS.
    sensor: SensorStamps,
    last_frame_num: Option<i64>,
    stall_wait: Duration,
}

impl std::fmt::Debug for CameraSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CameraSource")
            .field("name", &self.cfg.name)
            .field("encoder", &self.selection.encoder)
            .finish_non_exhaustive()
    }
}

impl CameraSource {
    /// Checks everything that can be checked before recording: GStreamer,
    /// the encoder, the elements, the description. A `topic` camera needs
    /// the feed its ROS 2 source fills ([`feed`]).
    pub fn new(cfg: &CameraConfig, feed: Option<ImageFeed>) -> Result<Self, CameraError> {
        init()?;
        let setup = |reason: String| CameraError::Setup {
            camera: cfg.name.clone(),
            reason,
        };
        let has = |name: &str| gst::ElementFactory::find(name).is_some();
        let selection = encoder::select(cfg.encoder, &has).map_err(setup)?;
        let missing: Vec<String> = launch::needed_elements(cfg)
            .into_iter()
            .filter(|(e, _)| !has(e))
            .map(|(e, pkg)| format!("{e} (install {pkg})"))
            .collect();
        if !missing.is_empty() {
            return Err(setup(format!("GStreamer has no {}", missing.join(", "))));
        }
        if cfg.source == CameraSourceKind::Topic && feed.is_none() {
            return Err(setup(format!(
                "source = \"topic\" needs the ROS 2 source to receive {}",
                cfg.input_topic
            )));
        }
        let keyframe_frames =
            ((cfg.keyframe_interval.as_secs_f64() * f64::from(cfg.fps)).round() as u32).max(1);
        let settings = EncodeSettings {
            bitrate: cfg.bitrate,
            rate_control: cfg.rate_control,
            keyframe_frames,
            preset: cfg.preset.clone(),
        };
        let description = launch::describe(cfg, selection.encoder, &settings)
            .map_err(|e| setup(format!("pipeline = {:?} is refused: {e}", cfg.pipeline)))?;
        // Parsed now, so a bad `pipeline` is a start-up error with
        // GStreamer's own words; each run parses it again.
        let parsed = gst::parse::launch(&description).map_err(|e| {
            setup(format!(
                "the pipeline does not parse: {e}\n  pipeline: {description}"
            ))
        })?;
        let _ = parsed.set_state(gst::State::Null);
        tracing::info!(
            "camera {}: encoder {} ({}); pipeline: {description}",
            cfg.name,
            selection.encoder.element(),
            selection.reason
        );
        Ok(CameraSource {
            topic: cfg.video_topic(),
            gaps: FrameGaps::new(cfg.fps),
            cfg: cfg.clone(),
            selection,
            settings,
            description,
            stamps: Monotone::default(),
            stats: Arc::new(CameraStats::default()),
            feed,
            sensor: SensorStamps::default(),
            last_frame_num: None,
            stall_wait: STALL_WAIT,
        })
    }

    /// How long the camera may go without a frame, once it has given one,
    /// before its run is an error and it is restarted; default 3 s.
    pub fn with_stall_wait(mut self, wait: Duration) -> Self {
        self.stall_wait = wait;
        self
    }

    /// The encoder and why.
    pub fn selection(&self) -> &Selection {
        &self.selection
    }

    /// The pipeline each run starts.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Its counters.
    pub fn stats(&self) -> Arc<CameraStats> {
        self.stats.clone()
    }

    /// The channel's metadata: what was asked of the camera.
    fn metadata(&self) -> BTreeMap<String, String> {
        let c = &self.cfg;
        [
            ("video.source", c.source.as_str().to_owned()),
            ("video.encoder", self.selection.encoder.element().to_owned()),
            ("video.width", c.width.to_string()),
            ("video.height", c.height.to_string()),
            ("video.fps", c.fps.to_string()),
            ("video.bitrate", c.bitrate.to_string()),
            (
                "video.keyframe_interval_frames",
                self.settings.keyframe_frames.to_string(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }

    /// Whether frame gaps in the timestamps mean lost frames: only for
    /// sources that deliver at the configured rate.
    fn fixed_rate(&self) -> bool {
        matches!(
            self.cfg.source,
            CameraSourceKind::Test | CameraSourceKind::V4l2 | CameraSourceKind::Argus
        )
    }
}

/// Sets the pipeline to NULL however the run ends (a panic included).
struct Running(gst::Pipeline);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.set_state(gst::State::Null);
    }
}

/// `GstForceKeyUnit`, upstream, all headers: what
/// `gst_video_event_new_upstream_force_key_unit` makes (gstreamer-video is
/// not a dependency for this one event).
fn force_key_unit() -> gst::Event {
    let s = gst::Structure::builder("GstForceKeyUnit")
        .field("running-time", u64::MAX)
        .field("all-headers", true)
        .field("count", 0u32)
        .build();
    gst::event::CustomUpstream::new(s)
}

fn device_error(camera: &str, reason: impl Into<String>) -> SourceError {
    SourceError::Device {
        device: format!("camera {camera}"),
        reason: reason.into(),
    }
}

/// The first error or end of stream on the bus, if any.
fn bus_failure(bus: &gst::Bus) -> Option<String> {
    while let Some(msg) = bus.pop() {
        match msg.view() {
            gst::MessageView::Error(e) => {
                let src = e
                    .src()
                    .map(|s| s.path_string().to_string())
                    .unwrap_or_default();
                let debug = e.debug().map(|d| format!(" ({d})")).unwrap_or_default();
                return Some(format!("{src}: {}{debug}", e.error()));
            }
            gst::MessageView::Eos(_) => {
                return Some("the stream ended (end of stream): the camera went away".to_owned())
            }
            gst::MessageView::Warning(w) => {
                tracing::warn!("camera: {}", w.error());
            }
            _ => {}
        }
    }
    None
}

/// What a `topic` camera keeps per input image until its access unit comes
/// out: the running time it was pushed at, its stamp and receive time.
type Pending = Arc<Mutex<VecDeque<(u64, u64, u64)>>>;

impl Source for CameraSource {
    fn name(&self) -> String {
        format!(
            "camera {} ({})",
            self.cfg.name,
            self.selection.encoder.element()
        )
    }

    fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError> {
        let name = self.cfg.name.clone();
        let pipeline = gst::parse::launch(&self.description)
            .map_err(|e| device_error(&name, format!("pipeline: {e}")))?
            .downcast::<gst::Pipeline>()
            .map_err(|_| device_error(&name, "the description is not a pipeline"))?;
        let running = Running(pipeline);
        let pipeline = &running.0;
        // CLOCK_MONOTONIC: base_time + running time is the capture instant.
        pipeline.use_clock(Some(&gst::SystemClock::obtain()));
        let appsink = pipeline
            .by_name(launch::SINK_NAME)
            .and_then(|e| e.downcast::<gst_app::AppSink>().ok())
            .ok_or_else(|| device_error(&name, "no appsink in the pipeline"))?;
        appsink.set_sync(false);
        appsink.set_max_buffers(SINK_BUFFERS);
        appsink.set_drop(false);
        let enc_pad = pipeline
            .by_name(launch::ENCODER_NAME)
            .and_then(|e| e.static_pad("src"))
            .ok_or_else(|| device_error(&name, "no encoder src pad"))?;
        let appsrc = pipeline
            .by_name(launch::INPUT_NAME)
            .and_then(|e| e.downcast::<gst_app::AppSrc>().ok());
        let bus = pipeline
            .bus()
            .ok_or_else(|| device_error(&name, "the pipeline has no bus"))?;
        let channel = sink.register(message::channel_spec(&self.topic, self.metadata()))?;
        pipeline.set_state(gst::State::Playing).map_err(|_| {
            let why = bus_failure(&bus).unwrap_or_else(|| "it refused to start".to_owned());
            device_error(&name, why)
        })?;
        self.gaps.reset();
        self.last_frame_num = None;
        if let Some(cam) = pipeline.by_name(launch::CAMERA_NAME) {
            if !self.sensor.probe(&cam) {
                tracing::warn!("camera {name}: no src pad to read the sensor timestamps from; using the buffer times");
            }
        }
        let mut key_seen = sink.key_unit_requests();
        let started = std::time::Instant::now();
        let mut frames_this_run = 0u64;
        let mut last_frame = std::time::Instant::now();
        let pending: Pending = Arc::default();
        let mut caps_set: Option<(u32, u32, &'static str)> = None;
        while !stop.is_requested() {
            if let Some(why) = bus_failure(&bus) {
                return Err(device_error(&name, why));
            }
            let k = sink.key_unit_requests();
            if k != key_seen {
                key_seen = k;
                if !enc_pad.send_event(force_key_unit()) {
                    tracing::debug!("camera {name}: the encoder did not take force-key-unit");
                }
            }
            if let (Some(src), Some(feed)) = (&appsrc, &self.feed) {
                self.feed_images(feed, src, pipeline, &pending, &mut caps_set, sink, channel)?;
            }
            let Some(sample) = appsink
                .try_pull_sample(gst::ClockTime::from_mseconds(PULL_WAIT.as_millis() as u64))
            else {
                if appsink.is_eos() {
                    let why = bus_failure(&bus).unwrap_or_else(|| "end of stream".to_owned());
                    return Err(device_error(&name, why));
                }
                sink.alive();
                if frames_this_run == 0
                    && self.feed.is_none()
                    && started.elapsed() > FIRST_FRAME_WAIT
                {
                    return Err(device_error(
                        &name,
                        format!("no frame in {} s after start", FIRST_FRAME_WAIT.as_secs()),
                    ));
                }
                if frames_this_run > 0
                    && self.feed.is_none()
                    && last_frame.elapsed() > self.stall_wait
                {
                    return Err(device_error(
                        &name,
                        format!(
                            "no frame for {} ms after {frames_this_run}: the camera or its encoder stalled",
                            self.stall_wait.as_millis()
                        ),
                    ));
                }
                continue;
            };
            frames_this_run += 1;
            last_frame = std::time::Instant::now();
            self.record(sink, channel, pipeline, &sample, &pending);
            if let Some(feed) = &self.feed {
                sink.set_upstream_lost(
                    channel,
                    feed.stats.lost() + self.stats.lost.load(Ordering::Relaxed),
                );
            }
        }
        if let (Some(src), Some(feed)) = (&appsrc, &self.feed) {
            let _ = src.end_of_stream();
            // Images still in the pipeline when recording stops are not
            // recorded: counted, like every other loss before the encoder.
            let left = pending.lock().unwrap_or_else(PoisonError::into_inner).len() as u64;
            self.stats.lost.fetch_add(left, Ordering::Relaxed);
            sink.set_upstream_lost(
                channel,
                feed.stats.lost() + self.stats.lost.load(Ordering::Relaxed),
            );
        }
        Ok(())
    }
}

impl CameraSource {
    /// Pushes the images waiting in the feed into the appsrc, stamped with
    /// the running time now.
    #[allow(clippy::too_many_arguments)]
    fn feed_images(
        &self,
        feed: &ImageFeed,
        src: &gst_app::AppSrc,
        pipeline: &gst::Pipeline,
        pending: &Pending,
        caps_set: &mut Option<(u32, u32, &'static str)>,
        sink: &SourceSink,
        channel: ChannelId,
    ) -> Result<(), SourceError> {
        sink.set_upstream_lost(
            channel,
            feed.stats.lost() + self.stats.lost.load(Ordering::Relaxed),
        );
        while let Ok(img) = feed.rx.try_recv() {
            self.push_image(img, src, pipeline, pending, caps_set)?;
        }
        Ok(())
    }

    fn push_image(
        &self,
        img: RawImage,
        src: &gst_app::AppSrc,
        pipeline: &gst::Pipeline,
        pending: &Pending,
        caps_set: &mut Option<(u32, u32, &'static str)>,
    ) -> Result<(), SourceError> {
        let shape = (img.width, img.height, img.format);
        if *caps_set != Some(shape) {
            let caps = gst::Caps::builder("video/x-raw")
                .field("format", img.format)
                .field("width", img.width as i32)
                .field("height", img.height as i32)
                // The nominal rate: x265 cannot start without one; the
                // buffers' times are the images' own.
                .field("framerate", gst::Fraction::new(self.cfg.fps as i32, 1))
                .build();
            src.set_caps(Some(&caps));
            *caps_set = Some(shape);
        }
        let base = pipeline.base_time().map_or(0, |t| t.nseconds());
        let running = monotonic_ns().saturating_sub(base);
        let mut buffer = gst::Buffer::from_mut_slice(img.data);
        if let Some(b) = buffer.get_mut() {
            b.set_pts(gst::ClockTime::from_nseconds(running));
        }
        pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back((running, img.stamp_ns, img.received_ns));
        src.push_buffer(buffer)
            .map_err(|e| device_error(&self.cfg.name, format!("appsrc: {e:?}")))?;
        Ok(())
    }

    /// One access unit: its capture time, its message, its push.
    fn record(
        &mut self,
        sink: &SourceSink,
        channel: ChannelId,
        pipeline: &gst::Pipeline,
        sample: &gst::Sample,
        pending: &Pending,
    ) {
        let Some(buffer) = sample.buffer() else {
            return;
        };
        let running = sample
            .segment()
            .and_then(|s| s.downcast_ref::<gst::ClockTime>())
            .zip(buffer.pts())
            .and_then(|(seg, pts)| seg.to_running_time(pts))
            .or(buffer.pts())
            .map_or(0, |t| t.nseconds());
        let (log_time, publish_time) = if self.feed.is_some() {
            // A transcoded topic: header.stamp as publish time, receive
            // time as log time, matched by the running time it was pushed
            // at (the encoder keeps it).
            let mut q = pending.lock().unwrap_or_else(PoisonError::into_inner);
            // Images pushed before this one that came out as no frame were
            // lost between the appsrc and the encoder (the leaky queue).
            let mut skipped = 0u64;
            while q.front().is_some_and(|(r, _, _)| *r < running) {
                q.pop_front();
                skipped += 1;
            }
            if skipped > 0 {
                self.stats.lost.fetch_add(skipped, Ordering::Relaxed);
            }
            match q.pop_front() {
                Some((_, stamp, received)) => {
                    let t = self.stamps.next(received);
                    (t, stamp)
                }
                None => {
                    let t = self.stamps.next(sink.now_ns());
                    (t, t)
                }
            }
        } else {
            let base = pipeline.base_time().map_or(0, |t| t.nseconds());
            let mut mono = base.saturating_add(running);
            // argus: the sensor's own stamp and frame number, when the
            // camera attached them.
            let sensor = buffer.pts().and_then(|p| self.sensor.take(p.nseconds()));
            if let Some(aux) = sensor {
                if aux.timestamp > 0 {
                    mono = aux.timestamp as u64;
                }
                if let Some(last) = self.last_frame_num {
                    let lost = (aux.frame_num - last - 1).max(0) as u64;
                    if lost > 0 {
                        self.stats.lost.fetch_add(lost, Ordering::Relaxed);
                        sink.set_upstream_lost(channel, self.stats.lost.load(Ordering::Relaxed));
                    }
                }
                self.last_frame_num = Some(aux.frame_num);
            } else if self.fixed_rate() {
                let lost = self.gaps.observe(mono);
                if lost > 0 {
                    self.stats.lost.fetch_add(lost, Ordering::Relaxed);
                    sink.set_upstream_lost(channel, self.stats.lost.load(Ordering::Relaxed));
                }
            }
            let map = sink.clock_map(edgerec_source::clock::KernelClock::Monotonic);
            let t = self.stamps.next(map.to_recording(mono));
            (t, t)
        };
        let Ok(map) = buffer.map_readable() else {
            return;
        };
        let au = AccessUnit::parse(&map);
        let key = au.is_keyframe();
        let payload = message::encode_into(
            sink.buffer(channel, map.len() + 64),
            publish_time,
            self.cfg.frame(),
            &map,
        );
        self.stats.frames.fetch_add(1, Ordering::Relaxed);
        if key {
            self.stats.keyframes.fetch_add(1, Ordering::Relaxed);
        }
        // A refused frame is counted by the sink; the encoder is never held.
        let _ = sink.push_video(
            Envelope {
                channel,
                log_time,
                publish_time,
                payload,
            },
            key,
        );
    }
}
