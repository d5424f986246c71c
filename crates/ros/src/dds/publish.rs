//! The recorder's own ROS 2 presence on the DDS backend: `/diagnostics`
//! and `/edgerec/status` once a second from the [`HealthFeed`], and the
//! node in `ros_discovery_info`, so `ros2 node list` and `ros2 topic info
//! -v` show `/edgerec` with its publishers.

use std::time::{Duration, Instant};

use super::ffi::{Participant, Writer};
use crate::discovery_info::{self, GidWire, NodeEntities};
use crate::graph::Gid;
use crate::health::{HealthFeed, DIAGNOSTICS_TOPIC, STATUS_TOPIC};
use crate::names;
use crate::qos::{Durability, QosYamlStyle, Reliability};
use crate::RosError;

/// How often the reports go out.
pub const PERIOD: Duration = Duration::from_secs(1);

/// The writers, made once per run.
pub struct HealthPublisher {
    feed: HealthFeed,
    diagnostics: Writer,
    status: Writer,
    /// Kept for the run: transient-local, so a `ros2` tool that starts
    /// later still learns of the node.
    _discovery: Writer,
    last: Option<Instant>,
}

impl HealthPublisher {
    /// Makes the writers on `dp` for the node `namespace`/`node`, and
    /// announces the node. The GID width follows the distribution (24
    /// bytes in Humble, 16 from Iron).
    pub fn new(
        dp: &Participant,
        feed: HealthFeed,
        namespace: &str,
        node: &str,
        style: QosYamlStyle,
    ) -> Result<Self, RosError> {
        let writer = |topic: &str, ty: &str| -> Result<Writer, RosError> {
            let dds_type = names::dds_type(ty).ok_or_else(|| RosError::Middleware {
                call: format!("publish {topic}"),
                reason: format!("{ty} is not a pkg/msg/Type name"),
            })?;
            let t = dp.blob_topic(&names::dds_topic(topic), &dds_type)?;
            dp.blob_writer(t, Reliability::Reliable, Durability::Volatile, 10)
        };
        let diagnostics = writer(DIAGNOSTICS_TOPIC, crate::diagnostics::DIAGNOSTIC_ARRAY_TYPE)?;
        let status = writer(STATUS_TOPIC, crate::diagnostics::STRING_TYPE)?;
        let t = dp.blob_topic(discovery_info::TOPIC, discovery_info::DDS_TYPE)?;
        let discovery = dp.blob_writer(t, Reliability::Reliable, Durability::TransientLocal, 1)?;
        let writers: Vec<Gid> = vec![diagnostics.gid(), status.gid()];
        let wire = match style {
            QosYamlStyle::Humble => GidWire::Bytes24,
            QosYamlStyle::Jazzy => GidWire::Bytes16,
        };
        let discovery_info = discovery_info::encode(
            &dp.gid(),
            &[NodeEntities {
                namespace,
                name: node,
                readers: &[],
                writers: &writers,
            }],
            wire,
        );
        discovery.write(&discovery_info)?;
        Ok(HealthPublisher {
            feed,
            diagnostics,
            status,
            _discovery: discovery,
            last: None,
        })
    }

    /// Publishes the latest report when a period has passed; `now_ns`
    /// stamps the diagnostics.
    pub fn tick(&mut self, now_ns: u64) -> Result<(), RosError> {
        if self.last.is_some_and(|t| t.elapsed() < PERIOD) {
            return Ok(());
        }
        self.last = Some(Instant::now());
        let Some(report) = (self.feed)() else {
            return Ok(());
        };
        self.diagnostics.write(&report.diagnostic_array(now_ns))?;
        self.status.write(&report.status_string())?;
        Ok(())
    }
}
