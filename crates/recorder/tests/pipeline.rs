//! End-to-end promises of the recording pipeline, each checked on the
//! closed (or abandoned) file with the independent `mcap` reader and with
//! our own `check_file`: every accepted message lands once and in order,
//! the memory budget refuses instead of growing, a flooding source cannot
//! make a quiet one drop, a storage failure leaves a truncated but intact
//! `.active` segment, every storage backend writes a valid bag, stop
//! drains the last partial chunk, and sessions get unique names. Most
//! tests use [`CountingSource`], which pushes payloads that carry their
//! source and index and counts every push result itself, so the test
//! knows exactly what the pipeline was offered.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgerec_config::{Rate, SyntheticChannel, SyntheticKind};
use edgerec_format::bag::MetadataVersion;
use edgerec_format::chunk::Compression;
use edgerec_format::reader::{check_file, read_summary};
use edgerec_recorder::{
    ChannelStatus, Recorder, RecorderError, RecorderOptions, RecorderState, RecorderStatus,
    RecordingReport, SplitPolicy, MAX_CHUNKS_IN_FLIGHT,
};
use edgerec_source::{
    ChannelSpec, Dropped, Envelope, RecordingClock, Source, SourceError, SourceSink, Stop,
    SupervisorOptions, SystemClock,
};
use edgerec_storage::{BackendChoice, ErrorKind, Faults, WriterOptions};
use edgerec_synthetic::SyntheticSource;
use edgerec_testkit::{mcap_readback, ReadMessage, Readback};

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

// ---------------------------------------------------------------------------
// Test sources and helpers
// ---------------------------------------------------------------------------

/// Push results as the source itself saw them.
#[derive(Debug, Default)]
struct PushCounts {
    ok: AtomicU64,
    budget: AtomicU64,
    queue_full: AtomicU64,
    paused: AtomicU64,
    other: AtomicU64,
    /// Set when `run` has pushed everything it was asked to.
    finished: AtomicU64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Pushes {
    ok: u64,
    budget: u64,
    queue_full: u64,
    paused: u64,
    other: u64,
}

impl Pushes {
    fn dropped(&self) -> u64 {
        self.budget + self.queue_full + self.paused + self.other
    }
    fn pushed(&self) -> u64 {
        self.ok + self.dropped()
    }
}

impl PushCounts {
    fn record(&self, r: Result<(), Dropped>) {
        let c = match r {
            Ok(()) => &self.ok,
            Err(Dropped::Budget) => &self.budget,
            Err(Dropped::QueueFull) => &self.queue_full,
            Err(Dropped::Paused) => &self.paused,
            Err(_) => &self.other,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
    fn get(&self) -> Pushes {
        Pushes {
            ok: self.ok.load(Ordering::Relaxed),
            budget: self.budget.load(Ordering::Relaxed),
            queue_full: self.queue_full.load(Ordering::Relaxed),
            paused: self.paused.load(Ordering::Relaxed),
            other: self.other.load(Ordering::Relaxed),
        }
    }
    fn finished(&self) -> bool {
        self.finished.load(Ordering::Acquire) != 0
    }
}

/// A source with one channel that pushes `count` messages (or until stop)
/// with payload [`payload`]`(id, index, len)`, as fast as it can or one
/// `burst` at a time every `every`, counting each push result; then idles
/// until stop, or returns.
struct CountingSource {
    id: u32,
    topic: String,
    payload_len: usize,
    count: Option<u64>,
    every: Option<Duration>,
    burst: u64,
    return_when_done: bool,
    counts: Arc<PushCounts>,
}

impl CountingSource {
    fn new(id: u32, topic: &str, payload_len: usize) -> Self {
        Self {
            id,
            topic: topic.to_string(),
            payload_len,
            count: None,
            every: None,
            burst: 1,
            return_when_done: false,
            counts: Arc::default(),
        }
    }
    fn count(mut self, n: u64) -> Self {
        self.count = Some(n);
        self
    }
    fn every(mut self, period: Duration) -> Self {
        self.every = Some(period);
        self
    }
    fn burst(mut self, n: u64) -> Self {
        self.burst = n.max(1);
        self
    }
    fn return_when_done(mut self) -> Self {
        self.return_when_done = true;
        self
    }
    fn counts(&self) -> Arc<PushCounts> {
        self.counts.clone()
    }
}

const COUNTED_TYPE: &str = "edgerec_test/msg/Counted";

fn spec(topic: &str) -> ChannelSpec {
    ChannelSpec {
        topic: topic.to_string(),
        type_name: COUNTED_TYPE.into(),
        message_encoding: "cdr".into(),
        schema_encoding: "ros2msg".into(),
        schema: b"uint32 source\nuint64 index\nuint8[] fill\n".to_vec(),
        metadata: BTreeMap::new(),
        latched: false,
    }
}

impl Source for CountingSource {
    fn name(&self) -> String {
        format!("counting{}", self.topic.replace('/', "."))
    }

    fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError> {
        let channel = sink.register(spec(&self.topic))?;
        let start = Instant::now();
        let mut i = 0u64;
        while !stop.is_requested() && self.count.is_none_or(|n| i < n) {
            if let Some(p) = self.every {
                let due = start + Duration::from_nanos(p.as_nanos() as u64 * (i / self.burst));
                let now = Instant::now();
                if due > now {
                    std::thread::sleep((due - now).min(Duration::from_millis(10)));
                    continue;
                }
            }
            let now = sink.now_ns();
            let r = sink.push(Envelope {
                channel,
                log_time: now,
                publish_time: now,
                payload: payload(self.id, i, self.payload_len),
            });
            self.counts.record(r);
            i += 1;
        }
        self.counts.finished.store(1, Ordering::Release);
        if !self.return_when_done {
            while !stop.is_requested() {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        Ok(())
    }
}

fn fill_byte(src: u32, idx: u64) -> u8 {
    (idx as u8).wrapping_mul(7) ^ (src as u8).wrapping_add(0x5a)
}

/// `src` (u32 LE), `idx` (u64 LE), then a fill byte that depends on both,
/// up to `len` bytes (at least 12).
fn payload(src: u32, idx: u64, len: usize) -> Vec<u8> {
    let mut v = vec![fill_byte(src, idx); len.max(12)];
    v[..4].copy_from_slice(&src.to_le_bytes());
    v[4..12].copy_from_slice(&idx.to_le_bytes());
    v
}

/// (source, index) of a payload made by [`payload`]; panics when any byte
/// is not what that pair produces.
fn decode(data: &[u8], want_len: usize) -> (u32, u64) {
    assert_eq!(data.len(), want_len.max(12), "payload length");
    let src = u32::from_le_bytes(data[..4].try_into().unwrap());
    let idx = u64::from_le_bytes(data[4..12].try_into().unwrap());
    let f = fill_byte(src, idx);
    if let Some(at) = data[12..].iter().position(|&b| b != f) {
        panic!(
            "payload of source {src} index {idx} corrupt at byte {}",
            12 + at
        );
    }
    (src, idx)
}

fn options(root: &Path) -> RecorderOptions {
    RecorderOptions {
        root: root.to_path_buf(),
        session_prefix: "test".into(),
        session_dir: None,
        metadata_version: MetadataVersion::Humble,
        storage: WriterOptions {
            block_size: 256 * KIB,
            queue_depth: 4,
            // Small extents: tests run in parallel on small CI disks.
            preallocate: 4 << 20,
            ..WriterOptions::default()
        },
        chunk_size: 64 * KIB,
        compression: Compression::Zstd { level: 1 },
        chunk_max_age: Duration::from_millis(50),
        memory_budget: 256 << 20,
        compressor_threads: 2,
        queue_capacity: 1024,
        library: "edgerec-recorder pipeline tests".into(),
        split: SplitPolicy::default(),
        retention: None,
        supervisor: SupervisorOptions::default(),
        triggers: None,
        watch: Default::default(),
    }
}

fn boxed(s: Vec<CountingSource>) -> Vec<Box<dyn Source>> {
    s.into_iter()
        .map(|s| Box::new(s) as Box<dyn Source>)
        .collect()
}

/// Polls `cond` every 5 ms; panics naming `what` after `timeout`.
fn wait_until(timeout: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < timeout, "timed out after {timeout:?}: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn channel<'a>(st: &'a RecorderStatus, topic: &str) -> &'a ChannelStatus {
    st.channels
        .iter()
        .find(|c| c.topic == topic)
        .unwrap_or_else(|| panic!("no channel {topic} in status"))
}

fn only_segment(report: &RecordingReport) -> PathBuf {
    assert_eq!(report.segments.len(), 1, "segments: {:?}", report.segments);
    let p = report.segments[0].path.clone();
    assert!(p.exists(), "{} missing", p.display());
    p
}

/// Reads with the `mcap` crate and with our checker; both must accept.
fn validate(path: &Path) -> Readback {
    let rb = mcap_readback(path).unwrap_or_else(|e| panic!("mcap rejects {}: {e}", path.display()));
    let check = check_file(path).unwrap_or_else(|e| panic!("check_file {}: {e}", path.display()));
    assert_eq!(check.messages, rb.message_count, "check_file vs mcap count");
    assert_eq!(check.messages, rb.messages.len() as u64);
    assert_eq!(check.chunks, rb.chunk_count as u64);
    rb
}

fn by_topic(rb: &Readback) -> BTreeMap<&str, Vec<&ReadMessage>> {
    let mut m: BTreeMap<&str, Vec<&ReadMessage>> = BTreeMap::new();
    for msg in &rb.messages {
        m.entry(msg.topic.as_str()).or_default().push(msg);
    }
    m
}

/// Checks one channel's messages in file order: MCAP sequence numbers
/// 0..n with no gap, every payload intact and from `src`, payload indices
/// strictly increasing. Returns the indices.
fn check_channel(topic: &str, msgs: &[&ReadMessage], src: u32, len: usize) -> Vec<u64> {
    let mut idx = Vec::with_capacity(msgs.len());
    for (k, m) in msgs.iter().enumerate() {
        assert_eq!(
            m.sequence as usize, k,
            "{topic}: sequence gap at message {k}"
        );
        let (s, i) = decode(&m.data, len);
        assert_eq!(s, src, "{topic}: message {k} comes from source {s}");
        if let Some(&prev) = idx.last() {
            assert!(i > prev, "{topic}: index {i} after {prev} (message {k})");
        }
        idx.push(i);
    }
    idx
}

// ---------------------------------------------------------------------------
// 1. Ordering and completeness with many compressors
// ---------------------------------------------------------------------------

#[test]
fn four_compressors_write_every_accepted_message_once_in_order() {
    const N: u64 = 20_000;
    const LEN: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    o.compressor_threads = 4;
    o.compression = Compression::Zstd { level: 3 };
    o.chunk_size = 64 * KIB;
    o.chunk_max_age = Duration::from_secs(10);
    // Room for everything: no push has a reason to be refused, so every
    // index must arrive.
    o.queue_capacity = N as usize;
    let sources: Vec<CountingSource> = (0..3u32)
        .map(|i| CountingSource::new(i, &format!("/load/s{i}"), LEN).count(N))
        .collect();
    let counts: Vec<_> = sources.iter().map(|s| s.counts()).collect();
    let rec = Recorder::start(o, boxed(sources), Arc::new(SystemClock)).expect("start");
    wait_until(Duration::from_secs(20), "sources pushed everything", || {
        counts.iter().all(|c| c.finished())
    });
    let report = rec.stop().expect("stop");
    let path = only_segment(&report);
    let rb = validate(&path);
    let topics = by_topic(&rb);

    let mut total = 0;
    for (i, c) in counts.iter().enumerate() {
        let topic = format!("/load/s{i}");
        let p = c.get();
        let st = channel(&report.status, &topic);
        assert_eq!(p.pushed(), N, "{topic}: source pushed");
        assert_eq!(st.accepted, p.ok, "{topic}: accepted vs source's Ok count");
        assert_eq!(
            st.dropped,
            p.dropped(),
            "{topic}: dropped vs source's count"
        );
        assert_eq!(st.accepted + st.dropped, N, "{topic}");
        assert_eq!(st.accepted, N, "{topic}: nothing should be refused");
        assert_eq!(st.written, st.accepted, "{topic}: written");
        assert_eq!(st.lost, 0, "{topic}: lost");
        let msgs = &topics[topic.as_str()];
        assert_eq!(
            msgs.len() as u64,
            st.accepted,
            "{topic}: messages in the file"
        );
        let idx = check_channel(&topic, msgs, i as u32, LEN);
        assert!(
            idx.iter().copied().eq(0..N),
            "{topic}: indices are not 0..{N}"
        );
        total += st.accepted;
    }
    assert_eq!(rb.message_count, total);
    assert_eq!(report.status.messages_written, total);
    assert_eq!(report.segments[0].messages, total);
    assert_eq!(report.status.chunks_written, rb.chunk_count as u64);
    assert!(
        rb.chunk_count > 100,
        "only {} chunks: the reorder path was barely exercised",
        rb.chunk_count
    );
    assert_eq!(report.status.state, RecorderState::Stopped);
}

// ---------------------------------------------------------------------------
// 2. Memory budget
// ---------------------------------------------------------------------------

#[test]
fn memory_budget_refuses_pushes_and_records_the_drops() {
    const LEN: usize = MIB;
    const BUDGET: u64 = 4 << 20;
    const COMPRESSORS: usize = 2;
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    o.memory_budget = BUDGET;
    o.compressor_threads = COMPRESSORS;
    o.compression = Compression::None;
    o.queue_capacity = 1024;
    let flood = CountingSource::new(1, "/camera/raw", LEN);
    let quiet = CountingSource::new(2, "/idle", 16).count(0);
    let counts = flood.counts();
    let rec = Recorder::start(o, boxed(vec![flood, quiet]), Arc::new(SystemClock)).expect("start");
    wait_until(
        Duration::from_secs(10),
        "budget refusals and accepted messages",
        || {
            let p = counts.get();
            p.budget >= 50 && p.ok >= 20
        },
    );
    let live = rec.status();
    assert!(
        channel(&live, "/camera/raw").dropped > 0,
        "status shows no drops while the source is refused"
    );
    let report = rec.stop().expect("stop");
    let p = counts.get();
    let st = channel(&report.status, "/camera/raw");
    assert!(p.budget > 0, "no push refused for the budget: {p:?}");
    assert_eq!(p.queue_full, 0, "the queue was not the limit: {p:?}");
    assert_eq!(st.dropped, p.dropped(), "status drops vs source's count");
    assert_eq!(st.accepted, p.ok);
    assert_eq!(st.written, st.accepted);
    assert_eq!(st.lost, 0);
    assert_eq!(channel(&report.status, "/idle").dropped, 0);

    let path = only_segment(&report);
    let rb = validate(&path);
    let drops = rb
        .metadata
        .get("edgerec.drops")
        .expect("edgerec.drops metadata record");
    assert_eq!(
        drops.get("/camera/raw").map(String::as_str),
        Some(st.dropped.to_string().as_str()),
        "edgerec.drops: {drops:?}"
    );
    assert_eq!(drops.get("/idle").map(String::as_str), Some("0"));
    // Our own reader finds the same record through the metadata index.
    let summary = read_summary(&path).expect("read_summary");
    assert_eq!(summary.metadata.get("edgerec.drops"), Some(drops));

    let topics = by_topic(&rb);
    let msgs = &topics["/camera/raw"];
    assert_eq!(msgs.len() as u64, st.written);
    check_channel("/camera/raw", msgs, 1, LEN);

    // Sources never take the budget past its limit (try_reserve); only a
    // compressor's new memory (the index records here, uncompressed) is
    // charged past it, a few hundred bytes per chunk in flight.
    let s = &report.status;
    eprintln!(
        "budget peak {} of {} ({p:?})",
        s.budget_peak, s.budget_limit
    );
    assert_eq!(s.budget_limit, BUDGET);
    let in_flight = MAX_CHUNKS_IN_FLIGHT as u64;
    assert!(
        s.budget_peak <= s.budget_limit + in_flight * 4 * KIB as u64,
        "budget peak {} exceeds the limit {} by more than the index records in flight",
        s.budget_peak,
        s.budget_limit
    );
    assert!(
        s.budget_peak >= s.budget_limit / 2,
        "the budget was never near full"
    );
}

// ---------------------------------------------------------------------------
// 3. Source isolation
// ---------------------------------------------------------------------------

#[test]
fn a_flooding_source_does_not_make_a_quiet_one_drop() {
    const FLOOD_LEN: usize = 256;
    const QUIET_LEN: usize = 64;
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    o.queue_capacity = 64;
    // Bursts of 2 000 back to back, 100 a second: each burst is far more
    // than the queue of 64 can take while the chunker drains it, yet the
    // file stays small enough to read back quickly in a debug build.
    let flood = CountingSource::new(1, "/flood", FLOOD_LEN)
        .every(Duration::from_millis(10))
        .burst(2_000);
    let quiet = CountingSource::new(2, "/imu", QUIET_LEN).every(Duration::from_millis(5));
    let (fc, qc) = (flood.counts(), quiet.counts());
    let rec = Recorder::start(o, boxed(vec![flood, quiet]), Arc::new(SystemClock)).expect("start");
    std::thread::sleep(Duration::from_secs(1));
    let report = rec.stop().expect("stop");
    let (f, q) = (fc.get(), qc.get());
    eprintln!("flood {f:?}\nquiet {q:?}");

    // The flood really overflowed its queue; otherwise this proves nothing.
    assert!(f.queue_full > 0, "the flood never filled its queue: {f:?}");
    assert_eq!(q.dropped(), 0, "quiet source refused: {q:?}");
    assert!(
        q.ok >= 100,
        "quiet source pushed only {} in 1 s at 200 Hz",
        q.ok
    );

    let sq = channel(&report.status, "/imu");
    let sf = channel(&report.status, "/flood");
    assert_eq!(sq.dropped, 0);
    assert_eq!((sq.accepted, sq.written, sq.lost), (q.ok, q.ok, 0));
    assert_eq!(sf.dropped, f.dropped());
    assert_eq!((sf.accepted, sf.written, sf.lost), (f.ok, f.ok, 0));

    let rb = validate(&only_segment(&report));
    let topics = by_topic(&rb);
    let qi = check_channel("/imu", &topics["/imu"], 2, QUIET_LEN);
    assert!(qi.iter().copied().eq(0..q.ok), "quiet indices have gaps");
    let fi = check_channel("/flood", &topics["/flood"], 1, FLOOD_LEN);
    assert_eq!(fi.len() as u64, f.ok);
}

// ---------------------------------------------------------------------------
// 4. Storage failure mid-recording
// ---------------------------------------------------------------------------

/// Records a steady source while the third 64 KiB block write fails with
/// `errno`; checks the fault state, the paused sources, the error from
/// stop() and the truncated `.active` file.
fn storage_failure(errno: i32, is_kind: fn(&ErrorKind) -> bool, texts: &[&str]) {
    const BLOCK: usize = 64 * KIB;
    const LEN: usize = KIB;
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    o.storage = WriterOptions {
        block_size: BLOCK,
        queue_depth: 4,
        // No tick-driven tail writes: every write is a whole block, so the
        // third write is the third block.
        sync_interval: Duration::from_secs(3600),
        preallocate: 0,
        faults: Faults {
            fail_write: Some((3, errno)),
            ..Faults::default()
        },
        ..WriterOptions::default()
    };
    o.compression = Compression::None;
    o.chunk_size = 16 * KIB;
    o.chunk_max_age = Duration::from_millis(20);
    let src = CountingSource::new(1, "/steady", LEN).every(Duration::from_millis(1));
    let counts = src.counts();
    let rec = Recorder::start(o.clone(), boxed(vec![src]), Arc::new(SystemClock)).expect("start");
    let active = rec.status().segment;
    let name = active.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.ends_with("_0.mcap.active"), "{name}");

    wait_until(Duration::from_secs(10), "fault state", || {
        rec.status().state == RecorderState::Fault
    });
    let st = rec.status();
    let fault = st.fault.clone().expect("fault text");
    assert!(
        fault.contains(&name),
        "fault text does not name the file: {fault}"
    );
    assert!(
        texts.iter().any(|t| fault.contains(t)),
        "fault text lacks {texts:?}: {fault}"
    );

    // Sources keep running; what they push now is refused as paused.
    std::thread::sleep(Duration::from_millis(20));
    let before = counts.get();
    std::thread::sleep(Duration::from_millis(150));
    let after = counts.get();
    assert!(
        after.paused >= before.paused + 50,
        "source not running or not refused: {before:?} -> {after:?}"
    );
    assert_eq!(after.ok, before.ok, "messages accepted after the fault");
    // Everything accepted is accounted for: written before the failure or
    // counted lost.
    wait_until(Duration::from_secs(5), "accepted = written + lost", || {
        let c = rec.status().channels[0].clone();
        c.accepted == c.written + c.lost
    });
    let c = rec.status().channels[0].clone();
    assert_eq!(c.accepted, after.ok);
    assert!(c.dropped >= after.paused, "{c:?} vs {after:?}");

    let report = rec.stop().expect("stop after a storage failure");
    assert_eq!(
        report.storage_errors.len(),
        1,
        "{:?}",
        report.storage_errors
    );
    let text = &report.storage_errors[0];
    assert!(texts.iter().any(|t| text.contains(t)), "{text}");
    assert!(text.contains(&name), "{text}");
    let _ = is_kind;

    // The failed segment was closed at its last good block and recovered
    // into a valid closed file holding exactly what `written` says.
    let closed = active.with_extension("");
    let names: Vec<String> = std::fs::read_dir(active.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.ends_with(".active") || n.ends_with(".recovering")),
        "{names:?}"
    );
    assert!(closed.exists(), "{} missing: {names:?}", closed.display());
    edgerec_format::reader::check_file(&closed).expect("recovered file checks");
    let rb = mcap_readback(&closed).expect("recovered file reads back");
    assert!(rb.metadata.contains_key("edgerec.recovered"));
    let c = report.status.channels[0].clone();
    assert_eq!(
        rb.messages.len() as u64,
        c.written,
        "status after stop: {c:?}"
    );
    assert_eq!(c.accepted, c.written + c.lost, "{c:?}");
    for (i, m) in rb.messages.iter().enumerate() {
        assert_eq!(m.sequence as usize, i);
        assert_eq!(decode(&m.data, LEN), (1, i as u64));
    }
    assert!(
        rb.chunk_count >= 2,
        "only {} intact chunks in 2 blocks",
        rb.chunk_count
    );
    eprintln!(
        "errno {errno}: {} intact chunks, {} messages kept; written {} lost {}",
        rb.chunk_count,
        rb.messages.len(),
        c.written,
        c.lost
    );
}

#[test]
fn storage_eio_mid_recording_faults_and_keeps_the_good_prefix() {
    storage_failure(
        libc::EIO,
        |k| {
            *k == ErrorKind::Io {
                op: "write",
                errno: libc::EIO,
            }
        },
        &["EIO"],
    );
}

#[test]
fn storage_enospc_mid_recording_faults_and_keeps_the_good_prefix() {
    storage_failure(
        libc::ENOSPC,
        |k| *k == ErrorKind::NoSpace,
        &["ENOSPC", "No space"],
    );
}

// ---------------------------------------------------------------------------
// 5. Every storage backend end to end
// ---------------------------------------------------------------------------

const IMAGE_LEN: usize = 64 * KIB;

fn synthetic_channels() -> Vec<SyntheticChannel> {
    vec![
        SyntheticChannel {
            payload_size: 256,
            ..SyntheticChannel::new("/chatter", SyntheticKind::String, Rate::Hz(200.0))
        },
        SyntheticChannel {
            payload_size: IMAGE_LEN as u64,
            ..SyntheticChannel::new("/camera/image", SyntheticKind::Image, Rate::Hz(20.0))
        },
        SyntheticChannel::new("/imu", SyntheticKind::Imu, Rate::Hz(100.0)),
    ]
}

/// The synthetic sequence number of a String or Image message.
fn synthetic_seq(topic: &str, data: &[u8]) -> u64 {
    match topic {
        "/chatter" => {
            let at = data
                .windows(4)
                .position(|w| w == b"seq=")
                .expect("seq= in the string");
            std::str::from_utf8(&data[at + 4..at + 24])
                .unwrap()
                .parse()
                .unwrap()
        }
        "/camera/image" => {
            let d = &data[data.len() - IMAGE_LEN..];
            u64::from_le_bytes(d[..8].try_into().unwrap())
        }
        _ => unreachable!(),
    }
}

/// Records 1 s of synthetic channels with `choice`; checks the backend the
/// status names and the file. `None` when this host refuses the backend.
fn record_with_backend(
    choice: BackendChoice,
    faults: Faults,
    expect: fn(&RecorderStatus),
) -> Option<()> {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    o.storage.backend = choice;
    o.storage.faults = faults;
    o.storage.sync_interval = Duration::from_millis(200);
    let sources = SyntheticSource::from_config(&synthetic_channels());
    let rec = match Recorder::start(o, sources, Arc::new(SystemClock)) {
        Ok(r) => r,
        Err(RecorderError::Storage { source, .. })
            if matches!(source.kind(), ErrorKind::Unavailable { .. }) =>
        {
            let why = match source.kind() {
                ErrorKind::Unavailable {
                    backend: edgerec_storage::Backend::IoUringDirect,
                    reason,
                } => edgerec_testkit::io_uring_skip_reason(reason),
                _ => {
                    edgerec_testkit::skip::Skip::missing(format!("this host refuses it: {source}"))
                }
            };
            why.context(format!("{choice:?}")).report();
            return None;
        }
        Err(e) => panic!("start with {choice:?}: {e}"),
    };
    expect(&rec.status());
    std::thread::sleep(Duration::from_secs(1));
    let report = rec.stop().expect("stop");
    expect(&report.status);
    let path = only_segment(&report);
    let rb = validate(&path);
    let topics = by_topic(&rb);
    for (topic, min) in [("/chatter", 100u64), ("/camera/image", 10), ("/imu", 50)] {
        let st = channel(&report.status, topic);
        assert_eq!(st.dropped + st.lost, 0, "{choice:?} {topic}: {st:?}");
        assert_eq!(st.written, st.accepted, "{choice:?} {topic}");
        let msgs = topics.get(topic).map_or(&[][..], |v| &v[..]);
        assert_eq!(msgs.len() as u64, st.written, "{choice:?} {topic}");
        assert!(
            st.written >= min,
            "{choice:?} {topic}: only {} in 1 s",
            st.written
        );
        for (k, m) in msgs.iter().enumerate() {
            assert_eq!(m.sequence as usize, k, "{choice:?} {topic}");
            if topic != "/imu" {
                assert_eq!(
                    synthetic_seq(topic, &m.data),
                    k as u64,
                    "{choice:?} {topic}"
                );
            }
        }
    }
    let durable = report.status.durable_bytes;
    let len = std::fs::metadata(&path).unwrap().len();
    assert_eq!(durable, len, "{choice:?}: durable bytes vs file length");
    Some(())
}

#[test]
fn io_uring_backend_records_a_valid_bag() {
    record_with_backend(BackendChoice::IoUring, Faults::default(), |s| {
        assert_eq!(s.backend, "io_uring+O_DIRECT");
        assert_eq!(s.fallback_reason, None);
    });
}

#[test]
fn pwrite_direct_backend_records_a_valid_bag() {
    record_with_backend(BackendChoice::PwriteDirect, Faults::default(), |s| {
        assert_eq!(s.backend, "pwrite+O_DIRECT");
        assert_eq!(s.fallback_reason, None);
    });
}

#[test]
fn buffered_backend_records_a_valid_bag() {
    record_with_backend(BackendChoice::Buffered, Faults::default(), |s| {
        assert_eq!(s.backend, "buffered+fdatasync");
        assert_eq!(s.fallback_reason, None);
    });
}

#[test]
fn auto_backend_falls_back_when_io_uring_is_refused() {
    let faults = Faults {
        io_uring_errno: Some(libc::ENOSYS),
        ..Faults::default()
    };
    let ran = record_with_backend(BackendChoice::Auto, faults, |s| {
        let reason = s.fallback_reason.as_deref().expect("a fallback reason");
        assert!(reason.contains("ENOSYS"), "{reason}");
        // A file system without O_DIRECT adds its own reason and falls
        // further, to buffered.
        let want = if reason.contains("O_DIRECT") {
            "buffered+fdatasync"
        } else {
            "pwrite+O_DIRECT"
        };
        assert_eq!(s.backend, want, "{reason}");
    });
    assert!(ran.is_some(), "Auto must never be refused");
}

// ---------------------------------------------------------------------------
// 6. Stop drains everything
// ---------------------------------------------------------------------------

#[test]
fn stop_flushes_the_last_partial_chunk() {
    const N: u64 = 5_000;
    const LEN: usize = 64;
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    // 5 000 messages of ~95 B fill neither a chunk nor its age: only
    // stop() can flush them.
    o.chunk_size = MIB;
    o.chunk_max_age = Duration::from_secs(10);
    o.queue_capacity = 8192;
    let burst = CountingSource::new(1, "/burst", LEN)
        .count(N)
        .return_when_done();
    // A source that stays: with every source gone the chunker would end
    // and flush by itself, before stop().
    let idle = CountingSource::new(2, "/idle", 16).count(0);
    let counts = burst.counts();
    let rec = Recorder::start(o, boxed(vec![burst, idle]), Arc::new(SystemClock)).expect("start");
    wait_until(Duration::from_secs(10), "burst pushed", || {
        counts.finished()
    });
    let live = rec.status();
    assert_eq!(live.chunks_written, 0, "a chunk left before stop()");
    assert_eq!(live.messages_written, 0);
    let report = rec.stop().expect("stop");

    let p = counts.get();
    assert_eq!((p.ok, p.dropped()), (N, 0), "{p:?}");
    let st = channel(&report.status, "/burst");
    assert_eq!((st.accepted, st.written, st.lost), (N, N, 0));
    assert_eq!(report.status.messages_written, N);
    assert_eq!(report.status.chunks_written, 1);
    let path = only_segment(&report);
    assert_eq!(report.segments[0].messages, N);
    let rb = validate(&path);
    assert_eq!(rb.message_count, N);
    let topics = by_topic(&rb);
    let idx = check_channel("/burst", &topics["/burst"], 1, LEN);
    assert!(idx.iter().copied().eq(0..N));
}

// ---------------------------------------------------------------------------
// 7. Segment naming and metadata.yaml
// ---------------------------------------------------------------------------

struct FixedClock(u64);

impl RecordingClock for FixedClock {
    fn now_ns(&self) -> u64 {
        self.0
    }
}

/// `message_count` of each topic and each file in a metadata.yaml, as the
/// recorder writes it (topics under `name:`, files under `path:`).
fn yaml_counts(yaml: &str) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let doc: serde_norway::Value = serde_norway::from_str(yaml).unwrap();
    let info = &doc["rosbag2_bagfile_information"];
    let entries = |list: &str, name: &dyn Fn(&serde_norway::Value) -> &serde_norway::Value| {
        info[list]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    name(e).as_str().unwrap().to_string(),
                    e["message_count"].as_u64().unwrap(),
                )
            })
            .collect::<BTreeMap<String, u64>>()
    };
    (
        entries("topics_with_message_count", &|e| {
            &e["topic_metadata"]["name"]
        }),
        entries("files", &|e| &e["path"]),
    )
}

#[test]
fn sessions_get_unique_names_and_closed_segments_are_complete() {
    use std::os::unix::fs::PermissionsExt;
    // 2026-12-02 13:27:47 UTC
    let clock: Arc<dyn RecordingClock> = Arc::new(FixedClock(1_796_218_067_000_000_000));
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    o.session_prefix = "drive".into();
    let plan = [[("/a", 100u64), ("/b", 40)], [("/a", 70), ("/b", 10)]];
    let mut running = Vec::new();
    for counts in &plan {
        let srcs: Vec<CountingSource> = counts
            .iter()
            .enumerate()
            .map(|(i, (t, n))| CountingSource::new(i as u32, t, 32).count(*n))
            .collect();
        let c: Vec<_> = srcs.iter().map(|s| s.counts()).collect();
        let rec = Recorder::start(o.clone(), boxed(srcs), clock.clone()).expect("start");
        running.push((rec, c));
    }
    let names = ["drive_20261202T132747Z", "drive_20261202T132747Z_1"];
    for ((rec, _), name) in running.iter().zip(names) {
        assert_eq!(rec.session_dir(), dir.path().join(name));
    }
    for ((rec, counts), (name, plan)) in running.into_iter().zip(names.iter().zip(&plan)) {
        wait_until(Duration::from_secs(10), "sources pushed", || {
            counts.iter().all(|c| c.finished())
        });
        let report = rec.stop().expect("stop");
        let session = dir.path().join(name);
        let seg_name = format!("{name}_0.mcap");
        let seg = session.join(&seg_name);
        assert_eq!(only_segment(&report), seg);

        let mut entries: Vec<String> = std::fs::read_dir(&session)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        entries.sort();
        assert_eq!(entries, vec![seg_name.clone(), "metadata.yaml".to_string()]);
        let mode = std::fs::metadata(&seg).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o444, "{seg_name} mode {mode:o}");

        let rb = validate(&seg);
        let summary = read_summary(&seg).unwrap();
        let stats = summary.statistics.clone().expect("statistics");
        let yaml = std::fs::read_to_string(session.join("metadata.yaml")).unwrap();
        let doc: serde_norway::Value = serde_norway::from_str(&yaml).unwrap();
        assert_eq!(
            doc["rosbag2_bagfile_information"]["relative_file_paths"][0].as_str(),
            Some(seg_name.as_str()),
            "{yaml}"
        );
        let (topics, files) = yaml_counts(&yaml);
        assert_eq!(
            files,
            BTreeMap::from([(seg_name.clone(), stats.message_count)])
        );
        assert_eq!(stats.message_count, rb.message_count);
        let in_file = by_topic(&rb);
        for (topic, pushed) in plan {
            let id = summary
                .channels
                .values()
                .find(|c| c.topic == *topic)
                .map(|c| c.id)
                .expect("channel in summary");
            let n = stats.channel_message_counts.get(&id).copied().unwrap_or(0);
            assert_eq!(n, *pushed, "{name} {topic}: statistics");
            assert_eq!(
                topics.get(*topic),
                Some(&n),
                "{name} {topic}: metadata.yaml\n{yaml}"
            );
            assert_eq!(in_file[topic].len() as u64, n, "{name} {topic}: messages");
        }
        assert_eq!(topics.len(), plan.len(), "{yaml}");
    }
}

#[test]
fn recording_goes_on_in_a_new_segment_after_a_storage_failure() {
    const BLOCK: usize = 64 * KIB;
    const LEN: usize = KIB;
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    o.storage = WriterOptions {
        block_size: BLOCK,
        queue_depth: 4,
        sync_interval: Duration::from_secs(3600),
        preallocate: 0,
        // Every file fails at its third block: the recorder must close and
        // recover each one, then go on in the next.
        faults: Faults {
            fail_write: Some((3, libc::ENOSPC)),
            ..Faults::default()
        },
        ..WriterOptions::default()
    };
    o.compression = Compression::None;
    o.chunk_size = 16 * KIB;
    o.chunk_max_age = Duration::from_millis(20);
    let src = CountingSource::new(1, "/steady", LEN).every(Duration::from_millis(1));
    let rec = Recorder::start(o, boxed(vec![src]), Arc::new(SystemClock)).expect("start");
    let session = rec.session_dir().to_path_buf();
    std::thread::sleep(Duration::from_millis(2600));
    let report = rec.stop().expect("stop");
    assert!(
        report.storage_errors.len() >= 2,
        "expected a failure in at least two segments: {:?}",
        report.storage_errors
    );
    let segs = edgerec_format::bag::segment_files(&session).unwrap();
    assert!(segs.len() >= 3, "{segs:?}");
    let mut seqs = Vec::new();
    for s in &segs {
        assert!(
            s.extension().is_some_and(|e| e == "mcap"),
            "{}",
            s.display()
        );
        let rb = mcap_readback(s).unwrap_or_else(|e| panic!("{}: {e}", s.display()));
        seqs.extend(rb.messages.iter().map(|m| m.sequence));
    }
    // Nothing written twice or out of order; gaps only where counted lost.
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let c = report.status.channels[0].clone();
    assert_eq!(seqs.len() as u64, c.written, "{c:?}");
    assert_eq!(c.accepted, c.written + c.lost, "{c:?}");
    // Gaps inside the range are lost messages (those lost after the last
    // kept one are not inside it).
    let missing = u64::from(*seqs.last().unwrap()) + 1 - seqs.len() as u64;
    assert!(missing <= c.lost, "{missing} missing, {c:?}");
    let meta = std::fs::read_to_string(session.join("metadata.yaml")).unwrap();
    for s in &segs {
        let n = s.file_name().unwrap().to_string_lossy().into_owned();
        assert!(meta.contains(&n), "{n} not in metadata.yaml");
    }
}

// ---------------------------------------------------------------------------
// 9. Real-time priority of the storage stage
// ---------------------------------------------------------------------------

/// `storage.realtime_priority`: the sequencer and the I/O thread, and only
/// they, run under SCHED_FIFO at that priority while recording; the bag is
/// complete.
#[test]
fn storage_stage_threads_run_sched_fifo_and_nothing_else_does() {
    let test = "storage_stage_threads_run_sched_fifo_and_nothing_else_does";
    let refused = std::thread::spawn(|| {
        edgerec_storage::set_current_thread_realtime(1)
            .err()
            .map(|e| e.to_string())
    })
    .join()
    .expect("probe thread");
    if let Some(why) = refused {
        edgerec_testkit::skip::skip(format!(
            "{test}: SCHED_FIFO refused here ({why}): needs CAP_SYS_NICE"
        ));
        return;
    }
    // A priority no other test uses.
    const PRIO: u32 = 41;
    const N: u64 = 20_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = options(dir.path());
    o.storage.realtime_priority = PRIO as u8;
    // The source pushes as fast as it can: a queue for all of it.
    o.queue_capacity = 2 * N as usize;
    let src = CountingSource::new(1, "/rt", 512).count(N);
    let counts = src.counts();
    let rec = Recorder::start(o, boxed(vec![src]), Arc::new(SystemClock)).expect("start");
    let fifo = libc::SCHED_FIFO as u32;
    wait_until(
        Duration::from_secs(10),
        "edgerec-seq and edgerec-io under SCHED_FIFO",
        || {
            let mut seen: Vec<String> = edgerec_storage::thread_scheduling()
                .into_iter()
                .filter(|(comm, policy, rt)| {
                    *policy == fifo
                        && *rt == PRIO
                        && (comm == "edgerec-seq" || comm == "edgerec-io")
                })
                .map(|(comm, _, _)| comm)
                .collect();
            seen.sort();
            seen == ["edgerec-io", "edgerec-seq"]
        },
    );
    // Threads the storage stage starts inherit it (the segment closer,
    // io_uring's own workers); the chunker, the compressors and the
    // sources stay at normal scheduling.
    let storage = |comm: &str| {
        ["edgerec-seq", "edgerec-io", "edgerec-close"].contains(&comm) || comm.starts_with("iou-")
    };
    for (comm, policy, rt) in edgerec_storage::thread_scheduling() {
        if policy == fifo {
            assert!(storage(&comm), "{comm} runs SCHED_FIFO {rt}");
            assert_eq!(rt, PRIO, "{comm}");
        }
    }
    wait_until(Duration::from_secs(20), "all pushed", || counts.finished());
    let report = rec.stop().expect("stop");
    let p = counts.get();
    assert_eq!((p.ok, p.dropped()), (N, 0), "{p:?}");
    let rb = validate(&only_segment(&report));
    assert_eq!(rb.message_count, N);
    let topics = by_topic(&rb);
    let idx = check_channel("/rt", &topics["/rt"], 1, 512);
    assert!(idx.iter().copied().eq(0..N));
}

// ---------------------------------------------------------------------------
// 3b. Channel isolation inside one source
// ---------------------------------------------------------------------------

/// One source, two channels pushed from two threads through clones of one
/// sink: `/camera` floods 1 MiB messages as fast as it can, `/imu` sends
/// a small message every millisecond.
struct TwoChannels {
    flood: Arc<PushCounts>,
    quiet: Arc<PushCounts>,
}

impl Source for TwoChannels {
    fn name(&self) -> String {
        "two-channels".into()
    }

    fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError> {
        let camera = sink.register(spec("/camera"))?;
        std::thread::scope(|s| {
            let flood_sink = sink.clone();
            let flood = &self.flood;
            s.spawn(move || {
                let mut i = 0u64;
                while !stop.is_requested() {
                    let now = flood_sink.now_ns();
                    flood.record(flood_sink.push(Envelope {
                        channel: camera,
                        log_time: now,
                        publish_time: now,
                        payload: payload(1, i, MIB),
                    }));
                    i += 1;
                }
            });
            // The quiet channel is registered while the flood runs, from
            // the other thread's clone: it is known at once.
            let imu = sink.register(spec("/imu"))?;
            let start = Instant::now();
            let mut i = 0u64;
            while !stop.is_requested() {
                let due = start + Duration::from_millis(i);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    stop.wait_timeout(wait);
                    continue;
                }
                let now = sink.now_ns();
                self.quiet.record(sink.push(Envelope {
                    channel: imu,
                    log_time: now,
                    publish_time: now,
                    payload: payload(2, i, 64),
                }));
                i += 1;
            }
            Ok(())
        })
    }
}

#[test]
fn in_one_source_a_flooding_channel_cannot_make_a_quiet_channel_drop() {
    const BUDGET: u64 = 48 << 20;
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    o.memory_budget = BUDGET;
    o.chunk_size = MIB;
    o.compression = Compression::None;
    o.queue_capacity = 1024;
    // One segment however fast the disk: the flood writes about 1 GB in
    // the 2 s on a fast one, the default split size.
    o.split.max_bytes = 64 << 30;
    let src = TwoChannels {
        flood: Arc::default(),
        quiet: Arc::default(),
    };
    let (fc, qc) = (src.flood.clone(), src.quiet.clone());
    let rec = Recorder::start(o, vec![Box::new(src)], Arc::new(SystemClock)).expect("start");
    std::thread::sleep(Duration::from_secs(2));
    let report = rec.stop().expect("stop");
    let (f, q) = (fc.get(), qc.get());
    eprintln!("flood {f:?}\nquiet {q:?}");
    let s = &report.status;
    eprintln!(
        "budget peak {} MiB of {} MiB",
        s.budget_peak >> 20,
        s.budget_limit >> 20
    );

    // The flood really outran the disk; otherwise this proves nothing.
    assert!(f.dropped() > 0, "the flood was never refused: {f:?}");
    assert!(
        q.ok >= 1000,
        "the quiet channel pushed only {} in 2 s at 1 kHz",
        q.ok
    );
    assert_eq!(q.dropped(), 0, "the quiet channel was refused: {q:?}");
    let sq = channel(s, "/imu");
    assert_eq!(
        (sq.accepted, sq.dropped, sq.written, sq.lost),
        (q.ok, 0, q.ok, 0)
    );
    let sf = channel(s, "/camera");
    assert_eq!(sf.dropped, f.dropped());
    assert_eq!(sf.written, f.ok);
    // Memory: within the budget, but for the index records a compressor
    // adds per chunk in flight (charged past the limit, never refused).
    assert!(
        s.budget_peak <= BUDGET + MAX_CHUNKS_IN_FLIGHT as u64 * 4 * KIB as u64,
        "budget peak {} of {BUDGET}",
        s.budget_peak
    );
    let rb = validate(&only_segment(&report));
    let topics = by_topic(&rb);
    let qi = check_channel("/imu", &topics["/imu"], 2, 64);
    assert!(qi.iter().copied().eq(0..q.ok), "the quiet channel has gaps");
}

// ---------------------------------------------------------------------------
// 3c. Drops counted once, across splits
// ---------------------------------------------------------------------------

#[test]
fn drops_are_counted_once_across_splits_and_info_equals_the_status() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    // A queue of 64 that bursts of 500 overflow every 5 ms, and segments
    // of at most 2000 messages: drops in nearly every segment, and splits
    // while drops keep happening.
    o.queue_capacity = 64;
    o.split = SplitPolicy {
        max_messages: 2_000,
        ..SplitPolicy::default()
    };
    let bursty = CountingSource::new(1, "/bursty", 128)
        .every(Duration::from_millis(5))
        .burst(500);
    let steady = CountingSource::new(2, "/steady", 64).every(Duration::from_millis(2));
    let (bc, sc) = (bursty.counts(), steady.counts());
    let rec =
        Recorder::start(o, boxed(vec![bursty, steady]), Arc::new(SystemClock)).expect("start");
    std::thread::sleep(Duration::from_millis(1500));
    let report = rec.stop().expect("stop");
    let (b, s) = (bc.get(), sc.get());
    assert!(b.queue_full > 0, "the bursts never overflowed: {b:?}");
    assert!(
        report.segments.len() >= 4,
        "{} segments",
        report.segments.len()
    );

    // Each file's edgerec.drops, summed per topic over the session.
    let mut per_file = Vec::new();
    let mut sum: BTreeMap<String, u64> = BTreeMap::new();
    for seg in &report.segments {
        let rb = validate(&seg.path);
        let d = rb.metadata.get("edgerec.drops").expect("edgerec.drops");
        let n: u64 = d["/bursty"].parse().unwrap();
        per_file.push(n);
        for (topic, v) in d {
            *sum.entry(topic.clone()).or_default() += v.parse::<u64>().unwrap();
        }
    }
    eprintln!("drops per segment {per_file:?}; source saw {b:?}");
    assert!(
        per_file.iter().filter(|&&n| n > 0).count() >= 2,
        "drops in fewer than two segments: {per_file:?}"
    );
    let st = |t: &str| {
        let c = channel(&report.status, t);
        c.dropped + c.lost
    };
    assert_eq!(sum["/bursty"], st("/bursty"), "files vs status");
    assert_eq!(
        sum["/bursty"],
        b.dropped(),
        "files vs what the source saw refused"
    );
    assert_eq!(sum["/steady"], st("/steady"));
    assert_eq!(s.dropped(), st("/steady"));

    // `info` of the session adds up to the same totals.
    let info = edgerec_format::info::inspect(&report.session_dir).expect("info");
    assert_eq!(
        info.drops.get("/bursty").copied().unwrap_or(0),
        st("/bursty")
    );
    assert_eq!(
        info.drops.get("/steady").copied().unwrap_or(0),
        st("/steady")
    );
    let status_total: u64 = report
        .status
        .channels
        .iter()
        .map(|c| c.dropped + c.lost)
        .sum();
    assert_eq!(info.drops.values().sum::<u64>(), status_total);
}
