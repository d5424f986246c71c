//! H.265 Annex B access units: the NAL units in one, and whether it is a
//! random access point carrying its parameter sets (what a segment's first
//! frame must be for the file to decode on its own).

/// NAL unit types (ITU-T H.265 table 7-1) that matter here.
pub mod kind {
    /// First IRAP type (BLA_W_LP).
    pub const IRAP_FIRST: u8 = 16;
    /// Last IRAP type (RSV_IRAP_VCL23 is 23, but 16..=21 are the coded ones).
    pub const IRAP_LAST: u8 = 21;
    /// IDR_W_RADL.
    pub const IDR_W_RADL: u8 = 19;
    /// IDR_N_LP.
    pub const IDR_N_LP: u8 = 20;
    /// Video parameter set.
    pub const VPS: u8 = 32;
    /// Sequence parameter set.
    pub const SPS: u8 = 33;
    /// Picture parameter set.
    pub const PPS: u8 = 34;
    /// Access unit delimiter.
    pub const AUD: u8 = 35;
}

/// The NAL unit types of an Annex B byte stream, in order (3- and 4-byte
/// start codes).
pub fn unit_types(data: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    let mut i = 0;
    while i + 3 <= data.len() {
        if data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1 {
            if let Some(&b) = data.get(i + 3) {
                types.push((b >> 1) & 0x3f);
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    types
}

/// The NAL units of an Annex B byte stream, each from its two-byte header
/// to the byte before the next start code, without the trailing zero bytes
/// that a 4-byte start code (or `trailing_zero_8bits`) leaves behind.
pub fn units(data: &[u8]) -> Vec<&[u8]> {
    let mut starts = Vec::new();
    let mut i = 0;
    while i + 3 <= data.len() {
        if data[i] == 0 && data[i + 1] == 0 && data[i + 2] == 1 {
            starts.push(i + 3);
            i += 3;
        } else {
            i += 1;
        }
    }
    let mut out = Vec::with_capacity(starts.len());
    for (k, &s) in starts.iter().enumerate() {
        let end = starts.get(k + 1).map_or(data.len(), |&next| next - 3);
        let mut unit = &data[s..end];
        while let [rest @ .., 0] = unit {
            unit = rest;
        }
        if !unit.is_empty() {
            out.push(unit);
        }
    }
    out
}

/// The type of a NAL unit (its first header byte's bits 1..=6).
pub fn unit_type(unit: &[u8]) -> Option<u8> {
    unit.first().map(|b| (b >> 1) & 0x3f)
}

/// What an access unit holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AccessUnit {
    /// It holds an IRAP picture (types 16..=21): decoding can start here.
    pub irap: bool,
    /// It holds a VPS, an SPS and a PPS.
    pub parameter_sets: bool,
    /// NAL units in it.
    pub units: usize,
}

impl AccessUnit {
    /// Looks at an Annex B access unit.
    pub fn parse(data: &[u8]) -> Self {
        let types = unit_types(data);
        let has = |t: u8| types.contains(&t);
        AccessUnit {
            irap: types
                .iter()
                .any(|t| (kind::IRAP_FIRST..=kind::IRAP_LAST).contains(t)),
            parameter_sets: has(kind::VPS) && has(kind::SPS) && has(kind::PPS),
            units: types.len(),
        }
    }

    /// A point a decoder can start from with nothing before it.
    pub fn is_keyframe(&self) -> bool {
        self.irap && self.parameter_sets
    }
}

/// Access units for tests: a keyframe (VPS, SPS, PPS, IDR_W_RADL) and a
/// delta frame (TRAIL_R).
#[cfg(test)]
pub(crate) mod samples {
    pub(crate) const KEY: &[u8] = &[
        0, 0, 0, 1, 0x40, 1, 0x0c, 0, 0, 0, 1, 0x42, 1, 1, 0, 0, 0, 1, 0x44, 1, 0xc1, 0, 0, 0, 1,
        0x26, 1, 0xaf,
    ];
    pub(crate) const DELTA: &[u8] = &[0, 0, 0, 1, 0x02, 1, 0xd0, 0x55];
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nal(t: u8) -> [u8; 6] {
        [0, 0, 0, 1, t << 1, 1]
    }

    #[test]
    fn finds_types_behind_both_start_codes() {
        let mut au = Vec::new();
        au.extend_from_slice(&nal(kind::VPS));
        au.extend_from_slice(&[0, 0, 1, kind::SPS << 1, 1, 0x55]);
        au.extend_from_slice(&nal(kind::PPS));
        au.extend_from_slice(&nal(kind::IDR_W_RADL));
        assert_eq!(unit_types(&au), vec![32, 33, 34, 19]);
        let a = AccessUnit::parse(&au);
        assert!(a.is_keyframe());
        assert_eq!(a.units, 4);
        let delta = AccessUnit::parse(&nal(1));
        assert!(!delta.irap && !delta.is_keyframe());
        // An IDR without parameter sets cannot start a file.
        assert!(!AccessUnit::parse(&nal(kind::IDR_N_LP)).is_keyframe());
        assert_eq!(unit_types(&[0, 0]), Vec::<u8>::new());
        assert_eq!(unit_types(&[0, 0, 1]), Vec::<u8>::new());
    }

    #[test]
    fn splits_units_without_start_codes_or_trailing_zeros() {
        let au = [
            0, 0, 0, 1, 0x40, 0x01, 0xaa, // VPS
            0, 0, 1, 0x42, 0x01, 0x00, 0x00, 0x03, 0x01, // SPS ending in an escape
            0, 0, 0, 0, 1, 0x26, 0x01, // IDR after trailing_zero_8bits
        ];
        let u = units(&au);
        assert_eq!(
            u,
            vec![
                &[0x40, 0x01, 0xaa][..],
                &[0x42, 0x01, 0x00, 0x00, 0x03, 0x01][..],
                &[0x26, 0x01][..]
            ]
        );
        let types: Vec<_> = u.iter().filter_map(|x| unit_type(x)).collect();
        assert_eq!(types, unit_types(&au));
        assert!(units(&[0, 0, 1]).is_empty());
        assert!(units(&[1, 2, 3]).is_empty());
        assert_eq!(unit_type(&[]), None);
    }
}
