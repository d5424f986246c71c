//! Offload against a real S3 server: PyPI moto[server] on loopback
//! (`tests/py/s3peer.py serve`), checked with boto3, the reference client
//! (`s3peer.py verify`: every object downloaded, its SHA-256 compared with
//! the local file's). A bag directory of a 23 MiB file (five 5 MiB parts,
//! three at a time), a small one, `metadata.yaml` and an `.active` file:
//! the three whole files are in the bucket byte for byte, each with its
//! SHA-256 in the object's metadata, `metadata.yaml` sent last, the
//! `.active` file not at all. Sent again, every file is skipped. A missing
//! bucket is a refusal that names the fix.

use std::path::{Path, PathBuf};
use std::time::Duration;

use edgerec_offload::credentials::Secret;
use edgerec_offload::s3::Client;
use edgerec_offload::upload::plan;
use edgerec_offload::{FileOutcome, OffloadError, Settings, Uploader};
use edgerec_testkit::s3::Moto;

const MIB: u64 = 1 << 20;

fn settings(endpoint: &str, bucket: &str, journal: &Path) -> Settings {
    Settings::from_config(&edgerec_config::OffloadConfig {
        journal_dir: journal.to_path_buf(),
        endpoint: endpoint.to_owned(),
        allow_http: true,
        bucket: bucket.to_owned(),
        vehicle_id: "robot-7".to_owned(),
        part_size: 5 * MIB,
        concurrency: 3,
        ..Default::default()
    })
    .unwrap()
}

fn secret() -> Secret {
    Secret {
        key: "edgerec-test".into(),
        secret: "edgerec-test-secret".into(),
        token: None,
        origin: "the test".into(),
    }
}

/// Incompressible bytes, different for each `seed`.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn bag(dir: &Path) -> PathBuf {
    let bag = dir.join("demo_20261206T101500Z");
    std::fs::create_dir(&bag).unwrap();
    std::fs::write(
        bag.join("demo_20261206T101500Z_0.mcap"),
        noise(23 * MIB as usize + 12_345, 1),
    )
    .unwrap();
    std::fs::write(bag.join("demo_20261206T101500Z_1.mcap"), noise(100_000, 2)).unwrap();
    std::fs::write(bag.join("metadata.yaml"), b"rosbag2_bagfile_information:\n").unwrap();
    std::fs::write(
        bag.join("demo_20261206T101500Z_2.mcap.active"),
        noise(1000, 3),
    )
    .unwrap();
    bag
}

#[test]
fn a_bag_directory_reaches_the_bucket_byte_for_byte_and_once() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    let server = Moto::start();
    server.make_bucket("fleet-recordings");
    let d = tempfile::tempdir().unwrap();
    let bag = bag(d.path());
    let s = settings(
        &server.endpoint,
        "fleet-recordings",
        &d.path().join("journal"),
    );
    let uploader = Uploader::new(Client::new(&s, &secret()).unwrap(), &s);
    let mut left_out = Vec::new();
    let files = plan(std::slice::from_ref(&bag), &s, &mut left_out).unwrap();
    assert_eq!(left_out.len(), 1, "{left_out:?}");
    assert_eq!(
        files.last().unwrap().key,
        "robot-7/demo_20261206T101500Z/metadata.yaml"
    );
    let mut outcomes = Vec::new();
    for f in &files {
        let seen = std::sync::Mutex::new(Vec::new());
        let o = uploader
            .upload(f, &|b| seen.lock().unwrap().push(b))
            .unwrap();
        // Progress ends at the file's size.
        assert_eq!(seen.lock().unwrap().iter().max().copied(), Some(f.size));
        outcomes.push(o);
    }
    assert_eq!(
        outcomes,
        [
            FileOutcome::Sent {
                bytes: 23 * MIB + 12_345,
                parts: 5,
                reused: 0,
            },
            FileOutcome::Sent {
                bytes: 100_000,
                parts: 1,
                reused: 0,
            },
            FileOutcome::Sent {
                bytes: 29,
                parts: 1,
                reused: 0,
            },
        ]
    );

    // What boto3 reads back.
    let v = server.verify("fleet-recordings", "robot-7/", &bag);
    let objects = v.as_object().unwrap();
    assert_eq!(objects.len(), 3, "{v:#}");
    for (key, o) in objects {
        assert_eq!(o["equal"], true, "{key}: {o}");
        assert_eq!(o["meta_sha256"], o["sha256"], "{key}: {o}");
    }

    // The journal is empty once every upload is complete.
    assert_eq!(
        std::fs::read_dir(d.path().join("journal")).unwrap().count(),
        0
    );
    // Sent again: every file is there already.
    for f in &files {
        assert_eq!(uploader.upload(f, &|_| {}).unwrap(), FileOutcome::Skipped);
    }

    // A bucket that does not exist: refused, with the fix.
    let s = settings(
        &server.endpoint,
        "no-such-bucket",
        &d.path().join("journal"),
    );
    let uploader = Uploader::new(Client::new(&s, &secret()).unwrap(), &s);
    let e = uploader.upload(&files[1], &|_| {}).unwrap_err();
    assert!(
        matches!(&e, OffloadError::Refused { status: 404, code, .. } if code == "NoSuchBucket"),
        "{e:?}"
    );
    assert!(e.to_string().contains("offload.bucket"), "{e}");
}
