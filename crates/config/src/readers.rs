//! Readers of the keys whose values a type and a range cannot describe:
//! topic names, the session prefix, a synthetic channel's rate, fault and
//! voltage profile, the Prometheus address, the LED map and its patterns,
//! and the ranges that depend on another key or say more than "from ..
//! to". Each is named by its row in the schema (`config.rs`).

use std::ops::RangeInclusive;
use std::time::Duration;

use toml_edit::Value;

use crate::document::{nearest, Cx, Field};
use crate::schema::{read_with_config, Result, Rule};
use crate::units::{parse_duration, Size};
use crate::values::{Compression, Located, Rate, SourceFault, HEALTH_CONDITIONS, HEALTH_STATES};
use crate::voltage::VoltageProfile;
use crate::{McapConfig, StorageConfig};

/// Longest session prefix: it becomes part of directory and file names.
const SESSION_PREFIX_MAX: usize = 64;

/// Shortest and longest on and off times of a `blink:ON_MS/OFF_MS` LED
/// pattern, in ms.
const LED_DELAY_MS: (u64, u64) = (1, 60_000);

/// A fully qualified ROS 2 topic name.
pub(crate) fn topic(cx: &Cx, field: &Field) -> Result<String> {
    let topic = cx.string(field)?;
    check_topic(topic).map_err(|(message, hint)| cx.at(field, message, hint))?;
    Ok(topic.to_owned())
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

/// The first part of every session's name.
pub(crate) fn session_prefix(cx: &Cx, field: &Field) -> Result<String> {
    let prefix = cx.string(field)?;
    check_session_prefix(prefix).map_err(|(message, hint)| cx.at(field, message, hint))?;
    Ok(prefix.to_owned())
}

fn check_session_prefix(prefix: &str) -> std::result::Result<(), (String, Option<String>)> {
    let allowed =
        "use letters, digits, `_` and `-`: the prefix becomes part of directory and file names";
    if prefix.is_empty() {
        return Err(("must not be empty".to_owned(), Some(allowed.to_owned())));
    }
    let length = prefix.chars().count();
    if length > SESSION_PREFIX_MAX {
        return Err((
            format!("is {length} characters long, at most {SESSION_PREFIX_MAX} are allowed"),
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

/// Hz as a number above 0 and at most `max_hz`, or `"max"`.
pub(crate) fn rate<C>(max_hz: f64) -> impl Rule<C, Rate> {
    read_with_config(move |cx: &Cx, field: &Field, _: &C| {
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
                return Err(cx.at(
                    field,
                    format!("unknown rate `{}`", value.value()),
                    Some(hint),
                ));
            }
            _ => return Err(cx.wrong_type(field, "a rate (a number in Hz or \"max\")", None)),
        };
        if !(hz > 0.0 && hz <= max_hz) {
            return Err(cx.at(
                field,
                format!("must be more than 0 and at most {max_hz} Hz, got {hz}"),
                Some("write rate = \"max\" to generate as fast as the pipeline accepts".to_owned())
                    .filter(|_| hz > max_hz),
            ));
        }
        Ok(Rate::Hz(hz))
    })
}

/// `"panic-every:2s"`, `"error-every:2s"`, `"stall-for:5s"` or
/// `"malformed-every:10"`.
pub(crate) fn fault(cx: &Cx, field: &Field) -> Result<Option<SourceFault>> {
    let forms = format!(
        "faults: {}, with DURATION such as \"2s\" or \"500ms\" and N a count of messages from 1",
        SourceFault::KINDS
            .map(|kind| match kind {
                "malformed-every" => format!("{kind}:N"),
                _ => format!("{kind}:DURATION"),
            })
            .join(", ")
    );
    let Some(text) = field.item.as_str() else {
        return Err(cx.wrong_type(field, "a string", Some(forms)));
    };
    let (kind, value) = text.split_once(':').unwrap_or((text, ""));
    let timed = match kind.trim() {
        "panic-every" => SourceFault::PanicEvery,
        "error-every" => SourceFault::ErrorEvery,
        "stall-for" => SourceFault::StallFor,
        // A count, not a duration: its own grammar.
        "malformed-every" => {
            return match value.trim().parse::<u64>() {
                Ok(n) if n > 0 => Ok(Some(SourceFault::MalformedEvery(n))),
                _ => Err(cx.at(
                    field,
                    format!("`{text}`: N must be a whole number of messages, 1 or more"),
                    Some(format!(
                        "write \"malformed-every:10\" for every 10th message; {forms}"
                    )),
                )),
            };
        }
        _ => {
            let hint = match nearest(kind.trim(), SourceFault::KINDS.iter().copied()) {
                Some(near) => format!("did you mean `{near}:{}`? ({forms})", value.trim()),
                None => forms,
            };
            return Err(cx.at(field, format!("unknown fault `{text}`"), Some(hint)));
        }
    };
    let duration = parse_duration(value).map_err(|err| {
        let hint = match err.hint {
            Some(unit_hint) => format!("{unit_hint}; {forms}"),
            None => forms.clone(),
        };
        cx.at(field, format!("`{text}`: {}", err.message), Some(hint))
    })?;
    if duration.is_zero() {
        return Err(cx.at(
            field,
            format!("`{text}`: the duration must be more than 0"),
            Some(forms),
        ));
    }
    Ok(Some(timed(duration)))
}

/// A battery channel's voltage profile, `"12.6, 11.8@3s, 12.6@6s"`.
pub(crate) fn voltage(cx: &Cx, field: &Field) -> Result<VoltageProfile> {
    let text = cx.string(field)?;
    VoltageProfile::parse(text)
        .map_err(|err| cx.at(field, format!("`{text}`: {}", err.message), Some(err.hint)))
}

/// An IP address and port, or empty for none.
pub(crate) fn socket_address(cx: &Cx, field: &Field) -> Result<String> {
    let address = cx.string(field)?;
    if !address.is_empty() && address.parse::<std::net::SocketAddr>().is_err() {
        return Err(cx.at(
            field,
            format!("`{address}` is not an IP address and port"),
            Some("write \"127.0.0.1:9464\", or \"\" to turn the endpoint off".to_owned()),
        ));
    }
    Ok(address.to_owned())
}

/// A duration in `range` and in whole seconds, as the watchdog ioctl takes
/// it.
pub(crate) fn watchdog_timeout<C>(range: RangeInclusive<Duration>) -> impl Rule<C, Duration> {
    let bounds = (*range.start(), *range.end());
    read_with_config(move |cx: &Cx, field: &Field, _: &C| {
        let timeout = cx.duration_in(field, bounds)?;
        if timeout.subsec_nanos() != 0 {
            return Err(cx.at(
                field,
                "the watchdog timeout is set in whole seconds",
                Some(format!("write \"{}s\"", timeout.as_secs_f64().ceil())),
            ));
        }
        Ok(timeout)
    })
}

/// 0 (off), or a size from `storage.block_size` to `max`.
pub(crate) fn preallocate(max: u64) -> impl Rule<StorageConfig, u64> {
    read_with_config(move |cx: &Cx, field: &Field, config: &StorageConfig| {
        let preallocate = cx.size(field)?;
        if preallocate != 0 && !(config.block_size..=max).contains(&preallocate) {
            return Err(cx.at(
                field,
                format!(
                    "must be 0 (off) or from block_size ({}) to {}, got {}",
                    Size(config.block_size),
                    Size(max),
                    Size(preallocate)
                ),
                None,
            ));
        }
        Ok(preallocate)
    })
}

/// A zstd level in `levels`. lz4 and none have no levels: the key is then
/// ignored, but it still has to be a level zstd could use if compression
/// changes.
pub(crate) fn zstd_level(levels: RangeInclusive<i32>) -> impl Rule<McapConfig, i32> {
    read_with_config(move |cx: &Cx, field: &Field, config: &McapConfig| {
        let bounds = match config.compression {
            Compression::Zstd => (i64::from(*levels.start()), i64::from(*levels.end())),
            Compression::Lz4 | Compression::None => (i64::from(i32::MIN), i64::from(i32::MAX)),
        };
        // In range of an i32 either way.
        Ok(cx.integer_in(field, bounds)? as i32)
    })
}

/// Health state -> [(LED name, pattern)], in file order: the type of
/// `LedsConfig::states`.
type LedStates = Vec<(String, Vec<(String, String)>)>;

/// `[leds.states]`: health state -> { LED name = pattern }, in file order.
pub(crate) fn led_states(cx: &Cx, field: &Field) -> Result<LedStates> {
    let states = field.table(cx)?;
    let mut config = Vec::new();
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
        let leds = crate::document::Table {
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
        config.push((state.to_owned(), list));
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
                if !(LED_DELAY_MS.0..=LED_DELAY_MS.1).contains(&ms) {
                    return Err(format!(
                        "{ms} ms in `{pattern}` is outside {}..{} ms",
                        LED_DELAY_MS.0, LED_DELAY_MS.1
                    ));
                }
            }
            Ok(())
        }
    }
}

/// An array of strings.
pub(crate) fn string_list(cx: &Cx, field: &Field) -> Result<Vec<String>> {
    let Some(items) = field.item.as_array() else {
        return Err(cx.wrong_type(
            field,
            "an array of strings",
            Some("write [\"a\", \"b\"]".to_owned()),
        ));
    };
    items
        .iter()
        .map(|v| {
            v.as_str().map(str::to_owned).ok_or_else(|| {
                cx.at(
                    field,
                    format!("expected strings, found {}", v.type_name()),
                    Some("put each entry in quotes".to_owned()),
                )
            })
        })
        .collect()
}

/// An array of directory paths.
pub(crate) fn path_list(cx: &Cx, field: &Field) -> Result<Vec<std::path::PathBuf>> {
    let list = string_list(cx, field)?;
    if list.iter().any(String::is_empty) {
        return Err(cx.at(
            field,
            "an empty path",
            Some("remove the empty entry".to_owned()),
        ));
    }
    Ok(list.into_iter().map(Into::into).collect())
}

/// A regular expression, checked by compiling it; empty = none.
pub(crate) fn regex(cx: &Cx, field: &Field) -> Result<String> {
    let re = cx.string(field)?;
    if !re.is_empty() {
        if let Err(e) = regex::Regex::new(re) {
            let first = e.to_string().lines().last().unwrap_or_default().to_owned();
            return Err(cx.at(
                field,
                format!("not a regular expression: {first}"),
                Some("the whole topic name must match, e.g. \"/sensors/.*\"".to_owned()),
            ));
        }
    }
    Ok(re.to_owned())
}

/// A ROS node name: `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn node_name(cx: &Cx, field: &Field) -> Result<String> {
    let n = cx.string(field)?;
    let ok = n.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        return Err(cx.at(
            field,
            format!("`{n}` is not a ROS node name"),
            Some("use letters, digits and `_`, not starting with a digit".to_owned()),
        ));
    }
    Ok(n.to_owned())
}

/// A ROS namespace: `/` or a fully qualified name.
pub(crate) fn namespace(cx: &Cx, field: &Field) -> Result<String> {
    let n = cx.string(field)?;
    if n != "/" {
        check_topic(n).map_err(|(message, hint)| cx.at(field, message, hint))?;
    }
    Ok(n.to_owned())
}

fn qos_choice(cx: &Cx, field: &Field, allowed: &[&str]) -> Result<String> {
    let v = cx.string(field)?;
    if !allowed.contains(&v) {
        return Err(cx.at(
            field,
            format!("unknown value `{v}`"),
            Some(format!("use one of: {}", allowed.join(", "))),
        ));
    }
    Ok(v.to_owned())
}

/// `[[ros.qos]] reliability`.
pub(crate) fn qos_reliability(cx: &Cx, field: &Field) -> Result<String> {
    qos_choice(cx, field, &["reliable", "best_effort", "system_default"])
}

/// `[[ros.qos]] durability`.
pub(crate) fn qos_durability(cx: &Cx, field: &Field) -> Result<String> {
    qos_choice(
        cx,
        field,
        &["volatile", "transient_local", "system_default"],
    )
}

/// `[[ros.qos]] history`.
pub(crate) fn qos_history(cx: &Cx, field: &Field) -> Result<String> {
    qos_choice(cx, field, &["keep_last", "keep_all", "system_default"])
}

/// A camera's name: it becomes part of its default topic
/// (`/camera/<name>/h265`), so letters, digits and `_`, not starting with
/// a digit.
pub(crate) fn camera_name(cx: &Cx, field: &Field) -> Result<String> {
    let name = cx.string(field)?;
    let ok = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        return Err(cx.at(
            field,
            format!("`{name}` is not a camera name"),
            Some(
                "use letters, digits and `_`, starting with a letter (\"front_left\"): the \
                 name becomes part of the topic /camera/<name>/h265"
                    .to_owned(),
            ),
        ));
    }
    Ok(name.to_owned())
}

/// A fully qualified topic, or empty for the default.
pub(crate) fn topic_or_empty(cx: &Cx, field: &Field) -> Result<String> {
    let topic = cx.string(field)?;
    if topic.is_empty() {
        return Ok(String::new());
    }
    check_topic(topic).map_err(|(message, hint)| cx.at(field, message, hint))?;
    Ok(topic.to_owned())
}

/// Lowest and highest encoder bitrate, bit/s.
const BITRATE_BPS: (u64, u64) = (50_000, 400_000_000);

/// An encoder bitrate in bit/s: an integer, or a string with `k` or `M`
/// (`"8M"`, `"8Mbit/s"`, `"800k"`).
pub(crate) fn bitrate(cx: &Cx, field: &Field) -> Result<u64> {
    let bps = match field.item.as_value() {
        Some(Value::Integer(value)) => u64::try_from(*value.value()).ok(),
        Some(Value::String(value)) => {
            let text = value.value().trim();
            let text = text
                .strip_suffix("bit/s")
                .or_else(|| text.strip_suffix("bps"))
                .or_else(|| text.strip_suffix("bit"))
                .unwrap_or(text)
                .trim();
            let (number, scale) = match text.char_indices().last() {
                Some((i, 'k' | 'K')) => (&text[..i], 1e3),
                Some((i, 'M')) => (&text[..i], 1e6),
                _ => (text, 1.0),
            };
            number
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|n| n.is_finite() && *n >= 0.0)
                .map(|n| (n * scale).round() as u64)
        }
        _ => None,
    };
    let Some(bps) = bps else {
        return Err(cx.at(
            field,
            "expected a bitrate",
            Some("write bitrate = \"8M\" (8 Mbit/s), \"800k\", or an integer in bit/s".to_owned()),
        ));
    };
    let (low, high) = BITRATE_BPS;
    if !(low..=high).contains(&bps) {
        return Err(cx.at(
            field,
            format!("must be from {low} to {high} bit/s, got {bps}"),
            Some("a 1080p30 camera records well at \"4M\" to \"12M\"".to_owned()),
        ));
    }
    Ok(bps)
}

/// An array of fully qualified topic names.
pub(crate) fn topic_list(cx: &Cx, field: &Field) -> Result<Vec<String>> {
    let list = string_list(cx, field)?;
    for topic in &list {
        check_topic(topic).map_err(|(message, hint)| cx.at(field, message, hint))?;
    }
    Ok(list)
}

/// A trigger's name: it becomes part of its clips' directory names, so
/// letters, digits, `_` and `-`, 1 to 64 of them.
pub(crate) fn trigger_name(cx: &Cx, field: &Field) -> Result<String> {
    let name = cx.string(field)?;
    let ok = (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !ok {
        return Err(cx.at(
            field,
            format!("`{name}` is not a trigger name"),
            Some(
                "use 1 to 64 letters, digits, `_` and `-` (\"low_battery\"): the name becomes \
                 part of its clips' directory names"
                    .to_owned(),
            ),
        ));
    }
    Ok(name.to_owned())
}

/// A string kept with where it starts in the file (see [`Located`]).
pub(crate) fn located(cx: &Cx, field: &Field) -> Result<Located> {
    cx.located(field)
}

/// A clip window or cooldown set on one rule: a duration of 0 to 10 min
/// (cooldown up to 24 h is set in `[triggers]`), or unset.
pub(crate) fn clip_window(cx: &Cx, field: &Field) -> Result<Option<Duration>> {
    cx.duration_in(field, (Duration::ZERO, Duration::from_secs(600)))
        .map(Some)
}

/// A periodic sample's period: 1 s to 24 h, or unset.
pub(crate) fn sample_period(cx: &Cx, field: &Field) -> Result<Option<Duration>> {
    cx.duration_in(field, (Duration::from_secs(1), Duration::from_secs(86_400)))
        .map(Some)
}

/// `CHIP:LINE`, or empty for none.
pub(crate) fn gpio_line(cx: &Cx, field: &Field) -> Result<String> {
    let text = cx.string(field)?;
    if text.is_empty() {
        return Ok(String::new());
    }
    let hint = || {
        Some(
            "write CHIP:LINE, the chip as a name under /dev or a path and the line as its \
             offset or name: \"gpiochip0:17\", \"/dev/gpiochip2:BUTTON\""
                .to_owned(),
        )
    };
    match text.rsplit_once(':') {
        Some((chip, line)) if !chip.is_empty() && !line.is_empty() => Ok(text.to_owned()),
        _ => Err(cx.at(field, format!("`{text}` is not a GPIO line"), hint())),
    }
}

/// Health conditions a trigger fires on.
pub(crate) fn health_conditions(cx: &Cx, field: &Field) -> Result<Vec<String>> {
    let list = string_list(cx, field)?;
    for c in &list {
        if !HEALTH_CONDITIONS.contains(&c.as_str()) {
            let listing = HEALTH_CONDITIONS.join(", ");
            let hint = match nearest(c, HEALTH_CONDITIONS.iter().copied()) {
                Some(near) => format!("did you mean `{near}`? (conditions: {listing})"),
                None => format!("conditions: {listing}"),
            };
            return Err(cx.at(field, format!("unknown health condition `{c}`"), Some(hint)));
        }
    }
    Ok(list)
}

/// A camera's `pipeline`: empty, or one chain [`crate::gst_chain::parse`]
/// accepts. The error names the refused part.
pub(crate) fn camera_pipeline(cx: &Cx, field: &Field) -> Result<String> {
    let text = cx.string(field)?;
    if text.trim().is_empty() {
        return Ok(String::new());
    }
    crate::gst_chain::parse(text).map_err(|e| {
        let rest = text.get(e.offset..).unwrap_or("");
        let part: String = rest.chars().take(32).collect();
        let message = if part.is_empty() {
            e.message
        } else {
            format!("{} (at `{}`)", e.message, part.trim_end())
        };
        cx.at(field, message, e.hint)
    })?;
    Ok(text.to_owned())
}

/// A V4L2 camera's `format`: put into caps, so letters and digits only,
/// at most 16; empty = what the device offers.
pub(crate) fn pixel_format(cx: &Cx, field: &Field) -> Result<String> {
    let format = cx.string(field)?;
    if format.len() > 16 || !format.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(cx.at(
            field,
            format!("`{format}` is not a pixel format"),
            Some(
                "write a FourCC such as \"YUY2\", \"UYVY\", \"NV12\" or \"MJPG\", or \"\" for any"
                    .to_owned(),
            ),
        ));
    }
    Ok(format.to_owned())
}

/// A V4L2 camera's `device`: a capture node, nothing else.
pub(crate) fn video_device(cx: &Cx, field: &Field) -> Result<std::path::PathBuf> {
    let device = cx.string(field)?;
    crate::gst_chain::check_video_device(device).map_err(|message| cx.at(field, message, None))?;
    Ok(std::path::PathBuf::from(device))
}

/// A value put into the camera's pipeline as one word (the test pattern,
/// the encoder preset): letters, digits, `-` and `_`; `empty_ok` allows "".
fn element_word(cx: &Cx, field: &Field, empty_ok: bool) -> Result<String> {
    let word = cx.string(field)?;
    if word.is_empty() && empty_ok {
        return Ok(String::new());
    }
    crate::gst_chain::check_word(word).map_err(|message| cx.at(field, message, None))?;
    Ok(word.to_owned())
}

/// A test camera's `pattern`.
pub(crate) fn test_pattern(cx: &Cx, field: &Field) -> Result<String> {
    element_word(cx, field, false)
}

/// An encoder `preset`; empty = the fastest real-time one.
pub(crate) fn encoder_preset(cx: &Cx, field: &Field) -> Result<String> {
    element_word(cx, field, true)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
