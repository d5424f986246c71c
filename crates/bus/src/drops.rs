//! The kernel's drops for a source's sockets, added up across the
//! source's runs: each new socket counts from 0 (`SO_RXQ_OVFL` with every
//! packet, `SO_MEMINFO` when asked), while the channel's `upstream_lost`
//! counts from the source's first run. The total is only ever raised.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::sys::Socket;

/// What the sockets of earlier runs dropped.
#[derive(Debug, Default)]
pub(crate) struct DropLedger {
    before: u64,
}

impl DropLedger {
    /// The running socket says it has dropped `count`: raises `total` to
    /// match and returns it.
    pub(crate) fn observe(&self, total: &AtomicU64, count: u32) -> u64 {
        let t = self.before + u64::from(count);
        total.fetch_max(t, Ordering::Relaxed).max(t)
    }

    /// Asks the running socket (`SO_MEMINFO`); returns the total.
    pub(crate) fn poll(&self, total: &AtomicU64, socket: &Socket) -> u64 {
        match socket.kernel_drops() {
            Ok(d) => self.observe(total, d),
            Err(_) => total.load(Ordering::Relaxed),
        }
    }

    /// The run is over: its socket's last count is kept for the next run
    /// to start from. Returns what this run's socket dropped.
    pub(crate) fn end_run(&mut self, total: &AtomicU64, socket: &Socket) -> u64 {
        let seen = total.load(Ordering::Relaxed).saturating_sub(self.before);
        let last = socket.kernel_drops().map(u64::from).unwrap_or(0);
        let run = last.max(seen);
        self.before += run;
        total.store(self.before, Ordering::Relaxed);
        run
    }
}

/// Says, once per run, how the drops of `what`'s socket are counted when
/// the kernel refused the per-packet count (`SO_RXQ_OVFL`; user-mode QEMU
/// does): by `SO_MEMINFO` at each check, or, when that fails too, not at
/// all (`upstream_lost` then stays 0, and the log says so).
pub(crate) fn say_how_counted(what: &str, overflow_count: bool, socket: &Socket) {
    if overflow_count {
        return;
    }
    match socket.kernel_drops() {
        Ok(_) => tracing::info!(
            "{what}: the kernel refused SO_RXQ_OVFL; its drops are counted every check by SO_MEMINFO"
        ),
        Err(e) => tracing::warn!(
            "{what}: the kernel refused SO_RXQ_OVFL and SO_MEMINFO ({e}): its drops for this \
             socket cannot be counted, upstream_lost stays 0 (RcvbufErrors in /proc/net/snmp \
             still counts them for the namespace)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_add_up_and_the_total_never_goes_back() {
        let s = Socket::open(libc::AF_INET, libc::SOCK_DGRAM, 0).unwrap();
        let total = AtomicU64::new(0);
        let mut l = DropLedger::default();
        assert_eq!(l.observe(&total, 5), 5);
        assert_eq!(l.observe(&total, 3), 5, "a smaller count is an older one");
        // The socket itself dropped nothing: what the packets said stays.
        assert_eq!(l.end_run(&total, &s), 5);
        assert_eq!(l.observe(&total, 2), 7, "the next socket counts from 0");
        assert_eq!(l.poll(&total, &s), 7);
        assert_eq!(l.end_run(&total, &s), 2);
        assert_eq!(total.load(Ordering::Relaxed), 7);
    }
}
