//! The control socket: one command line in, one JSON line out, on a Unix
//! socket of mode 0660 whose group the configuration names, so operators
//! in that group (and root) can pause, resume and split a running
//! recorder with `edgerec ctl`. What a line means is the caller's handler:
//! this file only serves it. Nothing on the socket runs a shell; a line is
//! at most [`MAX_LINE`] bytes and a client that sends nothing for a second
//! is dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::status::{bind_unix, ServeError};

/// Longest command line accepted.
pub const MAX_LINE: usize = 4096;

/// Answers one command line, from the peer that sent it, with one line
/// of JSON.
pub type CtlHandler = Arc<dyn Fn(&str, &Peer) -> String + Send + Sync>;

/// The process at the other end of a connection, as the kernel saw it
/// when it connected (`SO_PEERCRED`): it cannot say otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Its process id.
    pub pid: u32,
    /// Its user id.
    pub uid: u32,
    /// Its group id.
    pub gid: u32,
}

impl Peer {
    /// The credentials of `s`'s peer.
    pub fn of(s: &UnixStream) -> std::io::Result<Peer> {
        use std::os::fd::AsRawFd;
        let mut cred = libc::ucred {
            pid: 0,
            uid: 0,
            gid: 0,
        };
        let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
        // SAFETY: `cred` is a writable ucred and `len` its size, as
        // SO_PEERCRED on a connected Unix socket requires; the fd is open
        // for the call (borrowed from `s`).
        let rc = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERCRED,
                (&mut cred as *mut libc::ucred).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Peer {
            pid: cred.pid.max(0) as u32,
            uid: cred.uid,
            gid: cred.gid,
        })
    }
}

/// The serving thread; stopped and its socket removed on drop.
pub struct CtlServer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
}

/// Who may use the socket besides its owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// The socket's group (gid), `None` to keep the process's.
    pub gid: Option<u32>,
}

impl CtlServer {
    /// Serves `handler` on `path` with mode 0660 and `access`'s group. A
    /// stale socket left by a crash is replaced; a live one is an error.
    pub fn unix(path: &Path, access: Access, handler: CtlHandler) -> Result<CtlServer, ServeError> {
        let io_err = |source| ServeError::Io {
            what: path.display().to_string(),
            source,
        };
        let listener = bind_unix(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660)).map_err(io_err)?;
        if let Some(gid) = access.gid {
            std::os::unix::fs::chown(path, None, Some(gid)).map_err(io_err)?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("edgerec-ctl".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if flag.load(Ordering::Acquire) {
                        break;
                    }
                    if let Ok(s) = conn {
                        serve_one(s, &handler);
                    }
                }
            })
            .map_err(io_err)?;
        Ok(CtlServer {
            stop,
            thread: Some(thread),
            path: path.to_path_buf(),
        })
    }
}

fn serve_one(mut s: UnixStream, handler: &CtlHandler) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
    let peer = match Peer::of(&s) {
        Ok(p) => p,
        Err(e) => {
            let reply = format!(
                "{{\"ok\":false,\"error\":{}}}\n",
                json_string(&format!("cannot tell who is asking (SO_PEERCRED): {e}"))
            );
            let _ = s.write_all(reply.as_bytes());
            return;
        }
    };
    let mut line = String::new();
    let read = match s.try_clone() {
        Ok(r) => BufReader::new(r.take(MAX_LINE as u64 + 1)).read_line(&mut line),
        Err(e) => Err(e),
    };
    let reply = match read {
        Ok(_) if line.len() > MAX_LINE => {
            format!("{{\"ok\":false,\"error\":\"a command is at most {MAX_LINE} bytes\"}}")
        }
        Ok(_) => handler(line.trim_end_matches(['\n', '\r']), &peer),
        Err(e) => format!("{{\"ok\":false,\"error\":{}}}", json_string(&e.to_string())),
    };
    let _ = s
        .write_all(reply.as_bytes())
        .and_then(|_| s.write_all(b"\n"));
}

/// `s` as a JSON string literal.
pub fn json_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

impl Drop for CtlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        drop(UnixStream::connect(&self.path));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Sends one command line to the socket at `path` and returns the reply
/// line (what `edgerec ctl` does).
pub fn send(path: &Path, line: &str, timeout: Duration) -> std::io::Result<String> {
    let mut s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    // The server answers a line that is too long before reading all of
    // it: its reply still counts when the rest could not be written.
    let wrote = s
        .write_all(line.as_bytes())
        .and_then(|_| s.write_all(b"\n"));
    let mut reply = String::new();
    match BufReader::new(s).read_line(&mut reply) {
        Ok(n) if n > 0 => Ok(reply.trim_end().to_owned()),
        Ok(_) => Err(wrote
            .err()
            .unwrap_or_else(|| std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "no reply"))),
        Err(e) => Err(wrote.err().unwrap_or(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_in_a_line_out_with_mode_0660() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctl.sock");
        let h: CtlHandler = Arc::new(|l: &str, p: &Peer| {
            format!(
                "{{\"ok\":true,\"got\":{},\"uid\":{},\"pid\":{}}}",
                json_string(l),
                p.uid,
                p.pid
            )
        });
        let server = CtlServer::unix(&path, Access { gid: None }, h).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o660);
        let r = send(&path, "pause", Duration::from_secs(2)).unwrap();
        // The peer is this process, as the kernel says.
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        assert_eq!(
            r,
            format!(
                "{{\"ok\":true,\"got\":\"pause\",\"uid\":{uid},\"pid\":{}}}",
                std::process::id()
            )
        );
        let long = "x".repeat(MAX_LINE + 10);
        let r = send(&path, &long, Duration::from_secs(2)).unwrap();
        assert!(r.contains("at most"), "{r}");
        // A second server on a live socket is refused.
        let h2: CtlHandler = Arc::new(|_, _| String::new());
        assert!(matches!(
            CtlServer::unix(&path, Access { gid: None }, h2),
            Err(ServeError::InUse { .. })
        ));
        drop(server);
        assert!(!path.exists());
    }
}
