//! Stages: the pipeline's threads, each watched, none able to hang the
//! others.
//!
//! Every stage runs inside [`spawn_stage`]: its body beats a [`StageBeat`]
//! (the health side's heartbeat when there is one, and the recorder's own
//! liveness, which [`StageHandle::join_within`] reads to tell a stage that
//! is still working from one that is stuck). A panic is caught at the
//! thread boundary: the stage's heartbeat is marked dead (it stays
//! registered, so the watchdog stops being fed and the fault names it),
//! the death is recorded, and the abort flag tells every other stage to
//! stop at its next turn (each turns at least every 100 ms).

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use edgerec_health::heartbeat::Heartbeat;
use edgerec_source::{panic_message, Liveness};

use crate::RecorderError;

/// A stage that died, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageDeath {
    /// The stage's name.
    pub stage: String,
    /// Its panic message.
    pub message: String,
}

/// Shared by every stage: the abort flag and the first death.
#[derive(Debug, Default)]
pub struct Stages {
    abort: AtomicBool,
    death: Mutex<Option<StageDeath>>,
}

impl Stages {
    /// True once a stage died: every stage stops at its next turn.
    #[inline]
    pub fn aborted(&self) -> bool {
        self.abort.load(Ordering::Acquire)
    }

    /// The first stage that died.
    pub fn death(&self) -> Option<StageDeath> {
        self.death
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Stops every stage at its next turn, with no stage to blame (the
    /// recorder failed to start half-way).
    pub(crate) fn abort(&self) {
        self.abort.store(true, Ordering::Release);
    }

    fn died(&self, stage: &str, message: String) {
        tracing::error!("stage {stage} died: {message}; the recording stops in fault");
        let mut d = self.death.lock().unwrap_or_else(PoisonError::into_inner);
        if d.is_none() {
            *d = Some(StageDeath {
                stage: stage.to_owned(),
                message,
            });
        }
        self.abort.store(true, Ordering::Release);
    }
}

/// A stage's beat: the health heartbeat, when watched, and the recorder's
/// own liveness.
pub struct StageBeat {
    health: Option<Heartbeat>,
    live: Arc<Liveness>,
}

impl StageBeat {
    /// A beat registered as `name` in `watch`'s heartbeats, if any.
    pub(crate) fn new(watch: &crate::Watch, name: &str) -> Self {
        Self {
            health: watch
                .heartbeats
                .as_ref()
                .map(|h| h.register(name, watch.deadline)),
            live: Arc::new(Liveness::new()),
        }
    }

    /// The stage is alive.
    #[inline]
    pub fn beat(&self) {
        if let Some(h) = &self.health {
            h.beat();
        }
        self.live.beat();
    }

    /// The stage is alive and has got this far.
    #[inline]
    pub fn beat_progress(&self, progress: u64) {
        if let Some(h) = &self.health {
            h.beat_progress(progress);
        }
        self.live.beat();
    }
}

/// A running stage.
pub(crate) struct StageHandle<T> {
    name: String,
    handle: JoinHandle<Option<T>>,
    live: Arc<Liveness>,
}

/// A stage that did not end.
#[derive(Debug)]
pub(crate) struct Stuck(pub(crate) String);

impl<T> StageHandle<T> {
    /// Waits for the stage to end for as long as it keeps beating; gives
    /// up once it has been silent for `deadline`. `Ok(None)`: it died.
    pub(crate) fn join_within(self, deadline: Duration) -> Result<Option<T>, Stuck> {
        loop {
            if self.handle.is_finished() {
                return Ok(self.handle.join().unwrap_or(None));
            }
            if self.live.age() > deadline {
                tracing::error!(
                    "stage {} did not end and has been silent for {} ms; left behind",
                    self.name,
                    self.live.age().as_millis()
                );
                return Err(Stuck(self.name));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Runs `body` as stage `name` on a thread called `thread`.
pub(crate) fn spawn_stage<T: Send + 'static>(
    name: &str,
    thread: &str,
    stages: &Arc<Stages>,
    beat: StageBeat,
    body: impl FnOnce(&StageBeat) -> T + Send + 'static,
) -> Result<StageHandle<T>, RecorderError> {
    let live = beat.live.clone();
    let stages = stages.clone();
    let stage = name.to_owned();
    let handle = std::thread::Builder::new()
        .name(thread.to_owned())
        .spawn(
            move || match catch_unwind(AssertUnwindSafe(|| body(&beat))) {
                Ok(v) => Some(v),
                Err(p) => {
                    stages.died(&stage, panic_message(&*p));
                    if let Some(h) = beat.health {
                        h.died();
                    }
                    None
                }
            },
        )
        .map_err(|e| RecorderError::Thread {
            name: thread.to_owned(),
            source: e,
        })?;
    Ok(StageHandle {
        name: name.to_owned(),
        handle,
        live,
    })
}

/// Runs `work` on a helper thread (named like the stage's, so the kernel
/// schedules and shows it as the stage) while the stage keeps beating, for
/// at most `allowance`: a long job that is progressing (recovering a
/// 1 GiB segment, the final fdatasync of a slow disk) is not a stall, but
/// one stuck in the kernel stops the beats after `allowance` and shows as
/// one.
pub(crate) fn beating_while<T: Send>(
    beat: &StageBeat,
    thread: &str,
    allowance: Duration,
    work: impl FnOnce() -> T + Send,
) -> T {
    // The job waits in a cell so that a failed spawn does not lose it.
    let job = Mutex::new(Some(work));
    let take = || job.lock().unwrap_or_else(PoisonError::into_inner).take();
    std::thread::scope(|s| {
        let spawned = std::thread::Builder::new()
            .name(thread.to_owned())
            .spawn_scoped(s, || take().map(|w| w()));
        let h = match spawned {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("cannot start a helper thread ({e}); the job runs unwatched");
                return None;
            }
        };
        let t0 = Instant::now();
        while !h.is_finished() {
            if t0.elapsed() < allowance {
                beat.beat();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        match h.join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        }
    })
    .or_else(|| take().map(|w| w()))
    .expect("the job runs on the helper thread or, when none starts, here")
}

/// A bounded-by-its-producer queue of work for several consumers that
/// must beat while they wait (std's mpsc receiver cannot be shared without
/// a lock that a waiting consumer would hold).
pub(crate) struct WorkQueue<T> {
    state: Mutex<(VecDeque<T>, bool)>,
    cv: Condvar,
}

/// What [`WorkQueue::pop_timeout`] found.
pub(crate) enum Pop<T> {
    Item(T),
    Empty,
    Closed,
}

impl<T> WorkQueue<T> {
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new((VecDeque::new(), false)),
            cv: Condvar::new(),
        }
    }

    pub(crate) fn push(&self, t: T) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.0.push_back(t);
        drop(s);
        self.cv.notify_one();
    }

    /// No more items: consumers get [`Pop::Closed`] once it is empty.
    pub(crate) fn close(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).1 = true;
        self.cv.notify_all();
    }

    pub(crate) fn pop_timeout(&self, timeout: Duration) -> Pop<T> {
        let until = Instant::now() + timeout;
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(t) = s.0.pop_front() {
                return Pop::Item(t);
            }
            if s.1 {
                return Pop::Closed;
            }
            let now = Instant::now();
            if now >= until {
                return Pop::Empty;
            }
            s = self
                .cv
                .wait_timeout(s, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// Test builds only: switches that make a stage hang or panic, to prove
/// that the watchdog and the fault path catch it.
#[cfg(feature = "fault-injection")]
#[derive(Debug, Default)]
pub struct FaultSwitch {
    /// Once set, the storage stage hangs (the sequencer stops turning).
    pub stall_storage: Arc<AtomicBool>,
    panic_stage: Mutex<Option<String>>,
}

#[cfg(feature = "fault-injection")]
impl FaultSwitch {
    /// Makes the next turn of stage `stage` (`chunker`, `compressor`,
    /// `storage`, `closer`) panic; one stage, once.
    pub fn panic_stage(&self, stage: &str) {
        tracing::warn!("fault injection: stage {stage} will panic");
        *self
            .panic_stage
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(stage.to_owned());
    }
}

/// A point in a stage's loop where an injected fault strikes; nothing in
/// builds without the `fault-injection` feature.
#[inline]
pub(crate) fn fault_point(watch: &crate::Watch, stage: &str) {
    #[cfg(feature = "fault-injection")]
    if let Some(f) = &watch.faults {
        let hit = {
            let mut p = f.panic_stage.lock().unwrap_or_else(PoisonError::into_inner);
            if p.as_deref() == Some(stage) {
                p.take()
            } else {
                None
            }
        };
        if hit.is_some() {
            panic!("fault injection: stage {stage} panics on purpose");
        }
        if stage == "storage" && f.stall_storage.load(Ordering::Acquire) {
            tracing::error!("fault injection: the storage stage hangs now, on purpose");
            while f.stall_storage.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    #[cfg(not(feature = "fault-injection"))]
    let _ = (watch, stage);
}
