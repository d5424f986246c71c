//! One test per class of error, each pinning the line, column, key, message
//! and hint the user sees.

use std::path::{Path, PathBuf};

use edgerec_config::{Config, ConfigError};

fn error(text: &str) -> ConfigError {
    match Config::parse(text, Path::new("edgerec.toml")) {
        Ok(config) => panic!("accepted {text:?} as {config:?}"),
        Err(err) => err,
    }
}

#[track_caller]
fn assert_error(
    err: &ConfigError,
    (line, column): (usize, usize),
    key: Option<&str>,
    message: &str,
    hint: Option<&str>,
) {
    assert_eq!(err.path, PathBuf::from("edgerec.toml"), "{err}");
    assert_eq!((err.line, err.column), (Some(line), Some(column)), "{err}");
    assert_eq!(err.key.as_deref(), key, "{err}");
    assert_eq!(err.message, message, "{err}");
    assert_eq!(err.hint.as_deref(), hint, "{err}");
}

const STORAGE_KEYS: &str =
    "backend, block_size, queue_depth, sync_interval, preallocate, realtime_priority";
const SYNTHETIC_KEYS: &str = "topic, type, rate, payload_size, frame_id, latched, fault, voltage";

const TWO_CHANNELS: &str = r#"[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 400

[[sources.synthetic]]
"#;

#[test]
fn syntax_error() {
    let err = error("[storage]\nqueue_depth 8\n");
    assert_error(&err, (2, 13), None, "key with no value, expected `=`", None);
    assert_eq!(
        err.to_string(),
        "edgerec.toml:2:13: key with no value, expected `=`"
    );
}

#[test]
fn syntax_error_duplicate_key() {
    let err = error("[storage]\nqueue_depth = 8\nqueue_depth = 9\n");
    assert_error(&err, (3, 1), None, "duplicate key `queue_depth`", None);
}

#[test]
fn unknown_key_with_a_near_valid_one() {
    let err = error("[storage]\nbackend = \"auto\"\nblok_size = 4096\n");
    let hint = format!("did you mean `block_size`? (valid keys: {STORAGE_KEYS})");
    assert_error(
        &err,
        (3, 1),
        Some("storage.blok_size"),
        "unknown key",
        Some(&hint),
    );
    assert_eq!(
        err.to_string(),
        format!("edgerec.toml:3:1: storage.blok_size: unknown key; {hint}")
    );
}

#[test]
fn unknown_table() {
    let err = error("[recording]\nroot = \"/x\"\n\n[strorage]\nblock_size = 4096\n");
    assert_error(
        &err,
        (4, 2),
        Some("strorage"),
        "unknown key",
        Some("did you mean `storage`? (valid keys: recording, storage, mcap, pipeline, sources, ros, segment, retention, clock, health, metrics, leds, camera, can, udp, triggers, trigger, offload, remote)"),
    );
}

#[test]
fn unknown_key_in_a_synthetic_channel() {
    let text = format!("{TWO_CHANNELS}topic = \"/gps\"\ntype = \"std_msgs/msg/String\"\nrat = 1\n");
    let err = error(&text);
    assert_error(
        &err,
        (9, 1),
        Some("sources.synthetic[1].rat"),
        "unknown key",
        Some(&format!(
            "did you mean `rate`? (valid keys: {SYNTHETIC_KEYS})"
        )),
    );
}

#[test]
fn unknown_key_that_belongs_in_another_table() {
    let err = error("[storage]\nchunk_size = \"8MiB\"\n");
    let hint =
        format!("`chunk_size` belongs in [mcap], not [storage] (valid keys here: {STORAGE_KEYS})");
    assert_error(
        &err,
        (2, 1),
        Some("storage.chunk_size"),
        "unknown key",
        Some(&hint),
    );

    let err = error("# recording root\nroot = \"/x\"\n");
    assert_error(
        &err,
        (2, 1),
        Some("root"),
        "unknown key",
        Some("`root` belongs in [recording], not the top level (valid keys here: recording, storage, mcap, pipeline, sources, ros, segment, retention, clock, health, metrics, leds, camera, can, udp, triggers, trigger, offload, remote)"),
    );
}

#[test]
fn unknown_key_with_nothing_near() {
    let err = error("[mcap]\nfoo = 1\n");
    assert_error(
        &err,
        (2, 1),
        Some("mcap.foo"),
        "unknown key",
        Some("valid keys: chunk_size, compression, compression_level, chunk_max_age"),
    );
}

/// Keys written dotted or in inline tables are located as precisely.
#[test]
fn unknown_key_dotted_and_inline() {
    let err = error("mcap.chunk_sise = 1\n");
    assert_eq!((err.line, err.column), (Some(1), Some(6)), "{err}");
    assert_eq!(err.key.as_deref(), Some("mcap.chunk_sise"));
    assert!(err.hint.unwrap().starts_with("did you mean `chunk_size`?"));

    let err = error("storage = { backend = \"auto\", colour = 2 }\n");
    assert_error(
        &err,
        (1, 31),
        Some("storage.colour"),
        "unknown key",
        Some(&format!("valid keys: {STORAGE_KEYS}")),
    );
}

#[test]
fn wrong_type() {
    let err = error("[storage]\nqueue_depth = \"8\"\n");
    assert_error(
        &err,
        (2, 15),
        Some("storage.queue_depth"),
        "expected an integer, found a string",
        Some("write 8 without quotes"),
    );

    let err = error("[recording]\nsession_prefix = 7\n");
    assert_error(
        &err,
        (2, 18),
        Some("recording.session_prefix"),
        "expected a string, found an integer",
        Some("put it in quotes: \"7\""),
    );

    let text = format!("{TWO_CHANNELS}topic = \"/s\"\ntype = \"std_msgs/msg/String\"\nrate = 1\nlatched = \"yes\"\n");
    let err = error(&text);
    assert_error(
        &err,
        (10, 11),
        Some("sources.synthetic[1].latched"),
        "expected a boolean, found a string",
        Some("write true or false"),
    );

    let err = error("[storage]\nblock_size = 4096.0\n");
    assert_error(
        &err,
        (2, 14),
        Some("storage.block_size"),
        "expected a size (an integer in bytes or a string such as \"4MiB\"), found a float",
        None,
    );
}

#[test]
fn wrong_type_for_a_table() {
    let err = error("storage = 5\n");
    assert_error(
        &err,
        (1, 11),
        Some("storage"),
        "expected a table, found an integer",
        Some("write [storage] and its keys on the lines below it"),
    );

    let err = error("[sources.synthetic]\ntopic = \"/imu\"\n");
    assert_error(
        &err,
        (1, 1),
        Some("sources.synthetic"),
        "expected an array of tables, found a table",
        Some("write one [[sources.synthetic]] table (double brackets) per channel"),
    );

    let err = error("[sources]\nsynthetic = [1]\n");
    assert_error(
        &err,
        (2, 14),
        Some("sources.synthetic[0]"),
        "expected a table, found an integer",
        None,
    );
}

#[test]
fn integer_out_of_range() {
    let err = error("[storage]\nqueue_depth = 0\n");
    assert_error(
        &err,
        (2, 15),
        Some("storage.queue_depth"),
        "must be from 1 to 128, got 0",
        None,
    );

    let err = error("[storage]\nrealtime_priority = 100\n");
    assert_error(
        &err,
        (2, 21),
        Some("storage.realtime_priority"),
        "must be from 0 to 99, got 100",
        None,
    );

    let err = error("[pipeline]\nqueue_capacity = 1000\n");
    assert_error(
        &err,
        (2, 18),
        Some("pipeline.queue_capacity"),
        "must be a power of two from 64 to 1048576, got 1000",
        Some("the nearest powers of two are 512 and 1024"),
    );
}

#[test]
fn size_out_of_range() {
    let err = error("[storage]\nblock_size = 6000\n");
    assert_error(
        &err,
        (2, 14),
        Some("storage.block_size"),
        "must be a power of two from 4 KiB to 64 MiB, got 6000 bytes",
        Some("the nearest powers of two are 4 KiB and 8 KiB"),
    );

    let err = error("[storage]\nblock_size = \"128MiB\"\n");
    assert_error(
        &err,
        (2, 14),
        Some("storage.block_size"),
        "must be a power of two from 4 KiB to 64 MiB, got 128 MiB",
        None,
    );

    let err = error("[storage]\nblock_size = -4096\n");
    assert_error(
        &err,
        (2, 14),
        Some("storage.block_size"),
        "a size must not be negative",
        None,
    );

    let text = format!("{TWO_CHANNELS}topic = \"/c\"\ntype = \"sensor_msgs/msg/Image\"\nrate = 30\npayload_size = \"65MiB\"\n");
    let err = error(&text);
    assert_error(
        &err,
        (10, 16),
        Some("sources.synthetic[1].payload_size"),
        "must be from 0 bytes to 64 MiB, got 65 MiB",
        None,
    );
}

#[test]
fn ambiguous_size_unit() {
    let err = error("[storage]\npreallocate = \"1G\"\n");
    assert_error(
        &err,
        (2, 15),
        Some("storage.preallocate"),
        "ambiguous size unit `G`",
        Some("write \"1GiB\" (1073741824 bytes) or \"1GB\" (1000000000 bytes)"),
    );
}

#[test]
fn duration_out_of_range() {
    let err = error("[mcap]\nchunk_max_age = \"5ms\"\n");
    assert_error(
        &err,
        (2, 17),
        Some("mcap.chunk_max_age"),
        "must be from 10ms to 10s, got 5ms",
        None,
    );
}

#[test]
fn duration_without_unit() {
    let err = error("[storage]\nsync_interval = 1\n");
    assert_error(
        &err,
        (2, 17),
        Some("storage.sync_interval"),
        "a duration needs a unit",
        Some("write \"1s\" or \"1ms\""),
    );

    let err = error("[storage]\nsync_interval = \"2\"\n");
    assert_error(
        &err,
        (2, 17),
        Some("storage.sync_interval"),
        "a duration needs a unit",
        Some("write \"2s\" or \"2ms\""),
    );
}

#[test]
fn unknown_enum_value() {
    let err = error("[mcap]\ncompression = \"zsdt\"\n");
    assert_error(
        &err,
        (2, 15),
        Some("mcap.compression"),
        "unknown value `zsdt`",
        Some("did you mean `zstd`? (valid values: none, lz4, zstd)"),
    );

    let err = error("[storage]\nbackend = \"uring\"\n");
    assert_error(
        &err,
        (2, 11),
        Some("storage.backend"),
        "unknown value `uring`",
        Some("valid values: auto, io_uring, pwrite_direct, buffered"),
    );

    let text = format!("{TWO_CHANNELS}topic = \"/gps\"\ntype = \"sensor_msgs/Imu\"\nrate = 1\n");
    let err = error(&text);
    assert_error(
        &err,
        (8, 8),
        Some("sources.synthetic[1].type"),
        "unknown value `sensor_msgs/Imu`",
        Some("did you mean `sensor_msgs/msg/Imu`? (valid values: sensor_msgs/msg/Imu, sensor_msgs/msg/PointCloud2, sensor_msgs/msg/Image, std_msgs/msg/String, sensor_msgs/msg/BatteryState)"),
    );
}

/// Columns count characters: the two non-ASCII characters before the value
/// would make a byte count two too high.
#[test]
fn columns_count_characters_not_bytes() {
    let err = error("recording = { root = \"/dätä\", ros_distro = \"hümble\" }\n");
    assert_error(
        &err,
        (1, 44),
        Some("recording.ros_distro"),
        "unknown value `hümble`",
        Some("did you mean `humble`? (valid values: humble, jazzy)"),
    );
}

#[test]
fn memory_budget_below_four_chunks() {
    let err = error("[mcap]\nchunk_size = \"64MiB\"\n\n[pipeline]\nmemory_budget = \"128MiB\"\n");
    assert_error(
        &err,
        (5, 17),
        Some("pipeline.memory_budget"),
        "must be at least 4 x mcap.chunk_size (256 MiB), got 128 MiB",
        Some("raise pipeline.memory_budget to at least \"256MiB\" or lower mcap.chunk_size"),
    );

    // With the budget left at its default, the chunk size is what the file
    // says, so that is where the error points.
    let err = error("[mcap]\nchunk_size = \"128MiB\"\n");
    assert_error(
        &err,
        (2, 14),
        Some("mcap.chunk_size"),
        "needs pipeline.memory_budget of at least 4 x chunk_size (512 MiB), but memory_budget is 256 MiB (the default)",
        Some("raise pipeline.memory_budget to at least \"512MiB\" or lower mcap.chunk_size"),
    );
}

#[test]
fn preallocate_below_block_size() {
    let err = error("[storage]\nblock_size = \"8MiB\"\npreallocate = \"4MiB\"\n");
    assert_error(
        &err,
        (3, 15),
        Some("storage.preallocate"),
        "must be 0 (off) or from block_size (8 MiB) to 64 GiB, got 4 MiB",
        None,
    );
}

#[test]
fn zstd_level_out_of_range() {
    let message = "must be from 1 to 19, got 22";
    let err = error("[mcap]\ncompression = \"zstd\"\ncompression_level = 22\n");
    assert_error(&err, (3, 21), Some("mcap.compression_level"), message, None);
    // The level is checked against the compression wherever either is.
    let err = error("[mcap]\ncompression_level = 22\ncompression = \"zstd\"\n");
    assert_error(&err, (2, 21), Some("mcap.compression_level"), message, None);
}

#[test]
fn duplicate_topic() {
    let text =
        format!("{TWO_CHANNELS}topic = \"/imu\"\ntype = \"sensor_msgs/msg/Imu\"\nrate = 100\n");
    let err = error(&text);
    assert_error(
        &err,
        (7, 9),
        Some("sources.synthetic[1].topic"),
        "duplicate topic `/imu`",
        Some("sources.synthetic[0] (line 2) already records it; give each channel its own topic"),
    );
}

/// A missing key has no position of its own: the error points at the
/// header of the entry that lacks it.
#[test]
fn missing_required_keys() {
    let err = error(&format!(
        "{TWO_CHANNELS}type = \"sensor_msgs/msg/Imu\"\nrate = 1\n"
    ));
    assert_error(
        &err,
        (6, 1),
        Some("sources.synthetic[1].topic"),
        "missing required key `topic`",
        Some("add topic = \"/name\", a fully qualified ROS 2 topic name"),
    );

    let err = error(&format!("{TWO_CHANNELS}topic = \"/a\"\nrate = 1\n"));
    assert_error(
        &err,
        (6, 1),
        Some("sources.synthetic[1].type"),
        "missing required key `type`",
        Some("add type = \"sensor_msgs/msg/Imu\" (types: sensor_msgs/msg/Imu, sensor_msgs/msg/PointCloud2, sensor_msgs/msg/Image, std_msgs/msg/String, sensor_msgs/msg/BatteryState)"),
    );

    let err = error(&format!(
        "{TWO_CHANNELS}topic = \"/a\"\ntype = \"std_msgs/msg/String\"\n"
    ));
    assert_error(
        &err,
        (6, 1),
        Some("sources.synthetic[1].rate"),
        "missing required key `rate`",
        Some("add rate = 10 (in Hz) or rate = \"max\""),
    );

    // In an inline array the entry starts at its `{`.
    let err = error(concat!(
        "[sources]\n",
        "synthetic = [\n",
        "  { topic = \"/a\", type = \"std_msgs/msg/String\", rate = 1 },\n",
        "  { topic = \"/b\", type = \"std_msgs/msg/String\" },\n",
        "]\n",
    ));
    assert_eq!((err.line, err.column), (Some(4), Some(3)), "{err}");
    assert_eq!(err.key.as_deref(), Some("sources.synthetic[1].rate"));
}

#[test]
fn invalid_topic_name() {
    let channel = |topic: &str| {
        error(&format!(
            "[[sources.synthetic]]\ntopic = \"{topic}\"\ntype = \"sensor_msgs/msg/Imu\"\nrate = 1\n"
        ))
    };
    let key = Some("sources.synthetic[0].topic");
    assert_error(
        &channel("imu/data"),
        (2, 9),
        key,
        "a topic name must start with `/`",
        Some("write \"/imu/data\": a recorder has no namespace to resolve a relative name in"),
    );
    assert_error(
        &channel("/front-camera"),
        (2, 9),
        key,
        "`/front-camera` contains `-`, which a ROS 2 topic name cannot",
        Some("use letters, digits, `_` and `/`"),
    );
    assert_error(
        &channel("/a//b"),
        (2, 9),
        key,
        "`/a//b` contains `//`, an empty name part",
        None,
    );
    assert_error(
        &channel("/imu/"),
        (2, 9),
        key,
        "`/imu/` must not end with `/`",
        None,
    );
    assert_error(
        &channel("/cam/3d"),
        (2, 9),
        key,
        "`/cam/3d`: the part `3d` starts with a digit, which a ROS 2 topic name cannot",
        None,
    );
}

#[test]
fn invalid_rate() {
    let channel = |rate: &str| {
        error(&format!(
            "[[sources.synthetic]]\ntopic = \"/a\"\ntype = \"sensor_msgs/msg/Imu\"\nrate = {rate}\n"
        ))
    };
    let key = Some("sources.synthetic[0].rate");
    assert_error(
        &channel("0"),
        (4, 8),
        key,
        "must be more than 0 and at most 10000000 Hz, got 0",
        None,
    );
    assert_error(
        &channel("2e7"),
        (4, 8),
        key,
        "must be more than 0 and at most 10000000 Hz, got 20000000",
        Some("write rate = \"max\" to generate as fast as the pipeline accepts"),
    );
    assert_error(
        &channel("nan"),
        (4, 8),
        key,
        "must be more than 0 and at most 10000000 Hz, got NaN",
        None,
    );
    assert_error(
        &channel("\"400Hz\""),
        (4, 8),
        key,
        "unknown rate `400Hz`",
        Some("write rate = 400, a number in Hz without quotes"),
    );
    assert_error(
        &channel("\"fast\""),
        (4, 8),
        key,
        "unknown rate `fast`",
        Some("write a number in Hz (rate = 10) or \"max\""),
    );
}

#[test]
fn invalid_session_prefix() {
    let err = error("[recording]\nsession_prefix = \"my car\"\n");
    assert_error(
        &err,
        (2, 18),
        Some("recording.session_prefix"),
        "`my car` contains ` `, which is not allowed",
        Some(
            "use letters, digits, `_` and `-`: the prefix becomes part of directory and file names",
        ),
    );
}

#[test]
fn a_directory_a_device_a_huge_file_or_binary_is_refused_naming_it() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("config-load");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.as_path();
    let err = Config::load(d).unwrap_err();
    assert_eq!(err.path, d);
    assert!(
        err.message.contains("not a regular file (a directory)"),
        "{err}"
    );
    let err = Config::load(Path::new("/dev/zero")).unwrap_err();
    assert!(
        err.message.contains("not a regular file (a device"),
        "{err}"
    );
    let big = d.join("big.toml");
    let mut text = String::from("# padding\n");
    while (text.len() as u64) <= edgerec_config::MAX_CONFIG_BYTES {
        text.push_str("# ................................................................\n");
    }
    std::fs::write(&big, &text).unwrap();
    let err = Config::load(&big).unwrap_err();
    assert_eq!(err.path, big);
    assert!(err.message.contains("larger than 1024 KiB"), "{err}");
    let bin = d.join("bin.toml");
    std::fs::write(&bin, b"[recording]\nroot = \"/data\xff\"\n").unwrap();
    let err = Config::load(&bin).unwrap_err();
    assert!(
        err.message.contains("not UTF-8 text (byte 25 is not)"),
        "{err}"
    );
    assert!(err.to_string().contains("bin.toml"), "{err}");
}

#[test]
fn unreadable_file() {
    let path = Path::new("/nonexistent/edgerec.toml");
    let err = Config::load(path).unwrap_err();
    assert_eq!(err.path, path);
    assert_eq!(
        (err.line, err.column, err.key.as_deref()),
        (None, None, None)
    );
    assert!(
        err.message
            .starts_with("cannot read the configuration: No such file or directory"),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!("/nonexistent/edgerec.toml: {}", err.message)
    );
}

/// Every error names a line and a column: no path through the validation
/// loses the position.
#[test]
fn every_error_has_a_position() {
    let texts = [
        "[storage]\nbackend = 1\n",
        "[recording]\nroot = \"\"\n",
        "[sources]\nsynthetic = 3\n",
        "sources = 3\n",
        "[pipeline]\ncompressor_threads = 65\n",
        "[[sources.synthetic]]\n",
        "sources.synthetic = [{}]\n",
        "[[sources.synthetic]]\ntopic = 1\n",
        "[[sources.synthetic]]\ntopic = \"/a\"\ntype = \"std_msgs/msg/String\"\nrate = 1\nframe_id = 2\n",
        "[[sources.synthetic]]\ntopic = \"/a\"\ntype = \"std_msgs/msg/String\"\nrate = true\n",
        "[mcap]\nchunk_max_age = [1]\n",
        "[storage]\nsync_interval = \"1 fortnight\"\n",
        "[\n",
    ];
    for text in texts {
        let err = error(text);
        assert!(
            err.line.is_some() && err.column.is_some(),
            "{text:?}: {err}"
        );
    }
}

#[test]
fn phc_source_without_a_clock() {
    let err = error("[clock]\nsource = \"phc\"\n");
    assert_error(
        &err,
        (2, 10),
        Some("clock.source"),
        "source \"phc\" needs the PTP hardware clock",
        Some(
            "set clock.phc to a device (\"/dev/ptp0\") or a network interface (\"eth0\"); \
             `ethtool -T <interface>` shows its PHC index",
        ),
    );
}

#[test]
fn stage_deadline_not_below_the_watchdog_timeout() {
    let err = error("[health]\nwatchdog_timeout = \"4s\"\n");
    assert_error(
        &err,
        (2, 20),
        Some("health.watchdog_timeout"),
        "health.stage_deadline (5s) must be shorter than health.watchdog_timeout (4s), or a \
         stalled stage resets the board before it is noticed and written down",
        Some("make the stage deadline at most half of the watchdog timeout"),
    );
    // Without a hardware watchdog the deadline stands on its own.
    let config = Config::parse(
        "[health]\nwatchdog = \"\"\nwatchdog_timeout = \"4s\"\n",
        Path::new("edgerec.toml"),
    )
    .unwrap();
    assert_eq!(config.health.stage_deadline.as_secs(), 5);
    let err = error("[health]\nwatchdog_timeout = \"2.5s\"\n");
    assert_error(
        &err,
        (2, 20),
        Some("health.watchdog_timeout"),
        "the watchdog timeout is set in whole seconds",
        Some("write \"3s\""),
    );
}

#[test]
fn prometheus_address() {
    let err = error("[health]\nprometheus = \"localhost\"\n");
    assert_error(
        &err,
        (2, 14),
        Some("health.prometheus"),
        "`localhost` is not an IP address and port",
        Some("write \"127.0.0.1:9464\", or \"\" to turn the endpoint off"),
    );
}

#[test]
fn led_states_and_patterns() {
    let err = error("[leds.states]\nrecordng = { status = \"on\" }\n");
    assert_error(
        &err,
        (2, 1),
        Some("leds.states.recordng"),
        "unknown health state",
        Some(
            "did you mean `recording`? (health states: booting, idle, recording, degraded, \
             fault, disk-full, paused)",
        ),
    );
    let err = error("[leds.states]\nfault = { status = \"blink:0/100\" }\n");
    assert_error(
        &err,
        (2, 20),
        Some("leds.states.fault.status"),
        "0 ms in `blink:0/100` is outside 1..60000 ms",
        Some(
            "patterns: \"off\", \"on\", \"blink\" (500/500 ms), \"blink-fast\" (100/100 ms), \
             \"blink:ON_MS/OFF_MS\"",
        ),
    );
    let err = error("[leds.states]\nidle = \"on\"\n");
    assert_error(
        &err,
        (2, 8),
        Some("leds.states.idle"),
        "expected a table of LED name = pattern, found a string",
        Some("write idle = { \"status\" = \"on\" }"),
    );
    let err = error("[leds.states.idle]\n\"a/b\" = \"on\"\n");
    assert_error(
        &err,
        (2, 1),
        Some("leds.states.idle.a/b"),
        "`a/b` is not an LED name",
        Some("use the directory name under /sys/class/leds, e.g. \"status\""),
    );
}

const FAULT_FORMS: &str = "faults: panic-every:DURATION, error-every:DURATION, \
                           stall-for:DURATION, malformed-every:N, with DURATION such as \"2s\" \
                           or \"500ms\" and N a count of messages from 1";

#[test]
fn invalid_fault() {
    let channel = |fault: &str| {
        error(&format!(
            "[[sources.synthetic]]\ntopic = \"/a\"\ntype = \"sensor_msgs/msg/Imu\"\nrate = 1\nfault = {fault}\n"
        ))
    };
    let key = Some("sources.synthetic[0].fault");
    assert_error(
        &channel("\"panic:2s\""),
        (5, 9),
        key,
        "unknown fault `panic:2s`",
        Some(FAULT_FORMS),
    );
    assert_error(
        &channel("\"stall-fr:5s\""),
        (5, 9),
        key,
        "unknown fault `stall-fr:5s`",
        Some(&format!("did you mean `stall-for:5s`? ({FAULT_FORMS})")),
    );
    assert_error(
        &channel("\"panic-every:0s\""),
        (5, 9),
        key,
        "`panic-every:0s`: the duration must be more than 0",
        Some(FAULT_FORMS),
    );
    assert_error(
        &channel("\"error-every:-2s\""),
        (5, 9),
        key,
        "`error-every:-2s`: a duration must not be negative",
        Some(FAULT_FORMS),
    );
    assert_error(
        &channel("\"stall-for:5\""),
        (5, 9),
        key,
        "`stall-for:5`: a duration needs a unit",
        Some(&format!("write \"5s\" or \"5ms\"; {FAULT_FORMS}")),
    );
    assert_error(
        &channel("\"panic-every\""),
        (5, 9),
        key,
        "`panic-every`: empty duration",
        Some(&format!(
            "write a number with a unit, e.g. \"1s\"; {FAULT_FORMS}"
        )),
    );
    assert_error(
        &channel("2"),
        (5, 9),
        key,
        "expected a string, found an integer",
        Some(FAULT_FORMS),
    );
    for bad in [
        "malformed-every:0",
        "malformed-every:2s",
        "malformed-every",
        "malformed-every:-1",
    ] {
        assert_error(
            &channel(&format!("\"{bad}\"")),
            (5, 9),
            key,
            &format!("`{bad}`: N must be a whole number of messages, 1 or more"),
            Some(&format!(
                "write \"malformed-every:10\" for every 10th message; {FAULT_FORMS}"
            )),
        );
    }
    assert_eq!(
        channel("\"panic:2s\"").to_string(),
        format!(
            "edgerec.toml:5:9: sources.synthetic[0].fault: unknown fault `panic:2s`; {FAULT_FORMS}"
        )
    );
}

#[test]
fn restart_backoff_out_of_range() {
    let err = error("[sources]\nrestart_backoff_min = \"0s\"\n");
    assert_error(
        &err,
        (2, 23),
        Some("sources.restart_backoff_min"),
        "must be from 1ms to 10s, got 0s",
        None,
    );
    let err = error("[sources]\nrestart_backoff_max = \"2h\"\n");
    assert_error(
        &err,
        (2, 23),
        Some("sources.restart_backoff_max"),
        "must be from 100ms to 1h, got 2h",
        None,
    );
    let err = error("[sources]\nrestart_backoff_max = 30\n");
    assert_error(
        &err,
        (2, 23),
        Some("sources.restart_backoff_max"),
        "a duration needs a unit",
        Some("write \"30s\" or \"30ms\""),
    );
}

/// Like memory_budget against chunk_size: the error is on the key written
/// later, or on the one the file sets when the other is the default.
#[test]
fn restart_backoff_max_below_min() {
    let hint = |min: &str| {
        format!(
            "raise sources.restart_backoff_max to at least \"{min}\" or lower \
             sources.restart_backoff_min"
        )
    };
    let err = error("[sources]\nrestart_backoff_min = \"2s\"\nrestart_backoff_max = \"1s\"\n");
    assert_error(
        &err,
        (3, 23),
        Some("sources.restart_backoff_max"),
        "must be at least sources.restart_backoff_min (2s), got 1s",
        Some(&hint("2s")),
    );
    let err = error("[sources]\nrestart_backoff_max = \"1s\"\nrestart_backoff_min = \"2s\"\n");
    assert_error(
        &err,
        (3, 23),
        Some("sources.restart_backoff_min"),
        "must be at most sources.restart_backoff_max (1s), got 2s",
        Some(&hint("2s")),
    );
    let err = error("[sources]\nrestart_backoff_max = \"50ms\"\n");
    assert_error(
        &err,
        (2, 23),
        Some("sources.restart_backoff_max"),
        "must be from 100ms to 1h, got 50ms",
        None,
    );
    let err =
        error("[sources]\nrestart_backoff_max = \"150ms\"\nrestart_backoff_min = \"200ms\"\n");
    assert_error(
        &err,
        (3, 23),
        Some("sources.restart_backoff_min"),
        "must be at most sources.restart_backoff_max (150ms), got 200ms",
        Some(&hint("200ms")),
    );
}

const VOLTAGE_FORMS: &str = "write VOLTS, then VOLTS@DURATION for each later step, times \
                             increasing from the source's first message, such as \
                             voltage = \"12.6, 11.8@3s, 12.6@6s\"";

/// A battery channel's voltage profile: each bad form names the key, the
/// step and how to write a profile, at the value's line and column.
#[test]
fn invalid_voltage_profile() {
    let channel = |voltage: &str| {
        error(&format!(
            "[[sources.synthetic]]\ntopic = \"/battery\"\ntype = \"sensor_msgs/msg/BatteryState\"\n\
             rate = 10\nvoltage = {voltage}\n"
        ))
    };
    let key = Some("sources.synthetic[0].voltage");
    assert_error(
        &channel("\"12.6, x@3s\""),
        (5, 11),
        key,
        "`12.6, x@3s`: step 2 `x@3s`: `x` is not a number of volts",
        Some(VOLTAGE_FORMS),
    );
    assert_error(
        &channel("\"12.6@3s, 11.8@1s\""),
        (5, 11),
        key,
        "`12.6@3s, 11.8@1s`: step 2 `11.8@1s` starts at 1s, not after the step before it (3s)",
        Some(VOLTAGE_FORMS),
    );
    assert_error(
        &channel("\"\""),
        (5, 11),
        key,
        "``: is empty",
        Some(VOLTAGE_FORMS),
    );
    assert_error(
        &channel("12.6"),
        (5, 11),
        key,
        "expected a string, found a float",
        Some("put it in quotes: \"12.6\""),
    );
    assert_eq!(
        channel("\"12.6, x@3s\"").to_string(),
        format!(
            "edgerec.toml:5:11: sources.synthetic[0].voltage: `12.6, x@3s`: step 2 `x@3s`: \
             `x` is not a number of volts; {VOLTAGE_FORMS}"
        )
    );
}

/// Five bytes a fuzzer found (`==`, newline, `.=`) that panicked inside
/// toml_edit 0.23 ("all items have spans"): a syntax error at a line and
/// column now, like any other.
#[test]
fn the_toml_edit_span_panic_is_a_syntax_error() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/finds/config_parse/config-toml-edit-span-panic.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.as_bytes(), b"==\n.=");
    let err = error(&text);
    assert_eq!(err.path, PathBuf::from("edgerec.toml"), "{err}");
    assert_eq!((err.line, err.column), (Some(1), Some(2)), "{err}");
    assert!(err.message.contains('='), "{err}");
}

#[test]
fn offload_keys_say_what_is_wrong() {
    let cases = [
        ("endpoint = \"s3.example.com\"", "starts with https://"),
        ("endpoint = \"https://\"", "has no host"),
        ("endpoint = \"http://minio:9000\"", "in the clear"),
        ("bucket = \"Fleet_Recordings\"", "is not a bucket name"),
        ("region = \"eu central\"", "is not a region"),
        ("key_template = \"{vehicle}/{session}\"", "has no {file}"),
        (
            "key_template = \"{vehicle}/{when}/{file}\"",
            "unknown placeholder `{when}`",
        ),
        ("key_template = \"/{file}\"", "no leading `/`"),
        ("vehicle_id = \"robot 7\"", "is not a vehicle id"),
        ("addressing = \"host\"", "addressing"),
        ("part_size = \"1MiB\"", "part_size"),
        ("concurrency = 0", "concurrency"),
        (
            "client_cert = \"/data/edgerec/vehicle.pem\"",
            "offload.client_key is not",
        ),
        (
            "client_key = \"/data/edgerec/vehicle.key\"",
            "offload.client_cert is not",
        ),
        ("sse = \"aes256\"", "sse"),
        ("sse_kms_key_id = \"alias/fleet\"", "only used with SSE-KMS"),
        ("sse_kms_key_id = \"key id\"", "is not a KMS key id"),
        ("upload = \"all\"", "needs a store to send to"),
        ("upload = \"events\"", "needs a store to send to"),
        ("upload = \"some\"", "upload"),
        ("max_rate = \"1KiB\"", "too low"),
        ("max_rate = \"1M\"", "ambiguous size unit"),
        ("windows = [\"25:00-06:00\"]", "is not a time window"),
        ("windows = [\"06:00-06:00\"]", "is not a time window"),
        ("windows = [\"6-8\"]", "is not a time window"),
        ("windows = \"22:00-06:00\"", "an array of strings"),
        (
            "interfaces = [\"wlan/0\"]",
            "is not a network interface name",
        ),
        (
            "metered_interfaces = [\"a-very-long-interface\"]",
            "is not a network interface name",
        ),
    ];
    for (line, want) in cases {
        let text = format!("[offload]\n{line}\n");
        let err = edgerec_config::Config::parse(&text, std::path::Path::new("edgerec.toml"))
            .expect_err(line);
        let shown = err.to_string();
        assert!(shown.contains(want), "{line}: {shown}");
        assert!(shown.starts_with("edgerec.toml:2:"), "{line}: {shown}");
    }
    let ok = edgerec_config::Config::parse(
        "[offload]\nendpoint = \"http://127.0.0.1:9000/\"\nallow_http = true\nbucket = \"a.b-c\"\n",
        std::path::Path::new("edgerec.toml"),
    )
    .unwrap();
    assert_eq!(ok.offload.endpoint, "http://127.0.0.1:9000");
    let kms = edgerec_config::Config::parse(
        "[offload]\nsse = \"aws:kms\"\nsse_kms_key_id = \"alias/fleet\"\n",
        std::path::Path::new("edgerec.toml"),
    )
    .unwrap();
    assert_eq!(kms.offload.sse, edgerec_config::Sse::Kms);
    assert_eq!(kms.offload.sse_kms_key_id, "alias/fleet");
    let link = edgerec_config::Config::parse(
        "[offload]\nmax_rate = \"1MB\"\nwindows = [\"22:00-06:00\", \"12:00-13:30\"]\n\
         interfaces = [\"wlan0\", \"wwan0\"]\nmetered_interfaces = [\"wwan0\"]\n",
        std::path::Path::new("edgerec.toml"),
    )
    .unwrap();
    assert_eq!(link.offload.max_rate, 1_000_000);
    let w = &link.offload.windows;
    assert_eq!((w[0].start, w[0].end), (22 * 60, 6 * 60));
    assert_eq!(w[0].text(), "22:00-06:00");
    // Across midnight: 23:59 and 00:00 in, 06:00 (its end) and noon out.
    assert!(w[0].contains(23 * 60 + 59) && w[0].contains(0));
    assert!(!w[0].contains(6 * 60) && !w[0].contains(12 * 60));
    assert!(w[1].contains(12 * 60) && w[1].contains(13 * 60 + 29));
    assert!(!w[1].contains(13 * 60 + 30));
    assert_eq!(link.offload.metered_interfaces, ["wwan0"]);
}

#[test]
fn a_metrics_endpoint_off_loopback_needs_saying_so() {
    let err = error("[health]\nprometheus = \"0.0.0.0:9464\"\n");
    assert_error(
        &err,
        (2, 14),
        Some("health.prometheus"),
        "health.prometheus 0.0.0.0:9464 is reachable from other machines, and the metrics \
         endpoint has no authentication",
        Some(
            "bind 127.0.0.1:9464 (scrape it through an SSH tunnel or a local agent), or set \
             health.prometheus_remote = true to serve it to the network on purpose",
        ),
    );
    for ok in [
        "[health]\nprometheus = \"127.0.0.1:9464\"\n",
        "[health]\nprometheus = \"[::1]:9464\"\n",
        "[health]\nprometheus = \"0.0.0.0:9464\"\nprometheus_remote = true\n",
    ] {
        let config = Config::parse(ok, Path::new("edgerec.toml")).unwrap();
        assert!(!config.health.prometheus.is_empty(), "{ok}");
    }
}

#[test]
fn the_fleet_link_is_mqtt_over_mutual_tls() {
    let err = error("[remote]\nbroker = \"mqtt://10.0.0.1:1883\"\n");
    assert_error(
        &err,
        (2, 10),
        Some("remote.broker"),
        "`mqtt://10.0.0.1:1883` is not a broker's URL: the link is MQTT over TLS only \
         (mqtts://): a vehicle's commands and status must not cross the network in the clear",
        Some(
            "write e.g. \"mqtts://mqtt.fleet.example:8883\" (MQTT over TLS; the port defaults \
             to 8883)",
        ),
    );
    let err = error("[remote]\nbroker = \"mqtts://mqtt.example\"\ncert_file = \"/data/v.pem\"\n");
    assert_error(
        &err,
        (2, 10),
        Some("remote.broker"),
        "remote.broker is set but remote.key_file is not",
        Some(
            "the vehicle shows the broker its certificate (mutual TLS): set remote.cert_file \
             and remote.key_file, or remote.broker = \"\"",
        ),
    );
    let err = error("[remote]\ntopic_prefix = \"fleet/+/x\"\n");
    assert_eq!(err.key.as_deref(), Some("remote.topic_prefix"), "{err}");
    assert!(err.message.contains("wildcard"), "{err}");
    let config = Config::parse(
        "[remote]\nbroker = \"mqtts://[::1]:8884\"\ncert_file = \"/data/v.pem\"\nkey_file = \"/data/v.key\"\ntopic_prefix = \"fleet/eu/robot-7\"\n",
        Path::new("edgerec.toml"),
    )
    .unwrap();
    assert_eq!(config.remote.topic_prefix, "fleet/eu/robot-7");
}
