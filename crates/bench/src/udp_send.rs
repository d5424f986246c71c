//! `edgerec-udp-send`: the paced UDP sender of `scripts/bench --bus`.
//!
//! Sends `--count` datagrams of `--size` bytes to `--to` at `--rate` per
//! second, paced against the clock in `sendmmsg(2)` batches of up to 64
//! (a sender that falls behind sends as fast as it can until it is on
//! time again), each with its sequence number in its first 8 bytes, and
//! prints one JSON line: what it sent, how long it took, and the CPU
//! seconds it used.
//!
//! usage: edgerec-udp-send --to ADDR:PORT --size BYTES --rate PER_S --count N

use std::net::{SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

const BATCH: usize = 64;

fn arg<T: std::str::FromStr>(args: &[String], name: &str) -> anyhow::Result<T> {
    let at = args
        .iter()
        .position(|a| a == name)
        .ok_or_else(|| anyhow::anyhow!("missing {name}"))?;
    let v = args
        .get(at + 1)
        .ok_or_else(|| anyhow::anyhow!("{name} needs a value"))?;
    v.parse()
        .map_err(|_| anyhow::anyhow!("{name} {v}: not a valid value"))
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the live struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer to `ru`.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let to: SocketAddrV4 = arg(&args, "--to")?;
    let size: usize = arg(&args, "--size")?;
    let rate: f64 = arg(&args, "--rate")?;
    let count: u64 = arg(&args, "--count")?;
    anyhow::ensure!((8..=65_507).contains(&size), "--size must be 8 to 65507");
    anyhow::ensure!(rate > 0.0, "--rate must be positive");
    let sock = UdpSocket::bind("0.0.0.0:0")?;
    sock.connect(to)?;
    let mut bufs: Vec<Vec<u8>> = (0..BATCH)
        .map(|i| {
            let mut b = vec![0u8; size];
            for (k, x) in b.iter_mut().enumerate() {
                *x = (i * 7 + k) as u8;
            }
            b
        })
        .collect();
    let cpu0 = cpu_seconds();
    let t0 = Instant::now();
    let mut sent = 0u64;
    let mut failed = 0u64;
    while sent + failed < count {
        let due = t0 + Duration::from_secs_f64((sent + failed) as f64 / rate);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        // How many are due by now, at most a batch.
        let behind = (t0.elapsed().as_secs_f64() * rate) as u64;
        let n = (behind.saturating_sub(sent + failed) + 1)
            .min(BATCH as u64)
            .min(count - sent - failed) as usize;
        for (i, b) in bufs.iter_mut().take(n).enumerate() {
            b[..8].copy_from_slice(&(sent + failed + i as u64).to_le_bytes());
        }
        let mut iov: Vec<libc::iovec> = bufs
            .iter_mut()
            .take(n)
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            })
            .collect();
        let mut hdrs: Vec<libc::mmsghdr> = iov
            .iter_mut()
            .map(|v| {
                // SAFETY: mmsghdr is integers and pointers; all zero is
                // valid and the fields used are set below.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = v;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        // SAFETY: `hdrs` holds `n` headers, each pointing at one live
        // iovec over a live buffer; the socket is connected, so no
        // address is needed.
        let r =
            unsafe { libc::sendmmsg(sock.as_raw_fd(), hdrs.as_mut_ptr(), n as libc::c_uint, 0) };
        if r < 0 {
            // A datagram the kernel refused (ENOBUFS): counted, not retried.
            failed += 1;
        } else {
            sent += r as u64;
            if (r as usize) < n {
                failed += 1;
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "sent": sent, "refused": failed, "seconds": secs,
            "rate": sent as f64 / secs, "cpu_seconds": cpu_seconds() - cpu0,
            "size": size, "asked_rate": rate,
        })
    );
    Ok(())
}
