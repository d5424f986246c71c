//! ROS 2 names on DDS, as every DDS-based RMW maps them: a topic `/a/b`
//! is the DDS topic `rt/a/b`, a service `/s` the topics `rq/sRequest` and
//! `rr/sReply`, and a type `pkg/msg/Type` the DDS type
//! `pkg::msg::dds_::Type_`.

/// The DDS topic prefix of ROS 2 topics.
pub const TOPIC_PREFIX: &str = "rt";

/// `rt/imu` -> `/imu`; `None` for DDS topics that are not ROS 2 topics
/// (services, `ros_discovery_info`, built-in topics, foreign DDS apps).
pub fn ros_topic(dds_topic: &str) -> Option<String> {
    let rest = dds_topic.strip_prefix("rt/")?;
    (!rest.is_empty()).then(|| format!("/{rest}"))
}

/// `/imu` -> `rt/imu`.
pub fn dds_topic(ros_topic: &str) -> String {
    format!("{TOPIC_PREFIX}/{}", ros_topic.trim_start_matches('/'))
}

/// A service's request and reply DDS topics: `/edgerec/pause` ->
/// (`rq/edgerec/pauseRequest`, `rr/edgerec/pauseReply`).
pub fn service_topics(service: &str) -> (String, String) {
    let s = service.trim_start_matches('/');
    (format!("rq/{s}Request"), format!("rr/{s}Reply"))
}

/// `sensor_msgs::msg::dds_::Imu_` -> `sensor_msgs/msg/Imu`; `None` when
/// the name is not a ROS 2 message type.
pub fn ros_type(dds_type: &str) -> Option<String> {
    let parts: Vec<&str> = dds_type.split("::").collect();
    match parts.as_slice() {
        [pkg, kind, "dds_", ty] if !pkg.is_empty() && !kind.is_empty() => {
            let ty = ty.strip_suffix('_')?;
            (!ty.is_empty()).then(|| format!("{pkg}/{kind}/{ty}"))
        }
        _ => None,
    }
}

/// `sensor_msgs/msg/Imu` -> `sensor_msgs::msg::dds_::Imu_`; a name
/// without the interface kind (`sensor_msgs/Imu`) is taken as `msg`.
pub fn dds_type(ros_type: &str) -> Option<String> {
    let parts: Vec<&str> = ros_type.split('/').collect();
    let (pkg, kind, ty) = match parts.as_slice() {
        [pkg, kind, ty] => (*pkg, *kind, *ty),
        [pkg, ty] => (*pkg, "msg", *ty),
        _ => return None,
    };
    (!pkg.is_empty() && !kind.is_empty() && !ty.is_empty())
        .then(|| format!("{pkg}::{kind}::dds_::{ty}_"))
}

/// A hidden topic: one of its name's tokens starts with `_` (rosbag2
/// leaves them out unless `--include-hidden-topics`).
pub fn is_hidden(topic: &str) -> bool {
    topic.split('/').any(|t| t.starts_with('_'))
}

/// Checks a topic name as ROS 2 requires it of a fully qualified name:
/// starts with `/`, tokens of `[A-Za-z0-9_]` not starting with a digit, no
/// empty token, no trailing `/`. Returns what is wrong.
pub fn validate_topic(topic: &str) -> Result<(), String> {
    let Some(rest) = topic.strip_prefix('/') else {
        return Err(format!("{topic:?} does not start with '/'"));
    };
    if rest.is_empty() {
        return Err("\"/\" is not a topic".into());
    }
    for token in rest.split('/') {
        if token.is_empty() {
            return Err(format!(
                "{topic:?} has an empty token ('//' or a trailing '/')"
            ));
        }
        if token.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!("{topic:?}: token {token:?} starts with a digit"));
        }
        if let Some(c) = token
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
        {
            return Err(format!(
                "{topic:?}: character {c:?} is not allowed in a topic name"
            ));
        }
    }
    Ok(())
}

/// The longest topic or type name taken from the graph: DDS topic names
/// are at most 256 bytes with the `rt` prefix.
pub const MAX_NAME_BYTES: usize = 255;

/// Checks a type name from the graph: `pkg/kind/Type`, each token of
/// `[A-Za-z0-9_]` starting with a letter, at most [`MAX_NAME_BYTES`].
pub fn validate_type(type_name: &str) -> Result<(), String> {
    if type_name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "a type name of {} bytes (at most {MAX_NAME_BYTES})",
            type_name.len()
        ));
    }
    let parts: Vec<&str> = type_name.split('/').collect();
    if parts.len() != 3 {
        return Err(format!("{type_name:?} is not pkg/kind/Type"));
    }
    for token in parts {
        if !token.starts_with(|c: char| c.is_ascii_alphabetic())
            || !token.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(format!(
                "{type_name:?}: token {token:?} is not a letter then letters, digits and '_'"
            ));
        }
    }
    Ok(())
}

/// Checks a topic name from the graph: [`validate_topic`] and at most
/// [`MAX_NAME_BYTES`].
pub fn validate_graph_topic(topic: &str) -> Result<(), String> {
    if topic.len() > MAX_NAME_BYTES {
        return Err(format!(
            "a topic name of {} bytes (at most {MAX_NAME_BYTES})",
            topic.len()
        ));
    }
    validate_topic(topic)
}

/// Expands a topic given on the command line or in the config the way
/// `ros2 bag record` does for a node in `namespace`: `imu` -> `/ns/imu`,
/// `/imu` stays, `~/x` -> `/ns/node/x`.
pub fn expand_topic(topic: &str, namespace: &str, node: &str) -> String {
    let ns = namespace.trim_end_matches('/');
    if let Some(private) = topic.strip_prefix("~/") {
        format!("{ns}/{node}/{private}")
    } else if topic.starts_with('/') {
        topic.to_owned()
    } else {
        format!("{ns}/{topic}")
    }
}

/// A node's fully qualified name: `/ns/node`.
pub fn node_fqn(namespace: &str, node: &str) -> String {
    format!("{}/{node}", namespace.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_map_both_ways() {
        assert_eq!(ros_topic("rt/imu").as_deref(), Some("/imu"));
        assert_eq!(ros_topic("rt/a/b/c").as_deref(), Some("/a/b/c"));
        assert_eq!(ros_topic("rq/x/pauseRequest"), None);
        assert_eq!(ros_topic("ros_discovery_info"), None);
        assert_eq!(ros_topic("DCPSPublication"), None);
        assert_eq!(ros_topic("rt/"), None);
        assert_eq!(dds_topic("/imu"), "rt/imu");
        assert_eq!(dds_topic("/a/b"), "rt/a/b");
        assert_eq!(
            service_topics("/edgerec/pause"),
            (
                "rq/edgerec/pauseRequest".into(),
                "rr/edgerec/pauseReply".into()
            )
        );
    }

    #[test]
    fn types_map_both_ways() {
        assert_eq!(
            ros_type("sensor_msgs::msg::dds_::Imu_").as_deref(),
            Some("sensor_msgs/msg/Imu")
        );
        assert_eq!(
            ros_type("rosbag2_interfaces::srv::dds_::Pause_Request_").as_deref(),
            Some("rosbag2_interfaces/srv/Pause_Request")
        );
        assert_eq!(ros_type("Imu"), None);
        assert_eq!(ros_type("sensor_msgs::msg::Imu"), None);
        assert_eq!(ros_type("a::msg::dds_::_"), None);
        assert_eq!(
            dds_type("sensor_msgs/msg/Imu").as_deref(),
            Some("sensor_msgs::msg::dds_::Imu_")
        );
        assert_eq!(
            dds_type("std_msgs/String").as_deref(),
            Some("std_msgs::msg::dds_::String_")
        );
        assert_eq!(dds_type("String"), None);
    }

    #[test]
    fn hidden_and_valid_names() {
        assert!(is_hidden("/_hidden"));
        assert!(is_hidden("/a/_b/c"));
        assert!(!is_hidden("/a_b/c_"));
        assert!(validate_topic("/imu").is_ok());
        assert!(validate_topic("/a/b_2").is_ok());
        assert!(validate_topic("imu").is_err());
        assert!(validate_topic("/a//b").is_err());
        assert!(validate_topic("/a/").is_err());
        assert!(validate_topic("/2a").is_err());
        assert!(validate_topic("/a-b").is_err());
        assert!(validate_topic("/").is_err());
    }

    #[test]
    fn relative_names_expand_in_the_namespace() {
        assert_eq!(expand_topic("imu", "/", "edgerec"), "/imu");
        assert_eq!(expand_topic("imu", "/robot", "edgerec"), "/robot/imu");
        assert_eq!(expand_topic("/imu", "/robot", "edgerec"), "/imu");
        assert_eq!(expand_topic("~/pause", "/", "edgerec"), "/edgerec/pause");
        assert_eq!(node_fqn("/", "edgerec"), "/edgerec");
        assert_eq!(node_fqn("/r", "edgerec"), "/r/edgerec");
    }
}
