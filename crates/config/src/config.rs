//! The validated configuration: plain data with every default filled in,
//! every value inside its documented range.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::units::Time;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// The whole configuration, one field per TOML table.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Config {
    /// `[recording]`: where sessions go and how they are named.
    pub recording: RecordingConfig,
    /// `[storage]`: how segment files reach the disk.
    pub storage: StorageConfig,
    /// `[mcap]`: how messages are grouped and compressed in a segment.
    pub mcap: McapConfig,
    /// `[pipeline]`: memory and threads between the sources and the disk.
    pub pipeline: PipelineConfig,
    /// `[sources]`: what is recorded besides ROS 2 topics.
    pub sources: SourcesConfig,
    /// `[segment]`: when a segment file is closed and the next one opened.
    pub segment: SegmentConfig,
    /// `[retention]`: how much of the disk recordings may use.
    pub retention: RetentionConfig,
    /// `[clock]`: the recording clock and how its quality is judged.
    pub clock: ClockConfig,
    /// `[health]`: watchdog, fault file, status socket and what the
    /// recording carries about the recorder itself.
    pub health: HealthConfig,
    /// `[metrics]`: where GPU, thermal, CPU and disk figures are read.
    pub metrics: MetricsConfig,
    /// `[leds]`: which LEDs show which health state.
    pub leds: LedsConfig,
}

/// `[clock]`: where log times come from and when the clock counts as
/// locked. Recording never waits for the clock; data recorded while it is
/// not locked is flagged in the recording.
#[derive(Debug, Clone, PartialEq)]
pub struct ClockConfig {
    /// Clock that stamps log times. Default realtime.
    pub source: ClockSourceKind,
    /// PTP hardware clock: a device path (`/dev/ptp0`) or a network
    /// interface name (`eth0`). Required when `source` is `phc`; with the
    /// other sources it is monitored (PHC-to-system offset). Empty = none.
    pub phc: String,
    /// ptp4l's management socket (`uds_address`); empty = do not query
    /// ptp4l. Default `/var/run/ptp4l`.
    pub ptp4l_socket: PathBuf,
    /// PTP domain of the ptp4l instance. Default 0.
    pub domain: u8,
    /// How often the clock's state is read; 100 ms to 60 s. Default 1 s.
    pub poll_interval: Duration,
    /// Largest |offset| that counts as locked; 1 ns to 1 s. Default 1 us.
    pub lock_threshold: Duration,
    /// How long the offset must stay below the threshold before the clock
    /// counts as locked; 0 to 1 h. Default 10 s.
    pub lock_time: Duration,
    /// How long after the grandmaster is lost the clock is in holdover
    /// before it counts as unlocked; 0 to 24 h. Default 60 s.
    pub holdover_max: Duration,
}

impl Default for ClockConfig {
    fn default() -> Self {
        ClockConfig {
            source: ClockSourceKind::Realtime,
            phc: String::new(),
            ptp4l_socket: PathBuf::from("/var/run/ptp4l"),
            domain: 0,
            poll_interval: Duration::from_secs(1),
            lock_threshold: Duration::from_micros(1),
            lock_time: Duration::from_secs(10),
            holdover_max: Duration::from_secs(60),
        }
    }
}

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

/// `[health]`.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthConfig {
    /// Hardware watchdog device; empty = none. Default `/dev/watchdog0`.
    pub watchdog: PathBuf,
    /// Watchdog timeout set by ioctl; 1 s to 10 min. Default 10 s.
    pub watchdog_timeout: Duration,
    /// How long a stage (storage, a source, the clock monitor, the control
    /// loop) may go without progress before it counts as stalled and the
    /// watchdogs stop being fed; 500 ms to 10 min, below the timeout.
    /// Default 5 s.
    pub stage_deadline: Duration,
    /// Where the stalled stage is written before the reset comes. Default
    /// `/data/edgerec/last-fault.json`.
    pub fault_file: PathBuf,
    /// Unix socket serving the status snapshot (`edgerec status`); empty =
    /// none. Default `/run/edgerec/status.sock`.
    pub status_socket: PathBuf,
    /// Write the status snapshot into the recording as `/edgerec/status`
    /// (std_msgs/String, JSON) at 1 Hz. Default true.
    pub record_status: bool,
    /// Write the clock's quality into the recording as `/edgerec/clock` at
    /// the clock's poll interval. Default true.
    pub record_clock: bool,
    /// Prometheus text endpoint (`127.0.0.1:9464`); empty = off (default).
    pub prometheus: String,
    /// Free space, in percent of the file system, below which the health
    /// is degraded ("disk low"); 0 to 90. Default 10.
    pub disk_low_percent: u8,
    /// Drops within this window make the health degraded; 1 s to 1 h.
    /// Default 10 s.
    pub drops_window: Duration,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            watchdog: PathBuf::from("/dev/watchdog0"),
            watchdog_timeout: Duration::from_secs(10),
            stage_deadline: Duration::from_secs(5),
            fault_file: PathBuf::from("/data/edgerec/last-fault.json"),
            status_socket: PathBuf::from("/run/edgerec/status.sock"),
            record_status: true,
            record_clock: true,
            prometheus: String::new(),
            disk_low_percent: 10,
            drops_window: Duration::from_secs(10),
        }
    }
}

/// `[metrics]`.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricsConfig {
    /// Ask NVML (libnvidia-ml.so.1) first; the Tegra sysfs answers where it
    /// does not. Default true.
    pub nvml: bool,
    /// Root of sysfs; tests point it at a fixture tree. Default `/sys`.
    pub sys_root: PathBuf,
    /// Root of procfs. Default `/proc`.
    pub proc_root: PathBuf,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            nvml: true,
            sys_root: PathBuf::from("/sys"),
            proc_root: PathBuf::from("/proc"),
        }
    }
}

/// `[leds]`: for each health state, the LEDs to set and how.
#[derive(Debug, Clone, PartialEq)]
pub struct LedsConfig {
    /// The LED class directory. Default `/sys/class/leds`.
    pub sysfs_root: PathBuf,
    /// `[leds.states]`: state name -> [(LED name, pattern)], in file
    /// order. Patterns: "off", "on", "blink", "blink-fast",
    /// "blink:ON_MS/OFF_MS". Empty by default: the board's configuration
    /// names its LEDs.
    pub states: Vec<(String, Vec<(String, String)>)>,
}

impl Default for LedsConfig {
    fn default() -> Self {
        LedsConfig {
            sysfs_root: PathBuf::from("/sys/class/leds"),
            states: Vec::new(),
        }
    }
}

/// Health state names `[leds.states]` accepts.
pub const HEALTH_STATES: [&str; 6] = [
    "booting",
    "idle",
    "recording",
    "degraded",
    "fault",
    "disk-full",
];

/// `[segment]`: a segment is split when any limit is reached.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentConfig {
    /// Bytes at which a segment is closed; 16 MiB to 1 TiB. Default 1 GiB.
    pub max_bytes: u64,
    /// Age (by log time) at which a segment is closed; 1 s to 24 h.
    /// Default 5 min.
    pub max_duration: Duration,
    /// Messages at which a segment is closed; 0 = no limit (default).
    pub max_messages: u64,
}

impl Default for SegmentConfig {
    fn default() -> Self {
        SegmentConfig {
            max_bytes: GIB,
            max_duration: Duration::from_secs(300),
            max_messages: 0,
        }
    }
}

/// `[retention]`: the oldest closed, unprotected segments are deleted
/// before a limit is crossed; when nothing can be deleted, recording pauses.
#[derive(Debug, Clone, PartialEq)]
pub struct RetentionConfig {
    /// Most bytes all sessions under the root may hold; 0 = no cap
    /// (default).
    pub max_total_bytes: u64,
    /// Free bytes to keep on the recordings' file system. Default 4 GiB.
    pub min_free_bytes: u64,
    /// Free space to keep, in percent of the file system; the larger of
    /// this and `min_free_bytes` applies. 0 to 50. Default 5.
    pub min_free_percent: u8,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            max_total_bytes: 0,
            min_free_bytes: 4 * GIB,
            min_free_percent: 5,
        }
    }
}

/// `[recording]`.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordingConfig {
    /// Directory that holds one rosbag2 bag directory per session.
    /// Default `/data/edgerec/recordings`.
    pub root: PathBuf,
    /// First part of each session's name; `[A-Za-z0-9_-]{1,64}`.
    /// Default `edgerec`.
    pub session_prefix: String,
    /// ROS 2 distribution written into the bag's metadata. Default Humble.
    pub ros_distro: RosDistro,
}

impl Default for RecordingConfig {
    fn default() -> Self {
        RecordingConfig {
            root: PathBuf::from("/data/edgerec/recordings"),
            session_prefix: "edgerec".to_owned(),
            ros_distro: RosDistro::Humble,
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

/// `[storage]`.
#[derive(Debug, Clone, PartialEq)]
pub struct StorageConfig {
    /// Kernel interface used to write. Default [`StorageBackend::Auto`].
    pub backend: StorageBackend,
    /// Bytes per write; a power of two from 4 KiB to 64 MiB. Default 1 MiB.
    pub block_size: u64,
    /// Writes in flight at once; 1 to 128. Default 8.
    pub queue_depth: u32,
    /// Longest time written data may wait before it is made durable;
    /// 10 ms to 60 s. Default 1 s.
    pub sync_interval: Duration,
    /// Bytes reserved ahead of the write position; 0 (off) or from
    /// `block_size` to 64 GiB. Default 256 MiB.
    pub preallocate: u64,
    /// SCHED_FIFO priority of the storage stage's threads (the sequencer
    /// that feeds the file and the I/O thread that owns the ring); 0 (off:
    /// normal scheduling) or 1 to 99. Default 0.
    pub realtime_priority: u8,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            backend: StorageBackend::Auto,
            block_size: MIB,
            queue_depth: 8,
            sync_interval: Duration::from_secs(1),
            preallocate: 256 * MIB,
            realtime_priority: 0,
        }
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

/// `[mcap]`.
#[derive(Debug, Clone, PartialEq)]
pub struct McapConfig {
    /// Uncompressed bytes at which a chunk is closed; 64 KiB to 256 MiB.
    /// Default 4 MiB.
    pub chunk_size: u64,
    /// Chunk compression. Default [`Compression::None`].
    pub compression: Compression,
    /// zstd level, 1 to 19; ignored by lz4 and none. Default 3.
    pub compression_level: i32,
    /// Age at which a chunk is closed even if not full; bounds the data not
    /// yet on disk. 10 ms to 10 s. Default 500 ms.
    pub chunk_max_age: Duration,
}

impl Default for McapConfig {
    fn default() -> Self {
        McapConfig {
            chunk_size: 4 * MIB,
            compression: Compression::None,
            compression_level: 3,
            chunk_max_age: Duration::from_millis(500),
        }
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
    /// Zstandard at [`McapConfig::compression_level`].
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

/// `[pipeline]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineConfig {
    /// Bytes all queued and in-flight messages and chunks may hold together;
    /// 16 MiB to 64 GiB and at least 4 × `mcap.chunk_size`. Default 256 MiB.
    pub memory_budget: u64,
    /// Compression threads; 0 means one per core. 0 to 64. Default 0.
    pub compressor_threads: usize,
    /// Messages each channel's queue holds; a power of two from 64 to
    /// 1048576. Default 16384.
    pub queue_capacity: usize,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            memory_budget: 256 * MIB,
            compressor_threads: 0,
            queue_capacity: 16384,
        }
    }
}

/// `[sources]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SourcesConfig {
    /// `[[sources.synthetic]]`: generated messages, for demos and for
    /// measuring the recorder without sensors. Default none.
    pub synthetic: Vec<SyntheticChannel>,
    /// The first restart delay after a source fails; 1 ms to 10 s.
    /// Default 100 ms.
    pub restart_backoff_min: Duration,
    /// The longest restart delay of a source that keeps failing; 100 ms to
    /// 1 h and at least `restart_backoff_min`. Default 30 s.
    pub restart_backoff_max: Duration,
}

impl Default for SourcesConfig {
    fn default() -> Self {
        SourcesConfig {
            synthetic: Vec::new(),
            restart_backoff_min: Duration::from_millis(100),
            restart_backoff_max: Duration::from_secs(30),
        }
    }
}

/// One `[[sources.synthetic]]` entry: a topic of generated messages.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticChannel {
    /// ROS 2 topic name, fully qualified (`/imu/data`); unique among the
    /// synthetic channels. Required.
    pub topic: String,
    /// Message type; TOML key `type`. Required.
    pub kind: SyntheticKind,
    /// Messages per second. Required.
    pub rate: Rate,
    /// Bytes in the message's data field (PointCloud2, Image, String); 0
    /// means the type's natural size; at most 64 MiB. Ignored for Imu, whose
    /// size is fixed. Default 0.
    pub payload_size: u64,
    /// `header.frame_id` of the generated messages. Default
    /// `edgerec_synthetic`.
    pub frame_id: String,
    /// Whether the topic is recorded with transient-local (latched) QoS.
    /// Default false.
    pub latched: bool,
    /// Fault injection, for tests and for checking an installation. Default
    /// none.
    pub fault: Option<SourceFault>,
}

impl SyntheticChannel {
    /// The `frame_id` used when the entry has none.
    pub const DEFAULT_FRAME_ID: &'static str = "edgerec_synthetic";

    /// A channel with the required fields given and every other field at
    /// its default. The topic is not checked here; [`Config::parse`]
    /// checks it.
    ///
    /// [`Config::parse`]: crate::Config::parse
    pub fn new(topic: impl Into<String>, kind: SyntheticKind, rate: Rate) -> Self {
        SyntheticChannel {
            topic: topic.into(),
            kind,
            rate,
            payload_size: 0,
            frame_id: Self::DEFAULT_FRAME_ID.to_owned(),
            latched: false,
            fault: None,
        }
    }
}

/// Fault injection for a synthetic source (`sources.synthetic[].fault`).
///
/// TOML `"panic-every:DURATION"`, `"error-every:DURATION"` or
/// `"stall-for:DURATION"`, the duration more than zero. Times count the
/// source's running time, not the wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceFault {
    /// The source panics every this long of running.
    PanicEvery(Duration),
    /// The source returns an error every this long of running.
    ErrorEvery(Duration),
    /// After 1 s of running the source stops producing and stops reporting
    /// liveness for this long.
    StallFor(Duration),
}

impl SourceFault {
    /// The TOML spellings before the `:`, in the order they are listed.
    pub const KINDS: [&'static str; 3] = ["panic-every", "error-every", "stall-for"];

    /// The TOML spelling before the `:`: `"panic-every"`.
    pub fn kind(&self) -> &'static str {
        match self {
            SourceFault::PanicEvery(_) => "panic-every",
            SourceFault::ErrorEvery(_) => "error-every",
            SourceFault::StallFor(_) => "stall-for",
        }
    }

    /// The duration after the `:`.
    pub fn duration(&self) -> Duration {
        match self {
            SourceFault::PanicEvery(d) | SourceFault::ErrorEvery(d) | SourceFault::StallFor(d) => {
                *d
            }
        }
    }
}

impl fmt::Display for SourceFault {
    /// The TOML spelling: `panic-every:2s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind(), Time(self.duration()))
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
}

impl SyntheticKind {
    /// Every kind, in the order the TOML spellings are listed.
    pub const ALL: [SyntheticKind; 4] = [
        SyntheticKind::Imu,
        SyntheticKind::PointCloud2,
        SyntheticKind::Image,
        SyntheticKind::String,
    ];

    /// The full ROS 2 type name, also the TOML spelling:
    /// `"sensor_msgs/msg/Imu"`.
    pub fn ros_type(&self) -> &'static str {
        match self {
            SyntheticKind::Imu => "sensor_msgs/msg/Imu",
            SyntheticKind::PointCloud2 => "sensor_msgs/msg/PointCloud2",
            SyntheticKind::Image => "sensor_msgs/msg/Image",
            SyntheticKind::String => "std_msgs/msg/String",
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

/// Limits the validation enforces; kept beside the defaults they bound.
pub(crate) mod limits {
    use super::{GIB, KIB, MIB};
    use std::time::Duration;

    pub const BLOCK_SIZE: (u64, u64) = (4 * KIB, 64 * MIB);
    pub const QUEUE_DEPTH: (i64, i64) = (1, 128);
    pub const REALTIME_PRIORITY: (i64, i64) = (0, 99);
    pub const SYNC_INTERVAL: (Duration, Duration) =
        (Duration::from_millis(10), Duration::from_secs(60));
    pub const PREALLOCATE_MAX: u64 = 64 * GIB;
    pub const CHUNK_SIZE: (u64, u64) = (64 * KIB, 256 * MIB);
    pub const ZSTD_LEVEL: (i64, i64) = (1, 19);
    pub const CHUNK_MAX_AGE: (Duration, Duration) =
        (Duration::from_millis(10), Duration::from_secs(10));
    pub const MEMORY_BUDGET: (u64, u64) = (16 * MIB, 64 * GIB);
    /// The chunker fills one chunk while the compressors hold others and the
    /// sequencer waits on the oldest; fewer than four chunks of budget
    /// stalls the pipeline on its own chunks.
    pub const CHUNKS_IN_BUDGET: u64 = 4;
    pub const COMPRESSOR_THREADS: (i64, i64) = (0, 64);
    pub const QUEUE_CAPACITY: (i64, i64) = (64, 1 << 20);
    pub const SESSION_PREFIX_MAX: usize = 64;
    pub const RATE_MAX_HZ: f64 = 10_000_000.0;
    pub const PAYLOAD_SIZE_MAX: u64 = 64 * MIB;
    pub const RESTART_BACKOFF_MIN: (Duration, Duration) =
        (Duration::from_millis(1), Duration::from_secs(10));
    pub const RESTART_BACKOFF_MAX: (Duration, Duration) =
        (Duration::from_millis(100), Duration::from_secs(3600));
    pub const SEGMENT_BYTES: (u64, u64) = (16 * MIB, 1 << 40);
    pub const SEGMENT_DURATION: (Duration, Duration) =
        (Duration::from_secs(1), Duration::from_secs(24 * 3600));
    pub const MIN_FREE_PERCENT: (i64, i64) = (0, 50);
    pub const POLL_INTERVAL: (Duration, Duration) =
        (Duration::from_millis(100), Duration::from_secs(60));
    pub const LOCK_THRESHOLD: (Duration, Duration) =
        (Duration::from_nanos(1), Duration::from_secs(1));
    pub const LOCK_TIME: (Duration, Duration) = (Duration::ZERO, Duration::from_secs(3600));
    pub const HOLDOVER_MAX: (Duration, Duration) = (Duration::ZERO, Duration::from_secs(24 * 3600));
    pub const WATCHDOG_TIMEOUT: (Duration, Duration) =
        (Duration::from_secs(1), Duration::from_secs(600));
    /// Stages beat at least every 100 ms (the control loop wakes that
    /// often); half a second leaves room for a loaded machine.
    pub const STAGE_DEADLINE: (Duration, Duration) =
        (Duration::from_millis(500), Duration::from_secs(600));
    pub const DISK_LOW_PERCENT: (i64, i64) = (0, 90);
    pub const DROPS_WINDOW: (Duration, Duration) =
        (Duration::from_secs(1), Duration::from_secs(3600));
    pub const LED_DELAY_MS: (u64, u64) = (1, 60_000);
}
