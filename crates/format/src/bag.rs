//! rosbag2 bag directories on disk: their segment files, `metadata.yaml`
//! and how a finished file is published into them.
//!
//! `ros2 bag info/play` opens a directory through `metadata.yaml`. Humble
//! reads versions up to 5, Jazzy up to 9; both read 5, so 5 is the default.
//! Version 9 (Jazzy) adds `ros_distro`, `custom_data`,
//! `type_description_hash` and writes `offered_qos_profiles` as a YAML
//! sequence rather than a string. The file is rewritten whenever a segment
//! closes, through a temporary file, rename and a directory fsync, so a
//! power cut leaves either the old or the new file, never a torn one.
//! [`rewrite_metadata`] rebuilds it from the closed segments on disk, and
//! [`publish`] is the one way a finished segment (closed by the recorder or
//! rebuilt by [`crate::recover`]) gets its final name.

use std::fs::{self, File};
use std::path::{Path, PathBuf};

use serde_norway::Value;

use crate::reader::read_summary;
use crate::yaml::{self, Yaml};
use crate::FormatError;

/// Which rosbag2 metadata version to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MetadataVersion {
    /// Version 5, read by Humble and later.
    #[default]
    Humble,
    /// Version 9, read by Jazzy and later.
    Jazzy,
}

/// One topic of the bag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Topic name.
    pub name: String,
    /// `pkg/msg/Type`.
    pub type_name: String,
    /// `cdr`.
    pub serialization_format: String,
    /// The offered QoS profiles as rosbag2's YAML text (a sequence).
    pub offered_qos_profiles: String,
    /// Messages over all files.
    pub message_count: u64,
}

/// One file of the bag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    /// Path relative to the bag directory.
    pub path: String,
    /// First message log time, ns since epoch.
    pub starting_time_ns: u64,
    /// Last minus first log time, ns.
    pub duration_ns: u64,
    /// Messages in the file.
    pub message_count: u64,
}

/// The content of `metadata.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BagMetadata {
    /// Version to write.
    pub version: MetadataVersion,
    /// Topics, in the order they were first seen.
    pub topics: Vec<TopicInfo>,
    /// Closed files, in order.
    pub files: Vec<FileInfo>,
}

impl BagMetadata {
    /// Earliest start over all files (0 when empty).
    pub fn starting_time_ns(&self) -> u64 {
        self.files
            .iter()
            .filter(|f| f.message_count > 0)
            .map(|f| f.starting_time_ns)
            .min()
            .unwrap_or(0)
    }
    /// Span from the earliest start to the latest end.
    pub fn duration_ns(&self) -> u64 {
        let start = self.starting_time_ns();
        self.files
            .iter()
            .filter(|f| f.message_count > 0)
            .map(|f| f.starting_time_ns + f.duration_ns)
            .max()
            .map(|end| end.saturating_sub(start))
            .unwrap_or(0)
    }
    /// Messages over all files (saturating: the counts come from the
    /// files' summaries, which may be damaged).
    pub fn message_count(&self) -> u64 {
        self.files
            .iter()
            .fold(0u64, |a, f| a.saturating_add(f.message_count))
    }

    /// Appends a closed file from its summary: the file entry, and its
    /// per-channel counts added to the topics (new topics take type and QoS
    /// from the file's schemas and channels).
    pub fn add_file(
        &mut self,
        path: String,
        st: &crate::records::Statistics,
        channels: &std::collections::BTreeMap<u16, crate::records::Channel>,
        schemas: &std::collections::BTreeMap<u16, crate::records::Schema>,
    ) {
        // Idempotent: a reload from disk may have listed a file whose
        // closer adds it a moment later; counting it twice would be wrong.
        if self.files.iter().any(|f| f.path == path) {
            return;
        }
        self.files.push(FileInfo {
            path,
            starting_time_ns: st.message_start_time,
            duration_ns: st.message_end_time.saturating_sub(st.message_start_time),
            message_count: st.message_count,
        });
        for (id, ch) in channels {
            let n = st.channel_message_counts.get(id).copied().unwrap_or(0);
            match self.topics.iter_mut().find(|t| t.name == ch.topic) {
                Some(t) => t.message_count = t.message_count.saturating_add(n),
                None => self.topics.push(TopicInfo {
                    name: ch.topic.clone(),
                    type_name: schemas
                        .get(&ch.schema_id)
                        .map(|s| s.name.clone())
                        .unwrap_or_default(),
                    serialization_format: ch.message_encoding.clone(),
                    offered_qos_profiles: ch
                        .metadata
                        .get("offered_qos_profiles")
                        .cloned()
                        .unwrap_or_default(),
                    message_count: n,
                }),
            }
        }
    }

    /// The YAML text, written by libyaml's emitter ([`crate::yaml`]): any
    /// topic or type name (quotes, `: `, newlines, control characters, YAML
    /// 1.1's `yes`/`on`, kilobytes of text) reads back as it was.
    pub fn to_yaml(&self) -> Result<String, yaml::YamlError> {
        let v9 = self.version == MetadataVersion::Jazzy;
        // Version 9 holds the profiles as a sequence; text that is not one
        // (a damaged file's channel) becomes none.
        let parsed: Vec<Option<Value>> = self
            .topics
            .iter()
            .map(|t| {
                v9.then(|| serde_norway::from_str::<Value>(&t.offered_qos_profiles).ok())
                    .flatten()
                    .filter(Value::is_sequence)
            })
            .collect();
        let topics: Vec<Yaml> = self
            .topics
            .iter()
            .zip(&parsed)
            .map(|(t, qos)| {
                let qos = match (v9, qos) {
                    (false, _) => Yaml::Str(&t.offered_qos_profiles),
                    (true, Some(q)) => Yaml::from_value(q),
                    (true, None) => Yaml::Seq(Vec::new()),
                };
                let mut meta = vec![
                    ("name", Yaml::Str(&t.name)),
                    ("type", Yaml::Str(&t.type_name)),
                    ("serialization_format", Yaml::Str(&t.serialization_format)),
                    ("offered_qos_profiles", qos),
                ];
                if v9 {
                    meta.push(("type_description_hash", Yaml::Str("")));
                }
                Yaml::Map(vec![
                    ("topic_metadata", Yaml::Map(meta)),
                    ("message_count", Yaml::UInt(t.message_count)),
                ])
            })
            .collect();
        let files: Vec<Yaml> = self
            .files
            .iter()
            .map(|f| {
                Yaml::Map(vec![
                    ("path", Yaml::Str(&f.path)),
                    (
                        "starting_time",
                        Yaml::Map(vec![(
                            "nanoseconds_since_epoch",
                            Yaml::UInt(f.starting_time_ns),
                        )]),
                    ),
                    (
                        "duration",
                        Yaml::Map(vec![("nanoseconds", Yaml::UInt(f.duration_ns))]),
                    ),
                    ("message_count", Yaml::UInt(f.message_count)),
                ])
            })
            .collect();
        let mut info = vec![
            ("version", Yaml::UInt(if v9 { 9 } else { 5 })),
            ("storage_identifier", Yaml::Str("mcap")),
            (
                "duration",
                Yaml::Map(vec![("nanoseconds", Yaml::UInt(self.duration_ns()))]),
            ),
            (
                "starting_time",
                Yaml::Map(vec![(
                    "nanoseconds_since_epoch",
                    Yaml::UInt(self.starting_time_ns()),
                )]),
            ),
            ("message_count", Yaml::UInt(self.message_count())),
            ("topics_with_message_count", Yaml::Seq(topics)),
            ("compression_format", Yaml::Str("")),
            ("compression_mode", Yaml::Str("")),
            (
                "relative_file_paths",
                Yaml::Seq(self.files.iter().map(|f| Yaml::Str(&f.path)).collect()),
            ),
            ("files", Yaml::Seq(files)),
        ];
        if v9 {
            info.push(("custom_data", Yaml::Null));
            info.push(("ros_distro", Yaml::Str("jazzy")));
        }
        let doc = Yaml::Map(vec![("rosbag2_bagfile_information", Yaml::Map(info))]);
        yaml::to_string(&doc)
    }

    /// The version a `metadata.yaml` text declares: Jazzy for 9, Humble
    /// for anything else or a text that does not parse.
    pub fn version_of(text: &str) -> MetadataVersion {
        let v: Option<Value> = serde_norway::from_str(text).ok();
        match v
            .as_ref()
            .and_then(|v| v.get("rosbag2_bagfile_information"))
            .and_then(|i| i.get("version"))
            .and_then(Value::as_u64)
        {
            Some(9) => MetadataVersion::Jazzy,
            _ => MetadataVersion::Humble,
        }
    }

    /// Writes `dir/metadata.yaml` atomically: temp file, fsync, rename,
    /// directory fsync.
    pub fn write_atomic(&self, dir: &Path) -> std::io::Result<()> {
        // Only a string over 2 GiB or libyaml out of memory fails: the old
        // file stays then.
        let text = self
            .to_yaml()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        write_file_atomic(dir, "metadata.yaml", text.as_bytes())
    }
}

/// Replaces `dir/name` with `data` so that a power cut leaves the old or the
/// new content.
pub fn write_file_atomic(dir: &Path, name: &str, data: &[u8]) -> std::io::Result<()> {
    // A temporary file of a random name made with O_EXCL | O_NOFOLLOW in
    // the directory's descriptor: no link planted in the bag directory is
    // followed, and two writers never share a temporary file.
    crate::nofollow::Dir::open(dir)?.write_atomic(name, data)
}

/// fsyncs a directory so a rename or create in it is durable.
#[cfg(unix)]
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Elsewhere (the any-OS tools on Windows) a directory cannot be opened
/// for a sync, and NTFS journals its metadata: a rename there is as
/// durable as the file system makes it, so there is nothing to do.
#[cfg(not(unix))]
pub fn sync_dir(_dir: &Path) -> std::io::Result<()> {
    Ok(())
}

/// Makes a file read-only for everyone: mode 0444 on Unix through the
/// open descriptor (whatever mode it was created with), the read-only
/// attribute by path elsewhere (a handle opened for reading may not
/// change attributes on Windows).
fn make_read_only(file: &File, path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = path;
        file.set_permissions(fs::Permissions::from_mode(0o444))
    }
    #[cfg(not(unix))]
    {
        let mut p = file.metadata()?.permissions();
        p.set_readonly(true);
        fs::set_permissions(path, p)
    }
}

/// Segment files of a bag directory, in segment order (`_<n>` numerically):
/// closed `.mcap` files and `.mcap.active` ones. Only the directory's own
/// files: a symbolic link in it is no segment (on the data partition one
/// may have been planted to make the recorder read, recover or delete
/// something else), and is left out with a warning.
pub fn segment_files(dir: &Path) -> Result<Vec<PathBuf>, FormatError> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| {
            // file_type() does not follow the link it describes.
            let link = e.file_type().is_ok_and(|t| t.is_symlink());
            if link {
                tracing::warn!(
                    "{}: a symbolic link, not a segment; left out",
                    e.path().display()
                );
            }
            !link
        })
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.ends_with(".mcap") || n.ends_with(".mcap.active")
        })
        .collect();
    let key = |p: &PathBuf| {
        let n = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        let stem = n
            .trim_end_matches(".active")
            .trim_end_matches(".mcap")
            .to_string();
        let idx = stem
            .rsplit('_')
            .next()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(u64::MAX);
        (idx, n)
    };
    v.sort_by_key(key);
    Ok(v)
}

/// The largest `metadata.yaml` read back: thousands of segments and
/// topics take a few MiB.
pub const MAX_METADATA_BYTES: u64 = 64 << 20;

/// Rewrites `dir/metadata.yaml` from the summaries of the closed segments
/// in `dir` (after a segment was deleted or recovered), keeping the
/// version the existing file has (Humble when there is none). A segment
/// whose summary does not read is left out.
pub fn rewrite_metadata(dir: &Path) -> Result<BagMetadata, FormatError> {
    // Read without following a link and at most MAX_METADATA_BYTES: one
    // planted as metadata.yaml (to /dev/zero, say) is no version to keep.
    let version = match crate::nofollow::read_capped(&dir.join("metadata.yaml"), MAX_METADATA_BYTES)
    {
        Ok(text) => BagMetadata::version_of(&String::from_utf8_lossy(&text)),
        Err(_) => MetadataVersion::Humble,
    };
    let mut meta = BagMetadata {
        version,
        ..Default::default()
    };
    for path in segment_files(dir)? {
        if path.extension().is_some_and(|e| e == "active") {
            continue;
        }
        let Ok(s) = read_summary(&path) else { continue };
        let Some(st) = &s.statistics else { continue };
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        meta.add_file(name, st, &s.channels, &s.schemas);
    }
    meta.write_atomic(dir)?;
    Ok(meta)
}

/// A step of [`publish`], in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishStep {
    /// Opening the finished file.
    Open,
    /// Making it read-only: `fchmod(0444)`.
    ReadOnly,
    /// `fsync` of the file: its data and its mode durable.
    SyncFile,
    /// `rename` to the final name.
    Rename,
    /// `fsync` of a directory the rename changed.
    SyncDir,
}

impl PublishStep {
    /// What the step does, as a verb phrase (`cannot <what>`).
    pub fn what(self) -> &'static str {
        match self {
            PublishStep::Open => "open the finished file",
            PublishStep::ReadOnly => "make the finished file read-only (0444)",
            PublishStep::SyncFile => "fsync the finished file",
            PublishStep::Rename => "rename the finished file to its final name",
            PublishStep::SyncDir => "fsync the directory after the rename",
        }
    }
}

/// Why [`publish`] failed: the step, the path it acted on, the OS error.
#[derive(Debug, thiserror::Error)]
#[error("{path}: cannot {what} (publishing as {to}): {source}", what = .step.what(), path = .path.display(), to = .to.display())]
pub struct PublishError {
    /// The step that failed.
    pub step: PublishStep,
    /// What the step acted on: the source file, or for
    /// [`PublishStep::SyncDir`] the directory.
    pub path: PathBuf,
    /// The final name asked for.
    pub to: PathBuf,
    /// The OS error.
    #[source]
    pub source: std::io::Error,
}

/// Gives the finished file `from` its final name `to` (replacing a file
/// there, as `rename(2)` does) so that `to` never names anything but
/// complete, durable, read-only data: mode 0444, fsync of the file, rename,
/// fsync of the directory of `to` (and of `from` when that differs).
///
/// The recorder closes segments through it and [`crate::recover`]
/// publishes recovered files through it; a caller that deletes its source
/// of truth (recovery's `.active` file) does so only after it returns.
pub fn publish(from: &Path, to: &Path) -> Result<(), PublishError> {
    let fail = |step: PublishStep, path: &Path| {
        let to = to.to_path_buf();
        let path = path.to_path_buf();
        move |source| PublishError {
            step,
            path,
            to,
            source,
        }
    };
    // Why this order: the final name is what readers, retention and a
    // later recovery trust, so it must not appear before what it names is
    // durable. The mode goes first so that the one fsync makes both the
    // data and the mode durable (fsync writes the inode; the recorder's
    // fdatasync at close did not cover a mode changed after it), and so
    // that no power cut can leave a final name on a writable file. The
    // rename comes only then, and is itself durable only once the
    // directory is fsynced; a cut before that leaves the old name, which
    // both the recorder and recovery treat as unfinished. Read-only is
    // enough to open: fchmod and fsync need a descriptor, not write
    // access, and a file left 0444 by an interrupted earlier try opens.
    #[cfg(unix)]
    {
        let file = File::open(from).map_err(fail(PublishStep::Open, from))?;
        make_read_only(&file, from).map_err(fail(PublishStep::ReadOnly, from))?;
        file.sync_all().map_err(fail(PublishStep::SyncFile, from))?;
    }
    // Elsewhere (Windows) flushing needs a handle with write access, which
    // a read-only file refuses: flush first, then mark it read-only.
    #[cfg(not(unix))]
    {
        let file = fs::OpenOptions::new()
            .write(true)
            .open(from)
            .map_err(fail(PublishStep::Open, from))?;
        file.sync_all().map_err(fail(PublishStep::SyncFile, from))?;
        make_read_only(&file, from).map_err(fail(PublishStep::ReadOnly, from))?;
    }
    fs::rename(from, to).map_err(fail(PublishStep::Rename, from))?;
    let to_dir = parent_dir(to);
    sync_dir(&to_dir).map_err(fail(PublishStep::SyncDir, &to_dir))?;
    let from_dir = parent_dir(from);
    if !same_dir(&from_dir, &to_dir) {
        // The old name is gone from there; without this a power cut could
        // bring it back beside the new one.
        sync_dir(&from_dir).map_err(fail(PublishStep::SyncDir, &from_dir))?;
    }
    Ok(())
}

/// The directory holding `p` (`.` for a bare file name).
pub(crate) fn parent_dir(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn same_dir(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// rosbag2's YAML for one offered QoS profile, as `ros2 bag record` writes
/// it (Humble numbering: history 1 keep_last, reliability 1 reliable / 2
/// best effort, durability 1 transient_local / 2 volatile; infinite
/// durations as 2147483647 s + 4294967295 ns).
pub fn qos_profile_yaml(reliable: bool, transient_local: bool, depth: u32) -> String {
    let inf = "\n    sec: 2147483647\n    nsec: 4294967295";
    format!(
        "- history: 1\n  depth: {depth}\n  reliability: {}\n  durability: {}\n  deadline:{inf}\n  lifespan:{inf}\n  liveliness: 1\n  liveliness_lease_duration:{inf}\n  avoid_ros_namespace_conventions: false",
        if reliable { 1 } else { 2 },
        if transient_local { 1 } else { 2 },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn sample(version: MetadataVersion) -> BagMetadata {
        BagMetadata {
            version,
            topics: vec![TopicInfo {
                name: "/imu".into(),
                type_name: "sensor_msgs/msg/Imu".into(),
                serialization_format: "cdr".into(),
                offered_qos_profiles: qos_profile_yaml(true, false, 10),
                message_count: 30,
            }],
            files: vec![
                FileInfo {
                    path: "s_0.mcap".into(),
                    starting_time_ns: 1_000,
                    duration_ns: 500,
                    message_count: 20,
                },
                FileInfo {
                    path: "s_1.mcap".into(),
                    starting_time_ns: 1_600,
                    duration_ns: 400,
                    message_count: 10,
                },
            ],
        }
    }

    #[test]
    fn totals_span_all_files() {
        let m = sample(MetadataVersion::Humble);
        assert_eq!(m.starting_time_ns(), 1_000);
        assert_eq!(m.duration_ns(), 1_000);
        assert_eq!(m.message_count(), 30);
        let y: Value = serde_norway::from_str(&m.to_yaml().unwrap()).unwrap();
        let info = &y["rosbag2_bagfile_information"];
        assert_eq!(info["version"], 5);
        assert_eq!(info["duration"]["nanoseconds"], 1000);
        assert_eq!(info["message_count"], 30);
        let topic = &info["topics_with_message_count"][0];
        assert_eq!(topic["message_count"], 30);
        // Version 5: the profiles are one string of YAML.
        assert_eq!(
            topic["topic_metadata"]["offered_qos_profiles"],
            qos_profile_yaml(true, false, 10).as_str()
        );
        assert_eq!(info["relative_file_paths"][1], "s_1.mcap");
        assert_eq!(
            info["files"][1]["starting_time"]["nanoseconds_since_epoch"],
            1600
        );
        assert_eq!(
            BagMetadata::version_of(&m.to_yaml().unwrap()),
            MetadataVersion::Humble
        );
    }

    #[test]
    fn jazzy_writes_version_9_with_qos_sequence() {
        let text = sample(MetadataVersion::Jazzy).to_yaml().unwrap();
        let y: Value = serde_norway::from_str(&text).unwrap();
        let info = &y["rosbag2_bagfile_information"];
        assert_eq!(info["version"], 9);
        assert_eq!(info["ros_distro"], "jazzy");
        assert!(info["custom_data"].is_null());
        let qos = &info["topics_with_message_count"][0]["topic_metadata"]["offered_qos_profiles"];
        assert_eq!(qos[0]["history"], 1);
        assert_eq!(qos[0]["depth"], 10);
        assert_eq!(qos[0]["deadline"]["sec"], 2147483647);
        assert_eq!(BagMetadata::version_of(&text), MetadataVersion::Jazzy);
    }

    #[test]
    fn adding_a_listed_file_again_changes_nothing() {
        let mut m = sample(MetadataVersion::Humble);
        let st = crate::records::Statistics {
            message_count: 20,
            message_start_time: 1_000,
            message_end_time: 1_500,
            ..Default::default()
        };
        m.add_file(
            "s_0.mcap".into(),
            &st,
            &Default::default(),
            &Default::default(),
        );
        assert_eq!(m.files.len(), 2);
        assert_eq!(m.message_count(), 30);
    }

    /// Two threads rewriting the same metadata.yaml (a closer and
    /// retention) must never rename each other's temporary file away.
    #[test]
    fn concurrent_atomic_writes_do_not_collide() {
        let d = tempfile::tempdir().unwrap();
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let dir = d.path();
                s.spawn(move || {
                    for _ in 0..50 {
                        write_file_atomic(dir, "metadata.yaml", &[t; 64]).unwrap();
                    }
                });
            }
        });
        assert_eq!(fs::read(d.path().join("metadata.yaml")).unwrap().len(), 64);
    }

    #[test]
    fn atomic_write_replaces() {
        let d = tempfile::tempdir().unwrap();
        write_file_atomic(d.path(), "metadata.yaml", b"a").unwrap();
        write_file_atomic(d.path(), "metadata.yaml", b"bb").unwrap();
        assert_eq!(fs::read(d.path().join("metadata.yaml")).unwrap(), b"bb");
        assert!(!d.path().join(".metadata.yaml.tmp").exists());
    }

    // ---------------------------------------------------------- publish

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    /// A finished file, writable, as the recorder and recovery leave it.
    fn finished(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
        let p = dir.join(name);
        fs::write(&p, data).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        p
    }

    #[test]
    fn publish_leaves_only_the_final_name_read_only_with_the_data() {
        let d = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let from = finished(d.path(), "s_0.mcap.active", &data);
        let to = d.path().join("s_0.mcap");
        publish(&from, &to).unwrap();
        assert!(!from.exists(), "the source name is gone");
        assert_eq!(mode(&to), 0o444);
        assert_eq!(fs::read(&to).unwrap(), data);
        let names: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("s_0.mcap")]);
    }

    /// Recovery of a closed file without summary replaces it in place.
    #[test]
    fn publish_replaces_a_file_under_the_final_name() {
        let d = tempfile::tempdir().unwrap();
        let to = finished(d.path(), "x.mcap", b"old");
        fs::set_permissions(&to, fs::Permissions::from_mode(0o444)).unwrap();
        let from = finished(d.path(), "x.mcap.recovering", b"new");
        publish(&from, &to).unwrap();
        assert_eq!(fs::read(&to).unwrap(), b"new");
        assert_eq!(mode(&to), 0o444);
        assert!(!from.exists());
    }

    /// A try interrupted after the chmod leaves a 0444 source: publishing
    /// it again must work (it is opened read-only).
    #[test]
    fn publish_takes_a_source_that_is_read_only_already() {
        let d = tempfile::tempdir().unwrap();
        let from = finished(d.path(), "a.mcap.active", b"data");
        fs::set_permissions(&from, fs::Permissions::from_mode(0o444)).unwrap();
        let to = d.path().join("a.mcap");
        publish(&from, &to).unwrap();
        assert_eq!(fs::read(&to).unwrap(), b"data");
    }

    #[test]
    fn publish_moves_between_directories() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir(d.path().join("a")).unwrap();
        fs::create_dir(d.path().join("b")).unwrap();
        let from = finished(&d.path().join("a"), "f.tmp", b"xyz");
        let to = d.path().join("b").join("f.mcap");
        publish(&from, &to).unwrap();
        assert!(!from.exists());
        assert_eq!(fs::read(&to).unwrap(), b"xyz");
        assert_eq!(mode(&to), 0o444);
    }

    #[test]
    fn publish_of_a_missing_source_fails_at_open_and_creates_nothing() {
        let d = tempfile::tempdir().unwrap();
        let from = d.path().join("gone.mcap.active");
        let to = d.path().join("gone.mcap");
        let e = publish(&from, &to).unwrap_err();
        assert_eq!(e.step, PublishStep::Open);
        assert_eq!(e.path, from);
        assert_eq!(e.to, to);
        assert_eq!(e.source.kind(), std::io::ErrorKind::NotFound);
        assert!(!to.exists());
        let text = e.to_string();
        assert!(text.contains("cannot open the finished file"), "{text}");
        assert!(text.contains("gone.mcap.active"), "{text}");
    }

    /// Fails for root too: no permission check is involved.
    #[test]
    fn publish_into_a_missing_directory_fails_at_rename_and_keeps_the_source() {
        let d = tempfile::tempdir().unwrap();
        let from = finished(d.path(), "s_1.mcap.active", b"keep me");
        let to = d.path().join("no-such-dir").join("s_1.mcap");
        let e = publish(&from, &to).unwrap_err();
        assert_eq!(e.step, PublishStep::Rename);
        assert_eq!(e.path, from);
        assert_eq!(e.source.kind(), std::io::ErrorKind::NotFound);
        // Still there under its old name (now 0444 and durable), so the
        // caller or a later recovery can try again.
        assert_eq!(fs::read(&from).unwrap(), b"keep me");
        assert_eq!(mode(&from), 0o444);
        assert!(e
            .to_string()
            .contains("cannot rename the finished file to its final name"));
    }

    /// Fails for root too: rename(2) never puts a file over a directory.
    #[test]
    fn publish_onto_a_directory_fails_at_rename() {
        let d = tempfile::tempdir().unwrap();
        let from = finished(d.path(), "s_2.mcap.active", b"x");
        let to = d.path().join("s_2.mcap");
        fs::create_dir(&to).unwrap();
        let e = publish(&from, &to).unwrap_err();
        assert_eq!(e.step, PublishStep::Rename);
        assert!(to.is_dir());
        assert_eq!(fs::read(&from).unwrap(), b"x");
    }

    /// A directory the process may not write to. Root ignores the mode, so
    /// there the test says so and checks nothing.
    #[test]
    fn publish_into_a_read_only_directory_fails_at_rename() {
        let d = tempfile::tempdir().unwrap();
        let from = finished(d.path(), "s_3.mcap.active", b"x");
        let ro = d.path().join("ro");
        fs::create_dir(&ro).unwrap();
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o555)).unwrap();
        if fs::write(ro.join("probe"), b"").is_ok() {
            println!("skipped: permissions are not enforced for this user (root)");
            return;
        }
        let e = publish(&from, &ro.join("s_3.mcap")).unwrap_err();
        assert_eq!(e.step, PublishStep::Rename);
        assert_eq!(e.source.kind(), std::io::ErrorKind::PermissionDenied);
        fs::set_permissions(&ro, fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn parent_of_a_bare_name_is_the_current_directory() {
        assert_eq!(parent_dir(Path::new("x.mcap")), Path::new("."));
        assert_eq!(parent_dir(Path::new("/d/x.mcap")), Path::new("/d"));
    }
}
