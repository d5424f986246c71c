//! The `dds` backend: Cyclone DDS through cyclors, raw CDR, no ROS
//! install.
//!
//! One participant per run. Every discovery interval the run thread takes
//! what changed in `DCPSPublication`, lets the [`Graph`] decide, and makes
//! or remakes readers; each reader's data-available listener (on a
//! Cyclone receive thread) takes the serialized samples and pushes them
//! into the sink without blocking. A failure inside a listener ends the
//! run with an error, so the supervisor restarts the source with a fresh
//! participant while every other source keeps recording.

pub mod count;
mod ffi;
mod publish;
mod reader;
mod serve;

use std::collections::HashMap;
use std::sync::Arc;

use edgerec_source::{Source, SourceError, SourceSink, Stop};

use crate::channels::{type_hash_from_user_data, Definitions};
use crate::control::ControlSlot;
use crate::graph::{Action, Gid, Publication, TopicKey};
use crate::health::HealthFeed;
use crate::names;
use crate::options::RosOptions;
use crate::setup::RosSetup;
use crate::stats::StatsTable;
use crate::RosError;

pub use crate::stats::TopicStats;
pub use ffi::Participant;

/// The Cyclone DDS configuration edgerec uses when `CYCLONEDDS_URI` is not
/// set: a large socket receive buffer, so multi-MB samples are not dropped
/// by the kernel (rmw_cyclonedds issue 137); `max` asks without failing
/// where `net.core.rmem_max` is lower (the board raises it).
pub const DEFAULT_CONFIG: &str = "<CycloneDDS><Domain Id=\"any\"><Internal>\
<SocketReceiveBufferSize min=\"default\" max=\"64MB\"/>\
</Internal></Domain></CycloneDDS>";

/// [`DEFAULT_CONFIG`] with Cyclone DDS's `MaxSampleSize`: a sample whose
/// serialized size is over `max_sample_bytes` (at least 64 KiB, at most
/// 2 GiB - 1) is discarded by Cyclone on receipt, with a warning, before
/// edgerec sees or copies it.
pub fn config_xml(max_sample_bytes: u64) -> String {
    let max = max_sample_bytes.clamp(64 << 10, i32::MAX as u64);
    DEFAULT_CONFIG.replace(
        "</Internal>",
        &format!("<MaxSampleSize>{max}B</MaxSampleSize></Internal>"),
    )
}

/// The ROS 2 source on Cyclone DDS.
pub struct DdsSource {
    setup: RosSetup,
    health: Option<HealthFeed>,
    controls: Option<ControlSlot>,
}

impl DdsSource {
    /// Checks the options (a mistake is a configuration error, not a
    /// restart) and makes the source.
    pub fn new(opts: RosOptions, defs: Arc<dyn Definitions>) -> Result<Self, RosError> {
        Ok(DdsSource {
            setup: RosSetup::new(opts, defs)?,
            health: None,
            controls: None,
        })
    }

    /// Also publish `/diagnostics` and `/edgerec/status` from `feed`, once
    /// a second, and announce the node in `ros_discovery_info`.
    pub fn with_health(mut self, feed: HealthFeed) -> Self {
        self.health = Some(feed);
        self
    }

    /// Starts and stops a participant with the configuration a run will
    /// use: checked once at start-up, so a DDS that cannot start (a bad
    /// `CYCLONEDDS_URI`, no usable network interface) is an error before
    /// anything is recorded, not a source restarting for ever.
    pub fn probe(&self) -> Result<(), RosError> {
        let xml = config_xml(self.setup.opts.max_sample_bytes);
        let config = std::env::var_os("CYCLONEDDS_URI")
            .is_none()
            .then_some(xml.as_str());
        Participant::new(self.setup.opts.domain_id, config).map(drop)
    }

    /// Also answer rosbag2's recorder services and `~/trigger` with the
    /// controls `slot` will hold.
    pub fn with_controls(mut self, slot: ControlSlot) -> Self {
        self.controls = Some(slot);
        self
    }

    /// Also hands each tap's topic to it (see [`RosSetup::with_taps`]).
    pub fn with_taps(mut self, taps: Vec<crate::setup::Tap>) -> Result<Self, RosError> {
        self.setup = self.setup.with_taps(taps)?;
        Ok(self)
    }

    /// Per-topic counts (received, lost upstream), for the status.
    pub fn stats(&self) -> Arc<StatsTable> {
        self.setup.stats.clone()
    }
}

impl Source for DdsSource {
    fn name(&self) -> String {
        "ros".into()
    }

    fn run(&mut self, sink: &SourceSink, stop: &Stop) -> Result<(), SourceError> {
        let setup = &self.setup;
        let device = |e: RosError| SourceError::Device {
            device: format!("ros (dds, domain {})", setup.opts.domain_id),
            reason: e.to_string(),
        };
        let xml = config_xml(setup.opts.max_sample_bytes);
        let config = std::env::var_os("CYCLONEDDS_URI")
            .is_none()
            .then_some(xml.as_str());
        let dp = Participant::new(setup.opts.domain_id, config).map_err(device)?;
        let disco = dp.publication_reader().map_err(device)?;
        let own = dp.gid();
        let mut health = match &self.health {
            Some(feed) => Some(
                publish::HealthPublisher::new(
                    &dp,
                    feed.clone(),
                    &setup.opts.namespace,
                    &setup.opts.node_name,
                    setup.opts.qos_style,
                )
                .map_err(device)?,
            ),
            None => None,
        };
        let services = match &self.controls {
            Some(slot) => Some(
                serve::Services::new(
                    &dp,
                    slot.clone(),
                    &setup.opts.namespace,
                    &setup.opts.node_name,
                )
                .map_err(device)?,
            ),
            None => None,
        };
        let mut graph = setup.graph();
        let mut handles: HashMap<u64, Gid> = HashMap::new();
        let mut readers: HashMap<TopicKey, reader::TopicReader> = HashMap::new();
        loop {
            sink.alive();
            let mut actions = Vec::new();
            for ev in disco.take().map_err(device)? {
                match ev {
                    ffi::PublicationEvent::Alive {
                        handle,
                        gid,
                        participant,
                        topic,
                        type_name,
                        qos,
                        user_data,
                    } => {
                        if participant == own {
                            continue;
                        }
                        let (Some(topic), Some(type_name)) =
                            (names::ros_topic(&topic), names::ros_type(&type_name))
                        else {
                            continue;
                        };
                        actions.extend(graph.add(Publication {
                            gid,
                            participant,
                            topic,
                            type_name,
                            qos,
                            type_hash: type_hash_from_user_data(&user_data),
                        }));
                        // Only publishers the graph took are remembered: a
                        // refused one costs nothing but its count.
                        if graph.knows(&gid) {
                            handles.insert(handle, gid);
                        }
                    }
                    ffi::PublicationEvent::Gone { handle } => {
                        if let Some(gid) = handles.remove(&handle) {
                            if let Some(p) = graph.remove(&gid) {
                                tracing::info!(topic = %p.topic, "a publisher left; its channel stays open for its return");
                            }
                        }
                    }
                }
            }
            for a in actions {
                match a {
                    Action::Warn(w) => setup.warn(w),
                    Action::Subscribe {
                        key,
                        request,
                        offers,
                        type_hash,
                    } => {
                        let (tap, record) = setup.tap_for(&key);
                        let channel = if record {
                            let spec =
                                setup.channel_spec(&key, &request, &offers, type_hash.as_deref());
                            match sink.register(spec) {
                                Ok(id) => Some(id),
                                // Another source's channel, or no channel
                                // left: this topic is not recorded, every
                                // other one still is.
                                Err(e) => {
                                    setup.warn(format!("{} is not recorded: {e}", key.topic));
                                    continue;
                                }
                            }
                        } else {
                            None
                        };
                        let r = reader::TopicReader::new(
                            &dp,
                            &key,
                            &request,
                            sink,
                            (channel, tap),
                            &setup.stats,
                        )
                        .map_err(device)?;
                        tracing::info!(topic = %key.topic, type_name = %key.type_name, ?request, "recording");
                        readers.insert(key, r);
                    }
                    Action::Resubscribe { key, request } => {
                        if let Some(old) = readers.remove(&key) {
                            let r = old.remake(&dp, &request).map_err(device)?;
                            tracing::info!(topic = %key.topic, ?request, "QoS changed with the publishers: reader made again");
                            readers.insert(key, r);
                        }
                    }
                }
            }
            for r in readers.values() {
                r.poll_loss();
                if let Some(why) = r.failure() {
                    return Err(SourceError::Device {
                        device: format!("ros reader {}", r.topic()),
                        reason: why,
                    });
                }
            }
            setup.set_missing(&graph);
            if let Some(h) = &mut health {
                h.tick(sink.now_ns()).map_err(device)?;
            }
            if let Some(s) = &services {
                s.serve().map_err(device)?;
            }
            if stop.wait_timeout(setup.opts.discovery_interval) {
                break;
            }
        }
        // Readers go before the participant: each deletion waits for its
        // listener to return, then frees what the listener used.
        drop(readers);
        drop(health);
        drop(services);
        drop(disco);
        drop(dp);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_size_limit_goes_into_the_internal_section() {
        let xml = config_xml(256 << 20);
        assert!(
            xml.contains("<MaxSampleSize>268435456B</MaxSampleSize></Internal>"),
            "{xml}"
        );
        assert!(xml.contains("SocketReceiveBufferSize"), "{xml}");
        assert!(config_xml(1).contains("<MaxSampleSize>65536B<"));
        assert!(config_xml(u64::MAX).contains("<MaxSampleSize>2147483647B<"));
    }
}
