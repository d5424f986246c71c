//! From TOML text to a validated [`Config`]: the parsed document (which
//! keeps the byte span of every key and value) is walked table by table
//! against the schema, so that every error, whether a misspelt key, a wrong
//! type or a value out of range, points at the line and column it is about.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml_edit::{Item, TableLike, Value};

use crate::config::limits;
use crate::error::line_column;
use crate::units::{parse_duration, parse_size, Size, Time, UnitError};
use crate::{
    ClockConfig, ClockSourceKind, Compression, Config, ConfigError, HealthConfig, LedsConfig,
    McapConfig, MetricsConfig, PipelineConfig, Rate, RecordingConfig, RetentionConfig, RosDistro,
    SegmentConfig, SourceFault, SourcesConfig, StorageBackend, StorageConfig, SyntheticChannel,
    SyntheticKind, HEALTH_STATES,
};

type Result<T> = std::result::Result<T, ConfigError>;

const ROOT_KEYS: &[&str] = &[
    "recording",
    "storage",
    "mcap",
    "pipeline",
    "sources",
    "segment",
    "retention",
    "clock",
    "health",
    "metrics",
    "leds",
];
const CLOCK_KEYS: &[&str] = &[
    "source",
    "phc",
    "ptp4l_socket",
    "domain",
    "poll_interval",
    "lock_threshold",
    "lock_time",
    "holdover_max",
];
const HEALTH_KEYS: &[&str] = &[
    "watchdog",
    "watchdog_timeout",
    "stage_deadline",
    "fault_file",
    "status_socket",
    "record_status",
    "record_clock",
    "prometheus",
    "disk_low_percent",
    "drops_window",
];
const METRICS_KEYS: &[&str] = &["nvml", "sys_root", "proc_root"];
const LEDS_KEYS: &[&str] = &["sysfs_root", "states"];
const SEGMENT_KEYS: &[&str] = &["max_bytes", "max_duration", "max_messages"];
const RETENTION_KEYS: &[&str] = &["max_total_bytes", "min_free_bytes", "min_free_percent"];
const RECORDING_KEYS: &[&str] = &["root", "session_prefix", "ros_distro"];
const STORAGE_KEYS: &[&str] = &[
    "backend",
    "block_size",
    "queue_depth",
    "sync_interval",
    "preallocate",
    "realtime_priority",
];
const MCAP_KEYS: &[&str] = &[
    "chunk_size",
    "compression",
    "compression_level",
    "chunk_max_age",
];
const PIPELINE_KEYS: &[&str] = &["memory_budget", "compressor_threads", "queue_capacity"];
const SOURCES_KEYS: &[&str] = &["synthetic", "restart_backoff_min", "restart_backoff_max"];
const SYNTHETIC_KEYS: &[&str] = &[
    "topic",
    "type",
    "rate",
    "payload_size",
    "frame_id",
    "latched",
    "fault",
];

/// Every table and its keys, to say where a key that is in the wrong table
/// belongs.
const TABLES: &[(&str, &[&str])] = &[
    ("[recording]", RECORDING_KEYS),
    ("[storage]", STORAGE_KEYS),
    ("[mcap]", MCAP_KEYS),
    ("[pipeline]", PIPELINE_KEYS),
    ("[sources]", SOURCES_KEYS),
    ("[[sources.synthetic]]", SYNTHETIC_KEYS),
    ("[segment]", SEGMENT_KEYS),
    ("[retention]", RETENTION_KEYS),
    ("[clock]", CLOCK_KEYS),
    ("[health]", HEALTH_KEYS),
    ("[metrics]", METRICS_KEYS),
    ("[leds]", LEDS_KEYS),
];

pub(crate) fn parse(text: &str, origin: &Path) -> Result<Config> {
    let cx = Cx { text, origin };
    let document = toml_edit::Document::parse(text).map_err(|err| cx.syntax_error(&err))?;
    let root = Table {
        path: String::new(),
        name: "the top level".to_owned(),
        table: document.as_table(),
        span: None,
    };
    root.check_keys(&cx, ROOT_KEYS)?;

    let recording = match root.table(&cx, "recording")? {
        Some(table) => recording(&cx, &table)?,
        None => RecordingConfig::default(),
    };
    let storage = match root.table(&cx, "storage")? {
        Some(table) => storage(&cx, &table)?,
        None => StorageConfig::default(),
    };
    let (mcap, chunk_size_field) = match root.table(&cx, "mcap")? {
        Some(table) => mcap(&cx, &table)?,
        None => (McapConfig::default(), None),
    };
    let (pipeline, memory_budget_field) = match root.table(&cx, "pipeline")? {
        Some(table) => pipeline(&cx, &table)?,
        None => (PipelineConfig::default(), None),
    };
    check_budget(
        &cx,
        &mcap,
        &pipeline,
        chunk_size_field.as_ref(),
        memory_budget_field.as_ref(),
    )?;
    let sources = match root.table(&cx, "sources")? {
        Some(table) => sources(&cx, &table)?,
        None => SourcesConfig::default(),
    };
    let segment = match root.table(&cx, "segment")? {
        Some(table) => segment(&cx, &table)?,
        None => SegmentConfig::default(),
    };
    let retention = match root.table(&cx, "retention")? {
        Some(table) => retention(&cx, &table)?,
        None => RetentionConfig::default(),
    };
    let clock = match root.table(&cx, "clock")? {
        Some(table) => clock(&cx, &table)?,
        None => ClockConfig::default(),
    };
    let health = match root.table(&cx, "health")? {
        Some(table) => health(&cx, &table)?,
        None => HealthConfig::default(),
    };
    let metrics = match root.table(&cx, "metrics")? {
        Some(table) => metrics(&cx, &table)?,
        None => MetricsConfig::default(),
    };
    let leds = match root.table(&cx, "leds")? {
        Some(table) => leds(&cx, &table)?,
        None => LedsConfig::default(),
    };
    Ok(Config {
        recording,
        storage,
        mcap,
        pipeline,
        sources,
        segment,
        retention,
        clock,
        health,
        metrics,
        leds,
    })
}

fn clock(cx: &Cx, table: &Table) -> Result<ClockConfig> {
    table.check_keys(cx, CLOCK_KEYS)?;
    let mut config = ClockConfig::default();
    let mut source_field = None;
    if let Some(field) = table.field("source") {
        config.source = cx.choice(&field, &ClockSourceKind::ALL, ClockSourceKind::as_str)?;
        source_field = Some(field);
    }
    if let Some(field) = table.field("phc") {
        config.phc = cx.string(&field)?.to_owned();
    }
    if let Some(field) = table.field("ptp4l_socket") {
        config.ptp4l_socket = PathBuf::from(cx.string(&field)?);
    }
    if let Some(field) = table.field("domain") {
        config.domain = cx.integer_in(&field, (0, 255))? as u8;
    }
    if let Some(field) = table.field("poll_interval") {
        config.poll_interval = cx.duration_in(&field, limits::POLL_INTERVAL)?;
    }
    if let Some(field) = table.field("lock_threshold") {
        config.lock_threshold = cx.duration_in(&field, limits::LOCK_THRESHOLD)?;
    }
    if let Some(field) = table.field("lock_time") {
        config.lock_time = cx.duration_in(&field, limits::LOCK_TIME)?;
    }
    if let Some(field) = table.field("holdover_max") {
        config.holdover_max = cx.duration_in(&field, limits::HOLDOVER_MAX)?;
    }
    if let Some(field) = source_field {
        if config.source == ClockSourceKind::Phc && config.phc.is_empty() {
            return Err(cx.at(
                &field,
                "source \"phc\" needs the PTP hardware clock",
                Some(
                    "set clock.phc to a device (\"/dev/ptp0\") or a network interface \
                     (\"eth0\"); `ethtool -T <interface>` shows its PHC index"
                        .to_owned(),
                ),
            ));
        }
    }
    Ok(config)
}

fn health(cx: &Cx, table: &Table) -> Result<HealthConfig> {
    table.check_keys(cx, HEALTH_KEYS)?;
    let mut config = HealthConfig::default();
    if let Some(field) = table.field("watchdog") {
        config.watchdog = PathBuf::from(cx.string(&field)?);
    }
    let timeout_field = table.field("watchdog_timeout");
    if let Some(field) = &timeout_field {
        config.watchdog_timeout = cx.duration_in(field, limits::WATCHDOG_TIMEOUT)?;
        if config.watchdog_timeout.subsec_nanos() != 0 {
            return Err(cx.at(
                field,
                "the watchdog timeout is set in whole seconds",
                Some(format!(
                    "write \"{}s\"",
                    config.watchdog_timeout.as_secs_f64().ceil()
                )),
            ));
        }
    }
    let deadline_field = table.field("stage_deadline");
    if let Some(field) = &deadline_field {
        config.stage_deadline = cx.duration_in(field, limits::STAGE_DEADLINE)?;
    }
    if !config.watchdog.as_os_str().is_empty() && config.stage_deadline >= config.watchdog_timeout {
        if let Some(field) = deadline_field.as_ref().or(timeout_field.as_ref()) {
            return Err(cx.at(
                field,
                format!(
                    "health.stage_deadline ({}) must be shorter than health.watchdog_timeout \
                     ({}), or a stalled stage resets the board before it is noticed and \
                     written down",
                    Time(config.stage_deadline),
                    Time(config.watchdog_timeout)
                ),
                Some("make the stage deadline at most half of the watchdog timeout".to_owned()),
            ));
        }
    }
    if let Some(field) = table.field("fault_file") {
        config.fault_file = PathBuf::from(cx.string(&field)?);
    }
    if let Some(field) = table.field("status_socket") {
        config.status_socket = PathBuf::from(cx.string(&field)?);
    }
    if let Some(field) = table.field("record_status") {
        config.record_status = cx.boolean(&field)?;
    }
    if let Some(field) = table.field("record_clock") {
        config.record_clock = cx.boolean(&field)?;
    }
    if let Some(field) = table.field("prometheus") {
        let address = cx.string(&field)?;
        if !address.is_empty() && address.parse::<std::net::SocketAddr>().is_err() {
            return Err(cx.at(
                &field,
                format!("`{address}` is not an IP address and port"),
                Some("write \"127.0.0.1:9464\", or \"\" to turn the endpoint off".to_owned()),
            ));
        }
        config.prometheus = address.to_owned();
    }
    if let Some(field) = table.field("disk_low_percent") {
        config.disk_low_percent = cx.integer_in(&field, limits::DISK_LOW_PERCENT)? as u8;
    }
    if let Some(field) = table.field("drops_window") {
        config.drops_window = cx.duration_in(&field, limits::DROPS_WINDOW)?;
    }
    Ok(config)
}

fn metrics(cx: &Cx, table: &Table) -> Result<MetricsConfig> {
    table.check_keys(cx, METRICS_KEYS)?;
    let mut config = MetricsConfig::default();
    if let Some(field) = table.field("nvml") {
        config.nvml = cx.boolean(&field)?;
    }
    for (key, slot) in [
        ("sys_root", &mut config.sys_root),
        ("proc_root", &mut config.proc_root),
    ] {
        if let Some(field) = table.field(key) {
            let path = cx.string(&field)?;
            if path.is_empty() {
                return Err(cx.at(&field, "must not be empty", None));
            }
            *slot = PathBuf::from(path);
        }
    }
    Ok(config)
}

fn leds(cx: &Cx, table: &Table) -> Result<LedsConfig> {
    table.check_keys(cx, LEDS_KEYS)?;
    let mut config = LedsConfig::default();
    if let Some(field) = table.field("sysfs_root") {
        let path = cx.string(&field)?;
        if path.is_empty() {
            return Err(cx.at(&field, "must not be empty", None));
        }
        config.sysfs_root = PathBuf::from(path);
    }
    let Some(states) = table.table(cx, "states")? else {
        return Ok(config);
    };
    for (state, _) in states.table.iter() {
        let Some(field) = states.field(state) else {
            continue;
        };
        if !HEALTH_STATES.contains(&state) {
            let listing = HEALTH_STATES.join(", ");
            let hint = match nearest(state, HEALTH_STATES.iter().copied()) {
                Some(near) => format!("did you mean `{near}`? (health states: {listing})"),
                None => format!("health states: {listing}"),
            };
            let span = states.table.key(state).and_then(|k| k.span());
            return Err(cx.error(span, Some(field.key), "unknown health state", Some(hint)));
        }
        let Some(leds) = field.item.as_table_like() else {
            return Err(cx.wrong_type(
                &field,
                "a table of LED name = pattern",
                Some(format!("write {state} = {{ \"status\" = \"on\" }}")),
            ));
        };
        let leds = Table {
            path: field.key.clone(),
            name: format!("[leds.states.{state}]"),
            table: leds,
            span: field.span(),
        };
        let mut list = Vec::new();
        for (led, _) in leds.table.iter() {
            let Some(pattern_field) = leds.field(led) else {
                continue;
            };
            if led.is_empty() || led.contains('/') || led == "." || led == ".." {
                let span = leds.table.key(led).and_then(|k| k.span());
                return Err(cx.error(
                    span,
                    Some(pattern_field.key),
                    format!("`{led}` is not an LED name"),
                    Some(
                        "use the directory name under /sys/class/leds, e.g. \"status\"".to_owned(),
                    ),
                ));
            }
            let pattern = cx.string(&pattern_field)?;
            check_led_pattern(pattern).map_err(|message| {
                cx.at(
                    &pattern_field,
                    message,
                    Some(
                        "patterns: \"off\", \"on\", \"blink\" (500/500 ms), \"blink-fast\" \
                         (100/100 ms), \"blink:ON_MS/OFF_MS\""
                            .to_owned(),
                    ),
                )
            })?;
            list.push((led.to_owned(), pattern.to_owned()));
        }
        config.states.push((state.to_owned(), list));
    }
    Ok(config)
}

/// The pattern grammar the health crate's LED driver reads; checked here
/// so a bad pattern is a config error with its line.
fn check_led_pattern(pattern: &str) -> std::result::Result<(), String> {
    match pattern {
        "off" | "on" | "blink" | "blink-fast" => Ok(()),
        _ => {
            let Some(times) = pattern.strip_prefix("blink:") else {
                return Err(format!("unknown LED pattern `{pattern}`"));
            };
            let (on, off) = times
                .split_once('/')
                .ok_or_else(|| format!("`{pattern}` needs ON_MS/OFF_MS after `blink:`"))?;
            for part in [on, off] {
                let ms: u64 = part
                    .trim()
                    .parse()
                    .map_err(|_| format!("`{part}` in `{pattern}` is not a number of ms"))?;
                if !(limits::LED_DELAY_MS.0..=limits::LED_DELAY_MS.1).contains(&ms) {
                    return Err(format!(
                        "{ms} ms in `{pattern}` is outside {}..{} ms",
                        limits::LED_DELAY_MS.0,
                        limits::LED_DELAY_MS.1
                    ));
                }
            }
            Ok(())
        }
    }
}

fn segment(cx: &Cx, table: &Table) -> Result<SegmentConfig> {
    table.check_keys(cx, SEGMENT_KEYS)?;
    let mut config = SegmentConfig::default();
    if let Some(field) = table.field("max_bytes") {
        config.max_bytes = cx.size_in(&field, limits::SEGMENT_BYTES)?;
    }
    if let Some(field) = table.field("max_duration") {
        config.max_duration = cx.duration_in(&field, limits::SEGMENT_DURATION)?;
    }
    if let Some(field) = table.field("max_messages") {
        config.max_messages = cx.integer_in(&field, (0, i64::MAX))? as u64;
    }
    Ok(config)
}

fn retention(cx: &Cx, table: &Table) -> Result<RetentionConfig> {
    table.check_keys(cx, RETENTION_KEYS)?;
    let mut config = RetentionConfig::default();
    if let Some(field) = table.field("max_total_bytes") {
        config.max_total_bytes = cx.size(&field)?;
    }
    if let Some(field) = table.field("min_free_bytes") {
        config.min_free_bytes = cx.size(&field)?;
    }
    if let Some(field) = table.field("min_free_percent") {
        config.min_free_percent = cx.integer_in(&field, limits::MIN_FREE_PERCENT)? as u8;
    }
    Ok(config)
}

fn recording(cx: &Cx, table: &Table) -> Result<RecordingConfig> {
    table.check_keys(cx, RECORDING_KEYS)?;
    let mut config = RecordingConfig::default();
    if let Some(field) = table.field("root") {
        let root = cx.string(&field)?;
        if root.is_empty() {
            return Err(cx.at(&field, "must not be empty", None));
        }
        config.root = PathBuf::from(root);
    }
    if let Some(field) = table.field("session_prefix") {
        let prefix = cx.string(&field)?;
        check_session_prefix(prefix).map_err(|(message, hint)| cx.at(&field, message, hint))?;
        config.session_prefix = prefix.to_owned();
    }
    if let Some(field) = table.field("ros_distro") {
        config.ros_distro = cx.choice(&field, &RosDistro::ALL, RosDistro::as_str)?;
    }
    Ok(config)
}

fn storage(cx: &Cx, table: &Table) -> Result<StorageConfig> {
    table.check_keys(cx, STORAGE_KEYS)?;
    let mut config = StorageConfig::default();
    if let Some(field) = table.field("backend") {
        config.backend = cx.choice(&field, &StorageBackend::ALL, StorageBackend::as_str)?;
    }
    if let Some(field) = table.field("block_size") {
        config.block_size = cx.size(&field)?;
        cx.power_of_two_size(&field, config.block_size, limits::BLOCK_SIZE)?;
    }
    if let Some(field) = table.field("queue_depth") {
        config.queue_depth = cx.integer_in(&field, limits::QUEUE_DEPTH)? as u32;
    }
    if let Some(field) = table.field("sync_interval") {
        config.sync_interval = cx.duration_in(&field, limits::SYNC_INTERVAL)?;
    }
    if let Some(field) = table.field("preallocate") {
        let preallocate = cx.size(&field)?;
        if preallocate != 0 && !(config.block_size..=limits::PREALLOCATE_MAX).contains(&preallocate)
        {
            return Err(cx.at(
                &field,
                format!(
                    "must be 0 (off) or from block_size ({}) to {}, got {}",
                    Size(config.block_size),
                    Size(limits::PREALLOCATE_MAX),
                    Size(preallocate)
                ),
                None,
            ));
        }
        config.preallocate = preallocate;
    }
    if let Some(field) = table.field("realtime_priority") {
        config.realtime_priority = cx.integer_in(&field, limits::REALTIME_PRIORITY)? as u8;
    }
    Ok(config)
}

fn mcap<'d>(cx: &Cx, table: &Table<'d>) -> Result<(McapConfig, Option<Field<'d>>)> {
    table.check_keys(cx, MCAP_KEYS)?;
    let mut config = McapConfig::default();
    let chunk_size = table.field("chunk_size");
    if let Some(field) = &chunk_size {
        config.chunk_size = cx.size_in(field, limits::CHUNK_SIZE)?;
    }
    if let Some(field) = table.field("compression") {
        config.compression = cx.choice(&field, &Compression::ALL, Compression::as_str)?;
    }
    if let Some(field) = table.field("compression_level") {
        // lz4 and none have no levels: the key is then ignored, but it
        // still has to be a level zstd could use if compression changes.
        let bounds = match config.compression {
            Compression::Zstd => limits::ZSTD_LEVEL,
            Compression::Lz4 | Compression::None => (i64::from(i32::MIN), i64::from(i32::MAX)),
        };
        config.compression_level = cx.integer_in(&field, bounds)? as i32;
    }
    if let Some(field) = table.field("chunk_max_age") {
        config.chunk_max_age = cx.duration_in(&field, limits::CHUNK_MAX_AGE)?;
    }
    Ok((config, chunk_size))
}

fn pipeline<'d>(cx: &Cx, table: &Table<'d>) -> Result<(PipelineConfig, Option<Field<'d>>)> {
    table.check_keys(cx, PIPELINE_KEYS)?;
    let mut config = PipelineConfig::default();
    let memory_budget = table.field("memory_budget");
    if let Some(field) = &memory_budget {
        config.memory_budget = cx.size_in(field, limits::MEMORY_BUDGET)?;
    }
    if let Some(field) = table.field("compressor_threads") {
        config.compressor_threads = cx.integer_in(&field, limits::COMPRESSOR_THREADS)? as usize;
    }
    if let Some(field) = table.field("queue_capacity") {
        // In range, so positive.
        let capacity = cx.integer_in(&field, limits::QUEUE_CAPACITY)? as u64;
        if !capacity.is_power_of_two() {
            let (below, above) = nearest_powers_of_two(capacity);
            return Err(cx.at(
                &field,
                format!(
                    "must be a power of two from {} to {}, got {capacity}",
                    limits::QUEUE_CAPACITY.0,
                    limits::QUEUE_CAPACITY.1
                ),
                Some(format!("the nearest powers of two are {below} and {above}")),
            ));
        }
        config.queue_capacity = capacity as usize;
    }
    Ok((config, memory_budget))
}

/// `pipeline.memory_budget >= 4 x mcap.chunk_size`, blamed on whichever of
/// the two the file sets (memory_budget when both are).
fn check_budget(
    cx: &Cx,
    mcap: &McapConfig,
    pipeline: &PipelineConfig,
    chunk_size: Option<&Field>,
    memory_budget: Option<&Field>,
) -> Result<()> {
    let needed = mcap.chunk_size * limits::CHUNKS_IN_BUDGET;
    if pipeline.memory_budget >= needed {
        return Ok(());
    }
    let hint = Some(format!(
        "raise pipeline.memory_budget to at least \"{}\" or lower mcap.chunk_size",
        Size(needed).to_string().replace(' ', "")
    ));
    match (memory_budget, chunk_size) {
        (Some(field), _) => Err(cx.at(
            field,
            format!(
                "must be at least {} x mcap.chunk_size ({}), got {}",
                limits::CHUNKS_IN_BUDGET,
                Size(needed),
                Size(pipeline.memory_budget)
            ),
            hint,
        )),
        (None, Some(field)) => Err(cx.at(
            field,
            format!(
                "needs pipeline.memory_budget of at least {} x chunk_size ({}), but memory_budget is {} (the default)",
                limits::CHUNKS_IN_BUDGET,
                Size(needed),
                Size(pipeline.memory_budget)
            ),
            hint,
        )),
        // The defaults satisfy the rule, so one of the two is in the file.
        (None, None) => Ok(()),
    }
}

fn sources(cx: &Cx, table: &Table) -> Result<SourcesConfig> {
    table.check_keys(cx, SOURCES_KEYS)?;
    let mut config = SourcesConfig::default();
    let backoff_min = table.field("restart_backoff_min");
    if let Some(field) = &backoff_min {
        config.restart_backoff_min = cx.duration_in(field, limits::RESTART_BACKOFF_MIN)?;
    }
    let backoff_max = table.field("restart_backoff_max");
    if let Some(field) = &backoff_max {
        config.restart_backoff_max = cx.duration_in(field, limits::RESTART_BACKOFF_MAX)?;
    }
    check_backoff(cx, &config, backoff_min.as_ref(), backoff_max.as_ref())?;
    let Some(field) = table.field("synthetic") else {
        return Ok(config);
    };
    let entries = synthetic_entries(cx, &field)?;
    // (topic, index, line) of each channel read so far.
    let mut seen: Vec<(String, usize, Option<usize>)> = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let (channel, topic_field) = synthetic(cx, entry)?;
        if let Some((_, first, line)) = seen.iter().find(|(topic, ..)| *topic == channel.topic) {
            let line = line.map_or(String::new(), |line| format!(" (line {line})"));
            return Err(cx.at(
                &topic_field,
                format!("duplicate topic `{}`", channel.topic),
                Some(format!(
                    "sources.synthetic[{first}]{line} already records it; give each channel its own topic"
                )),
            ));
        }
        seen.push((channel.topic.clone(), index, cx.line(topic_field.span())));
        config.synthetic.push(channel);
    }
    Ok(config)
}

/// `sources.restart_backoff_max >= sources.restart_backoff_min`, blamed on
/// whichever of the two comes later in the file (the one the file sets when
/// only one is).
fn check_backoff(
    cx: &Cx,
    config: &SourcesConfig,
    min: Option<&Field>,
    max: Option<&Field>,
) -> Result<()> {
    let (low, high) = (config.restart_backoff_min, config.restart_backoff_max);
    if high >= low {
        return Ok(());
    }
    let blame_max = match (min, max) {
        (Some(min), Some(max)) => {
            max.span().map(|span| span.start) > min.span().map(|span| span.start)
        }
        (None, Some(_)) => true,
        (Some(_), None) => false,
        // The defaults satisfy the rule, so one of the two is in the file.
        (None, None) => return Ok(()),
    };
    let hint = Some(format!(
        "raise sources.restart_backoff_max to at least \"{}\" or lower \
         sources.restart_backoff_min",
        Time(low)
    ));
    match (blame_max, min, max) {
        (true, _, Some(field)) => Err(cx.at(
            field,
            format!(
                "must be at least sources.restart_backoff_min ({}), got {}",
                Time(low),
                Time(high)
            ),
            hint,
        )),
        (false, Some(field), _) => {
            let default = if max.is_none() { " (the default)" } else { "" };
            Err(cx.at(
                field,
                format!(
                    "must be at most sources.restart_backoff_max ({}{default}), got {}",
                    Time(high),
                    Time(low)
                ),
                hint,
            ))
        }
        _ => Ok(()),
    }
}

/// The entries of `synthetic`, written either as `[[sources.synthetic]]`
/// tables or as an inline array of inline tables.
fn synthetic_entries<'d>(cx: &Cx, field: &Field<'d>) -> Result<Vec<Table<'d>>> {
    let entry = |index: usize, table: &'d dyn TableLike, span: Option<Range<usize>>| Table {
        path: format!("{}[{index}]", field.key),
        name: "[[sources.synthetic]]".to_owned(),
        table,
        span,
    };
    match field.item {
        Item::ArrayOfTables(array) => Ok(array
            .iter()
            .enumerate()
            .map(|(index, table)| entry(index, table, table.span()))
            .collect()),
        Item::Value(Value::Array(array)) => array
            .iter()
            .enumerate()
            .map(|(index, value)| match value.as_inline_table() {
                Some(table) => Ok(entry(index, table, value.span())),
                None => Err(cx.error(
                    value.span(),
                    Some(format!("{}[{index}]", field.key)),
                    format!("expected a table, found {}", a(value.type_name())),
                    None,
                )),
            })
            .collect(),
        item => Err(cx.at(
            field,
            format!("expected an array of tables, found {}", a(item.type_name())),
            Some("write one [[sources.synthetic]] table (double brackets) per channel".to_owned()),
        )),
    }
}

fn synthetic<'d>(cx: &Cx, table: &Table<'d>) -> Result<(SyntheticChannel, Field<'d>)> {
    table.check_keys(cx, SYNTHETIC_KEYS)?;
    let topic_field = table.required(
        cx,
        "topic",
        "add topic = \"/name\", a fully qualified ROS 2 topic name",
    )?;
    let topic = cx.string(&topic_field)?;
    check_topic(topic).map_err(|(message, hint)| cx.at(&topic_field, message, hint))?;

    let kinds = SyntheticKind::ALL.map(|kind| kind.ros_type()).join(", ");
    let kind_field = table.required(
        cx,
        "type",
        &format!(
            "add type = \"{}\" (types: {kinds})",
            SyntheticKind::Imu.ros_type()
        ),
    )?;
    let kind = cx.choice(&kind_field, &SyntheticKind::ALL, SyntheticKind::ros_type)?;

    let rate_field = table.required(cx, "rate", "add rate = 10 (in Hz) or rate = \"max\"")?;
    let rate = cx.rate(&rate_field)?;

    let mut channel = SyntheticChannel::new(topic, kind, rate);
    if let Some(field) = table.field("payload_size") {
        channel.payload_size = cx.size_in(&field, (0, limits::PAYLOAD_SIZE_MAX))?;
    }
    if let Some(field) = table.field("frame_id") {
        channel.frame_id = cx.string(&field)?.to_owned();
    }
    if let Some(field) = table.field("latched") {
        channel.latched = cx.boolean(&field)?;
    }
    if let Some(field) = table.field("fault") {
        channel.fault = Some(cx.fault(&field)?);
    }
    Ok((channel, topic_field))
}

/// ROS 2's rules for a fully qualified topic name (rmw
/// `rmw_validate_full_topic_name`), less the length limit, which depends on
/// the middleware.
fn check_topic(topic: &str) -> std::result::Result<(), (String, Option<String>)> {
    if !topic.starts_with('/') {
        return Err((
            "a topic name must start with `/`".to_owned(),
            Some(format!(
                "write \"/{topic}\": a recorder has no namespace to resolve a relative name in"
            )),
        ));
    }
    if let Some(bad) = topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '/'))
    {
        return Err((
            format!("`{topic}` contains `{bad}`, which a ROS 2 topic name cannot"),
            Some("use letters, digits, `_` and `/`".to_owned()),
        ));
    }
    if topic.contains("//") {
        return Err((format!("`{topic}` contains `//`, an empty name part"), None));
    }
    if topic.ends_with('/') {
        return Err((format!("`{topic}` must not end with `/`"), None));
    }
    if let Some(part) = topic
        .split('/')
        .find(|part| part.starts_with(|c: char| c.is_ascii_digit()))
    {
        return Err((
            format!(
                "`{topic}`: the part `{part}` starts with a digit, which a ROS 2 topic name cannot"
            ),
            None,
        ));
    }
    Ok(())
}

fn check_session_prefix(prefix: &str) -> std::result::Result<(), (String, Option<String>)> {
    let allowed =
        "use letters, digits, `_` and `-`: the prefix becomes part of directory and file names";
    if prefix.is_empty() {
        return Err(("must not be empty".to_owned(), Some(allowed.to_owned())));
    }
    let length = prefix.chars().count();
    if length > limits::SESSION_PREFIX_MAX {
        return Err((
            format!(
                "is {length} characters long, at most {} are allowed",
                limits::SESSION_PREFIX_MAX
            ),
            None,
        ));
    }
    if let Some(bad) = prefix
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err((
            format!("`{prefix}` contains `{bad}`, which is not allowed"),
            Some(allowed.to_owned()),
        ));
    }
    Ok(())
}

/// A table of the document (a `[header]` table, an inline table, a dotted
/// table or the root) with the dotted path that leads to it.
struct Table<'d> {
    /// `"storage"`, `"sources.synthetic[2]"`; empty for the root.
    path: String,
    /// How a message names the table: `"[storage]"`, `"the top level"`.
    name: String,
    table: &'d dyn TableLike,
    span: Option<Range<usize>>,
}

/// A key of a [`Table`] and its value.
struct Field<'d> {
    /// Dotted path: `"storage.block_size"`.
    key: String,
    key_span: Option<Range<usize>>,
    item: &'d Item,
}

impl Field<'_> {
    /// Where a message about the value points: the value, else its key.
    fn span(&self) -> Option<Range<usize>> {
        self.item.span().or_else(|| self.key_span.clone())
    }
}

impl<'d> Table<'d> {
    fn key_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    fn field(&self, key: &str) -> Option<Field<'d>> {
        let (found, item) = self.table.get_key_value(key)?;
        Some(Field {
            key: self.key_path(key),
            key_span: found.span(),
            item,
        })
    }

    fn required(&self, cx: &Cx, key: &str, hint: &str) -> Result<Field<'d>> {
        self.field(key).ok_or_else(|| {
            cx.error(
                self.span.clone(),
                Some(self.key_path(key)),
                format!("missing required key `{key}`"),
                Some(hint.to_owned()),
            )
        })
    }

    /// The sub-table `key`, `None` when absent.
    fn table(&self, cx: &Cx, key: &'static str) -> Result<Option<Table<'d>>> {
        let Some(field) = self.field(key) else {
            return Ok(None);
        };
        match field.item.as_table_like() {
            Some(table) => Ok(Some(Table {
                span: field.span(),
                path: field.key,
                name: format!("[{key}]"),
                table,
            })),
            None => Err(cx.at(
                &field,
                format!("expected a table, found {}", a(field.item.type_name())),
                Some(format!("write [{key}] and its keys on the lines below it")),
            )),
        }
    }

    /// Refuses the first key that is not in `valid`, suggesting the nearest
    /// valid one.
    fn check_keys(&self, cx: &Cx, valid: &[&str]) -> Result<()> {
        for (key, _) in self.table.iter() {
            if valid.contains(&key) {
                continue;
            }
            let listing = valid.join(", ");
            let hint = if let Some(near) = nearest(key, valid.iter().copied()) {
                format!("did you mean `{near}`? (valid keys: {listing})")
            } else if let Some((home, _)) = TABLES
                .iter()
                .find(|(home, keys)| keys.contains(&key) && *home != self.name)
            {
                format!(
                    "`{key}` belongs in {home}, not {} (valid keys here: {listing})",
                    self.name
                )
            } else {
                format!("valid keys: {listing}")
            };
            let span = self.table.key(key).and_then(|k| k.span());
            return Err(cx.error(span, Some(self.key_path(key)), "unknown key", Some(hint)));
        }
        Ok(())
    }
}

/// The text being parsed and its file name, for building errors.
struct Cx<'t> {
    text: &'t str,
    origin: &'t Path,
}

impl Cx<'_> {
    fn error(
        &self,
        span: Option<Range<usize>>,
        key: Option<String>,
        message: impl Into<String>,
        hint: Option<String>,
    ) -> ConfigError {
        let position = span.map(|span| line_column(self.text, span.start));
        ConfigError {
            path: self.origin.to_path_buf(),
            line: position.map(|(line, _)| line),
            column: position.map(|(_, column)| column),
            key,
            message: message.into(),
            hint,
        }
    }

    /// An error about `field`'s value.
    fn at(&self, field: &Field, message: impl Into<String>, hint: Option<String>) -> ConfigError {
        self.error(field.span(), Some(field.key.clone()), message, hint)
    }

    fn line(&self, span: Option<Range<usize>>) -> Option<usize> {
        span.map(|span| line_column(self.text, span.start).0)
    }

    fn syntax_error(&self, err: &toml_edit::TomlError) -> ConfigError {
        let mut message = err.message().trim().to_owned();
        // toml_edit says only "duplicate key"; the span names it.
        if let Some(span) = err.span() {
            if message == "duplicate key" {
                if let Some(key) = self.text.get(span.clone()) {
                    message = format!("duplicate key `{}`", key.trim());
                }
            }
        }
        self.error(err.span(), None, message, None)
    }

    fn unit_error(&self, field: &Field, err: UnitError) -> ConfigError {
        self.at(field, err.message, err.hint)
    }

    fn wrong_type(&self, field: &Field, expected: &str, hint: Option<String>) -> ConfigError {
        self.at(
            field,
            format!("expected {expected}, found {}", a(field.item.type_name())),
            hint,
        )
    }

    fn string<'d>(&self, field: &Field<'d>) -> Result<&'d str> {
        field.item.as_str().ok_or_else(|| {
            let hint = match field.item.as_value() {
                Some(Value::Integer(_) | Value::Float(_) | Value::Boolean(_)) => field
                    .span()
                    .and_then(|span| self.text.get(span))
                    .map(|raw| format!("put it in quotes: \"{raw}\"")),
                _ => None,
            };
            self.wrong_type(field, "a string", hint)
        })
    }

    fn boolean(&self, field: &Field) -> Result<bool> {
        field.item.as_bool().ok_or_else(|| {
            self.wrong_type(field, "a boolean", Some("write true or false".to_owned()))
        })
    }

    fn integer_in(&self, field: &Field, (low, high): (i64, i64)) -> Result<i64> {
        let Some(value) = field.item.as_integer() else {
            let hint = field
                .item
                .as_str()
                .filter(|text| text.trim().parse::<i64>().is_ok())
                .map(|text| format!("write {} without quotes", text.trim()));
            return Err(self.wrong_type(field, "an integer", hint));
        };
        if !(low..=high).contains(&value) {
            return Err(self.at(
                field,
                format!("must be from {low} to {high}, got {value}"),
                None,
            ));
        }
        Ok(value)
    }

    /// A byte count: an integer, or a string with a unit.
    fn size(&self, field: &Field) -> Result<u64> {
        match field.item.as_value() {
            Some(Value::Integer(value)) => u64::try_from(*value.value())
                .map_err(|_| self.at(field, "a size must not be negative", None)),
            Some(Value::String(value)) => {
                parse_size(value.value()).map_err(|err| self.unit_error(field, err))
            }
            _ => Err(self.wrong_type(
                field,
                "a size (an integer in bytes or a string such as \"4MiB\")",
                None,
            )),
        }
    }

    fn size_in(&self, field: &Field, (low, high): (u64, u64)) -> Result<u64> {
        let size = self.size(field)?;
        if !(low..=high).contains(&size) {
            return Err(self.at(
                field,
                format!(
                    "must be from {} to {}, got {}",
                    Size(low),
                    Size(high),
                    Size(size)
                ),
                None,
            ));
        }
        Ok(size)
    }

    fn power_of_two_size(&self, field: &Field, size: u64, (low, high): (u64, u64)) -> Result<()> {
        let in_range = (low..=high).contains(&size);
        if size.is_power_of_two() && in_range {
            return Ok(());
        }
        let hint = in_range.then(|| {
            let (below, above) = nearest_powers_of_two(size);
            format!(
                "the nearest powers of two are {} and {}",
                Size(below),
                Size(above)
            )
        });
        Err(self.at(
            field,
            format!(
                "must be a power of two from {} to {}, got {}",
                Size(low),
                Size(high),
                Size(size)
            ),
            hint,
        ))
    }

    /// A duration: a string with a unit; a bare number is refused.
    fn duration(&self, field: &Field) -> Result<Duration> {
        match field.item.as_value() {
            Some(Value::String(value)) => {
                parse_duration(value.value()).map_err(|err| self.unit_error(field, err))
            }
            Some(number @ (Value::Integer(_) | Value::Float(_))) => {
                let number = match number {
                    Value::Integer(value) => value.value().to_string(),
                    Value::Float(value) => value.value().to_string(),
                    _ => unreachable!("matched above"),
                };
                Err(self.at(
                    field,
                    "a duration needs a unit",
                    Some(format!("write \"{number}s\" or \"{number}ms\"")),
                ))
            }
            _ => Err(self.wrong_type(field, "a duration (a string such as \"500ms\")", None)),
        }
    }

    fn duration_in(&self, field: &Field, (low, high): (Duration, Duration)) -> Result<Duration> {
        let duration = self.duration(field)?;
        if !(low..=high).contains(&duration) {
            return Err(self.at(
                field,
                format!(
                    "must be from {} to {}, got {}",
                    Time(low),
                    Time(high),
                    Time(duration)
                ),
                None,
            ));
        }
        Ok(duration)
    }

    /// One of `options`, spelt as `name` spells them.
    fn choice<T: Copy>(
        &self,
        field: &Field,
        options: &[T],
        name: fn(&T) -> &'static str,
    ) -> Result<T> {
        let names: Vec<&str> = options.iter().map(name).collect();
        let listing = names.join(", ");
        let Some(text) = field.item.as_str() else {
            return Err(self.wrong_type(
                field,
                "a string",
                Some(format!("valid values: {listing}")),
            ));
        };
        if let Some(option) = options.iter().find(|option| name(option) == text) {
            return Ok(*option);
        }
        let hint = match nearest(text, names.iter().copied()) {
            Some(near) => format!("did you mean `{near}`? (valid values: {listing})"),
            None => format!("valid values: {listing}"),
        };
        Err(self.at(field, format!("unknown value `{text}`"), Some(hint)))
    }

    /// `"panic-every:2s"`, `"error-every:2s"` or `"stall-for:5s"`.
    fn fault(&self, field: &Field) -> Result<SourceFault> {
        let forms = format!(
            "faults: {}, with DURATION such as \"2s\" or \"500ms\"",
            SourceFault::KINDS
                .map(|kind| format!("{kind}:DURATION"))
                .join(", ")
        );
        let Some(text) = field.item.as_str() else {
            return Err(self.wrong_type(field, "a string", Some(forms)));
        };
        let (kind, duration) = text.split_once(':').unwrap_or((text, ""));
        let fault = match kind.trim() {
            "panic-every" => SourceFault::PanicEvery,
            "error-every" => SourceFault::ErrorEvery,
            "stall-for" => SourceFault::StallFor,
            _ => {
                let hint = match nearest(kind.trim(), SourceFault::KINDS.iter().copied()) {
                    Some(near) => format!("did you mean `{near}:{}`? ({forms})", duration.trim()),
                    None => forms,
                };
                return Err(self.at(field, format!("unknown fault `{text}`"), Some(hint)));
            }
        };
        let duration = parse_duration(duration).map_err(|err| {
            let hint = match err.hint {
                Some(unit_hint) => format!("{unit_hint}; {forms}"),
                None => forms.clone(),
            };
            self.at(field, format!("`{text}`: {}", err.message), Some(hint))
        })?;
        if duration.is_zero() {
            return Err(self.at(
                field,
                format!("`{text}`: the duration must be more than 0"),
                Some(forms),
            ));
        }
        Ok(fault(duration))
    }

    /// Hz as a number, or `"max"`.
    fn rate(&self, field: &Field) -> Result<Rate> {
        let hz = match field.item.as_value() {
            Some(Value::Integer(value)) => *value.value() as f64,
            Some(Value::Float(value)) => *value.value(),
            Some(Value::String(value)) if value.value() == "max" => return Ok(Rate::Max),
            Some(Value::String(value)) => {
                let text = value.value().trim();
                let number = text.strip_suffix("Hz").unwrap_or(text).trim();
                let hint = if number.parse::<f64>().is_ok() {
                    format!("write rate = {number}, a number in Hz without quotes")
                } else {
                    "write a number in Hz (rate = 10) or \"max\"".to_owned()
                };
                return Err(self.at(
                    field,
                    format!("unknown rate `{}`", value.value()),
                    Some(hint),
                ));
            }
            _ => return Err(self.wrong_type(field, "a rate (a number in Hz or \"max\")", None)),
        };
        if !(hz > 0.0 && hz <= limits::RATE_MAX_HZ) {
            return Err(self.at(
                field,
                format!(
                    "must be more than 0 and at most {} Hz, got {hz}",
                    limits::RATE_MAX_HZ
                ),
                Some("write rate = \"max\" to generate as fast as the pipeline accepts".to_owned())
                    .filter(|_| hz > limits::RATE_MAX_HZ),
            ));
        }
        Ok(Rate::Hz(hz))
    }
}

/// The candidate nearest to `word` by edit distance (a swap of two
/// neighbouring letters counting as one edit), when near enough to be what
/// was meant: within a third of the word's length, as cargo does.
fn nearest<'c>(word: &str, candidates: impl Iterator<Item = &'c str>) -> Option<&'c str> {
    let limit = word.chars().count().max(3) / 3;
    candidates
        .map(|candidate| {
            let distance = if candidate.eq_ignore_ascii_case(word) {
                0
            } else {
                strsim::damerau_levenshtein(word, candidate)
            };
            (distance, candidate)
        })
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// The powers of two just below and just above `n` (not itself one).
fn nearest_powers_of_two(n: u64) -> (u64, u64) {
    let above = n.checked_next_power_of_two().unwrap_or(1 << 63);
    (above / 2, above)
}

/// `"an integer"`, `"a string"`.
fn a(type_name: &str) -> String {
    let article = if type_name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {type_name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_finds_typos_and_ignores_strangers() {
        let keys = STORAGE_KEYS.iter().copied();
        assert_eq!(nearest("blok_size", keys.clone()), Some("block_size"));
        assert_eq!(nearest("BACKEND", keys.clone()), Some("backend"));
        assert_eq!(nearest("queue", keys.clone()), None);
        assert_eq!(nearest("x", keys.clone()), None);
        assert_eq!(nearest("sync_intreval", keys), Some("sync_interval"));
        let types = SyntheticKind::ALL.map(|kind| kind.ros_type());
        assert_eq!(
            nearest("sensor_msgs/Imu", types.iter().copied()),
            Some("sensor_msgs/msg/Imu")
        );
    }

    #[test]
    fn topic_rules() {
        for good in ["/imu", "/imu/data", "/a_b/C9", "/_private"] {
            assert_eq!(check_topic(good), Ok(()), "{good}");
        }
        for bad in [
            "imu", "", "/", "/imu/", "/a//b", "/a-b", "/a b", "/9imu", "/cam/2d",
        ] {
            assert!(check_topic(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn session_prefix_rules() {
        assert_eq!(check_session_prefix("edgerec"), Ok(()));
        assert_eq!(check_session_prefix("car-07_run"), Ok(()));
        assert_eq!(check_session_prefix(&"a".repeat(64)), Ok(()));
        assert!(check_session_prefix(&"a".repeat(65)).is_err());
        assert!(check_session_prefix("").is_err());
        assert!(check_session_prefix("a/b").is_err());
        assert!(check_session_prefix("ü").is_err());
    }

    /// config/edgerec.toml is the documentation of every key: each must be
    /// in it, the synthetic ones in the commented-out example.
    #[test]
    fn appliance_file_sets_every_key() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/edgerec.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let document = toml_edit::Document::parse(text.as_str()).unwrap();
        for (table, keys) in TABLES.iter().filter(|(t, _)| !t.starts_with("[[")) {
            let name = table.trim_matches(['[', ']']);
            let section = document[name].as_table().unwrap();
            // The LED map is board-specific and the appliance records no
            // synthetic channels: each is an example, commented out.
            for key in keys.iter().filter(|k| !["states", "synthetic"].contains(k)) {
                assert!(section.contains_key(key), "{table} {key} missing");
            }
        }
        assert!(text.contains("\n# [leds.states]\n"));
        assert!(text.contains("\n# [[sources.synthetic]]\n"));
        for key in SYNTHETIC_KEYS {
            assert!(text.contains(&format!("\n# {key} = ")), "{key} missing");
        }
    }

    #[test]
    fn articles() {
        assert_eq!(a("integer"), "an integer");
        assert_eq!(a("inline table"), "an inline table");
        assert_eq!(a("string"), "a string");
    }

    #[test]
    fn powers_of_two_around() {
        assert_eq!(nearest_powers_of_two(3000), (2048, 4096));
        assert_eq!(nearest_powers_of_two(100), (64, 128));
    }
}
