//! Reading CDR that comes from the ROS 2 graph (service requests and
//! replies, `ros_discovery_info`): little-endian plain CDR (XCDR1) behind
//! the encapsulation header `00 01 xx xx`, every primitive aligned to its
//! size counted from the end of that header, strings as a `u32` length
//! that counts the NUL, sequences as a `u32` count. It is the reading half
//! of [`edgerec_format::cdr::CdrWriter`]. Every length taken from the bytes
//! is checked against what is left before anything is allocated or
//! sliced, so a sample from the network gives a [`CdrError`], never a
//! panic or a huge allocation.
//!
//! ```
//! use edgerec_ros::cdr_reader::CdrReader;
//!
//! // A u8, three pad bytes, then a string "hi".
//! let bytes = [0, 1, 0, 0, 7, 0, 0, 0, 3, 0, 0, 0, b'h', b'i', 0];
//! let mut r = CdrReader::new(&bytes).unwrap();
//! assert_eq!(r.u8("level").unwrap(), 7);
//! assert_eq!(r.string("name").unwrap(), "hi");
//! r.finish().unwrap();
//! ```

use edgerec_format::cdr::ENCAPSULATION_HEADER;

/// Why bytes are not the CDR message they were read as. Offsets count
/// from the first byte of the buffer (the encapsulation header's), as a
/// hex dump of the sample shows them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CdrError {
    /// Fewer than 4 bytes: not even the encapsulation header.
    #[error("{len} bytes is too short for the 4-byte encapsulation header")]
    NoHeader {
        /// The buffer's length.
        len: usize,
    },
    /// The encapsulation is not `00 01` (plain CDR, little-endian): a
    /// big-endian peer, or XCDR2 (`00 07`, `00 09`, `00 0b`), which
    /// rmw_cyclonedds does not send.
    #[error("encapsulation {found:02x?} is not little-endian plain CDR [00, 01]")]
    Encapsulation {
        /// The first two bytes.
        found: [u8; 2],
    },
    /// A field runs past the end of the bytes (a length read from the
    /// bytes that is larger than what follows lands here too).
    #[error("{what} at offset {at} needs {needed} bytes, {left} left")]
    Truncated {
        /// The field.
        what: &'static str,
        /// Where the read started, before the field's alignment padding.
        at: usize,
        /// Bytes it needs, padding included.
        needed: usize,
        /// Bytes left from `at`.
        left: usize,
    },
    /// A string whose length is 0: CDR strings count their NUL, so the
    /// shortest is 1.
    #[error("{what} at offset {at}: string length 0 (CDR strings count their NUL)")]
    ZeroStringLength {
        /// The field.
        what: &'static str,
        /// Where its length starts.
        at: usize,
    },
    /// A string whose last byte is not NUL.
    #[error("{what} at offset {at}: string does not end with a NUL")]
    Unterminated {
        /// The field.
        what: &'static str,
        /// Where its length starts.
        at: usize,
    },
    /// A string that is not UTF-8.
    #[error("{what} at offset {at}: string is not UTF-8")]
    NotUtf8 {
        /// The field.
        what: &'static str,
        /// Where its length starts.
        at: usize,
    },
    /// A `bool` that is neither 0 nor 1.
    #[error("{what} at offset {at}: bool is {value}, not 0 or 1")]
    Bool {
        /// The field.
        what: &'static str,
        /// Where it is.
        at: usize,
        /// The byte.
        value: u8,
    },
    /// A sequence count that cannot be true: its elements, at their
    /// smallest, need more bytes than are left.
    #[error(
        "{what} at offset {at}: {count} elements of at least {min_size} bytes \
         do not fit in the {left} bytes left"
    )]
    SequenceLength {
        /// The field.
        what: &'static str,
        /// Where its count starts.
        at: usize,
        /// The count read.
        count: u32,
        /// The smallest element's size.
        min_size: usize,
        /// Bytes left after the count.
        left: usize,
    },
    /// More bytes after the message than the up-to-3 padding bytes a DDS
    /// writer may add to reach a multiple of 4.
    #[error(
        "{extra} bytes after the message at offset {at} (at most 3 bytes of padding may follow)"
    )]
    Trailing {
        /// Where the message ended.
        at: usize,
        /// Bytes after it.
        extra: usize,
    },
}

/// Reads one CDR message field by field, in order. Each read names the
/// field it reads (`what`), which the error then carries.
#[derive(Debug, Clone)]
pub struct CdrReader<'a> {
    buf: &'a [u8],
    /// Next byte to read, as an index into `buf`.
    pos: usize,
}

impl<'a> CdrReader<'a> {
    /// Checks the encapsulation header (plain CDR, little-endian; the two
    /// option bytes are not looked at) and starts after it.
    pub fn new(buf: &'a [u8]) -> Result<Self, CdrError> {
        let Some(header) = buf.get(..ENCAPSULATION_HEADER.len()) else {
            return Err(CdrError::NoHeader { len: buf.len() });
        };
        if header[..2] != ENCAPSULATION_HEADER[..2] {
            return Err(CdrError::Encapsulation {
                found: [header[0], header[1]],
            });
        }
        Ok(CdrReader {
            buf,
            pos: ENCAPSULATION_HEADER.len(),
        })
    }

    /// The offset of the next byte to read, from the start of the buffer.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Skips the padding up to a multiple of `align` (from the end of the
    /// header), then takes `n` bytes.
    fn take(&mut self, what: &'static str, align: usize, n: usize) -> Result<&'a [u8], CdrError> {
        let misalign = (self.pos - ENCAPSULATION_HEADER.len()) % align;
        let pad = if misalign == 0 { 0 } else { align - misalign };
        let left = self.remaining();
        match pad.checked_add(n) {
            Some(needed) if needed <= left => {
                let start = self.pos + pad;
                self.pos = start + n;
                Ok(&self.buf[start..start + n])
            }
            _ => Err(CdrError::Truncated {
                what,
                at: self.pos,
                needed: pad.saturating_add(n),
                left,
            }),
        }
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], CdrError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(what, N, N)?);
        Ok(out)
    }

    /// `uint8` / `byte` / `char`.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, CdrError> {
        Ok(self.take(what, 1, 1)?[0])
    }

    /// `bool`: one byte that must be 0 or 1.
    pub fn bool(&mut self, what: &'static str) -> Result<bool, CdrError> {
        let at = self.pos;
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(CdrError::Bool { what, at, value }),
        }
    }

    /// `uint32`, aligned to 4.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, CdrError> {
        self.array(what).map(u32::from_le_bytes)
    }

    /// `int32`, aligned to 4.
    pub fn i32(&mut self, what: &'static str) -> Result<i32, CdrError> {
        self.array(what).map(i32::from_le_bytes)
    }

    /// `uint64`, aligned to 8.
    pub fn u64(&mut self, what: &'static str) -> Result<u64, CdrError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// `int64`, aligned to 8.
    pub fn i64(&mut self, what: &'static str) -> Result<i64, CdrError> {
        self.array(what).map(i64::from_le_bytes)
    }

    /// A fixed array of `n` bytes (`uint8[n]`, `char[n]`): no count, no
    /// alignment.
    pub fn bytes(&mut self, what: &'static str, n: usize) -> Result<&'a [u8], CdrError> {
        self.take(what, 1, n)
    }

    /// `string`: the `u32` length (with the NUL), the UTF-8 bytes, the NUL.
    pub fn string(&mut self, what: &'static str) -> Result<&'a str, CdrError> {
        let len = self.u32(what)?;
        let at = self.pos - 4;
        if len == 0 {
            return Err(CdrError::ZeroStringLength { what, at });
        }
        // u32 fits in usize on every target edgerec builds for (64-bit);
        // saturating keeps a 32-bit build a Truncated error.
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        match self.take(what, 1, len)?.split_last() {
            Some((0, text)) => {
                std::str::from_utf8(text).map_err(|_| CdrError::NotUtf8 { what, at })
            }
            _ => Err(CdrError::Unterminated { what, at }),
        }
    }

    /// A sequence's `u32` element count, checked against what is left: the
    /// `count` elements of at least `min_size` bytes each must fit, so a
    /// caller may reserve `count` elements.
    pub fn sequence_len(&mut self, what: &'static str, min_size: usize) -> Result<usize, CdrError> {
        let count = self.u32(what)?;
        let at = self.pos - 4;
        let left = self.remaining();
        let fits = usize::try_from(count)
            .ok()
            .and_then(|c| c.checked_mul(min_size))
            .is_some_and(|need| need <= left);
        if fits {
            Ok(count as usize)
        } else {
            Err(CdrError::SequenceLength {
                what,
                at,
                count,
                min_size,
                left,
            })
        }
    }

    /// Ends the message: at most 3 bytes may follow, the padding a DDS
    /// writer adds to make the payload a multiple of 4 (Cyclone's Python
    /// binding does; rmw_cyclonedds sends the exact size).
    pub fn finish(self) -> Result<(), CdrError> {
        match self.remaining() {
            0..=3 => Ok(()),
            extra => Err(CdrError::Trailing {
                at: self.pos,
                extra,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use edgerec_format::cdr::CdrWriter;

    #[test]
    fn reads_what_the_writer_writes() {
        let mut w = CdrWriter::new();
        w.u8(1)
            .u64(u64::MAX - 1)
            .bool(true)
            .i32(-5)
            .string("é")
            .i64(-6)
            .u32(7)
            .string("")
            .bytes(&[9, 8, 7]);
        let b = w.finish();
        let mut r = CdrReader::new(&b).unwrap();
        assert_eq!(r.u8("a").unwrap(), 1);
        assert_eq!(r.u64("b").unwrap(), u64::MAX - 1);
        assert!(r.bool("c").unwrap());
        assert_eq!(r.i32("d").unwrap(), -5);
        assert_eq!(r.string("e").unwrap(), "é");
        assert_eq!(r.i64("f").unwrap(), -6);
        assert_eq!(r.u32("g").unwrap(), 7);
        assert_eq!(r.string("h").unwrap(), "");
        assert_eq!(r.sequence_len("i", 1).unwrap(), 3);
        assert_eq!(r.bytes("i", 3).unwrap(), &[9, 8, 7]);
        assert_eq!(r.remaining(), 0);
        r.finish().unwrap();
    }

    #[test]
    fn header_is_checked() {
        assert_eq!(
            CdrReader::new(&[0, 1, 0]).unwrap_err(),
            CdrError::NoHeader { len: 3 }
        );
        assert_eq!(
            CdrReader::new(&[0, 0, 0, 0]).unwrap_err(),
            CdrError::Encapsulation { found: [0, 0] }
        );
        assert_eq!(
            CdrReader::new(&[0, 7, 0, 0]).unwrap_err(),
            CdrError::Encapsulation { found: [0, 7] }
        );
        // Option bytes are not looked at (they may carry padding bits).
        assert!(CdrReader::new(&[0, 1, 0, 3]).is_ok());
    }

    #[test]
    fn malformed_fields_are_errors() {
        // An i64 after a u8 needs 7 pad bytes and 8 more.
        let b = [0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 2];
        let mut r = CdrReader::new(&b).unwrap();
        r.u8("a").unwrap();
        assert_eq!(
            r.i64("b").unwrap_err(),
            CdrError::Truncated {
                what: "b",
                at: 5,
                needed: 15,
                left: 9
            }
        );

        let absurd = [0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, b'x', 0];
        let err = CdrReader::new(&absurd).unwrap().string("s").unwrap_err();
        assert!(
            matches!(err, CdrError::Truncated { what: "s", .. }),
            "{err}"
        );

        let zero = [0, 1, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            CdrReader::new(&zero).unwrap().string("s").unwrap_err(),
            CdrError::ZeroStringLength { what: "s", at: 4 }
        );
        let no_nul = [0, 1, 0, 0, 2, 0, 0, 0, b'x', b'y'];
        assert_eq!(
            CdrReader::new(&no_nul).unwrap().string("s").unwrap_err(),
            CdrError::Unterminated { what: "s", at: 4 }
        );
        let bad_utf8 = [0, 1, 0, 0, 2, 0, 0, 0, 0xff, 0];
        assert_eq!(
            CdrReader::new(&bad_utf8).unwrap().string("s").unwrap_err(),
            CdrError::NotUtf8 { what: "s", at: 4 }
        );
        let two = [0, 1, 0, 0, 2];
        assert_eq!(
            CdrReader::new(&two).unwrap().bool("b").unwrap_err(),
            CdrError::Bool {
                what: "b",
                at: 4,
                value: 2
            }
        );
        let many = [0, 1, 0, 0, 0, 0, 0, 0x40, 1, 2, 3, 4];
        assert_eq!(
            CdrReader::new(&many)
                .unwrap()
                .sequence_len("q", 16)
                .unwrap_err(),
            CdrError::SequenceLength {
                what: "q",
                at: 4,
                count: 0x4000_0000,
                min_size: 16,
                left: 4
            }
        );
    }

    #[test]
    fn padding_may_follow_but_nothing_more() {
        let mut b = vec![0, 1, 0, 0, 5];
        for pad in 0..=3 {
            let mut r = CdrReader::new(&b).unwrap();
            r.u8("x").unwrap();
            assert!(r.finish().is_ok(), "{pad} pad bytes");
            b.push(0);
        }
        let mut r = CdrReader::new(&b).unwrap();
        r.u8("x").unwrap();
        assert_eq!(r.finish(), Err(CdrError::Trailing { at: 5, extra: 4 }));
    }

    #[test]
    fn every_prefix_of_a_message_is_an_error_not_a_panic() {
        let mut w = CdrWriter::new();
        w.u8(1).string("abc").u64(2).sequence_len(2).u32(3).u32(4);
        let b = w.finish();
        let read = |bytes: &[u8]| -> Result<(), CdrError> {
            let mut r = CdrReader::new(bytes)?;
            r.u8("a")?;
            r.string("b")?;
            r.u64("c")?;
            for _ in 0..r.sequence_len("d", 4)? {
                r.u32("e")?;
            }
            r.finish()
        };
        assert!(read(&b).is_ok());
        for n in 0..b.len() {
            assert!(read(&b[..n]).is_err(), "prefix of {n} bytes");
        }
    }
}
