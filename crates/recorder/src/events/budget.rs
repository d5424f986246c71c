//! The event clips' own disk budget (`triggers.disk_budget`): clips
//! together may take this many bytes, so a flood of triggers fills the
//! budget and never the disk the continuous recording needs. A new clip
//! is refused when the budget is spent; an open clip is told how many
//! bytes it may reach and ends there (a note in its `edgerec.clip`
//! metadata says so). Both are counted in the status.
//!
//! What the clips take is measured on disk (every file under
//! `<root>/events/` but the open clip's), so clips deleted by retention,
//! offload or a person give their room back; the scan is redone at most
//! every [`RESCAN_EVERY`] and the clips finished since are added in
//! between.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

/// How old the measure of the finished clips may get before a new clip
/// measures again.
pub const RESCAN_EVERY: Duration = Duration::from_secs(1);

/// Kept back from an open clip's share for what it writes when it
/// finishes (the events' metadata, the summary, `metadata.yaml`).
pub const FINISH_RESERVE: u64 = 512 << 10;

/// A clip is not started with less room than this.
pub const MIN_CLIP_ROOM: u64 = 1 << 20;

/// A refusal is logged at most this often (the first at once).
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// The budget and what the clips on disk take of it.
#[derive(Debug)]
pub(crate) struct ClipBudget {
    limit: u64,
    used: u64,
    measured_at: Option<Instant>,
    warned_at: Option<Instant>,
}

impl ClipBudget {
    /// A budget of `limit` bytes, not measured yet.
    pub(crate) fn new(limit: u64) -> Self {
        ClipBudget {
            limit,
            used: 0,
            measured_at: None,
            warned_at: None,
        }
    }

    /// Whether a refusal at `now` is logged: the first, then one per
    /// [`WARN_EVERY`].
    pub(crate) fn should_warn(&mut self, now: Instant) -> bool {
        let due = self
            .warned_at
            .is_none_or(|t| now.saturating_duration_since(t) >= WARN_EVERY);
        if due {
            self.warned_at = Some(now);
        }
        due
    }

    /// The budget, bytes.
    pub(crate) fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes the clips took at the last measure, with those finished
    /// since.
    pub(crate) fn used(&self) -> u64 {
        self.used
    }

    /// Measures the clips under `events` again when the last measure is
    /// older than [`RESCAN_EVERY`] (or there is none). No clip is open
    /// when it is called.
    pub(crate) fn refresh(&mut self, events: &Path, now: Instant) {
        if self
            .measured_at
            .is_some_and(|t| now.saturating_duration_since(t) < RESCAN_EVERY)
        {
            return;
        }
        self.used = tree_bytes(events, 2);
        self.measured_at = Some(now);
    }

    /// A clip of `bytes` was finished (or cut) since the last measure.
    pub(crate) fn finished(&mut self, bytes: u64) {
        self.used = self.used.saturating_add(bytes);
    }

    /// The bytes a new clip may reach, or `None` when the budget has no
    /// room for one.
    pub(crate) fn room_for_a_clip(&self) -> Option<u64> {
        let room = self
            .limit
            .saturating_sub(self.used)
            .saturating_sub(FINISH_RESERVE);
        (room >= MIN_CLIP_ROOM).then_some(room)
    }
}

/// Bytes of the regular files under `dir`, `depth` levels down (a clip
/// directory and its files: 2), not following links.
fn tree_bytes(dir: &Path, depth: u32) -> u64 {
    let Ok(rd) = fs::read_dir(dir) else {
        return 0;
    };
    let mut total = 0u64;
    for e in rd.flatten() {
        let Ok(m) = fs::symlink_metadata(e.path()) else {
            continue;
        };
        if m.is_file() {
            total = total.saturating_add(m.len());
        } else if m.is_dir() && depth > 1 {
            total = total.saturating_add(tree_bytes(&e.path(), depth - 1));
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_clip_directories_and_refuses_when_spent() {
        let d = tempfile::tempdir().unwrap();
        let events = d.path().join("events");
        let clip = events.join("ctl_20260101T000000Z");
        fs::create_dir_all(&clip).unwrap();
        fs::write(clip.join("a.mcap"), vec![0u8; 3 << 20]).unwrap();
        fs::write(clip.join("metadata.yaml"), b"x").unwrap();
        // Deeper levels are not clips' files.
        fs::create_dir_all(clip.join("deeper")).unwrap();
        fs::write(clip.join("deeper/z"), vec![0u8; 10 << 20]).unwrap();

        let t = Instant::now();
        let mut b = ClipBudget::new(8 << 20);
        b.refresh(&events, t);
        assert_eq!(b.used(), (3 << 20) + 1);
        let room = b.room_for_a_clip().unwrap();
        assert_eq!(room, (5 << 20) - 1 - FINISH_RESERVE);
        b.finished(room);
        assert_eq!(b.room_for_a_clip(), None);
        // Within RESCAN_EVERY the measure stands; after it, a deleted
        // clip gives its room back.
        fs::remove_dir_all(&clip).unwrap();
        b.refresh(&events, t);
        assert_eq!(b.room_for_a_clip(), None);
        b.refresh(&events, t + RESCAN_EVERY);
        assert_eq!(b.used(), 0);
        assert!(b.room_for_a_clip().is_some());
        // No events directory yet: nothing used.
        let mut fresh = ClipBudget::new(2 << 20);
        fresh.refresh(&d.path().join("none"), t);
        assert_eq!(fresh.used(), 0);
        assert_eq!(fresh.limit(), 2 << 20);
    }
}
