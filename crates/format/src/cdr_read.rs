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
//! byte other than 0 reads as `true`.
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

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use crate::msgtype::{Arity, FieldKind, FieldType, Primitive, TypeId, TypeTable};

/// One value read from a payload; strings borrow from it when they are
/// valid UTF-8.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    /// `bool`.
    Bool(bool),
    /// `int8` .. `int64`.
    Int(i64),
    /// `byte`, `char`, `uint8` .. `uint64`.
    UInt(u64),
    /// `float32` (widened) and `float64`.
    Float(f64),
    /// `string`, without its NUL.
    Str(Cow<'a, str>),
}

impl Value<'_> {
    /// The kind of value.
    pub fn kind(&self) -> ValueKind {
        match self {
            Value::Bool(_) => ValueKind::Bool,
            Value::Int(_) => ValueKind::Int,
            Value::UInt(_) => ValueKind::UInt,
            Value::Float(_) => ValueKind::Float,
            Value::Str(_) => ValueKind::Str,
        }
    }

    /// The value, no longer borrowing the payload.
    pub fn into_owned(self) -> Value<'static> {
        match self {
            Value::Bool(b) => Value::Bool(b),
            Value::Int(i) => Value::Int(i),
            Value::UInt(u) => Value::UInt(u),
            Value::Float(f) => Value::Float(f),
            Value::Str(s) => Value::Str(Cow::Owned(s.into_owned())),
        }
    }
}

impl fmt::Display for Value<'_> {
    /// Numbers and booleans as Rust prints them; strings quoted and escaped
    /// (`"a\"b"`), so a value in event metadata reads back unambiguously.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::UInt(u) => write!(f, "{u}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// What kind of [`Value`] a field reads as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueKind {
    /// [`Value::Bool`].
    Bool,
    /// [`Value::Int`].
    Int,
    /// [`Value::UInt`].
    UInt,
    /// [`Value::Float`].
    Float,
    /// [`Value::Str`].
    Str,
}

impl ValueKind {
    /// The kind a primitive reads as; `None` for `wstring`.
    pub fn of(p: Primitive) -> Option<ValueKind> {
        Some(match p {
            Primitive::Bool => ValueKind::Bool,
            Primitive::Int8 | Primitive::Int16 | Primitive::Int32 | Primitive::Int64 => {
                ValueKind::Int
            }
            Primitive::Byte
            | Primitive::Char
            | Primitive::UInt8
            | Primitive::UInt16
            | Primitive::UInt32
            | Primitive::UInt64 => ValueKind::UInt,
            Primitive::Float32 | Primitive::Float64 => ValueKind::Float,
            Primitive::String => ValueKind::Str,
            Primitive::WString => return None,
        })
    }

    /// Whether values of this kind are numbers.
    pub fn is_number(self) -> bool {
        matches!(self, ValueKind::Int | ValueKind::UInt | ValueKind::Float)
    }
}

impl fmt::Display for ValueKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ValueKind::Bool => "boolean",
            ValueKind::Int => "signed integer",
            ValueKind::UInt => "unsigned integer",
            ValueKind::Float => "floating-point",
            ValueKind::Str => "string",
        })
    }
}

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

/// Why a value could not be read from a payload. Offsets count from the
/// payload's first byte, the encapsulation header included.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// Shorter than the encapsulation header.
    #[error("a {len}-byte payload has no 4-byte encapsulation header")]
    NoHeader {
        /// The payload length.
        len: usize,
    },
    /// An encapsulation other than plain CDR.
    #[error("encapsulation {0:#06x} is not plain CDR (0x0000 big endian, 0x0001 little endian)")]
    Encapsulation(u16),
    /// The payload ends before a field does.
    #[error("the {len}-byte payload ends before the {need} bytes at byte {offset}")]
    Truncated {
        /// Where the field (or its padding) starts.
        offset: usize,
        /// The bytes it needs.
        need: usize,
        /// The payload length.
        len: usize,
    },
    /// A sequence or string length that the rest of the payload cannot hold.
    #[error("the count {count} at byte {offset} needs at least {min_size} bytes per element, more than the {left} bytes left")]
    CountTooLarge {
        /// Where the count is.
        offset: usize,
        /// The count read.
        count: u32,
        /// The fewest bytes one element takes.
        min_size: usize,
        /// The bytes after the count.
        left: usize,
    },
    /// The path indexes past the end of a sequence this message holds:
    /// well-formed, but the field is not there.
    #[error("index {index} is past the end of a sequence of {len}")]
    NotPresent {
        /// The index of the path.
        index: u32,
        /// The sequence's length in this message.
        len: u32,
    },
    /// A `wstring` in the way (only for a path resolved against another table).
    #[error("a wstring at byte {offset} cannot be skipped")]
    WString {
        /// Where it is.
        offset: usize,
    },
}

impl ReadError {
    /// Whether the payload is broken, as opposed to well-formed without the
    /// field ([`ReadError::NotPresent`]).
    pub fn is_malformed(&self) -> bool {
        !matches!(self, ReadError::NotPresent { .. })
    }
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

    /// Reads the field from one CDR payload (encapsulation header first).
    pub fn read<'a>(&self, payload: &'a [u8]) -> Result<Value<'a>, ReadError> {
        let mut cur = Cursor::new(payload)?;
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
struct Part<'a> {
    name: &'a str,
    at: usize,
    /// `N`.
    index: Option<u64>,
    /// Offset of the `[`, or of the end of the name when there is none.
    index_at: usize,
}

fn split_path(path: &str) -> Result<Vec<Part<'_>>, PathError> {
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

/// A read position in a payload's CDR body.
struct Cursor<'a> {
    /// The payload after the encapsulation header, where alignment counts from.
    body: &'a [u8],
    pos: usize,
    big_endian: bool,
}

/// The encapsulation header's length; error offsets add it back.
const HEADER: usize = 4;

impl<'a> Cursor<'a> {
    fn new(payload: &'a [u8]) -> Result<Self, ReadError> {
        let (Some(header), Some(body)) = (payload.get(..HEADER), payload.get(HEADER..)) else {
            return Err(ReadError::NoHeader { len: payload.len() });
        };
        let big_endian = match u16::from_be_bytes([header[0], header[1]]) {
            0x0000 => true,
            0x0001 => false,
            other => return Err(ReadError::Encapsulation(other)),
        };
        Ok(Cursor {
            body,
            pos: 0,
            big_endian,
        })
    }

    fn truncated(&self, need: usize) -> ReadError {
        ReadError::Truncated {
            offset: self.pos + HEADER,
            need,
            len: self.body.len() + HEADER,
        }
    }

    /// Moves past the padding before a value of alignment `n`.
    fn align(&mut self, n: usize) -> Result<(), ReadError> {
        let aligned = self.pos.next_multiple_of(n);
        if aligned > self.body.len() {
            return Err(self.truncated(aligned - self.pos));
        }
        self.pos = aligned;
        Ok(())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ReadError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.body.len())
            .ok_or_else(|| self.truncated(n))?;
        let bytes = &self.body[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ReadError> {
        self.align(N)?;
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        if self.big_endian {
            out.reverse();
        }
        // Little-endian from here on.
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, ReadError> {
        self.array::<4>().map(u32::from_le_bytes)
    }

    /// A sequence count, checked against what the rest of the payload can
    /// hold of elements of `kind`.
    fn count(&mut self, types: &TypeTable, kind: FieldKind) -> Result<u32, ReadError> {
        let count = self.u32()?;
        let offset = self.pos - 4 + HEADER;
        let min_size = types.min_size(kind);
        let left = self.body.len() - self.pos;
        if (count as usize).saturating_mul(min_size) > left {
            return Err(ReadError::CountTooLarge {
                offset,
                count,
                min_size,
                left,
            });
        }
        Ok(count)
    }

    fn string_bytes(&mut self) -> Result<&'a [u8], ReadError> {
        let len = self.u32()?;
        let left = self.body.len() - self.pos;
        if len as usize > left {
            return Err(ReadError::CountTooLarge {
                offset: self.pos - 4 + HEADER,
                count: len,
                min_size: 1,
                left,
            });
        }
        let bytes = self.take(len as usize)?;
        Ok(bytes.strip_suffix(&[0]).unwrap_or(bytes))
    }

    fn skip_field(&mut self, types: &TypeTable, ty: FieldType) -> Result<(), ReadError> {
        match ty.arity {
            Arity::Single => self.skip_n(types, ty.kind, 1),
            Arity::Fixed(n) => self.skip_n(types, ty.kind, n),
            Arity::Bounded(_) | Arity::Unbounded => {
                let n = self.count(types, ty.kind)?;
                self.skip_n(types, ty.kind, n as usize)
            }
        }
    }

    /// Skips `n` consecutive elements. Every element takes at least one
    /// byte, so the loops end within the payload's length.
    fn skip_n(&mut self, types: &TypeTable, kind: FieldKind, n: usize) -> Result<(), ReadError> {
        if n == 0 {
            return Ok(());
        }
        match kind {
            FieldKind::Primitive(Primitive::String) => {
                for _ in 0..n {
                    self.string_bytes()?;
                }
                Ok(())
            }
            FieldKind::Primitive(Primitive::WString) => Err(ReadError::WString {
                offset: self.pos + HEADER,
            }),
            FieldKind::Primitive(p) => {
                let size = p.size().unwrap_or(1);
                self.align(size)?;
                let total = n
                    .checked_mul(size)
                    .ok_or_else(|| self.truncated(usize::MAX))?;
                self.take(total).map(|_| ())
            }
            FieldKind::Message(id) => {
                for _ in 0..n {
                    for f in types.message(id).fields() {
                        self.skip_field(types, f.ty())?;
                    }
                }
                Ok(())
            }
        }
    }

    fn read(&mut self, p: Primitive) -> Result<Value<'a>, ReadError> {
        Ok(match p {
            Primitive::Bool => Value::Bool(self.array::<1>()?[0] != 0),
            Primitive::Byte | Primitive::Char | Primitive::UInt8 => {
                Value::UInt(u64::from(self.array::<1>()?[0]))
            }
            Primitive::Int8 => Value::Int(i64::from(i8::from_le_bytes(self.array()?))),
            Primitive::Int16 => Value::Int(i64::from(i16::from_le_bytes(self.array()?))),
            Primitive::UInt16 => Value::UInt(u64::from(u16::from_le_bytes(self.array()?))),
            Primitive::Int32 => Value::Int(i64::from(i32::from_le_bytes(self.array()?))),
            Primitive::UInt32 => Value::UInt(u64::from(u32::from_le_bytes(self.array()?))),
            Primitive::Int64 => Value::Int(i64::from_le_bytes(self.array()?)),
            Primitive::UInt64 => Value::UInt(u64::from_le_bytes(self.array()?)),
            Primitive::Float32 => Value::Float(f64::from(f32::from_le_bytes(self.array()?))),
            Primitive::Float64 => Value::Float(f64::from_le_bytes(self.array()?)),
            Primitive::String => Value::Str(String::from_utf8_lossy(self.string_bytes()?)),
            Primitive::WString => {
                return Err(ReadError::WString {
                    offset: self.pos + HEADER,
                })
            }
        })
    }
}
