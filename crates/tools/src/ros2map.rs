//! ROS 1 types and payloads as ROS 2 ones, the mapping rosbags-convert
//! uses: `pkg/Type` becomes `pkg/msg/Type` (`tf/tfMessage` becomes
//! `tf2_msgs/msg/TFMessage`), `std_msgs/Header` loses `seq`, `time` and
//! `duration` become `builtin_interfaces/Time` and `Duration` (`int32 sec`,
//! `uint32 nanosec`: the same eight bytes), ROS 1 `byte` is `int8` and
//! `char` is `uint8` (their ROS 1 meanings), and every other type keeps the
//! fields its ROS 1 definition gives, so types without a ROS 2 counterpart
//! convert too. The ROS 2 definition is generated from the parsed ROS 1
//! one, constants first in each type (comments are not carried), and the payload is
//! rewritten from ROS 1's packed little-endian form into CDR (little
//! endian, each primitive aligned to its size from the end of the 4-byte
//! encapsulation header, strings with a NUL counted in their length).
//!
//! ```
//! use edgerec_format::msgtype::{Dialect, TypeTable};
//! use edgerec_tools::ros2map::Ros2Type;
//!
//! let def = "Header header\nfloat64 x\n\
//!     ================================================================================\n\
//!     MSG: std_msgs/Header\nuint32 seq\ntime stamp\nstring frame_id\n";
//! let t = Ros2Type::from_ros1("geometry_msgs/Sample", def).unwrap();
//! assert_eq!(t.name(), "geometry_msgs/msg/Sample");
//! assert!(t.definition().starts_with("std_msgs/Header header\nfloat64 x\n"));
//! // seq 7, stamp 1 s 2 ns, frame "m", x 0.5
//! let mut ros1 = Vec::new();
//! for v in [7u32, 1, 2, 1] { ros1.extend(v.to_le_bytes()); }
//! ros1.push(b'm');
//! ros1.extend(0.5f64.to_le_bytes());
//! let mut cdr = Vec::new();
//! t.convert(&ros1, &mut cdr).unwrap();
//! let back = TypeTable::parse_with(t.name(), t.definition(), Dialect::Ros2).unwrap();
//! let v = edgerec_format::cdr_decode::decode(&back, &cdr).unwrap();
//! assert_eq!(edgerec_format::print::json_line(&v),
//!     r#"{"header":{"stamp":{"sec":1,"nanosec":2},"frame_id":"m"},"x":0.5}"#);
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;

use edgerec_format::msgtype::{Arity, Dialect, FieldKind, Primitive, TypeId, TypeTable};

/// The separator between the sections of a concatenated definition.
const SEPARATOR: &str =
    "================================================================================";

/// The most elements an array of a type without fields may have (they
/// take no bytes in ROS 1, so the payload cannot bound their count).
const MAX_EMPTY_ELEMENTS: usize = 1 << 20;

/// What ROS 2 calls a ROS 1 type, in the short `pkg/Type` form that
/// definitions use (`None` for the ROS 1 built-ins handled apart).
fn short_name(ros1: &str) -> String {
    match ros1 {
        "time" => "builtin_interfaces/Time".to_owned(),
        "duration" => "builtin_interfaces/Duration".to_owned(),
        "tf/tfMessage" => "tf2_msgs/TFMessage".to_owned(),
        other => other.to_owned(),
    }
}

/// The ROS 2 name (`pkg/msg/Type`) of a ROS 1 type (`pkg/Type`).
pub fn ros2_name(ros1: &str) -> String {
    let short = short_name(ros1);
    match short.split_once('/') {
        Some((pkg, ty)) => format!("{pkg}/msg/{ty}"),
        None => short,
    }
}

/// Why a ROS 1 type or message could not be converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    /// The ROS 1 definition does not parse.
    #[error("its ROS 1 definition does not parse: {0}")]
    Definition(String),
    /// The generated ROS 2 definition does not parse (a bug, or a name
    /// ROS 2 cannot have).
    #[error("its ROS 2 definition does not parse: {0}")]
    Generated(String),
    /// The payload is shorter than its definition needs, or a count is
    /// larger than the payload can hold.
    #[error("the message ends inside field `{field}` at byte {offset} (payload {len} bytes)")]
    Truncated {
        /// The field's path.
        field: String,
        /// Where in the ROS 1 payload.
        offset: usize,
        /// The payload's length.
        len: usize,
    },
    /// Bytes after the last field.
    #[error("{extra} bytes after the last field (payload {len} bytes): the definition does not fit the message")]
    Trailing {
        /// The bytes left.
        extra: usize,
        /// The payload's length.
        len: usize,
    },
}

/// Whether `f` is the standard Header's `uint32 seq`, which ROS 2 does not
/// have. A Header that declares `seq` otherwise (a mutated or home-made
/// definition) keeps it as a field, so what the ROS 1 decoder reads is
/// what converts.
fn is_standard_seq(f: &edgerec_format::msgtype::Field) -> bool {
    f.name() == "seq"
        && f.ty().kind == FieldKind::Primitive(Primitive::UInt32)
        && f.ty().arity == Arity::Single
}

/// One ROS 1 type with its ROS 2 name, definition and payload converter.
#[derive(Debug)]
pub struct Ros2Type {
    name: String,
    definition: String,
    table: TypeTable,
    /// Per type of `table`: the fields ROS 2 does not have (Header's `seq`).
    dropped: HashMap<TypeId, Vec<bool>>,
}

impl Ros2Type {
    /// Maps the ROS 1 type `type_name` defined by `definition` (a bag
    /// connection's `message_definition`).
    pub fn from_ros1(type_name: &str, definition: &str) -> Result<Ros2Type, MapError> {
        let table = TypeTable::parse_with(type_name, definition, Dialect::Ros1)
            .map_err(|e| MapError::Definition(e.to_string()))?;
        let dropped: HashMap<TypeId, Vec<bool>> = table
            .types()
            .map(|(id, t)| {
                let d = t
                    .fields()
                    .iter()
                    .map(|f| t.name() == "std_msgs/Header" && is_standard_seq(f))
                    .collect();
                (id, d)
            })
            .collect();
        let name = ros2_name(type_name);
        let constants = constants(type_name, definition);
        let mut definition = generate(&table, &dropped, &constants);
        if TypeTable::parse_with(&name, &definition, Dialect::Ros2).is_err() {
            // A constant ROS 2 cannot have: the fields are what matters.
            definition = generate(&table, &dropped, &HashMap::new());
        }
        TypeTable::parse_with(&name, &definition, Dialect::Ros2)
            .map_err(|e| MapError::Generated(e.to_string()))?;
        Ok(Ros2Type {
            name,
            definition,
            table,
            dropped,
        })
    }

    /// The ROS 2 type name, `pkg/msg/Type`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The ROS 2 definition (`ros2msg`, sections `MSG: pkg/Type`).
    pub fn definition(&self) -> &str {
        &self.definition
    }

    /// Writes the CDR form of the ROS 1 payload `ros1` to `out` (cleared
    /// first).
    pub fn convert(&self, ros1: &[u8], out: &mut Vec<u8>) -> Result<(), MapError> {
        out.clear();
        out.extend_from_slice(&[0, 1, 0, 0]);
        let mut c = Conv {
            src: ros1,
            at: 0,
            out,
            path: String::new(),
        };
        c.message(self, self.table.root())?;
        if c.at != ros1.len() {
            return Err(MapError::Trailing {
                extra: ros1.len() - c.at,
                len: ros1.len(),
            });
        }
        Ok(())
    }
}

/// The ROS 2 definition of every type in `table`, root first.
/// The constants of each section of a concatenated ROS 1 definition
/// (`TYPE NAME=VALUE`), by type name, as ROS 2 lines: `byte` and `char`
/// as in fields, a string constant's value verbatim (ROS 1 keeps `#` in
/// it), other values without their comment.
fn constants(root: &str, definition: &str) -> HashMap<String, Vec<String>> {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    let mut section = root.to_owned();
    let mut lines = definition.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim_end() == SEPARATOR {
            if let Some(name) = lines.peek().and_then(|l| l.trim().strip_prefix("MSG:")) {
                section = name.trim().to_owned();
                lines.next();
                continue;
            }
        }
        let text = line.trim_start();
        let Some((ty, rest)) = text.split_once(char::is_whitespace) else {
            continue;
        };
        let Some((name, value)) = rest.split_once('=') else {
            continue;
        };
        let name = name.trim();
        if ty.starts_with('#') || name.is_empty() || name.contains(char::is_whitespace) {
            continue;
        }
        let ty = match ty {
            "byte" => "int8",
            "char" => "uint8",
            t => t,
        };
        let value = if ty == "string" {
            value.trim()
        } else {
            value.split('#').next().unwrap_or("").trim()
        };
        out.entry(section.clone())
            .or_default()
            .push(format!("{ty} {name}={value}"));
    }
    out
}

fn generate(
    table: &TypeTable,
    dropped: &HashMap<TypeId, Vec<bool>>,
    constants: &HashMap<String, Vec<String>>,
) -> String {
    let mut out = String::new();
    let root = table.root();
    let order =
        std::iter::once(root).chain(table.types().map(|(id, _)| id).filter(|id| *id != root));
    for (n, id) in order.enumerate() {
        let t = table.message(id);
        if n > 0 {
            let _ = write!(out, "{SEPARATOR}\nMSG: {}\n", short_name(t.name()));
        }
        if matches!(t.name(), "time" | "duration") {
            out.push_str("int32 sec\nuint32 nanosec\n");
            continue;
        }
        for c in constants.get(t.name()).into_iter().flatten() {
            out.push_str(c);
            out.push('\n');
        }
        for (k, f) in t.fields().iter().enumerate() {
            if dropped
                .get(&id)
                .and_then(|d| d.get(k))
                .copied()
                .unwrap_or(false)
            {
                continue;
            }
            let ty = f.ty();
            let base = match ty.kind {
                FieldKind::Primitive(p) => p.name().to_owned(),
                FieldKind::Message(m) => short_name(table.message(m).name()),
            };
            let _ = match ty.arity {
                Arity::Single => writeln!(out, "{base} {}", f.name()),
                Arity::Fixed(len) => writeln!(out, "{base}[{len}] {}", f.name()),
                Arity::Bounded(len) => writeln!(out, "{base}[<={len}] {}", f.name()),
                Arity::Unbounded => writeln!(out, "{base}[] {}", f.name()),
            };
        }
    }
    out
}

/// One conversion: the ROS 1 bytes read so far, the CDR written so far.
struct Conv<'a> {
    src: &'a [u8],
    at: usize,
    out: &'a mut Vec<u8>,
    /// The field being converted, for errors.
    path: String,
}

impl Conv<'_> {
    fn short(&self) -> MapError {
        MapError::Truncated {
            field: self.path.clone(),
            offset: self.at,
            len: self.src.len(),
        }
    }

    fn take(&mut self, n: usize) -> Result<&[u8], MapError> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.src.len());
        let Some(end) = end else {
            return Err(self.short());
        };
        let s = &self.src[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32, MapError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Pads the CDR body (after the 4-byte header) to `align`.
    fn align(&mut self, align: usize) {
        let body = self.out.len() - 4;
        let pad = (align - body % align) % align;
        self.out.resize(self.out.len() + pad, 0);
    }

    fn message(&mut self, ty: &Ros2Type, id: TypeId) -> Result<(), MapError> {
        let t = ty.table.message(id);
        if t.fields().is_empty() {
            // rosidl's structure_needs_at_least_one_member.
            self.out.push(0);
            return Ok(());
        }
        for (k, f) in t.fields().iter().enumerate() {
            let len = self.path.len();
            if !self.path.is_empty() {
                self.path.push('.');
            }
            self.path.push_str(f.name());
            let drop = ty
                .dropped
                .get(&id)
                .and_then(|d| d.get(k))
                .copied()
                .unwrap_or(false);
            if drop {
                // Header.seq: a uint32 ROS 2 does not have.
                self.take(4)?;
            } else {
                self.field(ty, f.ty().kind, f.ty().arity)?;
            }
            self.path.truncate(len);
        }
        Ok(())
    }

    fn field(&mut self, ty: &Ros2Type, kind: FieldKind, arity: Arity) -> Result<(), MapError> {
        let count = match arity {
            Arity::Single => return self.element(ty, kind),
            Arity::Fixed(n) => n,
            Arity::Bounded(_) | Arity::Unbounded => {
                let n = self.u32()?;
                self.align(4);
                self.out.extend_from_slice(&n.to_le_bytes());
                n as usize
            }
        };
        // A count the payload cannot hold is refused before any loop; an
        // element without fields takes no ROS 1 bytes but one CDR byte, so
        // its count is bounded instead.
        let min = ty.table.min_size(kind);
        let fits = match min {
            0 => count <= MAX_EMPTY_ELEMENTS,
            m => count
                .checked_mul(m)
                .is_some_and(|need| need <= self.src.len() - self.at),
        };
        if !fits {
            return Err(self.short());
        }
        match kind {
            FieldKind::Primitive(p) if p.size().is_some() => {
                // Fixed-size primitives: the same bytes, aligned once
                // (each element's size is its alignment).
                let size = p.size().unwrap_or(1);
                let start = self.at;
                self.take(count * size)?;
                if count > 0 {
                    self.align(size);
                }
                let src = self.src;
                self.out
                    .extend_from_slice(&src[start..start + count * size]);
                Ok(())
            }
            _ => {
                for _ in 0..count {
                    self.element(ty, kind)?;
                }
                Ok(())
            }
        }
    }

    fn element(&mut self, ty: &Ros2Type, kind: FieldKind) -> Result<(), MapError> {
        match kind {
            FieldKind::Message(id) => self.message(ty, id),
            FieldKind::Primitive(Primitive::String | Primitive::WString) => {
                let n = self.u32()? as usize;
                let text_start = self.at;
                self.take(n)?;
                self.align(4);
                self.out.extend_from_slice(&((n + 1) as u32).to_le_bytes());
                let src = self.src;
                self.out.extend_from_slice(&src[text_start..text_start + n]);
                self.out.push(0);
                Ok(())
            }
            FieldKind::Primitive(p) => {
                let size = p.size().unwrap_or(1);
                let start = self.at;
                self.take(size)?;
                self.align(size);
                let src = self.src;
                self.out.extend_from_slice(&src[start..start + size]);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgerec_format::{cdr_decode, print::json_line};

    fn roundtrip(ty: &str, def: &str, ros1: &[u8]) -> String {
        let t = Ros2Type::from_ros1(ty, def).unwrap();
        let mut cdr = Vec::new();
        t.convert(ros1, &mut cdr).unwrap();
        let back = TypeTable::parse_with(t.name(), t.definition(), Dialect::Ros2).unwrap();
        json_line(&cdr_decode::decode(&back, &cdr).unwrap())
    }

    #[test]
    fn alignment_strings_arrays_and_nested_types() {
        // uint8 a, string s, float64[] v, int16[2] f, p/In[] ins (int8 b, uint32 c)
        let def = format!(
            "uint8 a\nstring s\nfloat64[] v\nint16[2] f\np/In[] ins\n{SEPARATOR}\nMSG: p/In\nbyte b\nuint32 c\n"
        );
        let mut m = vec![9u8];
        m.extend(2u32.to_le_bytes());
        m.extend(b"hi");
        m.extend(2u32.to_le_bytes());
        m.extend(1.5f64.to_le_bytes());
        m.extend((-2.0f64).to_le_bytes());
        m.extend(3i16.to_le_bytes());
        m.extend((-4i16).to_le_bytes());
        m.extend(1u32.to_le_bytes());
        m.push(0xff);
        m.extend(77u32.to_le_bytes());
        assert_eq!(
            roundtrip("p/T", &def, &m),
            r#"{"a":9,"s":"hi","v":[1.5,-2.0],"f":[3,-4],"ins":[{"b":-1,"c":77}]}"#
        );
    }

    #[test]
    fn types_without_fields_convert_alone_and_in_arrays() {
        // rosidl's one-byte member, which ROS 2 readers add to empty types.
        let empty = r#"{"structure_needs_at_least_one_member":0}"#;
        assert_eq!(roundtrip("std_msgs/Empty", "", &[]), empty);
        let def = format!("std_msgs/Empty[] ee\n{SEPARATOR}\nMSG: std_msgs/Empty\n");
        assert_eq!(
            roundtrip("p/E", &def, &3u32.to_le_bytes()),
            format!(r#"{{"ee":[{empty},{empty},{empty}]}}"#)
        );
        let t = Ros2Type::from_ros1("p/E", &def).unwrap();
        let e = t
            .convert(&u32::MAX.to_le_bytes(), &mut Vec::new())
            .unwrap_err();
        assert!(matches!(e, MapError::Truncated { .. }), "{e}");
    }

    #[test]
    fn constants_are_carried() {
        let def = format!(
            "uint8 OK=0  # fine\nbyte WARN = 1\nstring NAME=a # b\nuint8 level\nHeader header\n{SEPARATOR}\nMSG: std_msgs/Header\nuint32 seq\ntime stamp\nstring frame_id\n"
        );
        let t = Ros2Type::from_ros1("diagnostic_msgs/Status", &def).unwrap();
        assert!(
            t.definition().starts_with(
                "uint8 OK=0\nint8 WARN=1\nstring NAME=a # b\nuint8 level\nstd_msgs/Header header\n"
            ),
            "{}",
            t.definition()
        );
    }

    #[test]
    fn names_follow_rosbags() {
        assert_eq!(ros2_name("tf/tfMessage"), "tf2_msgs/msg/TFMessage");
        assert_eq!(ros2_name("sensor_msgs/Imu"), "sensor_msgs/msg/Imu");
        let t = Ros2Type::from_ros1("p/D", "duration d\ntime t\n").unwrap();
        assert_eq!(
            t.definition(),
            format!(
                "builtin_interfaces/Duration d\nbuiltin_interfaces/Time t\n{SEPARATOR}\nMSG: builtin_interfaces/Time\nint32 sec\nuint32 nanosec\n{SEPARATOR}\nMSG: builtin_interfaces/Duration\nint32 sec\nuint32 nanosec\n"
            )
        );
    }

    #[test]
    fn bad_payloads_name_the_field() {
        let t = Ros2Type::from_ros1("p/S", "string s\nuint32[] v\n").unwrap();
        let mut out = Vec::new();
        let mut m = Vec::new();
        m.extend(1u32.to_le_bytes());
        m.push(b'x');
        m.extend(0xffff_ffffu32.to_le_bytes());
        let e = t.convert(&m, &mut out).unwrap_err();
        assert!(
            matches!(&e, MapError::Truncated { field, .. } if field == "v"),
            "{e}"
        );
        m.truncate(5);
        m.extend(0u32.to_le_bytes());
        m.push(1);
        assert!(matches!(
            t.convert(&m, &mut out),
            Err(MapError::Trailing { extra: 1, .. })
        ));
        let e = t.convert(&[200, 0, 0, 0, b'x'], &mut out).unwrap_err();
        assert!(e.to_string().contains("field `s`"), "{e}");
    }

    /// A Header that declares `seq` other than `uint32` (the
    /// `ros1_to_ros2` fuzz target's find: `uint64 seq`) keeps it: what the
    /// ROS 1 decoder reads converts, byte for byte, and decodes as CDR.
    #[test]
    fn a_non_standard_header_seq_is_kept_not_dropped_as_four_bytes() {
        let def = format!(
            "Header header\n{SEPARATOR}\nMSG: std_msgs/Header\nuint64 seq\ntime stamp\nstring frame_id\n"
        );
        let mut m = 7u64.to_le_bytes().to_vec();
        m.extend(1u32.to_le_bytes());
        m.extend(2u32.to_le_bytes());
        m.extend(1u32.to_le_bytes());
        m.push(b'm');
        let t = Ros2Type::from_ros1("p/H", &def).unwrap();
        assert!(t.definition().contains("uint64 seq"), "{}", t.definition());
        assert_eq!(
            roundtrip("p/H", &def, &m),
            r#"{"header":{"seq":7,"stamp":{"sec":1,"nanosec":2},"frame_id":"m"}}"#
        );
        let ros1 = TypeTable::parse_with("p/H", &def, Dialect::Ros1).unwrap();
        assert!(edgerec_format::ros1_decode::decode(&ros1, &m).is_ok());
    }

    /// Every saved input of the `ros1_to_ros2` fuzz target keeps the
    /// target's property: what the ROS 1 decoder accepts converts, and
    /// what converts decodes as CDR.
    #[test]
    fn the_saved_fuzz_finds_keep_the_property() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/finds/ros1_to_ros2");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
            let text = std::str::from_utf8(&data[..end]).unwrap();
            let payload = data.get(end + 1..).unwrap_or(&[]);
            let ros1 = TypeTable::parse_with("fuzz_msgs/Root", text, Dialect::Ros1).unwrap();
            let t = Ros2Type::from_ros1("fuzz_msgs/Root", text).unwrap();
            let ros2 = TypeTable::parse_with(t.name(), t.definition(), Dialect::Ros2).unwrap();
            let mut cdr = Vec::new();
            let converted = t.convert(payload, &mut cdr);
            if edgerec_format::ros1_decode::decode(&ros1, payload).is_ok() {
                assert!(converted.is_ok(), "{}: {converted:?}", path.display());
            }
            if converted.is_ok() {
                cdr_decode::decode(&ros2, &cdr).unwrap();
            }
            n += 1;
        }
        assert!(n > 0, "no saved inputs in {}", dir.display());
    }
}
