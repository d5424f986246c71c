//! Recorded H.265 access units into a container file without re-encoding:
//! `appsrc ! h265parse ! mp4mux|qtmux|matroskamux ! filesink`. The caller
//! gives each access unit its presentation time and duration (the
//! recording's capture times), so the file plays at the rate it was
//! recorded, gaps included. The streams edgerec records have no B-frames,
//! so decode order is presentation order and DTS = PTS.
//!
//! [`Muxer::finish`] sends the end of stream and waits for it to reach the
//! sink (the MP4 index is written then); a muxer dropped unfinished leaves
//! an incomplete file.

use std::path::Path;
use std::time::Duration;

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;

/// How long the end of stream may take to reach the file once the last
/// access unit was pushed (the muxer writes its index then; seconds even
/// for hours of video).
const EOS_WAIT: Duration = Duration::from_secs(120);

/// Bytes the appsrc queues before `push` blocks: a bound on memory, not a
/// tuning knob (the pipeline is not live and never drops).
const QUEUE_BYTES: u64 = 32 << 20;

/// Why muxing failed.
#[derive(Debug, thiserror::Error)]
pub enum MuxError {
    /// GStreamer could not be initialised.
    #[error("GStreamer: {0}")]
    Init(String),
    /// An element the pipeline needs is not installed.
    #[error("GStreamer has no `{element}` element: install {package}")]
    MissingElement {
        /// The element.
        element: &'static str,
        /// What provides it.
        package: &'static str,
    },
    /// An element failed (from the bus).
    #[error("{element}: {message}{}", debug.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    Pipeline {
        /// Which element.
        element: String,
        /// Its error.
        message: String,
        /// GStreamer's debug detail.
        debug: Option<String>,
    },
    /// The pipeline refused to start, with no error on the bus.
    #[error("the muxing pipeline did not start: {0}")]
    Start(String),
    /// The pipeline stopped taking access units, with no error on the bus.
    #[error("the muxing pipeline stopped taking access units: {0:?}")]
    Flow(gst::FlowError),
    /// The end of stream did not reach the file in time.
    #[error("the muxer did not finish within {} s", EOS_WAIT.as_secs())]
    EosTimeout,
}

/// The container elements, by name.
pub mod element {
    /// MP4 (ISO BMFF).
    pub const MP4: &str = "mp4mux";
    /// QuickTime.
    pub const MOV: &str = "qtmux";
    /// Matroska.
    pub const MKV: &str = "matroskamux";
}

fn package(element: &str) -> &'static str {
    match element {
        "matroskamux" | "mp4mux" | "qtmux" => "gstreamer1.0-plugins-good",
        "h265parse" => "gstreamer1.0-plugins-bad",
        _ => "gstreamer1.0-plugins-base",
    }
}

fn make(name: &'static str) -> Result<gst::Element, MuxError> {
    gst::ElementFactory::make(name)
        .build()
        .map_err(|_| MuxError::MissingElement {
            element: name,
            package: package(name),
        })
}

/// Whether GStreamer has everything to mux into `container` (an
/// [`element`] name); Err names what is missing.
pub fn available(container: &'static str) -> Result<(), MuxError> {
    gst::init().map_err(|e| MuxError::Init(e.to_string()))?;
    for name in ["appsrc", "h265parse", container, "filesink"] {
        if gst::ElementFactory::find(name).is_none() {
            return Err(MuxError::MissingElement {
                element: name,
                package: package(name),
            });
        }
    }
    Ok(())
}

/// One running muxing pipeline writing one file.
pub struct Muxer {
    pipeline: gst::Pipeline,
    src: gst_app::AppSrc,
    bus: gst::Bus,
}

impl Muxer {
    /// Starts `appsrc ! h265parse ! <container> ! filesink location=path`;
    /// `container` is one of [`element`].
    pub fn start(container: &'static str, path: &Path) -> Result<Muxer, MuxError> {
        available(container)?;
        let caps = crate::launch::H265_CAPS
            .parse::<gst::Caps>()
            .map_err(|e| MuxError::Start(e.to_string()))?;
        let src = gst_app::AppSrc::builder()
            .caps(&caps)
            .format(gst::Format::Time)
            .is_live(false)
            .block(true)
            .max_bytes(QUEUE_BYTES)
            .build();
        let parse = make("h265parse")?;
        let mux = make(container)?;
        let sink = make("filesink")?;
        sink.set_property("location", path.to_string_lossy().as_ref());
        let pipeline = gst::Pipeline::new();
        let fail = |e: gst::glib::BoolError| MuxError::Start(e.to_string());
        pipeline
            .add_many([src.upcast_ref(), &parse, &mux, &sink])
            .map_err(fail)?;
        gst::Element::link_many([src.upcast_ref(), &parse, &mux, &sink]).map_err(fail)?;
        let bus = pipeline
            .bus()
            .ok_or_else(|| MuxError::Start("the pipeline has no bus".into()))?;
        let m = Muxer { pipeline, src, bus };
        if let Err(e) = m.pipeline.set_state(gst::State::Playing) {
            return Err(m.bus_error().unwrap_or(MuxError::Start(e.to_string())));
        }
        Ok(m)
    }

    /// The first error waiting on the bus.
    fn bus_error(&self) -> Option<MuxError> {
        let msg = self.bus.pop_filtered(&[gst::MessageType::Error])?;
        error_of(&msg)
    }

    /// Pushes one access unit (Annex B) at `pts_ns` for `duration_ns`,
    /// blocking while the pipeline is behind.
    pub fn push(&mut self, data: Vec<u8>, pts_ns: u64, duration_ns: u64) -> Result<(), MuxError> {
        let mut buffer = gst::Buffer::from_mut_slice(data);
        {
            let b = buffer.make_mut();
            let pts = gst::ClockTime::from_nseconds(pts_ns);
            b.set_pts(pts);
            b.set_dts(pts);
            b.set_duration(gst::ClockTime::from_nseconds(duration_ns));
        }
        match self.src.push_buffer(buffer) {
            Ok(_) => Ok(()),
            Err(e) => Err(self.bus_error().unwrap_or(MuxError::Flow(e))),
        }
    }

    /// Ends the stream and waits until the file is complete.
    pub fn finish(self) -> Result<(), MuxError> {
        if let Err(e) = self.src.end_of_stream() {
            return Err(self.bus_error().unwrap_or(MuxError::Flow(e)));
        }
        let wait = gst::ClockTime::from_nseconds(EOS_WAIT.as_nanos() as u64);
        let msg = self
            .bus
            .timed_pop_filtered(wait, &[gst::MessageType::Eos, gst::MessageType::Error])
            .ok_or(MuxError::EosTimeout)?;
        match error_of(&msg) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for Muxer {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

fn error_of(msg: &gst::Message) -> Option<MuxError> {
    match msg.view() {
        gst::MessageView::Error(e) => Some(MuxError::Pipeline {
            element: e
                .src()
                .map(|s| s.name().to_string())
                .unwrap_or_else(|| "pipeline".into()),
            message: e.error().to_string(),
            debug: e.debug().map(|d| d.to_string()),
        }),
        _ => None,
    }
}
