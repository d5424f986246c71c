//! Decodes ROS 1 serialized messages, as a bag's message data records and
//! `ros1`-encoded MCAP messages hold them, into a [`MsgValue`] tree, driven
//! by a [`TypeTable`] parsed from the connection's `message_definition`
//! with [`Dialect::Ros1`].
//!
//! ROS 1 serialization is little endian and packed: no header, no
//! alignment; `time` is `uint32 secs, uint32 nsecs` and `duration`
//! `int32 secs, int32 nsecs`; strings (no NUL) and variable-length arrays
//! start with a `uint32` count, fixed-size arrays have none. Any byte after
//! the last field is [`DecodeErrorKind::TrailingBytes`]: ROS 1 writers add
//! no padding, so a leftover means the definition does not fit the bytes.
//!
//! ```
//! use edgerec_format::msgtype::{Dialect, TypeTable};
//! use edgerec_format::{ros1_decode, value::MsgValue};
//!
//! let types = TypeTable::parse_with("p/Stamped", "time t\nint8[2] v\n", Dialect::Ros1).unwrap();
//! let payload = [1, 0, 0, 0, 2, 0, 0, 0, 0xff, 7];
//! let value = ros1_decode::decode(&types, &payload).unwrap();
//! let t = value.get("t").unwrap();
//! assert_eq!(t.get("secs"), Some(&MsgValue::UInt(1)));
//! assert_eq!(t.get("nsecs"), Some(&MsgValue::UInt(2)));
//! assert_eq!(value.get("v"), Some(&MsgValue::Array(vec![MsgValue::Int(-1), MsgValue::Int(7)])));
//! ```

use crate::decode::{check_dialect, decode_root, DecodeError};
use crate::msgtype::{Dialect, TypeTable};
use crate::value::MsgValue;
use crate::wire::WireCursor;

#[cfg(doc)]
use crate::decode::DecodeErrorKind;

/// Decodes one ROS 1 serialized message of the root type of `types`.
pub fn decode<'a>(types: &'a TypeTable, payload: &'a [u8]) -> Result<MsgValue<'a>, DecodeError> {
    check_dialect(types, Dialect::Ros1)?;
    decode_root(types, WireCursor::ros1(payload), 0)
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;
    use crate::decode::{DecodeErrorKind, VALUE_BUDGET_BASE};
    use crate::wire::ReadError;

    const SEP: &str =
        "================================================================================";

    /// ROS 1 serialization by hand.
    #[derive(Default)]
    struct W(Vec<u8>);

    impl W {
        fn u32(mut self, v: u32) -> Self {
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        fn i32(mut self, v: i32) -> Self {
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        fn f64(mut self, v: f64) -> Self {
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        fn raw(mut self, v: &[u8]) -> Self {
            self.0.extend_from_slice(v);
            self
        }
        fn string(self, s: &str) -> Self {
            self.u32(s.len() as u32).raw(s.as_bytes())
        }
    }

    fn stamped() -> TypeTable {
        let text = format!(
            "Header header\nduration age\ngeometry_msgs/Point[] points\nfloat64[2] pair\n\
             string[] names\nint8 b\n\
             {SEP}\nMSG: std_msgs/Header\nuint32 seq\ntime stamp\nstring frame_id\n\
             {SEP}\nMSG: geometry_msgs/Point\nfloat64 x\nfloat64 y\nfloat64 z\n"
        );
        TypeTable::parse_with("p/Stamped", &text, Dialect::Ros1).unwrap()
    }

    fn stamped_bytes() -> Vec<u8> {
        W::default()
            .u32(7)
            .u32(1_700_000_000)
            .u32(5)
            .string("base_link")
            .i32(-1)
            .i32(-500)
            .u32(1)
            .f64(1.0)
            .f64(2.0)
            .f64(3.0)
            .f64(0.5)
            .f64(-0.5)
            .u32(2)
            .string("a")
            .string("ü")
            .raw(&[0x80])
            .0
    }

    #[test]
    fn header_time_duration_arrays_strings() {
        let t = stamped();
        let b = stamped_bytes();
        let v = decode(&t, &b).unwrap();
        let h = v.get("header").unwrap();
        assert_eq!(h.get("seq"), Some(&MsgValue::UInt(7)));
        let stamp = h.get("stamp").unwrap();
        assert_eq!(stamp.get("secs"), Some(&MsgValue::UInt(1_700_000_000)));
        assert_eq!(stamp.get("nsecs"), Some(&MsgValue::UInt(5)));
        assert_eq!(
            h.get("frame_id"),
            Some(&MsgValue::Str(Cow::Borrowed("base_link")))
        );
        let age = v.get("age").unwrap();
        assert_eq!(age.get("secs"), Some(&MsgValue::Int(-1)));
        assert_eq!(age.get("nsecs"), Some(&MsgValue::Int(-500)));
        let MsgValue::Array(points) = v.get("points").unwrap() else {
            panic!("points");
        };
        assert_eq!(points[0].get("z"), Some(&MsgValue::Float(3.0)));
        assert_eq!(
            v.get("pair"),
            Some(&MsgValue::Array(vec![
                MsgValue::Float(0.5),
                MsgValue::Float(-0.5)
            ]))
        );
        assert_eq!(
            v.get("names"),
            Some(&MsgValue::Array(vec![
                MsgValue::Str(Cow::Borrowed("a")),
                MsgValue::Str(Cow::Borrowed("ü"))
            ]))
        );
        assert_eq!(v.get("b"), Some(&MsgValue::Int(-128)));
    }

    #[test]
    fn char_arrays_are_bytes_byte_arrays_are_ints() {
        let t = TypeTable::parse_with("p/T", "char[] c\nbyte[2] b\nuint8[2] u\n", Dialect::Ros1)
            .unwrap();
        let b = W::default().u32(1).raw(&[65, 0xff, 1, 2, 3]).0;
        let v = decode(&t, &b).unwrap();
        assert_eq!(v.get("c"), Some(&MsgValue::Bytes(Cow::Borrowed(&[65]))));
        assert_eq!(
            v.get("b"),
            Some(&MsgValue::Array(vec![MsgValue::Int(-1), MsgValue::Int(1)]))
        );
        assert_eq!(v.get("u"), Some(&MsgValue::Bytes(Cow::Borrowed(&[2, 3]))));
    }

    #[test]
    fn every_cut_is_an_error_naming_a_field() {
        let t = stamped();
        let b = stamped_bytes();
        for cut in 0..b.len() {
            let err = decode(&t, &b[..cut]).unwrap_err();
            assert!(!err.path.is_empty(), "cut {cut}: {err}");
        }
        let err = decode(&t, &b[..b.len() - 1]).unwrap_err();
        assert_eq!(err.path, "b");
        let err = decode(&t, &b[..20]).unwrap_err();
        assert_eq!(err.path, "header.frame_id");
        let mut long = b.clone();
        long.push(0);
        let err = decode(&t, &long).unwrap_err();
        assert_eq!(
            err.kind,
            DecodeErrorKind::TrailingBytes {
                offset: b.len(),
                left: 1
            }
        );
    }

    #[test]
    fn huge_counts_allocate_nothing() {
        let t = stamped();
        let mut b = stamped_bytes();
        // The points count: after seq, stamp, frame_id and age.
        let at = 4 + 8 + 4 + 9 + 8;
        b[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = decode(&t, &b).unwrap_err();
        assert_eq!(err.path, "points");
        assert!(matches!(
            err.kind,
            DecodeErrorKind::Read(ReadError::CountTooLarge {
                count: u32::MAX,
                min_size: 24,
                ..
            })
        ));
    }

    #[test]
    fn types_without_bytes_are_bounded_by_the_value_budget() {
        let text = format!("E[] many\n{SEP}\nMSG: p/E\n");
        let t = TypeTable::parse_with("p/T", &text, Dialect::Ros1).unwrap();
        let err = decode(&t, &u32::MAX.to_le_bytes()).unwrap_err();
        assert!(
            matches!(err.kind, DecodeErrorKind::TooManyValues { .. }),
            "{err}"
        );
        assert!(err.path.starts_with("many["), "{}", err.path);
        let three = 3u32.to_le_bytes();
        let few = decode(&t, &three).unwrap();
        assert_eq!(few.get("many").and_then(MsgValue::len), Some(3));
        let text =
            format!("E[100000] a\nE[100000] b\n{SEP}\nMSG: p/E\nF[100] f\n{SEP}\nMSG: p/F\n");
        let t = TypeTable::parse_with("p/T", &text, Dialect::Ros1).unwrap();
        let err = decode(&t, &[]).unwrap_err();
        assert_eq!(
            err.kind,
            DecodeErrorKind::TooManyValues {
                limit: VALUE_BUDGET_BASE
            }
        );
    }

    #[test]
    fn refuses_a_ros2_table() {
        let t = TypeTable::parse("p/T", "int8 a\n").unwrap();
        let err = decode(&t, &[1]).unwrap_err();
        assert!(
            matches!(err.kind, DecodeErrorKind::WrongDialect { .. }),
            "{err}"
        );
    }
}
