//! `info` of a ROS 1 bag, with what `rosbag info` shows: path, version,
//! duration, start and end, size, messages, compression per kind (chunks
//! and ratio), types with their md5sums, and per topic its messages,
//! median frequency, type and connections. Counts and times come from the
//! index (no message is decompressed for an indexed bag); an unindexed bag
//! (a `.bag.active`) is scanned and says so, with the fix. MCAP files and
//! bag directories keep `edgerec_format::info`'s listing.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use edgerec_format::info::{fmt_time, human_bytes};
use edgerec_rosbag1::{Bag, Compression, Indexing, ScanCause, Summary};

use crate::error::{Result, ToolError};

/// What `info` prints for a ROS 1 bag.
#[derive(Debug)]
pub struct Ros1Info {
    /// The bag.
    pub path: PathBuf,
    /// Its summary (counts, times, compression, topics).
    pub summary: Summary,
    /// Median message rate per topic, in Hz, where a topic has two or more
    /// messages.
    pub frequency: BTreeMap<String, f64>,
    /// Types with their md5sums.
    pub types: BTreeMap<String, String>,
    /// `None` when read through its index, else why it was scanned and
    /// what the scan left out.
    pub scanned: Option<String>,
}

/// Reads what `info` shows of the ROS 1 bag at `path`.
pub fn ros1_info(path: &Path) -> Result<Ros1Info> {
    let mut bag = Bag::open(path).map_err(ToolError::ros1(path))?;
    let summary = bag.summary().map_err(ToolError::ros1(path))?;
    let times = bag.message_times().map_err(ToolError::ros1(path))?;
    let mut per_topic: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut types = BTreeMap::new();
    for c in bag.connections().values() {
        types.insert(c.msg_type.clone(), c.md5sum.clone());
        if let Some(t) = times.get(&c.id) {
            per_topic
                .entry(c.topic.clone())
                .or_default()
                .extend(t.iter().map(|t| t.as_nanos()));
        }
    }
    let frequency = per_topic
        .into_iter()
        .filter_map(|(topic, mut t)| {
            t.sort_unstable();
            median_rate(&t).map(|hz| (topic, hz))
        })
        .collect();
    let scanned = match bag.indexing() {
        Indexing::Index => None,
        Indexing::Scan(rep) => {
            let mut s = format!("{}; read by a sequential scan", cause_text(&rep.cause));
            if let Some(cut) = &rep.cut_chunk {
                s.push_str(&format!(
                    "; the chunk at byte {} is cut ({} of {} bytes), {} whole messages kept from it",
                    cut.pos, cut.available, cut.data_len, cut.messages
                ));
            }
            if let Some(e) = &rep.stop_error {
                s.push_str(&format!("; the scan stopped: {e}"));
            }
            if rep.orphan_messages > 0 {
                s.push_str(&format!(
                    "; {} messages without a connection record skipped",
                    rep.orphan_messages
                ));
            }
            s.push_str("; `edgerec reindex` writes an indexed copy beside it");
            Some(s)
        }
    };
    Ok(Ros1Info {
        path: path.to_path_buf(),
        summary,
        frequency,
        types,
        scanned,
    })
}

/// Why a bag was scanned, in words.
pub(crate) fn cause_text(cause: &ScanCause) -> String {
    match cause {
        ScanCause::Requested => "scanned on request".to_owned(),
        ScanCause::NoIndex => {
            "no index (index_pos is 0: the bag was not closed, as a power cut or crash leaves a .bag.active)".to_owned()
        }
        ScanCause::IndexUnreadable(e) => format!("index unreadable ({e})"),
    }
}

/// The median of the rates between consecutive messages (1 / the median
/// gap), as `rosbag info --freq` reports; `None` with fewer than two
/// messages or no time between them.
pub fn median_rate(sorted_ns: &[u64]) -> Option<f64> {
    let mut gaps: Vec<u64> = sorted_ns
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|g| *g > 0)
        .collect();
    if gaps.is_empty() {
        return None;
    }
    gaps.sort_unstable();
    let n = gaps.len();
    let median = if n % 2 == 1 {
        gaps[n / 2] as f64
    } else {
        (gaps[n / 2 - 1] as f64 + gaps[n / 2] as f64) / 2.0
    };
    Some(1e9 / median)
}

fn duration(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s < 60.0 {
        format!("{s:.3}s")
    } else {
        let whole = ns / 1_000_000_000;
        format!(
            "{}:{:02}:{:02} ({s:.3}s)",
            whole / 3600,
            (whole / 60) % 60,
            whole % 60
        )
    }
}

impl fmt::Display for Ros1Info {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.summary;
        writeln!(f, "path:        {}", self.path.display())?;
        writeln!(f, "version:     2.0")?;
        if let Some(why) = &self.scanned {
            writeln!(f, "indexed:     no: {why}")?;
        }
        writeln!(f, "duration:    {}", duration(s.duration_ns()))?;
        match (s.start, s.end) {
            (Some(a), Some(b)) => {
                writeln!(f, "start:       {}", fmt_time(a.as_nanos()))?;
                writeln!(f, "end:         {}", fmt_time(b.as_nanos()))?;
            }
            _ => writeln!(f, "start:       (no messages)")?,
        }
        writeln!(
            f,
            "size:        {} ({} bytes)",
            human_bytes(s.file_len),
            s.file_len
        )?;
        writeln!(f, "messages:    {}", s.messages)?;
        writeln!(f, "chunks:      {}", s.chunks)?;
        let mut first = true;
        for (kind, st) in &s.compression {
            let label = if first {
                "compression: "
            } else {
                "             "
            };
            first = false;
            if *kind == Compression::None {
                writeln!(f, "{label}none [{}/{} chunks]", st.chunks, s.chunks)?;
            } else {
                let pct = if st.uncompressed_bytes > 0 {
                    100.0 * st.stored_bytes as f64 / st.uncompressed_bytes as f64
                } else {
                    100.0
                };
                writeln!(
                    f,
                    "{label}{kind} [{}/{} chunks; {pct:.2}%] ({} stored, {} uncompressed)",
                    st.chunks,
                    s.chunks,
                    human_bytes(st.stored_bytes),
                    human_bytes(st.uncompressed_bytes)
                )?;
            }
        }
        if s.compression.is_empty() {
            writeln!(f, "compression: (no chunks)")?;
        }
        let tw = self.types.keys().map(String::len).max().unwrap_or(0);
        for (i, (t, md5)) in self.types.iter().enumerate() {
            let label = if i == 0 {
                "types:       "
            } else {
                "             "
            };
            writeln!(f, "{label}{t:tw$} [{md5}]")?;
        }
        let nw = s.topics.iter().map(|t| t.topic.len()).max().unwrap_or(0);
        let cw = s
            .topics
            .iter()
            .map(|t| t.messages.to_string().len())
            .max()
            .unwrap_or(0);
        for (i, t) in s.topics.iter().enumerate() {
            let label = if i == 0 {
                "topics:      "
            } else {
                "             "
            };
            let freq = match self.frequency.get(&t.topic) {
                Some(hz) => format!(" @ {}", hz_text(*hz)),
                None => String::new(),
            };
            let conns = if t.connections > 1 {
                format!(" ({} connections)", t.connections)
            } else {
                String::new()
            };
            let latched = if t.latching { " (latched)" } else { "" };
            writeln!(
                f,
                "{label}{:nw$} {:>cw$} msgs{freq:10} : {}{conns}{latched}",
                t.topic, t.messages, t.msg_type
            )?;
        }
        Ok(())
    }
}

fn hz_text(hz: f64) -> String {
    if hz >= 1000.0 {
        format!("{:.1} kHz", hz / 1000.0)
    } else {
        format!("{hz:.1} Hz")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_rate_takes_the_middle_gap() {
        // Gaps 100 ms, 100 ms, 300 ms: median 100 ms, 10 Hz.
        let t = [0, 100_000_000, 200_000_000, 500_000_000];
        let hz = median_rate(&t).unwrap();
        assert!((hz - 10.0).abs() < 1e-9, "{hz}");
        assert_eq!(median_rate(&[5]), None);
        assert_eq!(median_rate(&[5, 5]), None);
    }

    #[test]
    fn durations_read_like_rosbag_info() {
        assert_eq!(duration(1_500_000_000), "1.500s");
        assert_eq!(duration(3_723_000_000_000), "1:02:03 (3723.000s)");
    }
}
