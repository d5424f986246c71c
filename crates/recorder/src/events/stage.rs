//! The `events` stage: one thread, fed by the chunker through the
//! [`Lane`](super::Lane). Every message of a clip channel goes into the
//! pre-roll ring and, while a clip is open, into the clip; every message
//! of a rule's topic goes to the rules. An event opens a clip that starts
//! `pre` before it (on the key unit at or before that, for video), takes
//! what the ring holds from there and then the live messages, up to
//! `post` after the event ends. An event while a clip is open extends
//! that clip. A clip is finished once every channel in it that is still
//! sending has passed its end (so messages that were still in the queues
//! are in, however far behind the pipeline runs), at the latest
//! [`CLIP_GRACE`] of recording-clock time past its end, or when the
//! recording stops (what it holds is kept, the early end noted).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use edgerec_format::chunk::Compression;
use edgerec_source::{ChannelId, Envelope, Intake, SourceSink};

use super::budget::ClipBudget;
use super::clip::{Clip, EventInfo};
use super::lane::{Input, Lane};
use super::plan::TriggerPlan;
use super::ring::{Ring, RingMessage};
use super::rules::{Fire, Rules};
use super::status::{EventSummary, EventsStatus};
use crate::stage::{beating_while, StageBeat, Stages};

/// The longest a clip waits past its end for its channels' last
/// messages, on the recording clock, ns.
pub const CLIP_GRACE: u64 = 5_000_000_000;

/// The longest finishing a clip (its last chunk, summary and
/// `fdatasync`) may take before the stage shows as stalled.
const FINISH_ALLOWANCE: Duration = Duration::from_secs(60);

/// A channel that sent nothing for this long is not waited for.
const QUIET: Duration = Duration::from_secs(1);

/// How often the ring's figures are copied into the status.
const STATUS_EVERY: Duration = Duration::from_millis(200);

/// Everything the stage works with.
pub(crate) struct EventsStage {
    pub(crate) plan: TriggerPlan,
    pub(crate) rules: Rules,
    pub(crate) rx: Receiver<Input>,
    pub(crate) lane: Arc<Lane>,
    pub(crate) intake: Arc<Intake>,
    pub(crate) status: Arc<Mutex<EventsStatus>>,
    pub(crate) stages: Arc<Stages>,
    pub(crate) compression: Compression,
    pub(crate) library: String,
    /// `/edgerec/events` in the continuous bag.
    pub(crate) events_topic: Option<(SourceSink, ChannelId)>,
    /// The clips' disk budget.
    pub(crate) budget: ClipBudget,
    /// Told of each clip written (offload).
    pub(crate) watch: crate::Watch,
}

/// An event being added to a clip.
struct NewEvent {
    info: EventInfo,
    topics: Option<BTreeSet<String>>,
    /// Its condition still holds (the end is not known yet): the rule.
    holding: Option<usize>,
}

/// The clip being written and what decides its end.
struct Open {
    clip: Clip,
    /// Rules whose events in it still hold.
    holding: BTreeSet<usize>,
    /// The latest end (event end + post) of the events that ended.
    end_max: u64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl EventsStage {
    /// Runs until the lane is closed (the chunker ended) or the pipeline
    /// aborts.
    pub(crate) fn run(mut self, beat: &StageBeat) {
        let mut ring = Ring::new(self.plan.longest_pre_ns(), self.plan.memory_budget);
        self.budget.refresh(&self.plan.events_root, Instant::now());
        let mut latched: BTreeMap<u16, RingMessage> = BTreeMap::new();
        let mut open: Option<Open> = None;
        let mut fires = Vec::new();
        let mut shown = Instant::now();
        let mut taken = 0u64;
        // Periodic samples: per rule, its period and when it next fires.
        let start = self.intake.now_ns();
        let mut last_instant: BTreeMap<String, u64> = BTreeMap::new();
        // Per clip channel, its latest log time and when it came.
        let mut last_seen: BTreeMap<u16, (u64, Instant)> = BTreeMap::new();
        let mut samples: Vec<Option<(u64, u64)>> = self
            .plan
            .rules
            .iter()
            .map(|r| r.every_ns.map(|e| (e, start + e)))
            .collect();
        loop {
            beat.beat_progress(taken);
            if self.stages.aborted() {
                if let Some(o) = open.take() {
                    o.clip.abandon();
                }
                return;
            }
            match self.rx.recv_timeout(Duration::from_millis(50)) {
                Ok(Input::Message { ring: to_ring, m }) => {
                    taken += 1;
                    self.lane.taken(m.payload.len());
                    let Some(ch) = self.intake.table().get(ChannelId(m.channel)).cloned() else {
                        continue;
                    };
                    if to_ring {
                        last_seen.insert(m.channel, (m.log_time, Instant::now()));
                    }
                    {
                        let mut st = lock(&self.status);
                        self.rules
                            .feed(&ch.spec, m.log_time, &m.payload, &mut st, &mut fires);
                    }
                    if to_ring {
                        if let Some(o) = open.as_mut() {
                            self.clip_push(o, &ring, &m);
                        }
                        ring.push(&m);
                        if ch.spec.latched {
                            latched.insert(m.channel, m);
                        }
                    }
                    for f in std::mem::take(&mut fires) {
                        self.fire(f, &mut open, &ring, &latched, beat);
                    }
                }
                Ok(Input::Manual {
                    name,
                    reason,
                    pre_ns,
                    post_ns,
                }) => {
                    let at = self.intake.now_ns();
                    // A rule's cooldown holds for its GPIO edges and health
                    // conditions too.
                    let cooldown = self.plan.rule(&name).map_or(0, |r| r.cooldown_ns);
                    let quiet = last_instant
                        .get(&name)
                        .is_some_and(|t: &u64| at < t.saturating_add(cooldown) && cooldown > 0);
                    if quiet {
                        tracing::info!("event {name} ignored: within its cooldown");
                    } else {
                        last_instant.insert(name.clone(), at);
                        let mut ev = self.instant_event(&name, reason, at);
                        if let Some(pre) = pre_ns {
                            ev.info.pre_ns = pre;
                        }
                        if let Some(post) = post_ns {
                            ev.info.post_ns = post;
                        }
                        self.event(ev, &mut open, &ring, &latched, beat);
                    }
                }
                Err(RecvTimeoutError::Timeout) if self.lane.is_closed() => break,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            let now = self.intake.now_ns();
            for (i, due) in samples.iter_mut().enumerate() {
                let Some((every, next)) = due.as_mut() else {
                    continue;
                };
                if now >= *next {
                    *next = now + *every;
                    let name = self.plan.rules[i].name.clone();
                    let reason = format!("every {:.0} s", *every as f64 / 1e9);
                    let ev = self.instant_event(&name, reason, now);
                    self.event(ev, &mut open, &ring, &latched, beat);
                }
            }
            let done = open.as_ref().is_some_and(|o| {
                o.holding.is_empty()
                    && (now > o.end_max.saturating_add(CLIP_GRACE)
                        || (now >= o.end_max
                            && o.clip.channels().all(|ch| {
                                last_seen.get(&ch).is_none_or(|(t, when): &(u64, Instant)| {
                                    *t > o.end_max || when.elapsed() > QUIET
                                })
                            })))
            });
            if done {
                if let Some(o) = open.take() {
                    self.finish(o, beat);
                }
            }
            // A clip that spent the budget ends where it stopped.
            if open.as_ref().is_some_and(|o| o.clip.is_full()) {
                if let Some(o) = open.take() {
                    tracing::warn!(
                        "event clip {}: the clips' disk budget (triggers.disk_budget, {} MiB) \
                         is spent; the clip ends here and new clips are refused until clips \
                         are offloaded or deleted",
                        o.clip.dir().display(),
                        self.budget.limit() >> 20
                    );
                    lock(&self.status).budget_cut += 1;
                    self.finish(o, beat);
                }
            }
            if shown.elapsed() >= STATUS_EVERY {
                shown = Instant::now();
                let open_bytes = open.as_ref().map_or(0, |o| o.clip.bytes());
                let mut st = lock(&self.status);
                st.ring = ring.stats();
                st.budget_bytes = self.budget.limit();
                st.budget_used_bytes = self.budget.used().saturating_add(open_bytes);
            }
        }
        // The recording ends: the open clip keeps what it has.
        if let Some(mut o) = open.take() {
            if !o.holding.is_empty() || self.intake.now_ns() < o.end_max {
                o.clip
                    .notes
                    .push("the recording stopped before the clip's end".to_owned());
            }
            self.finish(o, beat);
        }
        lock(&self.status).ring = ring.stats();
    }

    /// An event of no duration at `at`: a manual trigger (`ctl`, the ROS
    /// 2 service), a periodic sample, a GPIO edge, a health condition. A
    /// `name` that is a rule's takes its windows and topics; any other
    /// takes `[triggers]`'s and records every clip channel.
    fn instant_event(&self, name: &str, reason: String, at: u64) -> NewEvent {
        let rule = self.plan.rule(name);
        let info = EventInfo {
            rule: if name.is_empty() {
                "ctl".to_owned()
            } else {
                name.to_owned()
            },
            reason,
            values: String::new(),
            at_ns: at,
            pre_ns: rule.map_or(self.plan.pre_ns, |r| r.pre_ns),
            post_ns: rule.map_or(self.plan.post_ns, |r| r.post_ns),
            end_ns: Some(at),
        };
        NewEvent {
            info,
            topics: rule
                .filter(|r| !r.topics.is_empty())
                .map(|r| r.topics.iter().cloned().collect()),
            holding: None,
        }
    }

    /// Writes `m` into the open clip, adding its channel first when the
    /// clip wants it and has not got it (a channel that appeared after the
    /// clip opened).
    fn clip_push(&self, o: &mut Open, ring: &Ring, m: &RingMessage) {
        if o.clip.channel_start(m.channel).is_none() {
            let Some(ch) = self.intake.table().get(ChannelId(m.channel)).cloned() else {
                return;
            };
            if !o.clip.wants(&ch.spec.topic) {
                return;
            }
            // A video channel joins on a key unit.
            if ring.is_keyed(m.channel) && !m.key {
                return;
            }
            if let Err(e) = o.clip.add_channel(m.channel, &ch.spec, m.log_time) {
                self.clip_error(e.to_string());
                return;
            }
        }
        if let Err(e) = o.clip.push(m) {
            self.clip_error(e.to_string());
        }
    }

    fn clip_error(&self, e: String) {
        tracing::error!("event clip: {e}");
        let mut st = lock(&self.status);
        if st.clip_errors.len() < 16 {
            st.clip_errors.push(e);
        }
    }

    /// A rule started or ended an event.
    fn fire(
        &mut self,
        f: Fire,
        open: &mut Option<Open>,
        ring: &Ring,
        latched: &BTreeMap<u16, RingMessage>,
        beat: &StageBeat,
    ) {
        match f {
            Fire::Start {
                rule,
                at,
                values,
                instant,
            } => {
                let p = self.rules.plan(rule);
                let info = EventInfo {
                    rule: p.name.clone(),
                    reason: if p.when.text.is_empty() {
                        format!("a message on {}", p.topic)
                    } else {
                        p.when.text.clone()
                    },
                    values,
                    at_ns: at,
                    pre_ns: p.pre_ns,
                    post_ns: p.post_ns,
                    end_ns: instant.then_some(at),
                };
                let topics = (!p.topics.is_empty()).then(|| p.topics.iter().cloned().collect());
                let ev = NewEvent {
                    info,
                    topics,
                    holding: (!instant).then_some(rule),
                };
                self.event(ev, open, ring, latched, beat);
            }
            Fire::End { rule, at } => {
                let post = self.rules.plan(rule).post_ns;
                if let Some(o) = open.as_mut() {
                    if o.holding.remove(&rule) {
                        o.end_max = o.end_max.max(at.saturating_add(post));
                        let name = self.rules.plan(rule).name.clone();
                        for e in o.clip.events.iter_mut().rev() {
                            if e.rule == name && e.end_ns.is_none() {
                                e.end_ns = Some(at);
                                break;
                            }
                        }
                        if o.holding.is_empty() {
                            o.clip.end = Some(o.end_max);
                        }
                        self.announce_window(o);
                    }
                }
            }
        }
    }

    /// Adds an event: to the open clip when it overlaps, else in a new one.
    fn event(
        &mut self,
        ev: NewEvent,
        open: &mut Option<Open>,
        ring: &Ring,
        latched: &BTreeMap<u16, RingMessage>,
        beat: &StageBeat,
    ) {
        let start = ev.info.at_ns.saturating_sub(ev.info.pre_ns);
        let end = ev.info.end_ns.map(|e| e.saturating_add(ev.info.post_ns));
        tracing::info!(
            "event {}: {}{}",
            ev.info.rule,
            ev.info.reason,
            if ev.info.values.is_empty() {
                String::new()
            } else {
                format!(" ({})", ev.info.values)
            }
        );
        self.publish(&ev.info);
        let overlaps = open
            .as_ref()
            .is_some_and(|o| !o.holding.is_empty() || start <= o.end_max);
        if !overlaps {
            if let Some(o) = open.take() {
                self.finish(o, beat);
            }
            let now = Instant::now();
            self.budget.refresh(&self.plan.events_root, now);
            let Some(room) = self.budget.room_for_a_clip() else {
                lock(&self.status).budget_refused += 1;
                if self.budget.should_warn(now) {
                    tracing::warn!(
                        "event {}: no clip: the clips' disk budget (triggers.disk_budget, {} MiB) \
                         is spent ({} MiB in {}); offload or delete clips, or raise the budget",
                        ev.info.rule,
                        self.budget.limit() >> 20,
                        self.budget.used() >> 20,
                        self.plan.events_root.display()
                    );
                }
                return;
            };
            let clip = Clip::create(
                &self.plan.events_root,
                ev.info.clone(),
                start,
                ev.topics.clone(),
                self.compression,
                &self.library,
            );
            match clip {
                Ok(mut clip) => {
                    clip.set_limit(room);
                    lock(&self.status).open_clip = Some(clip.dir().to_path_buf());
                    *open = Some(Open {
                        clip,
                        holding: BTreeSet::new(),
                        end_max: 0,
                    });
                }
                Err(e) => {
                    self.clip_error(e.to_string());
                    return;
                }
            }
        } else if let Some(o) = open.as_mut() {
            if !o.clip.add_event(ev.info.clone()) {
                lock(&self.status).events_over_cap += 1;
                return;
            }
            // The clip records the union of what its events ask for.
            match (&mut o.clip.topics, &ev.topics) {
                (Some(have), Some(more)) => have.extend(more.iter().cloned()),
                (have, None) => *have = None,
                (None, Some(_)) => {}
            }
        }
        let Some(o) = open.as_mut() else { return };
        match ev.holding {
            Some(rule) => {
                o.holding.insert(rule);
                o.clip.end = None;
            }
            None => {
                o.end_max = o.end_max.max(end.unwrap_or(0));
                if o.holding.is_empty() {
                    o.clip.end = Some(o.end_max);
                }
            }
        }
        let summary = EventSummary {
            rule: ev.info.rule.clone(),
            reason: ev.info.reason.clone(),
            values: ev.info.values.clone(),
            at_ns: ev.info.at_ns,
            clip: o.clip.dir().to_path_buf(),
        };
        lock(&self.status).push_event(summary);
        self.fill_from_ring(o, start, ring, latched, beat);
        self.announce_window(o);
    }

    /// Announces the open clip's window (offload sends the segments it
    /// overlaps ahead of others): from its start to its end, or without
    /// end while an event's condition holds.
    fn announce_window(&self, o: &Open) {
        let end = if o.holding.is_empty() {
            o.end_max
        } else {
            u64::MAX
        };
        crate::options::announce(
            &self.watch,
            o.clip.dir(),
            0,
            crate::options::AnnouncedKind::Event,
            (o.clip.start, end),
        );
    }

    /// Adds to the clip every ring channel it wants and has not got,
    /// from `start` (from the key unit at or before it, for video), each
    /// opened by its latched message when it has one.
    fn fill_from_ring(
        &self,
        o: &mut Open,
        start: u64,
        ring: &Ring,
        latched: &BTreeMap<u16, RingMessage>,
        beat: &StageBeat,
    ) {
        for channel in ring.channels().collect::<Vec<_>>() {
            if o.clip.channel_start(channel).is_some() {
                continue;
            }
            let Some(ch) = self.intake.table().get(ChannelId(channel)).cloned() else {
                continue;
            };
            if !o.clip.wants(&ch.spec.topic) {
                continue;
            }
            let from = if ring.is_keyed(channel) {
                match ring.key_at_or_before(channel, start) {
                    Some(k) => k,
                    None => {
                        o.clip.notes.push(format!(
                            "{}: no key unit at or before the pre-roll's start in the ring; \
                             the video starts on the first one after it",
                            ch.spec.topic
                        ));
                        start
                    }
                }
            } else {
                start
            };
            let (messages, bad) = ring.since(channel, from);
            if bad > 0 {
                o.clip.notes.push(format!(
                    "{}: {bad} pre-roll blocks did not decode",
                    ch.spec.topic
                ));
            }
            // The first message written of a video channel must be a key
            // unit.
            let first = if ring.is_keyed(channel) {
                messages
                    .iter()
                    .position(|m| m.key)
                    .unwrap_or(messages.len())
            } else {
                0
            };
            let from = messages.get(first).map_or(from, |m| m.log_time);
            if let Err(e) = o.clip.add_channel(channel, &ch.spec, from) {
                self.clip_error(e.to_string());
                continue;
            }
            if let Some(l) = latched.get(&channel).filter(|l| l.log_time < from) {
                // Before the window, with its own times: it opens the
                // channel (a /tf_static sent once at start-up).
                if let Err(e) = o.clip.push_latched(l) {
                    self.clip_error(e.to_string());
                }
            }
            for (k, m) in messages[first..].iter().enumerate() {
                // Seconds of pre-roll of every channel go to the file here.
                if k % 256 == 0 {
                    beat.beat();
                }
                if let Err(e) = o.clip.push(m) {
                    self.clip_error(e.to_string());
                    break;
                }
            }
        }
        o.clip.start = o.clip.start.min(start);
    }

    /// Finishes a clip and counts it. The final flush and `fdatasync` run
    /// beside the stage's heartbeat (a slow disk is not a stall), for at
    /// most [`FINISH_ALLOWANCE`].
    fn finish(&mut self, o: Open, beat: &StageBeat) {
        let dir = o.clip.dir().to_path_buf();
        let messages = o.clip.messages;
        // What the finish adds is within the reserve it was kept.
        self.budget
            .finished(o.clip.bytes() + super::budget::FINISH_RESERVE);
        let span = (
            o.clip.start,
            o.clip.end.unwrap_or_else(|| self.intake.now_ns()),
        );
        let clip = o.clip;
        let bytes = clip.bytes();
        match beating_while(beat, "edgerec-events", FINISH_ALLOWANCE, move || {
            clip.finish()
        }) {
            Ok(_) => {
                tracing::info!("event clip {} written ({messages} messages)", dir.display());
                crate::options::announce(
                    &self.watch,
                    &dir,
                    bytes,
                    crate::options::AnnouncedKind::Clip,
                    span,
                );
                let mut st = lock(&self.status);
                st.clips += 1;
                st.open_clip = None;
            }
            Err(e) => {
                self.clip_error(e.to_string());
                lock(&self.status).open_clip = None;
            }
        }
    }

    /// Publishes the event on `/edgerec/events` (JSON in a
    /// `std_msgs/msg/String`).
    fn publish(&self, e: &EventInfo) {
        let Some((sink, id)) = &self.events_topic else {
            return;
        };
        let text = format!(
            "{{\"rule\":{},\"reason\":{},\"values\":{},\"trigger_time_ns\":{},\"pre_ns\":{},\"post_ns\":{}}}",
            json_string(&e.rule),
            json_string(&e.reason),
            json_string(&e.values),
            e.at_ns,
            e.pre_ns,
            e.post_ns
        );
        let payload = edgerec_format::cdr::msg::string(&text);
        let env = Envelope {
            channel: *id,
            log_time: e.at_ns,
            publish_time: e.at_ns,
            payload,
        };
        if let Err(d) = sink.push(env) {
            tracing::warn!("/edgerec/events: the event was not recorded: {d:?}");
        }
    }
}

/// `s` as a JSON string.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
