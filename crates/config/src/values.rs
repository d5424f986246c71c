//! The values a key can take that are more than a number, a size, a
//! duration or a string: the enums with their TOML spellings, a synthetic
//! channel's rate and its injected fault. A battery channel's voltage
//! profile has a grammar of its own, in `voltage.rs`.

use std::fmt;
use std::time::Duration;

use crate::units::Time;

/// The recording clock; TOML `"realtime"`, `"tai"` or `"phc"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClockSourceKind {
    /// CLOCK_REALTIME, which phc2sys disciplines on the appliance.
    #[default]
    Realtime,
    /// CLOCK_TAI: realtime plus the kernel's TAI offset.
    Tai,
    /// The PTP hardware clock named by `clock.phc`, read directly.
    Phc,
}

impl ClockSourceKind {
    /// Every source, in the order the TOML spellings are listed.
    pub const ALL: [ClockSourceKind; 3] = [
        ClockSourceKind::Realtime,
        ClockSourceKind::Tai,
        ClockSourceKind::Phc,
    ];

    /// The TOML spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            ClockSourceKind::Realtime => "realtime",
            ClockSourceKind::Tai => "tai",
            ClockSourceKind::Phc => "phc",
        }
    }
}

/// ROS 2 distribution; TOML `"humble"` or `"jazzy"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum RosDistro {
    /// Humble Hawksbill (Ubuntu 22.04, JetPack 6).
    #[default]
    Humble,
    /// Jazzy Jalisco (Ubuntu 24.04).
    Jazzy,
}

impl RosDistro {
    /// Every distribution, in the order the TOML spellings are listed.
    pub const ALL: [RosDistro; 2] = [RosDistro::Humble, RosDistro::Jazzy];

    /// The TOML spelling, also the name ROS 2 uses: `"humble"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            RosDistro::Humble => "humble",
            RosDistro::Jazzy => "jazzy",
        }
    }
}

impl fmt::Display for RosDistro {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Kernel interface for writing segments; TOML `"auto"`, `"io_uring"`,
/// `"pwrite_direct"` or `"buffered"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StorageBackend {
    /// The fastest the kernel and file system offer, probed at start.
    #[default]
    Auto,
    /// io_uring with O_DIRECT.
    IoUring,
    /// pwrite(2) with O_DIRECT.
    PwriteDirect,
    /// pwrite(2) through the page cache.
    Buffered,
}

impl StorageBackend {
    /// Every backend, in the order the TOML spellings are listed.
    pub const ALL: [StorageBackend; 4] = [
        StorageBackend::Auto,
        StorageBackend::IoUring,
        StorageBackend::PwriteDirect,
        StorageBackend::Buffered,
    ];

    /// The TOML spelling: `"io_uring"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            StorageBackend::Auto => "auto",
            StorageBackend::IoUring => "io_uring",
            StorageBackend::PwriteDirect => "pwrite_direct",
            StorageBackend::Buffered => "buffered",
        }
    }
}

impl fmt::Display for StorageBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Chunk compression; TOML `"none"`, `"lz4"` or `"zstd"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Compression {
    /// Chunks stored as they are.
    #[default]
    None,
    /// LZ4 frames: fast, modest ratio.
    Lz4,
    /// Zstandard at [`McapConfig::compression_level`](crate::McapConfig::compression_level).
    Zstd,
}

impl Compression {
    /// Every compression, in the order the TOML spellings are listed.
    pub const ALL: [Compression; 3] = [Compression::None, Compression::Lz4, Compression::Zstd];

    /// The TOML spelling, also MCAP's name for it except for none (MCAP
    /// writes an empty string): `"zstd"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Message type of a synthetic channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyntheticKind {
    /// `sensor_msgs/msg/Imu`.
    Imu,
    /// `sensor_msgs/msg/PointCloud2`.
    PointCloud2,
    /// `sensor_msgs/msg/Image`.
    Image,
    /// `std_msgs/msg/String`.
    String,
    /// `sensor_msgs/msg/BatteryState`, its voltage following the channel's
    /// `voltage` profile.
    BatteryState,
}

impl SyntheticKind {
    /// Every kind, in the order the TOML spellings are listed.
    pub const ALL: [SyntheticKind; 5] = [
        SyntheticKind::Imu,
        SyntheticKind::PointCloud2,
        SyntheticKind::Image,
        SyntheticKind::String,
        SyntheticKind::BatteryState,
    ];

    /// The full ROS 2 type name, also the TOML spelling:
    /// `"sensor_msgs/msg/Imu"`.
    pub fn ros_type(&self) -> &'static str {
        match self {
            SyntheticKind::Imu => "sensor_msgs/msg/Imu",
            SyntheticKind::PointCloud2 => "sensor_msgs/msg/PointCloud2",
            SyntheticKind::Image => "sensor_msgs/msg/Image",
            SyntheticKind::String => "std_msgs/msg/String",
            SyntheticKind::BatteryState => "sensor_msgs/msg/BatteryState",
        }
    }
}

impl fmt::Display for SyntheticKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.ros_type())
    }
}

/// Messages per second of a synthetic channel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// This many messages per second; more than 0, at most 10 000 000.
    Hz(f64),
    /// As fast as the pipeline accepts them: for measuring throughput.
    Max,
}

impl Rate {
    /// Time between two messages; `None` for [`Rate::Max`].
    pub fn period(&self) -> Option<Duration> {
        match self {
            Rate::Hz(hz) => Some(Duration::from_secs_f64(1.0 / hz)),
            Rate::Max => None,
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rate::Hz(hz) => write!(f, "{hz} Hz"),
            Rate::Max => f.write_str("max"),
        }
    }
}

/// Fault injection for a synthetic source (`sources.synthetic[].fault`).
///
/// TOML `"panic-every:DURATION"`, `"error-every:DURATION"` or
/// `"stall-for:DURATION"`, the duration more than zero, or
/// `"malformed-every:N"`, N a whole number of messages from 1. Times count
/// the source's running time, not the wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceFault {
    /// The source panics every this long of running.
    PanicEvery(Duration),
    /// The source returns an error every this long of running.
    ErrorEvery(Duration),
    /// After 1 s of running the source stops producing and stops reporting
    /// liveness for this long.
    StallFor(Duration),
    /// Every Nth message the source makes (counting from 1, across
    /// restarts) is cut short to its 4-byte encapsulation header, so that a
    /// decoder must reject it; its sequence number is consumed like any
    /// other's.
    MalformedEvery(u64),
}

impl SourceFault {
    /// The TOML spellings before the `:`, in the order they are listed.
    pub const KINDS: [&'static str; 4] =
        ["panic-every", "error-every", "stall-for", "malformed-every"];

    /// The TOML spelling before the `:`: `"panic-every"`.
    pub fn kind(&self) -> &'static str {
        match self {
            SourceFault::PanicEvery(_) => "panic-every",
            SourceFault::ErrorEvery(_) => "error-every",
            SourceFault::StallFor(_) => "stall-for",
            SourceFault::MalformedEvery(_) => "malformed-every",
        }
    }

    /// The duration after the `:`; `None` for
    /// [`MalformedEvery`](SourceFault::MalformedEvery), which counts
    /// messages instead.
    pub fn duration(&self) -> Option<Duration> {
        match self {
            SourceFault::PanicEvery(d) | SourceFault::ErrorEvery(d) | SourceFault::StallFor(d) => {
                Some(*d)
            }
            SourceFault::MalformedEvery(_) => None,
        }
    }

    /// Whether the fault strikes at a time in the run (panic, error,
    /// stall) rather than at a message count.
    pub fn is_timed(&self) -> bool {
        self.duration().is_some()
    }
}

impl fmt::Display for SourceFault {
    /// The TOML spelling: `panic-every:2s`, `malformed-every:10`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self, self.duration()) {
            (SourceFault::MalformedEvery(n), _) => write!(f, "{}:{n}", self.kind()),
            (_, Some(d)) => write!(f, "{}:{}", self.kind(), Time(d)),
            (_, None) => f.write_str(self.kind()),
        }
    }
}

/// Health state names `[leds.states]` accepts.
pub const HEALTH_STATES: [&str; 7] = [
    "booting",
    "idle",
    "recording",
    "degraded",
    "fault",
    "disk-full",
    "paused",
];

/// Where a camera's pictures come from (`camera[].source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CameraSourceKind {
    /// `videotestsrc`: a generated pattern, for the demo and CI.
    Test,
    /// A V4L2 device (`v4l2src`): USB and most MIPI cameras.
    V4l2,
    /// A Jetson CSI camera through libargus (`nvarguscamerasrc`).
    Argus,
    /// An RTSP stream, decoded and encoded again.
    Rtsp,
    /// A ROS 2 `sensor_msgs/msg/Image` topic, transcoded.
    Topic,
    /// A gst-launch source description, for anything else.
    Pipeline,
}

impl CameraSourceKind {
    /// Every kind, in the order the TOML spellings are listed.
    pub const ALL: [CameraSourceKind; 6] = [
        CameraSourceKind::Test,
        CameraSourceKind::V4l2,
        CameraSourceKind::Argus,
        CameraSourceKind::Rtsp,
        CameraSourceKind::Topic,
        CameraSourceKind::Pipeline,
    ];

    /// The TOML spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            CameraSourceKind::Test => "test",
            CameraSourceKind::V4l2 => "v4l2",
            CameraSourceKind::Argus => "argus",
            CameraSourceKind::Rtsp => "rtsp",
            CameraSourceKind::Topic => "topic",
            CameraSourceKind::Pipeline => "pipeline",
        }
    }
}

/// Which H.265 encoder a camera uses (`camera[].encoder`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncoderChoice {
    /// The first of nvv4l2h265enc, nvh265enc and x265enc that GStreamer has.
    Auto,
    /// Jetson NVENC through V4L2 (`nvv4l2h265enc`).
    NvV4l2H265Enc,
    /// Desktop NVIDIA NVENC (`nvh265enc`).
    NvH265Enc,
    /// Software, libx265 (`x265enc`).
    X265Enc,
}

impl EncoderChoice {
    /// Every choice, in the order the TOML spellings are listed.
    pub const ALL: [EncoderChoice; 4] = [
        EncoderChoice::Auto,
        EncoderChoice::NvV4l2H265Enc,
        EncoderChoice::NvH265Enc,
        EncoderChoice::X265Enc,
    ];

    /// The TOML spelling (the element's name but for `auto`).
    pub fn as_str(&self) -> &'static str {
        match self {
            EncoderChoice::Auto => "auto",
            EncoderChoice::NvV4l2H265Enc => "nvv4l2h265enc",
            EncoderChoice::NvH265Enc => "nvh265enc",
            EncoderChoice::X265Enc => "x265enc",
        }
    }
}

/// Rate control of a camera's encoder (`camera[].rate_control`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateControl {
    /// Constant bitrate.
    Cbr,
    /// Variable bitrate around the target.
    Vbr,
}

impl RateControl {
    /// Both, in the order the TOML spellings are listed.
    pub const ALL: [RateControl; 2] = [RateControl::Cbr, RateControl::Vbr];

    /// The TOML spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            RateControl::Cbr => "cbr",
            RateControl::Vbr => "vbr",
        }
    }
}

/// What a recording writes (`recording.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordingMode {
    /// Every channel, all the time (the default).
    Continuous,
    /// Only event clips: every channel is kept in the pre-roll ring and
    /// written around events.
    Triggered,
    /// `recording.continuous_topics` all the time, every other channel
    /// only in event clips.
    Mixed,
}

impl RecordingMode {
    /// Every mode, in the order the TOML spellings are listed.
    pub const ALL: [RecordingMode; 3] = [
        RecordingMode::Continuous,
        RecordingMode::Triggered,
        RecordingMode::Mixed,
    ];

    /// The TOML spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            RecordingMode::Continuous => "continuous",
            RecordingMode::Triggered => "triggered",
            RecordingMode::Mixed => "mixed",
        }
    }
}

/// A string value together with where its text starts in the file, so
/// that a later check of its contents (a trigger's `when`, parsed and
/// checked against the topic's type once that is known) can name the line
/// and column of the very character it is about.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Located {
    /// The text, as read.
    pub text: String,
    /// The file.
    pub path: std::path::PathBuf,
    /// The dotted key (`trigger[0].when`).
    pub key: String,
    /// 1-based line of the text's first character.
    pub line: usize,
    /// 1-based column of the text's first character (after the quote).
    pub column: usize,
}

impl Located {
    /// An error about the character at 1-based `column` of the text.
    pub fn error_at(
        &self,
        column: usize,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> crate::ConfigError {
        crate::ConfigError {
            path: self.path.clone(),
            line: Some(self.line),
            column: Some(self.column + column.saturating_sub(1)),
            key: Some(self.key.clone()),
            message: message.into(),
            hint,
        }
    }
}

/// How an object store's URLs name the bucket (`offload.addressing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addressing {
    /// `endpoint/bucket/key`.
    Path,
    /// `bucket.endpoint/key`.
    Virtual,
}

impl Addressing {
    /// Every way, in the order the TOML spellings are listed.
    pub const ALL: [Addressing; 2] = [Addressing::Path, Addressing::Virtual];

    /// The TOML spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            Addressing::Path => "path",
            Addressing::Virtual => "virtual",
        }
    }
}

/// What the running recorder sends to the store (`offload.upload`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadMode {
    /// Nothing: `edgerec upload` is run by hand.
    None,
    /// Every segment and event clip as it closes (event clips first,
    /// then the segments an event overlaps, then the rest), then each
    /// session's `metadata.yaml` and manifest.
    All,
    /// Event clips and the segments an event overlaps (or that were asked
    /// for); the rest stays on the vehicle.
    Events,
}

impl OffloadMode {
    /// Every mode, in the order the TOML spellings are listed.
    pub const ALL: [OffloadMode; 3] = [OffloadMode::None, OffloadMode::All, OffloadMode::Events];

    /// The TOML spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            OffloadMode::None => "none",
            OffloadMode::All => "all",
            OffloadMode::Events => "events",
        }
    }
}

/// Server-side encryption asked of the object store (`offload.sse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sse {
    /// None asked (the bucket's default applies).
    None,
    /// SSE-S3: the store's own keys (`AES256`).
    S3,
    /// SSE-KMS: a key of the store's key service (`aws:kms`).
    Kms,
}

impl Sse {
    /// Every choice, in the order the TOML spellings are listed.
    pub const ALL: [Sse; 3] = [Sse::None, Sse::S3, Sse::Kms];

    /// The TOML spelling, which is also the `x-amz-server-side-encryption`
    /// header's value.
    pub fn as_str(&self) -> &'static str {
        match self {
            Sse::None => "none",
            Sse::S3 => "AES256",
            Sse::Kms => "aws:kms",
        }
    }
}

/// A time of day when offload may send (`offload.windows`): from
/// `start` up to (not including) `end`, minutes after local midnight; a
/// window whose end is before its start spans midnight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindow {
    /// First minute, 0 to 1439.
    pub start: u16,
    /// The minute it ends, 0 to 1439.
    pub end: u16,
}

impl TimeWindow {
    /// Whether `minute` (after local midnight) is in it.
    pub fn contains(&self, minute: u16) -> bool {
        if self.start <= self.end {
            (self.start..self.end).contains(&minute)
        } else {
            minute >= self.start || minute < self.end
        }
    }

    /// `HH:MM-HH:MM`.
    pub fn text(&self) -> String {
        format!(
            "{:02}:{:02}-{:02}:{:02}",
            self.start / 60,
            self.start % 60,
            self.end / 60,
            self.end % 60
        )
    }
}

/// The edge of a GPIO line that fires a trigger (`trigger[].edge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpioEdge {
    /// Low to high.
    Rising,
    /// High to low.
    Falling,
    /// Either.
    Both,
}

impl GpioEdge {
    /// Every edge, in the order the TOML spellings are listed.
    pub const ALL: [GpioEdge; 3] = [GpioEdge::Rising, GpioEdge::Falling, GpioEdge::Both];

    /// The TOML spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            GpioEdge::Rising => "rising",
            GpioEdge::Falling => "falling",
            GpioEdge::Both => "both",
        }
    }
}

/// The health conditions a trigger can fire on (`trigger[].health`).
pub const HEALTH_CONDITIONS: [&str; 4] =
    ["clock-unlocked", "drops", "disk-low", "source-restarting"];
