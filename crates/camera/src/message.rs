//! `foxglove_msgs/msg/CompressedVideo` in CDR: one H.265 access unit per
//! message, Annex B, `format = "h265"`, the form Foxglove plays.
//!
//! ```text
//! builtin_interfaces/Time timestamp   # the capture instant
//! string frame_id
//! uint8[] data                        # Annex B, parameter sets on keyframes
//! string format                       # "h265"
//! ```

use std::collections::BTreeMap;

use edgerec_format::cdr::{CdrWriter, Time};
use edgerec_ros::cdr_reader::{CdrError, CdrReader};
use edgerec_source::ChannelSpec;

/// The message type of a camera's channel.
pub const VIDEO_TYPE: &str = "foxglove_msgs/msg/CompressedVideo";

/// The `format` field of every message edgerec writes.
pub const FORMAT_H265: &str = "h265";

/// The channel a camera records on. `metadata` carries what `edgerec
/// info` shows beside the measured figures (the configured picture and
/// encoder).
pub fn channel_spec(topic: &str, metadata: BTreeMap<String, String>) -> ChannelSpec {
    let schema = edgerec_format::msgdefs::lookup(VIDEO_TYPE)
        .map(|d| d.text().as_bytes().to_vec())
        .unwrap_or_default();
    ChannelSpec {
        topic: topic.to_owned(),
        type_name: VIDEO_TYPE.to_owned(),
        message_encoding: "cdr".to_owned(),
        schema_encoding: "ros2msg".to_owned(),
        schema,
        metadata,
        latched: false,
    }
}

/// Appends one message to `buf` (cleared first) and returns it.
pub fn encode_into(mut buf: Vec<u8>, stamp_ns: u64, frame_id: &str, data: &[u8]) -> Vec<u8> {
    buf.clear();
    buf.reserve(data.len() + frame_id.len() + 32);
    let mut w = CdrWriter::append_to(&mut buf);
    w.time(Time::from(stamp_ns))
        .string(frame_id)
        .bytes(data)
        .string(FORMAT_H265);
    w.finish();
    buf
}

/// A message read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VideoFrame<'a> {
    /// `timestamp` in ns since the epoch.
    pub stamp_ns: u64,
    /// `frame_id`.
    pub frame_id: &'a str,
    /// `data`: the access unit.
    pub data: &'a [u8],
    /// `format`.
    pub format: &'a str,
}

/// Reads a `CompressedVideo` message.
pub fn decode(payload: &[u8]) -> Result<VideoFrame<'_>, CdrError> {
    let mut r = CdrReader::new(payload)?;
    let sec = r.i32("timestamp.sec")?;
    let nanosec = r.u32("timestamp.nanosec")?;
    let frame_id = r.string("frame_id")?;
    let n = r.sequence_len("data", 1)?;
    let data = r.bytes("data", n)?;
    let format = r.string("format")?;
    r.finish()?;
    let stamp_ns = (i64::from(sec) * 1_000_000_000 + i64::from(nanosec)).max(0) as u64;
    Ok(VideoFrame {
        stamp_ns,
        frame_id,
        data,
        format,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_has_the_embedded_schema() {
        let au = [0, 0, 0, 1, 0x40, 0x01, 0xaa, 0, 0, 1, 0x26, 0x01, 0xbb];
        let ns = 1_700_000_000_123_456_789;
        let msg = encode_into(Vec::new(), ns, "front", &au);
        let f = decode(&msg).unwrap();
        assert_eq!(f.stamp_ns, ns);
        assert_eq!((f.frame_id, f.data, f.format), ("front", &au[..], "h265"));
        let spec = channel_spec("/camera/front/h265", BTreeMap::new());
        let schema = String::from_utf8(spec.schema).unwrap();
        assert!(
            schema.contains("\nbuiltin_interfaces/Time timestamp"),
            "{schema}"
        );
        assert!(schema.contains("MSG: builtin_interfaces/Time"), "{schema}");
        // Truncated anywhere: an error, never a panic.
        for cut in 0..msg.len() {
            assert!(decode(&msg[..cut]).is_err(), "cut at {cut}");
        }
    }
}
