//! What the whole-message decoders ([`crate::cdr_decode`],
//! [`crate::ros1_decode`]) share: the walk that follows a
//! [`TypeTable`] through a payload into a [`MsgValue`], and its error,
//! which names the field where decoding stopped (`status[1].values[0].key`).
//!
//! The walk trusts neither the payload nor the table. Counts are checked
//! against the bytes left before anything loops or allocates (the cursor
//! does that), fixed-size arrays too; nesting is bounded by
//! [`MAX_NESTING`]; and the tree may hold at most [`VALUE_BUDGET_BASE`]
//! plus [`VALUE_BUDGET_PER_BYTE`] values per payload byte, so types with
//! no bytes on the wire (ROS 1 types without fields, `T[0]`), which no
//! length check can bound, cannot make a small payload into a huge tree.

use std::borrow::Cow;
use std::fmt;

use crate::msgtype::MAX_NESTING;
use crate::msgtype::{Arity, Dialect, FieldKind, FieldType, Primitive, TypeId, TypeTable};
use crate::value::MsgValue;
use crate::wire::{ReadError, WireCursor};

/// Values a tree may hold whatever the payload's length.
pub const VALUE_BUDGET_BASE: usize = 1 << 20;

/// Values a tree may hold per payload byte, on top of
/// [`VALUE_BUDGET_BASE`]: a one-byte field nested in messages takes one
/// value per level.
pub const VALUE_BUDGET_PER_BYTE: usize = 16;

/// Why a payload did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct DecodeError {
    /// The field being decoded when it failed, from the root:
    /// `status[1].values[0].key`; empty when the failure is not in a
    /// field (no header, trailing bytes).
    pub path: String,
    /// What is wrong.
    pub kind: DecodeErrorKind,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.kind)
        } else {
            write!(f, "at `{}`: {}", self.path, self.kind)
        }
    }
}

/// What is wrong with a payload, or with decoding it with a table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeErrorKind {
    /// The bytes: too short, a count too large, an unknown encapsulation,
    /// a `wstring` (whose CDR form differs between middlewares).
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The table was parsed for the other ROS generation, whose built-in
    /// names mean other wire forms.
    #[error("the message types were parsed as {table:?} definitions, but the payload is {wire:?}")]
    WrongDialect {
        /// The table's dialect.
        table: Dialect,
        /// The payload's.
        wire: Dialect,
    },
    /// Types nested deeper than [`MAX_NESTING`].
    #[error("types nest more than {0} levels deep")]
    TooDeep(usize),
    /// More values than the budget allows for a payload this long.
    #[error("the message would hold more than {limit} values")]
    TooManyValues {
        /// The budget.
        limit: usize,
    },
    /// Bytes after the message that no field reads: usually a payload of
    /// another type than the table's root.
    #[error("{left} bytes after the message, from byte {offset}")]
    TrailingBytes {
        /// Where they start, from the payload's first byte.
        offset: usize,
        /// How many.
        left: usize,
    },
}

/// One step of the path to the field being decoded.
enum Step<'a> {
    Field(&'a str),
    Index(usize),
}

/// Decodes the root type of `types` from `cur`, then refuses more than
/// `max_trailing` bytes left over.
pub(crate) fn decode_root<'a>(
    types: &'a TypeTable,
    cur: WireCursor<'a>,
    max_trailing: usize,
) -> Result<MsgValue<'a>, DecodeError> {
    let payload_len = cur.offset() + cur.left();
    let mut walk = Walk {
        types,
        cur,
        path: Vec::new(),
        used: 0,
        limit: VALUE_BUDGET_PER_BYTE
            .saturating_mul(payload_len)
            .saturating_add(VALUE_BUDGET_BASE),
    };
    let value = match walk.message(types.root(), 1) {
        Ok(v) => v,
        Err(kind) => {
            return Err(DecodeError {
                path: render(&walk.path),
                kind,
            })
        }
    };
    let left = walk.cur.left();
    if left > max_trailing {
        return Err(DecodeError {
            path: String::new(),
            kind: DecodeErrorKind::TrailingBytes {
                offset: walk.cur.offset(),
                left,
            },
        });
    }
    Ok(value)
}

/// Refuses a table of the other dialect.
pub(crate) fn check_dialect(types: &TypeTable, wire: Dialect) -> Result<(), DecodeError> {
    if types.dialect() != wire {
        return Err(DecodeError {
            path: String::new(),
            kind: DecodeErrorKind::WrongDialect {
                table: types.dialect(),
                wire,
            },
        });
    }
    Ok(())
}

fn render(path: &[Step<'_>]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Field(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Step::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

struct Walk<'a> {
    types: &'a TypeTable,
    cur: WireCursor<'a>,
    /// Where the walk is; on an error, where it failed (steps are popped
    /// only after success).
    path: Vec<Step<'a>>,
    used: usize,
    limit: usize,
}

impl<'a> Walk<'a> {
    fn spend(&mut self, n: usize) -> Result<(), DecodeErrorKind> {
        self.used = self.used.saturating_add(n);
        if self.used > self.limit {
            return Err(DecodeErrorKind::TooManyValues { limit: self.limit });
        }
        Ok(())
    }

    /// Room for `n` values of the budget, so a `Vec` sized from a count no
    /// length check could bound is not sized beyond it.
    fn capacity(&self, n: usize) -> usize {
        n.min(self.limit.saturating_sub(self.used))
    }

    fn message(&mut self, id: TypeId, depth: usize) -> Result<MsgValue<'a>, DecodeErrorKind> {
        if depth > MAX_NESTING {
            return Err(DecodeErrorKind::TooDeep(MAX_NESTING));
        }
        self.spend(1)?;
        let types = self.types;
        let fields = types.message(id).fields();
        let mut members = Vec::with_capacity(fields.len());
        for f in fields {
            self.path.push(Step::Field(f.name()));
            let v = self.field(f.ty(), depth)?;
            self.path.pop();
            members.push((Cow::Borrowed(f.name()), v));
        }
        Ok(MsgValue::Struct(members))
    }

    fn field(&mut self, ty: FieldType, depth: usize) -> Result<MsgValue<'a>, DecodeErrorKind> {
        match ty.arity {
            Arity::Single => self.element(ty.kind, depth),
            Arity::Fixed(n) => {
                let need = n.saturating_mul(self.types.min_size(ty.kind));
                self.cur.check_room(need)?;
                self.elements(ty.kind, n, depth)
            }
            Arity::Bounded(_) | Arity::Unbounded => {
                let n = self.cur.count(self.types, ty.kind)?;
                self.elements(ty.kind, n as usize, depth)
            }
        }
    }

    fn element(&mut self, kind: FieldKind, depth: usize) -> Result<MsgValue<'a>, DecodeErrorKind> {
        match kind {
            FieldKind::Primitive(p) => {
                self.spend(1)?;
                Ok(self.cur.read(p)?.into())
            }
            FieldKind::Message(id) => self.message(id, depth + 1),
        }
    }

    /// `n` elements, already checked against the bytes left. None at all
    /// reads nothing, not even alignment padding (Fast CDR's rule for an
    /// empty sequence).
    fn elements(
        &mut self,
        kind: FieldKind,
        n: usize,
        depth: usize,
    ) -> Result<MsgValue<'a>, DecodeErrorKind> {
        let octets = matches!(
            kind,
            FieldKind::Primitive(Primitive::UInt8 | Primitive::Byte | Primitive::Char)
        );
        if octets {
            self.spend(1)?;
            if n == 0 {
                return Ok(MsgValue::Bytes(Cow::Borrowed(&[])));
            }
            return Ok(MsgValue::Bytes(Cow::Borrowed(self.cur.octets(n)?)));
        }
        self.spend(1)?;
        let mut items = Vec::with_capacity(self.capacity(n));
        for i in 0..n {
            self.path.push(Step::Index(i));
            let v = self.element(kind, depth)?;
            self.path.pop();
            items.push(v);
        }
        Ok(MsgValue::Array(items))
    }
}
