//! A real MQTT broker for the fleet-link tests: Debian's `mosquitto` on a
//! free loopback port, TLS only, every client showing a certificate the
//! run's CA signed (`tests/py/mqttpeer.py certs`), its certificate's CN as
//! its user name, and an ACL that keeps each vehicle to `edgerec/<CN>/#`
//! while the fleet (CN `fleet`) may use every `edgerec/` topic. Persistence
//! on, so a restarted broker keeps sessions and retained messages. And the
//! fleet's client, `mqttpeer.py watch` and `publish` (PyPI paho-mqtt).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

fn mqttpeer() -> PathBuf {
    crate::workspace_root().join("tests/py/mqttpeer.py")
}

fn python() -> PathBuf {
    crate::python().expect(".venv/bin/python with paho-mqtt (scripts/test sets it up)")
}

/// The broker's program: Debian puts it in /usr/sbin.
pub fn mosquitto() -> Option<PathBuf> {
    ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// Mosquitto, running until dropped.
pub struct Broker {
    child: Option<Child>,
    /// Its loopback port.
    pub port: u16,
    /// The certificates (`ca.pem`, `vehicle.pem`/`.key`, `fleet.pem`/`.key`,
    /// `other.pem`/`.key`, `stranger/client.pem`/`.key`).
    pub tls: PathBuf,
    conf: PathBuf,
    log: PathBuf,
}

impl Broker {
    /// Makes the certificates (the vehicle's CN `vehicle`) and the
    /// configuration in `dir`, starts the broker and waits until it
    /// accepts connections.
    pub fn start(dir: &Path, vehicle: &str) -> Broker {
        let tls = dir.join("tls");
        let st = Command::new(python())
            .arg(mqttpeer())
            .args(["certs", "--vehicle", vehicle])
            .arg(&tls)
            .status()
            .expect("mqttpeer.py certs");
        assert!(st.success(), "mqttpeer.py certs failed");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let st = Command::new(python())
            .arg(mqttpeer())
            .arg("broker-config")
            .arg(dir)
            .args(["--port", &port.to_string(), "--persist", "--tls"])
            .arg(&tls)
            .status()
            .expect("mqttpeer.py broker-config");
        assert!(st.success(), "mqttpeer.py broker-config failed");
        let (conf, log) = (dir.join("mosquitto.conf"), dir.join("mosquitto.log"));
        let mut b = Broker {
            child: None,
            port,
            tls,
            conf,
            log,
        };
        b.launch();
        b
    }

    fn launch(&mut self) {
        let bin = mosquitto().expect("mosquitto (Debian's package; scripts/test installs it)");
        let child = Command::new(bin)
            .arg("-c")
            .arg(&self.conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting mosquitto");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "mosquitto did not listen on {}: {}",
                self.port,
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the broker at once (SIGKILL: what it had not saved is lost,
    /// as in a crash); [`start_again`](Self::start_again) brings it back.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the broker again on the same port with the same state.
    pub fn start_again(&mut self) {
        self.kill();
        self.launch();
    }

    /// The broker's log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Watches `topic` as the fleet (`as_` names another certificate of
    /// [`tls`](Self::tls): `fleet`, `vehicle`, `other`), until dropped.
    /// Returns once the broker granted the subscription (or refused it:
    /// then the first line says so).
    pub fn watch(&self, topic: &str, as_: &str) -> Watch {
        let mut child = Command::new(python())
            .arg(mqttpeer())
            .args(["watch", "--port", &self.port.to_string(), "--tls"])
            .arg(&self.tls)
            .args(["--as", as_, "--timeout", "600", topic])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("mqttpeer.py watch");
        let stdout = child.stdout.take().expect("its stdout");
        let rx = lines(stdout);
        let mut w = Watch {
            child,
            rx,
            first: None,
        };
        match w.rx.recv_timeout(Duration::from_secs(20)) {
            Ok(v) if v.get("subscribed").is_some() => {}
            Ok(v) => w.first = Some(v),
            Err(_) => panic!("mqttpeer.py watch {topic}: no subscription within 20 s"),
        }
        w
    }

    /// Publishes `payload` on `topic` (QoS 1) as `as_`; whether the broker
    /// took it.
    pub fn publish(&self, topic: &str, payload: &str, as_: &str) -> bool {
        Command::new(python())
            .arg(mqttpeer())
            .args(["publish", "--port", &self.port.to_string(), "--tls"])
            .arg(&self.tls)
            .args(["--as", as_, "--timeout", "20", topic, payload])
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill();
    }
}

fn lines(stdout: ChildStdout) -> Receiver<serde_json::Value> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let v = serde_json::from_str(&line).unwrap_or(serde_json::Value::String(line));
            if tx.send(v).is_err() {
                break;
            }
        }
    });
    rx
}

/// The fleet's subscription: one JSON value per message
/// (`{"topic", "payload", "retain"}`).
pub struct Watch {
    child: Child,
    rx: Receiver<serde_json::Value>,
    first: Option<serde_json::Value>,
}

impl Watch {
    /// The next message within `limit`.
    pub fn next(&mut self, limit: Duration) -> Option<serde_json::Value> {
        if let Some(v) = self.first.take() {
            return Some(v);
        }
        self.rx.recv_timeout(limit).ok()
    }

    /// The first message within `limit` for which `pick` says yes, its
    /// payload parsed as JSON; the others are passed over.
    pub fn until(
        &mut self,
        limit: Duration,
        mut pick: impl FnMut(&str, &serde_json::Value) -> bool,
    ) -> Option<serde_json::Value> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let m = self.next(left)?;
            let topic = m["topic"].as_str().unwrap_or_default().to_owned();
            let payload: serde_json::Value = m["payload"]
                .as_str()
                .and_then(|p| serde_json::from_str(p).ok())
                .unwrap_or(serde_json::Value::Null);
            if pick(&topic, &payload) {
                let mut out = payload;
                if let Some(o) = out.as_object_mut() {
                    o.insert("_retain".into(), m["retain"].clone());
                }
                return Some(out);
            }
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
