//! Reading primitives off the wire: a bounds-checked read position in one
//! serialized message and [`ReadError`], shared by the CDR field reader
//! ([`crate::cdr_read`]) and the whole-message decoders
//! ([`crate::cdr_decode`], [`crate::ros1_decode`]). The two wire formats
//! differ in four things only, all decided here: CDR starts with a 4-byte
//! encapsulation header that picks the byte order, aligns each primitive
//! to its size counting from the byte after that header (an empty sequence
//! of primitives has no padding after its count, as Fast CDR writes it),
//! and ends strings with a NUL its length counts; ROS 1 is little endian,
//! packed, with neither header nor NUL. Every read checks the bytes left
//! first, and a count is checked against what the rest can hold before
//! anything loops over it or allocates for it.

use crate::msgtype::{Arity, FieldKind, FieldType, Primitive, TypeTable};
use crate::value::Value;

/// Why a value could not be read from a payload. Offsets count from the
/// payload's first byte, CDR's encapsulation header included. The
/// whole-message decoders report these too, ROS 1's included.
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

/// The CDR encapsulation header's length; error offsets add it back.
const CDR_HEADER: usize = 4;

/// A read position in a message body.
pub(crate) struct WireCursor<'a> {
    /// The payload after any header: where alignment counts from.
    body: &'a [u8],
    pos: usize,
    big_endian: bool,
    /// CDR (aligned, NUL-terminated strings) rather than ROS 1.
    cdr: bool,
    /// Bytes of the payload before `body`.
    base: usize,
}

impl<'a> WireCursor<'a> {
    /// A cursor on a CDR payload, after its encapsulation header.
    pub(crate) fn cdr(payload: &'a [u8]) -> Result<Self, ReadError> {
        let (Some(header), Some(body)) = (payload.get(..CDR_HEADER), payload.get(CDR_HEADER..))
        else {
            return Err(ReadError::NoHeader { len: payload.len() });
        };
        let big_endian = match u16::from_be_bytes([header[0], header[1]]) {
            0x0000 => true,
            0x0001 => false,
            other => return Err(ReadError::Encapsulation(other)),
        };
        Ok(WireCursor {
            body,
            pos: 0,
            big_endian,
            cdr: true,
            base: CDR_HEADER,
        })
    }

    /// A cursor on a ROS 1 serialized message.
    pub(crate) fn ros1(payload: &'a [u8]) -> Self {
        WireCursor {
            body: payload,
            pos: 0,
            big_endian: false,
            cdr: false,
            base: 0,
        }
    }

    /// The read position as an offset into the whole payload.
    pub(crate) fn offset(&self) -> usize {
        self.pos + self.base
    }

    /// The bytes not read yet.
    pub(crate) fn left(&self) -> usize {
        self.body.len() - self.pos
    }

    fn truncated(&self, need: usize) -> ReadError {
        ReadError::Truncated {
            offset: self.offset(),
            need,
            len: self.body.len() + self.base,
        }
    }

    /// Moves past the padding before a value of alignment `n` (CDR only).
    fn align(&mut self, n: usize) -> Result<(), ReadError> {
        if !self.cdr {
            return Ok(());
        }
        let aligned = self.pos.next_multiple_of(n);
        if aligned > self.body.len() {
            return Err(self.truncated(aligned - self.pos));
        }
        self.pos = aligned;
        Ok(())
    }

    /// The next `n` bytes, unaligned.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], ReadError> {
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
    pub(crate) fn count(&mut self, types: &TypeTable, kind: FieldKind) -> Result<u32, ReadError> {
        let count = self.u32()?;
        let min_size = types.min_size(kind);
        self.check_fits(count, min_size, self.offset() - 4)?;
        Ok(count)
    }

    /// Refuses `count` elements of at least `min_size` bytes each when the
    /// rest of the payload cannot hold them; `at` is where the count was.
    pub(crate) fn check_fits(
        &self,
        count: u32,
        min_size: usize,
        at: usize,
    ) -> Result<(), ReadError> {
        let left = self.left();
        if (count as usize).saturating_mul(min_size) > left {
            return Err(ReadError::CountTooLarge {
                offset: at,
                count,
                min_size,
                left,
            });
        }
        Ok(())
    }

    /// Refuses to go on when fewer than `need` bytes are left (a fixed-size
    /// array whose smallest form is longer than the rest of the payload).
    pub(crate) fn check_room(&self, need: usize) -> Result<(), ReadError> {
        if need > self.left() {
            return Err(self.truncated(need));
        }
        Ok(())
    }

    /// A string's bytes, without CDR's NUL.
    pub(crate) fn string_bytes(&mut self) -> Result<&'a [u8], ReadError> {
        let len = self.u32()?;
        self.check_fits(len, 1, self.offset() - 4)?;
        let bytes = self.take(len as usize)?;
        if self.cdr {
            return Ok(bytes.strip_suffix(&[0]).unwrap_or(bytes));
        }
        Ok(bytes)
    }

    /// `n` consecutive one-byte elements, after no padding (their
    /// alignment is 1).
    pub(crate) fn octets(&mut self, n: usize) -> Result<&'a [u8], ReadError> {
        self.take(n)
    }

    pub(crate) fn skip_field(&mut self, types: &TypeTable, ty: FieldType) -> Result<(), ReadError> {
        match ty.arity {
            Arity::Single => self.skip_n(types, ty.kind, 1),
            Arity::Fixed(n) => self.skip_n(types, ty.kind, n),
            Arity::Bounded(_) | Arity::Unbounded => {
                let n = self.count(types, ty.kind)?;
                self.skip_n(types, ty.kind, n as usize)
            }
        }
    }

    /// Skips `n` consecutive elements. Elements of a type with no bytes at
    /// all (a ROS 1 type without fields) are skipped at once; every other
    /// takes at least one byte, so the loops end within the payload.
    pub(crate) fn skip_n(
        &mut self,
        types: &TypeTable,
        kind: FieldKind,
        n: usize,
    ) -> Result<(), ReadError> {
        if n == 0 || types.min_size(kind) == 0 {
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
                offset: self.offset(),
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

    /// One primitive value; strings borrow the payload when they are UTF-8.
    pub(crate) fn read(&mut self, p: Primitive) -> Result<Value<'a>, ReadError> {
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
                    offset: self.offset(),
                })
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msgtype::Dialect;

    #[test]
    fn cdr_aligns_from_after_the_header_and_drops_the_nul() {
        // u8 1, 3 bytes of padding, u32 2, string "ab" with NUL.
        let p = [
            0, 1, 0, 0, 1, 9, 9, 9, 2, 0, 0, 0, 3, 0, 0, 0, b'a', b'b', 0,
        ];
        let mut c = WireCursor::cdr(&p).unwrap();
        assert_eq!(c.read(Primitive::UInt8).unwrap(), Value::UInt(1));
        assert_eq!(c.read(Primitive::UInt32).unwrap(), Value::UInt(2));
        assert_eq!(c.offset(), 12);
        assert_eq!(c.string_bytes().unwrap(), b"ab");
        assert_eq!(c.left(), 0);
        let big = [0, 0, 0, 0, 0, 0, 1, 2];
        let mut c = WireCursor::cdr(&big).unwrap();
        assert_eq!(c.read(Primitive::UInt32).unwrap(), Value::UInt(0x0102));
        assert_eq!(
            WireCursor::cdr(&[0, 2, 0, 0]).err(),
            Some(ReadError::Encapsulation(2))
        );
        assert_eq!(
            WireCursor::cdr(&[0, 1]).err(),
            Some(ReadError::NoHeader { len: 2 })
        );
    }

    #[test]
    fn ros1_is_packed_and_keeps_every_string_byte() {
        let p = [1, 2, 0, 0, 0, 2, 0, 0, 0, b'a', 0];
        let mut c = WireCursor::ros1(&p);
        assert_eq!(c.read(Primitive::UInt8).unwrap(), Value::UInt(1));
        assert_eq!(c.read(Primitive::UInt32).unwrap(), Value::UInt(2));
        assert_eq!(c.string_bytes().unwrap(), b"a\0");
        assert_eq!(c.left(), 0);
        assert_eq!(
            c.read(Primitive::Int8),
            Err(ReadError::Truncated {
                offset: 11,
                need: 1,
                len: 11
            })
        );
    }

    #[test]
    fn counts_are_checked_before_use() {
        let t = TypeTable::parse_with("p/T", "string[] s\n", Dialect::Ros1).unwrap();
        let kind = t.message(t.root()).fields()[0].ty().kind;
        // 3 strings need at least 12 bytes; 8 are left.
        let p = [3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let mut c = WireCursor::ros1(&p);
        assert_eq!(
            c.count(&t, kind),
            Err(ReadError::CountTooLarge {
                offset: 0,
                count: 3,
                min_size: 4,
                left: 8
            })
        );
        let mut c = WireCursor::ros1(&[0xff, 0xff, 0xff, 0xff, b'x']);
        assert!(matches!(
            c.string_bytes(),
            Err(ReadError::CountTooLarge {
                count: u32::MAX,
                ..
            })
        ));
        assert!(c.check_room(1).is_ok());
        assert!(c.check_room(2).is_err());
        assert!(c.check_room(usize::MAX).is_err());
    }

    #[test]
    fn types_without_bytes_skip_at_once() {
        let t = TypeTable::parse_with("p/T", "E[] e\n================================================================================\nMSG: p/E\n", Dialect::Ros1).unwrap();
        let kind = t.message(t.root()).fields()[0].ty().kind;
        let mut c = WireCursor::ros1(&[0xff, 0xff, 0xff, 0xff]);
        let n = c.count(&t, kind).unwrap();
        assert_eq!(n, u32::MAX);
        c.skip_n(&t, kind, n as usize).unwrap();
    }
}
