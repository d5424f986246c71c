//! The schema: every table of the configuration and every key in it, one
//! row per key giving its field, docs, default and the rule that reads and
//! checks it (see `schema.rs` for how a row is read). The structs, their
//! `Default`, the key lists behind "unknown key" hints and the reading of
//! each table are all made from these rows; `config/edgerec.toml` documents
//! the same keys, and a test below holds the two together.

use std::path::PathBuf;
use std::time::Duration;

use crate::bus::{self, CanConfig, UdpConfig};
use crate::checks;
use crate::offload;
use crate::readers;
use crate::remote;
use crate::schema::{
    array_of_tables, boolean, bytes, choice, duration, hours, int, mins, ms, non_empty_path, ns,
    path, power_of_two, power_of_two_size, read, secs, section, size, string, table, us, GIB, KIB,
    MIB, TIB,
};
use crate::values::{
    Addressing, CameraSourceKind, ClockSourceKind, Compression, EncoderChoice, GpioEdge, Located,
    OffloadMode, Rate, RateControl, RecordingMode, RosDistro, SourceFault, Sse, StorageBackend,
    SyntheticKind, TimeWindow,
};
use crate::voltage::VoltageProfile;

section! {
    /// The whole configuration, one field per TOML table.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Config with Default {
        /// `[recording]`: where sessions go and how they are named.
        recording: RecordingConfig = RecordingConfig::default(), table();
        /// `[storage]`: how segment files reach the disk.
        storage: StorageConfig = StorageConfig::default(), table();
        /// `[mcap]`: how messages are grouped and compressed in a segment.
        mcap: McapConfig = McapConfig::default(), table();
        /// `[pipeline]`: memory and threads between the sources and the disk.
        pipeline: PipelineConfig = PipelineConfig::default(), table(),
            then checks::memory_budget_holds_chunks;
        /// `[sources]`: what is recorded besides ROS 2 topics.
        sources: SourcesConfig = SourcesConfig::default(), table();
        /// `[ros]`: which ROS 2 topics are recorded from the graph.
        ros: RosConfig = RosConfig::default(), table();
        /// `[segment]`: when a segment file is closed and the next one opened.
        segment: SegmentConfig = SegmentConfig::default(), table();
        /// `[retention]`: how much of the disk recordings may use.
        retention: RetentionConfig = RetentionConfig::default(), table();
        /// `[clock]`: the recording clock and how its quality is judged.
        clock: ClockConfig = ClockConfig::default(), table();
        /// `[health]`: watchdog, fault file, status socket and what the
        /// recording carries about the recorder itself.
        health: HealthConfig = HealthConfig::default(), table();
        /// `[metrics]`: where GPU, thermal, CPU and disk figures are read.
        metrics: MetricsConfig = MetricsConfig::default(), table();
        /// `[leds]`: which LEDs show which health state.
        leds: LedsConfig = LedsConfig::default(), table();
        /// `[[camera]]`: cameras encoded to H.265 and recorded beside the
        /// topics. Default none.
        camera: Vec<CameraConfig> = Vec::new(), array_of_tables("camera", checks::unique_camera);
        /// `[[can]]`: SocketCAN interfaces recorded frame by frame. Default
        /// none.
        can: Vec<CanConfig> = Vec::new(), array_of_tables("interface", bus::unique_can);
        /// `[[udp]]`: UDP packet streams (lidar, radar) recorded packet by
        /// packet. Default none.
        udp: Vec<UdpConfig> = Vec::new(), array_of_tables("stream", bus::unique_udp),
            then bus::bus_topics_distinct;
        /// `[triggers]`: the pre-roll ring and the defaults of the rules.
        triggers: TriggersConfig = TriggersConfig::default(), table();
        /// `[[trigger]]`: rules that record an event clip. Default none.
        trigger: Vec<TriggerConfig> = Vec::new(), array_of_tables("rule", checks::unique_trigger),
            then checks::triggers_fit_the_mode;
        /// `[offload]`: where `edgerec upload` sends recordings.
        offload: OffloadConfig = OffloadConfig::default(), table();
        /// `[remote]`: the fleet link, MQTT over TLS to the fleet's broker.
        remote: RemoteConfig = RemoteConfig::default(), table();
    }
}

section! {
    /// `[remote]`: the fleet link. The vehicle connects out to the fleet's
    /// MQTT broker over TLS with its own certificate, keeps a retained
    /// status there and a last will that marks it offline.
    #[derive(Debug, Clone, PartialEq)]
    pub struct RemoteConfig with Default {
        /// The broker: `mqtts://HOST[:PORT]` (port 8883 when left out);
        /// empty = no link (default).
        broker: String = String::new(), read(remote::broker_url);
        /// PEM file of the CA certificates the broker's certificate must
        /// chain to; empty = the system's (default).
        ca_file: PathBuf = PathBuf::new(), path();
        /// PEM certificate this vehicle shows the broker (required with a
        /// broker: mutual TLS).
        cert_file: PathBuf = PathBuf::new(), path();
        /// The PEM private key of `cert_file`, readable by its owner only.
        key_file: PathBuf = PathBuf::new(), path();
        /// This vehicle's MQTT client id and name in topics: letters,
        /// digits, `.`, `_` and `-`; empty = `offload.vehicle_id`, else the
        /// host name (default).
        vehicle_id: String = String::new(), read(offload::vehicle_id);
        /// The topics' prefix; empty = `edgerec/<vehicle_id>` (default).
        topic_prefix: String = String::new(), read(remote::topic_prefix);
        /// MQTT keepalive: the broker publishes the last will when it hears
        /// nothing for 1.5 times this; 5 s to 20 min. Default 30 s. Also
        /// how long the link may be down before the health state says so.
        keepalive: Duration = secs(30), duration(secs(5)..=mins(20));
        /// The retained status is published when it changes, at most this
        /// often; 1 s to 1 h. Default 10 s.
        status_interval: Duration = secs(10), duration(secs(1)..=hours(1));
        /// Messages (alerts, log lines, replies) kept while the link is
        /// down; past it the oldest are dropped and counted; 16 to
        /// 100000. Default 1000.
        queue: u32 = 1000, int(16..=100_000);
        /// The commands this vehicle takes from the fleet (`trigger`,
        /// `pause`, `resume`, `split`, `status`, `list`); any other is
        /// refused, and audited. Default `["status", "list"]`: only asking.
        allow: Vec<String> = vec!["status".to_owned(), "list".to_owned()], read(remote::allowed_commands);
        /// Where the ids of the fleet's commands are journaled (made
        /// durable before each runs), so a command delivered twice, after a
        /// reconnect or a restart, runs once; empty = kept in memory only.
        /// Default `/data/edgerec/remote-commands.jsonl`.
        journal: PathBuf = PathBuf::from("/data/edgerec/remote-commands.jsonl"), path();
    }
    check remote::check;
}

section! {
    /// `[offload]`: the S3-compatible object store recordings are sent to
    /// (`edgerec upload`).
    #[derive(Debug, Clone, PartialEq)]
    pub struct OffloadConfig with Default {
        /// The store's URL (`https://s3.eu-central-1.amazonaws.com`,
        /// `https://minio.fleet.example:9000`); empty = no store (default).
        endpoint: String = String::new(), read(offload::offload_endpoint);
        /// The bucket: 3 to 63 lowercase letters, digits, `.` and `-`.
        bucket: String = String::new(), read(offload::bucket_name);
        /// The region signed into each request. Default `us-east-1`.
        region: String = "us-east-1".to_owned(), read(offload::region);
        /// `path` (`endpoint/bucket/key`: MinIO, Ceph, most servers) or
        /// `virtual` (`bucket.endpoint/key`: AWS). Default `path`.
        addressing: Addressing = Addressing::Path, choice(&Addressing::ALL, Addressing::as_str);
        /// Each file's object key: `{vehicle}`, `{session}` (the bag
        /// directory's name), `{file}` and `{date}` (the session's UTC
        /// date, `YYYY-MM-DD`); must hold `{file}`. Default
        /// `{vehicle}/{session}/{file}`.
        key_template: String = "{vehicle}/{session}/{file}".to_owned(), read(offload::key_template);
        /// This vehicle's name in keys: letters, digits, `.`, `_` and `-`;
        /// empty = the host name (default).
        vehicle_id: String = String::new(), read(offload::vehicle_id);
        /// The credentials, in the AWS shared-credentials format
        /// (`aws_access_key_id`, `aws_secret_access_key`, optionally
        /// `aws_session_token`), readable by its owner only; without it,
        /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` from the
        /// environment. Default `/data/edgerec/offload-credentials`.
        credentials_file: PathBuf = PathBuf::from("/data/edgerec/offload-credentials"), path();
        /// The profile (`[name]`) read from it. Default `default`.
        profile: String = "default".to_owned(), string();
        /// Files larger than this go in parts of this size (multipart);
        /// 5 MiB to 5 GiB. Default 16 MiB.
        part_size: u64 = 16 * MIB, size(5 * MIB..=5 * GIB);
        /// Parts sent at once; 1 to 64. Default 4.
        concurrency: u32 = 4, int(1..=64);
        /// Allow an `http://` endpoint (no TLS: the data and the signed
        /// requests cross the network in the clear). Default false.
        allow_http: bool = false, boolean();
        /// PEM file of the CA certificates the store's certificate must
        /// chain to; empty = the system's (default).
        ca_file: PathBuf = PathBuf::new(), path();
        /// PEM certificate this vehicle shows the store (a store that asks
        /// for client certificates, mutual TLS); empty = none (default).
        /// With `client_key`.
        client_cert: PathBuf = PathBuf::new(), path();
        /// The PEM private key of `client_cert`, readable by its owner
        /// only; empty = none (default).
        client_key: PathBuf = PathBuf::new(), path();
        /// Server-side encryption asked of the store for each object:
        /// `none` (the bucket's default), `AES256` (SSE-S3) or `aws:kms`
        /// (SSE-KMS, with `sse_kms_key_id`). Default `none`.
        sse: Sse = Sse::None, choice(&Sse::ALL, Sse::as_str);
        /// The KMS key (id or ARN) of `sse = "aws:kms"`; empty = the
        /// store's default KMS key (default).
        sse_kms_key_id: String = String::new(), read(offload::kms_key_id);
        /// What `edgerec run` sends while it records: `none` (default;
        /// `edgerec upload` by hand), `all` (every segment and event clip
        /// as it closes, clips first, then each session's `metadata.yaml`
        /// and manifest) or `events` (clips and the segments an event
        /// overlaps).
        upload: OffloadMode = OffloadMode::None, choice(&OffloadMode::ALL, OffloadMode::as_str);
        /// Bytes per second the uploads may send, all parts together,
        /// paced as they are written to the connection; 0 = no cap
        /// (default), else at least 8 KiB.
        max_rate: u64 = 0, read(offload::max_rate);
        /// Times of day (`"HH:MM-HH:MM"`, the vehicle's local time; one
        /// may span midnight) when `edgerec run` sends; empty = any time
        /// (default).
        windows: Vec<TimeWindow> = Vec::new(), read(offload::time_windows);
        /// Network interfaces `edgerec run` sends over: it sends only
        /// while the route to the store goes out through one of them
        /// (`["wlan0"]`: the depot's Wi-Fi); empty = any (default).
        interfaces: Vec<String> = Vec::new(), read(offload::interface_names);
        /// Metered interfaces (`["wwan0"]`): while the route to the store
        /// goes out through one, only event clips and the segments an
        /// event overlaps are sent. Default none.
        metered_interfaces: Vec<String> = Vec::new(), read(offload::interface_names);
        /// With `upload` on: delete a closed segment or event clip as soon
        /// as it is at the store (else it stays until retention needs the
        /// room, and goes before anything not sent). Default false.
        delete_after_upload: bool = false, boolean();
        /// With `upload` on: retention never deletes an event clip that is
        /// not at the store (a full disk pauses recording instead).
        /// Default true.
        keep_unsent_clips: bool = true, boolean();
        /// How long a stopping `edgerec run` lets the upload queue drain
        /// (then a failing request is no longer tried again; what is left
        /// is said, and `edgerec upload` sends it); 0 to 1 h. Default 30 s.
        drain_on_stop: Duration = secs(30), duration(secs(0)..=hours(1));
        /// Where multipart uploads in progress are journaled (upload id,
        /// each acknowledged part), so an upload cut by a crash or a power
        /// cut goes on where it stopped; empty = no journal (a cut upload
        /// starts over). Default `/data/edgerec/offload-journal`.
        journal_dir: PathBuf = PathBuf::from("/data/edgerec/offload-journal"), path();
    }
    check offload::check;
}

section! {
    /// `[recording]`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct RecordingConfig with Default {
        /// Directory that holds one rosbag2 bag directory per session.
        /// Default `/data/edgerec/recordings`.
        root: PathBuf = PathBuf::from("/data/edgerec/recordings"), non_empty_path();
        /// First part of each session's name; `[A-Za-z0-9_-]{1,64}`.
        /// Default `edgerec`.
        session_prefix: String = "edgerec".to_owned(), read(readers::session_prefix);
        /// ROS 2 distribution written into the bag's metadata. Default Humble.
        ros_distro: RosDistro = RosDistro::Humble, choice(&RosDistro::ALL, RosDistro::as_str);
        /// `continuous` (every channel, all the time; default), `triggered`
        /// (only event clips) or `mixed` (`continuous_topics` all the time,
        /// every other channel only in event clips).
        mode: RecordingMode = RecordingMode::Continuous,
            choice(&RecordingMode::ALL, RecordingMode::as_str);
        /// `mixed`: the topics recorded all the time. Default none.
        continuous_topics: Vec<String> = Vec::new(), read(readers::topic_list),
            then checks::mixed_has_continuous_topics;
    }
}

section! {
    /// `[triggers]`: what every rule shares.
    #[derive(Debug, Clone, PartialEq)]
    pub struct TriggersConfig with Default {
        /// Pre-roll a clip starts with, unless its rule sets its own; 0 to
        /// 10 min. Default 10 s.
        pre: Duration = secs(10), duration(secs(0)..=mins(10));
        /// Time a clip goes on after its event ends, unless its rule sets
        /// its own; 0 to 10 min. Default 10 s.
        post: Duration = secs(10), duration(secs(0)..=mins(10));
        /// Memory the pre-roll ring may hold (compressed); 1 MiB to 64 GiB.
        /// Default 512 MiB.
        memory_budget: u64 = 512 * MIB, size(MIB..=64 * GIB);
        /// Disk space the event clips may take together; a clip that would
        /// pass it ends there and new clips are refused until clips are
        /// offloaded or deleted (both counted in the status), so triggers
        /// never take the space the continuous recording needs. 16 MiB to
        /// 1 PiB. Default 16 GiB.
        disk_budget: u64 = 16 * GIB, size(16 * MIB..=1024 * 1024 * GIB);
        /// How long clips are kept from retention; 0 = forever (default).
        keep: Duration = secs(0), duration(secs(0)..=hours(24 * 3650));
        /// Time after an event ends before its rule may fire again, unless
        /// the rule sets its own; 0 to 24 h. Default 0.
        cooldown: Duration = secs(0), duration(secs(0)..=hours(24));
    }
}

section! {
    /// One `[[trigger]]`: a rule over one topic's messages that records an
    /// event clip.
    #[derive(Debug, Clone, PartialEq)]
    pub struct TriggerConfig {
        /// The rule's name: letters, digits, `_` and `-`; unique; it names
        /// the clips. Required.
        name: String = String::new(), read(readers::trigger_name),
            required "add name = \"low_battery\" (letters, digits, `_` and `-`)";
        /// The topic whose messages the rule reads; a rule reads a topic,
        /// or fires on `every`, `gpio` or `health` instead.
        topic: String = String::new(), read(readers::topic_or_empty);
        /// A condition over the message's fields (`voltage < 12.1`,
        /// `status[0].level >= 2 and not present`); empty = every message
        /// fires (default).
        when: Located = Located::default(), read(readers::located);
        /// A periodic sample: fire every this long (its clip is `pre` and
        /// `post` around each); 1 s to 24 h; unset = not periodic.
        every: Option<Duration> = None, read(readers::sample_period);
        /// A GPIO input line, `CHIP:LINE`: the chip as a name under /dev
        /// (`gpiochip0`) or a path, the line as its offset or its name
        /// (`gpiochip0:17`, `/dev/gpiochip2:BUTTON`); empty = none.
        gpio: String = String::new(), read(readers::gpio_line);
        /// `gpio`: the edge that fires: `rising`, `falling` or `both`.
        /// Default `rising`.
        edge: GpioEdge = GpioEdge::Rising, choice(&GpioEdge::ALL, GpioEdge::as_str);
        /// `gpio`: edges closer than this to the last one are ignored (a
        /// bouncing switch); 0 to 1 s. Default 50 ms.
        debounce: Duration = ms(50), duration(secs(0)..=secs(1));
        /// Health conditions that fire when they begin: `clock-unlocked`,
        /// `drops`, `disk-low`, `source-restarting`. Default none.
        health: Vec<String> = Vec::new(), read(readers::health_conditions);
        /// How long the condition must hold before the rule fires; 0 to 1
        /// h. Default 0.
        hold_for as "for": Duration = secs(0), duration(secs(0)..=hours(1));
        /// Pre-roll of its clips; unset = `triggers.pre`.
        pre: Option<Duration> = None, read(readers::clip_window);
        /// Time its clips go on after the event ends; unset =
        /// `triggers.post`.
        post: Option<Duration> = None, read(readers::clip_window);
        /// Time after an event ends before it may fire again; unset =
        /// `triggers.cooldown`.
        cooldown: Option<Duration> = None, read(readers::clip_window);
        /// What its clips record; empty = every channel the clips can hold
        /// (default).
        topics: Vec<String> = Vec::new(), read(readers::topic_list);
    }
    check checks::trigger_has_one_source;
}

impl TriggerConfig {
    /// Its pre-roll, with `triggers.pre` for an unset one.
    pub fn pre_or(&self, defaults: &TriggersConfig) -> Duration {
        self.pre.unwrap_or(defaults.pre)
    }

    /// Its post-trigger window, with `triggers.post` for an unset one.
    pub fn post_or(&self, defaults: &TriggersConfig) -> Duration {
        self.post.unwrap_or(defaults.post)
    }

    /// Its cooldown, with `triggers.cooldown` for an unset one.
    pub fn cooldown_or(&self, defaults: &TriggersConfig) -> Duration {
        self.cooldown.unwrap_or(defaults.cooldown)
    }
}

section! {
    /// `[storage]`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct StorageConfig with Default {
        /// Kernel interface used to write. Default [`StorageBackend::Auto`].
        backend: StorageBackend = StorageBackend::Auto,
            choice(&StorageBackend::ALL, StorageBackend::as_str);
        /// Bytes per write; a power of two from 4 KiB to 64 MiB. Default 1 MiB.
        block_size: u64 = MIB, power_of_two_size(4 * KIB..=64 * MIB);
        /// Writes in flight at once; 1 to 128. Default 8.
        queue_depth: u32 = 8, int(1..=128);
        /// Longest time written data may wait before it is made durable;
        /// 10 ms to 60 s. Default 1 s.
        sync_interval: Duration = secs(1), duration(ms(10)..=secs(60));
        /// Bytes reserved ahead of the write position; 0 (off) or from
        /// `block_size` to 64 GiB. Default 256 MiB.
        preallocate: u64 = 256 * MIB, readers::preallocate(64 * GIB);
        /// SCHED_FIFO priority of the storage stage's threads (the sequencer
        /// that feeds the file and the I/O thread that owns the ring); 0 (off:
        /// normal scheduling) or 1 to 99. Default 0.
        realtime_priority: u8 = 0, int(0..=99);
    }
}

section! {
    /// `[mcap]`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct McapConfig with Default {
        /// Uncompressed bytes at which a chunk is closed; 64 KiB to 256 MiB.
        /// Default 4 MiB.
        chunk_size: u64 = 4 * MIB, size(64 * KIB..=256 * MIB);
        /// Chunk compression. Default [`Compression::None`].
        compression: Compression = Compression::None,
            choice(&Compression::ALL, Compression::as_str);
        /// zstd level, 1 to 19; ignored by lz4 and none. Default 3.
        compression_level: i32 = 3, readers::zstd_level(1..=19);
        /// Age at which a chunk is closed even if not full; bounds the data not
        /// yet on disk. 10 ms to 10 s. Default 500 ms.
        chunk_max_age: Duration = ms(500), duration(ms(10)..=secs(10));
    }
}

section! {
    /// `[pipeline]`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct PipelineConfig with Default {
        /// Bytes all queued and in-flight messages and chunks may hold together;
        /// 16 MiB to 64 GiB and at least 4 × `mcap.chunk_size`. Default 256 MiB.
        memory_budget: u64 = 256 * MIB, size(16 * MIB..=64 * GIB);
        /// Compression threads; 0 means one per core. 0 to 64. Default 0.
        compressor_threads: usize = 0, int(0..=64);
        /// Messages each channel's queue holds; a power of two from 64 to
        /// 1048576. Default 16384.
        queue_capacity: usize = 16384, power_of_two(64..=1 << 20);
    }
}

section! {
    /// `[sources]`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct SourcesConfig with Default {
        /// The first restart delay after a source fails; 1 ms to 10 s.
        /// Default 100 ms.
        restart_backoff_min: Duration = ms(100), duration(ms(1)..=secs(10));
        /// The longest restart delay of a source that keeps failing; 100 ms to
        /// 1 h and at least `restart_backoff_min`. Default 30 s.
        restart_backoff_max: Duration = secs(30), duration(ms(100)..=hours(1)),
            then checks::restart_backoff_in_order;
        /// `[[sources.synthetic]]`: generated messages, for demos and for
        /// measuring the recorder without sensors. Default none.
        synthetic: Vec<SyntheticChannel> = Vec::new(),
            array_of_tables("channel", checks::unique_topic);
    }
}

// A required key's default only fills the struct until the key is read.
section! {
    /// One `[[sources.synthetic]]` entry: a topic of generated messages.
    #[derive(Debug, Clone, PartialEq)]
    pub struct SyntheticChannel {
        /// ROS 2 topic name, fully qualified (`/imu/data`); unique among the
        /// synthetic channels. Required.
        topic: String = String::new(), read(readers::topic),
            required "add topic = \"/name\", a fully qualified ROS 2 topic name";
        /// Message type; TOML key `type`. Required.
        kind as "type": SyntheticKind = SyntheticKind::Imu,
            choice(&SyntheticKind::ALL, SyntheticKind::ros_type),
            required format!(
                "add type = \"{}\" (types: {})",
                SyntheticKind::Imu.ros_type(),
                SyntheticKind::ALL.map(|kind| kind.ros_type()).join(", ")
            );
        /// Messages per second. Required.
        rate: Rate = Rate::Max, readers::rate(10_000_000.0),
            required "add rate = 10 (in Hz) or rate = \"max\"";
        /// Bytes in the message's data field (PointCloud2, Image, String); 0
        /// means the type's natural size; at most 64 MiB. Ignored for Imu, whose
        /// size is fixed. Default 0.
        payload_size: u64 = 0, size(0..=64 * MIB);
        /// `header.frame_id` of the generated messages. Default
        /// `edgerec_synthetic`.
        frame_id: String = SyntheticChannel::DEFAULT_FRAME_ID.to_owned(), string();
        /// Whether the topic is recorded with transient-local (latched) QoS.
        /// Default false.
        latched: bool = false, boolean();
        /// Fault injection, for tests and for checking an installation. Default
        /// none.
        fault: Option<SourceFault> = None, read(readers::fault);
        /// `sensor_msgs/msg/BatteryState`: the voltage over the time since
        /// the source's first message, `"12.6, 11.8@3s, 12.6@6s"` (see
        /// [`VoltageProfile`]). Ignored by the other types. Default a
        /// constant 12.6 V.
        voltage: VoltageProfile = VoltageProfile::default(), read(readers::voltage);
    }
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
            ..Self::seed()
        }
    }
}

section! {
    /// `[ros]`: live ROS 2 topics, selected the way `ros2 bag record`
    /// selects them (`edgerec record` takes the same choices as flags).
    #[derive(Debug, Clone, PartialEq)]
    pub struct RosConfig with Default {
        /// Record ROS 2 topics. Default false (`edgerec record` turns it on).
        enabled: bool = false, boolean();
        /// Every topic (`-a`). Default false.
        all: bool = false, boolean();
        /// These topics (positional arguments of `ros2 bag record`); a
        /// relative name is resolved in `namespace`. Default none.
        topics: Vec<String> = Vec::new(), read(readers::string_list);
        /// Topics whose whole name matches this regular expression (`-e`);
        /// empty = none (default).
        regex: String = String::new(), read(readers::regex);
        /// Leave out topics whose whole name matches (`-x`,
        /// `--exclude-regex`); empty = none (default).
        exclude: String = String::new(), read(readers::regex);
        /// Leave out topics of these types (`pkg/msg/Type`). Default none.
        exclude_types: Vec<String> = Vec::new(), read(readers::string_list);
        /// Record hidden topics (a name part starting with `_`) too.
        /// Default false.
        include_hidden: bool = false, boolean();
        /// How often the graph is looked at for new publishers
        /// (`-p/--polling-interval`); 10 ms to 60 s. Default 100 ms.
        discovery_interval: Duration = ms(100), duration(ms(10)..=secs(60));
        /// The most topics recorded from the graph, 1 to 10000 (each is a
        /// channel, a DDS reader and its queue); a publisher of another
        /// topic past it is refused and counted. Default 1000.
        max_topics: usize = 1000, int(1..=10_000);
        /// ROS domain; -1 = `ROS_DOMAIN_ID` from the environment, else 0
        /// (default); 0 to 232 otherwise.
        domain_id: i64 = -1, int(-1..=232);
        /// Serve rosbag2's recorder services (`~/pause`, `~/resume`,
        /// `~/is_paused`, `~/split_bagfile`) and `~/trigger` on the
        /// domain. Off by default: every participant on the domain can
        /// call them, and DDS says only which writer called (its GUID,
        /// which the log and the rate limit use), not who is behind it;
        /// the control socket checks the user. Default false.
        services: bool = false, boolean();
        /// The recorder's node name. Default `edgerec`.
        node_name: String = "edgerec".to_owned(), read(readers::node_name);
        /// The node's namespace. Default `/`.
        namespace: String = "/".to_owned(), read(readers::namespace);
        /// Directories laid out as an ament `share` directory
        /// (`<dir>/<pkg>/msg/<Type>.msg`, e.g. `/opt/ros/humble/share`),
        /// searched for message definitions before the embedded set.
        /// Default none.
        msg_paths: Vec<PathBuf> = Vec::new(), read(readers::path_list);
        /// rosbag2's QoS override file (`--qos-profile-overrides-path`);
        /// empty = none (default).
        qos_overrides_path: PathBuf = PathBuf::new(), path();
        /// `[[ros.qos]]`: per-topic QoS, applied after the override file.
        /// Default none.
        qos: Vec<RosQos> = Vec::new(), array_of_tables("topic", checks::unique_ros_qos_topic);
    }
}

section! {
    /// One `[[ros.qos]]` entry: the QoS to record a topic with, in place of
    /// the one adapted to its publishers.
    #[derive(Debug, Clone, PartialEq)]
    pub struct RosQos {
        /// The topic, fully qualified. Required.
        topic: String = String::new(), read(readers::topic),
            required "add topic = \"/name\", a fully qualified ROS 2 topic name";
        /// `reliable`, `best_effort` or `system_default` (default).
        reliability: String = "system_default".to_owned(),
            read(readers::qos_reliability);
        /// `volatile`, `transient_local` or `system_default` (default).
        durability: String = "system_default".to_owned(),
            read(readers::qos_durability);
        /// `keep_last` (default), `keep_all` or `system_default`.
        history: String = "keep_last".to_owned(), read(readers::qos_history);
        /// The reader's depth; 0 = edgerec's default (100). Default 0.
        depth: u32 = 0, int(0..=1_000_000);
    }
}

section! {
    /// One `[[camera]]`: a camera (or a ROS 2 image topic) encoded to H.265
    /// in process, each access unit one `foxglove_msgs/msg/CompressedVideo`
    /// message.
    #[derive(Debug, Clone, PartialEq)]
    pub struct CameraConfig {
        /// The camera's name: letters, digits and `_`; unique. Required.
        name: String = String::new(), read(readers::camera_name),
            required "add name = \"front\" (letters, digits and `_`)";
        /// The topic its video is recorded on; empty = `/camera/<name>/h265`
        /// (default).
        topic: String = String::new(), read(readers::topic_or_empty);
        /// `frame_id` of its messages; empty = the camera's name (default).
        frame_id: String = String::new(), string();
        /// `test`, `v4l2`, `argus`, `rtsp`, `topic` or `pipeline`. Required.
        source: CameraSourceKind = CameraSourceKind::Test,
            choice(&CameraSourceKind::ALL, CameraSourceKind::as_str),
            required "add source = \"v4l2\" (sources: test, v4l2, argus, rtsp, topic, pipeline)";
        /// `v4l2`: the device, `/dev/videoN` or under `/dev/v4l/by-id/` or
        /// `/dev/v4l/by-path/`. Default `/dev/video0`.
        device: PathBuf = PathBuf::from("/dev/video0"), read(readers::video_device);
        /// `v4l2`: the pixel format to ask the device for (`YUY2`, `UYVY`,
        /// `NV12`, `MJPG`, ...); empty = what the device offers (default).
        format: String = String::new(), read(readers::pixel_format);
        /// `argus`: the CSI sensor (`sensor-id`); 0 to 15. Default 0.
        sensor_id: u32 = 0, int(0..=15);
        /// `argus`: the sensor mode; -1 = chosen by libargus from width,
        /// height and fps (default); 0 to 31 otherwise.
        sensor_mode: i32 = -1, int(-1..=31);
        /// `rtsp`: the stream's URL (`rtsp://host:8554/cam`). Default none.
        url: String = String::new(), string();
        /// `topic`: the `sensor_msgs/msg/Image` topic to transcode. Default
        /// none.
        input_topic: String = String::new(), read(readers::topic_or_empty);
        /// `pipeline`: a gst-launch source of raw video, one chain of
        /// allowed elements (`"v4l2src device=/dev/video2 ! videoflip
        /// method=rotate-180"`); sinks, files, sockets and a second chain
        /// are refused. Default none.
        pipeline: String = String::new(), read(readers::camera_pipeline);
        /// `test`: the videotestsrc pattern (`smpte`, `ball`, `snow`, ...).
        /// Default `smpte`.
        pattern: String = "smpte".to_owned(), read(readers::test_pattern);
        /// Picture width in pixels; even, 64 to 8192. Default 1920.
        width: u32 = 1920, int(64..=8192);
        /// Picture height in pixels; even, 64 to 8192. Default 1080.
        height: u32 = 1080, int(64..=8192);
        /// Frames per second; 1 to 240. Default 30.
        fps: u32 = 30, int(1..=240);
        /// `auto`, `nvv4l2h265enc`, `nvh265enc` or `x265enc`. Default `auto`:
        /// the first of the three GStreamer has.
        encoder: EncoderChoice = EncoderChoice::Auto,
            choice(&EncoderChoice::ALL, EncoderChoice::as_str);
        /// Target bitrate: bit/s, or `"8M"`, `"800k"`. Default 8 Mbit/s.
        bitrate: u64 = 8_000_000, read(readers::bitrate);
        /// `cbr` or `vbr`. Default `cbr`.
        rate_control: RateControl = RateControl::Cbr,
            choice(&RateControl::ALL, RateControl::as_str);
        /// Time between keyframes (each carries VPS/SPS/PPS); 100 ms to 60
        /// s. Default 1 s.
        keyframe_interval: Duration = secs(1), duration(ms(100)..=secs(60));
        /// The encoder's speed preset; empty = the fastest that keeps real
        /// time (default): x265enc `ultrafast`, nvv4l2h265enc `1`
        /// (UltraFast), nvh265enc `low-latency-hp`.
        preset: String = String::new(), read(readers::encoder_preset);
        /// `topic`: also record the raw image topic. Default false.
        record_raw_input: bool = false, boolean();
    }
    check checks::camera_consistent;
}

impl CameraConfig {
    /// The topic its video is recorded on.
    pub fn video_topic(&self) -> String {
        if self.topic.is_empty() {
            format!("/camera/{}/h265", self.name)
        } else {
            self.topic.clone()
        }
    }

    /// The `frame_id` of its messages.
    pub fn frame(&self) -> &str {
        if self.frame_id.is_empty() {
            &self.name
        } else {
            &self.frame_id
        }
    }

    /// A test camera with the required fields given and every other
    /// field at its default.
    pub fn test(name: impl Into<String>) -> Self {
        CameraConfig {
            name: name.into(),
            source: CameraSourceKind::Test,
            ..Self::seed()
        }
    }
}

section! {
    /// `[segment]`: a segment is split when any limit is reached.
    #[derive(Debug, Clone, PartialEq)]
    pub struct SegmentConfig with Default {
        /// Bytes at which a segment is closed; 16 MiB to 1 TiB. Default 1 GiB.
        max_bytes: u64 = GIB, size(16 * MIB..=TIB);
        /// Age (by log time) at which a segment is closed; 1 s to 24 h.
        /// Default 5 min.
        max_duration: Duration = mins(5), duration(secs(1)..=hours(24));
        /// Messages at which a segment is closed; 0 = no limit (default).
        max_messages: u64 = 0, int(0..=i64::MAX as u64);
    }
}

section! {
    /// `[retention]`: the oldest closed, unprotected segments are deleted
    /// before a limit is crossed; when nothing can be deleted, recording pauses.
    #[derive(Debug, Clone, PartialEq)]
    pub struct RetentionConfig with Default {
        /// Most bytes all sessions under the root may hold; 0 = no cap
        /// (default).
        max_total_bytes: u64 = 0, bytes();
        /// Free bytes to keep on the recordings' file system. Default 4 GiB.
        min_free_bytes: u64 = 4 * GIB, bytes();
        /// Free space to keep, in percent of the file system; the larger of
        /// this and `min_free_bytes` applies. 0 to 50. Default 5.
        min_free_percent: u8 = 5, int(0..=50);
    }
}

section! {
    /// `[clock]`: where log times come from and when the clock counts as
    /// locked. Recording never waits for the clock; data recorded while it is
    /// not locked is flagged in the recording.
    #[derive(Debug, Clone, PartialEq)]
    pub struct ClockConfig with Default {
        /// Clock that stamps log times. Default realtime.
        source: ClockSourceKind = ClockSourceKind::Realtime,
            choice(&ClockSourceKind::ALL, ClockSourceKind::as_str);
        /// PTP hardware clock: a device path (`/dev/ptp0`) or a network
        /// interface name (`eth0`). Required when `source` is `phc`; with the
        /// other sources it is monitored (PHC-to-system offset). Empty = none.
        phc: String = String::new(), string();
        /// ptp4l's management socket (`uds_address`); empty = do not query
        /// ptp4l. Default `/var/run/ptp4l`.
        ptp4l_socket: PathBuf = PathBuf::from("/var/run/ptp4l"), path();
        /// PTP domain of the ptp4l instance. Default 0.
        domain: u8 = 0, int(0..=255);
        /// How often the clock's state is read; 100 ms to 60 s. Default 1 s.
        poll_interval: Duration = secs(1), duration(ms(100)..=secs(60));
        /// Largest |offset| that counts as locked; 1 ns to 1 s. Default 1 us.
        lock_threshold: Duration = us(1), duration(ns(1)..=secs(1));
        /// How long the offset must stay below the threshold before the clock
        /// counts as locked; 0 to 1 h. Default 10 s.
        lock_time: Duration = secs(10), duration(Duration::ZERO..=hours(1));
        /// How long after the grandmaster is lost the clock is in holdover
        /// before it counts as unlocked; 0 to 24 h. Default 60 s.
        holdover_max: Duration = secs(60), duration(Duration::ZERO..=hours(24));
    }
    check checks::phc_source_has_a_clock;
}

section! {
    /// `[health]`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct HealthConfig with Default {
        /// Hardware watchdog device; empty = none. Default `/dev/watchdog0`.
        watchdog: PathBuf = PathBuf::from("/dev/watchdog0"), path();
        /// Watchdog timeout set by ioctl; 1 s to 10 min. Default 10 s.
        watchdog_timeout: Duration = secs(10), readers::watchdog_timeout(secs(1)..=mins(10));
        /// How long a stage (storage, a source, the clock monitor, the control
        /// loop) may go without progress before it counts as stalled and the
        /// watchdogs stop being fed; 500 ms to 10 min, below the timeout.
        /// Default 5 s.
        //
        // Stages beat at least every 100 ms (the control loop wakes that
        // often); half a second leaves room for a loaded machine.
        stage_deadline: Duration = secs(5), duration(ms(500)..=mins(10)),
            then checks::stage_deadline_below_timeout;
        /// Where the stalled stage is written before the reset comes. Default
        /// `/data/edgerec/last-fault.json`.
        fault_file: PathBuf = PathBuf::from("/data/edgerec/last-fault.json"), path();
        /// Unix socket serving the status snapshot (`edgerec status`); empty =
        /// none. Default `/run/edgerec/status.sock`. Any local user may
        /// connect (mode 0666); those who may neither read nor control (see
        /// `read_group`) are refused with the group to join.
        status_socket: PathBuf = PathBuf::from("/run/edgerec/status.sock"), path();
        /// Unix socket taking `edgerec ctl` and `edgerec offload` commands:
        /// pause, resume, split, is-paused, trigger; empty = none (default;
        /// the board's configuration sets `/run/edgerec/control.sock`). Any
        /// local user may connect (mode 0666); each request is allowed or
        /// refused by who sent it, as the kernel says (`SO_PEERCRED`):
        /// see `control_group` and `read_group`.
        control_socket: PathBuf = PathBuf::new(), path();
        /// Group whose members may control the recorder on the control
        /// socket (pause, resume, split, trigger, offload pause, resume and
        /// retry), besides root and the recorder's own user; empty = the
        /// recorder's own group (default). The board's is `edgerec`.
        control_group: String = String::new(), string();
        /// Group whose members may read the status socket and ask the
        /// control socket what does not change anything (is-paused,
        /// offload status), besides those who may control; empty = none
        /// (default). The board's is `edgerec-read`.
        read_group: String = String::new(), string();
        /// `trigger` and `split` commands one requester (a local user, a
        /// ROS 2 client) may give a second, on average; more are refused
        /// and counted. 1 to 1000. Default 10.
        control_rate: u32 = 10, int(1..=1000);
        /// How many of them it may give at once before the rate applies;
        /// 1 to 10000. Default 20.
        control_burst: u32 = 20, int(1..=10_000);
        /// Write the status snapshot into the recording as `/edgerec/status`
        /// (std_msgs/String, JSON) at 1 Hz. Default true.
        record_status: bool = true, boolean();
        /// Write the clock's quality into the recording as `/edgerec/clock` at
        /// the clock's poll interval. Default true.
        record_clock: bool = true, boolean();
        /// Write each operator's command that changes something (pause,
        /// resume, split, trigger, the offload's verbs; carried out or
        /// refused, with who asked) into the recording as `/edgerec/audit`
        /// (std_msgs/String, JSON, latched). Default true.
        record_audit: bool = true, boolean();
        /// Prometheus text endpoint (`127.0.0.1:9464`); empty = off
        /// (default). A loopback address unless `prometheus_remote`: the
        /// endpoint has no authentication.
        prometheus: String = String::new(), read(readers::socket_address);
        /// Let `prometheus` be an address other machines reach (the
        /// metrics go to whoever asks, unauthenticated). Default false.
        prometheus_remote: bool = false, boolean(),
            then checks::metrics_on_loopback;
        /// Free space, in percent of the file system, below which the health
        /// is degraded ("disk low"); 0 to 90. Default 10.
        disk_low_percent: u8 = 10, int(0..=90);
        /// Drops within this window make the health degraded; 1 s to 1 h.
        /// Default 10 s.
        drops_window: Duration = secs(10), duration(secs(1)..=hours(1));
    }
}

section! {
    /// `[metrics]`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct MetricsConfig with Default {
        /// Ask NVML (libnvidia-ml.so.1) first; the Tegra sysfs answers where it
        /// does not. Default true.
        nvml: bool = true, boolean();
        /// Root of sysfs; tests point it at a fixture tree. Default `/sys`.
        sys_root: PathBuf = PathBuf::from("/sys"), non_empty_path();
        /// Root of procfs. Default `/proc`.
        proc_root: PathBuf = PathBuf::from("/proc"), non_empty_path();
    }
}

section! {
    /// `[leds]`: for each health state, the LEDs to set and how.
    #[derive(Debug, Clone, PartialEq)]
    pub struct LedsConfig with Default {
        /// The LED class directory. Default `/sys/class/leds`.
        sysfs_root: PathBuf = PathBuf::from("/sys/class/leds"), non_empty_path();
        /// `[leds.states]`: state name -> [(LED name, pattern)], in file
        /// order. Patterns: "off", "on", "blink", "blink-fast",
        /// "blink:ON_MS/OFF_MS". Empty by default: the board's configuration
        /// names its LEDs.
        states: Vec<(String, Vec<(String, String)>)> = Vec::new(), read(readers::led_states);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use toml_edit::{Item, TableLike};

    use crate::schema::tables;
    use crate::Config;

    fn appliance_file() -> String {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/edgerec.toml");
        std::fs::read_to_string(path).unwrap()
    }

    /// The table at the dotted `path` of the document, if it is one.
    fn table_at<'d>(
        document: &'d toml_edit::Document<&str>,
        path: &str,
    ) -> Option<&'d dyn TableLike> {
        path.split('.')
            .try_fold(document.as_table() as &dyn TableLike, |table, part| {
                table.get(part).and_then(Item::as_table_like)
            })
    }

    /// config/edgerec.toml is the documentation of every key: each key the
    /// schema defines is set there to its default, or, where it holds
    /// tables (`[leds.states]`, `[[sources.synthetic]]`), shown in a
    /// commented-out example.
    #[test]
    fn appliance_file_sets_every_key_to_its_default() {
        let text = appliance_file();
        let document = toml_edit::Document::parse(text.as_str()).unwrap();
        let tables = tables();
        // Guards the loop against checking nothing: the twelve tables of
        // today, and more to come.
        assert!(tables.len() >= 12, "{tables:?}");
        for table in tables.iter().filter(|t| !t.name.starts_with("[[")) {
            let path = table.name.trim_matches(['[', ']']);
            let section = table_at(&document, path)
                .unwrap_or_else(|| panic!("{} missing from config/edgerec.toml", table.name));
            for key in table.keys {
                let Some(value) = section.get(key).and_then(Item::as_value) else {
                    let example = [
                        format!("\n# [{path}.{key}]\n"),
                        format!("\n# [[{path}.{key}]]\n"),
                    ];
                    assert!(
                        example.iter().any(|header| text.contains(header.as_str())),
                        "{path}.{key}: neither set nor shown in an example in config/edgerec.toml"
                    );
                    continue;
                };
                let mut value = value.clone();
                value.decor_mut().clear();
                let alone = format!("[{path}]\n{key} = {value}\n");
                let config = Config::parse(&alone, Path::new("edgerec.toml"))
                    .unwrap_or_else(|err| panic!("{err}"));
                assert_eq!(
                    config,
                    Config::default(),
                    "{path}.{key} = {value} in config/edgerec.toml is not the default"
                );
            }
        }
    }

    /// Every array of tables has a commented-out example entry in
    /// config/edgerec.toml naming each of its keys; the entry parses, with
    /// each documented spelling of each key.
    #[test]
    fn appliance_file_examples_name_every_key_and_parse() {
        let text = appliance_file();
        for table in tables().iter().filter(|t| t.name.starts_with("[[")) {
            let header = format!("\n# {}\n", table.name);
            let start = text
                .find(&header)
                .unwrap_or_else(|| panic!("no example of {} in config/edgerec.toml", table.name));
            // `# key = value  # comment` lines of the example, up to the first
            // line that is not a comment.
            let lines: Vec<(String, String)> = text[start + header.len()..]
                .lines()
                .take_while(|line| line.starts_with('#'))
                .filter_map(|line| {
                    let line = line.strip_prefix("# ")?;
                    let (key, _) = line.split_once(" = ")?;
                    let is_key = key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                    is_key.then(|| (key.to_owned(), line.to_owned()))
                })
                .collect();
            for key in table.keys {
                assert!(
                    lines.iter().any(|(k, _)| k == key),
                    "{} {key}: not in the example in config/edgerec.toml",
                    table.name
                );
            }
            for (key, line) in &lines {
                assert!(
                    table.keys.contains(&key.as_str()),
                    "{} has no key {key}",
                    table.name
                );
                // The example's first line of each key, with this line in
                // place of its own key's; a rule's ways to fire exclude
                // each other, so only the keys that go with this one.
                let with: &[&str] = match (table.name.as_str(), key.as_str()) {
                    ("[[trigger]]", "every" | "health") => &["name", "pre", "post"],
                    ("[[trigger]]", "gpio" | "edge" | "debounce") => {
                        &["name", "gpio", "edge", "debounce"]
                    }
                    ("[[trigger]]", _) => &[
                        "name", "topic", "when", "for", "pre", "post", "cooldown", "topics",
                    ],
                    _ => &[],
                };
                let mut entry = vec![table.name.clone()];
                for (other, first) in &lines {
                    let goes = with.is_empty() || with.contains(&other.as_str());
                    if goes
                        && other != key
                        && !entry.iter().any(|l| l.starts_with(&format!("{other} = ")))
                    {
                        entry.push(first.clone());
                    }
                }
                entry.push(line.clone());
                // Rules make clips, which continuous recording does not.
                let prelude = match table.name.as_str() {
                    "[[trigger]]" => "[recording]\nmode = \"triggered\"\n",
                    _ => "",
                };
                let example = format!("{prelude}{}", entry.join("\n"));
                if let Err(err) = Config::parse(&example, Path::new("example.toml")) {
                    panic!("{err} in\n{example}");
                }
            }
        }
    }
}
