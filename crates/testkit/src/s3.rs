//! A real S3 server for the offload tests: PyPI moto[server] on a free
//! loopback port (`tests/py/s3peer.py serve`), stopped on drop, and
//! `s3peer.py`'s boto3 commands (`mkbucket`, `verify`) against it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// moto's S3 server, running until dropped.
pub struct Moto {
    child: Child,
    /// `http://127.0.0.1:PORT` (`https://` with TLS).
    pub endpoint: String,
    /// With TLS: the directory of `ca.pem` (the CA made for this server),
    /// `client.pem` and `client.key` (the client certificate it signed).
    pub tls: Option<PathBuf>,
    /// The access key and secret the server takes (moto takes any;
    /// s3rver only its own).
    pub keys: (&'static str, &'static str),
    /// The network namespace it runs in (and the boto3 commands), if not
    /// the test's own.
    pub netns: Option<String>,
}

fn s3peer() -> PathBuf {
    crate::workspace_root().join("tests/py/s3peer.py")
}

fn python() -> PathBuf {
    crate::python().expect(".venv/bin/python with moto and boto3 (scripts/test sets it up)")
}

impl Moto {
    /// Starts the server and waits until it answers.
    pub fn start() -> Moto {
        Moto::start_with(None, false)
    }

    /// Starts the server on HTTPS with a CA, a server certificate and a
    /// client certificate made for it in `dir`; with `mutual` it refuses
    /// a client that does not show the client certificate.
    pub fn start_tls(dir: &std::path::Path, mutual: bool) -> Moto {
        Moto::start_with(Some(dir.to_path_buf()), mutual)
    }

    fn start_with(tls: Option<PathBuf>, mutual: bool) -> Moto {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let mut cmd = Command::new(python());
        cmd.arg(s3peer())
            .args(["serve", "--port", &port.to_string()]);
        if let Some(dir) = &tls {
            cmd.arg("--tls").arg(dir);
            if mutual {
                cmd.arg("--mutual");
            }
        }
        cmd.stdout(Stdio::piped()).stderr(Stdio::null());
        let child = spawn_ready(&mut cmd, "moto");
        let scheme = if tls.is_some() { "https" } else { "http" };
        Moto {
            child,
            endpoint: format!("{scheme}://127.0.0.1:{port}"),
            tls,
            keys: ("edgerec-test", "edgerec-test-secret"),
            netns: None,
        }
    }

    /// moto over plain HTTP in the network namespace `netns` on `host`
    /// (an address of one of its interfaces), port 9000; `peer`'s boto3
    /// commands run there too.
    pub fn start_in(netns: &str, host: &str) -> Moto {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", netns])
            .arg(python())
            .arg(s3peer())
            .args(["serve", "--host", host, "--port", "9000"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let child = spawn_ready(&mut cmd, "moto in a network namespace");
        Moto {
            child,
            endpoint: format!("http://{host}:9000"),
            tls: None,
            keys: ("edgerec-test", "edgerec-test-secret"),
            netns: Some(netns.to_owned()),
        }
    }

    /// s3rver 3.7.1 (npm, tests/js) instead of moto: an S3-compatible
    /// server that stores objects under `dir`, writes its XML without
    /// S3's namespace and gives a multipart object the MD5 of its bytes
    /// as its ETag; `bucket` exists from the start.
    pub fn start_s3rver(dir: &std::path::Path, bucket: &str) -> Moto {
        let bin = crate::workspace_root().join("tests/js/node_modules/.bin/s3rver");
        assert!(
            bin.exists(),
            "{}: missing (npm ci in tests/js; scripts/test's setup does it)",
            bin.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let child = Command::new(bin)
            .arg("-d")
            .arg(dir)
            .args(["-a", "127.0.0.1", "-p", &port.to_string(), "--silent"])
            .args(["--configure-bucket", bucket])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("s3rver");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "s3rver did not listen within 30 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Moto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            tls: None,
            keys: ("S3RVER", "S3RVER"),
            netns: None,
        }
    }

    /// Runs `s3peer.py ARGS` (boto3, this server's endpoint given by the
    /// caller) and returns what it printed; panics with its error
    /// otherwise.
    pub fn peer(&self, args: &[&str]) -> String {
        let mut cmd = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(python());
                c
            }
            None => Command::new(python()),
        };
        cmd.arg(s3peer()).args(args);
        if let Some(dir) = &self.tls {
            cmd.env("S3PEER_TLS_DIR", dir);
        }
        cmd.env("S3PEER_KEY", self.keys.0)
            .env("S3PEER_SECRET", self.keys.1);
        let o = cmd.output().expect("s3peer.py");
        assert!(
            o.status.success(),
            "s3peer {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Creates `bucket`.
    pub fn make_bucket(&self, bucket: &str) {
        self.peer(&["mkbucket", "--endpoint", &self.endpoint, "--bucket", bucket]);
    }

    /// boto3's view of every object under `prefix`, each compared with the
    /// file of the same name in `dir`: `{key: {size, sha256,
    /// local_sha256, equal, meta_sha256}}`.
    pub fn verify(&self, bucket: &str, prefix: &str, dir: &std::path::Path) -> serde_json::Value {
        let out = self.peer(&[
            "verify",
            "--endpoint",
            &self.endpoint,
            "--bucket",
            bucket,
            "--prefix",
            prefix,
            "--dir",
            &dir.to_string_lossy(),
        ]);
        serde_json::from_str(&out).expect("s3peer verify prints JSON")
    }
}

impl Moto {
    /// An owner-only AWS shared-credentials file in `dir` with the keys
    /// this server takes (`[default]`).
    pub fn credentials_file(&self, dir: &std::path::Path) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let creds = dir.join("offload-credentials");
        std::fs::write(
            &creds,
            format!(
                "[default]\naws_access_key_id = {}\naws_secret_access_key = {}\n",
                self.keys.0, self.keys.1
            ),
        )
        .expect("write the credentials file");
        std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o600))
            .expect("chmod 600 the credentials file");
        creds
    }

    /// The bytes of `key`, as text (boto3's `get_object`).
    pub fn get(&self, bucket: &str, key: &str) -> String {
        self.peer(&[
            "get",
            "--endpoint",
            &self.endpoint,
            "--bucket",
            bucket,
            "--key",
            key,
        ])
    }
}

/// Spawns `cmd` (stdout piped) and waits for the `ready` line it prints
/// once it serves; panics naming `what` when it does not.
fn spawn_ready(cmd: &mut Command, what: &str) -> Child {
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    assert_eq!(line.trim(), "ready", "{what} did not start");
    child
}

impl Drop for Moto {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// `s3peer.py proxy`: an HTTP proxy in front of a plain-HTTP [`Moto`] that
/// injects one fault (`reset`, `slowdown`, `down`), running until dropped.
pub struct FaultProxy {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    log: PathBuf,
}

impl FaultProxy {
    /// Starts the proxy to `upstream` with `fault`; `down_seconds` is the
    /// length of a `down` fault's outage.
    pub fn start(upstream: &Moto, fault: &str, down_seconds: f64) -> FaultProxy {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let log = std::env::temp_dir().join(format!(
            "edgerec-fault-proxy-{}-{port}.jsonl",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&log);
        let mut cmd = Command::new(python());
        cmd.arg(s3peer())
            .args(["proxy", "--port", &port.to_string(), "--upstream"])
            .arg(&upstream.endpoint)
            .args([
                "--fault",
                fault,
                "--down-seconds",
                &down_seconds.to_string(),
            ])
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let child = spawn_ready(&mut cmd, "the fault proxy");
        FaultProxy {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            log,
        }
    }

    /// Every request it saw: `{"method", "part", "status"}`.
    pub fn log(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}
