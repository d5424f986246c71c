//! `edgerec upload` end to end: `edgerec run` records a session for 3 s
//! (a 400 Hz IMU and a camera-sized channel), then `edgerec upload`
//! sends the session directory to a real S3 server (PyPI moto[server] on
//! loopback, `tests/py/s3peer.py`) with the credentials in an owner-only
//! shared-credentials file; boto3 reads every object back byte for byte.
//! Run again, it sends nothing ("already there"). A credentials file
//! others can read is refused with exit 78 and the `chmod` that fixes it;
//! a missing bucket ends with exit 1 and the fix; nothing local is ever
//! deleted.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use edgerec_testkit::s3::Moto;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

fn config(cfg: &Path, root: &Path, endpoint: &str, bucket: &str, creds: &Path) {
    std::fs::write(
        cfg,
        format!(
            r#"
[recording]
root = "{root}"
session_prefix = "demo"

[health]
watchdog = ""
fault_file = "{root}/last-fault.json"
status_socket = "{root}/status.sock"

[offload]
endpoint = "{endpoint}"
allow_http = true
bucket = "{bucket}"
vehicle_id = "robot-7"
key_template = "{{vehicle}}/{{date}}/{{session}}/{{file}}"
credentials_file = "{creds}"
part_size = "5MiB"

[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 400

[[sources.synthetic]]
topic = "/camera/image_raw"
type = "sensor_msgs/msg/Image"
rate = 20
payload_size = 921600
"#,
            root = root.display(),
            creds = creds.display(),
        ),
    )
    .unwrap();
}

fn upload(cfg: &Path, session: &Path) -> Output {
    Command::new(BIN)
        .args(["upload", "--config", cfg.to_str().unwrap()])
        .arg(session)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_recorded_session_reaches_the_bucket_byte_for_byte() {
    let _limit = edgerec_testkit::time_limit(Duration::from_secs(300));
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let server = Moto::start();
    server.make_bucket("fleet-recordings");
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("data");
    let creds = d.path().join("offload-credentials");
    std::fs::write(
        &creds,
        "[default]\naws_access_key_id = edgerec-test\naws_secret_access_key = edgerec-test-secret\n",
    )
    .unwrap();
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o600)).unwrap();
    let cfg = d.path().join("edgerec.toml");
    config(&cfg, &root, &server.endpoint, "fleet-recordings", &creds);

    let run = Command::new(BIN)
        .args(["run", "--config", cfg.to_str().unwrap(), "--duration", "3s"])
        .env("EDGEREC_LOG", "warn")
        .output()
        .unwrap();
    assert!(run.status.success(), "edgerec run: {}", text(&run));
    let session = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir() && p.file_name().is_some_and(|n| n != "events"))
        .expect("a session directory");
    let name = session.file_name().unwrap().to_string_lossy().into_owned();
    let local: Vec<String> = {
        let mut v: Vec<String> = std::fs::read_dir(&session)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert!(local.iter().any(|f| f.ends_with(".mcap")), "{local:?}");
    assert!(local.contains(&"metadata.yaml".to_owned()), "{local:?}");

    let o = upload(&cfg, &session);
    assert!(o.status.success(), "edgerec upload: {}", text(&o));
    let summary = String::from_utf8_lossy(&o.stdout).into_owned();
    println!("{}", summary.trim());
    assert!(
        summary.starts_with(&format!("{} sent", local.len())),
        "{summary}"
    );

    // boto3 reads every file back, byte for byte, under the template.
    let v = server.verify("fleet-recordings", "robot-7/", &session);
    let objects = v.as_object().unwrap();
    assert_eq!(objects.len(), local.len(), "{v:#}");
    let date = edgerec_offload::key::date_from_session(&name).unwrap();
    for f in &local {
        let key = format!("robot-7/{date}/{name}/{f}");
        assert_eq!(v[&key]["equal"], true, "{key}: {v:#}");
    }

    // Again: nothing to send, nothing deleted.
    let o = upload(&cfg, &session);
    assert!(o.status.success(), "edgerec upload: {}", text(&o));
    let again = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        again.starts_with("0 sent (0.0 MB")
            && again.contains(&format!("{} already there", local.len())),
        "{again}"
    );
    assert_eq!(std::fs::read_dir(&session).unwrap().count(), local.len());

    // A credentials file others can read: exit 78, the fix named.
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = upload(&cfg, &session);
    assert_eq!(o.status.code(), Some(78), "{}", text(&o));
    assert!(text(&o).contains("chmod 600"), "{}", text(&o));
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o600)).unwrap();

    // A bucket that does not exist: exit 1, the fix named.
    config(&cfg, &root, &server.endpoint, "no-such-bucket", &creds);
    let o = upload(&cfg, &session);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("NoSuchBucket") && text(&o).contains("offload.bucket"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read_dir(&session).unwrap().count(), local.len());
}
