//! `edgerec export video`: one recorded video topic of a bag (every
//! closed segment, in order) or of one file, out as a playable file
//! without re-encoding. `.mp4`, `.mov` and `.mkv` go through
//! [`crate::mux`] with each access unit timed by its capture timestamp
//! relative to the first exported one, so the file's duration and frame
//! rate are the recording's (gaps from lost frames stay gaps); `.h265` and
//! `.hevc` are the access units concatenated (raw Annex B, no timing).
//!
//! Frames before the topic's first keyframe (an IRAP access unit carrying
//! VPS, SPS and PPS) cannot be decoded and are skipped and counted; every
//! segment edgerec writes starts on one, so this only happens to files cut
//! by other tools. The file is written under a `.part` name beside the
//! output and renamed once complete, so a failed export leaves no file
//! that looks finished.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use edgerec_format::info::{self, BagInfo, FileState};
use edgerec_format::messages::read_topics;
use edgerec_format::FormatError;
use edgerec_ros::cdr_reader::CdrError;

use crate::figures::video_topics;
use crate::message::{self, FORMAT_H265, VIDEO_TYPE};
use crate::mux::{self, MuxError, Muxer};
use crate::nal::AccessUnit;

/// The frame interval assumed for the last frame when nothing else tells
/// it (a single-frame export without `video.fps` metadata): 30 fps.
const DEFAULT_FRAME_NS: u64 = 33_333_333;

/// What the output file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// `.mp4`: ISO BMFF through `mp4mux`.
    Mp4,
    /// `.mov`: QuickTime through `qtmux`.
    Mov,
    /// `.mkv`: Matroska through `matroskamux`.
    Mkv,
    /// `.h265` or `.hevc`: the access units as they are, Annex B.
    AnnexB,
}

impl Container {
    /// The container an output path asks for, by its extension.
    pub fn from_path(path: &Path) -> Option<Container> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "mp4" => Container::Mp4,
            "mov" => Container::Mov,
            "mkv" => Container::Mkv,
            "h265" | "hevc" | "265" => Container::AnnexB,
            _ => return None,
        })
    }

    /// The GStreamer muxer, None for raw Annex B.
    pub fn muxer(&self) -> Option<&'static str> {
        match self {
            Container::Mp4 => Some(mux::element::MP4),
            Container::Mov => Some(mux::element::MOV),
            Container::Mkv => Some(mux::element::MKV),
            Container::AnnexB => None,
        }
    }
}

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The output's extension names no container.
    #[error("{}: the output must end in .mp4, .mov, .mkv, .h265 or .hevc", path.display())]
    UnknownContainer {
        /// The output path.
        path: PathBuf,
    },
    /// The bag could not be read.
    #[error(transparent)]
    Bag(#[from] FormatError),
    /// The bag has no such topic.
    #[error("no topic {topic} in the bag; {}", list_topics(video_topics))]
    TopicNotFound {
        /// The topic asked for.
        topic: String,
        /// The video topics the bag has.
        video_topics: Vec<String>,
    },
    /// The topic is not a video topic.
    #[error(
        "{topic} is {type_name}, not {VIDEO_TYPE}; {}",
        list_topics(video_topics)
    )]
    NotVideo {
        /// The topic.
        topic: String,
        /// Its type.
        type_name: String,
        /// The video topics the bag has.
        video_topics: Vec<String>,
    },
    /// The topic has no messages in the closed files.
    #[error("{topic} has no messages{}", unfinished_note(*unfinished))]
    Empty {
        /// The topic.
        topic: String,
        /// Unfinished or unreadable segments skipped.
        unfinished: usize,
    },
    /// A message does not decode as a `CompressedVideo`.
    #[error("{topic}: message {index} does not decode: {source}")]
    Decode {
        /// The topic.
        topic: String,
        /// Its position on the topic, from 0.
        index: u64,
        /// What is wrong.
        source: CdrError,
    },
    /// A message holds another codec.
    #[error("{topic}: message {index} has format `{format}`; only h265 is exported")]
    NotH265 {
        /// The topic.
        topic: String,
        /// Its position on the topic, from 0.
        index: u64,
        /// Its `format`.
        format: String,
    },
    /// No access unit of the topic is a keyframe: nothing decodes.
    #[error("{topic}: none of its {frames} frames is a keyframe (IRAP with VPS, SPS and PPS); nothing can be decoded")]
    NoKeyframe {
        /// The topic.
        topic: String,
        /// Frames seen.
        frames: u64,
    },
    /// The output cannot be written.
    #[error("{}: cannot write the output: {source}", path.display())]
    Output {
        /// The output (or its `.part` file).
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Muxing failed.
    #[error("muxing into {}: {source}", path.display())]
    Mux {
        /// The output.
        path: PathBuf,
        /// Why.
        source: MuxError,
    },
}

fn list_topics(topics: &[String]) -> String {
    if topics.is_empty() {
        format!("it has no {VIDEO_TYPE} topics")
    } else {
        format!("its video topics: {}", topics.join(", "))
    }
}

fn unfinished_note(n: usize) -> String {
    match n {
        0 => String::new(),
        n => format!(" in closed segments ({n} unfinished or unreadable segments skipped: `edgerec recover` them first)"),
    }
}

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportSummary {
    /// The file written.
    pub output: PathBuf,
    /// Its container.
    pub container: Container,
    /// Access units written.
    pub frames: u64,
    /// Access units before the first keyframe, skipped.
    pub skipped_before_keyframe: u64,
    /// Capture time of the first frame written, ns.
    pub first_ns: u64,
    /// Capture time of the last frame written, ns.
    pub last_ns: u64,
    /// What the file lasts: the span of the timestamps plus the last
    /// frame's duration.
    pub duration_ns: u64,
    /// Access units whose timestamp was not after the one before, given
    /// one 1 us later (a container needs increasing times).
    pub restamped: u64,
    /// The output's size.
    pub bytes: u64,
    /// Segments skipped as unfinished (`.active`) or unreadable.
    pub unfinished_segments: usize,
}

/// Where access units go.
enum Sink {
    Raw(BufWriter<File>),
    Mux(Muxer),
    /// Finished.
    Done,
}

/// A frame held until the next one tells its duration.
struct Held {
    data: Vec<u8>,
    pts_ns: u64,
}

/// The export under way.
struct Export<'a> {
    topic: &'a str,
    output: &'a Path,
    container: Container,
    sink: Sink,
    held: Option<Held>,
    /// Messages read.
    seen: u64,
    frames: u64,
    skipped: u64,
    restamped: u64,
    first_ns: u64,
    last_ns: u64,
    last_pts: u64,
    last_gap: Option<u64>,
}

impl<'a> Export<'a> {
    /// Creates the `.part` file (the check that the output is writable)
    /// and the pipeline writing it.
    fn create(
        topic: &'a str,
        output: &'a Path,
        part: &Path,
        container: Container,
    ) -> Result<Self, ExportError> {
        // The `.part` file sits beside the output: the same directory and
        // permissions, so the output's name is the one to report.
        let file = File::create(part).map_err(|source| ExportError::Output {
            path: output.to_path_buf(),
            source,
        })?;
        let sink = match container.muxer() {
            None => Sink::Raw(BufWriter::with_capacity(1 << 20, file)),
            Some(m) => {
                drop(file);
                Sink::Mux(Muxer::start(m, part).map_err(|source| ExportError::Mux {
                    path: output.to_path_buf(),
                    source,
                })?)
            }
        };
        Ok(Export {
            topic,
            output,
            container,
            sink,
            held: None,
            seen: 0,
            frames: 0,
            skipped: 0,
            restamped: 0,
            first_ns: 0,
            last_ns: 0,
            last_pts: 0,
            last_gap: None,
        })
    }

    fn output_error(&self, source: std::io::Error) -> ExportError {
        ExportError::Output {
            path: self.output.to_path_buf(),
            source,
        }
    }

    fn mux_error(&self, source: MuxError) -> ExportError {
        ExportError::Mux {
            path: self.output.to_path_buf(),
            source,
        }
    }

    /// Every message of the topic, in recording order.
    fn walk(
        &mut self,
        info: &BagInfo,
        total: u64,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(), ExportError> {
        let topics: BTreeSet<&str> = [self.topic].into();
        read_topics(info, &topics, |_, m| {
            let f = message::decode(m.data).map_err(|source| ExportError::Decode {
                topic: self.topic.to_owned(),
                index: self.seen,
                source,
            })?;
            self.take(f.stamp_ns, f.format, f.data)?;
            progress(self.seen, total.max(self.seen));
            Ok(())
        })
    }

    fn take(&mut self, stamp_ns: u64, format: &str, data: &[u8]) -> Result<(), ExportError> {
        let index = self.seen;
        self.seen += 1;
        if format != FORMAT_H265 {
            return Err(ExportError::NotH265 {
                topic: self.topic.to_owned(),
                index,
                format: format.to_owned(),
            });
        }
        if self.frames == 0 {
            if !AccessUnit::parse(data).is_keyframe() {
                self.skipped += 1;
                return Ok(());
            }
            self.first_ns = stamp_ns;
        }
        let mut pts = stamp_ns.saturating_sub(self.first_ns);
        if self.frames > 0 && pts <= self.last_pts {
            pts = self.last_pts + 1_000;
            self.restamped += 1;
        }
        if self.frames > 0 {
            self.last_gap = Some(pts - self.last_pts);
        }
        self.frames += 1;
        self.last_ns = stamp_ns;
        self.last_pts = pts;
        match &mut self.sink {
            Sink::Raw(w) => {
                if let Err(e) = w.write_all(data) {
                    return Err(self.output_error(e));
                }
            }
            Sink::Mux(m) => {
                let held = self.held.replace(Held {
                    data: data.to_vec(),
                    pts_ns: pts,
                });
                if let Some(prev) = held {
                    if let Err(e) = m.push(prev.data, prev.pts_ns, pts - prev.pts_ns) {
                        return Err(self.mux_error(e));
                    }
                }
            }
            Sink::Done => {}
        }
        Ok(())
    }

    /// Pushes the last frame (lasting as long as the gap before it, else
    /// `frame_ns`) and completes the file.
    fn finish(mut self, frame_ns: u64, unfinished: usize) -> Result<ExportSummary, ExportError> {
        if self.frames == 0 {
            return Err(ExportError::NoKeyframe {
                topic: self.topic.to_owned(),
                frames: self.skipped,
            });
        }
        let last = self.last_gap.unwrap_or(frame_ns);
        match std::mem::replace(&mut self.sink, Sink::Done) {
            Sink::Raw(mut w) => {
                if let Err(e) = w.flush().and_then(|_| w.get_ref().sync_all()) {
                    return Err(self.output_error(e));
                }
            }
            Sink::Mux(mut m) => {
                if let Some(h) = self.held.take() {
                    if let Err(e) = m.push(h.data, h.pts_ns, last) {
                        return Err(self.mux_error(e));
                    }
                }
                if let Err(e) = m.finish() {
                    return Err(self.mux_error(e));
                }
            }
            Sink::Done => {}
        }
        Ok(ExportSummary {
            output: self.output.to_path_buf(),
            container: self.container,
            frames: self.frames,
            skipped_before_keyframe: self.skipped,
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            duration_ns: self.last_pts + last,
            restamped: self.restamped,
            bytes: 0,
            unfinished_segments: unfinished,
        })
    }
}

/// The topic's messages in closed files, and the frame interval its
/// channel was configured for (`video.fps`).
fn topic_facts(info: &BagInfo, topic: &str) -> (u64, Option<u64>) {
    let mut count = 0u64;
    let mut frame_ns = None;
    for f in &info.files {
        if let FileState::Closed(s) = &f.state {
            let counts = s.statistics.as_ref().map(|st| &st.channel_message_counts);
            for c in s.channels.values().filter(|c| c.topic == topic) {
                let n = counts.and_then(|m| m.get(&c.id)).copied().unwrap_or(0);
                count = count.saturating_add(n);
                let fps = c
                    .metadata
                    .get("video.fps")
                    .and_then(|v| v.parse::<f64>().ok());
                if let Some(fps) = fps.filter(|f| *f > 0.0) {
                    frame_ns.get_or_insert((1e9 / fps) as u64);
                }
            }
        }
    }
    (count, frame_ns)
}

/// The `.part` name the output is written under until it is complete.
pub fn part_path(output: &Path) -> PathBuf {
    let mut name = output.as_os_str().to_owned();
    name.push(".part");
    PathBuf::from(name)
}

/// Exports `topic` of the bag directory or MCAP file `bag` to `output`
/// (container by extension, see [`Container`]). `progress(done, total)`
/// is called after each message of the topic is read, `total` from the
/// files' statistics.
pub fn export_video(
    bag: &Path,
    topic: &str,
    output: &Path,
    mut progress: impl FnMut(u64, u64),
) -> Result<ExportSummary, ExportError> {
    let container = Container::from_path(output).ok_or_else(|| ExportError::UnknownContainer {
        path: output.to_path_buf(),
    })?;
    let info = info::inspect(bag)?;
    match info.topics.get(topic) {
        None => {
            return Err(ExportError::TopicNotFound {
                topic: topic.to_owned(),
                video_topics: video_topics(&info),
            })
        }
        Some(t) if t.type_name != VIDEO_TYPE => {
            return Err(ExportError::NotVideo {
                topic: topic.to_owned(),
                type_name: t.type_name.clone(),
                video_topics: video_topics(&info),
            })
        }
        Some(_) => {}
    }
    let unfinished = info
        .files
        .iter()
        .filter(|f| !matches!(f.state, FileState::Closed(_)))
        .count();
    let (total, frame_ns) = topic_facts(&info, topic);
    if total == 0 {
        return Err(ExportError::Empty {
            topic: topic.to_owned(),
            unfinished,
        });
    }
    if let Some(m) = container.muxer() {
        // Before any file is made: a missing plugin is not an output error.
        mux::available(m).map_err(|source| ExportError::Mux {
            path: output.to_path_buf(),
            source,
        })?;
    }
    let part = part_path(output);
    let mut ex = Export::create(topic, output, &part, container)?;
    let written = ex
        .walk(&info, total, &mut progress)
        .and_then(|()| ex.finish(frame_ns.unwrap_or(DEFAULT_FRAME_NS), unfinished))
        .and_then(|summary| {
            std::fs::rename(&part, output).map_err(|source| ExportError::Output {
                path: output.to_path_buf(),
                source,
            })?;
            Ok(summary)
        });
    match written {
        Ok(mut summary) => {
            summary.bytes = std::fs::metadata(output).map_or(0, |m| m.len());
            Ok(summary)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgerec_format::chunk::{ChunkBuilder, ChunkCompressor, Compression};
    use edgerec_format::records::{Channel, Schema};
    use edgerec_format::writer::{McapWriter, PROFILE_ROS2};

    use crate::nal::samples::{DELTA, KEY};

    /// A segment `dir/bag_<n>.mcap` with `/cam` (the given access units
    /// and formats, 10 ms apart from `t0`) and `/imu`.
    fn segment(dir: &Path, n: u32, t0: u64, frames: &[(&[u8], &str)]) {
        let mut w = McapWriter::new(Vec::new(), PROFILE_ROS2, "test").unwrap();
        for (id, name) in [(1, VIDEO_TYPE), (2, "sensor_msgs/msg/Imu")] {
            w.add_schema(&Schema {
                id,
                name: name.into(),
                encoding: "ros2msg".into(),
                data: Vec::new(),
            })
            .unwrap();
        }
        for (id, topic) in [(1u16, "/cam"), (2, "/imu")] {
            w.add_channel(&Channel {
                id,
                schema_id: id,
                topic: topic.into(),
                message_encoding: "cdr".into(),
                metadata: Default::default(),
            })
            .unwrap();
        }
        let mut b = ChunkBuilder::new(1 << 16);
        for (i, (au, format)) in frames.iter().enumerate() {
            let t = t0 + i as u64 * 10_000_000;
            let mut msg = crate::message::encode_into(Vec::new(), t, "cam", au);
            if *format != FORMAT_H265 {
                // Same length, so the CDR stays aligned: "h264".
                let at = msg.len() - 5;
                msg[at..at + 4].copy_from_slice(format.as_bytes());
            }
            b.push(1, i as u32, t, t, &msg);
            b.push(2, i as u32, t, t, b"imu");
        }
        let mut z = ChunkCompressor::new(Compression::None).unwrap();
        w.write_chunk(&b.take().seal(&mut z)).unwrap();
        let (bytes, _) = w.finish().unwrap();
        std::fs::write(dir.join(format!("bag_{n}.mcap")), bytes).unwrap();
    }

    #[test]
    fn raw_export_skips_to_the_first_keyframe_across_segments() {
        let d = tempfile::tempdir().unwrap();
        let h = FORMAT_H265;
        segment(
            d.path(),
            0,
            1_000,
            &[(DELTA, h), (DELTA, h), (KEY, h), (DELTA, h)],
        );
        segment(d.path(), 1, 2_000_000_000, &[(KEY, h), (DELTA, h)]);
        let out = d.path().join("out.h265");
        let mut calls = Vec::new();
        let s = export_video(d.path(), "/cam", &out, |done, total| {
            calls.push((done, total))
        })
        .unwrap();
        assert_eq!((s.frames, s.skipped_before_keyframe), (4, 2));
        assert_eq!(s.container, Container::AnnexB);
        assert_eq!(calls.last(), Some(&(6, 6)));
        assert_eq!(calls.len(), 6);
        let want = [KEY, DELTA, KEY, DELTA].concat();
        assert_eq!(std::fs::read(&out).unwrap(), want);
        assert_eq!(s.bytes, want.len() as u64);
        assert_eq!((s.first_ns, s.last_ns), (20_001_000, 2_010_000_000));
        // The last frame lasts as long as the gap before it.
        assert_eq!(s.duration_ns, 2_010_000_000 - 20_001_000 + 10_000_000);
        assert!(!part_path(&out).exists());
        // One file of the bag.
        let one = d.path().join("one.hevc");
        let s = export_video(&d.path().join("bag_1.mcap"), "/cam", &one, |_, _| {}).unwrap();
        assert_eq!(s.frames, 2);
    }

    #[test]
    fn clear_errors_and_no_file_left_behind() {
        let d = tempfile::tempdir().unwrap();
        let h = FORMAT_H265;
        segment(d.path(), 0, 1_000, &[(DELTA, h), (DELTA, h)]);
        let out = d.path().join("out.h265");
        let err = |topic: &str, out: &Path| {
            export_video(d.path(), topic, out, |_, _| {})
                .unwrap_err()
                .to_string()
        };
        let e = err("/nope", &out);
        assert_eq!(e, "no topic /nope in the bag; its video topics: /cam");
        let e = err("/imu", &out);
        assert!(e.contains("/imu is sensor_msgs/msg/Imu, not foxglove_msgs/msg/CompressedVideo; its video topics: /cam"), "{e}");
        let e = err("/cam", &out);
        assert!(e.contains("none of its 2 frames is a keyframe"), "{e}");
        assert!(!out.exists() && !part_path(&out).exists());
        let e = err("/cam", &d.path().join("out.avi"));
        assert!(
            e.contains("must end in .mp4, .mov, .mkv, .h265 or .hevc"),
            "{e}"
        );
        let e = err("/cam", &d.path().join("no/such/dir/out.h265"));
        assert!(e.contains("cannot write the output"), "{e}");

        let d = tempfile::tempdir().unwrap();
        segment(d.path(), 0, 1_000, &[(KEY, h), (DELTA, "h264")]);
        let e = export_video(d.path(), "/cam", &d.path().join("x.h265"), |_, _| {})
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "/cam: message 1 has format `h264`; only h265 is exported"
        );
        assert!(!d.path().join("x.h265").exists());
    }

    #[test]
    fn containers_by_extension() {
        let c = |p: &str| Container::from_path(Path::new(p));
        assert_eq!(c("a.mp4"), Some(Container::Mp4));
        assert_eq!(c("a.MP4"), Some(Container::Mp4));
        assert_eq!(c("a.mov"), Some(Container::Mov));
        assert_eq!(c("a.mkv"), Some(Container::Mkv));
        assert_eq!(c("a.h265"), Some(Container::AnnexB));
        assert_eq!(c("a.hevc"), Some(Container::AnnexB));
        assert_eq!(c("a"), None);
        assert_eq!(c("a.avi"), None);
        assert_eq!(Container::AnnexB.muxer(), None);
    }
}
