//! Heartbeats: every stage that must keep moving (a source, the storage
//! thread, the clock monitor, the control loop) registers one and beats it
//! as it works, so the watchdog supervisor can tell a stalled stage from a
//! quiet one and stop feeding the watchdogs before the board hangs for good.
//! A beat is two relaxed atomic stores of a coarse monotonic time and a
//! progress figure, cheap enough to call per message; a stage that ends
//! normally drops its [`Heartbeat`] and is no longer watched. A stage that
//! dies (its thread panics while holding the heartbeat, or calls
//! [`Heartbeat::died`]) stays registered, marked dead: it counts as
//! stalled at once, so the watchdog stops being fed and the fault names
//! exactly the stage that died.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Serialize, Serializer};

/// The set of stages being watched. Cloning is cheap and every clone sees
/// the same stages; it is `Send + Sync`.
#[derive(Clone)]
pub struct Heartbeats {
    inner: Arc<Registry>,
}

struct Registry {
    /// The instant ages are measured from (`Instant` side).
    base: Instant,
    /// The same moment on the coarse clock, in ns (see [`coarse_ns`]).
    base_coarse_ns: u64,
    /// Locked only to register, unregister and check; never on a beat.
    stages: Mutex<Vec<Arc<Stage>>>,
    next_id: AtomicU64,
}

struct Stage {
    id: u64,
    name: String,
    deadline: Duration,
    /// Last beat, in ns since [`Registry::base`] on the coarse clock.
    last_ns: AtomicU64,
    progress: AtomicU64,
    dead: AtomicBool,
}

/// One registered stage's handle. [`beat`](Heartbeat::beat) it whenever
/// the stage does work; drop it when the stage ends normally, which
/// unregisters it. It is deliberately not `Clone`: one owner, one drop.
pub struct Heartbeat {
    stage: Arc<Stage>,
    registry: Arc<Registry>,
}

/// A stage that has not beaten within its deadline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stalled {
    /// The stage's name as registered.
    pub name: String,
    /// How long it may stay silent.
    #[serde(rename = "deadline_ms", serialize_with = "as_millis")]
    pub deadline: Duration,
    /// How long it has been silent when checked.
    #[serde(rename = "silent_for_ms", serialize_with = "as_millis")]
    pub silent_for: Duration,
    /// The progress figure of its last [`Heartbeat::beat_progress`].
    pub last_progress: u64,
    /// The stage died (panicked) rather than went quiet.
    pub dead: bool,
}

impl fmt::Display for Stalled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.dead {
            return write!(
                f,
                "stage `{}` died (its thread panicked; last progress {})",
                self.name, self.last_progress
            );
        }
        write!(
            f,
            "stage `{}` silent for {} ms (deadline {} ms, last progress {})",
            self.name,
            self.silent_for.as_millis(),
            self.deadline.as_millis(),
            self.last_progress
        )
    }
}

/// One stage as shown in the status snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageSnapshot {
    /// The stage's name as registered.
    pub name: String,
    /// How long it may stay silent.
    #[serde(rename = "deadline_ms", serialize_with = "as_millis")]
    pub deadline: Duration,
    /// Time since its last beat.
    #[serde(rename = "age_ms", serialize_with = "as_millis")]
    pub age: Duration,
    /// The progress figure of its last [`Heartbeat::beat_progress`].
    pub progress: u64,
    /// Whether `age` exceeds `deadline`, or the stage died.
    pub stalled: bool,
    /// Whether the stage died (panicked).
    pub dead: bool,
}

fn as_millis<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_u64(u64::try_from(value.as_millis()).unwrap_or(u64::MAX))
}

impl Default for Heartbeats {
    fn default() -> Self {
        Heartbeats::new()
    }
}

impl fmt::Debug for Heartbeats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Heartbeats")
            .field("stages", &self.snapshot())
            .finish()
    }
}

impl Heartbeats {
    /// An empty set of stages.
    pub fn new() -> Heartbeats {
        // Both clocks are read back to back so ages measured on the coarse
        // clock and instants passed to `check` share one origin (within one
        // coarse tick).
        let base = Instant::now();
        let base_coarse_ns = coarse_ns(base);
        Heartbeats {
            inner: Arc::new(Registry {
                base,
                base_coarse_ns,
                stages: Mutex::new(Vec::new()),
                next_id: AtomicU64::new(0),
            }),
        }
    }

    /// Starts watching a stage called `name` that must beat at least every
    /// `deadline`. The deadline counts from now: a stage that never beats
    /// is stalled after `deadline`. Names need not be unique, but reports
    /// only tell stages apart by name.
    pub fn register(&self, name: impl Into<String>, deadline: Duration) -> Heartbeat {
        let registry = &self.inner;
        let stage = Arc::new(Stage {
            id: registry.next_id.fetch_add(1, Ordering::Relaxed),
            name: name.into(),
            deadline,
            last_ns: AtomicU64::new(registry.now_ns()),
            progress: AtomicU64::new(0),
            dead: AtomicBool::new(false),
        });
        registry.lock().push(Arc::clone(&stage));
        Heartbeat {
            stage,
            registry: Arc::clone(registry),
        }
    }

    /// The stages that died, then those silent for longer than their
    /// deadline at `now`, longest silence first (the likeliest cause when
    /// several stall together).
    ///
    /// A beat's time comes from the coarse monotonic clock, so a silence
    /// can read up to one kernel tick (1 to 10 ms) long or short; deadlines
    /// are hundreds of milliseconds and more.
    pub fn check(&self, now: Instant) -> Vec<Stalled> {
        let now_ns = self.inner.ns_at(now);
        let mut stalled: Vec<Stalled> = self
            .inner
            .lock()
            .iter()
            .filter_map(|stage| {
                let silent_for = stage.age_at(now_ns);
                let dead = stage.dead.load(Ordering::Acquire);
                (dead || silent_for > stage.deadline).then(|| Stalled {
                    name: stage.name.clone(),
                    deadline: stage.deadline,
                    silent_for,
                    last_progress: stage.progress.load(Ordering::Relaxed),
                    dead,
                })
            })
            .collect();
        // Dead stages first: a death is the cause, the silences around it
        // its effects.
        stalled.sort_by_key(|s| (!s.dead, std::cmp::Reverse(s.silent_for)));
        stalled
    }

    /// Every registered stage with its age and progress, in registration
    /// order, for the status snapshot.
    pub fn snapshot(&self) -> Vec<StageSnapshot> {
        let now_ns = self.inner.ns_at(Instant::now());
        self.inner
            .lock()
            .iter()
            .map(|stage| {
                let age = stage.age_at(now_ns);
                let dead = stage.dead.load(Ordering::Acquire);
                StageSnapshot {
                    name: stage.name.clone(),
                    deadline: stage.deadline,
                    age,
                    progress: stage.progress.load(Ordering::Relaxed),
                    stalled: dead || age > stage.deadline,
                    dead,
                }
            })
            .collect()
    }

    /// The number of registered stages.
    pub fn len(&self) -> usize {
        self.inner.lock().len()
    }

    /// Whether no stage is registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Stage>>> {
        // A panic while holding this lock cannot leave the list half
        // updated (push, retain and reads only), so a poisoned lock is used
        // as is rather than taking the watchdog down with it.
        self.stages.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Now, in ns since `base`, on the coarse clock.
    fn now_ns(&self) -> u64 {
        coarse_ns(self.base).saturating_sub(self.base_coarse_ns)
    }

    /// `at`, in ns since `base`.
    fn ns_at(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_nanos()).unwrap_or(u64::MAX)
    }
}

impl Stage {
    fn age_at(&self, now_ns: u64) -> Duration {
        Duration::from_nanos(now_ns.saturating_sub(self.last_ns.load(Ordering::Relaxed)))
    }
}

impl Heartbeat {
    /// Records that the stage is alive now.
    #[inline]
    pub fn beat(&self) {
        self.stage
            .last_ns
            .store(self.registry.now_ns(), Ordering::Relaxed);
    }

    /// Records that the stage is alive now and how far it has got:
    /// `progress` is an absolute figure the stage chooses (messages taken,
    /// bytes written), reported as-is when the stage stalls.
    #[inline]
    pub fn beat_progress(&self, progress: u64) {
        self.stage.progress.store(progress, Ordering::Relaxed);
        self.beat();
    }

    /// Marks the stage dead and leaves it registered: from now on it
    /// counts as stalled, whatever its deadline. For a stage that caught
    /// its own panic (at a thread boundary) and can no longer drop the
    /// heartbeat while unwinding.
    pub fn died(self) {
        self.stage.dead.store(true, Ordering::Release);
        // Drop sees the mark and leaves the stage registered.
    }

    /// The stage's name.
    pub fn name(&self) -> &str {
        &self.stage.name
    }

    /// The stage's deadline.
    pub fn deadline(&self) -> Duration {
        self.stage.deadline
    }
}

impl fmt::Debug for Heartbeat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Heartbeat")
            .field("name", &self.stage.name)
            .field("deadline", &self.stage.deadline)
            .finish()
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        // Dropped while its thread unwinds a panic: the stage died.
        if std::thread::panicking() {
            self.stage.dead.store(true, Ordering::Release);
        }
        if self.stage.dead.load(Ordering::Acquire) {
            return;
        }
        let id = self.stage.id;
        self.registry.lock().retain(|stage| stage.id != id);
    }
}

/// Nanoseconds on `CLOCK_MONOTONIC_COARSE`, the same cheap clock the
/// source layer stamps liveness with ([`edgerec_source::clock::coarse_ns`]).
#[cfg(target_os = "linux")]
fn coarse_ns(_base: Instant) -> u64 {
    edgerec_source::clock::coarse_ns()
}

/// Elsewhere, ns since `base` on `Instant` (the registry's base then
/// reads 0 and ages are exact).
#[cfg(not(target_os = "linux"))]
fn coarse_ns(base: Instant) -> u64 {
    u64::try_from(Instant::now().saturating_duration_since(base).as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Heartbeats>();
        send_sync::<Heartbeat>();
    }

    #[test]
    fn fresh_stage_is_not_stalled() {
        let heartbeats = Heartbeats::new();
        let _hb = heartbeats.register("storage", Duration::from_secs(1));
        assert!(heartbeats.check(Instant::now()).is_empty());
        assert_eq!(heartbeats.len(), 1);
    }

    #[test]
    fn silent_stage_is_stalled_with_its_progress() {
        let heartbeats = Heartbeats::new();
        let hb = heartbeats.register("camera", Duration::from_millis(100));
        hb.beat_progress(42);
        let later = Instant::now() + Duration::from_millis(500);
        let stalled = heartbeats.check(later);
        assert_eq!(stalled.len(), 1);
        assert_eq!(stalled[0].name, "camera");
        assert_eq!(stalled[0].last_progress, 42);
        assert!(stalled[0].silent_for >= Duration::from_millis(400));
        let json = serde_json::to_value(&stalled[0]).unwrap();
        assert_eq!(json["deadline_ms"], 100);
        assert_eq!(json["last_progress"], 42);
    }

    #[test]
    fn dropping_unregisters() {
        let heartbeats = Heartbeats::new();
        let hb = heartbeats.register("lidar", Duration::from_millis(1));
        let other = heartbeats.register("imu", Duration::from_secs(100));
        drop(hb);
        let later = Instant::now() + Duration::from_secs(1);
        assert!(heartbeats.check(later).is_empty());
        assert_eq!(heartbeats.snapshot().len(), 1);
        assert_eq!(heartbeats.snapshot()[0].name, "imu");
        drop(other);
        assert!(heartbeats.is_empty());
    }

    #[test]
    fn a_stage_that_dies_stays_and_is_stalled_at_once() {
        let heartbeats = Heartbeats::new();
        let hb = heartbeats.register("chunker", Duration::from_secs(100));
        hb.beat_progress(7);
        let quiet = heartbeats.register("storage", Duration::from_millis(1));
        let t = std::thread::spawn(move || {
            let _hb = hb;
            panic!("the chunker dies");
        });
        assert!(t.join().is_err());
        let stalled = heartbeats.check(Instant::now() + Duration::from_millis(50));
        let names: Vec<(&str, bool)> = stalled.iter().map(|s| (s.name.as_str(), s.dead)).collect();
        assert_eq!(
            names,
            [("chunker", true), ("storage", false)],
            "the dead one first"
        );
        assert_eq!(stalled[0].last_progress, 7);
        assert!(stalled[0].to_string().contains("died"));
        let snap = heartbeats.snapshot();
        assert!(snap[0].dead && snap[0].stalled);
        // The explicit form, for a stage that caught its own panic.
        let closer = heartbeats.register("closer", Duration::from_secs(100));
        closer.died();
        assert_eq!(heartbeats.len(), 3);
        assert!(heartbeats
            .check(Instant::now())
            .iter()
            .any(|s| s.name == "closer" && s.dead));
        drop(quiet);
    }

    #[test]
    fn longest_silence_first() {
        let heartbeats = Heartbeats::new();
        let a = heartbeats.register("a", Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(30));
        let b = heartbeats.register("b", Duration::from_millis(1));
        let stalled = heartbeats.check(Instant::now() + Duration::from_millis(100));
        let names: Vec<&str> = stalled.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        drop((a, b));
    }

    #[test]
    fn beat_refreshes_age() {
        let heartbeats = Heartbeats::new();
        let hb = heartbeats.register("control", Duration::from_millis(200));
        std::thread::sleep(Duration::from_millis(50));
        hb.beat();
        let snap = heartbeats.snapshot();
        // The coarse clock may lag by one tick (up to 10 ms at HZ=100).
        assert!(snap[0].age < Duration::from_millis(40), "{:?}", snap[0].age);
        assert!(!snap[0].stalled);
    }
}
