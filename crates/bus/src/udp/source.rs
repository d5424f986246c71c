//! A `[[udp]]` stream as a [`Source`]: one socket per run, read in
//! `recvmmsg` batches beside the stop's eventfd; every datagram one
//! `edgerec_msgs/msg/Packet`, stamped with the kernel's receive time on
//! the recording clock, byte for byte.
//!
//! Loss is counted where it happens: the kernel's drops for this socket
//! (receive buffer full: `SO_RXQ_OVFL` with every packet, `SO_MEMINFO` at
//! each check and at the end) are the channel's `upstream_lost`, in the
//! status and in every file; datagrams longer than `max_packet` (cut by
//! the kernel) are counted there too and logged, never recorded cut;
//! packets from senders `sources` leaves out are counted as filtered. How
//! the namespace's `RcvbufErrors` rose is logged beside it.
//!
//! A run fails, and the supervisor retries it with backoff while every
//! other source records on, when the socket cannot be bound (the address
//! is not there yet: an interface still coming up), the multicast group
//! cannot be joined, the interface is down (checked every
//! [`crate::reader::CHECK_EVERY`] when the stream names one), or the
//! socket reports an error.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use edgerec_config::UdpConfig;
use edgerec_source::{ClockMap, Envelope, Source, SourceError, SourceSink, Stop};

use crate::ancillary;
use crate::drops::DropLedger;
use crate::reader::{self, OnBatch};
use crate::snmp;
use crate::stamp::{receive_time, StampCounts};
use crate::sys::{self, RecvBatch};
use crate::udp::packet;
use crate::udp::socket::UdpSocket;

/// Datagrams read per `recvmmsg`, at most: fewer for large ones, so that
/// a batch's buffers stay near [`BATCH_BYTES`].
const BATCH: usize = 64;
/// The bytes of one batch's buffers.
const BATCH_BYTES: usize = 2 << 20;
/// How often a rise of the namespace's `RcvbufErrors` is logged.
const SNMP_LOG_EVERY: Duration = Duration::from_secs(10);

/// What a UDP source has recorded, for tests and the bench.
#[derive(Debug, Default)]
pub struct UdpStats {
    /// Packets pushed.
    pub packets: AtomicU64,
    /// Their payload bytes.
    pub bytes: AtomicU64,
    /// Packets from senders `sources` leaves out.
    pub filtered: AtomicU64,
    /// Datagrams longer than `max_packet`, cut by the kernel, not recorded.
    pub truncated: AtomicU64,
    /// Datagrams the kernel dropped for this stream's sockets (receive
    /// buffer full), every run.
    pub kernel_drops: AtomicU64,
    /// Which stamps the receive times came from.
    pub stamps: StampCounts,
}

/// One UDP stream.
#[derive(Debug)]
pub struct UdpSource {
    cfg: UdpConfig,
    stats: Arc<UdpStats>,
    /// Kernel drops of the sockets of earlier runs.
    drops: DropLedger,
}

impl UdpSource {
    /// A source for one `[[udp]]` entry.
    pub fn new(cfg: &UdpConfig) -> UdpSource {
        UdpSource {
            cfg: cfg.clone(),
            stats: Arc::new(UdpStats::default()),
            drops: DropLedger::default(),
        }
    }

    /// Its counters.
    pub fn stats(&self) -> Arc<UdpStats> {
        self.stats.clone()
    }

    /// What `upstream_lost` says: the kernel's drops and the cut datagrams.
    fn lost(&self) -> u64 {
        self.stats.kernel_drops.load(Ordering::Relaxed)
            + self.stats.truncated.load(Ordering::Relaxed)
    }

    fn check_link(&self) -> Result<(), SourceError> {
        if self.cfg.interface.is_empty() {
            return Ok(());
        }
        let iface = &self.cfg.interface;
        let device = |reason: String| SourceError::Device {
            device: iface.clone(),
            reason,
        };
        let link =
            sys::link_state(iface).map_err(|e| device(format!("no such interface ({e})")))?;
        if !link.up {
            return Err(device("is down".to_owned()));
        }
        if !link.running {
            return Err(device("has no carrier (cable unplugged?)".to_owned()));
        }
        Ok(())
    }
}

impl Source for UdpSource {
    fn name(&self) -> String {
        match self.cfg.multicast {
            Some(g) => format!("udp {} {g}", self.cfg.bind),
            None => format!("udp {}", self.cfg.bind),
        }
    }

    fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError> {
        let channel = sink.register(packet::channel_spec(&self.cfg))?;
        self.check_link()?;
        let sock = UdpSocket::open(&self.cfg).map_err(|e| SourceError::Io {
            context: format!("udp {}: {}", self.cfg.topic, e.step),
            source: e.source,
        })?;
        if sock.receive_buffer < self.cfg.receive_buffer {
            tracing::warn!(
                "udp {}: the kernel granted a receive buffer of {} KiB of the {} KiB asked: \
                 raise net.core.rmem_max (board/*/sysctl.d) or give edgerec CAP_NET_ADMIN",
                self.cfg.topic,
                sock.receive_buffer / 1024,
                self.cfg.receive_buffer / 1024
            );
        }
        tracing::info!(
            "udp {}: recording {}; stamps {}; receive buffer {} KiB",
            self.cfg.topic,
            self.name(),
            sock.stamps.as_str(),
            sock.receive_buffer / 1024
        );
        crate::drops::say_how_counted(&self.name(), sock.overflow_count, &sock.socket);
        let snmp_start = snmp::read();
        let result = self.read(sink, stop, &sock, channel);
        let this_run = self.drops.end_run(&self.stats.kernel_drops, &sock.socket);
        sink.set_upstream_lost(channel, self.lost());
        if let (Some(a), Some(b)) = (snmp_start, snmp::read()) {
            let rose = b.rcvbuf_errors.saturating_sub(a.rcvbuf_errors);
            if this_run > 0 || rose > 0 {
                tracing::warn!(
                    "udp {}: the kernel dropped {this_run} packets of this socket (receive buffer \
                     full); RcvbufErrors of this network namespace rose by {rose} meanwhile",
                    self.cfg.topic
                );
            }
        }
        result
    }
}

impl UdpSource {
    fn read(
        &self,
        sink: &SourceSink,
        stop: &Stop,
        sock: &UdpSocket,
        channel: edgerec_source::ChannelId,
    ) -> Result<(), SourceError> {
        let stats = self.stats.clone();
        let drops_ledger = &self.drops;
        let topic = self.cfg.topic.clone();
        let senders = self.cfg.sources.clone();
        let slot = self.cfg.max_packet as usize;
        let slots = (BATCH_BYTES / slot).clamp(4, BATCH);
        let mut batch = RecvBatch::new(slots, slot);
        let mut truncated_logged = false;
        let mut source_text = String::new();
        let mut on_batch = |b: &RecvBatch, n: usize, map: &ClockMap, at: u64| {
            let mut drops = None;
            for i in 0..n {
                let r = b.get(i);
                let a = ancillary::parse(r.control);
                if a.drops.is_some() {
                    drops = a.drops;
                }
                let from = r.from;
                if !senders.is_empty()
                    && !from.is_some_and(|f| senders.iter().any(|s| s.matches(f)))
                {
                    stats.filtered.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if r.truncated {
                    stats.truncated.fetch_add(1, Ordering::Relaxed);
                    if !truncated_logged {
                        truncated_logged = true;
                        tracing::warn!(
                            "udp {topic}: a datagram from {} is longer than max_packet = {slot} \
                             bytes and was cut: not recorded, counted as lost; raise max_packet",
                            from.map_or_else(|| "?".to_owned(), |f| f.to_string())
                        );
                    }
                    continue;
                }
                let (t, kind) = receive_time(&a, map, at);
                stats.stamps.count(kind);
                source_text.clear();
                if let Some(f) = from {
                    use std::fmt::Write as _;
                    let _ = write!(source_text, "{f}");
                }
                let buf = sink.buffer(channel, r.data.len() + source_text.len() + 24);
                let payload = packet::encode_into(buf, t, &source_text, r.data);
                stats.packets.fetch_add(1, Ordering::Relaxed);
                stats
                    .bytes
                    .fetch_add(r.data.len() as u64, Ordering::Relaxed);
                let _ = sink.push(Envelope {
                    channel,
                    log_time: t,
                    publish_time: t,
                    payload,
                });
            }
            if let Some(d) = drops {
                drops_ledger.observe(&stats.kernel_drops, d);
            }
            if drops.is_some() || stats.truncated.load(Ordering::Relaxed) > 0 {
                sink.set_upstream_lost(
                    channel,
                    stats.kernel_drops.load(Ordering::Relaxed)
                        + stats.truncated.load(Ordering::Relaxed),
                );
            }
            Ok(())
        };
        let on_batch: &mut OnBatch<'_> = &mut on_batch;
        let mut snmp_last = (Instant::now(), snmp::read());
        let mut every = || {
            self.check_link()?;
            self.drops.poll(&self.stats.kernel_drops, &sock.socket);
            sink.set_upstream_lost(channel, self.lost());
            if snmp_last.0.elapsed() >= SNMP_LOG_EVERY {
                let now = snmp::read();
                if let (Some(a), Some(b)) = (snmp_last.1, now) {
                    if b.rcvbuf_errors > a.rcvbuf_errors {
                        tracing::warn!(
                            "udp {}: RcvbufErrors of this network namespace rose by {} in {} s \
                             ({} of them this socket's so far)",
                            self.cfg.topic,
                            b.rcvbuf_errors - a.rcvbuf_errors,
                            SNMP_LOG_EVERY.as_secs(),
                            self.stats.kernel_drops.load(Ordering::Relaxed)
                        );
                    }
                }
                snmp_last = (Instant::now(), now);
            }
            Ok(())
        };
        reader::read_until_stop(
            &sock.socket,
            &mut batch,
            sink,
            stop,
            &format!("recvmmsg on udp {}", self.cfg.bind),
            on_batch,
            &mut every,
        )
    }
}
