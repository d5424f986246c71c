//! Values read from messages: one scalar ([`Value`], what
//! [`crate::cdr_read`] reads by path) and a whole message as a tree
//! ([`MsgValue`]), the same for ROS 2 CDR ([`crate::cdr_decode`]) and ROS 1
//! ([`crate::ros1_decode`]) payloads, so one printer ([`crate::print`])
//! serves both. Strings and byte arrays borrow the payload, and member
//! names the [`crate::msgtype::TypeTable`], where they can;
//! [`MsgValue::into_owned`] cuts both ties. Arrays of unsigned octets
//! (`uint8`, ROS 2's `byte` and `char`, ROS 1's `char`) are
//! [`MsgValue::Bytes`], one value rather than one per byte, since images
//! and point clouds carry megabytes of them; other arrays are
//! [`MsgValue::Array`]s of their elements.
//!
//! ```
//! use std::borrow::Cow;
//! use edgerec_format::value::{MsgValue, Value};
//!
//! let v = MsgValue::Struct(vec![
//!     (Cow::Borrowed("x"), MsgValue::Float(1.5)),
//!     (Cow::Borrowed("data"), MsgValue::Bytes(Cow::Borrowed(&[1, 2]))),
//! ]);
//! assert_eq!(v.get("x").and_then(MsgValue::scalar), Some(Value::Float(1.5)));
//! assert_eq!(v.get("data").and_then(|d| d.element(1)), Some(Value::UInt(2)));
//! ```

use std::borrow::Cow;
use std::fmt;

use crate::msgtype::Primitive;

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

/// One decoded value: a primitive, a string, an array or a message.
#[derive(Debug, Clone, PartialEq)]
pub enum MsgValue<'a> {
    /// `bool`.
    Bool(bool),
    /// `int8` .. `int64` (and ROS 1's `byte`).
    Int(i64),
    /// `uint8` .. `uint64`, `byte` and `char` outside arrays.
    UInt(u64),
    /// `float32` (widened, exactly) and `float64`.
    Float(f64),
    /// `string`, without CDR's NUL; bytes that are not UTF-8 are read
    /// lossily (U+FFFD), since publishers do send Latin-1.
    Str(Cow<'a, str>),
    /// An array or sequence of unsigned octets.
    Bytes(Cow<'a, [u8]>),
    /// Any other array or sequence, fixed-size or not.
    Array(Vec<MsgValue<'a>>),
    /// A message: its members in wire order, by name.
    Struct(Vec<(Cow<'a, str>, MsgValue<'a>)>),
}

impl<'a> MsgValue<'a> {
    /// A member of a message by name; `None` for other values.
    pub fn get(&self, name: &str) -> Option<&MsgValue<'a>> {
        match self {
            MsgValue::Struct(members) => members.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Element `index` of an array whose elements are scalars (bytes
    /// included); `None` past the end or for other values.
    pub fn element(&self, index: usize) -> Option<Value<'_>> {
        match self {
            MsgValue::Bytes(b) => b.get(index).map(|&x| Value::UInt(x.into())),
            MsgValue::Array(items) => items.get(index).and_then(MsgValue::scalar),
            _ => None,
        }
    }

    /// The number of elements of an array or members of a message; `None`
    /// for a scalar.
    pub fn len(&self) -> Option<usize> {
        match self {
            MsgValue::Bytes(b) => Some(b.len()),
            MsgValue::Array(items) => Some(items.len()),
            MsgValue::Struct(members) => Some(members.len()),
            _ => None,
        }
    }

    /// Whether an array or message has no elements or members (`false` for
    /// scalars).
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// The value as a scalar, borrowing its string; `None` for bytes,
    /// arrays and messages.
    pub fn scalar(&self) -> Option<Value<'_>> {
        Some(match self {
            MsgValue::Bool(b) => Value::Bool(*b),
            MsgValue::Int(i) => Value::Int(*i),
            MsgValue::UInt(u) => Value::UInt(*u),
            MsgValue::Float(f) => Value::Float(*f),
            MsgValue::Str(s) => Value::Str(Cow::Borrowed(s)),
            MsgValue::Bytes(_) | MsgValue::Array(_) | MsgValue::Struct(_) => return None,
        })
    }

    /// The value, no longer borrowing the payload or the type table.
    pub fn into_owned(self) -> MsgValue<'static> {
        match self {
            MsgValue::Bool(b) => MsgValue::Bool(b),
            MsgValue::Int(i) => MsgValue::Int(i),
            MsgValue::UInt(u) => MsgValue::UInt(u),
            MsgValue::Float(f) => MsgValue::Float(f),
            MsgValue::Str(s) => MsgValue::Str(Cow::Owned(s.into_owned())),
            MsgValue::Bytes(b) => MsgValue::Bytes(Cow::Owned(b.into_owned())),
            MsgValue::Array(items) => {
                MsgValue::Array(items.into_iter().map(MsgValue::into_owned).collect())
            }
            MsgValue::Struct(members) => MsgValue::Struct(
                members
                    .into_iter()
                    .map(|(n, v)| (Cow::Owned(n.into_owned()), v.into_owned()))
                    .collect(),
            ),
        }
    }
}

impl<'a> From<Value<'a>> for MsgValue<'a> {
    fn from(v: Value<'a>) -> Self {
        match v {
            Value::Bool(b) => MsgValue::Bool(b),
            Value::Int(i) => MsgValue::Int(i),
            Value::UInt(u) => MsgValue::UInt(u),
            Value::Float(f) => MsgValue::Float(f),
            Value::Str(s) => MsgValue::Str(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> MsgValue<'static> {
        MsgValue::Struct(vec![
            (Cow::Borrowed("n"), MsgValue::Int(-3)),
            (Cow::Borrowed("s"), MsgValue::Str(Cow::Borrowed("é"))),
            (
                Cow::Borrowed("a"),
                MsgValue::Array(vec![MsgValue::Float(0.5), MsgValue::Bool(true)]),
            ),
            (Cow::Borrowed("b"), MsgValue::Bytes(Cow::Borrowed(&[7]))),
        ])
    }

    #[test]
    fn lookups() {
        let v = sample();
        assert_eq!(v.len(), Some(4));
        assert_eq!(v.get("n").and_then(MsgValue::scalar), Some(Value::Int(-3)));
        assert_eq!(
            v.get("s").and_then(MsgValue::scalar),
            Some(Value::Str(Cow::Borrowed("é")))
        );
        assert!(v.get("zz").is_none());
        assert!(v.get("a").unwrap().get("x").is_none());
        assert_eq!(v.get("a").unwrap().element(1), Some(Value::Bool(true)));
        assert_eq!(v.get("a").unwrap().element(2), None);
        assert_eq!(v.get("b").unwrap().element(0), Some(Value::UInt(7)));
        assert!(v.get("b").unwrap().scalar().is_none());
        assert!(MsgValue::Array(vec![]).is_empty());
        assert!(!MsgValue::Int(0).is_empty());
    }

    #[test]
    fn into_owned_keeps_the_value() {
        let text = String::from("payload");
        let borrowed = MsgValue::Struct(vec![(
            Cow::Borrowed("t"),
            MsgValue::Str(Cow::Borrowed(text.as_str())),
        )]);
        let owned = borrowed.clone().into_owned();
        drop(text);
        assert_eq!(
            owned.get("t").and_then(MsgValue::scalar),
            Some(Value::Str(Cow::Borrowed("payload")))
        );
        assert_eq!(MsgValue::from(Value::UInt(4)), MsgValue::UInt(4));
    }
}
