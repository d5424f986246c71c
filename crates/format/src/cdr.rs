//! CDR encoding (XCDR1, little-endian, encapsulation header `00 01 00 00`) as
//! ROS 2 puts it on the wire and rosbag2 stores it, plus builders for the
//! messages edgerec's synthetic source emits. Alignment counts from the first
//! byte after the 4-byte encapsulation header: every primitive starts at a
//! multiple of its size (`f64`/`u64` at 8). Strings are a `u32` length that
//! includes the NUL, the bytes, then the NUL; sequences are a `u32` count then
//! the elements; fixed arrays have no count. [`CdrWriter`] writes these
//! without allocating per field, into a `Vec` it owns or appended to a
//! caller's buffer, so a reused buffer costs no allocation per message.
//!
//! ```
//! use edgerec_format::cdr::{msg, CdrWriter, Time};
//!
//! // std_msgs/msg/String "hi": header, length 3 (with the NUL), bytes, NUL.
//! let bytes = msg::string("hi");
//! assert_eq!(bytes, [0, 1, 0, 0, 3, 0, 0, 0, b'h', b'i', 0]);
//!
//! // By hand: a u8 then an f64, seven pad bytes between them.
//! let mut w = CdrWriter::new();
//! w.u8(7).f64(1.5);
//! assert_eq!(w.len(), 4 + 1 + 7 + 8);
//! assert_eq!(w.finish()[5..12], [0; 7]);
//!
//! // A 640x480 mono image written in place into a reused buffer.
//! let mut buf = Vec::new();
//! let n = msg::image_into(&mut buf, Time::from(1_700_000_000_000_000_000), "cam",
//!     480, 640, "mono8", 0, 640, 640 * 480, |px| px.fill(0x80));
//! assert_eq!(n, buf.len());
//! ```

use std::borrow::BorrowMut;

/// The 4-byte encapsulation header of little-endian plain CDR (`CDR_LE`).
pub const ENCAPSULATION_HEADER: [u8; 4] = [0x00, 0x01, 0x00, 0x00];

/// Writes one CDR message: the encapsulation header, then fields in order.
///
/// `B` is the buffer: an owned `Vec<u8>` ([`CdrWriter::new`]) or a borrowed one
/// the message is appended to ([`CdrWriter::append_to`]). The field methods
/// return `&mut Self` so calls chain.
#[derive(Debug, Clone)]
pub struct CdrWriter<B = Vec<u8>> {
    buf: B,
    /// Index in `buf` of the first byte after the encapsulation header:
    /// alignment is counted from here.
    origin: usize,
}

impl CdrWriter<Vec<u8>> {
    /// A writer with a new buffer holding just the encapsulation header.
    pub fn new() -> Self {
        Self::with_capacity(64)
    }

    /// A writer whose buffer has room for `capacity` bytes (header included)
    /// before it reallocates.
    pub fn with_capacity(capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(capacity.max(ENCAPSULATION_HEADER.len()));
        buf.extend_from_slice(&ENCAPSULATION_HEADER);
        CdrWriter {
            buf,
            origin: ENCAPSULATION_HEADER.len(),
        }
    }

    /// The encoded message.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

impl Default for CdrWriter<Vec<u8>> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> CdrWriter<&'a mut Vec<u8>> {
    /// A writer that appends a message to `buf`, after whatever `buf` already
    /// holds; alignment counts from the message's own start, so the bytes are
    /// the same as a fresh writer's.
    pub fn append_to(buf: &'a mut Vec<u8>) -> Self {
        buf.extend_from_slice(&ENCAPSULATION_HEADER);
        let origin = buf.len();
        CdrWriter { buf, origin }
    }

    /// Ends the message; returns its length in bytes (header included).
    pub fn finish(self) -> usize {
        self.len()
    }
}

macro_rules! primitive {
    ($(#[$doc:meta] $name:ident: $ty:ty),* $(,)?) => {
        $(
            #[$doc]
            #[inline]
            pub fn $name(&mut self, v: $ty) -> &mut Self {
                self.align(std::mem::size_of::<$ty>());
                self.buf.borrow_mut().extend_from_slice(&v.to_le_bytes());
                self
            }
        )*
    };
}

impl<B: BorrowMut<Vec<u8>>> CdrWriter<B> {
    /// Length of the message so far, encapsulation header included.
    pub fn len(&self) -> usize {
        self.buf.borrow().len() + ENCAPSULATION_HEADER.len() - self.origin
    }

    /// Whether no field has been written yet (only the header is there).
    pub fn is_empty(&self) -> bool {
        self.buf.borrow().len() == self.origin
    }

    /// Pads with zeros to a multiple of `n` from the end of the header.
    #[inline]
    fn align(&mut self, n: usize) {
        let buf = self.buf.borrow_mut();
        let misalign = (buf.len() - self.origin) % n;
        if misalign != 0 {
            buf.resize(buf.len() + n - misalign, 0);
        }
    }

    /// `uint8` / `byte` / `char`.
    #[inline]
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.borrow_mut().push(v);
        self
    }

    /// `bool`: one byte, 0 or 1.
    #[inline]
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }

    /// `int8`.
    #[inline]
    pub fn i8(&mut self, v: i8) -> &mut Self {
        self.u8(v as u8)
    }

    primitive! {
        /// `uint16`, aligned to 2.
        u16: u16,
        /// `int16`, aligned to 2.
        i16: i16,
        /// `uint32`, aligned to 4.
        u32: u32,
        /// `int32`, aligned to 4.
        i32: i32,
        /// `uint64`, aligned to 8.
        u64: u64,
        /// `int64`, aligned to 8.
        i64: i64,
        /// `float32`, aligned to 4.
        f32: f32,
        /// `float64`, aligned to 8.
        f64: f64,
    }

    /// `string`: `u32` length including the NUL, the UTF-8 bytes, a NUL.
    ///
    /// # Panics
    /// If the string is 4 GiB or longer.
    #[inline]
    pub fn string(&mut self, s: &str) -> &mut Self {
        self.sequence_len(s.len() + 1);
        let buf = self.buf.borrow_mut();
        buf.extend_from_slice(s.as_bytes());
        buf.push(0);
        self
    }

    /// The `u32` element count that starts a sequence (`T[]`); the caller then
    /// writes the `n` elements.
    ///
    /// # Panics
    /// If `n` does not fit in a `u32`.
    #[inline]
    pub fn sequence_len(&mut self, n: usize) -> &mut Self {
        let n = u32::try_from(n).expect("CDR sequence longer than u32::MAX");
        self.u32(n)
    }

    /// `uint8[]`: count, then the bytes.
    #[inline]
    pub fn bytes(&mut self, data: &[u8]) -> &mut Self {
        self.sequence_len(data.len());
        self.buf.borrow_mut().extend_from_slice(data);
        self
    }

    /// `uint8[]` of `len` bytes that `fill` writes in place (they start zeroed),
    /// so large payloads are produced straight into the message buffer.
    pub fn bytes_with(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> &mut Self {
        self.sequence_len(len);
        let buf = self.buf.borrow_mut();
        let start = buf.len();
        buf.resize(start + len, 0);
        fill(&mut buf[start..]);
        self
    }

    /// `float64[N]`: the values, aligned to 8, with no count.
    #[inline]
    pub fn f64_array(&mut self, values: &[f64]) -> &mut Self {
        if !values.is_empty() {
            self.align(8);
            let buf = self.buf.borrow_mut();
            for v in values {
                buf.extend_from_slice(&v.to_le_bytes());
            }
        }
        self
    }

    /// `builtin_interfaces/Time`.
    #[inline]
    pub fn time(&mut self, t: Time) -> &mut Self {
        self.i32(t.sec).u32(t.nanosec)
    }

    /// `std_msgs/Header`: stamp, then frame id.
    #[inline]
    pub fn header(&mut self, stamp: Time, frame_id: &str) -> &mut Self {
        self.time(stamp).string(frame_id)
    }
}

/// `builtin_interfaces/msg/Time`: seconds and nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time {
    /// Seconds.
    pub sec: i32,
    /// Nanoseconds in `[0, 1e9)`, added to `sec`.
    pub nanosec: u32,
}

impl From<u64> for Time {
    /// From nanoseconds since the epoch. Seconds past `i32::MAX`
    /// (2038-01-19T03:14:07Z) saturate there, keeping times ordered.
    fn from(ns: u64) -> Self {
        let sec = ns / 1_000_000_000;
        Time {
            sec: i32::try_from(sec).unwrap_or(i32::MAX),
            nanosec: (ns % 1_000_000_000) as u32,
        }
    }
}

/// One `sensor_msgs/PointField` of a [`msg::point_cloud2`] message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PointFieldSpec<'a> {
    /// Field name (`x`, `y`, `z`, `intensity`, ...).
    pub name: &'a str,
    /// Byte offset of the field in a point.
    pub offset: u32,
    /// Element type, one of the `PointFieldSpec::INT8` .. `FLOAT64` constants.
    pub datatype: u8,
    /// Number of elements.
    pub count: u32,
}

impl<'a> PointFieldSpec<'a> {
    /// A single `FLOAT32` field at `offset`.
    pub const fn float32(name: &'a str, offset: u32) -> Self {
        PointFieldSpec {
            name,
            offset,
            datatype: PointFieldSpec::FLOAT32,
            count: 1,
        }
    }

    /// `PointField.INT8`.
    pub const INT8: u8 = 1;
    /// `PointField.UINT8`.
    pub const UINT8: u8 = 2;
    /// `PointField.INT16`.
    pub const INT16: u8 = 3;
    /// `PointField.UINT16`.
    pub const UINT16: u8 = 4;
    /// `PointField.INT32`.
    pub const INT32: u8 = 5;
    /// `PointField.UINT32`.
    pub const UINT32: u8 = 6;
    /// `PointField.FLOAT32`.
    pub const FLOAT32: u8 = 7;
    /// `PointField.FLOAT64`.
    pub const FLOAT64: u8 = 8;
}

/// One `diagnostic_msgs/DiagnosticStatus` of a [`msg::diagnostic_array`] message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiagnosticStatusSpec<'a> {
    /// `OK` 0, `WARN` 1, `ERROR` 2, `STALE` 3.
    pub level: u8,
    /// Test or component name.
    pub name: &'a str,
    /// Status description.
    pub message: &'a str,
    /// Hardware identifier.
    pub hardware_id: &'a str,
    /// `diagnostic_msgs/KeyValue` pairs as `(key, value)`.
    pub values: &'a [(&'a str, &'a str)],
}

/// One sample of `edgerec_msgs/msg/ClockQuality` (see [`msg::clock_quality`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockQualitySpec<'a> {
    /// `FREE_RUNNING` 0, `UNLOCKED` 1, `HOLDOVER` 2, `LOCKED` 3.
    pub state: u8,
    /// Offset from the reference in ns, when `offset_valid`.
    pub offset_ns: i64,
    /// Whether `offset_ns` was measured.
    pub offset_valid: bool,
    /// Where the offset came from.
    pub offset_origin: &'a str,
    /// ptp4l's mean path delay in ns.
    pub mean_path_delay_ns: i64,
    /// ptp4l's port state, empty when it does not answer.
    pub port_state: &'a str,
    /// Grandmaster identity, empty when unknown.
    pub grandmaster: &'a str,
    /// ptp4l sees a grandmaster.
    pub gm_present: bool,
    /// The clock that stamps the data.
    pub source: &'a str,
}

/// One `sensor_msgs/msg/BatteryState` (see [`msg::battery_state_into`]);
/// the fields in the order of the `.msg` file, after the header.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatteryStateSpec<'a> {
    /// Volts.
    pub voltage: f32,
    /// Degrees Celsius; NaN when unmeasured.
    pub temperature: f32,
    /// Amperes, negative when discharging; NaN when unmeasured.
    pub current: f32,
    /// Ah; NaN when unmeasured.
    pub charge: f32,
    /// Last full capacity in Ah; NaN when unmeasured.
    pub capacity: f32,
    /// Design capacity in Ah; NaN when unmeasured.
    pub design_capacity: f32,
    /// Charge from 0 to 1; NaN when unmeasured.
    pub percentage: f32,
    /// `POWER_SUPPLY_STATUS_*`.
    pub power_supply_status: u8,
    /// `POWER_SUPPLY_HEALTH_*`.
    pub power_supply_health: u8,
    /// `POWER_SUPPLY_TECHNOLOGY_*`.
    pub power_supply_technology: u8,
    /// Whether the battery is present.
    pub present: bool,
    /// Volts of each cell.
    pub cell_voltage: &'a [f32],
    /// Degrees Celsius of each cell.
    pub cell_temperature: &'a [f32],
    /// Slot or plug the battery is in.
    pub location: &'a str,
    /// The battery's serial number.
    pub serial_number: &'a str,
}

/// One classic CAN frame as `can_msgs/msg/Frame` (see [`msg::can_frame_into`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CanFrameSpec<'a> {
    /// The identifier without SocketCAN's flag bits (11 or 29 bits), or
    /// for an error frame its error class bits.
    pub id: u32,
    /// A remote transmission request.
    pub is_rtr: bool,
    /// A 29-bit identifier.
    pub is_extended: bool,
    /// An error frame.
    pub is_error: bool,
    /// The data length code: 0 to 8, or 9 to 15 for an 8-byte frame whose
    /// controller reported a raw DLC above 8.
    pub dlc: u8,
    /// Up to 8 data bytes; the message's `uint8[8]` is padded with zeros.
    pub data: &'a [u8],
}

/// One CAN FD frame as `ros2_socketcan_msgs/msg/FdFrame` (see
/// [`msg::fd_frame_into`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdFrameSpec<'a> {
    /// The identifier without SocketCAN's flag bits.
    pub id: u32,
    /// A 29-bit identifier.
    pub is_extended: bool,
    /// An error frame.
    pub is_error: bool,
    /// The data bytes, at most 64; `len` is their count.
    pub data: &'a [u8],
}

/// Builders for the messages edgerec's synthetic source emits. Each returns
/// the encoded message; its `_into` twin appends it to a caller's buffer
/// (reused across messages, so nothing is allocated) and returns its length.
pub mod msg {
    use super::{
        BatteryStateSpec, CanFrameSpec, CdrWriter, ClockQualitySpec, DiagnosticStatusSpec,
        FdFrameSpec, PointFieldSpec, Time,
    };

    /// Header, length prefixes and the worst-case padding of the fixed fields
    /// of every builder here fit in this many bytes.
    const FIXED_SLACK: usize = 64;

    /// `std_msgs/msg/String`.
    pub fn string(data: &str) -> Vec<u8> {
        let mut buf = Vec::with_capacity(FIXED_SLACK + data.len());
        string_into(&mut buf, data);
        buf
    }

    /// [`string`], appended to `buf`; returns the message length.
    pub fn string_into(buf: &mut Vec<u8>, data: &str) -> usize {
        let mut w = CdrWriter::append_to(buf);
        w.string(data);
        w.finish()
    }

    /// `sensor_msgs/msg/Imu`. `orientation` is `x, y, z, w`; `covariances` are
    /// the orientation, angular velocity and linear acceleration covariances
    /// (row major), in that order.
    pub fn imu(
        stamp: Time,
        frame_id: &str,
        orientation: [f64; 4],
        angular_velocity: [f64; 3],
        linear_acceleration: [f64; 3],
        covariances: [[f64; 9]; 3],
    ) -> Vec<u8> {
        let mut buf = Vec::with_capacity(FIXED_SLACK + 296 + frame_id.len());
        imu_into(
            &mut buf,
            stamp,
            frame_id,
            orientation,
            angular_velocity,
            linear_acceleration,
            covariances,
        );
        buf
    }

    /// [`imu`], appended to `buf`; returns the message length.
    pub fn imu_into(
        buf: &mut Vec<u8>,
        stamp: Time,
        frame_id: &str,
        orientation: [f64; 4],
        angular_velocity: [f64; 3],
        linear_acceleration: [f64; 3],
        covariances: [[f64; 9]; 3],
    ) -> usize {
        let mut w = CdrWriter::append_to(buf);
        w.header(stamp, frame_id)
            .f64_array(&orientation)
            .f64_array(&covariances[0])
            .f64_array(&angular_velocity)
            .f64_array(&covariances[1])
            .f64_array(&linear_acceleration)
            .f64_array(&covariances[2]);
        w.finish()
    }

    /// `sensor_msgs/msg/PointCloud2`.
    #[allow(clippy::too_many_arguments)]
    pub fn point_cloud2(
        stamp: Time,
        frame_id: &str,
        height: u32,
        width: u32,
        fields: &[PointFieldSpec<'_>],
        is_bigendian: bool,
        point_step: u32,
        row_step: u32,
        data: &[u8],
        is_dense: bool,
    ) -> Vec<u8> {
        let names: usize = fields.iter().map(|f| 20 + f.name.len()).sum();
        let mut buf = Vec::with_capacity(FIXED_SLACK + frame_id.len() + names + data.len());
        point_cloud2_into(
            &mut buf,
            stamp,
            frame_id,
            height,
            width,
            fields,
            is_bigendian,
            point_step,
            row_step,
            data.len(),
            |out| out.copy_from_slice(data),
            is_dense,
        );
        buf
    }

    /// [`point_cloud2`] appended to `buf`, its `data` (`data_len` bytes, zeroed
    /// first) written in place by `fill`; returns the message length.
    #[allow(clippy::too_many_arguments)]
    pub fn point_cloud2_into(
        buf: &mut Vec<u8>,
        stamp: Time,
        frame_id: &str,
        height: u32,
        width: u32,
        fields: &[PointFieldSpec<'_>],
        is_bigendian: bool,
        point_step: u32,
        row_step: u32,
        data_len: usize,
        fill: impl FnOnce(&mut [u8]),
        is_dense: bool,
    ) -> usize {
        let mut w = CdrWriter::append_to(buf);
        w.header(stamp, frame_id)
            .u32(height)
            .u32(width)
            .sequence_len(fields.len());
        for f in fields {
            w.string(f.name).u32(f.offset).u8(f.datatype).u32(f.count);
        }
        w.bool(is_bigendian)
            .u32(point_step)
            .u32(row_step)
            .bytes_with(data_len, fill)
            .bool(is_dense);
        w.finish()
    }

    /// `sensor_msgs/msg/Image`.
    #[allow(clippy::too_many_arguments)]
    pub fn image(
        stamp: Time,
        frame_id: &str,
        height: u32,
        width: u32,
        encoding: &str,
        is_bigendian: u8,
        step: u32,
        data: &[u8],
    ) -> Vec<u8> {
        let mut buf =
            Vec::with_capacity(FIXED_SLACK + frame_id.len() + encoding.len() + data.len());
        image_into(
            &mut buf,
            stamp,
            frame_id,
            height,
            width,
            encoding,
            is_bigendian,
            step,
            data.len(),
            |out| out.copy_from_slice(data),
        );
        buf
    }

    /// [`image`] appended to `buf`, its `data` (`data_len` bytes, zeroed first)
    /// written in place by `fill`; returns the message length.
    #[allow(clippy::too_many_arguments)]
    pub fn image_into(
        buf: &mut Vec<u8>,
        stamp: Time,
        frame_id: &str,
        height: u32,
        width: u32,
        encoding: &str,
        is_bigendian: u8,
        step: u32,
        data_len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> usize {
        let mut w = CdrWriter::append_to(buf);
        w.header(stamp, frame_id)
            .u32(height)
            .u32(width)
            .string(encoding)
            .u8(is_bigendian)
            .u32(step)
            .bytes_with(data_len, fill);
        w.finish()
    }

    /// `can_msgs/msg/Frame`, appended to `buf`; returns the message length.
    /// Data past 8 bytes is not written (a classic frame has no more).
    pub fn can_frame_into(
        buf: &mut Vec<u8>,
        stamp: Time,
        frame_id: &str,
        f: &CanFrameSpec<'_>,
    ) -> usize {
        let mut data = [0u8; 8];
        let n = f.data.len().min(8);
        data[..n].copy_from_slice(&f.data[..n]);
        let mut w = CdrWriter::append_to(buf);
        w.header(stamp, frame_id)
            .u32(f.id)
            .bool(f.is_rtr)
            .bool(f.is_extended)
            .bool(f.is_error)
            .u8(f.dlc);
        for b in data {
            w.u8(b);
        }
        w.finish()
    }

    /// `ros2_socketcan_msgs/msg/FdFrame`, appended to `buf`; returns the
    /// message length. Data past 64 bytes is not written (`uint8[<=64]`).
    pub fn fd_frame_into(
        buf: &mut Vec<u8>,
        stamp: Time,
        frame_id: &str,
        f: &FdFrameSpec<'_>,
    ) -> usize {
        let data = &f.data[..f.data.len().min(64)];
        let mut w = CdrWriter::append_to(buf);
        w.header(stamp, frame_id)
            .u32(f.id)
            .bool(f.is_extended)
            .bool(f.is_error)
            .u8(data.len() as u8)
            .bytes(data);
        w.finish()
    }

    /// `edgerec_msgs/msg/Packet`: one received datagram from `source`
    /// (`"address:port"`), appended to `buf`; returns the message length.
    pub fn packet_into(buf: &mut Vec<u8>, stamp: Time, source: &str, data: &[u8]) -> usize {
        let mut w = CdrWriter::append_to(buf);
        w.time(stamp).string(source).bytes(data);
        w.finish()
    }

    /// `foxglove_msgs/msg/CompressedVideo`: one access unit in `format`
    /// (`h264`, `h265`, ...).
    pub fn compressed_video(stamp: Time, frame_id: &str, data: &[u8], format: &str) -> Vec<u8> {
        let mut buf = Vec::with_capacity(FIXED_SLACK + frame_id.len() + data.len() + format.len());
        compressed_video_into(&mut buf, stamp, frame_id, data, format);
        buf
    }

    /// [`compressed_video`], appended to `buf`; returns the message length.
    pub fn compressed_video_into(
        buf: &mut Vec<u8>,
        stamp: Time,
        frame_id: &str,
        data: &[u8],
        format: &str,
    ) -> usize {
        let mut w = CdrWriter::append_to(buf);
        w.time(stamp).string(frame_id).bytes(data).string(format);
        w.finish()
    }

    /// `sensor_msgs/msg/BatteryState`, appended to `buf`; returns the
    /// message length.
    pub fn battery_state_into(
        buf: &mut Vec<u8>,
        stamp: Time,
        frame_id: &str,
        b: &BatteryStateSpec<'_>,
    ) -> usize {
        let mut w = CdrWriter::append_to(buf);
        w.header(stamp, frame_id)
            .f32(b.voltage)
            .f32(b.temperature)
            .f32(b.current)
            .f32(b.charge)
            .f32(b.capacity)
            .f32(b.design_capacity)
            .f32(b.percentage)
            .u8(b.power_supply_status)
            .u8(b.power_supply_health)
            .u8(b.power_supply_technology)
            .bool(b.present)
            .sequence_len(b.cell_voltage.len());
        for v in b.cell_voltage {
            w.f32(*v);
        }
        w.sequence_len(b.cell_temperature.len());
        for t in b.cell_temperature {
            w.f32(*t);
        }
        w.string(b.location).string(b.serial_number);
        w.finish()
    }

    /// `edgerec_msgs/msg/ClockQuality`, the clock monitor's sample.
    pub fn clock_quality(stamp: Time, q: &ClockQualitySpec<'_>) -> Vec<u8> {
        let strings = q.offset_origin.len() + q.port_state.len() + q.grandmaster.len();
        let mut w = CdrWriter::with_capacity(FIXED_SLACK + 32 + strings + q.source.len());
        w.time(stamp)
            .u8(q.state)
            .i64(q.offset_ns)
            .bool(q.offset_valid)
            .string(q.offset_origin)
            .i64(q.mean_path_delay_ns)
            .string(q.port_state)
            .string(q.grandmaster)
            .bool(q.gm_present)
            .string(q.source);
        w.finish()
    }

    /// `diagnostic_msgs/msg/DiagnosticArray` with an empty header frame id.
    pub fn diagnostic_array(stamp: Time, statuses: &[DiagnosticStatusSpec<'_>]) -> Vec<u8> {
        let strings: usize = statuses
            .iter()
            .map(|s| {
                32 + s.name.len()
                    + s.message.len()
                    + s.hardware_id.len()
                    + s.values
                        .iter()
                        .map(|(k, v)| 16 + k.len() + v.len())
                        .sum::<usize>()
            })
            .sum();
        let mut buf = Vec::with_capacity(FIXED_SLACK + strings);
        diagnostic_array_into(&mut buf, stamp, statuses);
        buf
    }

    /// [`diagnostic_array`], appended to `buf`; returns the message length.
    pub fn diagnostic_array_into(
        buf: &mut Vec<u8>,
        stamp: Time,
        statuses: &[DiagnosticStatusSpec<'_>],
    ) -> usize {
        let mut w = CdrWriter::append_to(buf);
        w.header(stamp, "").sequence_len(statuses.len());
        for s in statuses {
            w.u8(s.level)
                .string(s.name)
                .string(s.message)
                .string(s.hardware_id)
                .sequence_len(s.values.len());
            for (k, v) in s.values {
                w.string(k).string(v);
            }
        }
        w.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: [u8; 4] = ENCAPSULATION_HEADER;

    #[test]
    fn empty_message_is_the_header() {
        let w = CdrWriter::new();
        assert!(w.is_empty());
        assert_eq!(w.len(), 4);
        assert_eq!(w.finish(), H);
    }

    #[test]
    fn u8_then_f64_pads_seven_bytes() {
        let mut w = CdrWriter::new();
        w.u8(0xAB).f64(1.0);
        let b = w.finish();
        assert_eq!(b.len(), 4 + 1 + 7 + 8);
        assert_eq!(&b[4..12], &[0xAB, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[12..], &1.0f64.to_le_bytes());
    }

    #[test]
    fn primitives_align_to_their_size_from_after_the_header() {
        let mut w = CdrWriter::new();
        w.u8(1)
            .u16(0x0203)
            .u8(4)
            .u32(0x0506_0708)
            .u8(9)
            .u64(10)
            .i8(-1)
            .i16(-2);
        w.u8(0).f32(0.5).bool(true).i32(-3).bool(false).i64(-4);
        #[rustfmt::skip]
        let expected: Vec<u8> = [
            &H[..],
            &[1, 0], &[3, 2],                   // u8, pad 1, u16
            &[4, 0, 0, 0], &[8, 7, 6, 5],       // u8, pad 3, u32
            &[9, 0, 0, 0],                      // u8 at 12, pad 3 to 16
            &10u64.to_le_bytes(),
            &[0xFF, 0], &(-2i16).to_le_bytes(), // i8, pad 1, i16
            &[0, 0, 0, 0], &0.5f32.to_le_bytes(), // u8, pad 3, f32
            &[1, 0, 0, 0], &(-3i32).to_le_bytes(), // bool, pad 3, i32
            &[0, 0, 0, 0],                      // bool at 44, pad 3 to 48
            &(-4i64).to_le_bytes(),
        ]
        .concat();
        assert_eq!(w.finish(), expected);
    }

    #[test]
    fn string_counts_the_nul() {
        let mut w = CdrWriter::new();
        w.string("abc").string("");
        assert_eq!(
            w.finish(),
            [&H[..], &[4, 0, 0, 0, b'a', b'b', b'c', 0], &[1, 0, 0, 0, 0]].concat()
        );
        // A string after an odd byte is aligned as its u32 length is.
        let mut w = CdrWriter::new();
        w.u8(1).string("é");
        assert_eq!(
            w.finish(),
            [&H[..], &[1, 0, 0, 0, 3, 0, 0, 0, 0xC3, 0xA9, 0]].concat()
        );
    }

    #[test]
    fn sequences_have_a_count_and_fixed_arrays_do_not() {
        let mut w = CdrWriter::new();
        w.bytes(&[7, 8, 9]).f64_array(&[1.0, 2.0]).bytes(&[]);
        let b = w.finish();
        assert_eq!(&b[4..11], &[3, 0, 0, 0, 7, 8, 9]);
        assert_eq!(&b[11..12], &[0]); // pad to 8 for the f64s
        assert_eq!(&b[12..20], &1.0f64.to_le_bytes());
        assert_eq!(&b[20..28], &2.0f64.to_le_bytes());
        assert_eq!(&b[28..], &[0, 0, 0, 0]);
    }

    #[test]
    fn appending_aligns_from_the_message_start() {
        let mut fresh = CdrWriter::new();
        fresh.u8(1).f64(2.0).string("x");
        let fresh = fresh.finish();

        let mut buf = vec![0xEE; 3]; // bytes already there, odd length
        let mut w = CdrWriter::append_to(&mut buf);
        w.u8(1).f64(2.0).string("x");
        assert_eq!(w.finish(), fresh.len());
        assert_eq!(&buf[..3], &[0xEE; 3]);
        assert_eq!(&buf[3..], &fresh[..]);
    }

    #[test]
    fn time_from_nanoseconds() {
        let t = Time::from(1_700_000_000_123_456_789);
        assert_eq!(
            t,
            Time {
                sec: 1_700_000_000,
                nanosec: 123_456_789
            }
        );
        assert_eq!(Time::from(0), Time::default());
        let late = Time::from(u64::MAX);
        assert_eq!(late.sec, i32::MAX);
        assert!(late.nanosec < 1_000_000_000);
    }

    fn imu_with(frame_id: &str) -> Vec<u8> {
        let cov = [[0.5; 9], [0.25; 9], [0.125; 9]];
        msg::imu(
            Time { sec: 1, nanosec: 2 },
            frame_id,
            [0.0, 0.0, 0.0, 1.0],
            [0.1, 0.2, 0.3],
            [0.0, 0.0, 9.81],
            cov,
        )
    }

    #[test]
    fn imu_layout() {
        // 4 header + 8 stamp + 4 length + "imu\0" = 16 after the header, already
        // 8-aligned; then 4+9+3+9+3+9 f64 = 296 bytes.
        let b = imu_with("imu");
        assert_eq!(b.len(), 4 + 16 + 296);
        assert_eq!(&b[4..8], &1i32.to_le_bytes());
        assert_eq!(&b[8..12], &2u32.to_le_bytes());
        assert_eq!(&b[12..20], &[4, 0, 0, 0, b'i', b'm', b'u', 0]);
        assert_eq!(&b[44..52], &1.0f64.to_le_bytes()); // orientation.w
        assert_eq!(&b[52..60], &0.5f64.to_le_bytes()); // orientation_covariance[0]
        assert_eq!(&b[b.len() - 8..], &0.125f64.to_le_bytes());
        // "imu_link\0" ends at 21: three pad bytes before the quaternion.
        let b = imu_with("imu_link");
        assert_eq!(b.len(), 4 + 24 + 296);
        assert_eq!(&b[25..28], &[0, 0, 0]);
        for len in 0..16 {
            let frame = "f".repeat(len);
            let after_header = 12 + len + 1;
            assert_eq!(
                imu_with(&frame).len(),
                4 + after_header.next_multiple_of(8) + 296
            );
        }
    }

    #[test]
    fn into_variants_match_and_reuse_the_buffer() {
        let mut buf = Vec::with_capacity(4096);
        let ptr = buf.as_ptr();
        let n = msg::imu_into(
            &mut buf,
            Time { sec: 1, nanosec: 2 },
            "imu",
            [0.0, 0.0, 0.0, 1.0],
            [0.1, 0.2, 0.3],
            [0.0, 0.0, 9.81],
            [[0.5; 9], [0.25; 9], [0.125; 9]],
        );
        assert_eq!(n, buf.len());
        assert_eq!(buf, imu_with("imu"));
        buf.clear();
        msg::string_into(&mut buf, "again");
        assert_eq!(buf, msg::string("again"));
        assert_eq!(buf.as_ptr(), ptr, "no reallocation");
    }

    #[test]
    fn image_in_place_matches_copy() {
        let data: Vec<u8> = (0..4 * 6 * 3).map(|i| i as u8).collect();
        let stamp = Time::from(5_000_000_123);
        let copied = msg::image(stamp, "cam", 4, 6, "rgb8", 0, 18, &data);
        let mut buf = Vec::new();
        let n = msg::image_into(
            &mut buf,
            stamp,
            "cam",
            4,
            6,
            "rgb8",
            0,
            18,
            data.len(),
            |px| {
                for (i, p) in px.iter_mut().enumerate() {
                    *p = i as u8;
                }
            },
        );
        assert_eq!(n, copied.len());
        assert_eq!(buf, copied);
        // Header 4 + stamp 8 + "cam" 8 + height/width 8 + "rgb8" 9 + u8 1,
        // pad to 4 (2), step 4, count 4, then the pixels.
        assert_eq!(copied.len(), 4 + 8 + 8 + 8 + 9 + 1 + 2 + 4 + 4 + data.len());
        assert_eq!(&copied[copied.len() - data.len()..], &data[..]);
    }

    #[test]
    fn point_cloud_in_place_matches_copy() {
        let fields = [
            PointFieldSpec {
                name: "x",
                offset: 0,
                datatype: PointFieldSpec::FLOAT32,
                count: 1,
            },
            PointFieldSpec {
                name: "intensity",
                offset: 4,
                datatype: PointFieldSpec::UINT8,
                count: 1,
            },
        ];
        let data = [1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        let stamp = Time { sec: 3, nanosec: 4 };
        let copied = msg::point_cloud2(stamp, "lidar", 1, 2, &fields, false, 5, 10, &data, true);
        let mut buf = vec![1, 2, 3];
        let n = msg::point_cloud2_into(
            &mut buf,
            stamp,
            "lidar",
            1,
            2,
            &fields,
            false,
            5,
            10,
            data.len(),
            |d| d.copy_from_slice(&data),
            true,
        );
        assert_eq!(&buf[3..], &copied[..]);
        assert_eq!(n, copied.len());
        assert_eq!(copied.last(), Some(&1)); // is_dense
    }

    #[test]
    fn diagnostic_array_and_video_layouts() {
        let s = [DiagnosticStatusSpec {
            level: 1,
            name: "n",
            message: "",
            hardware_id: "hw",
            values: &[("k", "v")],
        }];
        let b = msg::diagnostic_array(Time { sec: 0, nanosec: 0 }, &s);
        #[rustfmt::skip]
        let expected: Vec<u8> = [
            &H[..],
            &[0; 8], &[1, 0, 0, 0, 0],              // stamp, frame_id ""
            &[0, 0, 0], &[1, 0, 0, 0],              // pad, status count
            &[1], &[0, 0, 0], &[2, 0, 0, 0, b'n', 0], // level, pad, name
            &[0, 0], &[1, 0, 0, 0, 0],              // pad, message ""
            &[0, 0, 0], &[3, 0, 0, 0, b'h', b'w', 0], // pad, hardware_id
            &[0], &[1, 0, 0, 0],                    // pad, value count
            &[2, 0, 0, 0, b'k', 0], &[0, 0], &[2, 0, 0, 0, b'v', 0],
        ]
        .concat();
        assert_eq!(b, expected);

        let v = msg::compressed_video(Time { sec: 1, nanosec: 0 }, "", &[0, 0, 0, 1], "h265");
        #[rustfmt::skip]
        let expected: Vec<u8> = [
            &H[..],
            &[1, 0, 0, 0, 0, 0, 0, 0], &[1, 0, 0, 0, 0], &[0, 0, 0],
            &[4, 0, 0, 0, 0, 0, 0, 1], &[5, 0, 0, 0], b"h265", &[0],
        ]
        .concat();
        assert_eq!(v, expected);
    }
}
