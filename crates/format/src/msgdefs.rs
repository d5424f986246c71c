//! ROS 2 message definitions in rosbag2's concatenated `ros2msg` form, the
//! schema data of every channel in a rosbag2 MCAP file.
//!
//! Each definition is the top-level `.msg` text followed, for every message
//! type it uses (transitively, each once, depth first in order of first use),
//! by `"\n"`, a line of 80 `=`, `MSG: pkg/Type` and that type's `.msg` text.
//! The common ROS 2 Humble interfaces (std_msgs, geometry_msgs, sensor_msgs,
//! nav_msgs, tf2_msgs and the rest; the list and each file's provenance are
//! in `crates/format/msg/README.md`) are embedded, so a robot without a ROS
//! install still records rosbag2-style schemas; `build.rs` turns every file
//! under `msg/` into an entry of the table. A [`DefinitionResolver`] looks in
//! `ros.msg_paths` directories first (how rosbag2 reads the ament index) and
//! falls back to the embedded set.
//!
//! ```
//! use edgerec_format::msgdefs;
//!
//! let imu = msgdefs::lookup("sensor_msgs/Imu").expect("embedded");
//! assert_eq!(imu.name, "sensor_msgs/msg/Imu");
//! assert_eq!(imu.encoding, "ros2msg");
//! assert!(imu.text().contains("\nMSG: std_msgs/Header\n"));
//! assert!(msgdefs::all().iter().any(|d| d.name == "foxglove_msgs/msg/CompressedVideo"));
//!
//! // No directories: the embedded set only.
//! let resolver = msgdefs::DefinitionResolver::new(Vec::new());
//! let odom = resolver.resolve("nav_msgs/msg/Odometry").expect("embedded");
//! assert_eq!(&*odom.data, msgdefs::lookup("nav_msgs/Odometry").unwrap().text());
//! ```

use std::sync::OnceLock;

pub(crate) mod concat;
mod resolver;

pub use resolver::{DefinitionError, DefinitionOrigin, DefinitionResolver, Schema};

use concat::{concatenate, split_type_name, Format};

/// One embedded message type and its rosbag2 schema.
#[derive(Debug)]
pub struct MessageDefinition {
    /// Full type name as rosbag2 writes it in schema records, e.g. `sensor_msgs/msg/Imu`.
    pub name: &'static str,
    /// Schema encoding, always `ros2msg`.
    pub encoding: &'static str,
    /// The type's own `.msg` file.
    msg: &'static str,
    /// The concatenated definition, built on first use.
    full: OnceLock<String>,
}

impl MessageDefinition {
    /// An entry of the table `build.rs` writes.
    const fn embedded(name: &'static str, msg: &'static str) -> Self {
        Self {
            name,
            encoding: "ros2msg",
            msg,
            full: OnceLock::new(),
        }
    }

    /// The type's own `.msg` text, as the package installs it.
    pub fn msg(&self) -> &'static str {
        self.msg
    }

    /// The concatenated definition (top-level `.msg` text, then each dependency after
    /// its `MSG:` header): the data of the MCAP schema record. Built once, then shared.
    pub fn text(&self) -> &'static str {
        // Only this module builds MessageDefinitions, all in the static table, so
        // `self` is in it; finding it there gives the borrow its 'static lifetime.
        let this = DEFINITIONS
            .iter()
            .find(|d| std::ptr::eq(*d, self))
            .expect("MessageDefinitions exist only in the static table");
        this.full
            .get_or_init(|| concatenate_embedded(this))
            .as_str()
    }
}

// `static DEFINITIONS: [MessageDefinition; N]`, one entry per
// `msg/<pkg>/msg/<Type>.msg`, sorted by (pkg, Type).
include!(concat!(env!("OUT_DIR"), "/msgdefs_table.rs"));

/// Finds an embedded definition by type name, written `pkg/msg/Type` or `pkg/Type`.
pub fn lookup(type_name: &str) -> Option<&'static MessageDefinition> {
    let key = split_type_name(type_name)?;
    DEFINITIONS
        .binary_search_by(|d| split_type_name(d.name).cmp(&Some(key)))
        .ok()
        .map(|i| &DEFINITIONS[i])
}

/// Every embedded definition, sorted by package, then type.
pub fn all() -> &'static [MessageDefinition] {
    &DEFINITIONS
}

/// The schema text of an embedded type from embedded files only.
///
/// Every dependency of every embedded file is embedded too: the test
/// `every_dependency_resolves` walks them all (and `build.rs` names every
/// entry `pkg/msg/Type`), so neither panic here can fire for data that passed
/// the tests. Schemas that may come from files on the
/// robot go through [`DefinitionResolver`], which returns errors instead.
fn concatenate_embedded(def: &'static MessageDefinition) -> String {
    let (pkg, ty) = split_type_name(def.name).expect("build.rs writes pkg/msg/Type names");
    let fetch = |dep: &str, used_by: &str| {
        lookup(dep)
            .map(MessageDefinition::msg)
            .ok_or_else(|| format!("{used_by} uses {dep}, which is not embedded"))
    };
    match concatenate(
        Format::Msg,
        &Format::Msg.section_name(pkg, ty),
        pkg,
        def.msg,
        fetch,
    ) {
        Ok(text) => text,
        Err(e) => panic!("embedded definition {} does not resolve: {e:?}", def.name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(text: &str) -> Vec<&str> {
        text.lines()
            .filter_map(|l| l.strip_prefix("MSG: "))
            .collect()
    }

    #[test]
    fn lookup_accepts_both_name_forms() {
        let a = lookup("sensor_msgs/msg/Imu").expect("long form");
        let b = lookup("sensor_msgs/Imu").expect("short form");
        assert!(std::ptr::eq(a, b));
        assert_eq!(a.name, "sensor_msgs/msg/Imu");
        assert_eq!(a.encoding, "ros2msg");
        assert!(lookup("foxglove_msgs/CompressedVideo").is_some());
        assert!(lookup("sensor_msgs/srv/Imu").is_none());
        assert!(lookup("sensor_msgs/msg/Nope").is_none());
        assert!(lookup("Imu").is_none());
        assert!(lookup("sensor_msgs/msg/Imu/x").is_none());
        assert!(lookup("/Imu").is_none());
    }

    #[test]
    fn every_entry_is_found_by_lookup() {
        // The binary search relies on build.rs sorting by (pkg, Type).
        for d in all() {
            let (pkg, ty) = split_type_name(d.name).expect("pkg/msg/Type");
            assert!(std::ptr::eq(lookup(d.name).unwrap(), d), "{}", d.name);
            assert!(std::ptr::eq(lookup(&format!("{pkg}/{ty}")).unwrap(), d));
        }
    }

    #[test]
    fn names_are_unique_and_well_formed() {
        for (i, d) in all().iter().enumerate() {
            assert!(split_type_name(d.name).is_some(), "{}", d.name);
            assert!(d.name.contains("/msg/"), "{}", d.name);
            assert!(
                all()[i + 1..].iter().all(|o| o.name != d.name),
                "duplicate {}",
                d.name
            );
        }
    }

    #[test]
    fn the_humble_common_interfaces_are_embedded() {
        // A few per package; tests/py/msgdefs_check.py compares the whole
        // set with rosbags' ROS2_HUMBLE store.
        for name in [
            "std_msgs/msg/Empty",
            "std_msgs/msg/UInt8MultiArray",
            "builtin_interfaces/msg/Duration",
            "geometry_msgs/msg/TwistWithCovarianceStamped",
            "sensor_msgs/msg/CameraInfo",
            "sensor_msgs/msg/BatteryState",
            "nav_msgs/msg/Odometry",
            "tf2_msgs/msg/TFMessage",
            "visualization_msgs/msg/MarkerArray",
            "shape_msgs/msg/SolidPrimitive",
            "trajectory_msgs/msg/MultiDOFJointTrajectory",
            "stereo_msgs/msg/DisparityImage",
            "actionlib_msgs/msg/GoalStatusArray",
            "unique_identifier_msgs/msg/UUID",
            "rosgraph_msgs/msg/Clock",
            "rcl_interfaces/msg/Log",
            "diagnostic_msgs/msg/DiagnosticArray",
            "foxglove_msgs/msg/CompressedVideo",
            "edgerec_msgs/msg/ClockQuality",
        ] {
            assert!(lookup(name).is_some(), "{name}");
        }
        // Post-Humble types stay out.
        assert!(lookup("sensor_msgs/msg/Altitude").is_none());
        assert!(lookup("geometry_msgs/msg/VelocityStamped").is_none());
    }

    #[test]
    fn every_dependency_resolves() {
        for d in all() {
            let (pkg, _) = split_type_name(d.name).unwrap();
            for dep in Format::Msg.dependencies(d.msg, pkg) {
                assert!(lookup(&dep).is_some(), "{} needs {dep}", d.name);
            }
            // Building the text walks the whole tree (it would panic on a
            // missing dependency or a cycle).
            assert!(d.text().starts_with(d.msg), "{}", d.name);
        }
    }

    #[test]
    fn imu_sections_in_depth_first_order_of_first_use() {
        let text = lookup("sensor_msgs/msg/Imu").unwrap().text();
        assert_eq!(
            sections(text),
            [
                "std_msgs/Header",
                "builtin_interfaces/Time",
                "geometry_msgs/Quaternion",
                "geometry_msgs/Vector3",
            ]
        );
        let header = format!("\n{}\nMSG: std_msgs/Header\n", "=".repeat(80));
        let at = text.find(&header).expect("delimiter");
        // The .msg text (ending in its own newline), then the "\n" separator.
        assert!(text[..at + 1].ends_with("x, y z\n\n"));
        let time = text.find("MSG: builtin_interfaces/Time\n").unwrap();
        assert!(text[time..].contains("uint32 nanosec\n"));
    }

    #[test]
    fn nested_sections_follow_their_parent() {
        let text = lookup("diagnostic_msgs/DiagnosticArray").unwrap().text();
        assert_eq!(
            sections(text),
            [
                "std_msgs/Header",
                "builtin_interfaces/Time",
                "diagnostic_msgs/DiagnosticStatus",
                "diagnostic_msgs/KeyValue",
            ]
        );
        let cloud = lookup("sensor_msgs/msg/PointCloud2").unwrap().text();
        assert_eq!(
            sections(cloud),
            [
                "std_msgs/Header",
                "builtin_interfaces/Time",
                "sensor_msgs/PointField"
            ]
        );
        let video = lookup("foxglove_msgs/msg/CompressedVideo").unwrap().text();
        assert_eq!(sections(video), ["builtin_interfaces/Time"]);
        let tf = lookup("tf2_msgs/msg/TFMessage").unwrap().text();
        assert_eq!(
            sections(tf),
            [
                "geometry_msgs/TransformStamped",
                "std_msgs/Header",
                "builtin_interfaces/Time",
                "geometry_msgs/Transform",
                "geometry_msgs/Vector3",
                "geometry_msgs/Quaternion",
            ]
        );
    }

    #[test]
    fn leaf_types_have_no_sections() {
        for name in [
            "std_msgs/String",
            "std_msgs/Empty",
            "builtin_interfaces/Time",
            "geometry_msgs/Vector3",
        ] {
            let d = lookup(name).unwrap();
            assert_eq!(d.text(), d.msg, "{name}");
        }
    }

    #[test]
    fn text_is_built_once() {
        let d = lookup("sensor_msgs/msg/Image").unwrap();
        assert!(std::ptr::eq(d.text(), d.text()));
    }
}
