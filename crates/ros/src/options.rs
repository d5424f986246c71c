//! The ROS source's options, from `[ros]` or `edgerec record`'s flags.

use std::path::PathBuf;
use std::time::Duration;

use crate::overrides::QosOverrides;
use crate::qos::QosYamlStyle;
use crate::selection::SelectionOptions;
use crate::RosError;

/// Everything the ROS source needs to know.
#[derive(Debug, Clone)]
pub struct RosOptions {
    /// Which topics.
    pub selection: SelectionOptions,
    /// How often the graph is looked at for new publishers (rosbag2's
    /// polling interval; DDS discovery itself is continuous).
    pub discovery_interval: Duration,
    /// ROS domain id (`ROS_DOMAIN_ID`), 0..=232.
    pub domain_id: u32,
    /// The node's name.
    pub node_name: String,
    /// The node's namespace (`/` or `/robot`).
    pub namespace: String,
    /// Per-topic QoS overrides.
    pub qos_overrides: QosOverrides,
    /// Directories searched for `<pkg>/msg/<Type>.msg` before the
    /// embedded definitions.
    pub msg_paths: Vec<PathBuf>,
    /// How offered QoS profiles are written (matches the bag's metadata
    /// version).
    pub qos_style: QosYamlStyle,
    /// The most topics recorded from the graph (`ros.max_topics`).
    pub max_topics: usize,
    /// Topics other sources of the recorder record: never taken from the
    /// graph.
    pub reserved_topics: Vec<String>,
    /// The largest sample taken from DDS (Cyclone's `MaxSampleSize`): the
    /// binary sets half the pipeline's memory budget.
    pub max_sample_bytes: u64,
}

impl Default for RosOptions {
    fn default() -> Self {
        RosOptions {
            selection: SelectionOptions::default(),
            discovery_interval: Duration::from_millis(100),
            domain_id: 0,
            node_name: "edgerec".into(),
            namespace: "/".into(),
            qos_overrides: QosOverrides::new(),
            msg_paths: Vec::new(),
            qos_style: QosYamlStyle::Humble,
            max_topics: crate::graph::DEFAULT_MAX_TOPICS,
            reserved_topics: Vec::new(),
            max_sample_bytes: 128 << 20,
        }
    }
}

impl RosOptions {
    /// Checks that `domain_id` is a ROS domain; a mistake is a
    /// configuration error, not a restart.
    pub fn check_domain(&self) -> Result<(), RosError> {
        if self.domain_id > 232 {
            return Err(RosError::Selection {
                what: "domain_id".into(),
                reason: format!(
                    "{} is not a ROS domain: use 0 to 232 (ROS_DOMAIN_ID)",
                    self.domain_id
                ),
            });
        }
        Ok(())
    }
}
