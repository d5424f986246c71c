//! Segments of video channels start on a key unit, with nothing lost or
//! repeated: two fake encoders (a key unit every 30 frames, and two frames
//! after each request, like x265enc's force-key-unit) and a plain 1 kHz
//! channel, split every 300 ms by `max_duration` and, in the second test,
//! by `max_bytes`. Read back with the `mcap` crate: in every segment the
//! first message of each video channel is a key unit; the frame numbers of
//! each channel over all segments are 0..n, each once, in order.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use edgerec_format::bag::MetadataVersion;
use edgerec_format::chunk::Compression;
use edgerec_recorder::{Recorder, RecorderOptions, SplitPolicy};
use edgerec_source::{
    ChannelSpec, Envelope, Source, SourceError, SourceSink, Stop, SupervisorOptions, SystemClock,
};
use edgerec_storage::WriterOptions;

fn spec(topic: &str) -> ChannelSpec {
    ChannelSpec {
        topic: topic.into(),
        type_name: "test_msgs/msg/Frame".into(),
        message_encoding: "cdr".into(),
        schema_encoding: "ros2msg".into(),
        schema: b"uint64 n\nbool key\n".to_vec(),
        metadata: Default::default(),
        latched: false,
    }
}

/// Payload: frame number (u64 LE), then 1 for a key unit; padded to `size`.
fn payload(n: u64, key: bool, size: usize) -> Vec<u8> {
    let mut p = n.to_le_bytes().to_vec();
    p.push(key as u8);
    p.resize(size.max(9), 0);
    p
}

/// A fake encoder: a frame every `period`, a key unit every 30 frames and
/// two frames after each key-unit request.
struct FakeVideo {
    topic: String,
    period: Duration,
    size: usize,
    n: u64,
}

impl Source for FakeVideo {
    fn name(&self) -> String {
        self.topic.clone()
    }
    fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError> {
        let ch = sink.register(spec(&self.topic))?;
        let mut seen = sink.key_unit_requests();
        let mut due: Option<u64> = None;
        while !stop.wait_timeout(self.period) {
            let r = sink.key_unit_requests();
            if r != seen {
                seen = r;
                due.get_or_insert(self.n + 2);
            }
            let key = self.n % 30 == 0 || due.is_some_and(|d| self.n >= d);
            if key {
                due = None;
            }
            let t = sink.now_ns();
            let _ = sink.push_video(
                Envelope {
                    channel: ch,
                    log_time: t,
                    publish_time: t,
                    payload: payload(self.n, key, self.size),
                },
                key,
            );
            self.n += 1;
        }
        Ok(())
    }
}

/// A plain channel at 1 kHz.
struct Plain(u64);

impl Source for Plain {
    fn name(&self) -> String {
        "/plain".into()
    }
    fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError> {
        let ch = sink.register(spec("/plain"))?;
        while !stop.wait_timeout(Duration::from_millis(1)) {
            let t = sink.now_ns();
            let _ = sink.push(Envelope {
                channel: ch,
                log_time: t,
                publish_time: t,
                payload: payload(self.0, false, 64),
            });
            self.0 += 1;
        }
        Ok(())
    }
}

fn options(root: &Path, split: SplitPolicy) -> RecorderOptions {
    RecorderOptions {
        root: root.to_path_buf(),
        session_prefix: "cut".into(),
        session_dir: None,
        metadata_version: MetadataVersion::Humble,
        storage: WriterOptions {
            block_size: 256 << 10,
            queue_depth: 4,
            preallocate: 4 << 20,
            ..WriterOptions::default()
        },
        chunk_size: 64 << 10,
        compression: Compression::None,
        chunk_max_age: Duration::from_millis(50),
        memory_budget: 64 << 20,
        compressor_threads: 1,
        queue_capacity: 1024,
        library: "edgerec-recorder video cut tests".into(),
        split,
        retention: None,
        supervisor: SupervisorOptions::default(),
        triggers: None,
        watch: Default::default(),
    }
}

fn record_and_check(split: SplitPolicy, size: usize) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let sources: Vec<Box<dyn Source>> = vec![
        Box::new(FakeVideo {
            topic: "/cam_a".into(),
            period: Duration::from_millis(10),
            size,
            n: 0,
        }),
        Box::new(FakeVideo {
            topic: "/cam_b".into(),
            period: Duration::from_millis(13),
            size,
            n: 0,
        }),
        Box::new(Plain(0)),
    ];
    let rec = Recorder::start(options(dir.path(), split), sources, Arc::new(SystemClock)).unwrap();
    let session = rec.session_dir().to_path_buf();
    std::thread::sleep(Duration::from_millis(2500));
    let report = rec.stop().unwrap();
    assert_eq!(report.status.drops(), 0);
    let mut segs: Vec<_> = std::fs::read_dir(&session)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "mcap"))
        .collect();
    segs.sort_by_key(|p| {
        p.file_stem()
            .unwrap()
            .to_string_lossy()
            .rsplit('_')
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    });
    let mut frames: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for seg in &segs {
        let rb = edgerec_testkit::mcap_readback(seg).unwrap();
        let mut first: BTreeMap<&str, bool> = BTreeMap::new();
        for m in &rb.messages {
            let n = u64::from_le_bytes(m.data[..8].try_into().unwrap());
            let key = m.data[8] == 1;
            if m.topic != "/plain" {
                first.entry(&m.topic).or_insert(key);
            }
            frames.entry(m.topic.clone()).or_default().push(n);
        }
        for (topic, key) in &first {
            assert!(
                key,
                "{}: the first message of {topic} is not a key unit",
                seg.display()
            );
        }
        assert_eq!(first.len(), 2, "{}: {first:?}", seg.display());
    }
    for (topic, ns) in &frames {
        let want: Vec<u64> = (0..ns.len() as u64).collect();
        assert_eq!(ns, &want, "{topic}: frames lost, repeated or out of order");
    }
    segs.len()
}

#[test]
fn duration_splits_cut_before_key_units() {
    let n = record_and_check(
        SplitPolicy {
            max_duration: Duration::from_millis(300),
            ..SplitPolicy::default()
        },
        2000,
    );
    assert!(n >= 5, "{n} segments in 2.5 s of 300 ms");
}

#[test]
fn byte_splits_cut_before_key_units() {
    let n = record_and_check(
        SplitPolicy {
            max_bytes: 256 << 10,
            ..SplitPolicy::default()
        },
        8000,
    );
    assert!(n >= 3, "{n} segments");
}
