//! Offload against a real S3 server: PyPI moto[server] on loopback
//! (`tests/py/s3peer.py serve`), checked with boto3, the reference client
//! (`s3peer.py verify`: every object downloaded, its SHA-256 compared with
//! the local file's). A bag directory of a 23 MiB file (five 5 MiB parts,
//! three at a time), a small one, `metadata.yaml` and an `.active` file:
//! the three whole files are in the bucket byte for byte, the small ones
//! with their SHA-256 in the object's metadata, each with the ETag S3
//! defines (the MD5, or the MD5 of the parts' MD5s and `-5`),
//! `metadata.yaml` then the session
//! manifest last, the `.active` file not at all. Sent again, every file is
//! skipped. An object planted at a file's key with the same size and
//! SHA-256 metadata but other bytes is found out and replaced. A missing
//! bucket is a refusal that names the fix. Over mutual TLS (a CA made for
//! the test) with SSE-S3 the same holds, and a handshake that fails names
//! the settings to check.

use edgerec_testkit::noise;
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

/// A single PUT carries the SHA-256 in its metadata; a multipart upload
/// begins before the file is read (its ETag covers it).
fn assert_sha256_metadata(key: &str, o: &serde_json::Value) {
    let multipart = o["etag"].as_str().unwrap().contains('-');
    let want = if multipart {
        &serde_json::Value::Null
    } else {
        &o["sha256"]
    };
    assert_eq!(&o["meta_sha256"], want, "{key}: {o}");
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
    let p = plan(std::slice::from_ref(&bag), &s).unwrap();
    assert_eq!(p.skipped.len(), 1, "{:?}", p.skipped);
    assert_eq!(
        p.files.last().unwrap().key,
        "robot-7/demo_20261206T101500Z/metadata.yaml"
    );
    let seen = std::sync::Mutex::new(Vec::new());
    let mut outcomes = Vec::new();
    let report = uploader.send(
        &p,
        &s.vehicle,
        &|b| seen.lock().unwrap().push(b),
        &mut |_, key, r| outcomes.push((key.to_owned(), r.as_ref().unwrap().clone())),
    );
    // Progress ends at the plan's size.
    let total: u64 = p.files.iter().map(|f| f.size).sum();
    assert_eq!(seen.lock().unwrap().iter().max().copied(), Some(total));
    let sha = |name: &str| {
        let d = edgerec_offload::upload::digests(&bag.join(name), u64::MAX).unwrap();
        d.sha256
    };
    let key = |name: &str| format!("robot-7/demo_20261206T101500Z/{name}");
    let sent = |bytes, parts, name: &str| FileOutcome::Sent {
        bytes,
        parts,
        reused: 0,
        sha256: sha(name),
    };
    assert_eq!(outcomes.len(), 4, "{outcomes:?}");
    assert_eq!(
        outcomes[..3],
        [
            (
                key("demo_20261206T101500Z_0.mcap"),
                sent(23 * MIB + 12_345, 5, "demo_20261206T101500Z_0.mcap")
            ),
            (
                key("demo_20261206T101500Z_1.mcap"),
                sent(100_000, 1, "demo_20261206T101500Z_1.mcap")
            ),
            (key("metadata.yaml"), sent(29, 1, "metadata.yaml")),
        ]
    );
    // The manifest last.
    assert_eq!(outcomes[3].0, key("manifest.json"));
    assert_eq!(report.sent, 3);
    assert_eq!((report.manifests, report.failed.len()), (1, 0));

    // What boto3 reads back: every file byte for byte, each with the ETag
    // S3 defines for its parts (and a single PUT's SHA-256 in its
    // metadata).
    let v = server.verify("fleet-recordings", "robot-7/", &bag);
    let objects = v.as_object().unwrap();
    assert_eq!(objects.len(), 4, "{v:#}");
    for (k, o) in objects {
        assert_sha256_metadata(k, o);
        if k.ends_with("manifest.json") {
            continue;
        }
        assert_eq!(o["equal"], true, "{k}: {o}");
        let name = k.rsplit('/').next().unwrap();
        let d = edgerec_offload::upload::digests(&bag.join(name), s.part_size).unwrap();
        assert_eq!(o["etag"], d.etag(), "{k}: {o}");
    }
    assert!(v[key("demo_20261206T101500Z_0.mcap")]["etag"]
        .as_str()
        .unwrap()
        .ends_with("-5"));
    // The manifest names each file with its size and SHA-256, and the
    // file left out.
    let m: serde_json::Value =
        serde_json::from_str(&server.get("fleet-recordings", &key("manifest.json"))).unwrap();
    assert_eq!(m["vehicle"], "robot-7");
    assert_eq!(m["session"], "demo_20261206T101500Z");
    let files = m["files"].as_array().unwrap();
    assert_eq!(files.len(), 3, "{m:#}");
    for f in files {
        let name = f["file"].as_str().unwrap();
        assert_eq!(f["sha256"], sha(name), "{m:#}");
        assert_eq!(f["key"], key(name));
        assert_eq!(
            f["size"],
            std::fs::metadata(bag.join(name)).unwrap().len(),
            "{m:#}"
        );
    }
    assert_eq!(files[2]["file"], "metadata.yaml");
    assert_eq!(m["left_out"].as_array().unwrap().len(), 1, "{m:#}");

    // The journal is empty once every upload is complete.
    assert_eq!(
        std::fs::read_dir(d.path().join("journal")).unwrap().count(),
        0
    );
    // Sent again: every file and the manifest are there already.
    let mut again = Vec::new();
    let report = uploader.send(&p, &s.vehicle, &|_| {}, &mut |_, _, r| {
        again.push(r.as_ref().unwrap().clone())
    });
    assert_eq!((report.sent, report.skipped, report.manifests), (0, 3, 1));
    assert!(
        again
            .iter()
            .all(|o| matches!(o, FileOutcome::Skipped { .. })),
        "{again:?}"
    );

    // An object at a file's key whose bytes are not the file's (same
    // size, same SHA-256 claimed in its metadata, other bytes) is not
    // taken for the file: its ETag differs, and the file is sent again.
    let small = &p.files[1];
    let forged = d.path().join("forged");
    std::fs::write(&forged, noise(100_000, 99)).unwrap();
    server.peer(&[
        "put",
        "--endpoint",
        &server.endpoint,
        "--bucket",
        "fleet-recordings",
        "--key",
        &small.key,
        "--file",
        &forged.to_string_lossy(),
        "--sha256",
        &sha("demo_20261206T101500Z_1.mcap"),
    ]);
    assert!(matches!(
        uploader.upload(small, &|_| {}).unwrap(),
        FileOutcome::Sent { parts: 1, .. }
    ));
    let v = server.verify("fleet-recordings", "robot-7/", &bag);
    assert_eq!(v[&small.key]["equal"], true, "{v:#}");

    // A bucket that does not exist: refused, with the fix.
    let s = settings(
        &server.endpoint,
        "no-such-bucket",
        &d.path().join("journal"),
    );
    let uploader = Uploader::new(Client::new(&s, &secret()).unwrap(), &s);
    let e = uploader.upload(&p.files[1], &|_| {}).unwrap_err();
    assert!(
        matches!(&e, OffloadError::Refused { status: 404, code, .. } if code == "NoSuchBucket"),
        "{e:?}"
    );
    assert!(e.to_string().contains("offload.bucket"), "{e}");
}

/// Over TLS with a CA made for the test, to a server that asks for this
/// vehicle's client certificate, with SSE-S3 asked: every file and the
/// manifest arrive byte for byte (boto3 over the same TLS), each stored
/// encrypted (`AES256`) with the ETag its parts give. Without the client
/// certificate, or trusting the system's CAs instead of the test's, the
/// handshake fails at once (not retried) with the settings to check; a
/// client key others can read is refused before anything is sent.
#[test]
fn over_mutual_tls_with_sse_every_file_arrives_checked() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    let d = tempfile::tempdir().unwrap();
    let tls = d.path().join("tls");
    std::fs::create_dir(&tls).unwrap();
    let server = Moto::start_tls(&tls, true);
    assert!(server.endpoint.starts_with("https://127.0.0.1:"));
    server.make_bucket("fleet-recordings");
    let bag = bag(d.path());
    let cfg = edgerec_config::OffloadConfig {
        journal_dir: d.path().join("journal"),
        endpoint: server.endpoint.clone(),
        bucket: "fleet-recordings".to_owned(),
        vehicle_id: "robot-7".to_owned(),
        part_size: 5 * MIB,
        concurrency: 3,
        ca_file: tls.join("ca.pem"),
        client_cert: tls.join("client.pem"),
        client_key: tls.join("client.key"),
        sse: edgerec_config::Sse::S3,
        ..Default::default()
    };
    let s = Settings::from_config(&cfg).unwrap();
    let uploader = Uploader::new(Client::new(&s, &secret()).unwrap(), &s);
    let p = plan(std::slice::from_ref(&bag), &s).unwrap();
    let report = uploader.send(&p, &s.vehicle, &|_| {}, &mut |path, _, r| {
        if let Err(e) = r {
            panic!("{}: {e}", path.display());
        }
    });
    assert_eq!((report.sent, report.manifests), (3, 1), "{report:?}");
    let v = server.verify("fleet-recordings", "robot-7/", &bag);
    let objects = v.as_object().unwrap();
    assert_eq!(objects.len(), 4, "{v:#}");
    for (k, o) in objects {
        assert_eq!(o["sse"], "AES256", "{k}: {o}");
        assert_sha256_metadata(k, o);
        if !k.ends_with("/manifest.json") {
            assert_eq!(o["equal"], true, "{k}: {o}");
        }
    }

    let small = &p.files[1];
    // No client certificate: the server ends the handshake.
    let s = Settings::from_config(&edgerec_config::OffloadConfig {
        client_cert: PathBuf::new(),
        client_key: PathBuf::new(),
        ..cfg.clone()
    })
    .unwrap();
    let started = std::time::Instant::now();
    let e = Uploader::new(Client::new(&s, &secret()).unwrap(), &s)
        .upload(small, &|_| {})
        .unwrap_err();
    assert!(matches!(e, OffloadError::Tls { .. }), "{e:?}");
    assert!(e.to_string().contains("offload.client_cert"), "{e}");
    // The system's CAs do not know the test's.
    let s = Settings::from_config(&edgerec_config::OffloadConfig {
        ca_file: PathBuf::new(),
        ..cfg.clone()
    })
    .unwrap();
    let e = Uploader::new(Client::new(&s, &secret()).unwrap(), &s)
        .upload(small, &|_| {})
        .unwrap_err();
    assert!(matches!(e, OffloadError::Tls { .. }), "{e:?}");
    assert!(e.to_string().contains("offload.ca_file"), "{e}");
    // Neither was retried (five tries would take seconds of backoff).
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    // A client key others can read: refused with the fix, nothing sent.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        tls.join("client.key"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let s = Settings::from_config(&cfg).unwrap();
    let e = Client::new(&s, &secret()).err().expect("refused");
    assert!(e.to_string().contains("chmod 600"), "{e}");
}

/// Sends a bag of one 23 MiB file (five 5 MiB parts, three at a time)
/// through a fault proxy (`s3peer.py proxy`) in front of moto: it must
/// complete, the object must be the file byte for byte (boto3, straight
/// from moto), and no part may be acknowledged twice (each part number
/// has exactly one 200 in the proxy's log). Returns the proxy's log and
/// how long the upload took.
fn through_fault(fault: &str, down_seconds: f64) -> (Vec<serde_json::Value>, Duration) {
    let server = Moto::start();
    server.make_bucket("fleet-recordings");
    let proxy = edgerec_testkit::s3::FaultProxy::start(&server, fault, down_seconds);
    let d = tempfile::tempdir().unwrap();
    let bag = d.path().join("demo_20261206T101500Z");
    std::fs::create_dir(&bag).unwrap();
    std::fs::write(
        bag.join("demo_20261206T101500Z_0.mcap"),
        noise(23 * MIB as usize + 12_345, 7),
    )
    .unwrap();
    let s = settings(
        &proxy.endpoint,
        "fleet-recordings",
        &d.path().join("journal"),
    );
    let uploader = Uploader::new(Client::new(&s, &secret()).unwrap(), &s);
    let p = plan(std::slice::from_ref(&bag), &s).unwrap();
    let started = std::time::Instant::now();
    let report = uploader.send(&p, &s.vehicle, &|_| {}, &mut |path, _, r| {
        if let Err(e) = r {
            panic!("{fault}: {}: {e}", path.display());
        }
    });
    let took = started.elapsed();
    assert_eq!(
        (report.sent, report.manifests),
        (1, 1),
        "{fault}: {report:?}"
    );
    let v = server.verify("fleet-recordings", "robot-7/", &bag);
    let key = "robot-7/demo_20261206T101500Z/demo_20261206T101500Z_0.mcap";
    assert_eq!(v[key]["equal"], true, "{fault}: {v:#}");
    let log = proxy.log();
    for part in 1..=5u64 {
        let acked = log
            .iter()
            .filter(|l| l["part"] == part && l["status"] == 200)
            .count();
        assert_eq!(
            acked, 1,
            "{fault}: part {part} acknowledged {acked} times: {log:?}"
        );
    }
    (log, took)
}

/// A connection reset half way through part 2: the part is sent again on
/// a new connection and the upload completes.
#[test]
fn a_connection_reset_mid_part_loses_and_repeats_nothing() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    let (log, _) = through_fault("reset", 0.0);
    assert_eq!(
        log.iter().filter(|l| l["status"] == "reset").count(),
        1,
        "{log:?}"
    );
}

/// 503 SlowDown with Retry-After: 1 for the first two parts: the
/// uploader waits what the store asked, then completes.
#[test]
fn slowdown_with_retry_after_is_honoured() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    let (log, took) = through_fault("slowdown", 0.0);
    assert_eq!(
        log.iter().filter(|l| l["status"] == 503).count(),
        2,
        "{log:?}"
    );
    assert!(took >= Duration::from_secs(1), "{took:?}");
}

/// The store goes down for 30 s after two parts (its port closed, every
/// open connection cut): the parts in flight are sent again once it is
/// back, and the upload completes.
#[test]
fn a_store_down_for_30_s_then_back_completes() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    let (log, took) = through_fault("down", 30.0);
    assert!(
        log.iter().any(|l| l["status"] == "down 30 s") && log.iter().any(|l| l["status"] == "up"),
        "{log:?}"
    );
    assert!(took >= Duration::from_secs(30), "{took:?}");
}

/// s3rver, a store that writes its replies without S3's XML namespace and
/// gives a multipart object the MD5 of its bytes as its ETag: two bag
/// directories arrive byte for byte (boto3), each object's ETag checked
/// against the file (the first by reading it again, the second in its one
/// read, once the store's way is known), and are skipped when sent again.
#[test]
fn a_store_with_its_own_etags_and_no_namespace_is_checked_too() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let server = Moto::start_s3rver(&store, "fleet-recordings");
    let s = settings(
        &server.endpoint,
        "fleet-recordings",
        &d.path().join("journal"),
    );
    let secret = Secret {
        key: server.keys.0.into(),
        secret: server.keys.1.into(),
        token: None,
        origin: "the test".into(),
    };
    let uploader = Uploader::new(Client::new(&s, &secret).unwrap(), &s);
    let first = bag(d.path());
    let second = d.path().join("demo_20261206T111500Z");
    std::fs::create_dir(&second).unwrap();
    std::fs::write(
        second.join("demo_20261206T111500Z_0.mcap"),
        noise(11 * MIB as usize + 1, 11),
    )
    .unwrap();
    for bag in [&first, &second] {
        let p = plan(std::slice::from_ref(bag), &s).unwrap();
        let report = uploader.send(&p, &s.vehicle, &|_| {}, &mut |path, _, r| {
            if let Err(e) = r {
                panic!("{}: {e}", path.display());
            }
        });
        assert_eq!((report.manifests, report.skipped), (1, 0), "{report:?}");
        let session = bag.file_name().unwrap().to_string_lossy().into_owned();
        let v = server.verify("fleet-recordings", &format!("robot-7/{session}/"), bag);
        for (k, o) in v.as_object().unwrap() {
            if !k.ends_with("/manifest.json") {
                assert_eq!(o["equal"], true, "{k}: {o}");
            }
        }
        let again = uploader.send(&p, &s.vehicle, &|_| {}, &mut |_, _, r| {
            assert!(matches!(r, Ok(FileOutcome::Skipped { .. })), "{r:?}");
        });
        assert_eq!(again.sent, 0, "{again:?}");
    }
}
