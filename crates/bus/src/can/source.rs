//! A `[[can]]` interface as a [`Source`]: one `CAN_RAW` socket per run,
//! read in `recvmmsg` batches beside the stop's eventfd; every frame one
//! message, stamped with the kernel's receive time on the recording clock.
//!
//! A run fails, and the supervisor retries it with backoff while every
//! other source records on, when the interface is missing (a USB adapter
//! unplugged), down, or without a carrier (a controller gone bus-off, no
//! bus), checked at start and every [`crate::reader::CHECK_EVERY`], or when
//! the socket reports an error (`ENETDOWN` when the interface goes down
//! under it). A kernel without SocketCAN is a configuration error: no
//! restart can cure it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use edgerec_config::CanConfig;
use edgerec_format::bag::qos_profile_yaml;
use edgerec_source::{ChannelId, ChannelSpec, Envelope, Source, SourceError, SourceSink, Stop};

use crate::ancillary;
use crate::can::frame::{CanFrame, CANFD_MTU, FD_FRAME_TYPE, FRAME_TYPE};
use crate::can::socket::{CanSocket, OpenError};
use crate::drops::DropLedger;
use crate::reader::{self, OnBatch};
use crate::stamp::{receive_time, StampCounts};
use crate::sys::{self, RecvBatch};

/// Frames read per `recvmmsg`.
const BATCH: usize = 64;

/// What a CAN source has recorded, for tests and the bench.
#[derive(Debug, Default)]
pub struct CanStats {
    /// Classic frames pushed (data, remote and error frames).
    pub frames: AtomicU64,
    /// CAN FD frames pushed.
    pub fd_frames: AtomicU64,
    /// Of the classic frames, error frames.
    pub error_frames: AtomicU64,
    /// Reads that were no frame (counted, never recorded).
    pub malformed: AtomicU64,
    /// Frames the kernel dropped (receive buffer full), every run.
    pub kernel_drops: AtomicU64,
    /// Which stamps the receive times came from.
    pub stamps: StampCounts,
}

/// One CAN interface.
#[derive(Debug)]
pub struct CanSource {
    cfg: CanConfig,
    stats: Arc<CanStats>,
    /// Kernel drops of the sockets of earlier runs.
    drops: DropLedger,
}

/// The channel of one of an interface's topics.
pub fn channel_spec(cfg: &CanConfig, fd: bool) -> ChannelSpec {
    let (topic, ty) = if fd {
        (cfg.fd_topic(), FD_FRAME_TYPE)
    } else {
        (cfg.classic_topic(), FRAME_TYPE)
    };
    let schema = edgerec_format::msgdefs::lookup(ty)
        .map(|d| d.text().as_bytes().to_vec())
        .unwrap_or_default();
    let filters: Vec<String> = cfg
        .filters
        .iter()
        .map(|f| {
            let digits = if f.id & 0x8000_0000 != 0 { 8 } else { 3 };
            let id = f.id & 0x1FFF_FFFF;
            let sep = if f.inverted { '~' } else { ':' };
            format!("{id:0digits$X}{sep}{:X}", f.mask)
        })
        .collect();
    let mut metadata = BTreeMap::from([
        ("interface".to_owned(), cfg.interface.clone()),
        (
            "filters".to_owned(),
            if filters.is_empty() {
                "all".to_owned()
            } else {
                filters.join(",")
            },
        ),
        ("error_frames".to_owned(), cfg.error_frames.to_string()),
        (
            // ros2_socketcan publishes with a reliable depth-100 QoS.
            "offered_qos_profiles".to_owned(),
            qos_profile_yaml(true, false, 100),
        ),
    ]);
    if fd {
        metadata.insert("can_fd".to_owned(), "true".to_owned());
    }
    ChannelSpec {
        topic,
        type_name: ty.to_owned(),
        message_encoding: "cdr".to_owned(),
        schema_encoding: "ros2msg".to_owned(),
        schema,
        metadata,
        latched: false,
    }
}

impl CanSource {
    /// A source for one `[[can]]` entry.
    pub fn new(cfg: &CanConfig) -> CanSource {
        CanSource {
            cfg: cfg.clone(),
            stats: Arc::new(CanStats::default()),
            drops: DropLedger::default(),
        }
    }

    /// Its counters.
    pub fn stats(&self) -> Arc<CanStats> {
        self.stats.clone()
    }

    fn device(&self, reason: String) -> SourceError {
        SourceError::Device {
            device: self.cfg.interface.clone(),
            reason,
        }
    }

    /// The interface exists, is up and has a carrier.
    fn check_link(&self) -> Result<(), SourceError> {
        let iface = &self.cfg.interface;
        let link = sys::link_state(iface).map_err(|e| {
            self.device(format!(
                "no such interface ({e}); a USB adapter may be unplugged (`ip link show type can`)"
            ))
        })?;
        if !link.up {
            return Err(self.device(
                "is down; bring it up with its bitrate (systemd-networkd, or \
                 `ip link set IF up type can bitrate N restart-ms 100`)"
                    .replace("IF", iface),
            ));
        }
        if !link.running {
            return Err(self.device(
                "has no carrier: the controller is bus-off or the bus is gone; with restart-ms \
                 set the controller restarts itself"
                    .to_owned(),
            ));
        }
        Ok(())
    }
}

impl Source for CanSource {
    fn name(&self) -> String {
        format!("can {}", self.cfg.interface)
    }

    fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError> {
        let classic = sink.register(channel_spec(&self.cfg, false))?;
        let fd = if self.cfg.fd {
            Some(sink.register(channel_spec(&self.cfg, true))?)
        } else {
            None
        };
        self.check_link()?;
        let sock = CanSocket::open(&self.cfg).map_err(|e| match e {
            OpenError::NoCan(_) => SourceError::Config {
                reason: e.to_string(),
            },
            other => self.device(other.to_string()),
        })?;
        tracing::info!(
            "can {}: recording; stamps {}; receive buffer {} KiB",
            self.cfg.interface,
            sock.stamps.as_str(),
            sock.receive_buffer / 1024
        );
        crate::drops::say_how_counted(&self.name(), sock.overflow_count, &sock.socket);
        let result = self.read(sink, stop, &sock, classic, fd);
        // What the kernel dropped on this socket, up to its end.
        self.drops.end_run(&self.stats.kernel_drops, &sock.socket);
        sink.set_upstream_lost(classic, self.stats.kernel_drops.load(Ordering::Relaxed));
        result
    }
}

impl CanSource {
    fn read(
        &self,
        sink: &SourceSink,
        stop: &Stop,
        sock: &CanSocket,
        classic: ChannelId,
        fd: Option<ChannelId>,
    ) -> Result<(), SourceError> {
        let iface = self.cfg.interface.clone();
        let stats = self.stats.clone();
        let drops_ledger = &self.drops;
        let mut malformed_logged = false;
        let mut batch = RecvBatch::new(BATCH, CANFD_MTU);
        let mut on_batch = |b: &RecvBatch, n: usize, map: &edgerec_source::ClockMap, at: u64| {
            let mut drops = None;
            for i in 0..n {
                let r = b.get(i);
                let a = ancillary::parse(r.control);
                if a.drops.is_some() {
                    drops = a.drops;
                }
                let frame = match CanFrame::from_kernel(r.data) {
                    Ok(f) => f,
                    Err(e) => {
                        stats.malformed.fetch_add(1, Ordering::Relaxed);
                        if !malformed_logged {
                            malformed_logged = true;
                            tracing::warn!(
                                "can {iface}: a read that is no frame, not recorded: {e}"
                            );
                        }
                        continue;
                    }
                };
                let (t, kind) = receive_time(&a, map, at);
                stats.stamps.count(kind);
                let channel = match (frame.fd, fd) {
                    (true, Some(c)) => {
                        stats.fd_frames.fetch_add(1, Ordering::Relaxed);
                        c
                    }
                    _ => {
                        stats.frames.fetch_add(1, Ordering::Relaxed);
                        if frame.is_error() {
                            stats.error_frames.fetch_add(1, Ordering::Relaxed);
                        }
                        classic
                    }
                };
                let buf = sink.buffer(channel, 128);
                let payload = frame.encode_into(buf, t, &iface);
                let _ = sink.push(Envelope {
                    channel,
                    log_time: t,
                    publish_time: t,
                    payload,
                });
            }
            if let Some(d) = drops {
                sink.set_upstream_lost(classic, drops_ledger.observe(&stats.kernel_drops, d));
            }
            Ok(())
        };
        let on_batch: &mut OnBatch<'_> = &mut on_batch;
        let mut every = || {
            self.check_link()?;
            let total = self.drops.poll(&self.stats.kernel_drops, &sock.socket);
            sink.set_upstream_lost(classic, total);
            Ok(())
        };
        reader::read_until_stop(
            &sock.socket,
            &mut batch,
            sink,
            stop,
            &format!("recvmmsg on {}", self.cfg.interface),
            on_batch,
            &mut every,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_carry_the_types_their_definitions_and_the_interface() {
        let mut cfg = CanConfig::new("can1");
        cfg.fd = true;
        cfg.filters = vec![
            edgerec_config::CanFilter {
                id: 0x123,
                mask: 0x7ff,
                inverted: false,
            },
            edgerec_config::CanFilter {
                id: 0x8000_0100,
                mask: 0x1fff_ff00,
                inverted: true,
            },
        ];
        let c = channel_spec(&cfg, false);
        assert_eq!(
            (c.topic.as_str(), c.type_name.as_str()),
            ("/can/can1", FRAME_TYPE)
        );
        assert!(String::from_utf8(c.schema)
            .unwrap()
            .starts_with("std_msgs/Header header\n"));
        assert_eq!(c.metadata["interface"], "can1");
        assert_eq!(c.metadata["filters"], "123:7FF,00000100~1FFFFF00");
        let f = channel_spec(&cfg, true);
        assert_eq!(
            (f.topic.as_str(), f.type_name.as_str()),
            ("/can/can1/fd", FD_FRAME_TYPE)
        );
        assert!(String::from_utf8(f.schema)
            .unwrap()
            .contains("uint8[<=64] data"));
        assert_eq!(CanSource::new(&cfg).name(), "can can1");
    }
}
