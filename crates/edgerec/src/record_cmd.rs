//! `edgerec record`: `ros2 bag record`'s flags (Humble and Jazzy spellings)
//! onto a configuration, so users keep their habits.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::Args;
use edgerec_config::{Compression, Config};

/// `edgerec record [TOPIC...] [-a] [-e RE] [-x RE] [-o DIR] ...`
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// Topics to record (a relative name resolves in the node's namespace).
    pub topics: Vec<String>,
    /// Record every topic.
    #[arg(short = 'a', long)]
    pub all: bool,
    /// Record topics whose whole name matches this regular expression.
    #[arg(short = 'e', long)]
    pub regex: Option<String>,
    /// Leave out topics whose whole name matches (Humble `-x/--exclude`,
    /// Jazzy `--exclude-regex`).
    #[arg(short = 'x', long = "exclude-regex", visible_alias = "exclude")]
    pub exclude: Option<String>,
    /// Leave out topics of these types (`pkg/msg/Type`).
    #[arg(long = "exclude-topic-types", num_args = 1..)]
    pub exclude_types: Vec<String>,
    /// Record hidden topics (a name part starting with `_`) too.
    #[arg(long = "include-hidden-topics")]
    pub include_hidden: bool,
    /// How often the graph is looked at for new topics, in ms.
    #[arg(short = 'p', long = "polling-interval", value_name = "MS")]
    pub polling_interval: Option<u64>,
    /// The bag directory (must not exist). Default `rosbag2_<date>-<time>`.
    #[arg(short = 'o', long)]
    pub output: Option<PathBuf>,
    /// Split the bag after this many seconds (0 = never).
    #[arg(short = 'd', long = "max-bag-duration", value_name = "S")]
    pub max_bag_duration: Option<u64>,
    /// Split the bag at this many bytes (0 = never; else at least 16 MiB).
    #[arg(short = 'b', long = "max-bag-size", value_name = "B")]
    pub max_bag_size: Option<u64>,
    /// Compress chunks: zstd or lz4.
    #[arg(long = "compression-format")]
    pub compression_format: Option<String>,
    /// rosbag2's QoS override YAML.
    #[arg(long = "qos-profile-overrides-path")]
    pub qos_profile_overrides_path: Option<PathBuf>,
    /// An edgerec configuration for everything else (storage, pipeline,
    /// clock); without it, the defaults with no watchdog and no status
    /// topics of edgerec's own.
    #[arg(long, short)]
    pub config: Option<PathBuf>,
    /// Start paused (latched topics are recorded all the same); `edgerec
    /// ctl resume` or the `~/resume` service starts recording.
    #[arg(long = "start-paused")]
    pub start_paused: bool,
    /// Take `edgerec ctl` commands (pause, resume, split) on this Unix
    /// socket while recording.
    #[arg(long = "control-socket")]
    pub control_socket: Option<PathBuf>,
    /// Serve rosbag2's recorder services (`~/pause`, `~/resume`,
    /// `~/is_paused`, `~/split_bagfile`) and `~/trigger` to the domain
    /// (`ros.services`; off unless asked: any participant may call them).
    #[arg(long)]
    pub services: bool,
    /// Never print the live status line.
    #[arg(long)]
    pub quiet: bool,
}

/// The configuration the flags make, where it came from (for errors), and
/// the bag directory.
pub fn config(a: &RecordArgs) -> anyhow::Result<(Config, PathBuf, PathBuf)> {
    let (mut cfg, origin) = match &a.config {
        Some(p) => (Config::load(p)?, p.clone()),
        None => {
            let mut c = Config::default();
            // An ad hoc recording: nothing arms the board's watchdog, writes
            // its fault file, or takes the daemon's status socket, and the
            // bag holds the graph's topics only, as with rosbag2.
            c.health.watchdog = PathBuf::new();
            c.health.fault_file = PathBuf::new();
            c.health.status_socket = PathBuf::new();
            c.health.record_status = false;
            c.health.record_clock = false;
            c.health.record_audit = false;
            (c, PathBuf::from("edgerec record"))
        }
    };
    if let Some(p) = &a.control_socket {
        cfg.health.control_socket = p.clone();
    }
    let r = &mut cfg.ros;
    r.enabled = true;
    if a.services {
        r.services = true;
    }
    if a.all || !a.topics.is_empty() || a.regex.is_some() {
        r.all = a.all;
        r.topics = a.topics.clone();
        r.regex = a.regex.clone().unwrap_or_default();
    }
    if !r.all && r.topics.is_empty() && r.regex.is_empty() {
        bail!("nothing to record: give topics, -a (every topic) or -e REGEX");
    }
    if let Some(x) = &a.exclude {
        regex_ok("--exclude-regex", x)?;
        r.exclude = x.clone();
    }
    if let Some(e) = &a.regex {
        regex_ok("--regex", e)?;
    }
    if !a.exclude_types.is_empty() {
        r.exclude_types = a.exclude_types.clone();
    }
    if a.include_hidden {
        r.include_hidden = true;
    }
    if let Some(ms) = a.polling_interval {
        if !(10..=60_000).contains(&ms) {
            bail!("--polling-interval {ms}: use 10 to 60000 ms");
        }
        r.discovery_interval = std::time::Duration::from_millis(ms);
    }
    if let Some(p) = &a.qos_profile_overrides_path {
        r.qos_overrides_path = p.clone();
    }
    match a.max_bag_duration {
        Some(0) => cfg.segment.max_duration = std::time::Duration::from_secs(24 * 3600),
        Some(s) => cfg.segment.max_duration = std::time::Duration::from_secs(s),
        None => {}
    }
    match a.max_bag_size {
        Some(0) => cfg.segment.max_bytes = 1 << 40,
        Some(b) if b < 16 << 20 => {
            bail!("--max-bag-size {b}: at least 16 MiB (16777216), or 0 for no limit")
        }
        Some(b) => cfg.segment.max_bytes = b,
        None => {}
    }
    if let Some(c) = &a.compression_format {
        cfg.mcap.compression = match c.as_str() {
            "zstd" => Compression::Zstd,
            "lz4" => Compression::Lz4,
            "none" | "" => Compression::None,
            other => bail!("--compression-format {other}: use zstd or lz4"),
        };
    }
    let dir = match &a.output {
        Some(d) => d.clone(),
        None => PathBuf::from(default_bag_name()),
    };
    if dir.exists() {
        bail!(
            "{}: the bag directory exists already; choose another -o or remove it",
            dir.display()
        );
    }
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    cfg.recording.root = std::fs::canonicalize(&parent)
        .with_context(|| format!("{}: the bag directory's parent", parent.display()))?;
    Ok((cfg, origin, dir))
}

fn regex_ok(flag: &str, re: &str) -> anyhow::Result<()> {
    regex_syntax_check(re).map_err(|e| anyhow::anyhow!("{flag} {re:?}: {e}"))
}

fn regex_syntax_check(re: &str) -> Result<(), String> {
    edgerec_ros::TopicSelection::new(
        &edgerec_ros::SelectionOptions {
            regex: Some(re.to_owned()),
            ..Default::default()
        },
        "/",
        "edgerec",
    )
    .map(|_| ())
    .map_err(|e| e.to_string())
}

/// rosbag2's default: `rosbag2_YYYY_MM_DD-HH_MM_SS` (UTC here).
fn default_bag_name() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = secs / 86_400;
    let (y, m, d) = civil_from_days(days as i64);
    let t = secs % 86_400;
    format!(
        "rosbag2_{y:04}_{m:02}_{d:02}-{:02}_{:02}_{:02}",
        t / 3600,
        (t / 60) % 60,
        t % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_become_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_425), (2025, 12, 3));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
