//! The ids of the fleet's commands, journaled on the data partition so a
//! command the broker delivers twice (QoS 1 after a reconnect, or after
//! the vehicle restarted) runs once. A command's id is made durable
//! before it runs (`fdatasync`), and its final reply after: a command cut
//! by a crash is never run again (at most once), and a repeat gets the
//! first answer back.
//!
//! One JSON line per step: `{"id","command","at_ms","state":"started"}`,
//! then `{"id","state":"finished","reply":{...}}`. A cut last line (a
//! power cut mid-write) is passed over. The newest [`KEEP`] ids are kept;
//! past twice that many lines the file is rewritten with them (a new file
//! under a random name, made durable, renamed over the old one).

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// Ids remembered.
pub const KEEP: usize = 10_000;

/// At most this much of the end of the file is read at start.
const MAX_READ: u64 = 8 << 20;

/// What is known of one id.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The command's name.
    pub command: String,
    /// When it arrived, ms since the Unix epoch.
    pub at_ms: i64,
    /// Its final reply, once it ran; `None` when it was started and never
    /// finished (the vehicle stopped meanwhile).
    pub reply: Option<Value>,
}

/// The journal; memory only when its path is empty.
#[derive(Debug)]
pub struct Journal {
    path: Option<PathBuf>,
    file: Option<File>,
    entries: HashMap<String, Entry>,
    order: VecDeque<String>,
    lines: usize,
    keep: usize,
    /// Lines passed over at start (cut or not understood).
    pub skipped: usize,
}

/// The line that says `id` is about to run.
fn started_line(id: &str, command: &str, at_ms: i64) -> Value {
    json!({"id": id, "command": command, "at_ms": at_ms, "state": "started"})
}

/// The line that holds `id`'s final reply.
fn finished_line(id: &str, reply: &Value) -> Value {
    json!({"id": id, "state": "finished", "reply": reply})
}

fn open_append(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .mode(0o600)
        // A link planted where the journal goes is not followed.
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

impl Journal {
    /// A journal kept only in memory.
    pub fn in_memory() -> Journal {
        Journal {
            path: None,
            file: None,
            entries: HashMap::new(),
            order: VecDeque::new(),
            lines: 0,
            keep: KEEP,
            skipped: 0,
        }
    }

    /// Remembers `keep` ids instead of [`KEEP`] (tests).
    pub fn with_keep(mut self, keep: usize) -> Journal {
        self.keep = keep.max(1);
        while self.order.len() > self.keep {
            if let Some(old) = self.order.pop_front() {
                self.entries.remove(&old);
            }
        }
        self
    }

    /// Opens (creating it, and its directory) the journal at `path` and
    /// reads what it holds.
    pub fn open(path: &Path) -> std::io::Result<Journal> {
        if path.as_os_str().is_empty() {
            return Ok(Journal::in_memory());
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = open_append(path)?;
        let len = file.metadata()?.len();
        let start = len.saturating_sub(MAX_READ);
        file.seek(SeekFrom::Start(start))?;
        let mut text = Vec::new();
        (&mut file).take(MAX_READ).read_to_end(&mut text)?;
        let mut j = Journal {
            path: Some(path.to_path_buf()),
            file: Some(file),
            ..Journal::in_memory()
        };
        let mut lines = text.split(|&b| b == b'\n');
        if start > 0 {
            // The first line read may be a tail.
            lines.next();
        }
        for line in lines.filter(|l| !l.is_empty()) {
            match serde_json::from_slice::<Value>(line) {
                Ok(v) if j.replay(&v) => j.lines += 1,
                _ => j.skipped += 1,
            }
        }
        Ok(j)
    }

    /// Takes one line read back; false when it is not one of ours.
    fn replay(&mut self, v: &Value) -> bool {
        let Some(id) = v["id"].as_str() else {
            return false;
        };
        match v["state"].as_str() {
            Some("started") => {
                self.remember(
                    id,
                    Entry {
                        command: v["command"].as_str().unwrap_or("").to_owned(),
                        at_ms: v["at_ms"].as_i64().unwrap_or(0),
                        reply: None,
                    },
                );
                true
            }
            Some("finished") => {
                if let Some(e) = self.entries.get_mut(id) {
                    e.reply = Some(v["reply"].clone());
                }
                true
            }
            _ => false,
        }
    }

    fn remember(&mut self, id: &str, e: Entry) {
        if self.entries.insert(id.to_owned(), e).is_none() {
            self.order.push_back(id.to_owned());
        }
        while self.order.len() > self.keep {
            if let Some(old) = self.order.pop_front() {
                self.entries.remove(&old);
            }
        }
    }

    /// What is known of `id`.
    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.entries.get(id)
    }

    /// Ids remembered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Records that `id` (`command`) is about to run, durably: after this
    /// returns Ok, it never runs again.
    pub fn begin(&mut self, id: &str, command: &str, at_ms: i64) -> std::io::Result<()> {
        self.append(&started_line(id, command, at_ms))?;
        self.remember(
            id,
            Entry {
                command: command.to_owned(),
                at_ms,
                reply: None,
            },
        );
        Ok(())
    }

    /// Records `id`'s final reply, so a repeat gets it back.
    pub fn finish(&mut self, id: &str, reply: &Value) -> std::io::Result<()> {
        if let Some(e) = self.entries.get_mut(id) {
            e.reply = Some(reply.clone());
        }
        self.append(&finished_line(id, reply))?;
        if self.lines > 2 * self.keep {
            self.compact()?;
        }
        Ok(())
    }

    fn append(&mut self, v: &Value) -> std::io::Result<()> {
        let Some(f) = self.file.as_mut() else {
            return Ok(());
        };
        let mut line = v.to_string().into_bytes();
        line.push(b'\n');
        f.write_all(&line)?;
        f.sync_data()?;
        self.lines += 1;
        Ok(())
    }

    /// Rewrites the file with the ids remembered.
    fn compact(&mut self) -> std::io::Result<()> {
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let nonce = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
            ^ u128::from(std::process::id());
        let tmp = dir.join(format!(".{name}.{nonce:x}.tmp"));
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        let mut lines = 0;
        let mut text = Vec::new();
        let mut push = |v: Value| {
            text.extend(v.to_string().bytes());
            text.push(b'\n');
            lines += 1;
        };
        for id in &self.order {
            let Some(e) = self.entries.get(id) else {
                continue;
            };
            push(started_line(id, &e.command, e.at_ms));
            if let Some(r) = &e.reply {
                push(finished_line(id, r));
            }
        }
        let written = out.write_all(&text).and_then(|_| out.sync_all());
        if let Err(e) = written.and_then(|_| std::fs::rename(&tmp, &path)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        self.file = Some(open_append(&path)?);
        self.lines = lines;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_survive_a_restart_and_a_cut_last_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("cmds.jsonl");
        let mut j = Journal::open(&p).unwrap();
        j.begin("a", "trigger", 1).unwrap();
        j.finish("a", &json!({"id": "a", "status": "done"}))
            .unwrap();
        j.begin("b", "pause", 2).unwrap();
        drop(j);
        // A power cut in the middle of the next line.
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(b"{\"id\":\"c\",\"comm").unwrap();
        drop(f);
        let j = Journal::open(&p).unwrap();
        assert_eq!(
            j.get("a").unwrap().reply,
            Some(json!({"id": "a", "status": "done"}))
        );
        let b = j.get("b").unwrap();
        assert_eq!((b.command.as_str(), b.reply.clone()), ("pause", None));
        assert!(j.get("c").is_none());
        assert_eq!(j.skipped, 1);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn a_planted_link_is_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("elsewhere");
        std::fs::write(&target, b"keep").unwrap();
        let p = d.path().join("cmds.jsonl");
        std::os::unix::fs::symlink(&target, &p).unwrap();
        assert!(Journal::open(&p).is_err());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    }

    #[test]
    fn compaction_keeps_the_newest_ids() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("cmds.jsonl");
        let keep = 20;
        let mut j = Journal::open(&p).unwrap().with_keep(keep);
        for i in 0..(keep * 3 + 5) {
            let id = format!("id{i}");
            j.begin(&id, "status", i as i64).unwrap();
            j.finish(&id, &json!({"status": "done"})).unwrap();
        }
        assert_eq!(j.len(), keep);
        assert!(j.get("id0").is_none() && j.get(&format!("id{}", keep * 3 + 4)).is_some());
        drop(j);
        let lines = std::fs::read_to_string(&p).unwrap().lines().count();
        assert!(lines <= 2 * keep + 2, "{lines} lines");
        let j = Journal::open(&p).unwrap().with_keep(keep);
        assert_eq!(j.len(), keep);
        assert_eq!(j.skipped, 0);
        assert!(j
            .get(&format!("id{}", keep * 3 + 4))
            .unwrap()
            .reply
            .is_some());
    }
}
