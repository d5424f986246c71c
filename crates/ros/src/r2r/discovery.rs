//! The graph as rcl sees it, polled: every topic and type
//! (`rcl_get_topic_names_and_types`), then the publishers of each topic
//! the selection may record (`rcl_get_publishers_info_by_topic`), with
//! their gid and offered QoS. Topics the selection leaves out are not
//! asked about, so a large graph costs one query per recorded topic per
//! poll.

use crate::graph::Publication;
use crate::polled::gid_from_rmw;
use crate::selection::TopicSelection;
use crate::RosError;

use super::{qos, rcl_error};

/// edgerec's own node, whose publishers (`/rosout`, parameter events) are
/// not recorded, as the DDS backend skips its own participant.
#[derive(Debug, Clone)]
pub(super) struct OwnNode {
    /// The node's name.
    pub name: String,
    /// The node's namespace.
    pub namespace: String,
}

/// Every publisher present now on a topic the selection may record, in
/// topic order.
pub(super) fn poll(
    node: &::r2r::Node,
    selection: &TopicSelection,
    own: &OwnNode,
) -> Result<Vec<Publication>, RosError> {
    let mut topics: Vec<(String, Vec<String>)> = node
        .get_topic_names_and_types()
        .map_err(|e| rcl_error("rcl_get_topic_names_and_types", e))?
        .into_iter()
        .collect();
    topics.sort_unstable();
    let mut found = Vec::new();
    for (topic, types) in topics {
        if !types.iter().any(|t| selection.decide(&topic, t).is_ok()) {
            continue;
        }
        let infos = node
            .get_publishers_info_by_topic(&topic, false)
            .map_err(|e| rcl_error(format!("rcl_get_publishers_info_by_topic {topic}"), e))?;
        for info in infos {
            if info.node_name == own.name && info.node_namespace == own.namespace {
                continue;
            }
            let gid = gid_from_rmw(&info.endpoint_gid);
            found.push(Publication {
                gid,
                // rcl does not say which participant a publisher is on.
                participant: gid,
                topic: topic.clone(),
                type_name: info.topic_type,
                qos: qos::offered(&info.qos_profile),
                // r2r's TopicEndpointInfo leaves out Jazzy's type hash.
                type_hash: None,
            });
        }
    }
    Ok(found)
}
