//! A native client of ptp4l's management interface: the PTP management
//! messages linuxptp's `pmc -u -b 0` sends, over ptp4l's Unix datagram
//! socket (`uds_address`, default `/var/run/ptp4l`), without running pmc.
//!
//! Like pmc, the client binds its own socket (ptp4l answers to the sender's
//! address): next to ptp4l's socket where that directory is writable (so
//! that a ptp4l with its own /tmp, e.g. systemd PrivateTmp, can answer),
//! else in the temporary directory. The file is removed on drop.

mod wire;

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::ClockError;
pub use wire::{
    ClockIdentity, CurrentDataSet, DefaultDataSet, ManagementId, ParentDataSet, PortDataSet,
    PortIdentity, PortState, TimeStatusNp,
};
use wire::{Reply, ReplyBody};

/// ptp4l's default `uds_address`.
pub const DEFAULT_PTP4L_SOCKET: &str = "/var/run/ptp4l";

/// How long a request waits for its answer unless [`PmcClient::set_timeout`]
/// says otherwise. ptp4l answers from its main loop within microseconds.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);

/// The largest management message ptp4l sends (its message buffer).
const MAX_MESSAGE: usize = 1500;

/// What ptp4l says about its synchronisation, from one round of GETs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ptp4lStatus {
    /// The state of the port that follows the master (the first port in
    /// SLAVE, else UNCALIBRATED, else the first port).
    pub port_state: PortState,
    /// That port's identity, as pmc prints it (`xxxxxx.xxxx.xxxxxx-1`).
    pub port_identity: String,
    /// TIME_STATUS_NP master_offset: this clock minus its master, ns.
    pub master_offset_ns: i64,
    /// TIME_STATUS_NP ingress_time of the last sync, ns.
    pub ingress_time_ns: i64,
    /// CURRENT_DATA_SET offsetFromMaster, ns (the same measurement as
    /// `master_offset_ns`, in TimeInterval resolution).
    pub offset_from_master_ns: f64,
    /// CURRENT_DATA_SET meanPathDelay, ns.
    pub mean_path_delay_ns: f64,
    /// TIME_STATUS_NP gmPresent: a grandmaster other than this clock is known.
    pub gm_present: bool,
    /// TIME_STATUS_NP gmIdentity, as pmc prints it (`xxxxxx.xxxx.xxxxxx`).
    pub gm_identity: String,
    /// PARENT_DATA_SET parentPortIdentity.
    pub parent_port_identity: String,
    /// DEFAULT_DATA_SET clockIdentity: this ptp4l's own clock.
    pub clock_identity: String,
    /// CURRENT_DATA_SET stepsRemoved.
    pub steps_removed: u16,
    /// DEFAULT_DATA_SET domainNumber.
    pub domain: u8,
}

/// A management client bound to its own socket, talking to one ptp4l.
#[derive(Debug)]
pub struct PmcClient {
    socket: UnixDatagram,
    local: PathBuf,
    server: PathBuf,
    domain: u8,
    sequence_id: u16,
    port_number: u16,
    timeout: Duration,
}

/// Tells client sockets of one process apart.
static CLIENTS: AtomicU32 = AtomicU32::new(0);

impl PmcClient {
    /// Binds a client socket for ptp4l at `server` (its `uds_address`) in
    /// PTP domain `domain` (ptp4l's `domainNumber`, 0 by default). Fails
    /// with [`ClockError::Ptp4lSocketMissing`] when `server` does not exist.
    pub fn open(server: &Path, domain: u8) -> Result<PmcClient, ClockError> {
        if !server.exists() {
            return Err(ClockError::Ptp4lSocketMissing {
                path: server.to_path_buf(),
            });
        }
        let pid = std::process::id();
        let name = format!(
            "edgerec-pmc.{pid}.{}",
            CLIENTS.fetch_add(1, Ordering::Relaxed)
        );
        let mut dirs = Vec::with_capacity(3);
        // Where ptp4l can answer: systemd's RuntimeDirectory= of the
        // service (its first, in $RUNTIME_DIRECTORY), which an unprivileged
        // recorder may write and which is outside its PrivateTmp (ptp4l
        // resolves the reply's path in its own mount namespace); else
        // beside ptp4l's socket (root's /var/run); else the temporary
        // directory.
        if let Some(run) = std::env::var_os("RUNTIME_DIRECTORY") {
            if let Some(first) = std::env::split_paths(&run).next() {
                if first.is_absolute() {
                    dirs.push(first);
                }
            }
        }
        if let Some(dir) = server.parent().filter(|d| !d.as_os_str().is_empty()) {
            dirs.push(dir.to_path_buf());
        }
        dirs.push(std::env::temp_dir());
        let mut last = None;
        for dir in dirs {
            let local = dir.join(&name);
            // A file of this name is left by an earlier process with our pid.
            let _ = std::fs::remove_file(&local);
            match UnixDatagram::bind(&local) {
                Ok(socket) => {
                    return Ok(PmcClient {
                        socket,
                        local,
                        server: server.to_path_buf(),
                        domain,
                        sequence_id: 0,
                        // pmc puts its pid here; the low 16 bits tell
                        // clients apart in ptp4l's debug log too.
                        port_number: pid as u16,
                        timeout: DEFAULT_TIMEOUT,
                    });
                }
                Err(source) => {
                    last = Some(ClockError::ClientSocket {
                        path: local,
                        source,
                    })
                }
            }
        }
        Err(last.unwrap_or_else(|| ClockError::ClientSocket {
            path: PathBuf::from(name),
            source: io::Error::other("no directory to bind in"),
        }))
    }

    /// Sets how long each request waits for its answer.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout.max(Duration::from_millis(1));
    }

    /// ptp4l's socket.
    pub fn server_path(&self) -> &Path {
        &self.server
    }

    /// The client's own socket.
    pub fn local_path(&self) -> &Path {
        &self.local
    }

    /// GET TIME_STATUS_NP.
    pub fn time_status(&mut self) -> Result<TimeStatusNp, ClockError> {
        self.get_one(ManagementId::TimeStatusNp, TimeStatusNp::parse)
    }

    /// GET CURRENT_DATA_SET.
    pub fn current_data_set(&mut self) -> Result<CurrentDataSet, ClockError> {
        self.get_one(ManagementId::CurrentDataSet, CurrentDataSet::parse)
    }

    /// GET PARENT_DATA_SET.
    pub fn parent_data_set(&mut self) -> Result<ParentDataSet, ClockError> {
        self.get_one(ManagementId::ParentDataSet, ParentDataSet::parse)
    }

    /// GET DEFAULT_DATA_SET.
    pub fn default_data_set(&mut self) -> Result<DefaultDataSet, ClockError> {
        self.get_one(ManagementId::DefaultDataSet, DefaultDataSet::parse)
    }

    /// GET PORT_DATA_SET: every port answers; this waits for `ports`
    /// answers (DEFAULT_DATA_SET's numberPorts) or the timeout, whichever
    /// comes first, and fails only if none came.
    pub fn port_data_sets(&mut self, ports: usize) -> Result<Vec<PortDataSet>, ClockError> {
        let id = ManagementId::PortDataSet;
        self.get(id, ports.max(1))?
            .iter()
            .map(|d| PortDataSet::parse(d).map_err(|e| self.malformed(e.0)))
            .collect()
    }

    /// One round of GETs (DEFAULT_DATA_SET, TIME_STATUS_NP, PORT_DATA_SET,
    /// PARENT_DATA_SET, CURRENT_DATA_SET) summarised.
    pub fn status(&mut self) -> Result<Ptp4lStatus, ClockError> {
        let default = self.default_data_set()?;
        let time = self.time_status()?;
        let ports = self.port_data_sets(usize::from(default.number_ports))?;
        let parent = self.parent_data_set()?;
        let current = self.current_data_set()?;
        let port = ports
            .iter()
            .find(|p| p.port_state == PortState::Slave)
            .or_else(|| {
                ports
                    .iter()
                    .find(|p| p.port_state == PortState::Uncalibrated)
            })
            .or(ports.first())
            .ok_or_else(|| self.malformed("no PORT_DATA_SET answer".into()))?;
        Ok(Ptp4lStatus {
            port_state: port.port_state,
            port_identity: port.port_identity.to_string(),
            master_offset_ns: time.master_offset_ns,
            ingress_time_ns: time.ingress_time_ns,
            offset_from_master_ns: current.offset_from_master_ns,
            mean_path_delay_ns: current.mean_path_delay_ns,
            gm_present: time.gm_present,
            gm_identity: time.gm_identity.to_string(),
            parent_port_identity: parent.parent_port_identity.to_string(),
            clock_identity: default.clock_identity.to_string(),
            steps_removed: current.steps_removed,
            domain: default.domain_number,
        })
    }

    fn get_one<T>(
        &mut self,
        id: ManagementId,
        parse: fn(&[u8]) -> Result<T, wire::DecodeError>,
    ) -> Result<T, ClockError> {
        let answers = self.get(id, 1)?;
        let data = answers
            .first()
            .ok_or_else(|| self.malformed(format!("no {id} answer")))?;
        parse(data).map_err(|e| self.malformed(e.0))
    }

    /// Sends GET `id` and collects the data of up to `want` answers.
    fn get(&mut self, id: ManagementId, want: usize) -> Result<Vec<Vec<u8>>, ClockError> {
        let seq = self.sequence_id;
        self.sequence_id = self.sequence_id.wrapping_add(1);
        let frame = wire::encode_get(self.domain, seq, self.port_number, id);
        self.send(&frame)?;

        let deadline = Instant::now() + self.timeout;
        let mut answers = Vec::new();
        let mut buf = [0u8; MAX_MESSAGE];
        while answers.len() < want {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let n = match self.recv(&mut buf, deadline - now)? {
                Some(n) => n,
                None => break,
            };
            let reply = match wire::decode(&buf[..n]) {
                Ok(Some(reply)) => reply,
                Ok(None) => continue,
                Err(e) => return Err(self.malformed(e.0)),
            };
            // Late answers to an earlier request that timed out are skipped.
            if reply.sequence_id != seq || reply.body.id() != id.code() {
                continue;
            }
            match reply {
                Reply {
                    body: ReplyBody::Data { data, .. },
                    ..
                } => answers.push(data.to_vec()),
                Reply {
                    body: ReplyBody::Error { error, display, .. },
                    ..
                } => {
                    return Err(ClockError::ManagementError {
                        path: self.server.clone(),
                        what: id.name(),
                        error: wire::error_name(error),
                        display: if display.is_empty() {
                            String::new()
                        } else {
                            format!(": {display}")
                        },
                    })
                }
            }
        }
        if answers.is_empty() {
            return Err(ClockError::Ptp4lTimeout {
                path: self.server.clone(),
                what: id.name(),
                timeout_ms: self.timeout.as_millis() as u64,
                domain: self.domain,
            });
        }
        Ok(answers)
    }

    fn send(&self, frame: &[u8]) -> Result<(), ClockError> {
        let path = || self.server.clone();
        match self.socket.send_to(frame, &self.server) {
            Ok(_) => Ok(()),
            Err(e) => Err(match e.raw_os_error() {
                Some(libc::ENOENT) => ClockError::Ptp4lSocketMissing { path: path() },
                Some(libc::ECONNREFUSED) => ClockError::Ptp4lNotListening { path: path() },
                Some(libc::EACCES | libc::EPERM) => ClockError::Ptp4lPermission {
                    path: path(),
                    source: e,
                },
                _ => ClockError::Ptp4lIo {
                    path: path(),
                    source: e,
                },
            }),
        }
    }

    /// One datagram, or None when `wait` passes first.
    fn recv(&self, buf: &mut [u8], wait: Duration) -> Result<Option<usize>, ClockError> {
        let io_err = |source| ClockError::Ptp4lIo {
            path: self.server.clone(),
            source,
        };
        self.socket
            .set_read_timeout(Some(wait.max(Duration::from_micros(100))))
            .map_err(io_err)?;
        loop {
            match self.socket.recv(buf) {
                Ok(n) => return Ok(Some(n)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(None)
                }
                Err(e) => return Err(io_err(e)),
            }
        }
    }

    fn malformed(&self, reason: String) -> ClockError {
        ClockError::Malformed {
            path: self.server.clone(),
            reason,
        }
    }
}

impl Drop for PmcClient {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.local);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_socket_names_the_path_and_the_cause() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ptp4l");
        let err = PmcClient::open(&path, 0).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ClockError::Ptp4lSocketMissing { .. }));
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        assert!(
            msg.contains("ptp4l is not running") && msg.contains("uds_address"),
            "{msg}"
        );
    }

    #[test]
    fn a_stale_socket_file_says_nobody_listens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ptp4l");
        drop(UnixDatagram::bind(&path).unwrap()); // the file stays, nobody listens
        let mut client = PmcClient::open(&path, 0).unwrap();
        let err = client.time_status().unwrap_err();
        assert!(matches!(err, ClockError::Ptp4lNotListening { .. }), "{err}");
        let local = client.local_path().to_path_buf();
        assert_eq!(local.parent(), Some(dir.path()), "binds next to the server");
        drop(client);
        assert!(!local.exists(), "client socket removed on drop");
    }

    /// A fake ptp4l on a thread: answers `requests` GETs with what `answer`
    /// makes of each, then ends, returning how many it served.
    fn fake_ptp4l(
        dir: &Path,
        requests: usize,
        answer: impl Fn(&[u8]) -> Vec<Vec<u8>> + Send + 'static,
    ) -> (PathBuf, std::thread::JoinHandle<usize>) {
        let path = dir.join("fake-ptp4l");
        let server = UnixDatagram::bind(&path).unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let handle = std::thread::spawn(move || {
            let mut served = 0;
            let mut buf = [0u8; 1500];
            while served < requests {
                let Ok((n, from)) = server.recv_from(&mut buf) else {
                    break;
                };
                let Some(from) = from.as_pathname() else {
                    break;
                };
                for reply in answer(&buf[..n]) {
                    server.send_to(&reply, from).unwrap();
                }
                served += 1;
            }
            served
        });
        (path, handle)
    }

    /// Turns a request into a RESPONSE carrying `data` (or an error).
    fn respond(req: &[u8], port: u16, seq_delta: u16, data: Option<&[u8]>) -> Vec<u8> {
        let mut m = req[..48].to_vec();
        m[20..28].copy_from_slice(&[1, 2, 3, 0xFF, 0xFE, 4, 5, 6]);
        m[28..30].copy_from_slice(&port.to_be_bytes());
        let seq = u16::from_be_bytes([req[30], req[31]]).wrapping_add(seq_delta);
        m[30..32].copy_from_slice(&seq.to_be_bytes());
        m[34..44].copy_from_slice(&req[20..30]);
        m[46] = 2;
        let id = [req[52], req[53]];
        match data {
            Some(d) => {
                m.extend_from_slice(&[0, 1]);
                m.extend_from_slice(&((d.len() + 2) as u16).to_be_bytes());
                m.extend_from_slice(&id);
                m.extend_from_slice(d);
            }
            None => {
                m.extend_from_slice(&[0, 2, 0, 8, 0, 6]);
                m.extend_from_slice(&id);
                m.extend_from_slice(&[0; 4]);
            }
        }
        let len = m.len() as u16;
        m[2..4].copy_from_slice(&len.to_be_bytes());
        m
    }

    #[test]
    fn talks_to_a_fake_ptp4l() {
        let dir = tempfile::tempdir().unwrap();
        let (path, server) = fake_ptp4l(dir.path(), 5, |req| {
            let id = u16::from_be_bytes([req[52], req[53]]);
            let mut data = vec![0u8; 50];
            match id {
                0x2000 => {
                    data.truncate(20);
                    data[3] = 2; // numberPorts
                    data[10..18].copy_from_slice(&[1, 2, 3, 0xFF, 0xFE, 4, 5, 6]);
                }
                0xC000 => {
                    data[0..8].copy_from_slice(&(-42i64).to_be_bytes());
                    data[41] = 1;
                    data[42..50].copy_from_slice(&[9, 9, 9, 0xFF, 0xFE, 9, 9, 9]);
                }
                0x2001 => {
                    data.truncate(18);
                    data[1] = 1;
                    data[10..18].copy_from_slice(&((1500i64) << 16).to_be_bytes());
                }
                0x2002 => data.truncate(32),
                0x2004 => {
                    // Two ports: 1 MASTER, 2 SLAVE.
                    let mut p1 = vec![0u8; 26];
                    p1[9] = 1;
                    p1[10] = 6;
                    let mut p2 = p1.clone();
                    p2[9] = 2;
                    p2[10] = 9;
                    let stale = respond(req, 1, 0xFFFF, Some(&p1));
                    return vec![
                        stale,
                        respond(req, 1, 0, Some(&p1)),
                        respond(req, 2, 0, Some(&p2)),
                    ];
                }
                _ => return vec![respond(req, 0, 0, None)],
            }
            // A stale answer first (sequenceId - 1), then the real one.
            vec![
                respond(req, 0, 0xFFFF, Some(&data)),
                respond(req, 0, 0, Some(&data)),
            ]
        });
        let mut client = PmcClient::open(&path, 0).unwrap();
        client.set_timeout(Duration::from_secs(2));
        let status = client.status().unwrap();
        assert_eq!(status.port_state, PortState::Slave, "the SLAVE port of two");
        assert_eq!(status.port_identity, "000000.0000.000000-2");
        assert_eq!(status.master_offset_ns, -42);
        assert!(status.gm_present);
        assert_eq!(status.gm_identity, "090909.fffe.090909");
        assert_eq!(status.clock_identity, "010203.fffe.040506");
        assert_eq!(status.mean_path_delay_ns, 1500.0);
        assert_eq!(status.steps_removed, 1);
        drop(client);
        assert_eq!(server.join().unwrap(), 5);
    }

    #[test]
    fn error_status_and_timeouts_are_typed() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _server) = fake_ptp4l(dir.path(), 2, |req| {
            if u16::from_be_bytes([req[52], req[53]]) == 0xC000 {
                vec![respond(req, 0, 0, None)]
            } else {
                vec![] // never answers
            }
        });
        let mut client = PmcClient::open(&path, 3).unwrap();
        client.set_timeout(Duration::from_millis(100));
        let err = client.time_status().unwrap_err();
        assert!(
            err.to_string()
                .contains("refused GET TIME_STATUS_NP: NOT_SUPPORTED"),
            "{err}"
        );
        let err = client.current_data_set().unwrap_err();
        assert!(
            matches!(err, ClockError::Ptp4lTimeout { domain: 3, .. }),
            "{err}"
        );
        assert!(
            err.to_string().contains("domainNumber differs from 3"),
            "{err}"
        );
    }
}
