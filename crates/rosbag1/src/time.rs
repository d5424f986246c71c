//! ROS 1 `time`: u32 seconds and u32 nanoseconds, as the bag stores it.

/// A bag time stamp (`time` in ROS 1: seconds and nanoseconds since the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time {
    /// Seconds.
    pub sec: u32,
    /// Nanoseconds; rosbag keeps it below 10^9, a corrupt bag may not.
    pub nsec: u32,
}

impl Time {
    /// The earliest time.
    pub const MIN: Time = Time { sec: 0, nsec: 0 };
    /// The latest time.
    pub const MAX: Time = Time {
        sec: u32::MAX,
        nsec: u32::MAX,
    };

    /// Reads the 8 bytes of a `time` field.
    pub fn from_le_bytes(b: &[u8; 8]) -> Time {
        let [s0, s1, s2, s3, n0, n1, n2, n3] = *b;
        Time {
            sec: u32::from_le_bytes([s0, s1, s2, s3]),
            nsec: u32::from_le_bytes([n0, n1, n2, n3]),
        }
    }

    /// The 8 bytes of a `time` field.
    pub fn to_le_bytes(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&self.sec.to_le_bytes());
        b[4..].copy_from_slice(&self.nsec.to_le_bytes());
        b
    }

    /// Nanoseconds since the epoch (never overflows: at most about 4.3e18).
    pub fn as_nanos(self) -> u64 {
        u64::from(self.sec) * 1_000_000_000 + u64::from(self.nsec)
    }

    /// The time `ns` nanoseconds after the epoch, saturating at [`Time::MAX`]'s seconds.
    pub fn from_nanos(ns: u64) -> Time {
        let sec = ns / 1_000_000_000;
        match u32::try_from(sec) {
            Ok(sec) => Time {
                sec,
                nsec: (ns % 1_000_000_000) as u32,
            },
            Err(_) => Time::MAX,
        }
    }
}

impl std::fmt::Display for Time {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:09}", self.sec, self.nsec)
    }
}

#[cfg(test)]
mod tests {
    use super::Time;

    #[test]
    fn nanos_round_trip() {
        let t = Time {
            sec: 1_700_000_000,
            nsec: 123,
        };
        assert_eq!(t.as_nanos(), 1_700_000_000_000_000_123);
        assert_eq!(Time::from_nanos(t.as_nanos()), t);
        assert_eq!(Time::from_le_bytes(&t.to_le_bytes()), t);
        assert_eq!(
            Time::MAX.as_nanos(),
            4_294_967_295 * 1_000_000_000 + 4_294_967_295
        );
        assert!(
            Time { sec: 1, nsec: 0 }
                > Time {
                    sec: 0,
                    nsec: 999_999_999
                }
        );
    }
}
