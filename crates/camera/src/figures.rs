//! What a recorded video topic measures: picture size (from the SPS, else
//! the channel's configured `video.width`/`video.height`), frame rate and
//! bitrate over the capture timestamps, and the keyframe interval (the
//! median gap between IRAP access units). `edgerec info` shows them under
//! the topic's line through [`annotate`]; only the video channels'
//! messages are read.

use std::collections::{BTreeMap, BTreeSet};

use edgerec_format::info::{BagInfo, FileState};
use edgerec_format::messages::read_topics;
use edgerec_format::FormatError;
use edgerec_ros::cdr_reader::CdrError;

use crate::message::{self, FORMAT_H265, VIDEO_TYPE};
use crate::nal::AccessUnit;
use crate::sps;

/// Why a video topic could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum FiguresError {
    /// The bag could not be read.
    #[error(transparent)]
    Bag(#[from] FormatError),
    /// A message is not a `CompressedVideo`.
    #[error("{topic}: message {index} does not decode: {source}")]
    Decode {
        /// The topic.
        topic: String,
        /// Its position on the topic, from 0.
        index: u64,
        /// What is wrong.
        source: CdrError,
    },
}

/// Where a picture size came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeFrom {
    /// The stream's sequence parameter set, conformance window applied.
    Sps,
    /// The channel metadata: what the camera was configured for.
    Metadata,
}

/// The measured figures of one video topic.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VideoFigures {
    /// Access units (messages).
    pub frames: u64,
    /// Bytes of access units (the `data` fields).
    pub data_bytes: u64,
    /// The first capture timestamp, ns.
    pub first_ns: u64,
    /// The last capture timestamp, ns.
    pub last_ns: u64,
    /// Access units holding an IRAP picture.
    pub keyframes: u64,
    /// Width, height and where they came from.
    pub size: Option<(u32, u32, SizeFrom)>,
    /// Why the SPS gave no size, when it did not.
    pub sps_error: Option<sps::SpsError>,
    /// `format` values other than `h265` (their access units are counted
    /// but not looked into).
    pub other_formats: BTreeSet<String>,
    /// Gaps between consecutive keyframes: (frames, ns).
    gaps: Vec<(u64, u64)>,
    /// The last keyframe: (frame index, capture ns).
    last_key: Option<(u64, u64)>,
}

impl VideoFigures {
    /// Counts one access unit.
    pub fn push(&mut self, stamp_ns: u64, format: &str, data: &[u8]) {
        if self.frames == 0 {
            self.first_ns = stamp_ns;
        }
        let index = self.frames;
        self.frames += 1;
        self.data_bytes += data.len() as u64;
        self.last_ns = stamp_ns;
        if format != FORMAT_H265 {
            self.other_formats.insert(format.to_owned());
            return;
        }
        if self.size.is_none() && self.sps_error.is_none() {
            match sps::find(data) {
                Some(Ok(s)) => self.size = Some((s.width, s.height, SizeFrom::Sps)),
                Some(Err(e)) => self.sps_error = Some(e),
                None => {}
            }
        }
        if AccessUnit::parse(data).irap {
            self.keyframes += 1;
            if let Some((i, t)) = self.last_key {
                self.gaps.push((index - i, stamp_ns.saturating_sub(t)));
            }
            self.last_key = Some((index, stamp_ns));
        }
    }

    /// The time the frames cover: the span of their timestamps plus one
    /// frame interval (N frames cover N intervals, their stamps N - 1), so
    /// that rate and bitrate are per frame shown, not per gap.
    pub fn covered_secs(&self) -> Option<f64> {
        let span = self.last_ns.saturating_sub(self.first_ns);
        (self.frames > 1 && span > 0)
            .then(|| span as f64 / 1e9 * self.frames as f64 / (self.frames - 1) as f64)
    }

    /// Frames per second: (frames - 1) / span.
    pub fn fps(&self) -> Option<f64> {
        self.covered_secs().map(|s| self.frames as f64 / s)
    }

    /// Bits per second of access unit data.
    pub fn bitrate(&self) -> Option<f64> {
        self.covered_secs()
            .map(|s| self.data_bytes as f64 * 8.0 / s)
    }

    /// The median gap between keyframes, in frames and seconds; None with
    /// fewer than two keyframes.
    pub fn keyframe_interval(&self) -> Option<(f64, f64)> {
        let median = |mut v: Vec<u64>| -> Option<f64> {
            v.sort_unstable();
            let n = v.len();
            match n {
                0 => None,
                _ if n % 2 == 1 => Some(v[n / 2] as f64),
                _ => Some((v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0),
            }
        };
        let frames = median(self.gaps.iter().map(|g| g.0).collect())?;
        let ns = median(self.gaps.iter().map(|g| g.1).collect())?;
        Some((frames, ns / 1e9))
    }

    /// The `Video: ...` line `edgerec info` prints.
    pub fn line(&self) -> String {
        let size = match self.size {
            Some((w, h, SizeFrom::Sps)) => format!("{w}x{h}"),
            Some((w, h, SizeFrom::Metadata)) => format!("{w}x{h} (configured; no SPS read)"),
            None => "size unknown".into(),
        };
        let fps = self.fps().map_or("-".into(), |f| format!("{f:.2} fps"));
        let rate = self
            .bitrate()
            .map_or("-".into(), |b| format!("{:.2} Mbit/s", b / 1e6));
        let key = match self.keyframe_interval() {
            Some((f, s)) => format!("{f:.0} frames ({s:.3} s)"),
            None => format!("- ({} keyframes)", self.keyframes),
        };
        let mut line = format!(
            "Video: {size} | Frame rate: {fps} | Bitrate: {rate} | Keyframe interval: {key}"
        );
        if !self.other_formats.is_empty() {
            let f: Vec<_> = self.other_formats.iter().map(String::as_str).collect();
            line.push_str(&format!(" | Format: {} (not h265)", f.join(", ")));
        }
        line
    }
}

/// The video topics (`foxglove_msgs/msg/CompressedVideo`) of a bag.
pub fn video_topics(info: &BagInfo) -> Vec<String> {
    info.topics
        .iter()
        .filter(|(_, t)| t.type_name == VIDEO_TYPE)
        .map(|(name, _)| name.clone())
        .collect()
}

/// A channel's configured size (`video.width`, `video.height`).
fn configured_size(info: &BagInfo, topic: &str) -> Option<(u32, u32)> {
    info.files.iter().find_map(|f| match &f.state {
        FileState::Closed(s) => s
            .channels
            .values()
            .find(|c| c.topic == topic)
            .and_then(|c| {
                let get = |k: &str| c.metadata.get(k)?.parse::<u32>().ok().filter(|&v| v > 0);
                Some((get("video.width")?, get("video.height")?))
            }),
        _ => None,
    })
}

/// Measures every video topic of a bag in one pass over its video
/// channels.
pub fn measure(info: &BagInfo) -> Result<BTreeMap<String, VideoFigures>, FiguresError> {
    let topics = video_topics(info);
    let wanted: BTreeSet<&str> = topics.iter().map(String::as_str).collect();
    let mut out: BTreeMap<String, VideoFigures> = BTreeMap::new();
    read_topics(info, &wanted, |ch, m| {
        let fig = out.entry(ch.topic.clone()).or_default();
        let f = message::decode(m.data).map_err(|source| FiguresError::Decode {
            topic: ch.topic.clone(),
            index: fig.frames,
            source,
        })?;
        fig.push(f.stamp_ns, f.format, f.data);
        Ok::<(), FiguresError>(())
    })?;
    for (topic, fig) in &mut out {
        if fig.size.is_none() {
            fig.size = configured_size(info, topic).map(|(w, h)| (w, h, SizeFrom::Metadata));
        }
    }
    Ok(out)
}

/// Adds each video topic's `Video: ...` line to `info` (what `edgerec
/// info` prints under the topic); a bag that cannot be read for it gets
/// the reason on the line instead, and the rest of `info` still prints.
pub fn annotate(info: &mut BagInfo) {
    match measure(info) {
        Ok(figures) => {
            for (topic, fig) in figures {
                info.topic_notes.entry(topic).or_default().push(fig.line());
            }
        }
        Err(e) => {
            for topic in video_topics(info) {
                info.topic_notes
                    .entry(topic)
                    .or_default()
                    .push(format!("Video: not measured: {e}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::nal::samples::{DELTA, KEY};

    #[test]
    fn rate_bitrate_and_keyframe_interval_over_capture_time() {
        let mut f = VideoFigures::default();
        let start = 1_000_000_000_000u64;
        let frame = 33_333_333u64;
        // 90 frames, a keyframe every 30, one gap of 15 (a forced key
        // unit at a segment cut) that the median ignores.
        for i in 0..90u64 {
            let key = i % 30 == 0 || i == 45;
            f.push(start + i * frame, "h265", if key { KEY } else { DELTA });
        }
        assert_eq!(f.frames, 90);
        assert_eq!(f.keyframes, 4);
        let fps = f.fps().unwrap();
        assert!((fps - 30.0).abs() < 0.01, "{fps}");
        let bytes = (4 * KEY.len() + 86 * DELTA.len()) as f64;
        let expect = bytes * 8.0 / (90.0 * frame as f64 / 1e9);
        assert!((f.bitrate().unwrap() - expect).abs() < 1.0);
        let (frames, secs) = f.keyframe_interval().unwrap();
        assert_eq!(frames, 15.0); // gaps 30, 15, 15: median 15
        assert!((secs - 0.5).abs() < 1e-6, "{secs}");
        // The hand-made SPS above is too short: no size, a reason.
        assert!(f.size.is_none());
        assert!(f.sps_error.is_some());
        let line = f.line();
        assert!(
            line.starts_with("Video: size unknown | Frame rate: 30.00 fps"),
            "{line}"
        );
        assert!(
            line.contains("Keyframe interval: 15 frames (0.500 s)"),
            "{line}"
        );
    }

    #[test]
    fn few_frames_give_dashes_not_nonsense() {
        let mut f = VideoFigures::default();
        assert_eq!(
            (f.fps(), f.bitrate(), f.keyframe_interval()),
            (None, None, None)
        );
        f.push(5, "h264", DELTA);
        assert_eq!(f.fps(), None);
        let line = f.line();
        assert!(line.contains("Frame rate: - | Bitrate: - | Keyframe interval: - (0 keyframes)"));
        assert!(line.ends_with("Format: h264 (not h265)"), "{line}");
    }
}
