//! The control socket: one command line in, one JSON line out, on a Unix
//! socket, so operators can pause, resume and split a running recorder
//! with `edgerec ctl`. Each request comes with who sent it as the kernel
//! saw it connect (`SO_PEERCRED`, `SO_PEERGROUPS`): what a line means, and
//! whether that peer may ask it, is the caller's handler; this file only
//! serves it. Nothing on the socket runs a shell. A line is at most
//! [`MAX_LINE`] bytes and must arrive whole within [`REQUEST_DEADLINE`]
//! of the connection (a deadline for the request, not for each read, so a
//! client that sends a byte a second holds nothing); each client is served
//! on a thread of its own, at most [`MAX_CLIENTS`] at once; one more waits
//! [`SLOT_WAIT`] for a slot, then is told the socket is busy.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::status::{bind_unix, ServeError};

/// Longest command line accepted.
pub const MAX_LINE: usize = 4096;

/// How long a client has, from its connection, to send its whole line.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(1);

/// Clients served at once; one more waits up to [`SLOT_WAIT`] for one of
/// them to end, then is answered "busy" and let go.
pub const MAX_CLIENTS: usize = 16;

/// How long a client past [`MAX_CLIENTS`] waits for a slot: a burst of
/// quick commands frees one within milliseconds; clients that hold theirs
/// hold it until their deadline.
pub const SLOT_WAIT: Duration = Duration::from_millis(250);

/// The clients being served, at most [`MAX_CLIENTS`].
#[derive(Default)]
struct Slots {
    used: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

impl Slots {
    /// Takes a slot, waiting up to `wait` for one; false when none freed.
    fn take(&self, wait: Duration) -> bool {
        let used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let (mut used, _) = self
            .freed
            .wait_timeout_while(used, wait, |u| *u >= MAX_CLIENTS)
            .unwrap_or_else(|e| e.into_inner());
        if *used >= MAX_CLIENTS {
            return false;
        }
        *used += 1;
        true
    }

    /// Gives a slot back.
    fn give_back(&self) {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        *used = used.saturating_sub(1);
        self.freed.notify_one();
    }
}

/// Most supplementary groups read for a peer (Linux's `NGROUPS_MAX`).
const MAX_GROUPS: usize = 65_536;

/// Answers one command line, from the peer that sent it, with one line
/// of JSON.
pub type CtlHandler = Arc<dyn Fn(&str, &Peer) -> String + Send + Sync>;

/// The process at the other end of a connection, as the kernel saw it
/// when it connected (`SO_PEERCRED`, `SO_PEERGROUPS`): it cannot say
/// otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its process id.
    pub pid: u32,
    /// Its user id.
    pub uid: u32,
    /// Its group id.
    pub gid: u32,
    /// Its supplementary groups.
    pub groups: Vec<u32>,
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
            groups: match peer_groups(s) {
                Ok(g) => g,
                // A kernel before 4.13, or user-mode QEMU, which does not
                // pass SO_PEERGROUPS on: the groups the user database gives
                // the peer's user (what a login would give it).
                Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => {
                    listed_groups(cred.uid, cred.gid)
                }
                Err(e) => return Err(e),
            },
        })
    }

    /// Whether the peer is in group `gid` (its own group, or one of its
    /// supplementary ones).
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }
}

/// The groups the user database lists for user `uid` (primary group
/// `gid`); none when it has no entry for it.
fn listed_groups(uid: u32, gid: u32) -> Vec<u32> {
    let Some(name) = user_name(uid) else {
        return Vec::new();
    };
    let Ok(c) = std::ffi::CString::new(name) else {
        return Vec::new();
    };
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut n = groups.len() as libc::c_int;
        // SAFETY: `c` is a valid C string, `groups` holds `n` gids and
        // `n` is written back with the count found.
        let rc = unsafe { libc::getgrouplist(c.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
        let n = n.max(0) as usize;
        if rc >= 0 {
            groups.truncate(n);
            return groups;
        }
        if n <= groups.len() || n > MAX_GROUPS {
            return Vec::new();
        }
        groups.resize(n, 0);
    }
}

/// The user database's name for `uid`, if it has one.
pub fn user_name(uid: u32) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: an all-zero passwd is a valid value for getpwuid_r to fill.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: `pw` and `buf` are writable and outlive the call; `buf.len()`
    // is its size; `out` is set to `&pw` or null.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc != 0 || out.is_null() || pw.pw_name.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r set pw_name to a NUL-terminated string in `buf`.
    let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) };
    Some(name.to_string_lossy().into_owned())
}

/// The supplementary groups of `s`'s peer, as they were when it
/// connected (`SO_PEERGROUPS`, Linux 4.13 on).
fn peer_groups(s: &UnixStream) -> std::io::Result<Vec<u32>> {
    use std::os::fd::AsRawFd;
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut len = (groups.len() * std::mem::size_of::<libc::gid_t>()) as libc::socklen_t;
        // SAFETY: `groups` is a writable array of `len` bytes, as
        // SO_PEERGROUPS asks; the fd is open for the call.
        let rc = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let n = len as usize / std::mem::size_of::<libc::gid_t>();
        if rc == 0 {
            groups.truncate(n);
            return Ok(groups);
        }
        let e = std::io::Error::last_os_error();
        // Too small: the kernel said how large; bounded by NGROUPS_MAX.
        if e.raw_os_error() == Some(libc::ERANGE) && n > groups.len() && n <= MAX_GROUPS {
            groups.resize(n, 0);
            continue;
        }
        return Err(e);
    }
}

/// The serving thread; stopped and its socket removed on drop.
pub struct CtlServer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
}

/// Who may connect to the socket: its file's mode and group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// The socket's group (gid), `None` to keep the process's.
    pub gid: Option<u32>,
    /// The socket file's mode: 0660 lets only its owner and group
    /// connect; 0666 lets every local user connect, for a handler that
    /// decides by the peer.
    pub mode: u32,
}

impl CtlServer {
    /// Serves `handler` on `path` with `access`'s mode and group. A stale
    /// socket left by a crash is replaced; a live one is an error.
    pub fn unix(path: &Path, access: Access, handler: CtlHandler) -> Result<CtlServer, ServeError> {
        let io_err = |source| ServeError::Io {
            what: path.display().to_string(),
            source,
        };
        let listener = bind_unix(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(access.mode & 0o777))
            .map_err(io_err)?;
        if let Some(gid) = access.gid {
            std::os::unix::fs::chown(path, None, Some(gid)).map_err(io_err)?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("edgerec-ctl".into())
            .spawn(move || {
                let clients = Arc::new(Slots::default());
                for conn in listener.incoming() {
                    if flag.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(s) = conn else { continue };
                    if !clients.take(SLOT_WAIT) {
                        busy(s);
                        continue;
                    }
                    let (handler, held) = (handler.clone(), clients.clone());
                    let spawned = std::thread::Builder::new()
                        .name("edgerec-ctl-client".into())
                        .spawn(move || {
                            serve_one(s, &handler);
                            held.give_back();
                        });
                    if spawned.is_err() {
                        clients.give_back();
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

/// Tells a client past [`MAX_CLIENTS`] to come back, without waiting on it.
fn busy(mut s: UnixStream) {
    let _ = s.set_nonblocking(true);
    let _ = s.write_all(
        format!(
            "{{\"ok\":false,\"error\":\"busy: {MAX_CLIENTS} clients are being served; try again\"}}\n"
        )
        .as_bytes(),
    );
}

fn serve_one(mut s: UnixStream, handler: &CtlHandler) {
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let _ = s.set_write_timeout(Some(REQUEST_DEADLINE));
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
    let reply = match read_line(&mut s, deadline) {
        Ok(Some(line)) => handler(&line, &peer),
        Ok(None) => {
            format!("{{\"ok\":false,\"error\":\"a command is at most {MAX_LINE} bytes\"}}")
        }
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => format!(
            "{{\"ok\":false,\"error\":\"no whole command line within {} ms\"}}",
            REQUEST_DEADLINE.as_millis()
        ),
        Err(e) => format!("{{\"ok\":false,\"error\":{}}}", json_string(&e.to_string())),
    };
    let _ = s
        .write_all(reply.as_bytes())
        .and_then(|_| s.write_all(b"\n"));
}

/// One line from `s` (its end of line taken off) if it arrives whole
/// before `deadline`; `None` when it is longer than [`MAX_LINE`]; an
/// error of kind `TimedOut` when the deadline passes first. Each read
/// waits at most what is left of the deadline.
fn read_line(s: &mut UnixStream, deadline: Instant) -> std::io::Result<Option<String>> {
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ErrorKind::TimedOut.into());
        }
        s.set_read_timeout(Some(left))?;
        let n = match s.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let got = &chunk[..n];
        let end = got.iter().position(|&b| b == b'\n');
        buf.extend_from_slice(&got[..end.unwrap_or(n)]);
        if buf.len() > MAX_LINE {
            return Ok(None);
        }
        if end.is_some() || n == 0 {
            let line = String::from_utf8_lossy(&buf);
            return Ok(Some(line.trim_end_matches('\r').to_owned()));
        }
    }
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
        crate::status::remove_socket(&self.path);
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
        let server = CtlServer::unix(
            &path,
            Access {
                gid: None,
                mode: 0o660,
            },
            h,
        )
        .unwrap();
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
            CtlServer::unix(
                &path,
                Access {
                    gid: None,
                    mode: 0o660
                },
                h2
            ),
            Err(ServeError::InUse { .. })
        ));
        drop(server);
        assert!(!path.exists());
    }

    /// A client that sends a byte a second holds nothing: another client
    /// is answered at once, and the slow one gets the deadline's refusal
    /// after about [`REQUEST_DEADLINE`], not after its last byte.
    #[test]
    fn a_slow_client_holds_no_one_up_and_gets_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctl.sock");
        let h: CtlHandler = Arc::new(|l: &str, p: &Peer| {
            format!(
                "{{\"ok\":true,\"got\":{},\"groups\":{}}}",
                json_string(l),
                p.groups.len()
            )
        });
        let _server = CtlServer::unix(
            &path,
            Access {
                gid: None,
                mode: 0o660,
            },
            h,
        )
        .unwrap();
        let mut slow = UnixStream::connect(&path).unwrap();
        let started = Instant::now();
        let trickle = std::thread::spawn(move || {
            let mut reply = String::new();
            for b in b"pause" {
                if slow.write_all(&[*b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(400));
            }
            let _ = BufReader::new(slow).read_line(&mut reply);
            (reply, started.elapsed())
        });
        std::thread::sleep(Duration::from_millis(100));
        let t = Instant::now();
        let r = send(&path, "is-paused", Duration::from_secs(2)).unwrap();
        assert!(r.starts_with("{\"ok\":true,\"got\":\"is-paused\""), "{r}");
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        let (reply, took) = trickle.join().unwrap();
        assert!(
            reply.contains("no whole command line within 1000 ms"),
            "{reply}"
        );
        assert!(took < Duration::from_millis(2500), "{took:?}");
    }

    /// Past [`MAX_CLIENTS`] silent clients one more is told the socket is
    /// busy after [`SLOT_WAIT`]; once they are let go it is served again.
    #[test]
    fn clients_past_the_bound_are_told_busy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctl.sock");
        let h: CtlHandler = Arc::new(|_: &str, _: &Peer| "{\"ok\":true}".to_owned());
        let _server = CtlServer::unix(
            &path,
            Access {
                gid: None,
                mode: 0o660,
            },
            h,
        )
        .unwrap();
        let held: Vec<UnixStream> = (0..MAX_CLIENTS)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        let r = send(&path, "is-paused", Duration::from_secs(2)).unwrap();
        assert!(r.contains("busy: 16 clients"), "{r}");
        drop(held);
        // Each held client is let go at its deadline at the latest.
        std::thread::sleep(REQUEST_DEADLINE + Duration::from_millis(300));
        assert_eq!(
            send(&path, "is-paused", Duration::from_secs(2)).unwrap(),
            "{\"ok\":true}"
        );
    }

    /// The peer's groups are the kernel's: this process's own.
    #[test]
    fn the_peer_has_this_process_groups() {
        let (a, _b) = UnixStream::pair().unwrap();
        let peer = Peer::of(&a).unwrap();
        // SAFETY: getgroups with 0 asks for the count only; then fills a
        // buffer of that many gids.
        let mine = unsafe {
            let n = libc::getgroups(0, std::ptr::null_mut());
            let mut g = vec![0; n.max(0) as usize];
            let n = libc::getgroups(n, g.as_mut_ptr());
            g.truncate(n.max(0) as usize);
            g
        };
        let mut got = peer.groups.clone();
        got.sort_unstable();
        let mut want = mine;
        want.sort_unstable();
        assert_eq!(got, want);
        // SAFETY: getgid cannot fail.
        assert!(peer.in_group(unsafe { libc::getgid() }));
        assert!(!peer.in_group(u32::MAX - 7));
    }
}
