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
//! (`structure_needs_at_least_one_member`), as it is on the wire. A ROS 1
//! `message_definition` (same concatenated form) parses with
//! [`Dialect::Ros1`], which keeps ROS 1's meaning of the names instead
//! (see there). Types nest at most [`MAX_NESTING`] levels, so walks over a
//! table, recursive or not, stay shallow whatever the schema text.
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

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::msgdefs::concat::{is_ros_name, split_type_name, SEPARATOR};

/// The deepest nesting of message types a table accepts: real types nest a
/// handful of levels (rosbag2 stops resolving at 50), and decoders recurse
/// once per level.
pub const MAX_NESTING: usize = 50;

/// Which ROS generation's meaning a schema's names have. The grammar and the
/// concatenated `MSG:` form are the same; the built-in names differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Dialect {
    /// ROS 2 (`ros2msg` schemas): types are named `pkg/msg/Type`, `byte` is
    /// an unsigned octet, `time`/`duration` are `builtin_interfaces`' `Time`
    /// and `Duration` (`int32 sec`, `uint32 nanosec`), and a type without
    /// fields has rosidl's one-byte member.
    #[default]
    Ros2,
    /// ROS 1 (`ros1msg` schemas, a bag connection's `message_definition`):
    /// types are named `pkg/Type`; `byte` is `int8` and `char` is `uint8`
    /// (the table holds them as [`Primitive::Int8`] and
    /// [`Primitive::UInt8`]); `time` is a type named `time` with
    /// `uint32 secs`, `uint32 nsecs` and `duration` one named `duration` with
    /// `int32 secs`, `int32 nsecs`, as ROS 1 serialises them; there is no
    /// `wstring`; a type without fields stays empty (nothing on the wire).
    Ros1,
}

/// Why a schema did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MsgTypeError {
    /// A type name that is not `pkg/Type` or `pkg/msg/Type`. Type names in
    /// the other variants are `pkg/msg/Type` ([`Dialect::Ros2`]) or
    /// `pkg/Type` ([`Dialect::Ros1`]).
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
    /// Types nested deeper than [`MAX_NESTING`] levels.
    #[error("{type_name} nests types {depth} levels deep, more than the {MAX_NESTING} accepted")]
    TooDeep {
        /// The outermost type of the too-deep chain.
        type_name: String,
        /// Its nesting depth (1 for a type of primitives only).
        depth: usize,
    },
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
    /// The primitive a `.msg` type token names, if any, in ROS 2.
    pub fn from_name(name: &str) -> Option<Primitive> {
        Primitive::from_name_in(name, Dialect::Ros2)
    }

    /// The primitive a `.msg` type token names in `dialect`: ROS 1's `byte`
    /// is [`Primitive::Int8`] and its `char` [`Primitive::UInt8`], and ROS 1
    /// has no `wstring`.
    pub fn from_name_in(name: &str, dialect: Dialect) -> Option<Primitive> {
        if dialect == Dialect::Ros1 {
            match name {
                "byte" => return Some(Primitive::Int8),
                "char" => return Some(Primitive::UInt8),
                "wstring" => return None,
                _ => {}
            }
        }
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
    dialect: Dialect,
    /// [`TypeTable::min_size`] of each type, computed once: readers ask it
    /// for every sequence count they check.
    min_sizes: Vec<usize>,
    /// Whether each type holds a `wstring`, computed once (a walk per
    /// question is exponential in the nesting of a type used twice per level).
    has_wstring: Vec<bool>,
}

/// The field rosidl adds to a message without fields, since IDL structs
/// cannot be empty; it is one byte on the wire.
const EMPTY_STRUCT_MEMBER: &str = "structure_needs_at_least_one_member";

/// Definitions of the builtin_interfaces types, for schemas that name them
/// the ROS 1 way (`time`, `duration`) without a section of their own.
const BUILTIN_TIME: &str = "int32 sec\nuint32 nanosec\n";

/// ROS 1's built-in `time` and `duration`, as `(name, fields)`: two 32-bit
/// halves, seconds then nanoseconds, unsigned for `time`.
const ROS1_TIME_TYPES: [(&str, &str); 2] = [
    ("time", "uint32 secs\nuint32 nsecs\n"),
    ("duration", "int32 secs\nint32 nsecs\n"),
];

impl TypeTable {
    /// Parses the ROS 2 schema of `root_type` (`pkg/msg/Type` or `pkg/Type`).
    pub fn parse(root_type: &str, definition: &str) -> Result<TypeTable, MsgTypeError> {
        TypeTable::parse_with(root_type, definition, Dialect::Ros2)
    }

    /// Parses the schema of `root_type` with the meaning `dialect` gives
    /// the built-in names.
    pub fn parse_with(
        root_type: &str,
        definition: &str,
        dialect: Dialect,
    ) -> Result<TypeTable, MsgTypeError> {
        let (root_pkg, root_ty) = split_type_name(root_type)
            .ok_or_else(|| MsgTypeError::BadTypeName(root_type.to_owned()))?;
        let mut sections = vec![Section {
            pkg: root_pkg.to_owned(),
            ty: root_ty.to_owned(),
            lines: Vec::new(),
        }];
        let mut seen: HashSet<(String, String)> = HashSet::new();
        seen.insert((root_pkg.to_owned(), root_ty.to_owned()));
        let mut lines = definition.lines().enumerate().peekable();
        while let Some((i, line)) = lines.next() {
            if line.trim_end() == SEPARATOR {
                if let Some((j, header)) = lines.peek().copied() {
                    if let Some(name) = header.trim().strip_prefix("MSG:") {
                        lines.next();
                        let name = name.trim();
                        let (pkg, ty) = split_type_name(name)
                            .ok_or_else(|| MsgTypeError::BadTypeName(name.to_owned()))?;
                        if !seen.insert((pkg.to_owned(), ty.to_owned())) {
                            return Err(MsgTypeError::DuplicateType {
                                type_name: full_name(dialect, pkg, ty),
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
            raw.push(parse_section(s, dialect)?);
        }
        if dialect == Dialect::Ros1 {
            for (name, text) in ROS1_TIME_TYPES {
                let used = raw.iter().flat_map(|t| &t.fields).any(
                    |f| matches!(&f.kind, RawKind::Message(p, t) if p.is_empty() && t == name),
                );
                if used {
                    raw.push(parse_section(
                        &Section {
                            pkg: String::new(),
                            ty: name.into(),
                            lines: text.lines().map(|l| (0, l)).collect(),
                        },
                        dialect,
                    )?);
                }
            }
        }
        for builtin in ["Time", "Duration"] {
            if dialect == Dialect::Ros1 {
                break;
            }
            let used = raw
                .iter()
                .flat_map(|t| &t.fields)
                .any(|f| matches!(&f.kind, RawKind::Message(p, t) if p == "builtin_interfaces" && t == builtin));
            let present = raw
                .iter()
                .any(|t| t.pkg == "builtin_interfaces" && t.ty == builtin);
            if used && !present {
                raw.push(parse_section(
                    &Section {
                        pkg: "builtin_interfaces".into(),
                        ty: builtin.into(),
                        lines: BUILTIN_TIME.lines().map(|l| (0, l)).collect(),
                    },
                    dialect,
                )?);
            }
        }

        let index: HashMap<(&str, &str), usize> = raw
            .iter()
            .enumerate()
            .map(|(i, r)| ((r.pkg.as_str(), r.ty.as_str()), i))
            .collect();
        let mut types = Vec::with_capacity(raw.len());
        for t in &raw {
            let name = full_name(dialect, &t.pkg, &t.ty);
            let mut fields = Vec::with_capacity(t.fields.len().max(1));
            for f in &t.fields {
                let kind = match &f.kind {
                    RawKind::Primitive(p) => FieldKind::Primitive(*p),
                    RawKind::Message(pkg, ty) => {
                        let at = index.get(&(pkg.as_str(), ty.as_str())).ok_or_else(|| {
                            MsgTypeError::MissingType {
                                used_by: name.clone(),
                                missing: full_name(dialect, pkg, ty),
                            }
                        })?;
                        FieldKind::Message(TypeId(*at))
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
            if fields.is_empty() && dialect == Dialect::Ros2 {
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
            dialect,
            min_sizes: Vec::new(),
            has_wstring: Vec::new(),
        };
        // Children before parents, so each type's summary reads its
        // fields' from the tables being filled.
        let order = table.children_first()?;
        let n = table.types.len();
        let (mut depth, mut min_sizes, mut has_wstring) = (vec![0; n], vec![0; n], vec![false; n]);
        for i in order {
            let mut deepest = 0;
            let mut size = 0usize;
            let mut wide = false;
            for f in &table.types[i].fields {
                let one = match f.ty.kind {
                    FieldKind::Primitive(p) => {
                        wide |= p == Primitive::WString;
                        table.primitive_min_size(p)
                    }
                    FieldKind::Message(TypeId(c)) => {
                        deepest = deepest.max(depth[c]);
                        wide |= has_wstring[c];
                        min_sizes[c]
                    }
                };
                size = size.saturating_add(match f.ty.arity {
                    Arity::Single => one,
                    Arity::Fixed(n) => one.saturating_mul(n),
                    Arity::Bounded(_) | Arity::Unbounded => 4,
                });
            }
            depth[i] = deepest + 1;
            if depth[i] > MAX_NESTING {
                return Err(MsgTypeError::TooDeep {
                    type_name: table.types[i].name.clone(),
                    depth: depth[i],
                });
            }
            min_sizes[i] = match dialect {
                Dialect::Ros2 => size.max(1),
                Dialect::Ros1 => size,
            };
            has_wstring[i] = wide;
        }
        table.min_sizes = min_sizes;
        table.has_wstring = has_wstring;
        Ok(table)
    }

    /// The meaning the table's names were parsed with.
    pub fn dialect(&self) -> Dialect {
        self.dialect
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
        let name = full_name(self.dialect, pkg, ty);
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
            FieldKind::Message(id) => self.has_wstring.get(id.0).copied().unwrap_or(false),
        }
    }

    /// The fewest bytes one element of `kind` takes on the wire, padding
    /// left out: a bound that lets a reader refuse a sequence count the
    /// payload cannot hold before it loops over it. At least 1 in a ROS 2
    /// table; 0 for a ROS 1 type with no fields, which has no bytes.
    pub fn min_size(&self, kind: FieldKind) -> usize {
        match kind {
            FieldKind::Primitive(p) => self.primitive_min_size(p),
            FieldKind::Message(id) => self.min_sizes.get(id.0).copied().unwrap_or(1),
        }
    }

    fn primitive_min_size(&self, p: Primitive) -> usize {
        match (p, self.dialect) {
            // A length that counts the NUL, and the NUL.
            (Primitive::String | Primitive::WString, Dialect::Ros2) => 5,
            // A length; ROS 1 strings have no NUL.
            (Primitive::String | Primitive::WString, Dialect::Ros1) => 4,
            (p, _) => p.size().unwrap_or(1),
        }
    }

    /// Every type once, each after the types its fields hold; a cycle is an
    /// error. Iterative, so a long chain of types cannot exhaust the stack.
    fn children_first(&self) -> Result<Vec<usize>, MsgTypeError> {
        // 0 unvisited, 1 on the current path, 2 done.
        let mut state = vec![0u8; self.types.len()];
        let mut order = Vec::with_capacity(self.types.len());
        // (type, index of the next field to look at): the current path.
        let mut stack: Vec<(usize, usize)> = Vec::new();
        let starts = std::iter::once(self.root.0).chain(0..self.types.len());
        for start in starts {
            if state[start] != 0 {
                continue;
            }
            state[start] = 1;
            stack.push((start, 0));
            while let Some(top) = stack.last_mut() {
                let (i, next) = *top;
                let Some(f) = self.types[i].fields.get(next) else {
                    stack.pop();
                    state[i] = 2;
                    order.push(i);
                    continue;
                };
                top.1 += 1;
                let FieldKind::Message(TypeId(c)) = f.ty.kind else {
                    continue;
                };
                match state[c] {
                    0 => {
                        state[c] = 1;
                        stack.push((c, 0));
                    }
                    1 => {
                        let from = stack.iter().position(|&(p, _)| p == c).unwrap_or(0);
                        let mut names: Vec<String> = stack[from..]
                            .iter()
                            .map(|&(p, _)| self.types[p].name.clone())
                            .collect();
                        names.push(self.types[c].name.clone());
                        return Err(MsgTypeError::Cycle(names));
                    }
                    _ => {}
                }
            }
        }
        Ok(order)
    }
}

/// A type's full name: `pkg/msg/Type` in ROS 2, `pkg/Type` in ROS 1, and
/// the bare name for ROS 1's `time` and `duration` (package `""`).
fn full_name(dialect: Dialect, pkg: &str, ty: &str) -> String {
    match dialect {
        Dialect::Ros2 => format!("{pkg}/msg/{ty}"),
        Dialect::Ros1 if pkg.is_empty() => ty.to_owned(),
        Dialect::Ros1 => format!("{pkg}/{ty}"),
    }
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

fn parse_section(s: &Section<'_>, dialect: Dialect) -> Result<RawType, MsgTypeError> {
    let mut fields: Vec<RawField> = Vec::new();
    let mut names: HashSet<&str> = HashSet::new();
    for &(line_no, line) in &s.lines {
        let syntax = |what: String| MsgTypeError::Syntax {
            type_name: full_name(dialect, &s.pkg, &s.ty),
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
        let field = parse_field_type(ty, &s.pkg, dialect).map_err(syntax)?;
        if !names.insert(name) {
            return Err(MsgTypeError::DuplicateField {
                type_name: full_name(dialect, &s.pkg, &s.ty),
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
fn parse_field_type(token: &str, package: &str, dialect: Dialect) -> Result<RawField, String> {
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
    let kind = if let Some(p) = Primitive::from_name_in(base, dialect) {
        RawKind::Primitive(p)
    } else {
        let (pkg, ty) = match base {
            "Header" => ("std_msgs", "Header"),
            "time" | "duration" if dialect == Dialect::Ros1 => ("", base),
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

    const ROS1_HEADER: &str = "uint32 seq\ntime stamp\nstring frame_id\n";

    #[test]
    fn ros1_names_keep_ros1_meaning() {
        let sep = SEPARATOR;
        let text = format!(
            "Header header\nbyte b\nchar c\nbyte[] bs\nduration d\ntime[2] ts\nEmpty e\n\
             {sep}\nMSG: std_msgs/Header\n{ROS1_HEADER}{sep}\nMSG: p/Empty\n# nothing\n"
        );
        let t = TypeTable::parse_with("p/Thing", &text, Dialect::Ros1).unwrap();
        assert_eq!(t.dialect(), Dialect::Ros1);
        let root = t.message(t.root());
        assert_eq!(root.name(), "p/Thing");
        let ty = |n: &str| root.field(n).unwrap().ty();
        assert_eq!(ty("b").kind, FieldKind::Primitive(Primitive::Int8));
        assert_eq!(ty("c").kind, FieldKind::Primitive(Primitive::UInt8));
        assert_eq!(ty("bs").kind, FieldKind::Primitive(Primitive::Int8));
        let time = t.find("std_msgs/Header").map(|h| t.message(h)).unwrap();
        assert_eq!(time.name(), "std_msgs/Header");
        assert_eq!(time.fields()[0].name(), "seq");
        assert_eq!(
            t.lookup("header.stamp.secs").unwrap().kind,
            FieldKind::Primitive(Primitive::UInt32)
        );
        assert_eq!(
            t.lookup("d.nsecs").unwrap().kind,
            FieldKind::Primitive(Primitive::Int32)
        );
        assert_eq!(t.lookup("ts").unwrap().arity, Arity::Fixed(2));
        let FieldKind::Message(d) = ty("d").kind else {
            panic!("duration is a type");
        };
        assert_eq!(t.message(d).name(), "duration");
        let empty = t.find("p/Empty").unwrap();
        assert!(
            t.message(empty).fields().is_empty(),
            "no rosidl member in ROS 1"
        );
        assert_eq!(t.min_size(FieldKind::Message(empty)), 0);
        // Header: 4 + 8 + a 4-byte string length.
        let header = t.find("std_msgs/msg/Header").unwrap();
        assert_eq!(t.min_size(FieldKind::Message(header)), 16);
        // wstring is no ROS 1 type.
        let err = TypeTable::parse_with("p/W", "wstring w\n", Dialect::Ros1).unwrap_err();
        assert!(matches!(err, MsgTypeError::MissingType { .. }), "{err}");
        // The same text in ROS 2 keeps its old meaning.
        let t2 = TypeTable::parse("p/Thing", &text).unwrap();
        assert_eq!(t2.message(t2.root()).name(), "p/msg/Thing");
        assert_eq!(
            t2.lookup("header.stamp.nanosec").unwrap().kind,
            FieldKind::Primitive(Primitive::UInt32)
        );
        assert_eq!(
            t2.lookup("b").unwrap().kind,
            FieldKind::Primitive(Primitive::Byte)
        );
    }

    #[test]
    fn deep_chains_are_refused_and_diamonds_are_fast() {
        let sep = SEPARATOR;
        let mut chain = String::from("T1 t\n");
        for i in 1..=MAX_NESTING + 5 {
            chain.push_str(&format!("{sep}\nMSG: p/T{i}\nT{} t\n", i + 1));
        }
        chain.push_str(&format!("{sep}\nMSG: p/T{}\nint8 x\n", MAX_NESTING + 6));
        let err = TypeTable::parse("p/T0", &chain).unwrap_err();
        assert!(matches!(err, MsgTypeError::TooDeep { .. }), "{err}");

        // Each level uses the next twice: 2^40 paths, one walk per type.
        let mut diamond = String::from("D1 a\nD1 b\n");
        for i in 1..40 {
            diamond.push_str(&format!("{sep}\nMSG: p/D{i}\nD{n} a\nD{n} b\n", n = i + 1));
        }
        diamond.push_str(&format!("{sep}\nMSG: p/D40\nwstring w\n"));
        let start = std::time::Instant::now();
        let t = TypeTable::parse("p/D0", &diamond).unwrap();
        assert!(t.contains_wstring(FieldKind::Message(t.root())));
        assert!(t.min_size(FieldKind::Message(t.root())) > 1 << 40);
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }
}
