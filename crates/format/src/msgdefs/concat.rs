//! rosbag2's concatenated schema text: which types a definition uses, and
//! how the definitions of a type and its dependencies are joined into one.
//!
//! The walk is the same whether the files come from the embedded set or
//! from `ros.msg_paths` directories; only the way a dependency's text is
//! fetched (and how that can fail) differs, so it is a closure here.

/// The line rosbag2 puts before each dependency's `MSG:` or `IDL:` line.
pub(crate) const SEPARATOR: &str =
    "================================================================================";

/// Types the `.msg` grammar builds in; they have no definition of their own.
const PRIMITIVE_TYPES: &[&str] = &[
    "bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
    "uint32", "int64", "uint64", "string", "wstring",
];

/// rosbag2's `ROSBAG2_CPP_LOCAL_MESSAGE_DEFINITION_SOURCE_MAX_RECURSION_DEPTH`:
/// real types nest a handful of levels; more means a generated mess, and the
/// walk is recursive.
pub(crate) const MAX_DEPTH: usize = 50;

/// The file format of a definition and of the schema built from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Format {
    /// `.msg` files; schema encoding `ros2msg`, sections named `MSG: pkg/Type`.
    Msg,
    /// `.idl` files, rosbag2's fallback when a type has no `.msg`; schema
    /// encoding `ros2idl`, every section (the first too) under `IDL: pkg/msg/Type`.
    Idl,
}

impl Format {
    /// The MCAP schema encoding.
    pub(crate) fn encoding(self) -> &'static str {
        match self {
            Format::Msg => "ros2msg",
            Format::Idl => "ros2idl",
        }
    }

    /// The file extension, without the dot.
    pub(crate) fn extension(self) -> &'static str {
        match self {
            Format::Msg => "msg",
            Format::Idl => "idl",
        }
    }

    fn header(self) -> &'static str {
        match self {
            Format::Msg => "MSG: ",
            Format::Idl => "IDL: ",
        }
    }

    /// How this format names `(pkg, Type)` in section headers and in the
    /// walk's bookkeeping: rosbag2 writes `pkg/Type` after `MSG:` (the way
    /// `.msg` fields name types) and `pkg/msg/Type` after `IDL:` (the way
    /// `#include` lines do).
    pub(crate) fn section_name(self, pkg: &str, ty: &str) -> String {
        match self {
            Format::Msg => format!("{pkg}/{ty}"),
            Format::Idl => format!("{pkg}/msg/{ty}"),
        }
    }

    /// The types a definition uses, each once, in order of first use, named
    /// as [`Format::section_name`] does. `package` resolves unqualified
    /// `.msg` field types.
    pub(crate) fn dependencies(self, text: &str, package: &str) -> Vec<String> {
        match self {
            Format::Msg => msg_dependencies(text, package),
            Format::Idl => idl_dependencies(text),
        }
    }
}

/// Whether `name` is a ROS package, namespace or type name
/// (`[A-Za-z][A-Za-z0-9_]*`). Type names reach the resolver from DDS
/// discovery, so this is also what keeps them from naming paths outside a
/// `msg_paths` directory (`..`, `/`).
pub(crate) fn is_ros_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `pkg/msg/Type` or `pkg/Type` into `(pkg, Type)`; `None` for anything else
/// (a service or action type, a bare name, characters outside ROS names).
pub(crate) fn split_type_name(type_name: &str) -> Option<(&str, &str)> {
    let mut parts = type_name.split('/');
    let (pkg, ty) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(pkg), Some("msg"), Some(ty), None) => (pkg, ty),
        (Some(pkg), Some(ty), None, None) => (pkg, ty),
        _ => return None,
    };
    (is_ros_name(pkg) && is_ros_name(ty)).then_some((pkg, ty))
}

/// The non-builtin field types of a `.msg` text as `pkg/Type`, each once, in
/// order of first use. `package` resolves unqualified names.
fn msg_dependencies(msg: &str, package: &str) -> Vec<String> {
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

/// The `#include "pkg/msg/Type.idl"` (or `<...>`) lines of an `.idl` text as
/// `pkg/msg/Type`, each once, in order. rosbag2 finds IDL dependencies the
/// same way (an `#include` at the start of a line); includes of anything
/// else than a message (`pkg/srv/...`) are kept and then fail to resolve.
fn idl_dependencies(idl: &str) -> Vec<String> {
    let mut deps: Vec<String> = Vec::new();
    for line in idl.lines() {
        let Some(rest) = line.strip_prefix("#include") else {
            continue;
        };
        let rest = rest.trim_start();
        let Some(quoted) = rest.strip_prefix('"').or_else(|| rest.strip_prefix('<')) else {
            continue;
        };
        let Some(end) = quoted.find(['"', '>']) else {
            continue;
        };
        let Some(dep) = quoted[..end].strip_suffix(".idl") else {
            continue;
        };
        if !deps.iter().any(|d| d == dep) {
            deps.push(dep.to_owned());
        }
    }
    deps
}

/// Why a walk stopped.
#[derive(Debug)]
pub(crate) enum WalkError<E> {
    /// The closure could not fetch a dependency.
    Source(E),
    /// The types on the path from the top type, ending in one already on it.
    Cycle(Vec<String>),
    /// The path from the top type reached [`MAX_DEPTH`] types.
    TooDeep(Vec<String>),
}

/// The concatenated text of `top` (named `top_name`, as
/// [`Format::section_name`] names it, in package `top_pkg`): its own text,
/// then for every type it uses, transitively, each once, depth first in
/// order of first use, `"\n"`, [`SEPARATOR`], `"\n"`, the section header
/// and that type's text. An IDL schema also opens with the top type's
/// separator and header, as rosbag2 writes it.
///
/// `fetch(dependency, used_by)` returns a dependency's text; both names are
/// section names.
///
/// rosbag2 itself (`LocalMessageDefinitionSource::get_full_text`) keeps each
/// type's direct dependencies in a `std::set`, so a bag it records lists
/// them in name order (Imu: Quaternion, Vector3, Header, Time); rosbags'
/// `generate_msgdef` uses order of first use, as here. Readers find sections
/// by their `MSG:` name, so both decode the same; first use is what the
/// cross-check against rosbags can compare.
pub(crate) fn concatenate<T, E>(
    format: Format,
    top_name: &str,
    top_pkg: &str,
    top: &str,
    mut fetch: impl FnMut(&str, &str) -> Result<T, E>,
) -> Result<String, WalkError<E>>
where
    T: AsRef<str>,
{
    let mut out = String::with_capacity(4 * top.len());
    if format == Format::Idl {
        push_header(&mut out, format, top_name);
    }
    out.push_str(top);
    let mut walk = Walk {
        format,
        seen: vec![top_name.to_owned()],
        path: vec![top_name.to_owned()],
        out,
    };
    walk.append_dependencies(top_pkg, top, &mut fetch)?;
    Ok(walk.out)
}

fn push_header(out: &mut String, format: Format, name: &str) {
    out.push_str(SEPARATOR);
    out.push('\n');
    out.push_str(format.header());
    out.push_str(name);
    out.push('\n');
}

struct Walk {
    format: Format,
    /// Types already written (rosbag2's `seen_deps`).
    seen: Vec<String>,
    /// The types from the top one down to the one being expanded.
    path: Vec<String>,
    out: String,
}

impl Walk {
    fn append_dependencies<T, E>(
        &mut self,
        package: &str,
        text: &str,
        fetch: &mut impl FnMut(&str, &str) -> Result<T, E>,
    ) -> Result<(), WalkError<E>>
    where
        T: AsRef<str>,
    {
        let user = self.path.last().cloned().unwrap_or_default();
        for dep in self.format.dependencies(text, package) {
            if self.path.contains(&dep) {
                let mut cycle = self.path.clone();
                cycle.push(dep);
                return Err(WalkError::Cycle(cycle));
            }
            if self.seen.contains(&dep) {
                continue;
            }
            if self.path.len() >= MAX_DEPTH {
                let mut path = self.path.clone();
                path.push(dep);
                return Err(WalkError::TooDeep(path));
            }
            let dep_text = fetch(&dep, &user).map_err(WalkError::Source)?;
            let dep_text = dep_text.as_ref();
            self.seen.push(dep.clone());
            self.out.push('\n');
            push_header(&mut self.out, self.format, &dep);
            self.out.push_str(dep_text);
            let dep_pkg = dep.split('/').next().unwrap_or_default().to_owned();
            self.path.push(dep);
            self.append_dependencies(&dep_pkg, dep_text, fetch)?;
            self.path.pop();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(text: &str) -> Vec<&str> {
        text.lines()
            .filter_map(|l| l.strip_prefix("MSG: ").or_else(|| l.strip_prefix("IDL: ")))
            .collect()
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
            Format::Msg.dependencies(msg, "geometry_msgs"),
            [
                "std_msgs/Header",
                "geometry_msgs/PointField",
                "geometry_msgs/Vector3",
                "geometry_msgs/Quaternion",
                "pkg/Thing",
            ]
        );
    }

    #[test]
    fn idl_includes_are_the_dependencies() {
        let idl = "// generated from rosidl_adapter/resource/msg.idl.em\n\
                   #include \"geometry_msgs/msg/Pose.idl\"\n\
                   #include <std_msgs/msg/Header.idl>\n\
                   #include \"geometry_msgs/msg/Pose.idl\"\n\
                   // #include \"not/msg/This.idl\"\n\
                   #include \"broken/msg/Unterminated.idl\n\
                   module my_pkg { module msg { struct Thing { geometry_msgs::msg::Pose pose; }; }; };\n";
        assert_eq!(
            Format::Idl.dependencies(idl, "ignored"),
            ["geometry_msgs/msg/Pose", "std_msgs/msg/Header"]
        );
    }

    #[test]
    fn type_names_are_ros_names() {
        assert_eq!(split_type_name("a/msg/B"), Some(("a", "B")));
        assert_eq!(split_type_name("a/B_2"), Some(("a", "B_2")));
        for bad in [
            "B",
            "a/srv/B",
            "a/msg/B/c",
            "/B",
            "a/",
            "../B",
            "a/..",
            "a/msg/.B",
            "1a/B",
        ] {
            assert_eq!(split_type_name(bad), None, "{bad}");
        }
    }

    fn table<'a>(
        files: &'a [(&'a str, &'a str)],
    ) -> impl FnMut(&str, &str) -> Result<&'a str, String> + 'a {
        move |dep, user| {
            files
                .iter()
                .find(|(n, _)| *n == dep)
                .map(|(_, t)| *t)
                .ok_or_else(|| format!("{user} needs {dep}"))
        }
    }

    #[test]
    fn sections_are_depth_first_each_once() {
        let files = [
            ("p/B", "p/C c\nint32 x\n"),
            ("p/C", "int8 y\n"),
            ("p/D", "p/C again\n"),
        ];
        let text = concatenate(Format::Msg, "p/A", "p", "B b\nD d\nC c\n", table(&files)).unwrap();
        assert_eq!(sections(&text), ["p/B", "p/C", "p/D"]);
        let sep = format!("\n{SEPARATOR}\n");
        assert_eq!(
            text,
            format!("B b\nD d\nC c\n{sep}MSG: p/B\np/C c\nint32 x\n{sep}MSG: p/C\nint8 y\n{sep}MSG: p/D\np/C again\n")
        );
    }

    #[test]
    fn idl_schema_opens_with_its_own_header() {
        let files = [("p/msg/B", "struct B {};\n")];
        let text = concatenate(
            Format::Idl,
            "p/msg/A",
            "p",
            "#include \"p/msg/B.idl\"\n",
            table(&files),
        )
        .unwrap();
        assert_eq!(
            text,
            format!("{SEPARATOR}\nIDL: p/msg/A\n#include \"p/msg/B.idl\"\n\n{SEPARATOR}\nIDL: p/msg/B\nstruct B {{}};\n")
        );
    }

    #[test]
    fn a_missing_dependency_names_its_user() {
        let files = [("p/B", "p/Gone g\n")];
        match concatenate(Format::Msg, "p/A", "p", "B b\n", table(&files)) {
            Err(WalkError::Source(e)) => assert_eq!(e, "p/B needs p/Gone"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn cycles_are_errors_not_loops() {
        let files = [("p/B", "C c\n"), ("p/C", "B b\n"), ("p/A", "A a\n")];
        match concatenate(Format::Msg, "p/A", "p", "B b\n", table(&files)) {
            Err(WalkError::Cycle(c)) => assert_eq!(c, ["p/A", "p/B", "p/C", "p/B"]),
            other => panic!("{other:?}"),
        }
        // A type that uses itself.
        match concatenate(Format::Msg, "p/A", "p", "A a\n", table(&files)) {
            Err(WalkError::Cycle(c)) => assert_eq!(c, ["p/A", "p/A"]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn depth_is_bounded() {
        // T0 uses T1 uses T2 ... each a new type.
        let mut fetch = |dep: &str, _: &str| -> Result<String, ()> {
            let n: usize = dep.trim_start_matches("p/T").parse().unwrap();
            Ok(format!("T{} next\n", n + 1))
        };
        match concatenate(Format::Msg, "p/T0", "p", "T1 next\n", &mut fetch) {
            Err(WalkError::TooDeep(path)) => assert_eq!(path.len(), MAX_DEPTH + 1),
            other => panic!("{other:?}"),
        }
    }
}
