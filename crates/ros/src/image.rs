//! `sensor_msgs/msg/Image` in: decoded from CDR and repacked to the row
//! layout GStreamer expects (each row padded to 4 bytes; a ROS `step` may
//! pad differently), with the caps format for its `encoding`. Every size
//! in the message is checked against the bytes it holds before anything
//! is allocated: the message comes from any peer on the graph. No
//! GStreamer here, so the decoder is fuzzed on its own
//! (`fuzz/fuzz_targets/image_decode.rs`).

use crate::cdr_reader::CdrReader;

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

/// Rows of (bytes per row in the image, rows) for each plane of `format`;
/// `None` for an unknown format or a row too long for `usize`.
fn planes(format: &str, width: usize, height: usize) -> Option<Vec<(usize, usize)>> {
    let packed = |bpp: usize| Some(vec![(width.checked_mul(bpp)?, height)]);
    match format {
        "RGB" | "BGR" => packed(3),
        "RGBA" | "BGRA" => packed(4),
        "GRAY8" => packed(1),
        "GRAY16_LE" | "UYVY" | "YUY2" => packed(2),
        "NV12" => Some(vec![(width, height), (width, height.div_ceil(2))]),
        _ => None,
    }
}

/// The bytes of `data` each plane's rows start at, checked before anything
/// is allocated: every row of every plane lies inside the `len` bytes the
/// message holds (`step` apart, the last one `row` long), and the repacked
/// picture's size fits `usize`. Returns that size; `None` when the message
/// promises more than it holds.
fn checked_layout(planes: &[(usize, usize)], step: usize, len: usize) -> Option<usize> {
    let mut at = 0usize;
    let mut out = 0usize;
    for &(row, rows) in planes {
        if row == 0 || rows == 0 || step < row {
            return None;
        }
        // The plane's last row starts (rows - 1) steps in and is `row` long.
        let end = at
            .checked_add((rows - 1).checked_mul(step)?)?
            .checked_add(row)?;
        if end > len {
            return None;
        }
        out = out.checked_add(round4(row).checked_mul(rows)?)?;
        at = at.checked_add(rows.checked_mul(step)?)?;
    }
    Some(out)
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
    /// A size that does not fit the bytes present: fewer bytes than the
    /// rows need, a step shorter than a row, or no pixels at all.
    #[error("image {width}x{height} {encoding} with step {step} holds {len} bytes: its sizes do not fit its data")]
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
    let cdr = |e: crate::cdr_reader::CdrError| ImageError::Cdr(e.to_string());
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
    // Every size the peer sent is checked against the bytes it sent before
    // anything is allocated: an Image claiming 200000x200000 with 16 bytes
    // of data is refused here, not met with a 120 GB allocation.
    let planes = planes(format, width as usize, height as usize).ok_or_else(size_err)?;
    let step = step as usize;
    let size = checked_layout(&planes, step, data.len()).ok_or_else(size_err)?;
    let mut out = Vec::with_capacity(size);
    let mut at = 0usize;
    for (row, rows) in planes {
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

    /// The attack a ROS 2 peer sent: 200000x200000 rgb8 with 16 bytes of
    /// data. Refused before anything is allocated (it aborted the process
    /// allocating 120 GB), as is every other size that does not fit.
    #[test]
    fn sizes_that_do_not_fit_their_data_are_refused_before_allocating() {
        let m = msg::image(
            Time::default(),
            "",
            200_000,
            200_000,
            "rgb8",
            0,
            600_000,
            &[0; 16],
        );
        assert!(matches!(decode(&m, 0), Err(ImageError::Size { .. })));
        for (h, w, enc, step, len) in [
            (u32::MAX, u32::MAX, "rgba8", u32::MAX, 64),
            (0, 4, "mono8", 4, 16),
            (4, 0, "mono8", 0, 16),
            (u32::MAX, 1, "mono8", 1, 16),
            (1, u32::MAX, "nv12", u32::MAX, 16),
            (2, 2, "mono8", u32::MAX, 16),
            (3, 2, "nv12", 2, 7),
        ] {
            let m = msg::image(Time::default(), "", h, w, enc, 0, step, &vec![0; len]);
            assert!(
                matches!(decode(&m, 0), Err(ImageError::Size { .. })),
                "{h}x{w} {enc} step {step} len {len}"
            );
        }
        // Exactly enough: the last row needs only its own bytes, not a step.
        let m = msg::image(
            Time::default(),
            "",
            2,
            2,
            "mono8",
            0,
            8,
            &[1, 2, 0, 0, 0, 0, 0, 0, 3, 4],
        );
        assert_eq!(decode(&m, 0).unwrap().data, [1, 2, 0, 0, 3, 4, 0, 0]);
    }
}
