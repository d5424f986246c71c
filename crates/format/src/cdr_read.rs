//! Reads single fields of CDR messages, as rosbag2 stores them, by path:
//! `linear_acceleration.x`, `status[0].level`, `ranges[0]`.
//!
//! A [`FieldPath`] is resolved against a [`TypeTable`] once; reading it
//! walks the payload from the start, skipping the fields before the one it
//! names (arrays of primitives by arithmetic, strings and sequences by
//! their length prefix). The encapsulation header picks the byte order
//! (`00 01` little endian, `00 00` big endian); alignment counts from the
//! byte after it, 8-byte types align to 8 (XCDR1, what Fast DDS and
//! Cyclone DDS send for ROS 2 Humble and Jazzy), and an empty sequence of
//! primitives has no alignment padding after its count, as Fast CDR writes
//! it. Every read is bounds-checked: a short or garbled payload is a
//! [`ReadError`], never a panic, and a sequence count is checked against
//! the bytes left before anything loops over it; nothing is allocated
//! except a string that is not valid UTF-8, which is read lossily (U+FFFD
//! for each bad sequence) rather than refused, since publishers do send
//! Latin-1 in `frame_id`s. Strings are read without their trailing NUL;
//! bounds of `string<=N` and `T[<=N]` are not checked on read; a `bool`
//! byte other than 0 reads as `true`. A path resolved against a ROS 1
//! table ([`crate::msgtype::Dialect::Ros1`], a bag connection's
//! definition) reads ROS 1 serialization the same way: packed, little
//! endian, no header, strings without a NUL.
//!
//! ```
//! use std::sync::Arc;
//! use edgerec_format::cdr::{msg, Time};
//! use edgerec_format::cdr_read::{FieldPath, Value};
//! use edgerec_format::{msgdefs, msgtype::TypeTable};
//!
//! let def = msgdefs::lookup("sensor_msgs/Imu").unwrap();
//! let types = Arc::new(TypeTable::parse(def.name, def.text()).unwrap());
//! let path = FieldPath::resolve(&types, "linear_acceleration.z").unwrap();
//! let imu = msg::imu(Time::default(), "imu", [0.0, 0.0, 0.0, 1.0],
//!     [0.0; 3], [0.0, 0.0, 9.81], [[0.0; 9]; 3]);
//! assert_eq!(path.read(&imu).unwrap(), Value::Float(9.81));
//! ```

use std::fmt;
use std::sync::Arc;

use crate::msgtype::{Arity, Dialect, FieldKind, FieldType, Primitive, TypeId, TypeTable};
pub use crate::value::{Value, ValueKind};
pub use crate::wire::ReadError;
use crate::wire::WireCursor;

/// Why a path does not name a readable field of a type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}")]
pub struct PathError {
    /// 0-based character offset in the path text of the part at fault.
    pub offset: usize,
    /// What is wrong.
    pub kind: PathErrorKind,
}

/// What is wrong with a field path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathErrorKind {
    /// Not `name`, `name[N]` parts joined by `.`.
    #[error("{0}")]
    Syntax(&'static str),
    /// A name the type does not have.
    #[error("unknown field `{field}` of {type_name} (fields: {})", .fields.join(", "))]
    UnknownField {
        /// The name as written.
        field: String,
        /// The type searched, `pkg/msg/Type`.
        type_name: String,
        /// The type's fields, in order.
        fields: Vec<String>,
    },
    /// `[N]` after a field that is not an array.
    #[error("`{field}` is a {ty}, not an array; remove the `[...]`")]
    NotAnArray {
        /// The field.
        field: String,
        /// Its type.
        ty: String,
    },
    /// `[N]` past the end of a fixed-size array.
    #[error("index {index} is past the end of `{field}`, an array of {len}")]
    IndexOutOfRange {
        /// The field.
        field: String,
        /// The index written.
        index: u64,
        /// The array's size.
        len: usize,
    },
    /// `.name` after a field that is not a message.
    #[error("`{field}` is a {ty}; it has no fields")]
    NotAMessage {
        /// The field.
        field: String,
        /// Its type.
        ty: String,
    },
    /// The path ends on a whole message.
    #[error("`{field}` is a {type_name} message; name one of its fields ({})", .fields.join(", "))]
    EndsOnMessage {
        /// The field.
        field: String,
        /// Its type, `pkg/msg/Type`.
        type_name: String,
        /// That type's fields.
        fields: Vec<String>,
    },
    /// The path ends on a whole array.
    #[error("`{field}` is an array; name one element, e.g. `{field}[0]`")]
    EndsOnArray {
        /// The field.
        field: String,
    },
    /// The path reads, or must skip, a `wstring`, whose CDR form differs
    /// between middlewares (Fast DDS 4-byte, Cyclone 2-byte characters).
    #[error("`{field}` is or holds a wstring, whose CDR form differs between DDS implementations; it cannot be read or skipped")]
    WString {
        /// The field.
        field: String,
    },
}

/// One move from the start of a message towards the field.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// Skip the fields of `ty` before `index`; land on field `index`.
    Field { ty: TypeId, index: usize },
    /// In the array field just landed on, go to element `index`.
    Element { ty: FieldType, index: u32 },
}

/// A field path resolved against a [`TypeTable`]: reads one primitive or
/// string value from messages of the table's root type.
#[derive(Debug, Clone)]
pub struct FieldPath {
    text: String,
    types: Arc<TypeTable>,
    steps: Vec<Step>,
    leaf: Primitive,
}

impl PartialEq for FieldPath {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text && self.steps == other.steps && self.types == other.types
    }
}

impl FieldPath {
    /// Resolves `path` (`name` or `name[N]` parts joined by `.`) from the
    /// root type of `types`. It must end on a primitive or string, not on a
    /// message or a whole array.
    pub fn resolve(types: &Arc<TypeTable>, path: &str) -> Result<FieldPath, PathError> {
        let parts = split_path(path)?;
        let mut steps = Vec::with_capacity(parts.len() * 2);
        let mut ty = types.root();
        let mut leaf: Option<(String, Primitive)> = None;
        for (n, part) in parts.iter().enumerate() {
            let err = |at: usize, kind| PathError {
                offset: char_offset(path, at),
                kind,
            };
            if let Some((field, prim)) = leaf.take() {
                return Err(err(
                    part.at,
                    PathErrorKind::NotAMessage {
                        field,
                        ty: prim.name().to_owned(),
                    },
                ));
            }
            let message = types.message(ty);
            let index = message.field_index(part.name).ok_or_else(|| {
                err(
                    part.at,
                    PathErrorKind::UnknownField {
                        field: part.name.to_owned(),
                        type_name: message.name().to_owned(),
                        fields: message
                            .fields()
                            .iter()
                            .map(|f| f.name().to_owned())
                            .collect(),
                    },
                )
            })?;
            let field = &message.fields()[index];
            for before in &message.fields()[..index] {
                if types.contains_wstring(before.ty().kind) {
                    return Err(err(
                        part.at,
                        PathErrorKind::WString {
                            field: before.name().to_owned(),
                        },
                    ));
                }
            }
            steps.push(Step::Field { ty, index });
            let fty = field.ty();
            match (part.index, fty.arity) {
                (Some(i), Arity::Fixed(len)) if i >= len as u64 => {
                    return Err(err(
                        part.index_at,
                        PathErrorKind::IndexOutOfRange {
                            field: part.name.to_owned(),
                            index: i,
                            len,
                        },
                    ));
                }
                (Some(i), arity) if arity.is_array() => {
                    let index = u32::try_from(i).map_err(|_| {
                        err(
                            part.index_at,
                            PathErrorKind::Syntax("the index is too large"),
                        )
                    })?;
                    steps.push(Step::Element { ty: fty, index });
                }
                (Some(_), _) => {
                    return Err(err(
                        part.index_at,
                        PathErrorKind::NotAnArray {
                            field: part.name.to_owned(),
                            ty: describe(types, fty.kind),
                        },
                    ));
                }
                (None, arity) if arity.is_array() => {
                    if n + 1 == parts.len() {
                        return Err(err(
                            part.at,
                            PathErrorKind::EndsOnArray {
                                field: part.name.to_owned(),
                            },
                        ));
                    }
                    return Err(err(
                        parts[n + 1].at,
                        PathErrorKind::Syntax(
                            "an array field needs an index, e.g. `name[0].field`",
                        ),
                    ));
                }
                (None, _) => {}
            }
            match fty.kind {
                FieldKind::Message(inner) => ty = inner,
                FieldKind::Primitive(Primitive::WString) => {
                    return Err(err(
                        part.at,
                        PathErrorKind::WString {
                            field: part.name.to_owned(),
                        },
                    ));
                }
                FieldKind::Primitive(p) => leaf = Some((part.name.to_owned(), p)),
            }
            // Elements before the indexed one are skipped too.
            if let Some(Step::Element { index, .. }) = steps.last() {
                if *index > 0 && types.contains_wstring(fty.kind) {
                    return Err(err(
                        part.at,
                        PathErrorKind::WString {
                            field: part.name.to_owned(),
                        },
                    ));
                }
            }
        }
        let Some((_, leaf)) = leaf else {
            let last = parts.last().map_or("", |p| p.name);
            let message = types.message(ty);
            return Err(PathError {
                offset: char_offset(path, parts.last().map_or(0, |p| p.at)),
                kind: PathErrorKind::EndsOnMessage {
                    field: last.to_owned(),
                    type_name: message.name().to_owned(),
                    fields: message
                        .fields()
                        .iter()
                        .map(|f| f.name().to_owned())
                        .collect(),
                },
            });
        };
        Ok(FieldPath {
            text: path.to_owned(),
            types: Arc::clone(types),
            steps,
            leaf,
        })
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The type of the field read.
    pub fn leaf(&self) -> Primitive {
        self.leaf
    }

    /// The kind of value [`FieldPath::read`] returns.
    pub fn kind(&self) -> ValueKind {
        // resolve refuses wstring leaves.
        ValueKind::of(self.leaf).unwrap_or(ValueKind::Str)
    }

    /// The table the path was resolved against.
    pub fn types(&self) -> &Arc<TypeTable> {
        &self.types
    }

    /// Reads the field from one payload: CDR (encapsulation header first)
    /// for a ROS 2 table, ROS 1 serialization (packed, little endian) for
    /// a [`Dialect::Ros1`] one.
    pub fn read<'a>(&self, payload: &'a [u8]) -> Result<Value<'a>, ReadError> {
        let mut cur = match self.types.dialect() {
            Dialect::Ros2 => WireCursor::cdr(payload)?,
            Dialect::Ros1 => WireCursor::ros1(payload),
        };
        for step in &self.steps {
            match *step {
                Step::Field { ty, index } => {
                    for f in &self.types.message(ty).fields()[..index] {
                        cur.skip_field(&self.types, f.ty())?;
                    }
                }
                Step::Element { ty, index } => {
                    // resolve checked indices into fixed arrays.
                    if !matches!(ty.arity, Arity::Fixed(_)) {
                        let count = cur.count(&self.types, ty.kind)?;
                        if index >= count {
                            return Err(ReadError::NotPresent { index, len: count });
                        }
                    }
                    cur.skip_n(&self.types, ty.kind, index as usize)?;
                }
            }
        }
        cur.read(self.leaf)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// How a field type reads in messages: `float32[]`, `std_msgs/msg/Header`.
fn describe(types: &TypeTable, kind: FieldKind) -> String {
    match kind {
        FieldKind::Primitive(p) => p.name().to_owned(),
        FieldKind::Message(id) => types.message(id).name().to_owned(),
    }
}

fn char_offset(text: &str, byte: usize) -> usize {
    text.get(..byte).map_or(byte, |s| s.chars().count())
}

/// One `name` or `name[N]` of a path, with byte offsets.
pub(crate) struct Part<'a> {
    pub(crate) name: &'a str,
    pub(crate) at: usize,
    /// `N`.
    pub(crate) index: Option<u64>,
    /// Offset of the `[`, or of the end of the name when there is none.
    pub(crate) index_at: usize,
}

pub(crate) fn split_path(path: &str) -> Result<Vec<Part<'_>>, PathError> {
    let syntax = |at: usize, what| PathError {
        offset: char_offset(path, at),
        kind: PathErrorKind::Syntax(what),
    };
    let mut parts = Vec::new();
    let mut at = 0;
    loop {
        let rest = &path[at..];
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let name = &rest[..name_len];
        if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return Err(syntax(at, "expected a field name"));
        }
        let mut end = at + name_len;
        let mut index = None;
        let index_at = end;
        if path[end..].starts_with('[') {
            let inside = &path[end + 1..];
            let digits = inside
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(inside.len());
            if digits == 0 {
                return Err(syntax(end + 1, "expected an index, a number from 0"));
            }
            if !inside[digits..].starts_with(']') {
                return Err(syntax(end + 1 + digits, "expected `]`"));
            }
            let n: u64 = inside[..digits]
                .parse()
                .map_err(|_| syntax(end + 1, "the index is too large"))?;
            index = Some(n);
            end += digits + 2;
        }
        parts.push(Part {
            name,
            at,
            index,
            index_at,
        });
        match path[end..].chars().next() {
            None => return Ok(parts),
            Some('.') => at = end + 1,
            Some(_) => return Err(syntax(end, "expected `.` or the end of the path")),
        }
    }
}
