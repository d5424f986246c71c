//! The picture size in an H.265 sequence parameter set (ITU-T H.265
//! 7.3.2.2): the fields up to the conformance window, read with
//! exp-Golomb codes after the emulation-prevention bytes are removed. The
//! coded size is a whole number of minimum coding blocks (1080 lines are
//! coded as 1088 by most encoders) and the conformance window crops it to
//! what is shown, so the window is applied here.

/// What `edgerec info` shows of a sequence parameter set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sps {
    /// `general_profile_idc` (1 Main, 2 Main 10, 4 range extensions).
    pub profile_idc: u8,
    /// `general_level_idc`: 30 x the level (93 is level 3.1).
    pub level_idc: u8,
    /// `chroma_format_idc`: 0 monochrome, 1 4:2:0, 2 4:2:2, 3 4:4:4.
    pub chroma_format_idc: u32,
    /// `pic_width_in_luma_samples`: the coded width.
    pub coded_width: u32,
    /// `pic_height_in_luma_samples`: the coded height.
    pub coded_height: u32,
    /// The width shown: the coded width less the conformance window.
    pub width: u32,
    /// The height shown.
    pub height: u32,
}

/// Why a NAL unit is not a readable SPS.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpsError {
    /// The NAL unit is of another type.
    #[error("NAL unit type {0} is not an SPS (33)")]
    NotSps(u8),
    /// The unit ends before the field.
    #[error("SPS ends inside `{field}`")]
    Truncated {
        /// The field being read.
        field: &'static str,
    },
    /// A field holds a value H.265 does not allow.
    #[error("SPS field `{field}` is {value}, out of range")]
    OutOfRange {
        /// The field.
        field: &'static str,
        /// What it holds (saturated to u64).
        value: u64,
    },
}

/// NAL unit type of an SPS.
const SPS_TYPE: u8 = crate::nal::kind::SPS;

/// The RBSP of a NAL unit: the payload with every emulation-prevention
/// byte (the 0x03 of `00 00 03`) removed.
pub fn rbsp(unit: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(unit.len());
    let mut zeros = 0;
    for &b in unit {
        if zeros >= 2 && b == 3 {
            zeros = 0;
            continue;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        out.push(b);
    }
    out
}

/// Reads bits most significant first.
struct Bits<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Bits<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Bits { buf, pos: 0 }
    }

    fn bit(&mut self, field: &'static str) -> Result<u32, SpsError> {
        let byte = self
            .buf
            .get(self.pos / 8)
            .ok_or(SpsError::Truncated { field })?;
        let b = (byte >> (7 - self.pos % 8)) & 1;
        self.pos += 1;
        Ok(u32::from(b))
    }

    /// `u(n)`, n <= 32.
    fn u(&mut self, n: u32, field: &'static str) -> Result<u32, SpsError> {
        let mut v = 0u32;
        for _ in 0..n {
            v = (v << 1) | self.bit(field)?;
        }
        Ok(v)
    }

    fn skip(&mut self, n: usize, field: &'static str) -> Result<(), SpsError> {
        if self.pos + n > self.buf.len() * 8 {
            return Err(SpsError::Truncated { field });
        }
        self.pos += n;
        Ok(())
    }

    /// `ue(v)`: unsigned exp-Golomb, up to 2^32 - 2.
    fn ue(&mut self, field: &'static str) -> Result<u32, SpsError> {
        let mut zeros = 0u32;
        while self.bit(field)? == 0 {
            zeros += 1;
            if zeros > 31 {
                return Err(SpsError::OutOfRange {
                    field,
                    value: u64::MAX,
                });
            }
        }
        let rest = self.u(zeros, field)?;
        let v = (1u64 << zeros) - 1 + u64::from(rest);
        u32::try_from(v).map_err(|_| SpsError::OutOfRange { field, value: v })
    }
}

/// Parses an SPS NAL unit (from its two-byte header on, emulation
/// prevention still in) as far as the conformance window.
pub fn parse(unit: &[u8]) -> Result<Sps, SpsError> {
    let t = crate::nal::unit_type(unit).ok_or(SpsError::Truncated {
        field: "nal_unit_header",
    })?;
    if t != SPS_TYPE {
        return Err(SpsError::NotSps(t));
    }
    let raw = rbsp(unit);
    let mut r = Bits::new(&raw);
    r.skip(16, "nal_unit_header")?;
    r.skip(4, "sps_video_parameter_set_id")?;
    let max_sub_layers_minus1 = r.u(3, "sps_max_sub_layers_minus1")?;
    r.skip(1, "sps_temporal_id_nesting_flag")?;
    // profile_tier_level(1, sps_max_sub_layers_minus1), 7.3.3.
    r.skip(2 + 1, "general_profile_space")?;
    let profile_idc = r.u(5, "general_profile_idc")? as u8;
    // Compatibility flags (32), four source flags and 43 + 1 reserved or
    // constraint bits.
    r.skip(32 + 4 + 43 + 1, "general_profile_compatibility_flags")?;
    let level_idc = r.u(8, "general_level_idc")? as u8;
    let mut sub_layers = Vec::with_capacity(max_sub_layers_minus1 as usize);
    for _ in 0..max_sub_layers_minus1 {
        let profile = r.bit("sub_layer_profile_present_flag")? == 1;
        let level = r.bit("sub_layer_level_present_flag")? == 1;
        sub_layers.push((profile, level));
    }
    if max_sub_layers_minus1 > 0 {
        for _ in max_sub_layers_minus1..8 {
            r.skip(2, "reserved_zero_2bits")?;
        }
    }
    for (profile, level) in sub_layers {
        if profile {
            r.skip(88, "sub_layer_profile")?;
        }
        if level {
            r.skip(8, "sub_layer_level_idc")?;
        }
    }
    let id = r.ue("sps_seq_parameter_set_id")?;
    if id > 15 {
        return Err(SpsError::OutOfRange {
            field: "sps_seq_parameter_set_id",
            value: id.into(),
        });
    }
    let chroma_format_idc = r.ue("chroma_format_idc")?;
    if chroma_format_idc > 3 {
        return Err(SpsError::OutOfRange {
            field: "chroma_format_idc",
            value: chroma_format_idc.into(),
        });
    }
    let separate_planes = chroma_format_idc == 3 && r.bit("separate_colour_plane_flag")? == 1;
    let coded_width = r.ue("pic_width_in_luma_samples")?;
    let coded_height = r.ue("pic_height_in_luma_samples")?;
    // Table 6-1: the window is in chroma samples.
    let (sub_w, sub_h) = match (chroma_format_idc, separate_planes) {
        (1, _) => (2, 2),
        (2, _) => (2, 1),
        _ => (1, 1),
    };
    let (mut width, mut height) = (coded_width, coded_height);
    if r.bit("conformance_window_flag")? == 1 {
        let left = r.ue("conf_win_left_offset")?;
        let right = r.ue("conf_win_right_offset")?;
        let top = r.ue("conf_win_top_offset")?;
        let bottom = r.ue("conf_win_bottom_offset")?;
        let crop = |size: u32, a: u32, b: u32, unit: u32, field| {
            let cut = (u64::from(a) + u64::from(b)) * u64::from(unit);
            u64::from(size)
                .checked_sub(cut)
                .filter(|&v| v > 0)
                .map(|v| v as u32)
                .ok_or(SpsError::OutOfRange { field, value: cut })
        };
        width = crop(coded_width, left, right, sub_w, "conf_win_left_offset")?;
        height = crop(coded_height, top, bottom, sub_h, "conf_win_top_offset")?;
    }
    if width == 0 || height == 0 {
        return Err(SpsError::OutOfRange {
            field: "pic_width_in_luma_samples",
            value: 0,
        });
    }
    Ok(Sps {
        profile_idc,
        level_idc,
        chroma_format_idc,
        coded_width,
        coded_height,
        width,
        height,
    })
}

/// The first SPS of an Annex B access unit, parsed; None when it has none.
pub fn find(access_unit: &[u8]) -> Option<Result<Sps, SpsError>> {
    crate::nal::units(access_unit)
        .into_iter()
        .find(|u| crate::nal::unit_type(u) == Some(SPS_TYPE))
        .map(parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    // SPS NAL units from real encoders (see each test for the command);
    // each holds `00 00 03` escapes in its profile_tier_level.

    #[test]
    fn x265_640x480_has_no_window() {
        // gst-launch-1.0 videotestsrc num-buffers=1 !
        //   video/x-raw,width=640,height=480,format=I420 ! x265enc !
        //   video/x-h265,stream-format=byte-stream ! filesink location=a.h265
        let sps = hex("42010101600000030090000003000003005aa0050201e165959a49\
             32bffc00040005a830303020000003002000000303c1");
        let s = parse(&sps).unwrap();
        assert_eq!((s.width, s.height), (640, 480));
        assert_eq!((s.coded_width, s.coded_height), (640, 480));
        assert_eq!(
            (s.profile_idc, s.level_idc, s.chroma_format_idc),
            (1, 90, 1)
        );
    }

    #[test]
    fn x265_1080p_is_cropped_from_1088() {
        // As above with width=1920,height=1080 and x265enc
        // option-string=min-cu-size=16: 1080 is not a whole number of
        // 16-line blocks, so it is coded as 1088 (as NVENC does) with an
        // 8-line window. x265's default 8-line blocks code 1080 as is.
        let sps = hex("420101016000000300900000030000030078a003c0801107cb9656\
             64e4cafff000100016a020202080000003008000000f04");
        let s = parse(&sps).unwrap();
        assert_eq!((s.coded_width, s.coded_height), (1920, 1088));
        assert_eq!((s.width, s.height), (1920, 1080));
        assert_eq!((s.profile_idc, s.level_idc), (1, 120));
    }

    #[test]
    fn ffmpeg_x265_422_and_444_use_their_chroma_units() {
        // ffmpeg -f lavfi -i testsrc=size=1918x1078 -frames:v 1
        //   -pix_fmt yuv422p -c:v libx265 -f hevc d.h265 (coded 1920x1080;
        //   in 4:2:2 the window is 2 luma columns but 1 luma row a unit).
        let s = parse(&hex(
            "4201010408000003009d08000003000078b003c08010e75796566924caf0168080000003008000000f04",
        ))
        .unwrap();
        assert_eq!(s.chroma_format_idc, 2);
        assert_eq!((s.coded_width, s.coded_height), (1920, 1080));
        assert_eq!((s.width, s.height), (1918, 1078));
        // Same with size=1280x720 and -pix_fmt yuv444p.
        let s = parse(&hex(
            "4201010408000003009e0800000300005d9000501005a2cb2b349265780b4040000003004000000782",
        ))
        .unwrap();
        assert_eq!((s.chroma_format_idc, s.width, s.height), (3, 1280, 720));
    }

    /// Writes bits for the hand-made SPS below.
    #[derive(Default)]
    struct Writer {
        bits: Vec<u8>,
    }

    impl Writer {
        /// `n` bits of `v` (zeros above its 64).
        fn u(&mut self, n: u32, v: u64) -> &mut Self {
            for i in (0..n).rev() {
                self.bits.push(v.checked_shr(i).map_or(0, |x| x & 1) as u8);
            }
            self
        }
        fn ue(&mut self, v: u64) -> &mut Self {
            let x = v + 1;
            let len = 64 - x.leading_zeros();
            self.u(len - 1, 0).u(len, x)
        }
        /// Bytes with the stop bit, escaped as an encoder would.
        fn nal(&mut self) -> Vec<u8> {
            self.bits.push(1);
            while self.bits.len() % 8 != 0 {
                self.bits.push(0);
            }
            let bytes: Vec<u8> = self
                .bits
                .chunks(8)
                .map(|c| c.iter().fold(0, |a, &b| (a << 1) | b))
                .collect();
            let mut out = Vec::new();
            let mut zeros = 0;
            for b in bytes {
                if zeros >= 2 && b <= 3 {
                    out.push(3);
                    zeros = 0;
                }
                zeros = if b == 0 { zeros + 1 } else { 0 };
                out.push(b);
            }
            out
        }
    }

    #[test]
    fn sub_layers_are_skipped_and_the_window_applied() {
        let mut w = Writer::default();
        w.u(16, 0x4201); // SPS header
        w.u(4, 0).u(3, 2).u(1, 1); // vps id, max_sub_layers_minus1 = 2
        w.u(8, 2).u(32, 0x2000_0000).u(48, 0).u(8, 123); // Main 10, L4.1
        w.u(2, 0b11).u(2, 0b01); // layer 0: profile+level, layer 1: level
        w.u(2 * 6, 0); // reserved_zero_2bits for 2..8
        w.u(88, 0).u(8, 90).u(8, 60);
        w.ue(0).ue(1); // sps id, 4:2:0
        w.ue(3840).ue(2176).u(1, 1).ue(0).ue(0).ue(0).ue(8);
        let unit = w.nal();
        let s = parse(&unit).unwrap();
        assert_eq!((s.profile_idc, s.level_idc), (2, 123));
        assert_eq!((s.width, s.height), (3840, 2160));
        // Found inside an access unit behind a start code.
        let mut au = vec![0, 0, 0, 1, 0x40, 0x01, 0x0c];
        au.extend_from_slice(&[0, 0, 0, 1]);
        au.extend_from_slice(&unit);
        au.extend_from_slice(&[0, 0, 1, 0x26, 0x01, 0xaf]);
        assert_eq!(find(&au), Some(Ok(s)));
        assert_eq!(find(&[0, 0, 1, 0x26, 0x01]), None);
    }

    #[test]
    fn removes_emulation_prevention_bytes() {
        assert_eq!(rbsp(&[0, 0, 3, 1]), vec![0, 0, 1]);
        assert_eq!(rbsp(&[0, 0, 3, 0, 0, 3, 3]), vec![0, 0, 0, 0, 3]);
        // Only after two zeros.
        assert_eq!(rbsp(&[0, 3, 0, 3]), vec![0, 3, 0, 3]);
        assert_eq!(rbsp(&[0, 0, 0, 3]), vec![0, 0, 0]);
    }

    #[test]
    fn damage_is_an_error_never_a_panic() {
        let sps = hex("420101016000000300900000030000030078a003c0801107cb9656\
             64e4cafff000100016a020202080000003008000000f04");
        // The conformance window ends within the first 24 bytes here.
        for cut in 0..20 {
            assert!(parse(&sps[..cut]).is_err(), "cut at {cut}");
        }
        assert_eq!(parse(&[0x40, 0x01]), Err(SpsError::NotSps(32)));
        // A window wider than the picture.
        let mut w = Writer::default();
        w.u(16, 0x4201).u(8, 0x01).u(96, 0);
        w.ue(0)
            .ue(1)
            .ue(64)
            .ue(64)
            .u(1, 1)
            .ue(20)
            .ue(20)
            .ue(0)
            .ue(0);
        assert!(matches!(parse(&w.nal()), Err(SpsError::OutOfRange { .. })));
        // 32 leading zeros in an exp-Golomb code.
        let mut w = Writer::default();
        w.u(16, 0x4201).u(8, 0x01).u(96, 0).u(40, 0);
        assert!(parse(&w.nal()).is_err());
    }
}
