//! `sensor_msgs/msg/Image` in: decoded from CDR, repacked to the row
//! layout GStreamer expects (each row padded to 4 bytes; a ROS `step` may
//! pad differently), with the caps format for its `encoding`. And the
//! bounded hand-over from the ROS 2 source that receives the topic to the
//! camera that encodes it ([`ImageTap`] / [`ImageFeed`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use edgerec_ros::cdr_reader::CdrReader;

/// Images waiting for the encoder at most: a slow encoder drops the newest
/// (counted), it never holds up the DDS reader.
pub const FEED_DEPTH: usize = 4;

/// One received image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawImage {
    /// `header.stamp`, ns since the epoch.
    pub stamp_ns: u64,
    /// When edgerec received it, on the recording clock.
    pub received_ns: u64,
    /// Pixels.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// GStreamer's raw video format (`RGB`, `GRAY8`, `UYVY`, `NV12`, ...).
    pub format: &'static str,
    /// The picture in GStreamer's default layout.
    pub data: Vec<u8>,
}

/// ROS encodings edgerec transcodes, with GStreamer's format for each.
pub const ENCODINGS: [(&str, &str); 12] = [
    ("rgb8", "RGB"),
    ("bgr8", "BGR"),
    ("rgba8", "RGBA"),
    ("bgra8", "BGRA"),
    ("mono8", "GRAY8"),
    ("8UC1", "GRAY8"),
    ("mono16", "GRAY16_LE"),
    ("yuv422", "UYVY"),
    ("uyvy", "UYVY"),
    ("yuv422_yuy2", "YUY2"),
    ("yuyv", "YUY2"),
    ("nv12", "NV12"),
];

/// GStreamer's format for a ROS image encoding.
pub fn gst_format(encoding: &str) -> Option<&'static str> {
    ENCODINGS
        .iter()
        .find(|(e, _)| e.eq_ignore_ascii_case(encoding))
        .map(|(_, f)| *f)
}

fn round4(n: usize) -> usize {
    n.div_ceil(4) * 4
}

/// Rows of (bytes per row in the image, rows) for each plane of `format`.
fn planes(format: &str, width: usize, height: usize) -> Option<Vec<(usize, usize)>> {
    let packed = |bpp: usize| Some(vec![(width * bpp, height)]);
    match format {
        "RGB" | "BGR" => packed(3),
        "RGBA" | "BGRA" => packed(4),
        "GRAY8" => packed(1),
        "GRAY16_LE" | "UYVY" | "YUY2" => packed(2),
        "NV12" => Some(vec![(width, height), (width, height.div_ceil(2))]),
        _ => None,
    }
}

/// Why an image message cannot be transcoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// Not a `sensor_msgs/msg/Image` in CDR.
    #[error("not a sensor_msgs/msg/Image: {0}")]
    Cdr(String),
    /// An encoding not in [`ENCODINGS`].
    #[error("image encoding `{0}` is not transcoded (rgb8, bgr8, rgba8, bgra8, mono8, mono16, yuv422/uyvy, yuyv, nv12 are)")]
    Encoding(String),
    /// Fewer bytes than `step x height`, or a step shorter than a row.
    #[error("image {width}x{height} {encoding} with step {step} holds {len} bytes: too few")]
    Size {
        /// Pixels.
        width: u32,
        /// Rows.
        height: u32,
        /// ROS encoding.
        encoding: String,
        /// Bytes per row.
        step: u32,
        /// Bytes of data.
        len: usize,
    },
    /// Big-endian 16-bit data.
    #[error("big-endian images are not transcoded")]
    BigEndian,
}

/// Decodes an Image message (CDR with its header) into GStreamer's layout.
pub fn decode(payload: &[u8], received_ns: u64) -> Result<RawImage, ImageError> {
    let cdr = |e: edgerec_ros::cdr_reader::CdrError| ImageError::Cdr(e.to_string());
    let mut r = CdrReader::new(payload).map_err(cdr)?;
    let sec = r.i32("header.stamp.sec").map_err(cdr)?;
    let nanosec = r.u32("header.stamp.nanosec").map_err(cdr)?;
    let _frame = r.string("header.frame_id").map_err(cdr)?;
    let height = r.u32("height").map_err(cdr)?;
    let width = r.u32("width").map_err(cdr)?;
    let encoding = r.string("encoding").map_err(cdr)?.to_owned();
    let bigendian = r.u8("is_bigendian").map_err(cdr)?;
    let step = r.u32("step").map_err(cdr)?;
    let n = r.sequence_len("data", 1).map_err(cdr)?;
    let data = r.bytes("data", n).map_err(cdr)?;
    let format = gst_format(&encoding).ok_or_else(|| ImageError::Encoding(encoding.clone()))?;
    if bigendian != 0 && format == "GRAY16_LE" {
        return Err(ImageError::BigEndian);
    }
    let size_err = || ImageError::Size {
        width,
        height,
        encoding: encoding.clone(),
        step,
        len: data.len(),
    };
    let planes = planes(format, width as usize, height as usize).ok_or_else(size_err)?;
    let step = step as usize;
    let mut out = Vec::with_capacity(planes.iter().map(|(w, h)| round4(*w) * h).sum());
    let mut at = 0usize;
    for (row, rows) in planes {
        if step < row {
            return Err(size_err());
        }
        for _ in 0..rows {
            let src = data.get(at..at + row).ok_or_else(size_err)?;
            out.extend_from_slice(src);
            out.resize(out.len() + round4(row) - row, 0);
            at += step;
        }
    }
    let stamp_ns = (i64::from(sec) * 1_000_000_000 + i64::from(nanosec)).max(0) as u64;
    Ok(RawImage {
        stamp_ns,
        received_ns,
        width,
        height,
        format,
        data: out,
    })
}

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
    /// Images that could not be decoded (the last reason is logged).
    pub bad: AtomicU64,
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
    /// Offers one received message; never blocks.
    pub fn offer(&self, payload: &[u8], received_ns: u64) {
        match decode(payload, received_ns) {
            Ok(img) => match self.tx.try_send(img) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                Err(TrySendError::Full(_)) => {
                    self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                }
            },
            Err(e) => {
                if self.stats.bad.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!("image topic: {e} (counted; this is logged once)");
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
    fn rows_are_repacked_from_the_ros_step() {
        // 3x2 rgb8 with a step of 12 (3 bytes of padding per row).
        let mut data = Vec::new();
        for row in 0..2u8 {
            data.extend((0..9).map(|i| row * 16 + i));
            data.extend([0xee; 3]);
        }
        let m = msg::image(
            Time { sec: 5, nanosec: 7 },
            "cam",
            2,
            3,
            "rgb8",
            0,
            12,
            &data,
        );
        let img = decode(&m, 99).unwrap();
        assert_eq!((img.width, img.height, img.format), (3, 2, "RGB"));
        assert_eq!(img.stamp_ns, 5_000_000_007);
        assert_eq!(img.received_ns, 99);
        // GStreamer's stride is 12 too (9 rounded up to 4), padded with 0.
        assert_eq!(&img.data[..9], &data[..9]);
        assert_eq!(&img.data[9..12], &[0, 0, 0]);
        assert_eq!(&img.data[12..21], &data[12..21]);
    }

    #[test]
    fn nv12_has_two_planes_and_bad_images_are_errors() {
        let (w, h) = (4u32, 2u32);
        let data: Vec<u8> = (0..12).collect();
        let m = msg::image(Time::default(), "", h, w, "nv12", 0, w, &data);
        assert_eq!(decode(&m, 0).unwrap().data, data);
        let m = msg::image(Time::default(), "", h, w, "rgb8", 0, 12, &data[..]);
        assert!(matches!(decode(&m, 0), Err(ImageError::Size { .. })));
        let m = msg::image(Time::default(), "", 1, 1, "bayer_rggb8", 0, 1, &[0]);
        assert_eq!(
            decode(&m, 0),
            Err(ImageError::Encoding("bayer_rggb8".into()))
        );
        let m = msg::image(Time::default(), "", 1, 4, "rgb8", 0, 2, &[0; 12]);
        assert!(matches!(decode(&m, 0), Err(ImageError::Size { .. })));
        assert!(decode(&[0, 1, 0, 0, 1], 0).is_err());
    }

    #[test]
    fn a_full_feed_drops_and_counts() {
        let (tap, feed) = feed();
        let m = msg::image(Time::default(), "", 2, 2, "mono8", 0, 2, &[1, 2, 3, 4]);
        for _ in 0..FEED_DEPTH + 3 {
            tap.offer(&m, 1);
        }
        tap.offer(&[1, 2, 3], 1);
        assert_eq!(feed.stats.dropped.load(Ordering::Relaxed), 3);
        assert_eq!(feed.stats.bad.load(Ordering::Relaxed), 1);
        assert_eq!(feed.rx.try_iter().count(), FEED_DEPTH);
    }
}
