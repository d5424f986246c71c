//! A network namespace per test: DDS discovers by multicast, so every
//! participant of a test runs inside a namespace the test creates, with
//! only `lo` (up, multicast on). No packet reaches a real interface.
//!
//! [`Netns::enter`] moves the calling thread (a test's own) into it, so
//! the threads it starts afterwards (a source's, Cyclone's) are in it too;
//! [`Netns::command`] runs a process in it (a Python peer, the edgerec
//! binary).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// Serializes the tests of one process that start DDS participants in it.
/// Cyclone DDS keeps one domain per id and process, made in the network
/// namespace of the thread that created it first: two tests running at
/// once in one test binary would share it (and see each other's topics)
/// even from different namespaces. Hold the guard for the whole test.
pub fn dds_serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A named namespace (`ip netns add`), deleted on drop.
pub struct Netns {
    /// Its name under /var/run/netns.
    pub name: String,
}

/// Why network namespaces cannot be made here, if they cannot: not root,
/// or no `ip` (iproute2).
pub fn namespaces_unsupported() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("the test needs root to create network namespaces".into());
    }
    if Command::new("ip")
        .arg("-V")
        .stdout(Stdio::null())
        .status()
        .is_err()
    {
        return Some("`ip` (iproute2) is not installed".into());
    }
    None
}

/// Why DDS tests cannot run here, if they cannot: allowed only under
/// user-mode QEMU (no `IP_MULTICAST_IF`).
pub fn skip_reason() -> Option<crate::skip::Skip> {
    use crate::skip::{Allowed, Skip};
    if let Some(why) = namespaces_unsupported() {
        return Some(Skip::missing(format!("DDS tests: {why}")));
    }
    if let Some(why) = multicast_unsupported() {
        return Some(if crate::qemu_user().is_some() {
            Skip::allowed(Allowed::QemuUser, why)
        } else {
            Skip::missing(why)
        });
    }
    let py = python();
    let ok = Command::new(&py)
        .args(["-c", "import cyclonedds.domain"])
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        return Some(Skip::missing(format!(
            "{} cannot import cyclonedds (run scripts/test, which installs it)",
            py.display()
        )));
    }
    None
}

/// Cyclone sets `IP_MULTICAST_IF` on its sockets; user-mode QEMU does not
/// implement that option, so DDS cannot start under it.
fn multicast_unsupported() -> Option<String> {
    // SAFETY: a plain UDP socket, closed below; setsockopt reads a valid
    // in_addr of the right size.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        if fd < 0 {
            return Some(format!(
                "socket(AF_INET): {}",
                std::io::Error::last_os_error()
            ));
        }
        let addr = libc::in_addr {
            s_addr: u32::from_ne_bytes([127, 0, 0, 1]),
        };
        let rc = libc::setsockopt(
            fd,
            libc::IPPROTO_IP,
            libc::IP_MULTICAST_IF,
            &addr as *const libc::in_addr as *const libc::c_void,
            std::mem::size_of::<libc::in_addr>() as libc::socklen_t,
        );
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        (rc != 0).then(|| {
            format!("setsockopt(IP_MULTICAST_IF) fails here ({err}; user-mode QEMU does not implement it), and Cyclone DDS needs it")
        })
    }
}

/// The Python with the test peers' packages (`cyclonedds`).
pub fn python() -> PathBuf {
    crate::python().unwrap_or_else(|| "python3".into())
}

/// `tests/py/ros2peer.py`, the ROS 2 peers.
pub fn ros2peer() -> PathBuf {
    crate::workspace_root().join("tests/py/ros2peer.py")
}

impl Netns {
    /// Creates a fresh namespace with `lo` up and multicast on.
    pub fn new() -> Netns {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "edgerec-t{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let run = |args: &[&str]| {
            let st = Command::new("ip").args(args).status().expect("ip");
            assert!(st.success(), "ip {args:?} failed");
        };
        run(&["netns", "add", &name]);
        run(&["-n", &name, "link", "set", "lo", "up"]);
        run(&["-n", &name, "link", "set", "lo", "multicast", "on"]);
        Netns { name }
    }

    /// Its name (`ip netns exec NAME`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A veth pair between this namespace (`a`, address `a_addr/24`) and
    /// `other` (`b`, `b_addr/24`), both up; the two interfaces' names
    /// (`ea0`, `eb0`: each namespace has its own).
    pub fn link_to(&self, other: &Netns, a_addr: &str, b_addr: &str) -> (String, String) {
        let run = |args: &[&str]| {
            let st = Command::new("ip").args(args).status().expect("ip");
            assert!(st.success(), "ip {args:?} failed");
        };
        static LINKS: AtomicU32 = AtomicU32::new(0);
        let tmp = format!(
            "et{}x{}",
            std::process::id() % 10_000,
            LINKS.fetch_add(1, Ordering::Relaxed)
        );
        run(&[
            "link",
            "add",
            &tmp,
            "type",
            "veth",
            "peer",
            "name",
            &format!("{tmp}p"),
        ]);
        run(&["link", "set", &tmp, "netns", &self.name]);
        run(&["link", "set", &format!("{tmp}p"), "netns", &other.name]);
        run(&["-n", &self.name, "link", "set", &tmp, "name", "ea0"]);
        run(&[
            "-n",
            &other.name,
            "link",
            "set",
            &format!("{tmp}p"),
            "name",
            "eb0",
        ]);
        run(&[
            "-n",
            &self.name,
            "addr",
            "add",
            &format!("{a_addr}/24"),
            "dev",
            "ea0",
        ]);
        run(&[
            "-n",
            &other.name,
            "addr",
            "add",
            &format!("{b_addr}/24"),
            "dev",
            "eb0",
        ]);
        run(&["-n", &self.name, "link", "set", "ea0", "up"]);
        run(&["-n", &other.name, "link", "set", "eb0", "up"]);
        ("ea0".to_owned(), "eb0".to_owned())
    }

    /// Moves the calling thread into the namespace; threads it starts
    /// later (a source's, Cyclone's) are in it too.
    pub fn enter(&self) {
        let f = File::open(format!("/var/run/netns/{}", self.name)).expect("netns file");
        // SAFETY: a valid namespace fd; only this thread changes namespace.
        let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
    }

    /// A command run inside the namespace.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }

    /// Calls the ROS 2 service `service` of type `ty` from a Python peer
    /// in the namespace (`ros2peer.py call`, 10 s at most) and returns its
    /// reply, the last line it prints (JSON). Panics with what it printed
    /// when the call fails.
    pub fn call_service(&self, service: &str, ty: &str) -> String {
        let out = self
            .command(python())
            .arg(ros2peer())
            .args([
                "call",
                "--service",
                service,
                "--type",
                ty,
                "--timeout",
                "10",
            ])
            .output()
            .expect("run ros2peer.py call");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "call {service}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text.trim().lines().last().unwrap_or("").to_owned()
    }
}

impl Default for Netns {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}
