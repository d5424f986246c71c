//! `edgerec info` and `edgerec check` over a file or a bag directory.
//!
//! Read-only: what a bag directory holds and how its `metadata.yaml` is
//! rebuilt live in [`crate::bag`].

/// The `edgerec.drops` key prefix of a topic's upstream losses
/// (`upstream_lost /imu`); the plain topic key is edgerec's own drops.
pub const UPSTREAM_LOST_PREFIX: &str = "upstream_lost ";

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::bag::segment_files;
use crate::reader::{check_file, read_summary, CheckReport, FileSummary};
use crate::FormatError;

/// How a file in a bag looks.
#[derive(Debug)]
pub enum FileState {
    /// A closed file with a summary.
    Closed(Box<FileSummary>),
    /// An `.active` segment: being written, or left by a power cut.
    Active,
    /// Unreadable summary.
    Broken(String),
}

/// One file of a bag.
#[derive(Debug)]
pub struct FileEntry {
    /// Its path.
    pub path: PathBuf,
    /// Its size.
    pub size: u64,
    /// What was found.
    pub state: FileState,
}

impl FileEntry {
    /// The `edgerec.recovered` metadata of a closed file that `edgerec
    /// recover` wrote (see [`crate::recover`]).
    pub fn recovered(&self) -> Option<&BTreeMap<String, String>> {
        match &self.state {
            FileState::Closed(s) => s.metadata.get(crate::recover::RECOVERED_METADATA),
            _ => None,
        }
    }
}

/// Per-topic totals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicTotals {
    /// `pkg/msg/Type`.
    pub type_name: String,
    /// `cdr`.
    pub serialization: String,
    /// Messages.
    pub count: u64,
}

/// What `edgerec info` prints.
#[derive(Debug, Default)]
pub struct BagInfo {
    /// What was inspected.
    pub path: PathBuf,
    /// Files, in name order (segment order).
    pub files: Vec<FileEntry>,
    /// Per topic.
    pub topics: BTreeMap<String, TopicTotals>,
    /// Earliest log time.
    pub start_ns: u64,
    /// Latest log time.
    pub end_ns: u64,
    /// Messages over closed files.
    pub messages: u64,
    /// Bytes over all files.
    pub bytes: u64,
    /// Compressions used.
    pub compressions: Vec<String>,
    /// Drops recorded in the files (`edgerec.drops`), per topic.
    pub drops: BTreeMap<String, u64>,
    /// Messages lost before they reached edgerec, as the transport reported
    /// them (`edgerec.drops` keys `upstream_lost <topic>`), per topic.
    pub upstream_lost: BTreeMap<String, u64>,
    /// Lines printed under a topic's line, filled by crates that understand
    /// its messages (`edgerec-camera` adds a video topic's measured picture
    /// size, frame rate, bitrate and keyframe interval); `inspect` leaves it
    /// empty.
    pub topic_notes: BTreeMap<String, Vec<String>>,
    /// An event clip's `edgerec.clip` record (its window, how many events,
    /// what was cut short); `None` for a session.
    pub clip: Option<BTreeMap<String, String>>,
    /// An event clip's `edgerec.event` record (the rule, reason, values
    /// and trigger time; the last one when several events share it).
    pub event: Option<BTreeMap<String, String>>,
}

/// Reads the summaries of a file or of every segment of a bag directory.
pub fn inspect(path: &Path) -> Result<BagInfo, FormatError> {
    let files = if path.is_dir() {
        segment_files(path)?
    } else {
        vec![path.to_path_buf()]
    };
    let mut info = BagInfo {
        path: path.to_path_buf(),
        start_ns: u64::MAX,
        ..Default::default()
    };
    let mut comps = std::collections::BTreeSet::new();
    for p in files {
        let size = std::fs::metadata(&p)?.len();
        // Counts below come from the files and may be damaged: sums
        // saturate rather than overflow.
        info.bytes = info.bytes.saturating_add(size);
        let is_active = p.extension().is_some_and(|e| e == "active");
        let state = if is_active {
            FileState::Active
        } else {
            match read_summary(&p) {
                Ok(s) => {
                    if let Some(st) = &s.statistics {
                        if st.message_count > 0 {
                            info.start_ns = info.start_ns.min(st.message_start_time);
                            info.end_ns = info.end_ns.max(st.message_end_time);
                        }
                        info.messages = info.messages.saturating_add(st.message_count);
                        for (id, ch) in &s.channels {
                            let t = info.topics.entry(ch.topic.clone()).or_default();
                            t.type_name = s
                                .schemas
                                .get(&ch.schema_id)
                                .map(|x| x.name.clone())
                                .unwrap_or_default();
                            t.serialization = ch.message_encoding.clone();
                            let n = st.channel_message_counts.get(id).copied().unwrap_or(0);
                            t.count = t.count.saturating_add(n);
                        }
                    }
                    if let Some(d) = s.metadata.get("edgerec.drops") {
                        for (key, n) in d {
                            let (map, topic) = match key.strip_prefix(UPSTREAM_LOST_PREFIX) {
                                Some(topic) => (&mut info.upstream_lost, topic),
                                None => (&mut info.drops, key.as_str()),
                            };
                            let total = map.entry(topic.to_owned()).or_insert(0);
                            *total = total.saturating_add(n.parse::<u64>().unwrap_or(0));
                        }
                    }
                    comps.extend(s.compressions());
                    if let Some(c) = s.metadata.get("edgerec.clip") {
                        info.clip = Some(c.clone());
                    }
                    if let Some(e) = s.metadata.get("edgerec.event") {
                        info.event = Some(e.clone());
                    }
                    FileState::Closed(Box::new(s))
                }
                Err(e) => FileState::Broken(e.to_string()),
            }
        };
        info.files.push(FileEntry {
            path: p,
            size,
            state,
        });
    }
    if info.start_ns == u64::MAX {
        info.start_ns = 0;
    }
    info.compressions = comps.into_iter().collect();
    Ok(info)
}

/// Human-readable size.
pub fn human_bytes(n: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < U.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", U[i])
    }
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `ns` since the epoch as `YYYY-MM-DD HH:MM:SS.nnnnnnnnn UTC (s.nnnnnnnnn)`.
pub fn fmt_time(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let (y, m, d) = civil_from_days(days);
    let s = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:09} UTC ({}.{:09})",
        s / 3600,
        (s / 60) % 60,
        s % 60,
        ns % 1_000_000_000,
        secs,
        ns % 1_000_000_000
    )
}

impl fmt::Display for BagInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dur = self.end_ns.saturating_sub(self.start_ns);
        writeln!(f, "Files:             {}", self.files.len())?;
        for e in &self.files {
            let name = e.path.file_name().and_then(|n| n.to_str()).unwrap_or("?");
            let note = match &e.state {
                FileState::Closed(s) => {
                    let mut note = format!(
                        "{} messages",
                        s.statistics.as_ref().map(|x| x.message_count).unwrap_or(0)
                    );
                    if let Some(c) = s.metadata.get("edgerec.clock") {
                        // The worst clock state while this segment was
                        // recorded: data stamped unlocked is flagged here.
                        let get = |k: &str| c.get(k).map(String::as_str).unwrap_or("?");
                        note.push_str(&format!(
                            "  clock {} ({} of {} polls flagged)",
                            get("worst_state"),
                            get("flagged_polls"),
                            get("polls")
                        ));
                    }
                    if let Some(r) = e.recovered() {
                        let get = |k: &str| r.get(k).map(String::as_str).unwrap_or("?");
                        note.push_str(&format!(
                            "  recovered: kept {} of {} bytes{}",
                            get("kept_bytes"),
                            get("original_bytes"),
                            if get("corrupt_skipped") == "true" {
                                ", a corrupt record was skipped"
                            } else {
                                ""
                            }
                        ));
                    }
                    note
                }
                FileState::Active => "ACTIVE: being written or unfinished (edgerec recover)".into(),
                FileState::Broken(why) => format!("UNREADABLE: {why}"),
            };
            writeln!(
                f,
                "                   {name}  {}  {note}",
                human_bytes(e.size)
            )?;
        }
        writeln!(f, "Bag size:          {}", human_bytes(self.bytes))?;
        writeln!(f, "Storage id:        mcap")?;
        writeln!(f, "Duration:          {:.3}s", dur as f64 / 1e9)?;
        writeln!(f, "Start:             {}", fmt_time(self.start_ns))?;
        writeln!(f, "End:               {}", fmt_time(self.end_ns))?;
        writeln!(f, "Messages:          {}", self.messages)?;
        writeln!(
            f,
            "Compression:       {}",
            if self.compressions.is_empty() {
                "none".to_string()
            } else {
                self.compressions.join(", ")
            }
        )?;
        let total_drops = self.drops.values().fold(0u64, |a, &n| a.saturating_add(n));
        writeln!(f, "Dropped:           {total_drops}")?;
        if let Some(c) = &self.clip {
            let get = |m: &BTreeMap<String, String>, k: &str| m.get(k).cloned().unwrap_or_default();
            let ev = self.event.clone().unwrap_or_default();
            let at = get(&ev, "trigger_time_ns").parse::<u64>().map(fmt_time);
            writeln!(
                f,
                "Event clip:        {} event(s); {}: {}{} at {}",
                get(c, "events"),
                get(&ev, "rule"),
                get(&ev, "reason"),
                match get(&ev, "values") {
                    v if v.is_empty() => String::new(),
                    v => format!(" ({v})"),
                },
                at.unwrap_or_else(|_| "?".to_owned())
            )?;
            let cut = get(c, "cut_short");
            if !cut.is_empty() {
                writeln!(f, "Cut short:         {cut}")?;
            }
        }
        if !self.upstream_lost.is_empty() {
            let lost = self
                .upstream_lost
                .values()
                .fold(0u64, |a, &n| a.saturating_add(n));
            writeln!(
                f,
                "Lost upstream:     {lost} (reported by the transport, before edgerec)"
            )?;
        }
        write!(f, "Topic information: ")?;
        if self.topics.is_empty() {
            writeln!(f)?;
        }
        let w = self.topics.keys().map(|k| k.len()).max().unwrap_or(0);
        for (i, (name, t)) in self.topics.iter().enumerate() {
            if i > 0 {
                write!(f, "                   ")?;
            }
            let hz = if dur > 0 && t.count > 1 {
                format!("{:.2} Hz", (t.count - 1) as f64 / (dur as f64 / 1e9))
            } else {
                "-".into()
            };
            let drops = self.drops.get(name).copied().unwrap_or(0);
            let upstream = match self.upstream_lost.get(name) {
                Some(n) => format!(" | Lost upstream: {n}"),
                None => String::new(),
            };
            writeln!(
                f,
                "Topic: {name:<w$} | Type: {} | Count: {} | Frequency: {hz} | Dropped: {drops}{upstream} | Serialization Format: {}",
                t.type_name, t.count, t.serialization
            )?;
            for note in self.topic_notes.get(name).into_iter().flatten() {
                // Under the topic's line, continuing its columns.
                writeln!(f, "{:pad$} | {note}", "", pad = 19 + 7 + w)?;
            }
        }
        Ok(())
    }
}

/// The result of checking one file.
#[derive(Debug)]
pub struct FileCheck {
    /// The file.
    pub path: PathBuf,
    /// Valid (with counts) or the first problem.
    pub result: Result<CheckReport, FormatError>,
}

/// Checks a file, or every segment of a bag directory. An `.active`
/// segment is reported invalid (unfinished).
pub fn check(path: &Path) -> Result<Vec<FileCheck>, FormatError> {
    let files = if path.is_dir() {
        segment_files(path)?
    } else {
        vec![path.to_path_buf()]
    };
    if files.is_empty() {
        return Err(FormatError::Inconsistent(format!(
            "{}: no .mcap files here",
            path.display()
        )));
    }
    Ok(files
        .into_iter()
        .map(|p| {
            let result = check_file(&p);
            FileCheck { path: p, result }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_notes_sit_under_their_topic_line() {
        let mut info = BagInfo::default();
        for t in ["/camera/front/h265", "/imu"] {
            info.topics.insert(t.into(), TopicTotals::default());
        }
        info.topic_notes
            .insert("/camera/front/h265".into(), vec!["Video: 640x480".into()]);
        let text = info.to_string();
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.contains("Topic: /camera/front/h265 |"))
            .unwrap();
        let bar = lines[at].find(" | Type").unwrap();
        assert_eq!(lines[at + 1].find(" | Video: 640x480"), Some(bar), "{text}");
        assert_eq!(lines[at + 1].trim_start(), "| Video: 640x480");
        assert!(lines[at + 2].contains("Topic: /imu"), "{text}");
    }
}
