//! A real ENOSPC in the middle of a segment (retention off: with it the
//! floor keeps recording from meeting ENOSPC at all): another process takes
//! the disk, a write fails with ENOSPC.
//! The segment is closed at its last good chunk, recording pauses, and
//! when the space comes back recording goes on in a new segment and the
//! failed one is recovered into a valid file (its recovered copy needs
//! room, so it waits for the space too); nothing written before is lost.
//! On a loop-mounted ext4 image; skips, saying why, where mounting is
//! refused.

use std::sync::Arc;
use std::time::Duration;

use edgerec_config::{Rate, SyntheticChannel, SyntheticKind};
use edgerec_format::bag::MetadataVersion;
use edgerec_format::chunk::Compression;
use edgerec_recorder::{Recorder, RecorderOptions, SplitPolicy};
use edgerec_source::{SupervisorOptions, SystemClock};
use edgerec_storage::WriterOptions;
use edgerec_synthetic::SyntheticSource;

const MIB: u64 = 1 << 20;

#[test]
fn a_real_enospc_closes_the_segment_at_its_last_good_chunk_and_recording_goes_on() {
    let d = tempfile::tempdir().unwrap();
    let mnt = d.path().join("mnt");
    let _mount = match edgerec_testkit::LoopExt4::mount(&d.path().join("fs.img"), &mnt, 96) {
        Ok(m) => m,
        Err(e) => {
            edgerec_testkit::skip::skip(format!(
                "real ENOSPC in the pipeline: cannot loop-mount ext4 here: {e}"
            ));
            return;
        }
    };
    let filler = mnt.join("filler");
    let free = edgerec_testkit::free_bytes;

    let opts = RecorderOptions {
        root: mnt.join("rec"),
        session_prefix: "enospc".into(),
        session_dir: None,
        metadata_version: MetadataVersion::Humble,
        storage: WriterOptions {
            preallocate: 0,
            sync_interval: Duration::from_millis(100),
            ..WriterOptions::default()
        },
        chunk_size: 1 << 20,
        compression: Compression::None,
        chunk_max_age: Duration::from_millis(50),
        memory_budget: 64 << 20,
        compressor_threads: 2,
        queue_capacity: 1024,
        library: "edgerec enospc test".into(),
        split: SplitPolicy::default(),
        // Retention off: with it, the floor keeps a recording from ever
        // meeting ENOSPC (tests/disk_full.rs); this test is the backstop.
        retention: None,
        supervisor: SupervisorOptions::default(),
        triggers: None,
        watch: Default::default(),
    };
    let channel = SyntheticChannel {
        payload_size: 256 << 10,
        ..SyntheticChannel::new("/camera", SyntheticKind::Image, Rate::Hz(100.0))
    };
    let rec = Recorder::start(
        opts,
        vec![Box::new(SyntheticSource::new(channel)) as Box<_>],
        Arc::new(SystemClock),
    )
    .expect("start");
    let session = rec.session_dir().to_path_buf();
    std::thread::sleep(Duration::from_millis(500));
    // Another process takes all but 512 KiB at once.
    let left = free(&mnt);
    {
        // The recorder writes meanwhile: stop quietly at ENOSPC.
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![0x5au8; (MIB / 2) as usize];
        for _ in 0..left.saturating_sub(MIB / 2) / (MIB / 2) {
            if f.write_all(&block).is_err() {
                break;
            }
        }
        let _ = f.sync_all();
    }
    std::thread::sleep(Duration::from_millis(1500));
    // Space comes back; recording must go on by itself.
    std::fs::remove_file(&filler).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    // The failed segment's recovery waits for the room it needs and is
    // tried again: on a loaded machine it may take longer. Until then two
    // segments are `.active` (it and the one being written).
    let active = || {
        std::fs::read_dir(&session)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".active"))
                    .count()
            })
            .unwrap_or(0)
    };
    let waited = std::time::Instant::now();
    while active() > 1 && waited.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let report = rec.stop().expect("stop");

    assert!(
        report
            .storage_errors
            .iter()
            .any(|e| e.contains("ENOSPC") || e.contains("No space")),
        "no ENOSPC reported: {:?}",
        report.storage_errors
    );
    let segs = edgerec_format::bag::segment_files(&session).unwrap();
    eprintln!(
        "errors {:?}\nfiles {:?}\nstatus {:?}",
        report.storage_errors, segs, report.status.channels
    );
    assert!(segs.len() >= 2, "{segs:?}");
    let mut seqs = Vec::new();
    let mut recovered = 0;
    for s in &segs {
        assert!(
            s.extension().is_some_and(|e| e == "mcap"),
            "{}",
            s.display()
        );
        edgerec_format::reader::check_file(s).unwrap_or_else(|e| panic!("{}: {e}", s.display()));
        let rb =
            edgerec_testkit::mcap_readback(s).unwrap_or_else(|e| panic!("{}: {e}", s.display()));
        if rb.metadata.contains_key("edgerec.recovered") {
            recovered += 1;
        }
        seqs.extend(rb.messages.iter().map(|m| m.sequence));
    }
    assert!(recovered >= 1, "no segment was recovered after the ENOSPC");
    let c = report.status.channels[0].clone();
    eprintln!(
        "{} segments ({recovered} recovered), {} messages kept, {} lost, {} dropped; errors: {:?}",
        segs.len(),
        seqs.len(),
        c.lost,
        c.dropped,
        report.storage_errors
    );
    // Nothing kept twice or out of order; the files hold what `written`
    // says; and messages were written after the space came back.
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(seqs.len() as u64, c.written, "{c:?}");
    assert_eq!(c.accepted, c.written + c.lost, "{c:?}");
    let first_segment_messages = edgerec_testkit::mcap_readback(&segs[0])
        .unwrap()
        .messages
        .len();
    assert!(
        seqs.len() > first_segment_messages + 50,
        "recording did not go on after the space came back"
    );
}
