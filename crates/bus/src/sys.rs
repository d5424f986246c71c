//! The kernel interfaces both sources use, and every `unsafe` block of the
//! crate: sockets and their options, `poll(2)` on a socket beside the
//! stop's eventfd, `recvmmsg(2)` batches with their addresses and
//! ancillary data, interface indexes and flags, and `SO_MEMINFO`'s drop
//! count. What the bytes mean (frames, control messages) is parsed in safe
//! code elsewhere ([`crate::ancillary`], [`crate::can::frame`]).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// Bytes of ancillary data kept per received message: `SCM_TIMESTAMPING`
/// (three timespecs, 64 bytes with its header), `SO_RXQ_OVFL` (24) and
/// `SCM_TIMESTAMPNS` (32) fit with room to spare.
pub(crate) const CONTROL_LEN: usize = 256;

/// A socket of ours, closed on drop.
#[derive(Debug)]
pub(crate) struct Socket {
    fd: OwnedFd,
}

impl AsFd for Socket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

impl Socket {
    /// `socket(2)`, close-on-exec and non-blocking (reads wait in
    /// [`wait_readable`], never in the kernel).
    pub(crate) fn open(
        domain: libc::c_int,
        ty: libc::c_int,
        protocol: libc::c_int,
    ) -> io::Result<Socket> {
        // SAFETY: socket(2) takes three integers and returns a new
        // descriptor or -1; nothing is borrowed.
        let fd = check(unsafe {
            libc::socket(
                domain,
                ty | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                protocol,
            )
        })?;
        // SAFETY: `fd` was just returned by socket(2) and is owned by
        // nobody else; OwnedFd closes it once.
        Ok(Socket {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// `setsockopt(2)` with one plain value (an integer or a `#[repr(C)]`
    /// kernel struct).
    pub(crate) fn set<T: Copy>(
        &self,
        level: libc::c_int,
        name: libc::c_int,
        value: &T,
    ) -> io::Result<()> {
        self.set_slice(level, name, std::slice::from_ref(value))
    }

    /// `setsockopt(2)` with an array of plain values (`CAN_RAW_FILTER`'s
    /// filters); an empty one passes a zero length.
    pub(crate) fn set_slice<T: Copy>(
        &self,
        level: libc::c_int,
        name: libc::c_int,
        values: &[T],
    ) -> io::Result<()> {
        let len = std::mem::size_of_val(values) as libc::socklen_t;
        let ptr = if values.is_empty() {
            std::ptr::null()
        } else {
            values.as_ptr().cast::<libc::c_void>()
        };
        // SAFETY: `ptr` points at `len` readable bytes of `values` (or is
        // null with length 0), alive for the call; the kernel copies them.
        check(unsafe { libc::setsockopt(self.fd.as_raw_fd(), level, name, ptr, len) })?;
        Ok(())
    }

    /// `getsockopt(2)` of one `c_int`.
    pub(crate) fn get_int(&self, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `v` and `len` are live and writable; the kernel writes at
        // most `len` bytes into `v` and the length back into `len`.
        check(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        })?;
        Ok(v)
    }

    /// `bind(2)` to a socket address struct of the socket's family
    /// (`sockaddr_in`, `sockaddr_can`).
    pub(crate) fn bind<A: Copy>(&self, addr: &A) -> io::Result<()> {
        // SAFETY: `addr` is a live, initialised socket address of
        // size_of::<A>() bytes; the kernel copies it.
        check(unsafe {
            libc::bind(
                self.fd.as_raw_fd(),
                (addr as *const A).cast::<libc::sockaddr>(),
                std::mem::size_of::<A>() as libc::socklen_t,
            )
        })?;
        Ok(())
    }

    /// Asks for a receive buffer of `bytes`: `SO_RCVBUFFORCE` where we may
    /// (CAP_NET_ADMIN: past `net.core.rmem_max`), else `SO_RCVBUF` (capped
    /// by it). Returns what the kernel granted (`SO_RCVBUF` reads back
    /// twice the usable size; halved here).
    pub(crate) fn set_receive_buffer(&self, bytes: u64) -> io::Result<u64> {
        let want = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
        if self
            .set(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &want)
            .is_err()
        {
            self.set(libc::SOL_SOCKET, libc::SO_RCVBUF, &want)?;
        }
        let got = self.get_int(libc::SOL_SOCKET, libc::SO_RCVBUF)?;
        Ok(u64::try_from(got).unwrap_or(0) / 2)
    }

    /// Packets the kernel dropped for this socket since it was made
    /// (`sk_drops`: receive buffer full, and for UDP bad checksums), by
    /// `SO_MEMINFO` (Linux 4.12).
    pub(crate) fn kernel_drops(&self) -> io::Result<u32> {
        // SK_MEMINFO_VARS is 9 since Linux 4.12 (DROPS the last); room for more.
        let mut info = [0u32; 16];
        let mut len = std::mem::size_of_val(&info) as libc::socklen_t;
        // SAFETY: `info` is a live, writable array of `len` bytes; the
        // kernel writes at most that many and the length back into `len`.
        check(unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_MEMINFO,
                info.as_mut_ptr().cast(),
                &mut len,
            )
        })?;
        let at = libc::SK_MEMINFO_DROPS as usize;
        if (len as usize) < (at + 1) * 4 {
            return Err(io::Error::other(
                "SO_MEMINFO answered without the drop count",
            ));
        }
        Ok(info[at])
    }
}

/// What woke [`wait_readable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wake {
    /// The socket has data or an error to read.
    Readable,
    /// The stop's eventfd fired.
    Stop,
    /// Neither, within the timeout.
    Timeout,
}

/// `poll(2)` on the socket and, where there is one, the stop's eventfd
/// (readable once stop is requested): a source blocked here wakes for a
/// packet or for stop, with no busy loop. The timeout bounds the wait for
/// the liveness beat and the link checks.
pub(crate) fn wait_readable(
    socket: BorrowedFd<'_>,
    waker: Option<BorrowedFd<'_>>,
    timeout: Duration,
) -> io::Result<Wake> {
    let mut fds = [
        libc::pollfd {
            fd: socket.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: waker.map_or(-1, |w| w.as_raw_fd()),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let n = if waker.is_some() { 2 } else { 1 };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `fds` is a live array of `n` (<= 2) pollfd entries with
    // valid descriptors; poll(2) only writes their `revents`.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), n as libc::nfds_t, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(Wake::Timeout);
        }
        return Err(e);
    }
    if fds[1].revents & libc::POLLIN != 0 {
        return Ok(Wake::Stop);
    }
    if fds[0].revents != 0 {
        return Ok(Wake::Readable);
    }
    Ok(Wake::Timeout)
}

/// One message of a [`RecvBatch`].
#[derive(Debug)]
pub(crate) struct Received<'a> {
    /// The bytes received (at most the slot's length).
    pub data: &'a [u8],
    /// The datagram was longer than the slot and was cut (`MSG_TRUNC`).
    pub truncated: bool,
    /// The sender, for an `AF_INET` socket.
    pub from: Option<std::net::SocketAddrV4>,
    /// The ancillary data (timestamps, the drop count).
    pub control: &'a [u8],
}

/// Buffers for `recvmmsg(2)`: `slots` messages of up to `slot_len` bytes,
/// each with room for a sender address and [`CONTROL_LEN`] bytes of
/// ancillary data. The buffers are made once and never resized, and the
/// headers are pointed at them again before every call.
pub(crate) struct RecvBatch {
    slot_len: usize,
    data: Vec<u8>,
    names: Vec<libc::sockaddr_storage>,
    /// u64 words: ancillary data must be aligned for `cmsghdr`.
    control: Vec<u64>,
    iov: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    received: usize,
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("slots", &self.hdrs.len())
            .field("slot_len", &self.slot_len)
            .field("received", &self.received)
            .finish()
    }
}

// SAFETY: the raw pointers inside `iov` and `hdrs` point only into this
// struct's own heap buffers, and are rewritten before every use; moving
// the struct to another thread moves those buffers with it.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// Buffers for `slots` messages of `slot_len` bytes.
    pub(crate) fn new(slots: usize, slot_len: usize) -> RecvBatch {
        let slots = slots.max(1);
        let words = CONTROL_LEN / 8;
        RecvBatch {
            slot_len,
            data: vec![0; slots * slot_len],
            // SAFETY: sockaddr_storage is plain integers; all zero is a
            // valid (unspecified-family) value.
            names: vec![unsafe { std::mem::zeroed() }; slots],
            control: vec![0; slots * words],
            iov: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0,
                };
                slots
            ],
            // SAFETY: mmsghdr is integers and raw pointers; all zero (null
            // pointers, zero lengths) is valid, and every field used is
            // set in `recv` before the call.
            hdrs: vec![unsafe { std::mem::zeroed() }; slots],
            received: 0,
        }
    }

    /// Reads what the socket has queued, up to the batch's slots, without
    /// waiting; 0 when nothing is queued.
    pub(crate) fn recv(&mut self, socket: &Socket) -> io::Result<usize> {
        self.received = 0;
        let words = CONTROL_LEN / 8;
        let data = self.data.as_mut_ptr();
        let control = self.control.as_mut_ptr();
        for i in 0..self.hdrs.len() {
            self.iov[i] = libc::iovec {
                // SAFETY: slot i lies within `data` (slots * slot_len bytes).
                iov_base: unsafe { data.add(i * self.slot_len) }.cast(),
                iov_len: self.slot_len,
            };
            let h = &mut self.hdrs[i];
            h.msg_len = 0;
            h.msg_hdr.msg_name = (&mut self.names[i] as *mut libc::sockaddr_storage).cast();
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as _;
            h.msg_hdr.msg_iov = &mut self.iov[i];
            h.msg_hdr.msg_iovlen = 1;
            // SAFETY: slot i's control words lie within `control`.
            h.msg_hdr.msg_control = unsafe { control.add(i * words) }.cast();
            h.msg_hdr.msg_controllen = CONTROL_LEN as _;
            h.msg_hdr.msg_flags = 0;
        }
        // SAFETY: every header points at this batch's own live buffers
        // (names, iovecs over `data`, control words) of the lengths given;
        // the kernel writes at most those. MSG_DONTWAIT: it never blocks.
        let n = unsafe {
            libc::recvmmsg(
                socket.fd.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        self.received = n as usize;
        Ok(self.received)
    }

    /// Message `i` of the last [`recv`](Self::recv) (`i` below its count).
    pub(crate) fn get(&self, i: usize) -> Received<'_> {
        let h = &self.hdrs[i];
        let len = (h.msg_len as usize).min(self.slot_len);
        let data = &self.data[i * self.slot_len..i * self.slot_len + len];
        let words = CONTROL_LEN / 8;
        let ctl_words = &self.control[i * words..(i + 1) * words];
        // A view of the u64 words as bytes: same memory, u8 has no
        // alignment, and the length is the words' byte length.
        let ctl_bytes: &[u8] = {
            let (pre, bytes, post) = {
                // SAFETY: reinterpreting initialised u64s as u8s is always
                // valid; align_to returns the whole slice as the middle part.
                unsafe { ctl_words.align_to::<u8>() }
            };
            debug_assert!(pre.is_empty() && post.is_empty());
            bytes
        };
        // size_t on glibc, socklen_t on musl: the cast keeps both building.
        #[allow(clippy::unnecessary_cast)]
        let ctl_len = (h.msg_hdr.msg_controllen as usize).min(CONTROL_LEN);
        Received {
            data,
            truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
            from: sockaddr_v4(&self.names[i], h.msg_hdr.msg_namelen as usize),
            control: &ctl_bytes[..ctl_len],
        }
    }
}

fn sockaddr_v4(s: &libc::sockaddr_storage, len: usize) -> Option<std::net::SocketAddrV4> {
    if s.ss_family != libc::AF_INET as libc::sa_family_t
        || len < std::mem::size_of::<libc::sockaddr_in>()
    {
        return None;
    }
    // SAFETY: the family is AF_INET and the kernel wrote a whole
    // sockaddr_in, which sockaddr_storage is large and aligned enough for.
    let sin = unsafe { &*(s as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
    Some(std::net::SocketAddrV4::new(
        std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
        u16::from_be(sin.sin_port),
    ))
}

/// `sockaddr_in` for an IPv4 address and port.
pub(crate) fn sockaddr_in(addr: std::net::SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*addr.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// The index of the network interface `name` in this network namespace.
pub(crate) fn interface_index(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a NUL-terminated string alive for the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(i)
}

/// `struct ifreq` with its flags member (`ifr_flags`), as
/// `SIOCGIFFLAGS` fills it.
#[repr(C)]
#[derive(Clone, Copy)]
struct IfreqFlags {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// An interface's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkState {
    /// `IFF_UP`: administratively up.
    pub up: bool,
    /// `IFF_RUNNING`: the link has a carrier (a CAN controller not
    /// bus-off, a cable plugged in).
    pub running: bool,
}

/// The flags of interface `name` (`SIOCGIFFLAGS` on a datagram socket of
/// this network namespace).
pub(crate) fn link_state(name: &str) -> io::Result<LinkState> {
    let s = Socket::open(libc::AF_INET, libc::SOCK_DGRAM, 0)?;
    let mut req = IfreqFlags {
        name: [0; libc::IFNAMSIZ],
        flags: 0,
        _pad: [0; 22],
    };
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    for (d, b) in req.name.iter_mut().zip(name.bytes()) {
        *d = b as libc::c_char;
    }
    // SAFETY: `req` is a live ifreq-sized struct with a NUL-terminated
    // name; SIOCGIFFLAGS writes only its flags member.
    check(unsafe { libc::ioctl(s.fd.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut req) })?;
    let f = libc::c_int::from(req.flags);
    Ok(LinkState {
        up: f & libc::IFF_UP != 0,
        running: f & libc::IFF_RUNNING != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_struct_layouts() {
        assert_eq!(
            std::mem::size_of::<IfreqFlags>(),
            std::mem::size_of::<libc::ifreq>()
        );
        assert_eq!(std::mem::size_of::<libc::sockaddr_in>(), 16);
        assert!(CONTROL_LEN.is_multiple_of(8));
    }

    #[test]
    fn loopback_is_up_and_has_an_index() {
        let lo = link_state("lo").unwrap();
        assert!(lo.up, "{lo:?}");
        assert!(interface_index("lo").unwrap() >= 1);
        assert!(interface_index("no-such-if0").is_err());
        assert!(link_state("no-such-if0").is_err());
    }

    #[test]
    fn a_batch_reads_datagrams_with_their_sender() {
        let s = Socket::open(libc::AF_INET, libc::SOCK_DGRAM, 0).unwrap();
        s.bind(&sockaddr_in(std::net::SocketAddrV4::new(
            std::net::Ipv4Addr::LOCALHOST,
            0,
        )))
        .unwrap();
        let mut addr = sockaddr_in(std::net::SocketAddrV4::new(
            std::net::Ipv4Addr::UNSPECIFIED,
            0,
        ));
        let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: `addr` and `len` are live and writable for the call.
        let rc = unsafe {
            libc::getsockname(
                s.fd.as_raw_fd(),
                (&mut addr as *mut libc::sockaddr_in).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        let port = u16::from_be(addr.sin_port);
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let me = tx.local_addr().unwrap();
        let mut b = RecvBatch::new(4, 8);
        assert_eq!(b.recv(&s).unwrap(), 0, "nothing queued yet: no wait");
        for msg in [&b"one"[..], b"two!", b"longer than eight"] {
            tx.send_to(msg, ("127.0.0.1", port)).unwrap();
        }
        assert_eq!(
            wait_readable(s.as_fd(), None, Duration::from_secs(5)).unwrap(),
            Wake::Readable
        );
        let mut got = Vec::new();
        while got.len() < 3 {
            let n = b.recv(&s).unwrap();
            for i in 0..n {
                let r = b.get(i);
                got.push((r.data.to_vec(), r.truncated, r.from));
            }
        }
        assert_eq!(got[0].0, b"one");
        assert_eq!(got[1].0, b"two!");
        assert_eq!((got[2].0.as_slice(), got[2].1), (&b"longer t"[..], true));
        assert_eq!(got[0].2.map(|a| a.port()), Some(me.port()));
        match edgerec_testkit::qemu_user() {
            // Its getsockopt answers SO_MEMINFO short; the sources then
            // keep the SO_RXQ_OVFL counts (drops.rs).
            Some(q) => edgerec_testkit::skip::skip_allowed(
                edgerec_testkit::skip::Allowed::QemuUser,
                format!("SO_MEMINFO: {q} does not emulate it"),
            ),
            None => assert_eq!(s.kernel_drops().unwrap(), 0),
        }
        assert!(s.set_receive_buffer(1 << 20).unwrap() > 0);
    }
}
