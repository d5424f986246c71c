//! What the vehicle holds: the sessions under the recordings root and the
//! event clips under `events/`, newest first, each file with its size,
//! messages and time range (from its MCAP summary) and whether it is at
//! the fleet's store. The answer to the `list` command, as JSON.
//!
//! Bounded whatever the disk holds: at most `max` sessions and `max`
//! clips, [`MAX_FILES`] files each; what is left out is counted.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::retention::EVENTS_DIR;

/// Files listed per session or clip at most.
pub const MAX_FILES: usize = 500;

/// Whether a file is at the fleet's store; `None` when offload is off.
pub type Uploaded<'a> = Option<&'a dyn Fn(&Path) -> bool>;

/// The inventory of `root`: the `max` newest sessions and the `max`
/// newest event clips, as JSON:
/// `{"root", "sessions": [{"name", "files": [...], "start_ns",
/// "end_ns", "bytes"}], "sessions_total", "clips": [...],
/// "clips_total"}`, each file `{"file", "bytes", "state": "closed" |
/// "recording", "messages", "start_ns", "end_ns", "upload": "sent" |
/// "waiting" | "off"}`.
pub fn list(root: &Path, max: usize, uploaded: Uploaded<'_>) -> Value {
    let (sessions, sessions_total) = newest_dirs(root, max, |name| name != EVENTS_DIR);
    let (clips, clips_total) = newest_dirs(&root.join(EVENTS_DIR), max, |_| true);
    json!({
        "root": root.display().to_string(),
        "sessions": sessions.iter().map(|d| bag(d, uploaded)).collect::<Vec<_>>(),
        "sessions_total": sessions_total,
        "clips": clips.iter().map(|d| bag(d, uploaded)).collect::<Vec<_>>(),
        "clips_total": clips_total,
    })
}

/// The `max` most recently changed directories in `dir` whose name
/// `keep` accepts (hidden ones never), newest first, and how many there
/// are in all.
fn newest_dirs(dir: &Path, max: usize, keep: impl Fn(&str) -> bool) -> (Vec<PathBuf>, usize) {
    let Ok(rd) = fs::read_dir(dir) else {
        return (Vec::new(), 0);
    };
    let mut dirs: Vec<(std::time::SystemTime, PathBuf)> = rd
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            !name.starts_with('.') && keep(&name)
        })
        // Not following a symbolic link: a planted link is not listed.
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        // A bag directory: its metadata or a segment; other directories
        // beside the sessions are not recordings.
        .filter(|e| is_bag(&e.path()))
        .filter_map(|e| {
            let m = e.metadata().ok()?;
            Some((m.modified().ok()?, e.path()))
        })
        .collect();
    let total = dirs.len();
    dirs.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
    dirs.truncate(max);
    (dirs.into_iter().map(|(_, p)| p).collect(), total)
}

/// Whether `dir` holds a recording: `metadata.yaml` or a segment file.
fn is_bag(dir: &Path) -> bool {
    dir.join("metadata.yaml").is_file()
        || edgerec_format::bag::segment_files(dir).is_ok_and(|f| !f.is_empty())
}

/// One bag directory (a session or a clip) and its segment files.
fn bag(dir: &Path, uploaded: Uploaded<'_>) -> Value {
    let mut files = edgerec_format::bag::segment_files(dir).unwrap_or_default();
    let total = files.len();
    files.truncate(MAX_FILES);
    let entries: Vec<Value> = files.iter().map(|f| file(f, uploaded)).collect();
    let start = entries.iter().filter_map(|e| e["start_ns"].as_u64()).min();
    let end = entries.iter().filter_map(|e| e["end_ns"].as_u64()).max();
    let bytes: u64 = entries.iter().filter_map(|e| e["bytes"].as_u64()).sum();
    let mut v = json!({
        "name": dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        "files": entries,
        "start_ns": start,
        "end_ns": end,
        "bytes": bytes,
    });
    if total > MAX_FILES {
        v["files_left_out"] = (total - MAX_FILES).into();
    }
    v
}

fn file(path: &Path, uploaded: Uploaded<'_>) -> Value {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let active = name.ends_with(".active");
    let bytes = fs::symlink_metadata(path).map(|m| m.len()).unwrap_or(0);
    let stats = (!active)
        .then(|| edgerec_format::reader::read_summary(path).ok())
        .flatten()
        .and_then(|s| s.statistics);
    let range = stats
        .as_ref()
        .filter(|s| s.message_count > 0)
        .map(|s| (s.message_start_time, s.message_end_time));
    json!({
        "file": name,
        "bytes": bytes,
        "state": if active { "recording" } else { "closed" },
        "messages": stats.as_ref().map(|s| s.message_count),
        "start_ns": range.map(|r| r.0),
        "end_ns": range.map(|r| r.1),
        "upload": match uploaded {
            None => "off",
            Some(_) if active => "waiting",
            Some(f) if f(path) => "sent",
            Some(_) => "waiting",
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path, bytes: usize) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, vec![0u8; bytes]).unwrap();
    }

    #[test]
    fn sessions_and_clips_newest_first_bounded_with_upload_state() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        for (i, s) in ["s_a", "s_b", "s_c"].iter().enumerate() {
            touch(&root.join(s).join(format!("{s}_0.mcap")), 10 + i);
            // Distinct mtimes, s_c newest.
            let t = std::time::SystemTime::UNIX_EPOCH
                + std::time::Duration::from_secs(1_000 + i as u64);
            fs::File::options()
                .write(true)
                .open(root.join(s))
                .or_else(|_| fs::File::open(root.join(s)))
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
        touch(&root.join("s_c/s_c_1.mcap.active"), 7);
        touch(&root.join("events/brake_20261207T101010Z/brake_0.mcap"), 3);
        fs::create_dir_all(root.join(".hidden")).unwrap();
        // Not a recording: listed nowhere.
        fs::create_dir_all(root.join("tls")).unwrap();
        touch(&root.join("tls/ca.pem"), 5);
        std::os::unix::fs::symlink(root.join("s_a"), root.join("s_link")).unwrap();

        let sent = |p: &Path| p.ends_with("s_c/s_c_0.mcap");
        let v = list(root, 2, Some(&sent));
        assert_eq!(v["sessions_total"], 3, "{v:#}");
        let names: Vec<&str> = v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["s_c", "s_b"], "{v:#}");
        let c = &v["sessions"][0]["files"];
        assert_eq!(c[0]["file"], "s_c_0.mcap");
        assert_eq!(c[0]["upload"], "sent");
        assert_eq!(c[0]["state"], "closed");
        // Not an MCAP file: listed by size, no messages.
        assert_eq!(c[0]["bytes"], 12);
        assert!(c[0]["messages"].is_null());
        assert_eq!(c[1]["file"], "s_c_1.mcap.active");
        assert_eq!(
            (c[1]["state"].as_str(), c[1]["upload"].as_str()),
            (Some("recording"), Some("waiting"))
        );
        assert_eq!(v["clips_total"], 1);
        assert_eq!(v["clips"][0]["files"][0]["file"], "brake_0.mcap");
        let off = list(root, 10, None);
        assert_eq!(off["sessions"][0]["files"][0]["upload"], "off");
        assert_eq!(
            off["sessions"].as_array().unwrap().len(),
            3,
            "the link is not listed: {off:#}"
        );
    }
}
