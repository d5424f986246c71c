//! The messages edgerec publishes about itself: its health as a
//! `diagnostic_msgs/msg/DiagnosticArray` (for `/diagnostics`, where
//! `rqt_robot_monitor` and the diagnostic aggregator read it) and its
//! status snapshot as JSON in a `std_msgs/msg/String` (for
//! `/edgerec/status`). Both are encoded here as the CDR a ROS 2 publisher
//! sends, encapsulation header included. The input is borrowed, so the
//! binary maps edgerec-health's `Diagnostic` list onto [`DiagnosticStatus`]
//! without copying a string.
//!
//! ```
//! use edgerec_ros::diagnostics::{diagnostic_array, level, DiagnosticStatus, Time};
//!
//! let values = vec![("free".to_owned(), "12 GiB".to_owned())];
//! let status = DiagnosticStatus {
//!     level: level::OK,
//!     name: "edgerec: storage",
//!     message: "ok",
//!     hardware_id: "/dev/nvme0n1",
//!     values: &values,
//! };
//! let cdr = diagnostic_array(Time { sec: 1, nanosec: 0 }, "", &[status]);
//! assert_eq!(&cdr[..4], &[0, 1, 0, 0]);
//! ```

use edgerec_format::cdr::{msg, CdrWriter};

pub use edgerec_format::cdr::Time;

/// The ROS type [`diagnostic_array`] encodes.
pub const DIAGNOSTIC_ARRAY_TYPE: &str = "diagnostic_msgs/msg/DiagnosticArray";

/// The ROS type [`status_string`] encodes.
pub const STRING_TYPE: &str = "std_msgs/msg/String";

/// `diagnostic_msgs/msg/DiagnosticStatus` levels (a `byte` on the wire).
pub mod level {
    /// Nothing wrong.
    pub const OK: u8 = 0;
    /// Degraded.
    pub const WARN: u8 = 1;
    /// Fault.
    pub const ERROR: u8 = 2;
    /// No recent update.
    pub const STALE: u8 = 3;
}

/// One `diagnostic_msgs/msg/DiagnosticStatus`, borrowed from whatever
/// holds it (edgerec-health's `Diagnostic` has the same fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiagnosticStatus<'a> {
    /// One of [`level`].
    pub level: u8,
    /// What it is about (`edgerec: storage`).
    pub name: &'a str,
    /// One line.
    pub message: &'a str,
    /// The device or file.
    pub hardware_id: &'a str,
    /// `diagnostic_msgs/msg/KeyValue` pairs, as `(key, value)`.
    pub values: &'a [(String, String)],
}

/// Bytes enough for the message: header, counts and worst-case padding
/// per status and value on top of the strings, so the buffer is allocated
/// once.
fn capacity(frame_id: &str, statuses: &[DiagnosticStatus<'_>]) -> usize {
    const FIXED: usize = 32;
    const PER_STATUS: usize = 32;
    const PER_VALUE: usize = 16;
    let status_bytes = |s: &DiagnosticStatus<'_>| {
        let values: usize = s
            .values
            .iter()
            .map(|(k, v)| PER_VALUE + k.len() + v.len())
            .sum();
        PER_STATUS + s.name.len() + s.message.len() + s.hardware_id.len() + values
    };
    FIXED + frame_id.len() + statuses.iter().map(status_bytes).sum::<usize>()
}

/// `diagnostic_msgs/msg/DiagnosticArray`: `std_msgs/Header` (`stamp`,
/// `frame_id`), then the statuses in order.
pub fn diagnostic_array(stamp: Time, frame_id: &str, statuses: &[DiagnosticStatus<'_>]) -> Vec<u8> {
    let mut w = CdrWriter::with_capacity(capacity(frame_id, statuses));
    w.header(stamp, frame_id).sequence_len(statuses.len());
    for s in statuses {
        w.u8(s.level)
            .string(s.name)
            .string(s.message)
            .string(s.hardware_id)
            .sequence_len(s.values.len());
        for (key, value) in s.values {
            w.string(key).string(value);
        }
    }
    w.finish()
}

/// `std_msgs/msg/String` holding `json`, edgerec's status snapshot.
pub fn status_string(json: &str) -> Vec<u8> {
    msg::string(json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_array_is_the_header_and_a_zero_count() {
        let b = diagnostic_array(
            Time {
                sec: -2,
                nanosec: 300_000_000,
            },
            "base",
            &[],
        );
        #[rustfmt::skip]
        let expected: Vec<u8> = [
            &[0, 1, 0, 0][..],
            &(-2i32).to_le_bytes(), &300_000_000u32.to_le_bytes(),
            &[5, 0, 0, 0], b"base", &[0],   // frame_id, ends at 17
            &[0, 0, 0],                     // pad to 20
            &[0, 0, 0, 0],                  // no statuses
        ]
        .concat();
        assert_eq!(b, expected);
    }

    #[test]
    fn one_status_hand_checked() {
        let values = vec![("k".to_owned(), "vv".to_owned())];
        let s = DiagnosticStatus {
            level: level::ERROR,
            name: "n",
            message: "",
            hardware_id: "hw",
            values: &values,
        };
        let b = diagnostic_array(Time { sec: 1, nanosec: 2 }, "", &[s]);
        // Offsets after the 4-byte header in the comments.
        #[rustfmt::skip]
        let expected: Vec<u8> = [
            &[0, 1, 0, 0][..],
            &[1, 0, 0, 0], &[2, 0, 0, 0],             // 0: stamp
            &[1, 0, 0, 0, 0],                         // 8: frame_id ""
            &[0, 0, 0], &[1, 0, 0, 0],                // 13: pad, 16: one status
            &[2],                                     // 20: level ERROR
            &[0, 0, 0], &[2, 0, 0, 0, b'n', 0],       // 21: pad, 24: name
            &[0, 0], &[1, 0, 0, 0, 0],                // 30: pad, 32: message ""
            &[0, 0, 0], &[3, 0, 0, 0, b'h', b'w', 0], // 37: pad, 40: hardware_id
            &[0], &[1, 0, 0, 0],                      // 47: pad, 48: one value
            &[2, 0, 0, 0, b'k', 0],                   // 52: key
            &[0, 0], &[3, 0, 0, 0, b'v', b'v', 0],    // 58: pad, 60: value
        ]
        .concat();
        assert_eq!(b, expected);
    }

    #[test]
    fn capacity_covers_the_message() {
        let values: Vec<(String, String)> =
            (0..7).map(|i| ("k".repeat(i), "v".repeat(7 - i))).collect();
        let statuses: Vec<DiagnosticStatus<'_>> = (0..5)
            .map(|i| DiagnosticStatus {
                level: i as u8,
                name: &"name"[..i % 4],
                message: "m",
                hardware_id: "",
                values: &values[..i],
            })
            .collect();
        for n in 0..=statuses.len() {
            for frame in ["", "f", "frame_id"] {
                let b = diagnostic_array(Time::default(), frame, &statuses[..n]);
                assert!(b.len() <= capacity(frame, &statuses[..n]), "{n} {frame:?}");
            }
        }
    }

    #[test]
    fn status_is_a_std_msgs_string() {
        assert_eq!(status_string("{}"), [0, 1, 0, 0, 3, 0, 0, 0, b'{', b'}', 0]);
    }
}
