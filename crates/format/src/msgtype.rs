//! Message types parsed from a rosbag2 `ros2msg` schema: the table that
//! [`crate::cdr_read`] walks to find a field in a CDR payload.
//!
//! A schema is the top-level `.msg` text, then for each type it uses a line
//! of 80 `=`, `MSG: pkg/Type` and that type's text (see [`crate::msgdefs`]).
//! [`TypeTable::parse`] turns every section into a [`MessageType`] and links
//! field types to table entries, so a field path is resolved once, not per
//! message. Comments, constants and default values are skipped; `Header`
//! means `std_msgs/Header`, the ROS 1 names `time` and `duration` mean
//! `builtin_interfaces/Time` and `Duration` (built in when the schema lacks
//! them), and a type with no fields gets the one `uint8` member rosidl adds
//! (`structure_needs_at_least_one_member`), as it is on the wire.
//!
//! ```
//! use edgerec_format::{msgdefs, msgtype::{FieldKind, Primitive, TypeTable}};
//!
//! let def = msgdefs::lookup("sensor_msgs/BatteryState").unwrap();
//! let table = TypeTable::parse(def.name, def.text()).unwrap();
//! let battery = table.message(table.root());
//! assert_eq!(battery.name(), "sensor_msgs/msg/BatteryState");
//! let voltage = battery.field("voltage").unwrap();
//! assert_eq!(voltage.ty().kind, FieldKind::Primitive(Primitive::Float32));
//! assert!(battery.field("voltge").is_none());
//! ```

use std::fmt;

use crate::msgdefs::concat::{is_ros_name, split_type_name, SEPARATOR};

/// Why a schema did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MsgTypeError {
    /// A type name that is not `pkg/Type` or `pkg/msg/Type`.
    #[error("`{0}` is not a message type name (pkg/Type or pkg/msg/Type)")]
    BadTypeName(String),
    /// A line of a section that is not a field, constant or comment.
    #[error("{type_name}, schema line {line}: {what}")]
    Syntax {
        /// The type whose section holds the line, `pkg/msg/Type`.
        type_name: String,
        /// 1-based line number within the whole schema text.
        line: usize,
        /// What is wrong.
        what: String,
    },
    /// Two fields of one type with the same name.
    #[error("{type_name}, schema line {line}: field `{field}` is defined twice")]
    DuplicateField {
        /// The type, `pkg/msg/Type`.
        type_name: String,
        /// 1-based line number of the second definition.
        line: usize,
        /// The field name.
        field: String,
    },
    /// Two sections for one type.
    #[error("schema line {line}: a second section for {type_name}")]
    DuplicateType {
        /// The type, `pkg/msg/Type`.
        type_name: String,
        /// 1-based line number of the second `MSG:` line.
        line: usize,
    },
    /// A field uses a type the schema has no section for.
    #[error("{used_by} uses {missing}, which the schema does not define")]
    MissingType {
        /// The type holding the field, `pkg/msg/Type`.
        used_by: String,
        /// The missing type, `pkg/msg/Type`.
        missing: String,
    },
    /// Types that contain themselves (no CDR payload could end).
    #[error("types contain themselves: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
}

/// A built-in field type of the `.msg` grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Primitive {
    /// `bool`, one byte.
    Bool,
    /// `byte`, an unsigned octet.
    Byte,
    /// `char`, an unsigned octet in ROS 2.
    Char,
    /// `int8`.
    Int8,
    /// `uint8`.
    UInt8,
    /// `int16`.
    Int16,
    /// `uint16`.
    UInt16,
    /// `int32`.
    Int32,
    /// `uint32`.
    UInt32,
    /// `int64`.
    Int64,
    /// `uint64`.
    UInt64,
    /// `float32`.
    Float32,
    /// `float64`.
    Float64,
    /// `string` (UTF-8), bounded or not.
    String,
    /// `wstring`; its CDR form differs between middlewares, so
    /// [`crate::cdr_read`] refuses paths that read or skip one.
    WString,
}

impl Primitive {
    /// The primitive a `.msg` type token names, if any.
    pub fn from_name(name: &str) -> Option<Primitive> {
        Some(match name {
            "bool" => Primitive::Bool,
            "byte" => Primitive::Byte,
            "char" => Primitive::Char,
            "int8" => Primitive::Int8,
            "uint8" => Primitive::UInt8,
            "int16" => Primitive::Int16,
            "uint16" => Primitive::UInt16,
            "int32" => Primitive::Int32,
            "uint32" => Primitive::UInt32,
            "int64" => Primitive::Int64,
            "uint64" => Primitive::UInt64,
            "float32" => Primitive::Float32,
            "float64" => Primitive::Float64,
            "string" => Primitive::String,
            "wstring" => Primitive::WString,
            _ => return None,
        })
    }

    /// The `.msg` name.
    pub fn name(self) -> &'static str {
        match self {
            Primitive::Bool => "bool",
            Primitive::Byte => "byte",
            Primitive::Char => "char",
            Primitive::Int8 => "int8",
            Primitive::UInt8 => "uint8",
            Primitive::Int16 => "int16",
            Primitive::UInt16 => "uint16",
            Primitive::Int32 => "int32",
            Primitive::UInt32 => "uint32",
            Primitive::Int64 => "int64",
            Primitive::UInt64 => "uint64",
            Primitive::Float32 => "float32",
            Primitive::Float64 => "float64",
            Primitive::String => "string",
            Primitive::WString => "wstring",
        }
    }

    /// Size in bytes on the wire, which is also its CDR alignment; `None`
    /// for strings, whose size is in the payload.
    pub fn size(self) -> Option<usize> {
        match self {
            Primitive::Bool
            | Primitive::Byte
            | Primitive::Char
            | Primitive::Int8
            | Primitive::UInt8 => Some(1),
            Primitive::Int16 | Primitive::UInt16 => Some(2),
            Primitive::Int32 | Primitive::UInt32 | Primitive::Float32 => Some(4),
            Primitive::Int64 | Primitive::UInt64 | Primitive::Float64 => Some(8),
            Primitive::String | Primitive::WString => None,
        }
    }
}

impl fmt::Display for Primitive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Index of a [`MessageType`] in its [`TypeTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TypeId(usize);

/// What one element of a field is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// A built-in type.
    Primitive(Primitive),
    /// A nested message.
    Message(TypeId),
}

/// Whether a field is one element or several.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// One element.
    Single,
    /// `T[N]`: exactly `N` elements, no count on the wire.
    Fixed(usize),
    /// `T[<=N]`: a sequence of at most `N` elements.
    Bounded(usize),
    /// `T[]`: a sequence.
    Unbounded,
}

impl Arity {
    /// Whether the field is an array or sequence of any kind.
    pub fn is_array(self) -> bool {
        self != Arity::Single
    }
}

/// A field's type: element kind and arity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldType {
    /// The element type.
    pub kind: FieldKind,
    /// One element, a fixed array or a sequence.
    pub arity: Arity,
    /// `N` of `string<=N`; not checked on read.
    pub string_bound: Option<usize>,
}

/// One field of a message type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    name: String,
    ty: FieldType,
}

impl Field {
    /// The field name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The field type.
    pub fn ty(&self) -> FieldType {
        self.ty
    }
}

/// A message type: its name and fields in wire order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageType {
    name: String,
    fields: Vec<Field>,
}

impl MessageType {
    /// The full name, `pkg/msg/Type`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The fields in the order they are serialised.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// A field by name.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Position of a field by name.
    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name)
    }
}

/// Every message type of one schema, linked, with the top-level one as root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeTable {
    types: Vec<MessageType>,
    root: TypeId,
    /// [`TypeTable::min_size`] of each type, computed once: readers ask it
    /// for every sequence count they check.
    min_sizes: Vec<usize>,
}

/// The field rosidl adds to a message without fields, since IDL structs
/// cannot be empty; it is one byte on the wire.
const EMPTY_STRUCT_MEMBER: &str = "structure_needs_at_least_one_member";

/// Definitions of the builtin_interfaces types, for schemas that name them
/// the ROS 1 way (`time`, `duration`) without a section of their own.
const BUILTIN_TIME: &str = "int32 sec\nuint32 nanosec\n";

impl TypeTable {
    /// Parses the schema of `root_type` (`pkg/msg/Type` or `pkg/Type`).
    pub fn parse(root_type: &str, definition: &str) -> Result<TypeTable, MsgTypeError> {
        let (root_pkg, root_ty) = split_type_name(root_type)
            .ok_or_else(|| MsgTypeError::BadTypeName(root_type.to_owned()))?;
        let mut sections = vec![Section {
            pkg: root_pkg.to_owned(),
            ty: root_ty.to_owned(),
            lines: Vec::new(),
        }];
        let mut lines = definition.lines().enumerate().peekable();
        while let Some((i, line)) = lines.next() {
            if line.trim_end() == SEPARATOR {
                if let Some((j, header)) = lines.peek().copied() {
                    if let Some(name) = header.trim().strip_prefix("MSG:") {
                        lines.next();
                        let name = name.trim();
                        let (pkg, ty) = split_type_name(name)
                            .ok_or_else(|| MsgTypeError::BadTypeName(name.to_owned()))?;
                        if sections.iter().any(|s| s.pkg == pkg && s.ty == ty) {
                            return Err(MsgTypeError::DuplicateType {
                                type_name: full_name(pkg, ty),
                                line: j + 1,
                            });
                        }
                        sections.push(Section {
                            pkg: pkg.to_owned(),
                            ty: ty.to_owned(),
                            lines: Vec::new(),
                        });
                        continue;
                    }
                }
            }
            if let Some(section) = sections.last_mut() {
                section.lines.push((i + 1, line));
            }
        }

        let mut raw: Vec<RawType> = Vec::with_capacity(sections.len());
        for s in &sections {
            raw.push(parse_section(s)?);
        }
        for builtin in ["Time", "Duration"] {
            let used = raw
                .iter()
                .flat_map(|t| &t.fields)
                .any(|f| matches!(&f.kind, RawKind::Message(p, t) if p == "builtin_interfaces" && t == builtin));
            let present = raw
                .iter()
                .any(|t| t.pkg == "builtin_interfaces" && t.ty == builtin);
            if used && !present {
                raw.push(parse_section(&Section {
                    pkg: "builtin_interfaces".into(),
                    ty: builtin.into(),
                    lines: BUILTIN_TIME.lines().map(|l| (0, l)).collect(),
                })?);
            }
        }

        let mut types = Vec::with_capacity(raw.len());
        for t in &raw {
            let name = full_name(&t.pkg, &t.ty);
            let mut fields = Vec::with_capacity(t.fields.len().max(1));
            for f in &t.fields {
                let kind = match &f.kind {
                    RawKind::Primitive(p) => FieldKind::Primitive(*p),
                    RawKind::Message(pkg, ty) => {
                        let at = raw
                            .iter()
                            .position(|r| &r.pkg == pkg && &r.ty == ty)
                            .ok_or_else(|| MsgTypeError::MissingType {
                                used_by: name.clone(),
                                missing: full_name(pkg, ty),
                            })?;
                        FieldKind::Message(TypeId(at))
                    }
                };
                fields.push(Field {
                    name: f.name.clone(),
                    ty: FieldType {
                        kind,
                        arity: f.arity,
                        string_bound: f.string_bound,
                    },
                });
            }
            if fields.is_empty() {
                fields.push(Field {
                    name: EMPTY_STRUCT_MEMBER.to_owned(),
                    ty: FieldType {
                        kind: FieldKind::Primitive(Primitive::UInt8),
                        arity: Arity::Single,
                        string_bound: None,
                    },
                });
            }
            types.push(MessageType { name, fields });
        }
        let mut table = TypeTable {
            types,
            root: TypeId(0),
            min_sizes: Vec::new(),
        };
        table.check_acyclic()?;
        table.min_sizes = (0..table.types.len())
            .map(|i| table.message_min_size(TypeId(i)))
            .collect();
        Ok(table)
    }

    /// The top-level type of the schema.
    pub fn root(&self) -> TypeId {
        self.root
    }

    /// A type of this table.
    ///
    /// # Panics
    /// If `id` comes from another table and is out of this one's range.
    pub fn message(&self, id: TypeId) -> &MessageType {
        &self.types[id.0]
    }

    /// Every type, the root first.
    pub fn types(&self) -> impl Iterator<Item = (TypeId, &MessageType)> {
        self.types.iter().enumerate().map(|(i, t)| (TypeId(i), t))
    }

    /// A type by name (`pkg/msg/Type` or `pkg/Type`).
    pub fn find(&self, type_name: &str) -> Option<TypeId> {
        let (pkg, ty) = split_type_name(type_name)?;
        let name = full_name(pkg, ty);
        self.types.iter().position(|t| t.name == name).map(TypeId)
    }

    /// The type of the field at `path` (names joined by `.`, no indices),
    /// from the root: `header.stamp.sec`. An array field in the middle of
    /// the path is looked into as if indexed. `None` if a name is unknown.
    pub fn lookup(&self, path: &str) -> Option<FieldType> {
        let mut ty = self.root;
        let mut found = None;
        for name in path.split('.') {
            let FieldKind::Message(current) =
                found.map_or(FieldKind::Message(ty), |f: FieldType| f.kind)
            else {
                return None;
            };
            ty = current;
            found = Some(self.message(ty).field(name)?.ty);
        }
        found
    }

    /// Whether values of `kind`, or anything inside them, are `wstring`s.
    pub fn contains_wstring(&self, kind: FieldKind) -> bool {
        match kind {
            FieldKind::Primitive(p) => p == Primitive::WString,
            // Acyclic (checked by parse), so this ends.
            FieldKind::Message(id) => self
                .message(id)
                .fields
                .iter()
                .any(|f| self.contains_wstring(f.ty.kind)),
        }
    }

    /// The fewest bytes one element of `kind` takes on the wire, padding
    /// left out: a bound that lets a reader refuse a sequence count the
    /// payload cannot hold before it loops over it. At least 1.
    pub fn min_size(&self, kind: FieldKind) -> usize {
        match kind {
            // A length that counts the NUL, and the NUL.
            FieldKind::Primitive(Primitive::String | Primitive::WString) => 5,
            FieldKind::Primitive(p) => p.size().unwrap_or(1),
            FieldKind::Message(id) => match self.min_sizes.get(id.0) {
                Some(&n) => n,
                None => self.message_min_size(id),
            },
        }
    }

    /// [`TypeTable::min_size`] of a message, from its fields.
    fn message_min_size(&self, id: TypeId) -> usize {
        // Acyclic (checked by parse), so the recursion ends.
        self.message(id)
            .fields
            .iter()
            .map(|f| {
                let one = self.min_size(f.ty.kind);
                match f.ty.arity {
                    Arity::Single => one,
                    Arity::Fixed(n) => one.saturating_mul(n),
                    Arity::Bounded(_) | Arity::Unbounded => 4,
                }
            })
            .fold(0usize, usize::saturating_add)
            .max(1)
    }

    fn check_acyclic(&self) -> Result<(), MsgTypeError> {
        // 0 unvisited, 1 on the current path, 2 done.
        let mut state = vec![0u8; self.types.len()];
        let mut path = Vec::new();
        self.visit(self.root.0, &mut state, &mut path)?;
        for i in 0..self.types.len() {
            self.visit(i, &mut state, &mut path)?;
        }
        Ok(())
    }

    fn visit(&self, i: usize, state: &mut [u8], path: &mut Vec<usize>) -> Result<(), MsgTypeError> {
        match state[i] {
            2 => return Ok(()),
            1 => {
                let start = path.iter().position(|&p| p == i).unwrap_or(0);
                let mut names: Vec<String> = path[start..]
                    .iter()
                    .map(|&p| self.types[p].name.clone())
                    .collect();
                names.push(self.types[i].name.clone());
                return Err(MsgTypeError::Cycle(names));
            }
            _ => {}
        }
        state[i] = 1;
        path.push(i);
        for f in &self.types[i].fields {
            if let FieldKind::Message(TypeId(n)) = f.ty.kind {
                self.visit(n, state, path)?;
            }
        }
        path.pop();
        state[i] = 2;
        Ok(())
    }
}

fn full_name(pkg: &str, ty: &str) -> String {
    format!("{pkg}/msg/{ty}")
}

struct Section<'a> {
    pkg: String,
    ty: String,
    /// `(1-based line number in the schema, text)`.
    lines: Vec<(usize, &'a str)>,
}

struct RawType {
    pkg: String,
    ty: String,
    fields: Vec<RawField>,
}

struct RawField {
    name: String,
    kind: RawKind,
    arity: Arity,
    string_bound: Option<usize>,
}

enum RawKind {
    Primitive(Primitive),
    /// `(pkg, Type)`.
    Message(String, String),
}

fn parse_section(s: &Section<'_>) -> Result<RawType, MsgTypeError> {
    let mut fields: Vec<RawField> = Vec::new();
    for &(line_no, line) in &s.lines {
        let syntax = |what: String| MsgTypeError::Syntax {
            type_name: full_name(&s.pkg, &s.ty),
            line: line_no,
            what,
        };
        // A '#' inside a string constant or default also cuts here; both
        // are skipped, so what is cut does not matter.
        let code = line.split('#').next().unwrap_or("").trim();
        if code.is_empty() {
            continue;
        }
        let mut tokens = code.split_whitespace();
        let (Some(ty), Some(name)) = (tokens.next(), tokens.next()) else {
            return Err(syntax(format!("`{code}` is not `type name`")));
        };
        if name.contains('=') || tokens.next().is_some_and(|t| t.starts_with('=')) {
            continue; // a constant
        }
        if !is_ros_name(name) {
            return Err(syntax(format!("`{name}` is not a field name")));
        }
        let field = parse_field_type(ty, &s.pkg).map_err(syntax)?;
        if fields.iter().any(|f| f.name == name) {
            return Err(MsgTypeError::DuplicateField {
                type_name: full_name(&s.pkg, &s.ty),
                line: line_no,
                field: name.to_owned(),
            });
        }
        fields.push(RawField {
            name: name.to_owned(),
            ..field
        });
    }
    Ok(RawType {
        pkg: s.pkg.clone(),
        ty: s.ty.clone(),
        fields,
    })
}

/// A type token (`float64[9]`, `string<=8`, `Point[<=3]`, `pkg/Type[]`) as
/// a field with no name yet.
fn parse_field_type(token: &str, package: &str) -> Result<RawField, String> {
    let (element, arity) = match token.split_once('[') {
        None => (token, Arity::Single),
        Some((element, rest)) => {
            let inside = rest
                .strip_suffix(']')
                .ok_or_else(|| format!("`{token}`: an array suffix ends with `]`"))?;
            let arity = if inside.is_empty() {
                Arity::Unbounded
            } else if let Some(n) = inside.strip_prefix("<=") {
                Arity::Bounded(parse_size(n, token)?)
            } else {
                Arity::Fixed(parse_size(inside, token)?)
            };
            (element, arity)
        }
    };
    let (base, string_bound) = match element.split_once("<=") {
        None => (element, None),
        Some((base, n)) => {
            if base != "string" && base != "wstring" {
                return Err(format!("`{token}`: only strings take a `<=` bound"));
            }
            (base, Some(parse_size(n, token)?))
        }
    };
    let kind = if let Some(p) = Primitive::from_name(base) {
        RawKind::Primitive(p)
    } else {
        let (pkg, ty) = match base {
            "Header" => ("std_msgs", "Header"),
            "time" => ("builtin_interfaces", "Time"),
            "duration" => ("builtin_interfaces", "Duration"),
            _ if !base.contains('/') => (package, base),
            _ => split_type_name(base).ok_or_else(|| format!("`{base}` is not a type name"))?,
        };
        if !is_ros_name(ty) {
            return Err(format!("`{base}` is not a type name"));
        }
        RawKind::Message(pkg.to_owned(), ty.to_owned())
    };
    Ok(RawField {
        name: String::new(),
        kind,
        arity,
        string_bound,
    })
}

fn parse_size(text: &str, token: &str) -> Result<usize, String> {
    text.parse()
        .map_err(|_| format!("`{token}`: `{text}` is not an array size"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msgdefs;

    fn table(name: &str) -> TypeTable {
        let def = msgdefs::lookup(name).expect("embedded");
        TypeTable::parse(def.name, def.text()).expect("parses")
    }

    #[test]
    fn every_embedded_definition_parses() {
        for def in msgdefs::all() {
            let t = TypeTable::parse(def.name, def.text())
                .unwrap_or_else(|e| panic!("{}: {e}", def.name));
            assert_eq!(t.message(t.root()).name(), def.name);
            // One type per section, plus none invented.
            let sections = def.text().matches("\nMSG: ").count();
            assert_eq!(t.types().count(), sections + 1, "{}", def.name);
        }
    }

    #[test]
    fn battery_state_fields_in_wire_order() {
        let t = table("sensor_msgs/msg/BatteryState");
        let names: Vec<&str> = t
            .message(t.root())
            .fields()
            .iter()
            .map(Field::name)
            .collect();
        assert_eq!(names[..4], ["header", "voltage", "temperature", "current"]);
        assert_eq!(names.len(), 16, "constants are not fields: {names:?}");
        let cells = t.lookup("cell_voltage").unwrap();
        assert_eq!(cells.kind, FieldKind::Primitive(Primitive::Float32));
        assert_eq!(cells.arity, Arity::Unbounded);
        let frame = t.lookup("header.frame_id").unwrap();
        assert_eq!(frame.kind, FieldKind::Primitive(Primitive::String));
        let sec = t.lookup("header.stamp.sec").unwrap();
        assert_eq!(sec.kind, FieldKind::Primitive(Primitive::Int32));
        assert!(t.lookup("header.stamp.nope").is_none());
        assert!(t.lookup("voltage.x").is_none());
        let header = t.find("std_msgs/Header").unwrap();
        assert_eq!(t.lookup("header").unwrap().kind, FieldKind::Message(header));
    }

    #[test]
    fn arrays_bounds_defaults_and_constants() {
        let text = "# comment\n\
                    int32 FOO=1\n\
                    string BAR = \"a#b\"\n\
                    float64 x 0.0\n\
                    float64[9] cov # row major\n\
                    string<=8 short\n\
                    string<=4[<=2] names\n\
                    Point[] points\n\
                    p/Point[3] three\n\
                    p/msg/Point[<=5] few\n\
                    time stamp\n\
                    duration d\n\
                    Header header\n\
                    ================================================================================\n\
                    MSG: p/Point\n\
                    float64 x\n\
                    ================================================================================\n\
                    MSG: std_msgs/Header\n\
                    builtin_interfaces/Time stamp\n\
                    string frame_id\n";
        let t = TypeTable::parse("p/msg/Thing", text).unwrap();
        let root = t.message(t.root());
        let ty = |n: &str| root.field(n).unwrap().ty();
        assert_eq!(root.fields().len(), 10);
        assert_eq!(ty("x").kind, FieldKind::Primitive(Primitive::Float64));
        assert_eq!(ty("cov").arity, Arity::Fixed(9));
        assert_eq!(ty("short").string_bound, Some(8));
        assert_eq!(ty("names").arity, Arity::Bounded(2));
        assert_eq!(ty("names").string_bound, Some(4));
        let point = t.find("p/Point").unwrap();
        assert_eq!(ty("points").kind, FieldKind::Message(point));
        assert_eq!(ty("three").arity, Arity::Fixed(3));
        assert_eq!(ty("few").arity, Arity::Bounded(5));
        let time = t.find("builtin_interfaces/msg/Time").unwrap();
        assert_eq!(ty("stamp").kind, FieldKind::Message(time));
        assert_eq!(t.message(time).fields().len(), 2);
        assert!(t.find("builtin_interfaces/Duration").is_some());
        assert_eq!(
            t.lookup("header.stamp.nanosec").unwrap().kind,
            FieldKind::Primitive(Primitive::UInt32)
        );
    }

    #[test]
    fn empty_types_get_rosidls_member() {
        let t = table("std_msgs/Empty");
        let f = t.message(t.root()).fields();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].name(), EMPTY_STRUCT_MEMBER);
        assert_eq!(t.min_size(FieldKind::Message(t.root())), 1);
    }

    #[test]
    fn min_size_of_imu() {
        let t = table("sensor_msgs/Imu");
        // stamp 8 + frame_id 5 + 4 + 9 + 3 + 9 + 3 + 9 doubles.
        assert_eq!(t.min_size(FieldKind::Message(t.root())), 8 + 5 + 37 * 8);
    }

    #[test]
    fn errors_name_the_type_and_line() {
        let err = TypeTable::parse("p/A", "int32 a\nfloat64[x] b\n").unwrap_err();
        assert_eq!(
            err,
            MsgTypeError::Syntax {
                type_name: "p/msg/A".into(),
                line: 2,
                what: "`float64[x]`: `x` is not an array size".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "p/msg/A, schema line 2: `float64[x]`: `x` is not an array size"
        );
        let err = TypeTable::parse("p/A", "int32 a\nint32 a\n").unwrap_err();
        assert!(
            matches!(err, MsgTypeError::DuplicateField { line: 2, .. }),
            "{err}"
        );
        let err = TypeTable::parse("p/A", "loner\n").unwrap_err();
        assert!(matches!(err, MsgTypeError::Syntax { line: 1, .. }), "{err}");
        let err = TypeTable::parse("p/A", "int32 a\nB b\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "p/msg/A uses p/msg/B, which the schema does not define"
        );
        let err = TypeTable::parse("A", "int32 a\n").unwrap_err();
        assert_eq!(err, MsgTypeError::BadTypeName("A".into()));
        let err = TypeTable::parse("p/A", "int32<=3 a\n").unwrap_err();
        assert!(err.to_string().contains("only strings"), "{err}");
        let sep = SEPARATOR;
        let err = TypeTable::parse(
            "p/A",
            &format!("B b\n{sep}\nMSG: p/B\nint8 x\n{sep}\nMSG: p/B\nint8 y\n"),
        )
        .unwrap_err();
        assert_eq!(
            err,
            MsgTypeError::DuplicateType {
                type_name: "p/msg/B".into(),
                line: 6
            }
        );
    }

    #[test]
    fn cycles_are_refused() {
        let sep = SEPARATOR;
        let text = format!("B b\n{sep}\nMSG: p/B\nC[] c\n{sep}\nMSG: p/C\nB b\n");
        let err = TypeTable::parse("p/A", &text).unwrap_err();
        assert_eq!(
            err,
            MsgTypeError::Cycle(vec!["p/msg/B".into(), "p/msg/C".into(), "p/msg/B".into()])
        );
    }
}
