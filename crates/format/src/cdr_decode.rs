//! Decodes whole ROS 2 CDR payloads, as rosbag2 stores them, into a
//! [`MsgValue`] tree, driven by a [`TypeTable`] parsed with
//! [`Dialect::Ros2`].
//!
//! The wire rules are [`crate::cdr_read`]'s, from the same cursor: XCDR1,
//! the encapsulation header picks the byte order, alignment counts from the
//! byte after it, an empty sequence has no padding after its count. Up to
//! 3 bytes after the last field are accepted (the padding some writers add
//! to round the payload to 4, which rosbags accepts too); more are
//! [`DecodeErrorKind::TrailingBytes`]. Every count and fixed-size array is
//! checked against the bytes left before anything is allocated, and the
//! error names the field where decoding stopped.
//!
//! ```
//! use edgerec_format::cdr::msg;
//! use edgerec_format::{cdr_decode, msgdefs, msgtype::TypeTable, value::MsgValue};
//!
//! let def = msgdefs::lookup("std_msgs/String").unwrap();
//! let types = TypeTable::parse(def.name, def.text()).unwrap();
//! let payload = msg::string("grüß");
//! let value = cdr_decode::decode(&types, &payload).unwrap();
//! assert_eq!(value.get("data"), Some(&MsgValue::Str("grüß".into())));
//! ```

use crate::decode::{check_dialect, decode_root, DecodeError};
use crate::msgtype::{Dialect, TypeTable};
use crate::value::MsgValue;
use crate::wire::WireCursor;

#[cfg(doc)]
use crate::decode::DecodeErrorKind;

/// Bytes after the last field that are accepted as padding.
pub const MAX_TRAILING_PADDING: usize = 3;

/// Decodes one CDR payload (encapsulation header first) of the root type
/// of `types`.
pub fn decode<'a>(types: &'a TypeTable, payload: &'a [u8]) -> Result<MsgValue<'a>, DecodeError> {
    check_dialect(types, Dialect::Ros2)?;
    let cur = WireCursor::cdr(payload).map_err(|e| DecodeError {
        path: String::new(),
        kind: e.into(),
    })?;
    decode_root(types, cur, MAX_TRAILING_PADDING)
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;
    use crate::cdr::{msg, CdrWriter, DiagnosticStatusSpec, Time};
    use crate::decode::DecodeErrorKind;
    use crate::msgdefs;
    use crate::wire::ReadError;

    fn table(name: &str) -> TypeTable {
        let def = msgdefs::lookup(name).expect("embedded");
        TypeTable::parse(def.name, def.text()).expect("parses")
    }

    fn s(v: &str) -> MsgValue<'_> {
        MsgValue::Str(Cow::Borrowed(v))
    }

    #[test]
    fn imu_at_every_frame_id_alignment() {
        let t = table("sensor_msgs/Imu");
        for len in 0..9 {
            let frame = "f".repeat(len);
            let cov = [[0.5; 9], [1.5; 9], [2.5; 9]];
            let stamp = Time {
                sec: -2,
                nanosec: 7,
            };
            let b = msg::imu(
                stamp,
                &frame,
                [0.1, 0.2, 0.3, 0.9],
                [1.0; 3],
                [4.0, 5.0, 6.0],
                cov,
            );
            let v = decode(&t, &b).unwrap();
            let header = v.get("header").unwrap();
            assert_eq!(header.get("frame_id"), Some(&s(&frame)));
            let st = header.get("stamp").unwrap();
            assert_eq!(st.get("sec"), Some(&MsgValue::Int(-2)));
            assert_eq!(st.get("nanosec"), Some(&MsgValue::UInt(7)));
            assert_eq!(
                v.get("orientation").unwrap().get("w"),
                Some(&MsgValue::Float(0.9))
            );
            let cov = v.get("linear_acceleration_covariance").unwrap();
            assert_eq!(cov, &MsgValue::Array(vec![MsgValue::Float(2.5); 9]));
        }
    }

    #[test]
    fn diagnostics_nested_sequences_and_empty_ones() {
        let t = table("diagnostic_msgs/DiagnosticArray");
        let statuses = [
            DiagnosticStatusSpec {
                level: 2,
                name: "disk",
                message: "full",
                hardware_id: "nvme0",
                values: &[("free", "0"), ("unit", "B")],
            },
            DiagnosticStatusSpec {
                level: 0,
                name: "clock",
                message: "",
                hardware_id: "",
                values: &[],
            },
        ];
        let b = msg::diagnostic_array(Time::default(), &statuses);
        let v = decode(&t, &b).unwrap();
        let MsgValue::Array(st) = v.get("status").unwrap() else {
            panic!("status is an array");
        };
        assert_eq!(st.len(), 2);
        // `byte level` is an unsigned octet in ROS 2.
        assert_eq!(st[0].get("level"), Some(&MsgValue::UInt(2)));
        let MsgValue::Array(kv) = st[0].get("values").unwrap() else {
            panic!("values is an array");
        };
        assert_eq!(kv[1].get("value"), Some(&s("B")));
        assert_eq!(st[1].get("values"), Some(&MsgValue::Array(vec![])));
    }

    #[test]
    fn byte_arrays_borrow_and_empty_sequences_have_no_padding() {
        let t = TypeTable::parse("p/T", "uint8[] a\nfloat64[] b\nuint8 c\nfloat64 d\n").unwrap();
        let mut w = CdrWriter::new();
        w.bytes(&[1, 2, 3]).sequence_len(0).u8(9).f64(0.25);
        let b = w.finish();
        let v = decode(&t, &b).unwrap();
        let MsgValue::Bytes(Cow::Borrowed(a)) = v.get("a").unwrap() else {
            panic!("borrowed bytes");
        };
        assert_eq!(a, &[1, 2, 3]);
        assert_eq!(v.get("b"), Some(&MsgValue::Array(vec![])));
        assert_eq!(v.get("c"), Some(&MsgValue::UInt(9)));
        assert_eq!(v.get("d"), Some(&MsgValue::Float(0.25)));
    }

    #[test]
    fn errors_name_the_field_and_trailing_bytes_are_bounded() {
        let t = table("diagnostic_msgs/DiagnosticArray");
        let statuses = [DiagnosticStatusSpec {
            level: 1,
            name: "n",
            message: "m",
            hardware_id: "h",
            values: &[("k", "v"), ("key", "value")],
        }];
        let b = msg::diagnostic_array(Time::default(), &statuses);
        let err = decode(&t, &b[..b.len() - 3]).unwrap_err();
        assert_eq!(err.path, "status[0].values[1].value");
        assert!(matches!(
            err.kind,
            DecodeErrorKind::Read(ReadError::CountTooLarge { count: 6, .. })
        ));
        assert!(
            err.to_string()
                .starts_with("at `status[0].values[1].value`: "),
            "{err}"
        );

        let mut padded = b.clone();
        padded.extend_from_slice(&[0, 0, 0]);
        assert!(decode(&t, &padded).is_ok());
        padded.push(0);
        let err = decode(&t, &padded).unwrap_err();
        assert_eq!(err.path, "");
        assert_eq!(
            err.kind,
            DecodeErrorKind::TrailingBytes {
                offset: b.len(),
                left: 4
            }
        );
    }

    #[test]
    fn refuses_other_tables_and_headers() {
        let ros1 = TypeTable::parse_with("p/T", "int8 a\n", Dialect::Ros1).unwrap();
        let err = decode(&ros1, &[0, 1, 0, 0, 1]).unwrap_err();
        assert!(
            matches!(err.kind, DecodeErrorKind::WrongDialect { .. }),
            "{err}"
        );
        let t = TypeTable::parse("p/T", "int8 a\n").unwrap();
        let err = decode(&t, &[0, 7, 0, 0, 1]).unwrap_err();
        assert_eq!(err.kind, DecodeErrorKind::Read(ReadError::Encapsulation(7)));
        let err = decode(&t, &[0, 1]).unwrap_err();
        assert_eq!(
            err.kind,
            DecodeErrorKind::Read(ReadError::NoHeader { len: 2 })
        );
    }

    #[test]
    fn fixed_arrays_larger_than_the_payload_allocate_nothing() {
        let t = TypeTable::parse("p/T", "float64[4000000000] a\n").unwrap();
        let err = decode(&t, &[0, 1, 0, 0, 1, 2, 3, 4]).unwrap_err();
        assert_eq!(err.path, "a");
        assert!(matches!(
            err.kind,
            DecodeErrorKind::Read(ReadError::Truncated { .. })
        ));
    }
}
