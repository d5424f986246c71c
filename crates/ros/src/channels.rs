//! A subscribed topic as a recorder channel: its schema (the message
//! definition, or rosbag2's empty schema when none is known), its offered
//! QoS profiles and type hash as channel metadata, and whether it is
//! latched (transient-local: repeated at the start of every split).

use std::collections::BTreeMap;

use edgerec_source::ChannelSpec;

use crate::graph::TopicKey;
use crate::qos::{offered_profiles_yaml, Durability, QosProfile, QosYamlStyle, RequestQos};

/// Finds message definitions: the `ros.msg_paths` directories, then the
/// embedded set.
pub trait Definitions: Send + Sync {
    /// `(encoding, text)` of `type_name`'s schema, or why there is none.
    fn definition(&self, type_name: &str) -> Result<(String, String), String>;
}

/// Only the embedded definitions.
#[derive(Debug, Default, Clone, Copy)]
pub struct EmbeddedDefinitions;

impl Definitions for EmbeddedDefinitions {
    fn definition(&self, type_name: &str) -> Result<(String, String), String> {
        edgerec_format::msgdefs::lookup(type_name)
            .map(|d| (d.encoding.to_owned(), d.text().to_owned()))
            .ok_or_else(|| format!("no definition of {type_name} is embedded"))
    }
}

/// The `ros.msg_paths` directories first (`<dir>/<pkg>/msg/<Type>.msg`,
/// or `.idl`), then the embedded set, as rosbag2 reads the ament index.
#[derive(Debug)]
pub struct PathDefinitions(pub edgerec_format::msgdefs::DefinitionResolver);

impl Definitions for PathDefinitions {
    fn definition(&self, type_name: &str) -> Result<(String, String), String> {
        self.0
            .resolve(type_name)
            .map(|s| (s.encoding.to_owned(), s.data.to_string()))
            .map_err(|e| e.to_string())
    }
}

/// The channel spec of a topic, and a warning when its type has no known
/// definition (it is recorded all the same, with an empty schema, as
/// rosbag2 does; readers need the definition from elsewhere to decode it).
pub fn channel_spec(
    key: &TopicKey,
    request: &RequestQos,
    offers: &[QosProfile],
    type_hash: Option<&str>,
    style: QosYamlStyle,
    defs: &dyn Definitions,
) -> (ChannelSpec, Option<String>) {
    let (schema_encoding, schema, warning) = match defs.definition(&key.type_name) {
        Ok((enc, text)) => (enc, text.into_bytes(), None),
        Err(why) => (
            String::new(),
            Vec::new(),
            Some(format!(
                "{}: {why}; recorded with an empty schema (add its package to ros.msg_paths to \
                 record the definition)",
                key.topic
            )),
        ),
    };
    let mut metadata = BTreeMap::new();
    metadata.insert(
        "offered_qos_profiles".to_owned(),
        offered_profiles_yaml(offers, style),
    );
    if let Some(h) = type_hash {
        metadata.insert("topic_type_hash".to_owned(), h.to_owned());
    }
    (
        ChannelSpec {
            topic: key.topic.clone(),
            type_name: key.type_name.clone(),
            message_encoding: "cdr".into(),
            schema_encoding,
            schema,
            metadata,
            latched: request.durability == Durability::TransientLocal,
        },
        warning,
    )
}

/// The type hash in a Jazzy publisher's USER_DATA
/// (`typehash=RIHS01_<64 hex>;`), if there is one.
pub fn type_hash_from_user_data(user_data: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(user_data).ok()?;
    text.split(';').find_map(|kv| {
        let v = kv.trim().strip_prefix("typehash=")?;
        // RIHS01_ and 64 hex digits today; any later version keeps to
        // letters, digits and '_'.
        (v.starts_with("RIHS")
            && v.len() <= 80
            && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then(|| v.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qos::{History, Reliability};

    #[test]
    fn a_known_type_gets_its_definition_and_an_unknown_one_an_empty_schema() {
        let key = TopicKey {
            topic: "/imu".into(),
            type_name: "sensor_msgs/msg/Imu".into(),
        };
        let req = RequestQos {
            reliability: Reliability::Reliable,
            durability: Durability::TransientLocal,
            depth: 10,
        };
        let offer = QosProfile {
            history: History::Unknown,
            ..Default::default()
        };
        let (spec, warn) = channel_spec(
            &key,
            &req,
            &[offer],
            Some("RIHS01_ab"),
            QosYamlStyle::Humble,
            &EmbeddedDefinitions,
        );
        assert!(warn.is_none());
        assert_eq!(spec.schema_encoding, "ros2msg");
        assert!(String::from_utf8_lossy(&spec.schema).contains("MSG: std_msgs/Header"));
        assert!(spec.latched);
        assert!(spec.metadata["offered_qos_profiles"].starts_with("- history: 3\n"));
        assert_eq!(spec.metadata["topic_type_hash"], "RIHS01_ab");

        let key = TopicKey {
            topic: "/c".into(),
            type_name: "my_pkg/msg/Custom".into(),
        };
        let (spec, warn) = channel_spec(
            &key,
            &req,
            &[],
            None,
            QosYamlStyle::Humble,
            &EmbeddedDefinitions,
        );
        assert_eq!(spec.schema_encoding, "");
        assert!(spec.schema.is_empty());
        assert!(warn.unwrap().contains("ros.msg_paths"));
    }

    #[test]
    fn type_hash_comes_from_user_data() {
        let h = format!("RIHS01_{}", "a".repeat(64));
        assert_eq!(
            type_hash_from_user_data(format!("typehash={h};").as_bytes()),
            Some(h.clone())
        );
        assert_eq!(
            type_hash_from_user_data(format!("enclave=/;typehash={h};").as_bytes()),
            Some(h)
        );
        assert_eq!(type_hash_from_user_data(b"enclave=/;"), None);
        assert_eq!(type_hash_from_user_data(&[0xff, 0xfe]), None);
    }
}
