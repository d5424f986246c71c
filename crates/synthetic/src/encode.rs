//! How a synthetic sensor's messages are built: real, decodable CDR.
//!
//! Each configured channel is its own source (own thread, own queue), like
//! independent sensors. Every message carries its per-channel sequence
//! number so a reader can prove nothing was lost, duplicated or reordered:
//!
//! | type | where the sequence number is |
//! |---|---|
//! | `sensor_msgs/msg/Imu` | `angular_velocity.x` (exact as f64 below 2^53) |
//! | `sensor_msgs/msg/PointCloud2` | first 8 bytes of `data`, u64 LE |
//! | `sensor_msgs/msg/Image` | first 8 bytes of `data`, u64 LE |
//! | `std_msgs/msg/String` | `data` starts with `seq=<20 digits>` |
//! | `sensor_msgs/msg/BatteryState` | `serial_number` is `seq=<20 digits>` |
//!
//! `header.stamp` equals the message's publish_time. The rest of each
//! message is a deterministic function of the sequence number and the
//! channel, documented on [`expected_imu`], [`fill_pattern`] and
//! [`expected_battery`](crate::battery::expected_battery) (whose voltage
//! follows the channel's profile over the time since the source's first
//! message), so tests can check decoded field values. Under
//! `fault = "malformed-every:N"` every Nth message is only its 4-byte
//! encapsulation header ([`crate::fault::is_malformed`]).

use std::collections::BTreeMap;

use edgerec_config::{SyntheticChannel, SyntheticKind};
use edgerec_format::bag::qos_profile_yaml;
use edgerec_format::cdr::{msg, CdrWriter, PointFieldSpec, Time};
use edgerec_format::msgdefs;
use edgerec_source::{ChannelSpec, Source, SourceError};

use crate::battery::battery_into;
use crate::fault::{is_malformed, MALFORMED_LEN};

/// One synthetic sensor.
#[derive(Debug)]
pub struct SyntheticSource {
    pub(crate) cfg: SyntheticChannel,
    pub(crate) template: Vec<u8>,
    /// Bytes an encoded message needs, about.
    pub(crate) payload_hint: usize,
    /// The next sequence number: kept across restarts, so a restarted
    /// source goes on where it stopped.
    pub(crate) seq: u64,
    /// Stamp of the source's first message, which a battery's voltage
    /// profile counts from; kept across restarts like `seq`.
    pub(crate) origin_ns: Option<u64>,
}

/// Image width used when the payload size is a whole number of rgb8 rows.
const IMAGE_WIDTH: u32 = 640;
/// Bytes per PointCloud2 point: x, y, z, intensity as f32.
const POINT_STEP: u32 = 16;

impl SyntheticSource {
    /// One source per configured channel.
    pub fn from_config(channels: &[SyntheticChannel]) -> Vec<Box<dyn Source>> {
        channels
            .iter()
            .map(|c| Box::new(SyntheticSource::new(c.clone())) as Box<dyn Source>)
            .collect()
    }

    /// A source for one channel.
    pub fn new(cfg: SyntheticChannel) -> Self {
        let len = data_len(&cfg);
        let template = if cfg.kind == SyntheticKind::String {
            string_template(len)
        } else {
            let mut t = vec![0u8; len];
            fill_pattern(&cfg.topic, &mut t);
            t
        };
        let payload_hint = template.len() + 400 + cfg.frame_id.len();
        Self {
            cfg,
            template,
            payload_hint,
            seq: 0,
            origin_ns: None,
        }
    }

    /// Sets the stamp a battery's voltage profile counts from, if no
    /// message has set it yet; the source calls it with the stamp of its
    /// first message, and returns the stamp in force.
    pub fn start_at(&mut self, origin_ns: u64) -> u64 {
        *self.origin_ns.get_or_insert(origin_ns)
    }

    /// Encodes message `seq` stamped `stamp_ns` into a new buffer: the
    /// payload the source publishes, cut short when the channel's
    /// `malformed-every` fault strikes it. A battery's voltage counts from
    /// the stamp given to [`start_at`](Self::start_at) (from `stamp_ns`
    /// itself, that is 0 s, before any).
    pub fn encode(&self, seq: u64, stamp_ns: u64) -> Vec<u8> {
        self.encode_into(Vec::new(), seq, stamp_ns)
    }

    /// [`encode`](Self::encode) into `buf` (cleared first), so a recycled
    /// buffer ([`SourceSink::buffer`]) saves the allocation.
    pub fn encode_into(&self, mut buf: Vec<u8>, seq: u64, stamp_ns: u64) -> Vec<u8> {
        buf.clear();
        let mut buf = self.encode_message(buf, seq, stamp_ns);
        if is_malformed(self.cfg.fault, seq) {
            buf.truncate(MALFORMED_LEN);
        }
        buf
    }

    /// Message `seq` in full, appended to the empty `buf`.
    fn encode_message(&self, mut buf: Vec<u8>, seq: u64, stamp_ns: u64) -> Vec<u8> {
        let stamp = Time::from(stamp_ns);
        let frame = self.cfg.frame_id.as_str();
        match self.cfg.kind {
            SyntheticKind::Imu => {
                let e = expected_imu(seq);
                msg::imu_into(&mut buf, stamp, frame, e.0, e.1, e.2, e.3);
                buf
            }
            // Large data fields are appended straight from the template
            // (one pass over the bytes, no zeroing first), then the
            // sequence number is patched into their first 8 bytes.
            SyntheticKind::PointCloud2 => {
                let len = self.template.len();
                let width = (len / POINT_STEP as usize) as u32;
                buf.reserve(len + 256 + frame.len());
                let mut w = CdrWriter::append_to(&mut buf);
                w.header(stamp, frame)
                    .u32(1)
                    .u32(width)
                    .sequence_len(POINT_FIELDS.len());
                for f in &POINT_FIELDS {
                    w.string(f.name).u32(f.offset).u8(f.datatype).u32(f.count);
                }
                w.bool(false)
                    .u32(POINT_STEP)
                    .u32(width * POINT_STEP)
                    .bytes(&self.template)
                    .bool(true);
                w.finish();
                let end = buf.len() - 1;
                patch_seq(&mut buf[end - len..end], seq);
                buf
            }
            SyntheticKind::Image => {
                let len = self.template.len();
                let (h, w_px, enc, step) = image_geometry(len);
                buf.reserve(len + 128 + frame.len());
                let mut w = CdrWriter::append_to(&mut buf);
                w.header(stamp, frame)
                    .u32(h)
                    .u32(w_px)
                    .string(enc)
                    .u8(0)
                    .u32(step)
                    .bytes(&self.template);
                w.finish();
                let end = buf.len();
                patch_seq(&mut buf[end - len..end], seq);
                buf
            }
            SyntheticKind::String => {
                // The template holds "seq=" + 20 digits + filler; only the
                // digits change per message.
                let text = &self.template;
                buf.reserve(text.len() + 16);
                msg::string_into(&mut buf, "");
                buf.truncate(4);
                buf.extend_from_slice(&(text.len() as u32 + 1).to_le_bytes());
                let at = buf.len() + 4;
                buf.extend_from_slice(text);
                buf.push(0);
                let mut n = seq;
                for d in buf[at..at + 20].iter_mut().rev() {
                    *d = b'0' + (n % 10) as u8;
                    n /= 10;
                }
                buf
            }
            SyntheticKind::BatteryState => {
                let origin = self.origin_ns.unwrap_or(stamp_ns);
                battery_into(&mut buf, &self.cfg.voltage, frame, seq, stamp_ns, origin);
                buf
            }
        }
    }

    /// The channel this source records.
    pub fn spec(&self) -> Result<ChannelSpec, SourceError> {
        let ty = self.cfg.kind.ros_type();
        let def = msgdefs::lookup(ty).ok_or_else(|| SourceError::Config {
            reason: format!("no embedded message definition for {ty}"),
        })?;
        let mut metadata = BTreeMap::new();
        metadata.insert(
            "offered_qos_profiles".to_string(),
            qos_profile_yaml(
                true,
                self.cfg.latched,
                if self.cfg.latched { 1 } else { 10 },
            ),
        );
        Ok(ChannelSpec {
            topic: self.cfg.topic.clone(),
            type_name: ty.to_string(),
            message_encoding: "cdr".into(),
            schema_encoding: def.encoding.to_string(),
            schema: def.text().as_bytes().to_vec(),
            metadata,
            latched: self.cfg.latched,
        })
    }
}

/// The PointCloud2 fields the synthetic lidar declares.
pub const POINT_FIELDS: [PointFieldSpec<'static>; 4] = [
    PointFieldSpec::float32("x", 0),
    PointFieldSpec::float32("y", 4),
    PointFieldSpec::float32("z", 8),
    PointFieldSpec::float32("intensity", 12),
];

/// Size of the variable `data` field for a channel (0 = natural size).
pub fn data_len(cfg: &SyntheticChannel) -> usize {
    let n = cfg.payload_size as usize;
    match cfg.kind {
        SyntheticKind::Imu => 0,
        SyntheticKind::PointCloud2 => {
            let n = if n == 0 { 1_200_000 } else { n };
            (n / POINT_STEP as usize).max(1) * POINT_STEP as usize
        }
        SyntheticKind::Image => {
            if n == 0 {
                IMAGE_WIDTH as usize * 3 * 480
            } else {
                n.max(8)
            }
        }
        SyntheticKind::String => n,
        SyntheticKind::BatteryState => 0,
    }
}

fn patch_seq(data: &mut [u8], seq: u64) {
    let n = data.len().min(8);
    data[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
}

/// The String payload: `seq=` and 20 digit places, then `a..z` repeated up
/// to `len` bytes (at least 24).
pub fn string_template(len: usize) -> Vec<u8> {
    let mut t = b"seq=00000000000000000000".to_vec();
    while t.len() < len {
        t.push(b'a' + (t.len() % 26) as u8);
    }
    t
}

/// (height, width, encoding, step) for an image `data` of `len` bytes:
/// 640-wide rgb8 when `len` is a whole number of such rows, else one mono8
/// row of `len` pixels.
pub fn image_geometry(len: usize) -> (u32, u32, &'static str, u32) {
    let row = IMAGE_WIDTH as usize * 3;
    if len % row == 0 {
        ((len / row) as u32, IMAGE_WIDTH, "rgb8", row as u32)
    } else {
        (1, len as u32, "mono8", len as u32)
    }
}

/// The Imu fields for sequence `seq`: orientation = rotation of
/// `seq * 1e-3` rad about z, angular_velocity = (seq, 0.5, -0.25),
/// linear_acceleration = (0, 0, 9.80665), covariances: diagonal 0.01,
/// 0.02, 0.04.
#[allow(clippy::type_complexity)]
pub fn expected_imu(seq: u64) -> ([f64; 4], [f64; 3], [f64; 3], [[f64; 9]; 3]) {
    let a = seq as f64 * 1e-3;
    let diag = |v: f64| {
        let mut m = [0.0; 9];
        m[0] = v;
        m[4] = v;
        m[8] = v;
        m
    };
    (
        [0.0, 0.0, (a / 2.0).sin(), (a / 2.0).cos()],
        [seq as f64, 0.5, -0.25],
        [0.0, 0.0, 9.80665],
        [diag(0.01), diag(0.02), diag(0.04)],
    )
}

/// Fills a data field: the first half a smooth gradient (compresses well,
/// like sky and road), the second half bytes of a xorshift sequence seeded
/// from the topic (does not compress, like sensor noise). The first 8
/// bytes are then overwritten by the sequence number.
pub fn fill_pattern(topic: &str, out: &mut [u8]) {
    let half = out.len() / 2;
    for (i, b) in out[..half].iter_mut().enumerate() {
        *b = (i / 64) as u8;
    }
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15
        ^ topic
            .bytes()
            .fold(0u64, |h, c| h.wrapping_mul(31).wrapping_add(c as u64));
    for b in out[half..].iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgerec_config::Rate;

    fn chan(kind: SyntheticKind, size: u64) -> SyntheticChannel {
        SyntheticChannel {
            payload_size: size,
            ..SyntheticChannel::new("/t", kind, Rate::Hz(10.0))
        }
    }

    #[test]
    fn sequence_is_embedded_where_documented() {
        let s = SyntheticSource::new(chan(SyntheticKind::Image, 1 << 20));
        let m = s.encode(0x0102_0304_0506_0708, 5);
        let d = &m[m.len() - (1 << 20)..];
        assert_eq!(&d[..8], &0x0102_0304_0506_0708u64.to_le_bytes());
        let s = SyntheticSource::new(chan(SyntheticKind::String, 256));
        let m = s.encode(42, 5);
        assert!(m.windows(24).any(|w| w == b"seq=00000000000000000042"));
        assert_eq!(m.len(), 4 + 4 + 256 + 1);
    }

    #[test]
    fn malformed_every_cuts_every_nth_message_to_its_header() {
        use edgerec_config::SourceFault;
        let s = SyntheticSource::new(SyntheticChannel {
            fault: Some(SourceFault::MalformedEvery(2)),
            ..chan(SyntheticKind::Imu, 0)
        });
        let whole = SyntheticSource::new(chan(SyntheticKind::Imu, 0)).encode(0, 5);
        assert_eq!(s.encode(0, 5), whole, "message 1 whole");
        assert_eq!(s.encode(1, 5), [0, 1, 0, 0], "message 2 cut");
        assert_eq!(s.encode(2, 5).len(), whole.len(), "message 3 whole");
        assert_eq!(s.encode(3, 5).len(), 4, "message 4 cut");
    }

    #[test]
    fn image_geometry_covers_the_payload() {
        assert_eq!(image_geometry(921_600), (480, 640, "rgb8", 1920));
        assert_eq!(image_geometry(1 << 20), (1, 1 << 20, "mono8", 1 << 20));
    }

    #[test]
    fn pointcloud_size_is_whole_points() {
        assert_eq!(
            data_len(&chan(SyntheticKind::PointCloud2, 1_200_001)),
            1_200_000
        );
    }
}
