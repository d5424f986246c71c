//! Glass-to-disk latency of edgerec's cameras, and what they write: runs a
//! configuration's `[[camera]]` and synthetic sources through the recorder
//! in this process (the pipeline `edgerec run` starts, on the system
//! clock), samples the recorder's status every millisecond, then reads the
//! segments back and, for every message, finds when the chunk holding it
//! was handed to storage and when it became durable.
//!
//! Method. A message's log time is its capture instant on the recording
//! clock (a camera's frame timestamp mapped to it). Each sample holds the
//! clock after reading the status: the open segment, the bytes of it
//! handed to storage (`segment_bytes`) and the bytes known durable
//! (`durable_bytes`, advanced when an fdatasync completes). A message is
//! written at the first sample whose segment bytes reach the end of its
//! chunk (the chunk index's offset plus length), durable at the first
//! sample whose durable bytes do; for the tail of a segment that the
//! closer makes durable (fdatasync, then rename), at the first sample that
//! sees the renamed file. Resolution: the sampling period (reported), and
//! the storage stage copies the durable offset into the status at its tick
//! (20 ms), so a durable instant is late by up to that much: an upper
//! bound. Both counters restart at a split a little after the segment
//! path changes; per segment a sample counts only for what every later
//! sample of that segment also shows, and a sample whose segment changed
//! before the next sample is left out.
//!
//! Messages of the warm-up (start-up, 1 s unless given) and of the last
//! `chunk_max_age + sync_interval` before the stop (which flushes at once)
//! are left out of the latency figures; all of them count in the rest.
//! The steady rate per topic counts the messages captured from the end of
//! the warm-up to 100 ms before the stop: frames captured while an encoder
//! starts wait in front of it and would show as a burst.
//!
//! usage: edgerec-camera-bench CONFIG SECONDS [WARM_UP_SECONDS]
//! Prints one JSON object; removes nothing (the session stays under the
//! configuration's root).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use edgerec_camera::{CameraSource, CameraStats};
use edgerec_recorder::{Recorder, RecorderOptions, StatusHandle};
use edgerec_source::{RecordingClock, Source, SystemClock};
use edgerec_synthetic::SyntheticSource;
use serde_json::{json, Value};

/// How often the status is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(1);
/// The storage stage's tick: how stale the durable offset in the status
/// can be (edgerec_recorder::sequencer::TICK).
const STATUS_TICK_MS: f64 = 20.0;
/// Start-up left out of the latency figures, unless given.
const WARM_UP: Duration = Duration::from_secs(1);
/// Frames captured this close to the stop may still be in the encoder.
const RATE_END_MARGIN_NS: u64 = 100_000_000;

/// One status sample.
struct Sample {
    t_ns: u64,
    segment: PathBuf,
    written: u64,
    durable: u64,
}

/// What the sampler thread saw.
#[derive(Default)]
struct Samples {
    rows: Vec<Sample>,
    /// Final (renamed) segment path -> first instant it was seen.
    closed_at: HashMap<PathBuf, u64>,
    gaps_ns: Vec<u64>,
}

fn final_path(active: &Path) -> PathBuf {
    let s = active.to_string_lossy();
    PathBuf::from(s.strip_suffix(".active").unwrap_or(&s))
}

fn sample(handle: StatusHandle, clock: Arc<dyn RecordingClock>, done: Arc<AtomicBool>) -> Samples {
    let mut out = Samples::default();
    let mut open: Vec<PathBuf> = Vec::new();
    let mut last_t = 0u64;
    while !done.load(Ordering::Relaxed) {
        let s = handle.snapshot();
        let t_ns = clock.now_ns();
        if last_t > 0 {
            out.gaps_ns.push(t_ns - last_t);
        }
        last_t = t_ns;
        let fin = final_path(&s.segment);
        if !open.contains(&fin) && !out.closed_at.contains_key(&fin) {
            open.push(fin);
        }
        open.retain(|p| {
            if p.exists() {
                out.closed_at.insert(p.clone(), t_ns);
                false
            } else {
                true
            }
        });
        let same = out.rows.last().is_some_and(|r| {
            r.segment == s.segment && r.written == s.segment_bytes && r.durable == s.durable_bytes
        });
        if !same {
            out.rows.push(Sample {
                t_ns,
                segment: s.segment,
                written: s.segment_bytes,
                durable: s.durable_bytes,
            });
        }
        std::thread::sleep(SAMPLE_EVERY);
    }
    out
}

/// Per segment (final path), the samples (t, written, durable) that can be
/// trusted, each counter lowered to the least any later sample of that
/// segment shows (the counters are monotonic within a segment; a higher
/// value before a lower one is the previous segment's, not yet reset).
fn per_segment(rows: &[Sample]) -> HashMap<PathBuf, Vec<(u64, u64, u64)>> {
    let mut out: HashMap<PathBuf, Vec<(u64, u64, u64)>> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        // The status reads the segment before the counters: when the next
        // sample names another segment, this one's counters may be the next
        // segment's.
        if rows.get(i + 1).is_some_and(|n| n.segment != r.segment) {
            continue;
        }
        out.entry(final_path(&r.segment))
            .or_default()
            .push((r.t_ns, r.written, r.durable));
    }
    for v in out.values_mut() {
        let (mut w, mut d) = (u64::MAX, u64::MAX);
        for x in v.iter_mut().rev() {
            w = w.min(x.1);
            d = d.min(x.2);
            x.1 = w;
            x.2 = d;
        }
    }
    out
}

/// Nearest-rank percentile of sorted values.
fn pct(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    Some(sorted[i])
}

fn dist(mut v: Vec<f64>) -> Value {
    v.sort_by(f64::total_cmp);
    json!({
        "n": v.len(),
        "p50": pct(&v, 0.50),
        "p99": pct(&v, 0.99),
        "max": v.last(),
    })
}

/// Per topic: counts, bytes, and the latencies in ms.
#[derive(Default)]
struct TopicStats {
    type_name: String,
    messages: u64,
    data_bytes: u64,
    first_log: u64,
    last_log: u64,
    written_ms: Vec<f64>,
    durable_ms: Vec<f64>,
    durable_at_close: u64,
    unresolved: u64,
    in_rate_window: u64,
    metadata: BTreeMap<String, String>,
}

fn analyse(
    files: &[PathBuf],
    samples: &Samples,
    window: (u64, u64),
    rate_window: (u64, u64),
) -> anyhow::Result<BTreeMap<String, TopicStats>> {
    let segs = per_segment(&samples.rows);
    let mut topics: BTreeMap<String, TopicStats> = BTreeMap::new();
    for f in files {
        let buf = std::fs::read(f).with_context(|| f.display().to_string())?;
        let summary = mcap::read::Summary::read(&buf)?
            .with_context(|| format!("{}: no summary", f.display()))?;
        let rows = segs.get(f).map(Vec::as_slice).unwrap_or(&[]);
        let closed = samples.closed_at.get(f).copied();
        for ci in &summary.chunk_indexes {
            let end = ci.chunk_start_offset + ci.chunk_length;
            let written = rows.iter().find(|r| r.1 >= end).map(|r| r.0);
            let durable = rows.iter().find(|r| r.2 >= end).map(|r| r.0);
            for m in summary.stream_chunk(&buf, ci)? {
                let m = m?;
                let t = topics.entry(m.channel.topic.clone()).or_default();
                if t.messages == 0 {
                    t.type_name = m
                        .channel
                        .schema
                        .as_ref()
                        .map(|s| s.name.clone())
                        .unwrap_or_default();
                    t.metadata = m.channel.metadata.clone();
                    t.first_log = m.log_time;
                }
                t.messages += 1;
                t.data_bytes += m.data.len() as u64;
                t.first_log = t.first_log.min(m.log_time);
                t.last_log = t.last_log.max(m.log_time);
                if (rate_window.0..=rate_window.1).contains(&m.log_time) {
                    t.in_rate_window += 1;
                }
                if m.log_time < window.0 || m.log_time > window.1 {
                    continue;
                }
                let ms = |at: u64| at.saturating_sub(m.log_time) as f64 / 1e6;
                // The closer's rename comes after its fdatasync: written
                // and durable by then at the latest.
                match written.or(closed) {
                    Some(at) => t.written_ms.push(ms(at)),
                    None => t.unresolved += 1,
                }
                match durable {
                    Some(at) => t.durable_ms.push(ms(at)),
                    None => match closed {
                        Some(at) => {
                            t.durable_ms.push(ms(at));
                            t.durable_at_close += 1;
                        }
                        None => t.unresolved += 1,
                    },
                }
            }
        }
    }
    Ok(topics)
}

fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 3 && a.len() != 4 {
        bail!("usage: {} CONFIG SECONDS [WARM_UP_SECONDS]", a[0]);
    }
    let cfg = edgerec_config::Config::load(Path::new(&a[1])).context("the configuration")?;
    let secs: f64 = a[2].parse().context("SECONDS")?;
    let warm_up = match a.get(3) {
        Some(w) => Duration::from_secs_f64(w.parse().context("WARM_UP_SECONDS")?),
        None => WARM_UP,
    };
    let mut sources: Vec<Box<dyn Source>> = SyntheticSource::from_config(&cfg.sources.synthetic);
    let mut cams: Vec<(String, String, String, Arc<CameraStats>)> = Vec::new();
    for c in &cfg.camera {
        let cam = CameraSource::new(c, None).with_context(|| format!("camera {}", c.name))?;
        cams.push((
            c.video_topic(),
            cam.selection().encoder.element().to_owned(),
            cam.selection().reason.clone(),
            cam.stats(),
        ));
        sources.push(Box::new(cam));
    }
    let clock: Arc<dyn RecordingClock> = Arc::new(SystemClock);
    let opts = RecorderOptions::from_config(&cfg);
    let settle_ns = (cfg.mcap.chunk_max_age + cfg.storage.sync_interval).as_nanos() as u64;
    let t_start = clock.now_ns();
    let started = Instant::now();
    let rec = Recorder::start(opts, sources, clock.clone()).context("starting the recording")?;
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (h, c, d) = (rec.status_handle(), clock.clone(), done.clone());
        std::thread::Builder::new()
            .name("status-sampler".into())
            .spawn(move || sample(h, c, d))?
    };
    std::thread::sleep(Duration::from_secs_f64(secs));
    let t_stop = clock.now_ns();
    let report = rec.stop().context("stopping the recording")?;
    let seconds = started.elapsed().as_secs_f64();
    // The last segment's rename is the sampler's to see.
    std::thread::sleep(Duration::from_millis(20));
    done.store(true, Ordering::Relaxed);
    let samples = sampler
        .join()
        .map_err(|_| anyhow::anyhow!("the sampler panicked"))?;
    let files: Vec<PathBuf> = report.segments.iter().map(|s| s.path.clone()).collect();
    let from = t_start + warm_up.as_nanos() as u64;
    let window = (from, t_stop.saturating_sub(settle_ns));
    let rate_window = (from, t_stop.saturating_sub(RATE_END_MARGIN_NS));
    let topics = analyse(&files, &samples, window, rate_window)?;
    let rate_s = rate_window.1.saturating_sub(rate_window.0) as f64 / 1e9;

    let mut gaps: Vec<f64> = samples.gaps_ns.iter().map(|g| *g as f64 / 1e6).collect();
    gaps.sort_by(f64::total_cmp);
    let status = &report.status;
    let chan = |topic: &str| status.channels.iter().find(|c| c.topic == topic);
    let topic_json: BTreeMap<&String, Value> = topics
        .iter()
        .map(|(name, t)| {
            let c = chan(name);
            (
                name,
                json!({
                    "type": t.type_name,
                    "messages": t.messages,
                    "data_bytes": t.data_bytes,
                    "first_log_time": t.first_log,
                    "last_log_time": t.last_log,
                    "steady_rate_hz": (rate_s > 0.0).then(|| t.in_rate_window as f64 / rate_s),
                    "accepted": c.map(|c| c.accepted),
                    "dropped": c.map(|c| c.dropped),
                    "lost": c.map(|c| c.lost),
                    "upstream_lost": c.map(|c| c.upstream_lost),
                    "written_ms": dist(t.written_ms.clone()),
                    "durable_ms": dist(t.durable_ms.clone()),
                    "durable_at_close": t.durable_at_close,
                    "unresolved": t.unresolved,
                    "metadata": t.metadata,
                }),
            )
        })
        .collect();
    let cameras: Vec<Value> = cams
        .iter()
        .map(|(topic, enc, why, st)| {
            json!({
                "topic": topic,
                "encoder": enc,
                "encoder_reason": why,
                "frames": st.frames.load(Ordering::Relaxed),
                "keyframes": st.keyframes.load(Ordering::Relaxed),
                "lost_before_encoder": st.lost.load(Ordering::Relaxed),
            })
        })
        .collect();
    let out = json!({
        "method": "in-process recorder, status sampled every 1 ms on the recording clock; \
                   per message: first sample whose segment bytes (written) or durable bytes \
                   (durable) reach the end of its chunk, or the segment's rename after its \
                   closing fdatasync",
        "session_dir": report.session_dir,
        "seconds": seconds,
        "backend": status.backend,
        "chunk_max_age_ms": cfg.mcap.chunk_max_age.as_secs_f64() * 1e3,
        "sync_interval_ms": cfg.storage.sync_interval.as_secs_f64() * 1e3,
        "compression": cfg.mcap.compression.as_str(),
        "latency_window_ns": [window.0, window.1],
        "rate_window_ns": [rate_window.0, rate_window.1],
        "sample_period_ms": { "p50": pct(&gaps, 0.5), "p99": pct(&gaps, 0.99), "max": gaps.last() },
        "status_tick_ms": STATUS_TICK_MS,
        "drops": status.drops(),
        "segments": report.segments.iter().map(|s| json!({
            "path": s.path, "bytes": s.bytes, "messages": s.messages,
        })).collect::<Vec<_>>(),
        "file_bytes": report.segments.iter().map(|s| s.bytes).sum::<u64>(),
        "cameras": cameras,
        "topics": topic_json,
        "storage_errors": report.storage_errors,
        "sources": status.sources.iter().map(|x| json!({
            "name": x.name, "state": x.state.as_str(), "restarts": x.restarts,
            "last_error": x.last_error,
        })).collect::<Vec<_>>(),
    });
    println!("{out}");
    Ok(())
}
