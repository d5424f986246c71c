//! The session manifest: one JSON object sent after every file of a bag
//! directory, naming each file with its size, SHA-256 and (for MCAP
//! segments) its messages and time range, the files left out and why,
//! the vehicle and edgerec's version. It is sent last, so a store that
//! holds a session's manifest holds every file it lists, byte-checked;
//! a session without one is partial. Its bytes depend only on the
//! session, so sending a session again finds it there and skips it.

use std::path::Path;

use serde::Serialize;

/// The manifest's object name (`{file}` in the key template).
pub const MANIFEST: &str = "manifest.json";

/// The manifest's format version.
pub const VERSION: u32 = 1;

/// One file of the session as sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ManifestFile {
    /// The file's name in the bag directory.
    pub file: String,
    /// Its object key.
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its SHA-256, hex.
    pub sha256: String,
    /// Messages, for an MCAP segment with a summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<u64>,
    /// Its first message's log time, ns since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_ns: Option<u64>,
    /// Its last message's log time, ns since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_ns: Option<u64>,
}

/// A session's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Manifest {
    /// [`VERSION`].
    pub manifest: u32,
    /// The vehicle (`offload.vehicle_id` or the host name).
    pub vehicle: String,
    /// The bag directory's name.
    pub session: String,
    /// The edgerec that sent it.
    pub edgerec_version: String,
    /// Messages in all segments.
    pub messages: u64,
    /// The earliest segment start, ns since the epoch (absent when no
    /// segment has messages).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_ns: Option<u64>,
    /// The latest segment end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_ns: Option<u64>,
    /// Every file sent, in the order sent.
    pub files: Vec<ManifestFile>,
    /// Files of the directory that were not sent, each with why (a
    /// segment still being written, or cut by a power loss).
    pub left_out: Vec<String>,
}

impl Manifest {
    /// The manifest of `session` from its files as sent.
    pub fn new(
        vehicle: &str,
        session: &str,
        files: Vec<ManifestFile>,
        left_out: Vec<String>,
    ) -> Manifest {
        let messages = files.iter().filter_map(|f| f.messages).sum();
        let start_ns = files.iter().filter_map(|f| f.start_ns).min();
        let end_ns = files.iter().filter_map(|f| f.end_ns).max();
        Manifest {
            manifest: VERSION,
            vehicle: vehicle.to_owned(),
            session: session.to_owned(),
            edgerec_version: env!("CARGO_PKG_VERSION").to_owned(),
            messages,
            start_ns,
            end_ns,
            files,
            left_out,
        }
    }

    /// Its bytes: pretty JSON with a final newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = serde_json::to_vec_pretty(self).unwrap_or_default();
        out.push(b'\n');
        out
    }
}

/// The messages and time range of an MCAP segment, from its summary;
/// `None` for another file or one without a readable summary (it is
/// still listed, by size and SHA-256).
pub fn segment_stats(path: &Path) -> Option<(u64, Option<(u64, u64)>)> {
    if path.extension().is_none_or(|e| e != "mcap") {
        return None;
    }
    let summary = edgerec_format::reader::read_summary(path).ok()?;
    let st = summary.statistics?;
    let range = (st.message_count > 0).then_some((st.message_start_time, st.message_end_time));
    Some((st.message_count, range))
}

/// A [`ManifestFile`] of `path` sent as `key` with `sha256`.
pub fn file_entry(path: &Path, key: &str, size: u64, sha256: &str) -> ManifestFile {
    let stats = segment_stats(path);
    ManifestFile {
        file: crate::upload::file_name(path),
        key: key.to_owned(),
        size,
        sha256: sha256.to_owned(),
        messages: stats.map(|s| s.0),
        start_ns: stats.and_then(|s| s.1).map(|r| r.0),
        end_ns: stats.and_then(|s| s.1).map(|r| r.1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_span_the_segments_and_the_bytes_are_stable() {
        let seg = |name: &str, m: Option<u64>, s: Option<u64>, e: Option<u64>| ManifestFile {
            file: name.to_owned(),
            key: format!("v/s/{name}"),
            size: 10,
            sha256: "ab".repeat(32),
            messages: m,
            start_ns: s,
            end_ns: e,
        };
        let files = vec![
            seg("s_0.mcap", Some(5), Some(100), Some(200)),
            seg("s_1.mcap", Some(7), Some(201), Some(300)),
            seg("metadata.yaml", None, None, None),
        ];
        let m = Manifest::new("v", "s", files.clone(), vec!["s_2.mcap.active: cut".into()]);
        assert_eq!(m.messages, 12);
        assert_eq!((m.start_ns, m.end_ns), (Some(100), Some(300)));
        let again = Manifest::new("v", "s", files, vec!["s_2.mcap.active: cut".into()]);
        assert_eq!(m.to_bytes(), again.to_bytes());
        let v: serde_json::Value = serde_json::from_slice(&m.to_bytes()).unwrap();
        assert_eq!(v["files"][2]["file"], "metadata.yaml");
        assert!(v["files"][2].get("messages").is_none());
        assert_eq!(v["left_out"][0], "s_2.mcap.active: cut");
    }
}
