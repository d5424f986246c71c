//! Offload inside the running recorder (`offload.upload = "all"` or
//! `"events"`): what the recorder announces (closed segments, closed event
//! clips, events' windows) is queued as it comes ([`Agent::announcer`]:
//! it only queues, so the recorder never waits) and sent by one thread of
//! the agent's own with the upload engine, at the idle I/O class, while
//! the recording goes on, in the [`crate::queue`]'s order: event clips,
//! then the segments an event overlaps, then the rest. A file that cannot
//! be sent now (the link, the store) waits and is tried again, each time
//! later, at most [`MAX_RETRY_WAIT`] apart. When the recording stops,
//! [`Agent::finish`] lets the queue drain for a bounded time, then sends
//! each session's `metadata.yaml` and manifest once every file of it is
//! at the store; what is left is logged, and `edgerec upload` of the
//! session sends it later (a part in flight is in the journal).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::ledger::Ledger;
use crate::link::Link;
use crate::manifest::{file_entry, segment_stats, Manifest, ManifestFile, MANIFEST};
use crate::pace::Pace;
use crate::queue::{Class, ClassLoad, Entry, Queue, Select, Span};
use crate::upload::{self, FileOutcome, Uploader, METADATA};
use crate::Settings;

/// The longest wait before a file that failed is tried again.
pub const MAX_RETRY_WAIT: Duration = Duration::from_secs(300);

/// The first wait after a failure; it doubles with each.
pub const FIRST_RETRY_WAIT: Duration = Duration::from_secs(5);

/// What the recorder announced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A segment file of a session, closed.
    Segment,
    /// An event clip's bag directory, closed.
    Clip,
    /// An event's window (named by its clip's directory), new or grown.
    Event,
}

/// One announcement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    /// The segment file, or the clip's directory.
    pub path: PathBuf,
    /// What it is.
    pub kind: Kind,
    /// The log time it covers (a segment recovered after a failure: not
    /// known, read from its summary).
    pub span: Option<Span>,
}

/// What the agent has done (for the status, and the end of a run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentStatus {
    /// Files and clips waiting.
    pub queued: u64,
    /// Their bytes.
    pub queued_bytes: u64,
    /// Files sent or found at the store already (a clip's files count).
    pub sent: u64,
    /// Their bytes.
    pub sent_bytes: u64,
    /// Event clips at the store, whole.
    pub clips: u64,
    /// Session manifests at the store.
    pub manifests: u64,
    /// Tries that failed (each file is tried again later).
    pub failures: u64,
    /// Files gone before they were sent (retention deleted them).
    pub gone: u64,
    /// The last failure.
    pub last_error: Option<String>,
    /// The queue by class (clips, event segments, the rest).
    pub classes: [ClassLoad; 3],
    /// Segments held on the vehicle (`"events"`: no event overlaps them).
    pub held: u64,
    /// What may be sent now: `open`, `metered (IFACE)`, `closed: why`.
    pub link: String,
    /// Bytes per second handed to the connections lately.
    pub rate: u64,
    /// The cap (`offload.max_rate`), bytes per second; 0 = none.
    pub max_rate: u64,
}

/// How often the link is looked at (the time, the route's interface).
pub const LINK_CHECK: Duration = Duration::from_secs(2);

enum Msg {
    Announced(Announcement),
    PickUp(PathBuf),
    Pause(String),
    Resume(String),
    Retry(String),
    Finish(Instant),
}

/// A session some of whose files were sent.
#[derive(Default)]
struct SessionSent {
    files: Vec<ManifestFile>,
}

/// The offload agent: a queue and the thread that empties it.
pub struct Agent {
    tx: Sender<Msg>,
    thread: Option<JoinHandle<()>>,
    give_up: Arc<std::sync::atomic::AtomicBool>,
    view: AgentView,
    ledger: Ledger,
}

/// The agent's status and the operator's commands, from any thread while
/// it runs (the health loop, the control socket).
#[derive(Clone)]
pub struct AgentView {
    tx: Sender<Msg>,
    status: Arc<Mutex<AgentStatus>>,
    /// Segments and clips announced and not yet taken into the queue (the
    /// agent's thread takes them between files: while it sends one, they
    /// wait in the channel).
    pending: Arc<[AtomicU64; 2]>,
    pace: Arc<Pace>,
    /// When the rate was last sampled, the bytes sent then, the rate.
    sampled: Arc<Mutex<(Instant, u64, u64)>>,
}

impl AgentView {
    /// What the agent has done so far, with the rate over the time since
    /// the last call (at least a second ago; else the last rate).
    pub fn status(&self) -> AgentStatus {
        let mut st = lock(&self.status).clone();
        let mut s = lock(&self.sampled);
        let (now, sent) = (Instant::now(), self.pace.sent());
        let dt = now.duration_since(s.0);
        if dt >= Duration::from_secs(1) {
            let rate = (sent.saturating_sub(s.1) as f64 / dt.as_secs_f64()) as u64;
            *s = (now, sent, rate);
        }
        st.rate = s.2;
        // What waits in the channel counts as waiting, by what it is.
        let segments = self.pending[0].load(Ordering::Relaxed);
        let clips = self.pending[1].load(Ordering::Relaxed);
        st.classes[Class::Rest as usize].files += segments;
        st.classes[Class::Clip as usize].files += clips;
        st.queued += segments + clips;
        st
    }

    /// Stops sending after the request in flight, until [`resume`]
    /// (`who` asked: it is logged and shown as the link's state).
    ///
    /// [`resume`]: AgentView::resume
    pub fn pause(&self, who: &str) {
        let _ = self.tx.send(Msg::Pause(who.to_owned()));
    }

    /// Sends again after [`AgentView::pause`].
    pub fn resume(&self, who: &str) {
        let _ = self.tx.send(Msg::Resume(who.to_owned()));
    }

    /// Tries every waiting file now, not at its later time.
    pub fn retry(&self, who: &str) {
        let _ = self.tx.send(Msg::Retry(who.to_owned()));
    }
}

impl Agent {
    /// Starts the agent's thread, sending with `uploader` as `settings`
    /// say.
    pub fn start(
        uploader: Uploader,
        settings: Settings,
        select: Select,
        ledger: Ledger,
    ) -> std::io::Result<Agent> {
        let (tx, rx) = mpsc::channel();
        let status = Arc::new(Mutex::new(AgentStatus::default()));
        let give_up = uploader.client().give_up_flag();
        let pace = uploader.client().pace();
        lock(&status).max_rate = pace.rate();
        let pending: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
        let worker = Worker {
            pending: pending.clone(),
            uploader,
            settings,
            rx,
            status: status.clone(),
            queue: Queue::new(select),
            sessions: BTreeMap::new(),
            link: None,
            ledger: ledger.clone(),
            paused: None,
        };
        let thread = std::thread::Builder::new()
            .name("edgerec-offload".to_owned())
            .spawn(move || worker.run())?;
        let view_tx = tx.clone();
        Ok(Agent {
            tx,
            thread: Some(thread),
            give_up,
            view: AgentView {
                tx: view_tx,
                pending,
                sampled: Arc::new(Mutex::new((Instant::now(), pace.sent(), 0))),
                pace,
                status,
            },
            ledger,
        })
    }

    /// What the recorder calls with each file it closes: it queues the
    /// path and returns.
    pub fn announcer(&self) -> impl Fn(Announcement) + Send + Sync + 'static {
        let tx = self.tx.clone();
        let pending = self.view.pending.clone();
        move |a| {
            if let Some(i) = pending_slot(a.kind) {
                pending[i].fetch_add(1, Ordering::Relaxed);
            }
            let _ = tx.send(Msg::Announced(a));
        }
    }

    /// Queues what earlier runs left under `root` and the store does not
    /// have yet (by the ledger): finished event clips first (their
    /// windows class the segments), then the closed segments of every
    /// session. Scanned on the agent's thread.
    pub fn pick_up(&self, root: &Path) {
        let _ = self.tx.send(Msg::PickUp(root.to_path_buf()));
    }

    /// The ledger of what is at the store (shared).
    pub fn ledger(&self) -> Ledger {
        self.ledger.clone()
    }

    /// What it has done so far.
    pub fn status(&self) -> AgentStatus {
        self.view.status()
    }

    /// A handle on the status for another thread (the health loop).
    pub fn view(&self) -> AgentView {
        self.view.clone()
    }

    /// Lets the queue drain for at most `drain`, sends the sessions'
    /// manifests, stops the thread, and says what it did. Past `drain`
    /// a failing request is no longer tried again (a file cut in its parts
    /// is in the journal), so a store that is down does not hold the stop
    /// beyond the request in flight.
    pub fn finish(mut self, drain: Duration) -> AgentStatus {
        let deadline = Instant::now() + drain;
        let _ = self.tx.send(Msg::Finish(deadline));
        if let Some(t) = self.thread.take() {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            self.give_up
                .store(true, std::sync::atomic::Ordering::Relaxed);
            let _ = t.join();
        }
        self.status()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            self.give_up
                .store(true, std::sync::atomic::Ordering::Relaxed);
            let _ = self.tx.send(Msg::Finish(Instant::now()));
            let _ = t.join();
        }
    }
}

struct Worker {
    uploader: Uploader,
    settings: Settings,
    rx: Receiver<Msg>,
    status: Arc<Mutex<AgentStatus>>,
    queue: Queue,
    sessions: BTreeMap<PathBuf, SessionSent>,
    /// The link as last looked at, and when.
    link: Option<(Instant, Link)>,
    /// What is at the store.
    ledger: Ledger,
    /// Paused by the operator: who.
    paused: Option<String>,
    /// See [`AgentView::status`]: announced, not yet taken.
    pending: Arc<[AtomicU64; 2]>,
}

impl Worker {
    fn run(mut self) {
        if let Err(e) = crate::priority::idle_io() {
            tracing::warn!("offload: cannot lower its I/O priority to idle: {e}");
        }
        if let Err(e) = crate::priority::low_cpu() {
            tracing::warn!("offload: cannot lower its CPU weight: {e}");
        }
        let mut finish_by: Option<Instant> = None;
        loop {
            loop {
                match self.rx.try_recv() {
                    Ok(m) => self.take(m, &mut finish_by),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        finish_by.get_or_insert_with(Instant::now);
                        break;
                    }
                }
            }
            let link = match &self.paused {
                Some(who) => Link::Closed(format!("paused by {who}")),
                None => self.link(),
            };
            let now = Instant::now();
            let closed = matches!(link, Link::Closed(_));
            if finish_by.is_some_and(|t| self.queue.is_empty() || now >= t || closed) {
                break;
            }
            let upto = match link {
                Link::Open => Some(Class::Rest),
                Link::Metered(_) => Some(Class::Event),
                Link::Closed(_) => None,
            };
            if let Some(item) = upto.and_then(|c| self.queue.take_due(now, c)) {
                self.publish_queue();
                self.send(item);
                continue;
            }
            let due = upto.and_then(|c| self.queue.next_due(c));
            let mut wait = due.map_or(LINK_CHECK, |d| d.saturating_duration_since(now));
            if upto != Some(Class::Rest) {
                // What may go changes with the link.
                wait = wait.min(LINK_CHECK);
            }
            if let Some(t) = finish_by {
                wait = wait.min(t.saturating_duration_since(now));
            }
            match self.rx.recv_timeout(wait) {
                Ok(m) => self.take(m, &mut finish_by),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    finish_by.get_or_insert_with(Instant::now);
                }
            }
        }
        if let Link::Closed(why) = self.link() {
            tracing::warn!(
                "offload: the sessions' manifests are not sent: {why} (`edgerec upload` sends them)"
            );
        } else {
            self.close_sessions();
        }
        self.publish_queue();
        if !self.queue.is_empty() {
            tracing::warn!(
                "offload: {} file(s) not sent when the recording stopped ({} bytes): `edgerec upload` \
                 of their sessions sends them",
                self.queue.items().len(),
                self.queue.items().iter().map(|i| i.bytes).sum::<u64>()
            );
            for i in self.queue.items() {
                tracing::warn!("offload: not sent: {}", i.path.display());
            }
        }
    }

    fn take(&mut self, m: Msg, finish_by: &mut Option<Instant>) {
        match m {
            Msg::Announced(a) => {
                if let Some(i) = pending_slot(a.kind) {
                    let _ =
                        self.pending[i].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                            Some(n.saturating_sub(1))
                        });
                }
                let now = Instant::now();
                match a.kind {
                    Kind::Segment => {
                        let bytes = std::fs::metadata(&a.path).map(|m| m.len()).unwrap_or(0);
                        let span = a.span.or_else(|| {
                            let (_, range) = segment_stats(&a.path)?;
                            range.map(|(start_ns, end_ns)| Span { start_ns, end_ns })
                        });
                        self.queue.segment(a.path, bytes, span, now);
                    }
                    Kind::Clip => {
                        let bytes = dir_bytes(&a.path);
                        self.queue.clip(a.path, bytes, a.span, now);
                    }
                    Kind::Event => {
                        if let Some(span) = a.span {
                            self.queue.window(a.path, span);
                        }
                    }
                }
                self.publish_queue();
            }
            Msg::Pause(who) => {
                tracing::info!("offload: paused by {who}");
                lock(&self.status).link = format!("paused by {who}");
                self.paused = Some(who);
            }
            Msg::Resume(who) => {
                if self.paused.take().is_some() {
                    tracing::info!("offload: resumed by {who}");
                }
                // Looked at afresh, and shown.
                self.link = None;
            }
            Msg::Retry(who) => {
                let n = self.queue.retry_now(Instant::now());
                tracing::info!("offload: {who} asked to try the {n} waiting file(s) now");
            }
            Msg::PickUp(root) => {
                self.pick_up(&root);
                self.publish_queue();
            }
            Msg::Finish(t) => *finish_by = Some(t),
        }
    }

    /// See [`Agent::pick_up`].
    fn pick_up(&mut self, root: &Path) {
        let now = Instant::now();
        let (mut clips, mut segments) = (0, 0);
        let events = root.join(crate::upload::EVENTS_DIR);
        for dir in sorted_entries(&events, true) {
            let files = sorted_entries(&dir, false);
            if files.is_empty()
                || files
                    .iter()
                    .any(|f| f.to_string_lossy().ends_with(".active"))
            {
                continue;
            }
            if self.ledger.has(&dir) {
                continue;
            }
            let span = files_span(&files);
            self.queue.clip(dir.clone(), dir_bytes(&dir), span, now);
            clips += 1;
        }
        for dir in sorted_entries(root, true) {
            if dir == events || !dir.join(METADATA).is_file() {
                continue;
            }
            for f in sorted_entries(&dir, false) {
                if f.extension().is_none_or(|e| e != "mcap") || self.ledger.has(&f) {
                    continue;
                }
                let bytes = std::fs::metadata(&f).map(|m| m.len()).unwrap_or(0);
                let span = files_span(std::slice::from_ref(&f));
                self.queue.segment(f, bytes, span, now);
                segments += 1;
            }
        }
        if clips + segments > 0 {
            tracing::info!(
                "offload: {clips} event clip(s) and {segments} segment(s) of earlier runs not at \
                 the store yet: queued"
            );
        }
    }

    /// The link now (looked at every [`LINK_CHECK`]); a change is logged.
    fn link(&mut self) -> Link {
        if let Some((at, l)) = &self.link {
            if at.elapsed() < LINK_CHECK {
                return l.clone();
            }
        }
        let l = self.settings.link.now(&self.settings.endpoint);
        if self.link.as_ref().is_none_or(|(_, old)| *old != l) {
            match &l {
                Link::Open => tracing::info!("offload: link open"),
                Link::Metered(i) => tracing::info!(
                    "offload: link metered ({i}): event clips and the segments events overlap only"
                ),
                Link::Closed(why) => tracing::info!("offload: link closed: {why}"),
            }
            lock(&self.status).link = match &l {
                Link::Open => "open".to_owned(),
                Link::Metered(i) => format!("metered ({i})"),
                Link::Closed(why) => format!("closed: {why}"),
            };
        }
        self.link = Some((Instant::now(), l.clone()));
        l
    }

    fn publish_queue(&self) {
        let classes = self.queue.load(Instant::now());
        let mut st = lock(&self.status);
        st.queued = classes.iter().map(|c| c.files).sum();
        st.queued_bytes = classes.iter().map(|c| c.bytes).sum();
        st.classes = classes;
        st.held = self.queue.held().count() as u64;
    }

    /// Sends one item; puts it back with a later time when it fails.
    fn send(&mut self, item: Entry) {
        if !item.path.exists() {
            tracing::warn!(
                "offload: {} is gone before it was sent (deleted to make room)",
                item.path.display()
            );
            lock(&self.status).gone += 1;
            return;
        }
        tracing::info!(
            "offload: sending {} ({}, {} bytes{})",
            item.path.display(),
            item.class.as_str(),
            item.bytes,
            match item.failures {
                0 => String::new(),
                n => format!(", try {}", n + 1),
            }
        );
        let result = if item.clip {
            self.send_clip(&item.path)
        } else {
            self.send_segment(&item.path)
        };
        if let Err(e) = result {
            let wait = FIRST_RETRY_WAIT
                .saturating_mul(1 << item.failures.min(10))
                .min(MAX_RETRY_WAIT);
            tracing::warn!(
                "offload: {}: {e}; trying again in {} s",
                item.path.display(),
                wait.as_secs()
            );
            {
                let mut st = lock(&self.status);
                st.failures += 1;
                st.last_error = Some(format!("{}: {e}", item.path.display()));
            }
            self.queue.retry(item, wait, Instant::now());
        }
    }

    fn send_segment(&mut self, path: &Path) -> Result<(), String> {
        let f = upload::plan_in_session(path, &self.settings).map_err(|e| e.to_string())?;
        let outcome = self
            .uploader
            .upload(&f, &|_| {})
            .map_err(|e| e.to_string())?;
        tracing::info!("offload: {} -> {}", path.display(), f.key);
        self.ledger.record(path, f.size, &f.key);
        {
            let mut st = lock(&self.status);
            st.sent += 1;
            st.sent_bytes += f.size;
        }
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        self.sessions.entry(dir).or_default().files.push(file_entry(
            path,
            &f.key,
            f.size,
            outcome.sha256(),
        ));
        Ok(())
    }

    fn send_clip(&mut self, dir: &Path) -> Result<(), String> {
        let plan = upload::plan(&[dir.to_path_buf()], &self.settings).map_err(|e| e.to_string())?;
        let mut first_error = None;
        let report =
            self.uploader
                .send(&plan, &self.settings.vehicle, &|_| {}, &mut |path, _, r| {
                    if let Err(e) = r {
                        first_error.get_or_insert_with(|| format!("{}: {e}", path.display()));
                    }
                });
        {
            let mut st = lock(&self.status);
            st.sent += report.sent + report.skipped;
            st.sent_bytes += report.sent_bytes;
        }
        match first_error {
            Some(e) => Err(e),
            None => {
                tracing::info!("offload: event clip {} sent", dir.display());
                let (key, _) = upload::key_in_session(dir, MANIFEST, &self.settings);
                self.ledger.record(dir, dir_bytes(dir), &key);
                let mut st = lock(&self.status);
                st.clips += 1;
                st.manifests += report.manifests;
                Ok(())
            }
        }
    }

    /// After the last file: each session's `metadata.yaml` (it names
    /// every segment now) and its manifest, when none of its files is
    /// still waiting.
    fn close_sessions(&mut self) {
        let sessions = std::mem::take(&mut self.sessions);
        for (dir, sent) in sessions {
            if self.queue.waits_in(&dir) {
                continue;
            }
            let mut files = sent.files;
            let meta = dir.join(METADATA);
            if meta.exists() {
                let r = upload::plan_in_session(&meta, &self.settings).and_then(|f| {
                    let o = self.uploader.upload(&f, &|_| {})?;
                    Ok(file_entry(&meta, &f.key, f.size, o.sha256()))
                });
                match r {
                    Ok(entry) => files.push(entry),
                    Err(e) => {
                        self.failed(&meta, &e.to_string());
                        continue;
                    }
                }
            }
            let (key, session) = upload::key_in_session(&dir, MANIFEST, &self.settings);
            // Under "events", the segments no event overlapped.
            let left_out = self
                .queue
                .held()
                .filter(|e| e.path.parent() == Some(dir.as_path()))
                .map(|e| {
                    format!(
                        "{}: no event overlaps it (offload.upload = \"events\")",
                        upload::file_name(&e.path)
                    )
                })
                .collect();
            let manifest = Manifest::new(&self.settings.vehicle, &session, files, left_out);
            match self.uploader.upload_bytes(&key, &manifest.to_bytes()) {
                Ok(FileOutcome::Sent { .. } | FileOutcome::Skipped { .. }) => {
                    tracing::info!("offload: session {} complete at the store", dir.display());
                    lock(&self.status).manifests += 1;
                }
                Err(e) => self.failed(&dir.join(MANIFEST), &e.to_string()),
            }
        }
    }

    fn failed(&self, path: &Path, e: &str) {
        tracing::warn!("offload: {}: {e}", path.display());
        let mut st = lock(&self.status);
        st.failures += 1;
        st.last_error = Some(format!("{}: {e}", path.display()));
    }
}

/// The directories (`dirs`) or the files directly in `dir`, by name;
/// none when `dir` is a symbolic link (`events/` or a session replaced by
/// a link to elsewhere is not uploaded), and never a link in it.
fn sorted_entries(dir: &Path, dirs: bool) -> Vec<PathBuf> {
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
        tracing::warn!(
            "offload: {} is a symbolic link; nothing under it is uploaded",
            dir.display()
        );
        return Vec::new();
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_type()
                        .is_ok_and(|t| if dirs { t.is_dir() } else { t.is_file() })
                })
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The log time the MCAP files among `files` cover, from their summaries.
fn files_span(files: &[PathBuf]) -> Option<Span> {
    let ranges: Vec<(u64, u64)> = files.iter().filter_map(|f| segment_stats(f)?.1).collect();
    Some(Span {
        start_ns: ranges.iter().map(|r| r.0).min()?,
        end_ns: ranges.iter().map(|r| r.1).max()?,
    })
}

/// The slot of [`AgentView::pending`] an announcement counts in.
fn pending_slot(kind: Kind) -> Option<usize> {
    match kind {
        Kind::Segment => Some(0),
        Kind::Clip => Some(1),
        Kind::Event => None,
    }
}

/// The bytes of the files directly in `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn what_is_picked_up_is_never_behind_a_link() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(outside.path().join("clip")).unwrap();
        std::fs::write(outside.path().join("clip/a_0.mcap"), b"x").unwrap();
        std::fs::write(outside.path().join("secret.mcap"), b"x").unwrap();
        let session = root.path().join("rec_1");
        std::fs::create_dir(&session).unwrap();
        std::fs::write(session.join("rec_1_0.mcap"), b"x").unwrap();
        symlink(
            outside.path().join("secret.mcap"),
            session.join("rec_1_1.mcap"),
        )
        .unwrap();
        symlink(outside.path(), root.path().join("events")).unwrap();
        symlink(outside.path(), root.path().join("rec_0")).unwrap();
        // Neither the linked session nor the linked events/ is a directory
        // to upload; a linked segment is no file of the session.
        assert_eq!(
            sorted_entries(root.path(), true),
            std::slice::from_ref(&session)
        );
        assert!(sorted_entries(&root.path().join("events"), true).is_empty());
        assert_eq!(
            sorted_entries(&session, false),
            [session.join("rec_1_0.mcap")]
        );
    }
}
