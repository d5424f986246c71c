//! Which H.265 encoder a camera uses, and the element properties the
//! configuration maps to for each: pure functions, tested here for all
//! three encoders although only x265enc exists on this machine.
//!
//! - `nvv4l2h265enc` (Jetson NVENC): bitrate in bit/s, `control-rate`
//!   (0 variable, 1 constant), `iframeinterval` **and** `idrinterval` both
//!   at the keyframe interval in frames (the default idrinterval of 256
//!   leaves random access points 8.5 s apart at 30 fps), `insert-sps-pps`,
//!   `maxperf-enable`, `preset-level`; Orin has no B-frames.
//! - `nvh265enc` (desktop NVENC): bitrate in kbit/s, `rc-mode`,
//!   `gop-size`, `preset`, `zerolatency` (no B-frames, no lookahead).
//! - `x265enc` (software): bitrate in kbit/s, `key-int-max`,
//!   `speed-preset`, `tune=zerolatency` (no B-frames), and an
//!   `option-string` for a closed GOP with no scene-cut keyframes and the
//!   VBV that makes the rate constant or bounded.

use edgerec_config::{EncoderChoice, RateControl};

/// An encoder element edgerec can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoder {
    /// Jetson NVENC through V4L2.
    NvV4l2H265,
    /// Desktop NVIDIA NVENC.
    NvH265,
    /// libx265, in software.
    X265,
}

impl Encoder {
    /// In the order `auto` tries them.
    pub const PREFERENCE: [Encoder; 3] = [Encoder::NvV4l2H265, Encoder::NvH265, Encoder::X265];

    /// The GStreamer element.
    pub fn element(&self) -> &'static str {
        match self {
            Encoder::NvV4l2H265 => "nvv4l2h265enc",
            Encoder::NvH265 => "nvh265enc",
            Encoder::X265 => "x265enc",
        }
    }

    /// What provides it, for the error when it is missing.
    pub fn package(&self) -> &'static str {
        match self {
            Encoder::NvV4l2H265 => {
                "JetPack's gstreamer1.0-plugins-nvvideo4linux2 (nvidia-l4t-gstreamer); Jetson only"
            }
            Encoder::NvH265 => "gstreamer1.0-plugins-bad built with nvcodec, and an NVIDIA driver",
            Encoder::X265 => "gstreamer1.0-plugins-bad (Debian) with libx265",
        }
    }

    /// Whether its input is NVMM memory (Jetson's `nvvidconv` feeds it).
    pub fn wants_nvmm(&self) -> bool {
        matches!(self, Encoder::NvV4l2H265)
    }

    /// Other elements it cannot work without.
    pub fn companions(&self) -> &'static [&'static str] {
        match self {
            Encoder::NvV4l2H265 => &["nvvidconv"],
            Encoder::NvH265 | Encoder::X265 => &[],
        }
    }

    fn from_choice(choice: EncoderChoice) -> Option<Encoder> {
        match choice {
            EncoderChoice::Auto => None,
            EncoderChoice::NvV4l2H265Enc => Some(Encoder::NvV4l2H265),
            EncoderChoice::NvH265Enc => Some(Encoder::NvH265),
            EncoderChoice::X265Enc => Some(Encoder::X265),
        }
    }
}

/// The encoder chosen, and why (logged, and shown in the status).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// The encoder.
    pub encoder: Encoder,
    /// Why it: `auto: nvv4l2h265enc missing, nvh265enc missing, x265enc found`.
    pub reason: String,
}

/// Picks the encoder for `choice`; `has` says whether GStreamer's registry
/// has an element (`gst::ElementFactory::find`). An explicit choice that is
/// missing is an error naming what provides it, not a silent fallback.
pub fn select(choice: EncoderChoice, has: &dyn Fn(&str) -> bool) -> Result<Selection, String> {
    let usable = |e: Encoder| has(e.element()) && e.companions().iter().all(|c| has(c));
    if let Some(e) = Encoder::from_choice(choice) {
        if usable(e) {
            return Ok(Selection {
                encoder: e,
                reason: format!("{} as configured", e.element()),
            });
        }
        let missing: Vec<&str> = std::iter::once(e.element())
            .chain(e.companions().iter().copied())
            .filter(|name| !has(name))
            .collect();
        return Err(format!(
            "encoder = \"{}\" but GStreamer has no {}: install {}, or set encoder = \"auto\"",
            e.element(),
            missing.join(" or "),
            e.package()
        ));
    }
    let mut tried = Vec::new();
    for e in Encoder::PREFERENCE {
        if usable(e) {
            tried.push(format!("{} found", e.element()));
            return Ok(Selection {
                encoder: e,
                reason: format!("auto: {}", tried.join(", ")),
            });
        }
        tried.push(format!("{} missing", e.element()));
    }
    Err(format!(
        "no H.265 encoder in GStreamer ({}): install {}",
        tried.join(", "),
        Encoder::X265.package()
    ))
}

/// What the configuration asks of the encoder.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodeSettings {
    /// Target bitrate, bit/s.
    pub bitrate: u64,
    /// Constant or variable.
    pub rate_control: RateControl,
    /// Frames from one keyframe to the next (at least 1).
    pub keyframe_frames: u32,
    /// The speed preset; empty = the encoder's fastest real-time one.
    pub preset: String,
}

/// The element's properties, as gst-launch writes them (`name=value`, in
/// the order they are set).
pub fn properties(encoder: Encoder, s: &EncodeSettings) -> Vec<(&'static str, String)> {
    let kbps = s.bitrate.div_ceil(1000).max(1);
    let gop = s.keyframe_frames.max(1);
    match encoder {
        Encoder::NvV4l2H265 => vec![
            ("bitrate", s.bitrate.to_string()),
            (
                "control-rate",
                match s.rate_control {
                    RateControl::Vbr => "0",
                    RateControl::Cbr => "1",
                }
                .to_owned(),
            ),
            ("iframeinterval", gop.to_string()),
            ("idrinterval", gop.to_string()),
            ("insert-sps-pps", "true".to_owned()),
            ("maxperf-enable", "true".to_owned()),
            (
                "preset-level",
                if s.preset.is_empty() {
                    "1".to_owned()
                } else {
                    s.preset.clone()
                },
            ),
        ],
        Encoder::NvH265 => vec![
            ("bitrate", kbps.to_string()),
            ("rc-mode", s.rate_control.as_str().to_owned()),
            ("gop-size", gop.to_string()),
            (
                "preset",
                if s.preset.is_empty() {
                    "low-latency-hp".to_owned()
                } else {
                    s.preset.clone()
                },
            ),
            ("zerolatency", "true".to_owned()),
        ],
        Encoder::X265 => {
            // CBR: the VBV at the target, one second of buffer; VBR: peaks
            // up to twice the target.
            let peak = match s.rate_control {
                RateControl::Cbr => kbps,
                RateControl::Vbr => 2 * kbps,
            };
            vec![
                ("bitrate", kbps.to_string()),
                ("key-int-max", gop.to_string()),
                (
                    "speed-preset",
                    if s.preset.is_empty() {
                        "ultrafast".to_owned()
                    } else {
                        s.preset.clone()
                    },
                ),
                ("tune", "zerolatency".to_owned()),
                (
                    "option-string",
                    format!(
                        "open-gop=0:scenecut=0:min-keyint={gop}:bframes=0:repeat-headers=1:\
                         vbv-maxrate={peak}:vbv-bufsize={peak}"
                    ),
                ),
            ]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(rc: RateControl) -> EncodeSettings {
        EncodeSettings {
            bitrate: 8_000_000,
            rate_control: rc,
            keyframe_frames: 30,
            preset: String::new(),
        }
    }

    fn get<'a>(p: &'a [(&str, String)], k: &str) -> &'a str {
        p.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {k} in {p:?}"))
    }

    #[test]
    fn auto_prefers_jetson_then_desktop_then_software() {
        let all = |_: &str| true;
        let sel = select(EncoderChoice::Auto, &all).unwrap();
        assert_eq!(sel.encoder, Encoder::NvV4l2H265);
        assert_eq!(sel.reason, "auto: nvv4l2h265enc found");
        // nvv4l2h265enc without nvvidconv cannot be fed.
        let no_conv = |n: &str| n != "nvvidconv";
        let sel = select(EncoderChoice::Auto, &no_conv).unwrap();
        assert_eq!(sel.encoder, Encoder::NvH265);
        let desktop_less = |n: &str| n == "x265enc";
        let sel = select(EncoderChoice::Auto, &desktop_less).unwrap();
        assert_eq!(sel.encoder, Encoder::X265);
        assert_eq!(
            sel.reason,
            "auto: nvv4l2h265enc missing, nvh265enc missing, x265enc found"
        );
        let none = |_: &str| false;
        let err = select(EncoderChoice::Auto, &none).unwrap_err();
        assert!(err.contains("gstreamer1.0-plugins-bad"), "{err}");
    }

    #[test]
    fn an_explicit_choice_never_falls_back() {
        let x265_only = |n: &str| n == "x265enc";
        let err = select(EncoderChoice::NvV4l2H265Enc, &x265_only).unwrap_err();
        assert!(
            err.starts_with(
                "encoder = \"nvv4l2h265enc\" but GStreamer has no nvv4l2h265enc or nvvidconv"
            ),
            "{err}"
        );
        assert_eq!(
            select(EncoderChoice::X265Enc, &x265_only).unwrap().encoder,
            Encoder::X265
        );
    }

    #[test]
    fn nvv4l2h265enc_keyframes_every_interval_with_parameter_sets() {
        let p = properties(Encoder::NvV4l2H265, &settings(RateControl::Cbr));
        assert_eq!(get(&p, "bitrate"), "8000000");
        assert_eq!(get(&p, "control-rate"), "1");
        // Both intervals: idrinterval's default of 256 would leave keyframes
        // 8.5 s apart.
        assert_eq!(get(&p, "iframeinterval"), "30");
        assert_eq!(get(&p, "idrinterval"), "30");
        assert_eq!(get(&p, "insert-sps-pps"), "true");
        assert_eq!(get(&p, "maxperf-enable"), "true");
        assert_eq!(get(&p, "preset-level"), "1");
        let vbr = properties(Encoder::NvV4l2H265, &settings(RateControl::Vbr));
        assert_eq!(get(&vbr, "control-rate"), "0");
        assert!(!p.iter().any(|(n, _)| n.contains("B-Frames")));
    }

    #[test]
    fn nvh265enc_takes_kbits_and_no_latency() {
        let mut s = settings(RateControl::Vbr);
        s.bitrate = 8_000_500;
        let p = properties(Encoder::NvH265, &s);
        assert_eq!(get(&p, "bitrate"), "8001");
        assert_eq!(get(&p, "rc-mode"), "vbr");
        assert_eq!(get(&p, "gop-size"), "30");
        assert_eq!(get(&p, "preset"), "low-latency-hp");
        assert_eq!(get(&p, "zerolatency"), "true");
    }

    #[test]
    fn x265enc_closed_gop_without_scenecut() {
        let mut s = settings(RateControl::Cbr);
        s.preset = "superfast".into();
        let p = properties(Encoder::X265, &s);
        assert_eq!(get(&p, "bitrate"), "8000");
        assert_eq!(get(&p, "key-int-max"), "30");
        assert_eq!(get(&p, "speed-preset"), "superfast");
        assert_eq!(get(&p, "tune"), "zerolatency");
        let opts = get(&p, "option-string");
        for want in [
            "open-gop=0",
            "scenecut=0",
            "min-keyint=30",
            "bframes=0",
            "vbv-maxrate=8000",
            "vbv-bufsize=8000",
        ] {
            assert!(opts.split(':').any(|o| o == want), "{want} not in {opts}");
        }
        let vbr = properties(Encoder::X265, &settings(RateControl::Vbr));
        assert!(get(&vbr, "option-string").contains("vbv-maxrate=16000"));
    }
}
