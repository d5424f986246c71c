//! `[ros]` of the configuration (or `edgerec record`'s flags) into the ROS
//! 2 source.

use std::sync::Arc;

use edgerec_config::Config;
use edgerec_format::msgdefs::DefinitionResolver;
use edgerec_ros::channels::PathDefinitions;
use edgerec_ros::dds::DdsSource;
use edgerec_ros::overrides::{read_overrides_file, QosOverride};
use edgerec_ros::qos::QosYamlStyle;
use edgerec_ros::{RosOptions, SelectionOptions};

/// The ROS source's options; an error names the key and the fix.
pub fn options(cfg: &Config) -> anyhow::Result<RosOptions> {
    let r = &cfg.ros;
    let domain_id = if r.domain_id >= 0 {
        r.domain_id as u32
    } else {
        match std::env::var("ROS_DOMAIN_ID") {
            Ok(v) if !v.trim().is_empty() => v.trim().parse::<u32>().ok().filter(|d| *d <= 232).ok_or_else(|| {
                anyhow::anyhow!("ROS_DOMAIN_ID={v:?} is not a ROS domain: use 0 to 232, or set ros.domain_id")
            })?,
            _ => 0,
        }
    };
    let mut overrides = if r.qos_overrides_path.as_os_str().is_empty() {
        Default::default()
    } else {
        read_overrides_file(&r.qos_overrides_path)?
    };
    for q in &r.qos {
        let mut o = QosOverride::default();
        for (k, v) in [
            ("reliability", q.reliability.as_str()),
            ("durability", q.durability.as_str()),
            ("history", q.history.as_str()),
        ] {
            o.set(k, v)
                .map_err(|e| anyhow::anyhow!("ros.qos for {}: {e}", q.topic))?;
        }
        if q.depth > 0 {
            o.depth = Some(q.depth);
        }
        overrides.insert(q.topic.clone(), o);
    }
    Ok(RosOptions {
        selection: SelectionOptions {
            all: r.all,
            topics: r.topics.clone(),
            regex: (!r.regex.is_empty()).then(|| r.regex.clone()),
            exclude: (!r.exclude.is_empty()).then(|| r.exclude.clone()),
            exclude_types: r.exclude_types.clone(),
            include_hidden: r.include_hidden,
        },
        discovery_interval: r.discovery_interval,
        domain_id,
        node_name: r.node_name.clone(),
        namespace: r.namespace.clone(),
        qos_overrides: overrides,
        msg_paths: r.msg_paths.clone(),
        qos_style: match cfg.recording.ros_distro {
            edgerec_config::RosDistro::Humble => QosYamlStyle::Humble,
            edgerec_config::RosDistro::Jazzy => QosYamlStyle::Jazzy,
        },
        max_topics: r.max_topics,
        reserved_topics: other_sources_topics(cfg),
        // A message must fit in the budget with room for the others'.
        max_sample_bytes: cfg.pipeline.memory_budget / 2,
    })
}

/// The topics the recorder's other sources record (synthetic, cameras'
/// video, CAN, UDP): a peer publishing on one of them is not recorded
/// into that source's channel.
fn other_sources_topics(cfg: &Config) -> Vec<String> {
    let mut t: Vec<String> = cfg
        .sources
        .synthetic
        .iter()
        .map(|s| s.topic.clone())
        .collect();
    t.extend(cfg.camera.iter().map(|c| c.video_topic()));
    t.extend(cfg.can.iter().flat_map(|c| c.topics()));
    t.extend(cfg.udp.iter().map(|u| u.topic.clone()));
    t
}

/// The ROS 2 source (DDS backend), or `None` when `[ros]` is off and no
/// camera transcodes a topic. `taps` are the cameras' input topics: (topic,
/// record it too, where its images go). With `[ros]` off they are the only
/// topics it subscribes to.
pub fn source(
    cfg: &Config,
    taps: Vec<crate::cameras::TopicInput>,
) -> anyhow::Result<Option<DdsSource>> {
    if !cfg.ros.enabled && taps.is_empty() {
        return Ok(None);
    }
    let mut opts = options(cfg)?;
    if !cfg.ros.enabled {
        // Only the cameras' input topics.
        opts.selection = SelectionOptions {
            topics: taps.iter().map(|(topic, _, _)| topic.clone()).collect(),
            ..SelectionOptions::default()
        };
    }
    let defs = PathDefinitions(DefinitionResolver::new(opts.msg_paths.clone()));
    let taps = taps
        .into_iter()
        .map(|(topic, record, tap)| edgerec_ros::setup::Tap {
            topic,
            type_name: "sensor_msgs/msg/Image".to_owned(),
            record,
            f: Arc::new(move |bytes: &[u8], at: u64, publisher: u64| {
                crate::cameras::offer(&tap, bytes, at, publisher)
            }),
        })
        .collect();
    let source = DdsSource::new(opts, Arc::new(defs))?.with_taps(taps)?;
    source.probe().map_err(|e| {
        anyhow::anyhow!(
            "ROS 2 over DDS cannot start: {e}; check CYCLONEDDS_URI (when set) and that a network interface with multicast is up, or set ros.enabled = false"
        )
    })?;
    Ok(Some(source))
}

/// What the ROS source publishes on `/diagnostics` and `/edgerec/status`:
/// the status board's latest snapshot.
pub fn health_feed(board: edgerec_health::status::StatusBoard) -> edgerec_ros::health::HealthFeed {
    Arc::new(move || {
        let json = board.json();
        if json.is_empty() {
            return None;
        }
        let diagnostics = board
            .diagnostics()
            .iter()
            .map(|d| edgerec_ros::health::Diagnostic {
                level: d.level,
                name: d.name.clone(),
                message: d.message.clone(),
                hardware_id: d.hardware_id.clone(),
                values: d.values.clone(),
            })
            .collect();
        Some(edgerec_ros::health::HealthReport {
            diagnostics,
            status_json: json.to_string(),
        })
    })
}
