//! The shipped configuration files, the defaults, and the ways the same
//! value may be written.

use std::path::{Path, PathBuf};
use std::time::Duration;

use edgerec_config::{
    Addressing, CameraConfig, ClockConfig, ClockSourceKind, Compression, Config, EncoderChoice,
    HealthConfig, LedsConfig, McapConfig, MetricsConfig, OffloadConfig, OffloadMode,
    PipelineConfig, Rate, RecordingConfig, RecordingMode, RemoteConfig, RetentionConfig, RosConfig,
    RosDistro, SegmentConfig, SourcesConfig, Sse, StorageBackend, StorageConfig, SyntheticChannel,
    SyntheticKind, TriggersConfig,
};

fn config_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../config")
        .join(name)
}

fn parse(text: &str) -> Config {
    Config::parse(text, Path::new("test.toml")).unwrap_or_else(|err| panic!("{err}"))
}

#[test]
fn default_is_an_empty_file() {
    assert_eq!(parse(""), Config::default());
    assert_eq!(parse("# only a comment\n\n"), Config::default());
    assert_eq!(parse("[storage]\n[mcap]\n[sources]\n"), Config::default());
}

#[test]
fn defaults_are_the_documented_values() {
    let mib = 1 << 20;
    let expected = Config {
        recording: RecordingConfig {
            root: PathBuf::from("/data/edgerec/recordings"),
            session_prefix: "edgerec".to_owned(),
            ros_distro: RosDistro::Humble,
            mode: RecordingMode::Continuous,
            continuous_topics: vec![],
        },
        storage: StorageConfig {
            backend: StorageBackend::Auto,
            block_size: mib,
            queue_depth: 8,
            sync_interval: Duration::from_secs(1),
            preallocate: 256 * mib,
            realtime_priority: 0,
        },
        mcap: McapConfig {
            chunk_size: 4 * mib,
            compression: Compression::None,
            compression_level: 3,
            chunk_max_age: Duration::from_millis(500),
        },
        pipeline: PipelineConfig {
            memory_budget: 256 * mib,
            compressor_threads: 0,
            queue_capacity: 16384,
        },
        sources: SourcesConfig {
            synthetic: vec![],
            restart_backoff_min: Duration::from_millis(100),
            restart_backoff_max: Duration::from_secs(30),
        },
        ros: RosConfig {
            enabled: false,
            all: false,
            topics: vec![],
            regex: String::new(),
            exclude: String::new(),
            exclude_types: vec![],
            include_hidden: false,
            discovery_interval: Duration::from_millis(100),
            max_topics: 1000,
            domain_id: -1,
            services: false,
            node_name: "edgerec".to_owned(),
            namespace: "/".to_owned(),
            msg_paths: vec![],
            qos_overrides_path: PathBuf::new(),
            qos: vec![],
        },
        segment: SegmentConfig {
            max_bytes: 1 << 30,
            max_duration: Duration::from_secs(300),
            max_messages: 0,
        },
        retention: RetentionConfig {
            max_total_bytes: 0,
            min_free_bytes: 4 << 30,
            min_free_percent: 5,
        },
        clock: ClockConfig {
            source: ClockSourceKind::Realtime,
            phc: String::new(),
            ptp4l_socket: PathBuf::from("/var/run/ptp4l"),
            domain: 0,
            poll_interval: Duration::from_secs(1),
            lock_threshold: Duration::from_micros(1),
            lock_time: Duration::from_secs(10),
            holdover_max: Duration::from_secs(60),
        },
        health: HealthConfig {
            watchdog: PathBuf::from("/dev/watchdog0"),
            watchdog_timeout: Duration::from_secs(10),
            stage_deadline: Duration::from_secs(5),
            fault_file: PathBuf::from("/data/edgerec/last-fault.json"),
            status_socket: PathBuf::from("/run/edgerec/status.sock"),
            control_socket: PathBuf::new(),
            control_group: String::new(),
            read_group: String::new(),
            control_rate: 10,
            control_burst: 20,
            record_status: true,
            record_clock: true,
            record_audit: true,
            prometheus: String::new(),
            prometheus_remote: false,
            disk_low_percent: 10,
            drops_window: Duration::from_secs(10),
        },
        metrics: MetricsConfig {
            nvml: true,
            sys_root: PathBuf::from("/sys"),
            proc_root: PathBuf::from("/proc"),
        },
        leds: LedsConfig {
            sysfs_root: PathBuf::from("/sys/class/leds"),
            states: vec![],
        },
        camera: vec![],
        can: vec![],
        udp: vec![],
        triggers: TriggersConfig {
            pre: Duration::from_secs(10),
            post: Duration::from_secs(10),
            memory_budget: 512 * mib,
            disk_budget: 16 * 1024 * mib,
            keep: Duration::ZERO,
            cooldown: Duration::ZERO,
        },
        trigger: vec![],
        offload: OffloadConfig {
            endpoint: String::new(),
            bucket: String::new(),
            region: "us-east-1".to_owned(),
            addressing: Addressing::Path,
            key_template: "{vehicle}/{session}/{file}".to_owned(),
            vehicle_id: String::new(),
            credentials_file: PathBuf::from("/data/edgerec/offload-credentials"),
            profile: "default".to_owned(),
            part_size: 16 * mib,
            concurrency: 4,
            allow_http: false,
            ca_file: PathBuf::new(),
            client_cert: PathBuf::new(),
            client_key: PathBuf::new(),
            sse: Sse::None,
            sse_kms_key_id: String::new(),
            upload: OffloadMode::None,
            max_rate: 0,
            windows: Vec::new(),
            interfaces: Vec::new(),
            metered_interfaces: Vec::new(),
            delete_after_upload: false,
            keep_unsent_clips: true,
            drain_on_stop: Duration::from_secs(30),
            journal_dir: PathBuf::from("/data/edgerec/offload-journal"),
        },
        remote: RemoteConfig {
            broker: String::new(),
            ca_file: PathBuf::new(),
            cert_file: PathBuf::new(),
            key_file: PathBuf::new(),
            vehicle_id: String::new(),
            topic_prefix: String::new(),
            keepalive: Duration::from_secs(30),
            status_interval: Duration::from_secs(10),
            queue: 1000,
            allow: vec!["status".to_owned(), "list".to_owned()],
            journal: PathBuf::from("/data/edgerec/remote-commands.jsonl"),
        },
    };
    assert_eq!(Config::default(), expected);
}

/// The appliance file documents every key with its default value; this
/// proves the documented values are the real ones.
#[test]
fn appliance_file_is_exactly_the_defaults() {
    let config = Config::load(&config_file("edgerec.toml")).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(config, Config::default());
}

#[test]
fn demo_file_records_a_synthetic_vehicle() {
    let config = Config::load(&config_file("demo.toml")).unwrap_or_else(|err| panic!("{err}"));
    let channel = |topic: &str, kind, hz, payload_size, frame_id: &str, latched| SyntheticChannel {
        payload_size,
        frame_id: frame_id.to_owned(),
        latched,
        ..SyntheticChannel::new(topic, kind, Rate::Hz(hz))
    };
    let expected = Config {
        recording: RecordingConfig {
            root: PathBuf::from("./data"),
            session_prefix: "demo".to_owned(),
            ..RecordingConfig::default()
        },
        mcap: McapConfig {
            compression: Compression::Lz4,
            ..McapConfig::default()
        },
        health: HealthConfig {
            watchdog: PathBuf::new(),
            fault_file: PathBuf::from("./data/last-fault.json"),
            status_socket: PathBuf::from("./data/edgerec.sock"),
            ..HealthConfig::default()
        },
        sources: SourcesConfig {
            synthetic: vec![
                channel("/imu/data", SyntheticKind::Imu, 400.0, 0, "imu_link", false),
                channel(
                    "/lidar/points",
                    SyntheticKind::PointCloud2,
                    10.0,
                    1_200_000,
                    "lidar_link",
                    false,
                ),
                channel(
                    "/camera/front/image_raw",
                    SyntheticKind::Image,
                    30.0,
                    640 * 480 * 3,
                    "camera_front_optical",
                    false,
                ),
                channel(
                    "/vehicle/status",
                    SyntheticKind::String,
                    1.0,
                    0,
                    "base_link",
                    true,
                ),
            ],
            ..SourcesConfig::default()
        },
        camera: vec![CameraConfig {
            pattern: "ball".to_owned(),
            width: 640,
            height: 480,
            encoder: EncoderChoice::X265Enc,
            bitrate: 2_000_000,
            ..CameraConfig::test("front")
        }],
        ..Config::default()
    };
    assert_eq!(config, expected);
}

#[test]
fn ros_type_names() {
    let names = SyntheticKind::ALL.map(|kind| kind.ros_type());
    assert_eq!(
        names,
        [
            "sensor_msgs/msg/Imu",
            "sensor_msgs/msg/PointCloud2",
            "sensor_msgs/msg/Image",
            "std_msgs/msg/String",
            "sensor_msgs/msg/BatteryState",
        ]
    );
}

#[test]
fn every_spelling_of_every_enum_is_accepted() {
    for distro in RosDistro::ALL {
        let config = parse(&format!("[recording]\nros_distro = \"{distro}\"\n"));
        assert_eq!(config.recording.ros_distro, distro);
    }
    for backend in StorageBackend::ALL {
        let config = parse(&format!("[storage]\nbackend = \"{backend}\"\n"));
        assert_eq!(config.storage.backend, backend);
    }
    for compression in Compression::ALL {
        let config = parse(&format!("[mcap]\ncompression = \"{compression}\"\n"));
        assert_eq!(config.mcap.compression, compression);
    }
    for kind in SyntheticKind::ALL {
        let config = parse(&format!(
            "[[sources.synthetic]]\ntopic = \"/t\"\ntype = \"{kind}\"\nrate = 1\n"
        ));
        assert_eq!(config.sources.synthetic[0].kind, kind);
    }
}

/// Header tables, dotted keys and inline tables are the same TOML; sizes as
/// integers and as strings with units are the same size.
#[test]
fn equivalent_spellings_give_the_same_config() {
    let header = parse(
        "[storage]\nblock_size = 4194304\n\n[[sources.synthetic]]\ntopic = \"/a\"\ntype = \"std_msgs/msg/String\"\nrate = \"max\"\n",
    );
    let dotted = parse(
        "storage.block_size = \"4MiB\"\nsources.synthetic = [{ topic = \"/a\", type = \"std_msgs/msg/String\", rate = \"max\" }]\n",
    );
    let inline = parse(
        "storage = { block_size = \"4 MiB\" }\nsources = { synthetic = [{ topic = \"/a\", type = \"std_msgs/msg/String\", rate = \"max\" }] }\n",
    );
    assert_eq!(header.storage.block_size, 4 << 20);
    assert_eq!(header.sources.synthetic[0].rate, Rate::Max);
    assert_eq!(header, dotted);
    assert_eq!(header, inline);
}

#[test]
fn values_at_the_edges_of_their_ranges_are_accepted() {
    let config = parse(concat!(
        "[recording]\nsession_prefix = \"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-\"\n",
        "[storage]\nblock_size = \"64MiB\"\nqueue_depth = 128\nsync_interval = \"60s\"\npreallocate = \"64MiB\"\n",
        "[mcap]\nchunk_size = \"64KiB\"\ncompression = \"zstd\"\ncompression_level = 19\nchunk_max_age = \"10ms\"\n",
        "[pipeline]\nmemory_budget = \"64GiB\"\ncompressor_threads = 64\nqueue_capacity = 1048576\n",
        "[[sources.synthetic]]\ntopic = \"/a\"\ntype = \"sensor_msgs/msg/Image\"\nrate = 10000000\npayload_size = \"64MiB\"\n",
        "[[sources.synthetic]]\ntopic = \"/b\"\ntype = \"sensor_msgs/msg/Imu\"\nrate = 0.001\n",
    ));
    assert_eq!(config.recording.session_prefix.len(), 64);
    assert_eq!(config.storage.preallocate, config.storage.block_size);
    assert_eq!(config.storage.sync_interval, Duration::from_secs(60));
    assert_eq!(config.mcap.chunk_max_age, Duration::from_millis(10));
    assert_eq!(config.pipeline.queue_capacity, 1 << 20);
    assert_eq!(config.sources.synthetic[0].rate, Rate::Hz(10_000_000.0));
    assert_eq!(config.sources.synthetic[1].rate, Rate::Hz(0.001));

    let config = parse("[storage]\npreallocate = 0\n[pipeline]\nmemory_budget = \"16MiB\"\n");
    assert_eq!(config.storage.preallocate, 0);
    assert_eq!(config.pipeline.memory_budget, 16 << 20);
}

/// lz4 and none have no levels: a level zstd would refuse is ignored.
#[test]
fn compression_level_is_only_checked_for_zstd() {
    let config = parse("[mcap]\ncompression = \"lz4\"\ncompression_level = 22\n");
    assert_eq!(config.mcap.compression_level, 22);
    let config = parse("[mcap]\ncompression_level = -5\n");
    assert_eq!(config.mcap.compression_level, -5);
}

#[test]
fn rate_period() {
    assert_eq!(Rate::Hz(400.0).period(), Some(Duration::from_micros(2500)));
    assert_eq!(Rate::Max.period(), None);
}

/// The board example in the appliance file's comments parses, and the
/// states keep their file order.
#[test]
fn led_states_from_the_documented_example() {
    let text = std::fs::read_to_string(config_file("edgerec.toml")).unwrap();
    let start = text.find("# [leds.states]").unwrap();
    let example: String = text[start..]
        .lines()
        .take_while(|line| line.starts_with('#'))
        .map(|line| line.trim_start_matches('#').trim_start())
        .collect::<Vec<_>>()
        .join("\n");
    let config =
        Config::parse(&example, Path::new("example.toml")).unwrap_or_else(|e| panic!("{e}"));
    let states: Vec<&str> = config.leds.states.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(
        states,
        [
            "booting",
            "idle",
            "recording",
            "degraded",
            "fault",
            "disk-full",
            "paused"
        ]
    );
    assert_eq!(
        config.leds.states[3].1,
        vec![
            ("edgerec:green".to_owned(), "blink:900/100".to_owned()),
            ("edgerec:red".to_owned(), "blink".to_owned())
        ]
    );
}

#[test]
fn faults_and_restart_backoff() {
    use edgerec_config::SourceFault;
    let channel = |fault: &str| {
        parse(&format!(
            "[[sources.synthetic]]\ntopic = \"/a\"\ntype = \"sensor_msgs/msg/Imu\"\nrate = 1\nfault = \"{fault}\"\n"
        ))
        .sources
        .synthetic[0]
            .fault
    };
    assert_eq!(
        channel("panic-every:2s"),
        Some(SourceFault::PanicEvery(Duration::from_secs(2)))
    );
    assert_eq!(
        channel("error-every:1.5s"),
        Some(SourceFault::ErrorEvery(Duration::from_millis(1500)))
    );
    assert_eq!(
        channel("stall-for: 5s"),
        Some(SourceFault::StallFor(Duration::from_secs(5)))
    );
    assert_eq!(
        channel("stall-for:1ns").map(|f| f.to_string()),
        Some("stall-for:1ns".to_owned())
    );
    assert_eq!(
        channel("malformed-every:10"),
        Some(SourceFault::MalformedEvery(10))
    );
    assert_eq!(
        channel("malformed-every: 1").map(|f| f.to_string()),
        Some("malformed-every:1".to_owned())
    );
    let config =
        parse("[[sources.synthetic]]\ntopic = \"/a\"\ntype = \"sensor_msgs/msg/Imu\"\nrate = 1\n");
    assert_eq!(config.sources.synthetic[0].fault, None);

    // The edges of both ranges, and max equal to min.
    let config = parse("[sources]\nrestart_backoff_min = \"1ms\"\nrestart_backoff_max = \"1h\"\n");
    assert_eq!(config.sources.restart_backoff_min, Duration::from_millis(1));
    assert_eq!(
        config.sources.restart_backoff_max,
        Duration::from_secs(3600)
    );
    let config = parse("[sources]\nrestart_backoff_min = \"10s\"\nrestart_backoff_max = \"10s\"\n");
    assert_eq!(
        config.sources.restart_backoff_min,
        config.sources.restart_backoff_max
    );
    let config = parse("[sources]\nrestart_backoff_max = \"100ms\"\n");
    assert_eq!(
        config.sources.restart_backoff_max,
        Duration::from_millis(100)
    );
}

/// A battery channel's voltage profile: steps from the source's first
/// message, the first `@` optional; a constant 12.6 V when unset.
#[test]
fn battery_voltage_profile() {
    use edgerec_config::{VoltageProfile, VoltageStep};
    let channel = |extra: &str| {
        parse(&format!(
            "[[sources.synthetic]]\ntopic = \"/battery\"\n\
             type = \"sensor_msgs/msg/BatteryState\"\nrate = 10\n{extra}"
        ))
        .sources
        .synthetic
        .remove(0)
    };
    let c = channel("voltage = \"12.6, 11.8@3s, 12.6@6s\"\n");
    assert_eq!(c.kind, SyntheticKind::BatteryState);
    let s = Duration::from_secs;
    assert_eq!(
        c.voltage.steps(),
        [
            VoltageStep {
                from: s(0),
                volts: 12.6
            },
            VoltageStep {
                from: s(3),
                volts: 11.8
            },
            VoltageStep {
                from: s(6),
                volts: 12.6
            },
        ]
    );
    assert_eq!(c.voltage.at(Duration::from_millis(2999)), 12.6);
    assert_eq!(c.voltage.at(s(3)), 11.8);
    assert_eq!(c.voltage.at(s(6)), 12.6);
    let unset = channel("");
    assert_eq!(unset.voltage, VoltageProfile::constant(12.6));
    assert_eq!(unset.voltage.at(s(1_000_000)), 12.6);
    let explicit_start = channel("voltage = \"11.1@0s, 10.5@500ms\"\n");
    assert_eq!(explicit_start.voltage.at(Duration::from_millis(499)), 11.1);
    assert_eq!(explicit_start.voltage.at(Duration::from_millis(500)), 10.5);
}
