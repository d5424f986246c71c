//! The running recorder's offload queue: what goes first.
//!
//! Each file the recorder closes gets a [`Class`]: an event clip first,
//! then a segment an event's window overlaps (or a window asked for by
//! hand), then the rest; oldest (by the log time it starts) first within a
//! class. The class is decided again whenever a window arrives, so a clip
//! or an event that fires late still overtakes older segments already
//! waiting. With [`Select::Events`] a segment no window overlaps is held
//! on the vehicle instead of queued, and queued when a later window
//! overlaps it (the event's pre-roll reaches back into closed segments).
//!
//! Pure bookkeeping, no I/O: the agent ([`crate::agent`]) sends what
//! [`Queue::take_due`] gives and puts back what failed.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Windows remembered (the newest): enough for every event of hours of
/// recording at any sane trigger rate, bounded against a trigger flood.
pub const MAX_WINDOWS: usize = 1024;

/// Segments held back under [`Select::Events`] (the newest): a window
/// reaches back only its pre-roll, so older ones could not be picked.
pub const MAX_HELD: usize = 4096;

/// Which files are sent (`offload.upload`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    /// Every file, in [`Class`] order.
    All,
    /// Event clips and the segments a window overlaps.
    Events,
}

/// What goes first: the lower, the sooner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// An event clip.
    Clip = 0,
    /// A segment an event's window overlaps, or one asked for.
    Event = 1,
    /// Any other segment.
    Rest = 2,
}

impl Class {
    /// Every class, first to last.
    pub const ALL: [Class; 3] = [Class::Clip, Class::Event, Class::Rest];

    /// Its name in the status.
    pub fn as_str(&self) -> &'static str {
        match self {
            Class::Clip => "clips",
            Class::Event => "event_segments",
            Class::Rest => "segments",
        }
    }
}

/// A span of log time, ns since the epoch, both ends included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// First ns.
    pub start_ns: u64,
    /// Last ns (`u64::MAX`: open, an event that still holds).
    pub end_ns: u64,
}

impl Span {
    /// Whether the two share a moment.
    pub fn overlaps(&self, o: &Span) -> bool {
        self.start_ns <= o.end_ns && o.start_ns <= self.end_ns
    }
}

/// A file or clip directory waiting.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The segment file, or the clip's bag directory.
    pub path: PathBuf,
    /// A clip (a directory) or a segment.
    pub clip: bool,
    /// Its class now.
    pub class: Class,
    /// The log time it covers, when known.
    pub span: Option<Span>,
    /// Its bytes.
    pub bytes: u64,
    /// Failed tries so far.
    pub failures: u32,
    /// Not to be tried before.
    pub not_before: Instant,
    /// When it was queued (the age of the oldest, in the status).
    pub since: Instant,
    seq: u64,
}

impl Entry {
    fn order(&self) -> (Class, u64, u64) {
        (self.class, self.span.map_or(0, |s| s.start_ns), self.seq)
    }
}

/// One class's share of the queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassLoad {
    /// Files (a clip counts once).
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// How long the oldest has waited.
    pub oldest: Duration,
}

/// The queue.
#[derive(Debug)]
pub struct Queue {
    select: Select,
    items: Vec<Entry>,
    held: VecDeque<Entry>,
    /// Windows by what names them (a clip's directory; `asked/N`).
    windows: BTreeMap<PathBuf, (u64, Span)>,
    seq: u64,
    held_dropped: u64,
}

impl Queue {
    /// An empty queue choosing as `select` says.
    pub fn new(select: Select) -> Queue {
        Queue {
            select,
            items: Vec::new(),
            held: VecDeque::new(),
            windows: BTreeMap::new(),
            seq: 0,
            held_dropped: 0,
        }
    }

    /// A segment closed: queued in its class, or held back (events only,
    /// no window overlaps it).
    pub fn segment(&mut self, path: PathBuf, bytes: u64, span: Option<Span>, now: Instant) {
        if self.knows(&path) {
            return;
        }
        let mut e = self.entry(path, false, bytes, span, now);
        e.class = self.class_of(span);
        if e.class == Class::Rest && self.select == Select::Events {
            self.held.push_back(e);
            if self.held.len() > MAX_HELD {
                self.held.pop_front();
                self.held_dropped += 1;
            }
        } else {
            self.items.push(e);
        }
    }

    /// An event clip closed: queued first; its window counts as an
    /// event's (it may be the first the queue hears of it).
    pub fn clip(&mut self, dir: PathBuf, bytes: u64, span: Option<Span>, now: Instant) {
        if let Some(s) = span {
            self.window(dir.clone(), s);
        }
        if self.knows(&dir) {
            return;
        }
        let mut e = self.entry(dir, true, bytes, span, now);
        e.class = Class::Clip;
        self.items.push(e);
    }

    /// An event's window, new or grown (the same `name` replaces the
    /// earlier one): the segments it overlaps move up, held ones are
    /// queued.
    pub fn window(&mut self, name: PathBuf, span: Span) {
        self.seq += 1;
        self.windows.insert(name, (self.seq, span));
        if self.windows.len() > MAX_WINDOWS {
            // The oldest announced goes.
            if let Some(oldest) = self
                .windows
                .iter()
                .min_by_key(|(_, (seq, _))| *seq)
                .map(|(k, _)| k.clone())
            {
                self.windows.remove(&oldest);
            }
        }
        for e in &mut self.items {
            if e.class == Class::Rest && e.span.is_some_and(|s| s.overlaps(&span)) {
                e.class = Class::Event;
            }
        }
        let held = std::mem::take(&mut self.held);
        for mut e in held {
            if e.span.is_some_and(|s| s.overlaps(&span)) {
                e.class = Class::Event;
                self.items.push(e);
            } else {
                self.held.push_back(e);
            }
        }
    }

    /// The due entry that goes first, of a class up to `upto` (a metered
    /// link: [`Class::Event`]), taken out of the queue.
    pub fn take_due(&mut self, now: Instant, upto: Class) -> Option<Entry> {
        let i = self
            .items
            .iter()
            .enumerate()
            .filter(|(_, e)| e.not_before <= now && e.class <= upto)
            .min_by_key(|(_, e)| e.order())
            .map(|(i, _)| i)?;
        Some(self.items.swap_remove(i))
    }

    /// Puts back an entry that failed, not to be tried for `wait`; its
    /// class is decided again (a window may have come meanwhile).
    pub fn retry(&mut self, mut e: Entry, wait: Duration, now: Instant) {
        e.failures += 1;
        e.not_before = now + wait;
        if !e.clip {
            e.class = e.class.min(self.class_of(e.span));
        }
        self.items.push(e);
    }

    /// Makes every queued entry due now; how many there are.
    pub fn retry_now(&mut self, now: Instant) -> usize {
        for e in &mut self.items {
            e.not_before = e.not_before.min(now);
        }
        self.items.len()
    }

    /// When the next entry of a class up to `upto` is due, if any waits.
    pub fn next_due(&self, upto: Class) -> Option<Instant> {
        self.items
            .iter()
            .filter(|e| e.class <= upto)
            .map(|e| e.not_before)
            .min()
    }

    /// Nothing queued (held segments are not queued).
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The queued entries, in no order.
    pub fn items(&self) -> &[Entry] {
        &self.items
    }

    /// The segments held back (events only), oldest first.
    pub fn held(&self) -> impl Iterator<Item = &Entry> {
        self.held.iter()
    }

    /// Held segments forgotten past [`MAX_HELD`] (never sent by this run).
    pub fn held_dropped(&self) -> u64 {
        self.held_dropped
    }

    /// Whether a file of the bag directory `dir` is queued.
    pub fn waits_in(&self, dir: &Path) -> bool {
        self.items.iter().any(|e| e.path.parent() == Some(dir))
    }

    /// Each class's files, bytes and oldest wait, in [`Class::ALL`]
    /// order.
    pub fn load(&self, now: Instant) -> [ClassLoad; 3] {
        let mut out = [ClassLoad::default(); 3];
        for e in &self.items {
            let l = &mut out[e.class as usize];
            l.files += 1;
            l.bytes += e.bytes;
            l.oldest = l.oldest.max(now.saturating_duration_since(e.since));
        }
        out
    }

    /// Whether `path` is queued or held already (announced twice: a
    /// file recovered at start-up and picked up from disk).
    fn knows(&self, path: &Path) -> bool {
        self.items
            .iter()
            .chain(self.held.iter())
            .any(|e| e.path == path)
    }

    fn class_of(&self, span: Option<Span>) -> Class {
        match span {
            Some(s) if self.windows.values().any(|(_, w)| w.overlaps(&s)) => Class::Event,
            _ => Class::Rest,
        }
    }

    fn entry(
        &mut self,
        path: PathBuf,
        clip: bool,
        bytes: u64,
        span: Option<Span>,
        now: Instant,
    ) -> Entry {
        self.seq += 1;
        Entry {
            path,
            clip,
            class: Class::Rest,
            span,
            bytes,
            failures: 0,
            not_before: now,
            since: now,
            seq: self.seq,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(a: u64, b: u64) -> Option<Span> {
        Some(Span {
            start_ns: a,
            end_ns: b,
        })
    }

    fn order(q: &mut Queue, now: Instant) -> Vec<String> {
        std::iter::from_fn(|| q.take_due(now, Class::Rest))
            .map(|e| e.path.display().to_string())
            .collect()
    }

    #[test]
    fn a_late_clip_and_its_segments_overtake_older_segments_already_queued() {
        let now = Instant::now();
        let mut q = Queue::new(Select::All);
        q.segment("s/0.mcap".into(), 10, span(0, 99), now);
        q.segment("s/1.mcap".into(), 10, span(100, 199), now);
        q.segment("s/2.mcap".into(), 10, span(200, 299), now);
        // The event fires at 250 with 60 of pre-roll: segments 1 and 2.
        q.window(
            "events/e1".into(),
            Span {
                start_ns: 190,
                end_ns: u64::MAX,
            },
        );
        q.segment("s/3.mcap".into(), 10, span(300, 399), now);
        q.clip("events/e1".into(), 5, span(190, 320), now);
        // The grown window ended at 320: segment 4 is not in it.
        q.segment("s/4.mcap".into(), 10, span(400, 499), now);
        assert_eq!(
            order(&mut q, now),
            [
                "events/e1",
                "s/1.mcap",
                "s/2.mcap",
                "s/3.mcap",
                "s/0.mcap",
                "s/4.mcap"
            ]
        );
    }

    #[test]
    fn events_only_holds_the_rest_until_a_window_reaches_back() {
        let now = Instant::now();
        let mut q = Queue::new(Select::Events);
        q.segment("s/0.mcap".into(), 10, span(0, 99), now);
        q.segment("s/1.mcap".into(), 10, span(100, 199), now);
        // A recovered file whose span is not known is never picked by a
        // window: it stays held.
        q.segment("s/r.mcap".into(), 10, None, now);
        assert!(q.is_empty());
        q.window(
            "events/e".into(),
            Span {
                start_ns: 150,
                end_ns: 160,
            },
        );
        assert_eq!(order(&mut q, now), ["s/1.mcap"]);
        let held: Vec<_> = q.held().map(|e| e.path.display().to_string()).collect();
        assert_eq!(held, ["s/0.mcap", "s/r.mcap"]);
    }

    #[test]
    fn a_metered_link_takes_clips_and_event_segments_only() {
        let now = Instant::now();
        let mut q = Queue::new(Select::All);
        q.segment("s/0.mcap".into(), 10, span(0, 99), now);
        q.segment("s/1.mcap".into(), 10, span(100, 199), now);
        q.window(
            "events/e".into(),
            Span {
                start_ns: 150,
                end_ns: 160,
            },
        );
        let mut metered = vec![];
        while let Some(e) = q.take_due(now, Class::Event) {
            metered.push(e.path.display().to_string());
        }
        assert_eq!(metered, ["s/1.mcap"]);
        assert_eq!(order(&mut q, now), ["s/0.mcap"]);
    }

    #[test]
    fn a_failed_entry_waits_and_the_class_order_holds_among_the_due() {
        let now = Instant::now();
        let mut q = Queue::new(Select::All);
        q.segment("s/0.mcap".into(), 10, span(0, 99), now);
        q.clip("events/e".into(), 5, span(500, 600), now);
        let clip = q.take_due(now, Class::Rest).unwrap();
        assert_eq!(clip.path, Path::new("events/e"));
        q.retry(clip, Duration::from_secs(5), now);
        // The clip is not due: the segment goes.
        assert_eq!(order(&mut q, now), ["s/0.mcap"]);
        assert_eq!(q.next_due(Class::Rest), Some(now + Duration::from_secs(5)));
        assert_eq!(q.next_due(Class::Clip), Some(now + Duration::from_secs(5)));
        let later = now + Duration::from_secs(5);
        let e = q.take_due(later, Class::Rest).unwrap();
        assert_eq!((e.failures, e.class), (1, Class::Clip));
    }

    #[test]
    fn the_load_counts_each_class_and_the_windows_are_bounded() {
        let now = Instant::now();
        let mut q = Queue::new(Select::All);
        for i in 0..(MAX_WINDOWS as u64 + 10) {
            q.window(
                format!("events/{i}").into(),
                Span {
                    start_ns: i * 1000,
                    end_ns: i * 1000 + 1,
                },
            );
        }
        assert_eq!(q.windows.len(), MAX_WINDOWS);
        // The first windows were forgotten: a segment at 0 is the rest.
        q.segment("s/0.mcap".into(), 7, span(0, 1), now);
        q.segment("s/1.mcap".into(), 8, span(20_000, 20_001), now);
        q.clip("events/x".into(), 9, None, now);
        let later = now + Duration::from_secs(3);
        let load = q.load(later);
        assert_eq!(load[Class::Clip as usize].files, 1);
        assert_eq!(load[Class::Event as usize].bytes, 8);
        assert_eq!(load[Class::Rest as usize].bytes, 7);
        assert_eq!(load[Class::Rest as usize].oldest, Duration::from_secs(3));
    }
}
