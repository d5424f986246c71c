//! `msgdefs::DefinitionResolver` over `ros.msg_paths`-style directories
//! (`<dir>/<pkg>/msg/<Type>.msg`) built in temporary folders: a workspace
//! package using embedded types, overrides of embedded types, and every way
//! a definition tree can be broken.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use edgerec_format::msgdefs::{self, DefinitionError, DefinitionOrigin, DefinitionResolver};

const SEP: &str =
    "================================================================================";

/// Writes `<dir>/<pkg>/msg/<file>` and returns its path.
fn put(dir: &Path, pkg: &str, file: &str, text: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(pkg).join("msg").join(file);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

/// The dependency `resolve(name)` reports missing.
fn missing_dependency(r: &DefinitionResolver, name: &str) -> String {
    match r.resolve(name) {
        Err(DefinitionError::MissingDependency { dependency, .. }) => dependency,
        other => panic!("{name}: {other:?}"),
    }
}

fn sections(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|l| l.strip_prefix("MSG: ").or_else(|| l.strip_prefix("IDL: ")))
        .collect()
}

const THING: &str = "# A workspace type.\ngeometry_msgs/Pose pose\nOther other\nstring label\n";
const OTHER: &str = "uint8 KIND_A=1\nuint8 kind\n";

/// A directory with `my_pkg/msg/{Thing,Other}.msg` and a resolver over it.
fn workspace() -> (tempfile::TempDir, DefinitionResolver) {
    let ws = tempfile::tempdir().unwrap();
    put(ws.path(), "my_pkg", "Thing.msg", THING);
    put(ws.path(), "my_pkg", "Other.msg", OTHER);
    let r = DefinitionResolver::new(vec![ws.path().to_owned()]);
    (ws, r)
}

#[test]
fn a_workspace_type_uses_its_package_and_embedded_types() {
    let (_ws, r) = workspace();

    for name in ["my_pkg/msg/Thing", "my_pkg/Thing"] {
        let s = r.resolve(name).unwrap();
        assert_eq!(s.name, "my_pkg/msg/Thing");
        assert_eq!(s.encoding, "ros2msg");
        assert_eq!(
            sections(&s.data),
            [
                "geometry_msgs/Pose",
                "geometry_msgs/Point",
                "geometry_msgs/Quaternion",
                "my_pkg/Other",
            ]
        );
        let pose = msgdefs::lookup("geometry_msgs/Pose").unwrap().msg();
        let point = msgdefs::lookup("geometry_msgs/Point").unwrap().msg();
        let quat = msgdefs::lookup("geometry_msgs/Quaternion").unwrap().msg();
        assert_eq!(
            &*s.data,
            format!(
                "{THING}\n{SEP}\nMSG: geometry_msgs/Pose\n{pose}\n{SEP}\nMSG: geometry_msgs/Point\n\
                 {point}\n{SEP}\nMSG: geometry_msgs/Quaternion\n{quat}\n{SEP}\nMSG: my_pkg/Other\n{OTHER}"
            )
        );
    }
}

#[test]
fn without_directories_the_embedded_text_is_the_schema() {
    let r = DefinitionResolver::new(Vec::new());
    for def in msgdefs::all() {
        let s = r.resolve(def.name).unwrap();
        assert_eq!(s.name, def.name);
        assert_eq!(s.encoding, "ros2msg");
        assert_eq!(&*s.data, def.text(), "{}", def.name);
    }
}

#[test]
fn a_directory_overrides_embedded_types_also_inside_embedded_ones() {
    let share = tempfile::tempdir().unwrap();
    let header = "# site build\nbuiltin_interfaces/Time stamp\nstring frame_id\n";
    put(share.path(), "std_msgs", "Header.msg", header);
    let r = DefinitionResolver::new(vec![share.path().to_owned()]);

    let own = r.resolve("std_msgs/msg/Header").unwrap();
    assert!(own
        .data
        .starts_with(&format!("{header}\n{SEP}\nMSG: builtin_interfaces/Time\n")));
    let imu = r.resolve("sensor_msgs/msg/Imu").unwrap();
    let embedded = msgdefs::lookup("sensor_msgs/Imu").unwrap();
    assert!(imu.data.starts_with(embedded.msg()));
    assert!(imu
        .data
        .contains(&format!("\nMSG: std_msgs/Header\n{header}\n{SEP}\n")));
    assert_ne!(&*imu.data, embedded.text());
}

#[test]
fn the_first_directory_that_has_a_type_wins() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    put(b.path(), "my_pkg", "Thing.msg", "int32 from_b\n");
    put(a.path(), "my_pkg", "Thing.msg", "int32 from_a\n");
    let r = DefinitionResolver::new(vec![a.path().to_owned(), b.path().to_owned()]);
    assert_eq!(&*r.resolve("my_pkg/Thing").unwrap().data, "int32 from_a\n");
    let r = DefinitionResolver::new(vec![b.path().to_owned(), a.path().to_owned()]);
    assert_eq!(&*r.resolve("my_pkg/Thing").unwrap().data, "int32 from_b\n");
}

#[test]
fn a_missing_dependency_names_the_top_type_the_dependency_and_its_user() {
    let ws = tempfile::tempdir().unwrap();
    put(ws.path(), "my_pkg", "Top.msg", "Middle m\n");
    let middle = put(
        ws.path(),
        "my_pkg",
        "Middle.msg",
        "int8 x\nother_pkg/Gone g\n",
    );
    let r = DefinitionResolver::new(vec![ws.path().to_owned()]);
    match r.resolve("my_pkg/msg/Top") {
        Err(DefinitionError::MissingDependency {
            type_name,
            dependency,
            used_by,
        }) => {
            assert_eq!(type_name, "my_pkg/msg/Top");
            assert_eq!(dependency, "other_pkg/Gone");
            assert_eq!(used_by, DefinitionOrigin::File(middle.clone()));
        }
        other => panic!("{other:?}"),
    }
    let (schema, warning) = r.resolve_or_empty("my_pkg/msg/Top");
    assert!(schema.is_empty());
    assert_eq!(schema.name, "my_pkg/msg/Top");
    let warning = warning.unwrap();
    assert!(warning.contains("other_pkg/Gone"), "{warning}");
    assert!(warning.contains(&middle.display().to_string()), "{warning}");
}

#[test]
fn a_file_that_is_not_utf8_is_named() {
    let ws = tempfile::tempdir().unwrap();
    let bad = put(ws.path(), "my_pkg", "Bad.msg", b"int8 x # caf\xe9\n");
    put(ws.path(), "my_pkg", "UsesBad.msg", "Bad b\n");
    let r = DefinitionResolver::new(vec![ws.path().to_owned()]);
    for name in ["my_pkg/Bad", "my_pkg/UsesBad"] {
        match r.resolve(name) {
            Err(DefinitionError::NotUtf8 { path, valid_up_to }) => {
                assert_eq!(path, bad);
                assert_eq!(valid_up_to, 12);
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn an_unreadable_file_is_named() {
    let ws = tempfile::tempdir().unwrap();
    // A directory where the file should be: open works, read fails (EISDIR).
    let path = ws.path().join("my_pkg/msg/Dir.msg");
    std::fs::create_dir_all(&path).unwrap();
    let r = DefinitionResolver::new(vec![ws.path().to_owned()]);
    match r.resolve("my_pkg/Dir") {
        Err(DefinitionError::Unreadable { path: p, .. }) => assert_eq!(p, path),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_unknown_type_lists_what_was_searched_and_falls_back_to_an_empty_schema() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // A file where a directory of the layout should be is "not here" too.
    std::fs::write(a.path().join("nope_pkg"), "not a directory").unwrap();
    let r = DefinitionResolver::new(vec![a.path().to_owned(), b.path().to_owned()]);
    match r.resolve("nope_pkg/msg/Nope") {
        Err(DefinitionError::NotFound {
            type_name,
            searched,
        }) => {
            assert_eq!(type_name, "nope_pkg/msg/Nope");
            let want: Vec<PathBuf> = ["msg", "idl"]
                .iter()
                .flat_map(|ext| {
                    [a.path(), b.path()].map(|d| d.join(format!("nope_pkg/msg/Nope.{ext}")))
                })
                .collect();
            assert_eq!(searched, want);
        }
        other => panic!("{other:?}"),
    }
    let (schema, warning) = r.resolve_or_empty("nope_pkg/Nope");
    assert_eq!(schema.name, "nope_pkg/msg/Nope");
    assert_eq!(schema.encoding, "");
    assert!(schema.data.is_empty());
    assert!(warning
        .unwrap()
        .contains("no definition of nope_pkg/msg/Nope"));

    let (schema, warning) = DefinitionResolver::new(Vec::new()).resolve_or_empty("std_msgs/Bool");
    assert_eq!(schema.encoding, "ros2msg");
    assert!(warning.is_none());
}

#[test]
fn names_that_are_not_message_types_never_reach_the_filesystem() {
    let ws = tempfile::tempdir().unwrap();
    put(ws.path(), "my_pkg", "Thing.msg", "int8 x\n");
    let r = DefinitionResolver::new(vec![ws.path().join("my_pkg/msg")]);
    for name in [
        "../Thing",
        "my_pkg/srv/Thing",
        "Thing",
        "my_pkg/msg/../Thing",
        "a/b/c/d",
        "",
    ] {
        match r.resolve(name) {
            Err(DefinitionError::InvalidTypeName { type_name }) => assert_eq!(type_name, name),
            other => panic!("{name}: {other:?}"),
        }
        let (schema, warning) = r.resolve_or_empty(name);
        assert!(schema.is_empty() && warning.is_some());
    }
    // A field type that is not a ROS name is a missing dependency, not a path.
    put(ws.path(), "my_pkg", "Escape.msg", "../../etc/passwd x\n");
    let r = DefinitionResolver::new(vec![ws.path().to_owned()]);
    assert_eq!(missing_dependency(&r, "my_pkg/Escape"), "../../etc/passwd");
}

#[test]
fn a_cycle_is_an_error() {
    let ws = tempfile::tempdir().unwrap();
    put(ws.path(), "my_pkg", "A.msg", "B b\n");
    put(ws.path(), "my_pkg", "B.msg", "A[] children\n");
    let r = DefinitionResolver::new(vec![ws.path().to_owned()]);
    match r.resolve("my_pkg/A") {
        Err(DefinitionError::Cycle { type_name, chain }) => {
            assert_eq!(type_name, "my_pkg/msg/A");
            assert_eq!(chain, ["my_pkg/A", "my_pkg/B", "my_pkg/A"]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_type_with_only_idl_files_gets_a_ros2idl_schema() {
    let ws = tempfile::tempdir().unwrap();
    let top = "#include \"my_pkg/msg/Part.idl\"\n\nmodule my_pkg { module msg {\n  struct IdlOnly { my_pkg::msg::Part part; };\n}; };\n";
    let part = "module my_pkg { module msg {\n  struct Part { int32 x; };\n}; };\n";
    put(ws.path(), "my_pkg", "IdlOnly.idl", top);
    put(ws.path(), "my_pkg", "Part.idl", part);
    let r = DefinitionResolver::new(vec![ws.path().to_owned()]);
    let s = r.resolve("my_pkg/IdlOnly").unwrap();
    assert_eq!(s.encoding, "ros2idl");
    assert_eq!(
        &*s.data,
        format!("{SEP}\nIDL: my_pkg/msg/IdlOnly\n{top}\n{SEP}\nIDL: my_pkg/msg/Part\n{part}")
    );

    // A .msg tree with a dependency that only has an .idl is read from the
    // .idl files, as rosbag2 does, when every type has one.
    put(ws.path(), "my_pkg", "Mixed.msg", "Part part\n");
    put(
        ws.path(),
        "my_pkg",
        "Mixed.idl",
        "#include \"my_pkg/msg/Part.idl\"\n",
    );
    assert_eq!(r.resolve("my_pkg/Mixed").unwrap().encoding, "ros2idl");
    // Without the .idl of the top type the .msg error stands.
    put(ws.path(), "my_pkg", "MixedNoIdl.msg", "Part part\n");
    assert_eq!(missing_dependency(&r, "my_pkg/MixedNoIdl"), "my_pkg/Part");
}

#[test]
fn schemas_are_built_once_and_shared_between_threads() {
    let (ws, r) = workspace();
    let schemas: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| s.spawn(|| r.resolve("my_pkg/msg/Thing").unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let again = r.resolve("my_pkg/Thing").unwrap();
    for s in &schemas {
        assert!(Arc::ptr_eq(&s.data, &again.data));
    }
    // The cache holds the built text: a file changed later is not re-read.
    put(ws.path(), "my_pkg", "Thing.msg", "int8 changed\n");
    assert!(Arc::ptr_eq(
        &r.resolve("my_pkg/Thing").unwrap().data,
        &again.data
    ));
}

#[test]
fn a_failure_is_not_cached() {
    let ws = tempfile::tempdir().unwrap();
    let r = DefinitionResolver::new(vec![ws.path().to_owned()]);
    assert!(matches!(
        r.resolve("my_pkg/Late"),
        Err(DefinitionError::NotFound { .. })
    ));
    put(ws.path(), "my_pkg", "Late.msg", "int8 x\n");
    assert_eq!(&*r.resolve("my_pkg/Late").unwrap().data, "int8 x\n");
}
