//! Embedded ROS 2 message definitions in rosbag2's concatenated `ros2msg`
//! form, the schema data of every channel in a rosbag2 MCAP file.
//!
//! Each definition is the top-level `.msg` text followed, for every message
//! type it uses (transitively, each once, depth first in order of first use),
//! by `"\n"`, a line of 80 `=`, `MSG: pkg/Type` and that type's `.msg` text.
//! The `.msg` files live in `crates/format/msg/` (their provenance is in the
//! README there); the dependencies are found by parsing the field types, and
//! the concatenated text is built on first use and kept.
//!
//! ```
//! use edgerec_format::msgdefs;
//!
//! let imu = msgdefs::lookup("sensor_msgs/Imu").expect("embedded");
//! assert_eq!(imu.name, "sensor_msgs/msg/Imu");
//! assert_eq!(imu.encoding, "ros2msg");
//! assert!(imu.text().contains("\nMSG: std_msgs/Header\n"));
//! assert!(msgdefs::all().iter().any(|d| d.name == "foxglove_msgs/msg/CompressedVideo"));
//! ```

use std::sync::OnceLock;

/// The line rosbag2 puts before each dependency's `MSG:` line.
const SEPARATOR: &str =
    "================================================================================";

/// Types the `.msg` grammar builds in; they have no definition of their own.
const PRIMITIVE_TYPES: &[&str] = &[
    "bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
    "uint32", "int64", "uint64", "string", "wstring",
];

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
    /// The concatenated definition (top-level `.msg` text, then each dependency after
    /// its `MSG:` header): the data of the MCAP schema record. Built once, then shared.
    pub fn text(&self) -> &'static str {
        // Only this module builds MessageDefinitions, all in the static table, so
        // `self` is in it; finding it there gives the borrow its 'static lifetime.
        let this = DEFINITIONS
            .iter()
            .find(|d| std::ptr::eq(*d, self))
            .expect("MessageDefinitions exist only in the static table");
        this.full.get_or_init(|| concatenate(this)).as_str()
    }
}

macro_rules! definition {
    ($pkg:literal, $ty:literal) => {
        MessageDefinition {
            name: concat!($pkg, "/msg/", $ty),
            encoding: "ros2msg",
            msg: include_str!(concat!("../msg/", $pkg, "/msg/", $ty, ".msg")),
            full: OnceLock::new(),
        }
    };
}

static DEFINITIONS: [MessageDefinition; 14] = [
    definition!("builtin_interfaces", "Time"),
    definition!("std_msgs", "Header"),
    definition!("std_msgs", "String"),
    definition!("geometry_msgs", "Quaternion"),
    definition!("geometry_msgs", "Vector3"),
    definition!("sensor_msgs", "Imu"),
    definition!("sensor_msgs", "PointField"),
    definition!("sensor_msgs", "PointCloud2"),
    definition!("sensor_msgs", "Image"),
    definition!("diagnostic_msgs", "KeyValue"),
    definition!("diagnostic_msgs", "DiagnosticStatus"),
    definition!("diagnostic_msgs", "DiagnosticArray"),
    definition!("foxglove_msgs", "CompressedVideo"),
    definition!("edgerec_msgs", "ClockQuality"),
];

/// Finds an embedded definition by type name, written `pkg/msg/Type` or `pkg/Type`.
pub fn lookup(type_name: &str) -> Option<&'static MessageDefinition> {
    let (pkg, ty) = split_type_name(type_name)?;
    DEFINITIONS
        .iter()
        .find(|d| split_type_name(d.name) == Some((pkg, ty)))
}

/// Every embedded definition.
pub fn all() -> &'static [MessageDefinition] {
    &DEFINITIONS
}

/// `pkg/msg/Type` or `pkg/Type` into `(pkg, Type)`.
fn split_type_name(type_name: &str) -> Option<(&str, &str)> {
    let mut parts = type_name.split('/');
    let (pkg, ty) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(pkg), Some("msg"), Some(ty), None) => (pkg, ty),
        (Some(pkg), Some(ty), None, None) => (pkg, ty),
        _ => return None,
    };
    (!pkg.is_empty() && !ty.is_empty()).then_some((pkg, ty))
}

fn concatenate(root: &'static MessageDefinition) -> String {
    let mut out = String::with_capacity(4 * root.msg.len());
    out.push_str(root.msg);
    let mut seen = vec![root.name];
    append_dependencies(root, &mut seen, &mut out);
    out
}

/// Appends the sections of `def`'s dependencies, depth first in order of first use,
/// skipping types already written (rosbag2's `seen_deps`).
///
/// rosbag2 itself (`LocalMessageDefinitionSource::get_full_text`) keeps each type's
/// direct dependencies in a `std::set`, so a bag it records lists them in name order
/// (Imu: Quaternion, Vector3, Header, Time); rosbags' `generate_msgdef` uses order
/// of first use, as here. Readers find sections by their `MSG:` name, so both decode
/// the same; first use is what the cross-check against rosbags can compare.
fn append_dependencies(
    def: &'static MessageDefinition,
    seen: &mut Vec<&'static str>,
    out: &mut String,
) {
    let (pkg, _) = split_type_name(def.name).expect("embedded names are pkg/msg/Type");
    for dep in dependencies(def.msg, pkg) {
        let dep_def = lookup(&dep)
            .unwrap_or_else(|| panic!("{} uses {dep}, which is not embedded in msgdefs", def.name));
        if seen.contains(&dep_def.name) {
            continue;
        }
        seen.push(dep_def.name);
        out.push('\n');
        out.push_str(SEPARATOR);
        out.push_str("\nMSG: ");
        out.push_str(&dep);
        out.push('\n');
        out.push_str(dep_def.msg);
        append_dependencies(dep_def, seen, out);
    }
}

/// The non-builtin field types of a `.msg` text as `pkg/Type`, each once, in order of
/// first use. `package` resolves unqualified names.
fn dependencies(msg: &str, package: &str) -> Vec<String> {
    let mut deps: Vec<String> = Vec::new();
    for line in msg.lines() {
        let Some(ty) = field_type(line) else { continue };
        let dep = if ty == "Header" {
            // Older .msg files (and ROS 1) write the header type bare.
            "std_msgs/Header".to_owned()
        } else {
            match ty.split('/').collect::<Vec<_>>().as_slice() {
                [name] => format!("{package}/{name}"),
                [pkg, "msg", name] => format!("{pkg}/{name}"),
                _ => ty.to_owned(),
            }
        };
        if !deps.contains(&dep) {
            deps.push(dep);
        }
    }
    deps
}

/// The base type of a field line (array and bound suffixes removed), or `None` for
/// comments, blank lines, constants and builtin types.
fn field_type(line: &str) -> Option<&str> {
    // A '#' inside a string constant's value also cuts here, but constants are
    // skipped below either way.
    let code = line.split('#').next().unwrap_or("").trim();
    let mut tokens = code.split_whitespace();
    let ty = tokens.next()?;
    let name = tokens.next()?;
    // Constants: `uint8 FOO=1` or `uint8 FOO = 1`; a default value (`float64 w 1`)
    // keeps the line a field.
    if name.contains('=') || tokens.next().is_some_and(|t| t.starts_with('=')) {
        return None;
    }
    let base = ty.split(['[', '<']).next().unwrap_or(ty);
    (!PRIMITIVE_TYPES.contains(&base)).then_some(base)
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
    fn every_dependency_resolves() {
        for d in all() {
            let (pkg, _) = split_type_name(d.name).unwrap();
            for dep in dependencies(d.msg, pkg) {
                assert!(lookup(&dep).is_some(), "{} needs {dep}", d.name);
            }
            // Building the text walks the whole tree.
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
    }

    #[test]
    fn leaf_types_have_no_sections() {
        for name in [
            "std_msgs/String",
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

    #[test]
    fn field_parser_skips_comments_constants_and_builtins() {
        let msg = "# comment Foo bar\n\
                   uint8 INT8    = 1\n\
                   byte OK=0\n\
                   string S=\"a#b\"\n\
                   float64 w 1\n\
                   float64[9] cov # Row major\n\
                   string<=8 bounded\n\
                   Header header\n\
                   PointField[] fields\n\
                   geometry_msgs/Vector3[<=3] v\n\
                   geometry_msgs/msg/Quaternion q\n\
                   pkg/Thing[4] things\n\
                   Vector3 again\n\
                   \n\
                   geometry_msgs/Vector3 twice\n";
        assert_eq!(
            dependencies(msg, "geometry_msgs"),
            [
                "std_msgs/Header",
                "geometry_msgs/PointField",
                "geometry_msgs/Vector3",
                "geometry_msgs/Quaternion",
                "pkg/Thing",
            ]
        );
    }
}
