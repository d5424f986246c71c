//! The bandwidth cap (`offload.max_rate`): one token bucket shared by every
//! request of a client, taken from as a request body is handed to the
//! connection in small pieces, so the link sees a steady rate rather than
//! a part's worth of bursts at full speed and then silence (capping when
//! a part buffer is filled is bursty: rclone/rclone#222). Also counts the
//! bytes handed on, for the rate in the status.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most a capped body hands the connection at once.
pub const PIECE: usize = 16 * 1024;

/// The same without a cap.
pub const FREE_PIECE: usize = 64 * 1024;

/// The shared bucket: `rate` bytes per second, holding at most a tenth of
/// a second's worth (at least one piece), so a pause is not made up in a
/// burst.
#[derive(Debug)]
pub struct Pace {
    rate: u64,
    state: Mutex<(f64, Instant)>,
    sent: AtomicU64,
}

impl Pace {
    /// A cap of `rate` bytes per second; 0 = none (bytes are only
    /// counted).
    pub fn new(rate: u64) -> Pace {
        Pace {
            rate,
            state: Mutex::new((0.0, Instant::now())),
            sent: AtomicU64::new(0),
        }
    }

    /// The cap, bytes per second (0: none).
    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Bytes handed to connections so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    fn piece(&self) -> usize {
        if self.rate == 0 {
            FREE_PIECE
        } else {
            // About 20 pieces a second at low rates.
            (self.rate as usize / 20).clamp(1024, PIECE)
        }
    }

    /// Waits until `n` bytes may go, and counts them.
    pub fn take(&self, n: usize) {
        if self.rate > 0 {
            let rate = self.rate as f64;
            let cap = (rate / 10.0).max(self.piece() as f64);
            loop {
                let wait = {
                    let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
                    let now = Instant::now();
                    st.0 = (st.0 + now.duration_since(st.1).as_secs_f64() * rate).min(cap);
                    st.1 = now;
                    if st.0 >= n as f64 {
                        st.0 -= n as f64;
                        None
                    } else {
                        Some((n as f64 - st.0) / rate)
                    }
                };
                match wait {
                    None => break,
                    Some(s) => std::thread::sleep(Duration::from_secs_f64(s.min(1.0))),
                }
            }
        }
        self.sent.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// `body` as a reader that hands out at most a piece per read, each
    /// after [`Pace::take`].
    pub fn reader<'a>(&'a self, body: &'a [u8]) -> Paced<'a> {
        Paced {
            pace: self,
            body,
            piece: self.piece(),
        }
    }
}

/// See [`Pace::reader`].
pub struct Paced<'a> {
    pace: &'a Pace,
    body: &'a [u8],
    piece: usize,
}

impl Read for Paced<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.piece).min(self.body.len());
        if n == 0 {
            return Ok(0);
        }
        self.pace.take(n);
        buf[..n].copy_from_slice(&self.body[..n]);
        self.body = &self.body[n..];
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reader_hands_out_every_byte_in_pieces_and_counts_them() {
        let pace = Pace::new(0);
        let body: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let mut r = pace.reader(&body);
        let mut buf = vec![0u8; 80 * 1024];
        let n = r.read(&mut buf).unwrap();
        assert_eq!(n, FREE_PIECE);
        let mut out = buf[..n].to_vec();
        r.read_to_end(&mut out).unwrap();
        assert_eq!(out, body);
        assert_eq!(pace.sent(), 100_000);
    }

    #[test]
    fn two_readers_together_keep_to_the_cap_without_a_burst() {
        // 200 KB/s shared by two bodies of 100 KB: about a second in
        // all, however the two interleave; the first tenth of a second
        // sends no more than a tenth of a second's worth (plus a piece).
        let pace = std::sync::Arc::new(Pace::new(200_000));
        let started = Instant::now();
        let early = std::sync::Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let pace = pace.clone();
                let early = early.clone();
                std::thread::spawn(move || {
                    let body = vec![7u8; 100_000];
                    let mut r = pace.reader(&body);
                    let mut buf = [0u8; 4096];
                    let mut got = 0;
                    loop {
                        let n = r.read(&mut buf).unwrap();
                        if n == 0 {
                            break;
                        }
                        got += n;
                        if started.elapsed() < Duration::from_millis(100) {
                            early.fetch_add(n as u64, Ordering::Relaxed);
                        }
                    }
                    got
                })
            })
            .collect();
        let total: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        let took = started.elapsed();
        assert_eq!(total, 200_000);
        assert!(took >= Duration::from_millis(900), "{took:?}");
        assert!(
            early.load(Ordering::Relaxed) <= 20_000 + 2 * 10_000 + 4096,
            "{} bytes in the first 100 ms",
            early.load(Ordering::Relaxed)
        );
        assert_eq!(pace.sent(), 200_000);
    }
}
