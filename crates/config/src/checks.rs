//! The checks that span keys: each is named by a row of the schema
//! (`config.rs`) as its `then` or by a table as its `check`, and runs when
//! the keys it compares have been read, so that its error points at a key
//! the file sets.

use crate::document::{Cx, Table};
use crate::schema::Result;
use crate::units::{Size, Time};
use crate::values::{CameraSourceKind, ClockSourceKind, RecordingMode};
use crate::{
    CameraConfig, ClockConfig, Config, HealthConfig, RecordingConfig, SourcesConfig,
    SyntheticChannel, TriggerConfig,
};

/// The chunker fills one chunk while the compressors hold others and the
/// sequencer waits on the oldest; fewer than four chunks of budget stalls the
/// pipeline on its own chunks.
const CHUNKS_IN_BUDGET: u64 = 4;

/// `pipeline.memory_budget >= 4 x mcap.chunk_size`, blamed on whichever of
/// the two the file sets (memory_budget when both are).
pub(crate) fn memory_budget_holds_chunks(cx: &Cx, root: &Table, config: &Config) -> Result<()> {
    let needed = config.mcap.chunk_size * CHUNKS_IN_BUDGET;
    if config.pipeline.memory_budget >= needed {
        return Ok(());
    }
    let hint = Some(format!(
        "raise pipeline.memory_budget to at least \"{}\" or lower mcap.chunk_size",
        Size(needed).to_string().replace(' ', "")
    ));
    let memory_budget = root.field_in("pipeline", "memory_budget");
    let chunk_size = root.field_in("mcap", "chunk_size");
    match (memory_budget, chunk_size) {
        (Some(field), _) => Err(cx.at(
            &field,
            format!(
                "must be at least {CHUNKS_IN_BUDGET} x mcap.chunk_size ({}), got {}",
                Size(needed),
                Size(config.pipeline.memory_budget)
            ),
            hint,
        )),
        (None, Some(field)) => Err(cx.at(
            &field,
            format!(
                "needs pipeline.memory_budget of at least {CHUNKS_IN_BUDGET} x chunk_size ({}), \
                 but memory_budget is {} (the default)",
                Size(needed),
                Size(config.pipeline.memory_budget)
            ),
            hint,
        )),
        // The defaults satisfy the rule, so one of the two is in the file.
        (None, None) => Ok(()),
    }
}

/// `sources.restart_backoff_max >= sources.restart_backoff_min`, blamed on
/// whichever of the two comes later in the file (the one the file sets when
/// only one is).
pub(crate) fn restart_backoff_in_order(
    cx: &Cx,
    table: &Table,
    config: &SourcesConfig,
) -> Result<()> {
    let (low, high) = (config.restart_backoff_min, config.restart_backoff_max);
    if high >= low {
        return Ok(());
    }
    let hint = Some(format!(
        "raise sources.restart_backoff_max to at least \"{}\" or lower \
         sources.restart_backoff_min",
        Time(low)
    ));
    let min = table.field("restart_backoff_min");
    let max = table.field("restart_backoff_max");
    let start = |field: &Option<crate::document::Field>| {
        field.as_ref().and_then(|f| f.span()).map(|span| span.start)
    };
    let blame_max = match (&min, &max) {
        (Some(_), Some(_)) => start(&max) > start(&min),
        (None, Some(_)) => true,
        (Some(_), None) => false,
        // The defaults satisfy the rule, so one of the two is in the file.
        (None, None) => return Ok(()),
    };
    match (blame_max, min, max) {
        (true, _, Some(field)) => Err(cx.at(
            &field,
            format!(
                "must be at least sources.restart_backoff_min ({}), got {}",
                Time(low),
                Time(high)
            ),
            hint,
        )),
        (false, Some(field), max) => {
            let default = if max.is_none() { " (the default)" } else { "" };
            Err(cx.at(
                &field,
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

/// Each synthetic channel records its own topic; the newest entry is
/// checked against those before it.
pub(crate) fn unique_topic(
    cx: &Cx,
    entries: &[Table],
    channels: &[SyntheticChannel],
) -> Result<()> {
    let (Some(new), Some((entry, earlier))) = (channels.last(), entries.split_last()) else {
        return Ok(());
    };
    let Some(first) = channels.iter().position(|c| c.topic == new.topic) else {
        return Ok(());
    };
    let (Some(topic_field), Some(first_entry)) = (entry.field("topic"), earlier.get(first)) else {
        // The newest is the first with its topic.
        return Ok(());
    };
    let line = cx
        .line(first_entry.field("topic").and_then(|f| f.span()))
        .map_or(String::new(), |line| format!(" (line {line})"));
    Err(cx.at(
        &topic_field,
        format!("duplicate topic `{}`", new.topic),
        Some(format!(
            "sources.synthetic[{first}]{line} already records it; give each channel its own topic"
        )),
    ))
}

/// A stage must be found stalled before the watchdog resets the board,
/// or the fault file never says which stage it was.
pub(crate) fn stage_deadline_below_timeout(
    cx: &Cx,
    table: &Table,
    config: &HealthConfig,
) -> Result<()> {
    if config.watchdog.as_os_str().is_empty() || config.stage_deadline < config.watchdog_timeout {
        return Ok(());
    }
    let Some(field) = table
        .field("stage_deadline")
        .or_else(|| table.field("watchdog_timeout"))
    else {
        return Ok(());
    };
    Err(cx.at(
        &field,
        format!(
            "health.stage_deadline ({}) must be shorter than health.watchdog_timeout \
             ({}), or a stalled stage resets the board before it is noticed and \
             written down",
            Time(config.stage_deadline),
            Time(config.watchdog_timeout)
        ),
        Some("make the stage deadline at most half of the watchdog timeout".to_owned()),
    ))
}

/// `clock.source = "phc"` reads the clock `clock.phc` names, so it must
/// name one.
pub(crate) fn phc_source_has_a_clock(cx: &Cx, table: &Table, config: &ClockConfig) -> Result<()> {
    let Some(field) = table.field("source") else {
        return Ok(());
    };
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
    Ok(())
}

/// No two `[[ros.qos]]` entries for one topic.
pub(crate) fn unique_ros_qos_topic(
    cx: &Cx,
    entries: &[Table],
    qos: &[crate::RosQos],
) -> Result<()> {
    let (Some(new), Some((entry, earlier))) = (qos.last(), entries.split_last()) else {
        return Ok(());
    };
    let Some(first) = qos.iter().position(|q| q.topic == new.topic) else {
        return Ok(());
    };
    let (Some(topic_field), Some(first_entry)) = (entry.field("topic"), earlier.get(first)) else {
        return Ok(());
    };
    let line = cx
        .line(first_entry.field("topic").and_then(|f| f.span()))
        .map_or(String::new(), |line| format!(" (line {line})"));
    Err(cx.at(
        &topic_field,
        format!("duplicate topic `{}`", new.topic),
        Some(format!(
            "ros.qos[{first}]{line} already sets its QoS; merge the two entries"
        )),
    ))
}

/// A `[[camera]]` whose keys agree with its source: what the source needs
/// is set, the picture is even-sized (4:2:0) and a keyframe interval holds
/// at least one frame. (Keys only another source reads are ignored, so one
/// entry can switch sources by its `source` line alone.)
pub(crate) fn camera_consistent(cx: &Cx, table: &Table, config: &CameraConfig) -> Result<()> {
    let source = config.source;
    let needs = match source {
        CameraSourceKind::Rtsp if config.url.is_empty() => {
            Some(("url", "add url = \"rtsp://host:8554/stream\""))
        }
        CameraSourceKind::Topic if config.input_topic.is_empty() => Some((
            "input_topic",
            "add input_topic = \"/camera/image_raw\", a sensor_msgs/msg/Image topic",
        )),
        CameraSourceKind::Pipeline if config.pipeline.trim().is_empty() => Some((
            "pipeline",
            "add pipeline = \"v4l2src device=/dev/video2\", a gst-launch source of raw video",
        )),
        _ => None,
    };
    if let Some((key, hint)) = needs {
        let field = table.field(key).or_else(|| table.field("source"));
        if let Some(field) = field {
            return Err(cx.at(
                &field,
                format!("source = \"{}\" needs `{key}`", source.as_str()),
                Some(hint.to_owned()),
            ));
        }
    }
    if source == CameraSourceKind::Rtsp
        && !(config.url.starts_with("rtsp://") || config.url.starts_with("rtsps://"))
    {
        if let Some(field) = table.field("url") {
            return Err(cx.at(
                &field,
                format!("`{}` is not an RTSP URL", config.url),
                Some("write url = \"rtsp://host:8554/stream\"".to_owned()),
            ));
        }
    }
    for (key, value) in [("width", config.width), ("height", config.height)] {
        if value % 2 != 0 {
            if let Some(field) = table.field(key) {
                return Err(cx.at(
                    &field,
                    format!("must be even for 4:2:0 video, got {value}"),
                    Some(format!("use {} or {}", value - 1, value + 1)),
                ));
            }
        }
    }
    let frames = config.keyframe_interval.as_secs_f64() * f64::from(config.fps);
    if frames < 1.0 {
        if let Some(field) = table
            .field("keyframe_interval")
            .or_else(|| table.field("fps"))
        {
            return Err(cx.at(
                &field,
                format!(
                    "a keyframe interval of {} holds no frame at {} fps",
                    Time(config.keyframe_interval),
                    config.fps
                ),
                Some("make keyframe_interval at least one frame long".to_owned()),
            ));
        }
    }
    if source == CameraSourceKind::Topic && config.input_topic == config.video_topic() {
        if let Some(field) = table.field("input_topic") {
            return Err(cx.at(
                &field,
                "the input topic is the topic the video is recorded on",
                Some("give the camera another topic".to_owned()),
            ));
        }
    }
    Ok(())
}

/// Each camera has its own name and its own video topic; the newest entry
/// is checked against those before it.
pub(crate) fn unique_camera(cx: &Cx, entries: &[Table], cameras: &[CameraConfig]) -> Result<()> {
    let (Some(new), Some((entry, earlier))) = (cameras.last(), entries.split_last()) else {
        return Ok(());
    };
    let clash = |what: &str, first: usize, key: &str, fix: &str| -> Result<()> {
        let field = entry.field(key).or_else(|| entry.field("name"));
        let Some(field) = field else { return Ok(()) };
        let line = earlier
            .get(first)
            .and_then(|e| cx.line(e.field("name").and_then(|f| f.span())))
            .map_or(String::new(), |line| format!(" (line {line})"));
        Err(cx.at(
            &field,
            what.to_owned(),
            Some(format!("camera[{first}]{line} already has it; {fix}")),
        ))
    };
    let len = cameras.len() - 1;
    if let Some(first) = cameras[..len].iter().position(|c| c.name == new.name) {
        return clash(
            &format!("duplicate camera name `{}`", new.name),
            first,
            "name",
            "give each camera its own name",
        );
    }
    let topic = new.video_topic();
    if let Some(first) = cameras[..len].iter().position(|c| c.video_topic() == topic) {
        return clash(
            &format!("duplicate camera topic `{topic}`"),
            first,
            "topic",
            "give each camera its own topic",
        );
    }
    Ok(())
}

/// `recording.mode = "mixed"` needs `continuous_topics`: without them it
/// is `triggered`.
pub(crate) fn mixed_has_continuous_topics(
    cx: &Cx,
    table: &Table,
    config: &RecordingConfig,
) -> Result<()> {
    if config.mode != RecordingMode::Mixed || !config.continuous_topics.is_empty() {
        return Ok(());
    }
    match table
        .field("continuous_topics")
        .or_else(|| table.field("mode"))
    {
        Some(field) => Err(cx.at(
            &field,
            "mode = \"mixed\" records `continuous_topics` all the time, and none are listed",
            Some(
                "add continuous_topics = [\"/tf\", \"/odom\"], or use mode = \"triggered\""
                    .to_owned(),
            ),
        )),
        None => Ok(()),
    }
}

/// Each rule has its own name; the newest entry is checked against those
/// before it.
pub(crate) fn unique_trigger(cx: &Cx, entries: &[Table], rules: &[TriggerConfig]) -> Result<()> {
    let (Some(new), Some((entry, earlier))) = (rules.last(), entries.split_last()) else {
        return Ok(());
    };
    let Some(first) = rules[..rules.len() - 1]
        .iter()
        .position(|r| r.name == new.name)
    else {
        return Ok(());
    };
    let Some(field) = entry.field("name") else {
        return Ok(());
    };
    let line = earlier
        .get(first)
        .and_then(|e| cx.line(e.field("name").and_then(|f| f.span())))
        .map_or(String::new(), |line| format!(" (line {line})"));
    Err(cx.at(
        &field,
        format!("duplicate trigger name `{}`", new.name),
        Some(format!(
            "trigger[{first}]{line} already has it; give each rule its own name"
        )),
    ))
}

/// Rules record clips, which only `triggered` and `mixed` make: in
/// `continuous` everything is written already.
pub(crate) fn triggers_fit_the_mode(cx: &Cx, root: &Table, config: &Config) -> Result<()> {
    if config.trigger.is_empty() || config.recording.mode != RecordingMode::Continuous {
        return Ok(());
    }
    match root.field("trigger") {
        Some(field) => Err(cx.at(
            &field,
            "[[trigger]] rules record event clips, which recording.mode = \"continuous\" \
             (the default) does not make",
            Some(
                "set mode = \"triggered\" or \"mixed\" in [recording], or remove the rules"
                    .to_owned(),
            ),
        )),
        None => Ok(()),
    }
}

/// A rule fires on exactly one thing: a topic's messages, a period, a
/// GPIO line or health conditions; `when` and `for` need a topic.
pub(crate) fn trigger_has_one_source(cx: &Cx, table: &Table, config: &TriggerConfig) -> Result<()> {
    let given: Vec<&str> = [
        ("topic", !config.topic.is_empty()),
        ("every", config.every.is_some()),
        ("gpio", !config.gpio.is_empty()),
        ("health", !config.health.is_empty()),
    ]
    .into_iter()
    .filter_map(|(k, set)| set.then_some(k))
    .collect();
    let hint = Some(
        "a rule fires on one of: topic = \"/battery\" (with when), every = \"10min\", \
         gpio = \"gpiochip0:17\", health = [\"clock-unlocked\"]; write one rule for each"
            .to_owned(),
    );
    match given.as_slice() {
        [] => {
            let field = table.field("name");
            match field {
                Some(f) => Err(cx.at(&f, "the rule has nothing to fire on", hint)),
                None => Ok(()),
            }
        }
        [_] => {
            let topicless = config.topic.is_empty();
            for key in ["when", "for"] {
                if let Some(f) = table.field(key).filter(|_| topicless) {
                    return Err(cx.at(
                        &f,
                        format!("`{key}` reads a topic's messages, and the rule has no topic"),
                        Some("add topic = \"/battery\", or remove the key".to_owned()),
                    ));
                }
            }
            Ok(())
        }
        [_, second, ..] => match table.field(second) {
            Some(f) => Err(cx.at(
                &f,
                format!("the rule already fires on `{}`", given[0]),
                hint,
            )),
            None => Ok(()),
        },
    }
}

/// The metrics endpoint stays on loopback unless `prometheus_remote` says
/// otherwise: it answers anyone who connects.
pub(crate) fn metrics_on_loopback(cx: &Cx, table: &Table, config: &HealthConfig) -> Result<()> {
    let Ok(addr) = config.prometheus.parse::<std::net::SocketAddr>() else {
        return Ok(());
    };
    if addr.ip().is_loopback() || config.prometheus_remote {
        return Ok(());
    }
    let Some(field) = table.field("prometheus") else {
        return Ok(());
    };
    Err(cx.at(
        &field,
        format!(
            "health.prometheus {addr} is reachable from other machines, and the metrics \
             endpoint has no authentication"
        ),
        Some(format!(
            "bind 127.0.0.1:{} (scrape it through an SSH tunnel or a local agent), or set \
             health.prometheus_remote = true to serve it to the network on purpose",
            addr.port()
        )),
    ))
}
