//! A camera's `pipeline`: a gst-launch fragment accepted only when it is
//! one chain of allowed elements, one source and then filters, each linked
//! by `!`, every property and caps field from a list and every value
//! checked. gst-launch can name any element GStreamer has (`filesink`,
//! `udpsink`, `tcpserversrc`, a `tee` to a second chain), so the text of a
//! config file is never handed to it: the camera is built from the chain
//! this module parsed, written out again ([`SourceChain::describe`]).
//!
//! Parsing needs no GStreamer, so `edgerec check` refuses a bad fragment
//! with the column of the refused part, the reason and the fix.

use std::fmt;

/// Longest fragment, in bytes.
pub const MAX_BYTES: usize = 4096;
/// Most elements (caps included) in one fragment.
pub const MAX_ELEMENTS: usize = 32;
/// Most properties on one element.
pub const MAX_PROPERTIES: usize = 16;
/// Longest property value, in bytes.
pub const MAX_VALUE: usize = 64;

/// Why a fragment is refused: the byte offset of the refused part (from 0),
/// what is wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainError {
    /// Byte offset of the refused part in the fragment.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
    /// How to fix it.
    pub hint: Option<String>,
}

impl fmt::Display for ChainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at byte {}: {}", self.offset + 1, self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

impl std::error::Error for ChainError {}

fn refuse(offset: usize, message: impl Into<String>, hint: Option<&str>) -> ChainError {
    ChainError {
        offset,
        message: message.into(),
        hint: hint.map(str::to_owned),
    }
}

/// What an element may be in the chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The first element: makes the pictures.
    Source,
    /// Any later element: takes pictures and gives pictures.
    Filter,
}

/// What a property's value may be.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// An integer in a range.
    Int(i64, i64),
    /// A number (integer or decimal) in a range.
    Number(f64, f64),
    /// `true` or `false`.
    Bool,
    /// One of the given words.
    Choice(&'static [&'static str]),
    /// Letters, digits, `-` and `_`, at most 32.
    Word,
    /// Two numbers, quoted: `"34000 358733000"`.
    Range,
    /// A V4L2 capture node.
    Device,
    /// Caps, checked as a caps element is.
    Caps,
}

/// One allowed element: its name, role and the properties it may set.
struct Element {
    name: &'static str,
    role: Role,
    properties: &'static [(&'static str, Kind)],
}

const CROP: [(&str, Kind); 4] = [
    ("left", Kind::Int(0, 8192)),
    ("right", Kind::Int(0, 8192)),
    ("top", Kind::Int(0, 8192)),
    ("bottom", Kind::Int(0, 8192)),
];

const I32: Kind = Kind::Int(i32::MIN as i64, i32::MAX as i64);

/// The allowed elements. Every one reads a camera or works on frames in
/// memory; none writes a file, opens a socket or starts a second chain.
const ELEMENTS: &[Element] = &[
    Element {
        name: "v4l2src",
        role: Role::Source,
        properties: &[
            ("device", Kind::Device),
            (
                "io-mode",
                Kind::Choice(&[
                    "auto",
                    "rw",
                    "mmap",
                    "userptr",
                    "dmabuf",
                    "dmabuf-import",
                    "0",
                    "1",
                    "2",
                    "3",
                    "4",
                    "5",
                ]),
            ),
            ("do-timestamp", Kind::Bool),
            ("brightness", I32),
            ("contrast", I32),
            ("saturation", I32),
            ("hue", I32),
        ],
    },
    Element {
        name: "nvarguscamerasrc",
        role: Role::Source,
        properties: &[
            ("sensor-id", Kind::Int(0, 15)),
            ("sensor-mode", Kind::Int(-1, 31)),
            ("wbmode", Kind::Int(0, 9)),
            ("exposuretimerange", Kind::Range),
            ("gainrange", Kind::Range),
            ("ispdigitalgainrange", Kind::Range),
            ("exposurecompensation", Kind::Number(-2.0, 2.0)),
            ("aelock", Kind::Bool),
            ("awblock", Kind::Bool),
            ("aeantibanding", Kind::Int(0, 3)),
            ("tnr-mode", Kind::Int(0, 2)),
            ("tnr-strength", Kind::Number(-1.0, 1.0)),
            ("ee-mode", Kind::Int(0, 2)),
            ("ee-strength", Kind::Number(-1.0, 1.0)),
            ("saturation", Kind::Number(0.0, 2.0)),
            ("do-timestamp", Kind::Bool),
        ],
    },
    Element {
        name: "videotestsrc",
        role: Role::Source,
        properties: &[
            ("pattern", Kind::Word),
            ("is-live", Kind::Bool),
            ("foreground-color", Kind::Int(0, u32::MAX as i64)),
            ("background-color", Kind::Int(0, u32::MAX as i64)),
            ("horizontal-speed", I32),
            ("animation-mode", Kind::Word),
            ("motion", Kind::Word),
            ("flip", Kind::Bool),
        ],
    },
    Element {
        name: "nvvidconv",
        role: Role::Filter,
        properties: &[
            ("flip-method", Kind::Int(0, 7)),
            ("interpolation-method", Kind::Int(0, 6)),
            ("left", Kind::Int(0, 8192)),
            ("right", Kind::Int(0, 8192)),
            ("top", Kind::Int(0, 8192)),
            ("bottom", Kind::Int(0, 8192)),
        ],
    },
    Element {
        name: "videoconvert",
        role: Role::Filter,
        properties: &[],
    },
    Element {
        name: "jpegdec",
        role: Role::Filter,
        properties: &[],
    },
    Element {
        name: "videoscale",
        role: Role::Filter,
        properties: &[("method", Kind::Word), ("add-borders", Kind::Bool)],
    },
    Element {
        name: "videorate",
        role: Role::Filter,
        properties: &[("drop-only", Kind::Bool), ("max-rate", Kind::Int(1, 1000))],
    },
    Element {
        name: "videoflip",
        role: Role::Filter,
        properties: &[("method", Kind::Word), ("video-direction", Kind::Word)],
    },
    Element {
        name: "videocrop",
        role: Role::Filter,
        properties: &CROP,
    },
    Element {
        name: "capsfilter",
        role: Role::Filter,
        properties: &[("caps", Kind::Caps)],
    },
    Element {
        name: "queue",
        role: Role::Filter,
        properties: &[
            ("max-size-buffers", Kind::Int(1, 64)),
            ("max-size-bytes", Kind::Int(1, 64 << 20)),
            ("max-size-time", Kind::Int(1, 2_000_000_000)),
            (
                "leaky",
                Kind::Choice(&["no", "upstream", "downstream", "0", "1", "2"]),
            ),
        ],
    },
    Element {
        name: "identity",
        role: Role::Filter,
        properties: &[
            ("sleep-time", Kind::Int(0, 10_000_000)),
            ("error-after", I32),
        ],
    },
];

/// Media types a caps element may name.
const MEDIA: &[&str] = &["video/x-raw", "image/jpeg"];
/// Fields a caps element may set.
const CAPS_FIELDS: &[&str] = &[
    "format",
    "width",
    "height",
    "framerate",
    "pixel-aspect-ratio",
    "interlace-mode",
    "colorimetry",
    "chroma-site",
];
/// Type annotations a caps value may carry: `width=(int)640`.
const CAPS_TYPES: &[&str] = &["(int)", "(fraction)", "(string)"];

/// The names of the allowed elements with their role, for documentation
/// and for checking the list of plugins a chain needs.
pub fn allowed_elements() -> impl Iterator<Item = (&'static str, Role)> {
    ELEMENTS.iter().map(|e| (e.name, e.role))
}

/// One element of a parsed chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// An element with its properties, each value as given (unquoted).
    Element {
        /// The element's factory name.
        name: &'static str,
        /// `(property, value)` in the order given.
        properties: Vec<(&'static str, String)>,
    },
    /// A caps element: `video/x-raw,format=NV12,width=1280`.
    Caps(String),
}

/// An accepted fragment: one source and its filters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceChain {
    links: Vec<Link>,
}

impl SourceChain {
    /// The elements, source first.
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// The factory names of the chain's elements (caps excluded).
    pub fn element_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.links.iter().filter_map(|link| match link {
            Link::Element { name, .. } => Some(*name),
            Link::Caps(_) => None,
        })
    }

    /// The chain written out again as gst-launch text: what the camera is
    /// built from.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .links
            .iter()
            .map(|link| match link {
                Link::Caps(caps) => caps.clone(),
                Link::Element { name, properties } => {
                    let mut s = (*name).to_owned();
                    for (key, value) in properties {
                        s.push(' ');
                        s.push_str(key);
                        s.push('=');
                        s.push_str(&quote(value));
                    }
                    s
                }
            })
            .collect();
        parts.join(" ! ")
    }
}

/// A value quoted for gst-launch when it needs it. Values that reach here
/// have no quote or backslash (the parser refuses them), but the escape is
/// kept for every other caller.
pub fn quote(value: &str) -> String {
    if !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:".contains(c))
    {
        value.to_owned()
    } else {
        format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

/// One word of the fragment and where it starts.
struct Word<'a> {
    offset: usize,
    text: &'a str,
}

/// Splits the fragment into words and `!` links. A quote may only enclose
/// a whole property value (`key="a b"`); everything else is one word of
/// non-space characters.
fn words(text: &str) -> Result<Vec<Word<'_>>, ChainError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'!' {
            out.push(Word {
                offset: i,
                text: &text[i..i + 1],
            });
            i += 1;
            continue;
        }
        let start = i;
        let mut quoted = false;
        while i < bytes.len() {
            let c = bytes[i];
            if c == b'"' {
                // Only right after `=`, and closed before the next space.
                if quoted || i == start || bytes[i - 1] != b'=' {
                    return Err(refuse(
                        i,
                        "a quote may only enclose a whole property value",
                        Some("write key=\"value\""),
                    ));
                }
                let close = text[i + 1..].find('"').map(|n| i + 1 + n).ok_or_else(|| {
                    refuse(i, "the quote is not closed", Some("close it with `\"`"))
                })?;
                i = close + 1;
                quoted = true;
                if i < bytes.len() && !bytes[i].is_ascii_whitespace() && bytes[i] != b'!' {
                    return Err(refuse(
                        i,
                        "a quoted value must end its word",
                        Some("put a space after the closing quote"),
                    ));
                }
                continue;
            }
            if c.is_ascii_whitespace() || c == b'!' {
                break;
            }
            i += 1;
        }
        out.push(Word {
            offset: start,
            text: &text[start..i],
        });
    }
    Ok(out)
}

/// Parses and checks a fragment: one chain of allowed elements.
pub fn parse(text: &str) -> Result<SourceChain, ChainError> {
    if text.len() > MAX_BYTES {
        return Err(refuse(
            MAX_BYTES,
            format!("the pipeline is {} bytes, over {MAX_BYTES}", text.len()),
            Some("a camera's source chain is a few elements"),
        ));
    }
    if let Some(bad) = text
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_graphic() || *c == ' ' || *c == '\t' || *c == '\n'))
    {
        return Err(refuse(
            bad.0,
            format!("{:?} is not allowed in a pipeline", bad.1),
            Some("use ASCII letters, digits and punctuation"),
        ));
    }
    if let Some(at) = text.find('\\') {
        return Err(refuse(
            at,
            "a `\\` escape is not allowed",
            Some("no value needs one: caps and properties are plain words"),
        ));
    }
    let words = words(text)?;
    let mut groups: Vec<Vec<Word>> = vec![Vec::new()];
    let mut last_link = None;
    for word in words {
        if word.text == "!" {
            if groups.last().is_some_and(Vec::is_empty) {
                return Err(refuse(
                    word.offset,
                    "`!` must link two elements",
                    Some("remove the `!` or put an element before it"),
                ));
            }
            last_link = Some(word.offset);
            groups.push(Vec::new());
        } else if let Some(group) = groups.last_mut() {
            group.push(word);
        }
    }
    if groups.last().is_some_and(Vec::is_empty) {
        return Err(match last_link {
            Some(at) => refuse(
                at,
                "the pipeline ends in `!`",
                Some("remove it: the recorder links its own converter after the chain"),
            ),
            None => refuse(
                0,
                "the pipeline is empty",
                Some("write a source, e.g. \"v4l2src device=/dev/video2\""),
            ),
        });
    }
    if groups.len() > MAX_ELEMENTS {
        return Err(refuse(
            groups[MAX_ELEMENTS][0].offset,
            format!("over {MAX_ELEMENTS} elements"),
            None,
        ));
    }
    let mut links = Vec::with_capacity(groups.len());
    for (index, group) in groups.iter().enumerate() {
        links.push(link(index, group)?);
    }
    Ok(SourceChain { links })
}

/// One `!`-separated part: a caps word or an element and its properties.
fn link(index: usize, group: &[Word]) -> Result<Link, ChainError> {
    let head = &group[0];
    let is_caps = head
        .text
        .split([',', '='])
        .next()
        .is_some_and(|media| media.contains('/'));
    if is_caps {
        if index == 0 {
            return Err(refuse(
                head.offset,
                "the pipeline starts with caps, not a source",
                Some("start with v4l2src, nvarguscamerasrc or videotestsrc"),
            ));
        }
        if let Some(extra) = group.get(1) {
            return Err(refuse(
                extra.offset,
                "caps are one word: a space in caps (or a second element without `!`) is refused",
                Some("write the caps without spaces, e.g. video/x-raw,format=NV12,width=1280"),
            ));
        }
        return caps(head.offset, head.text).map(Link::Caps);
    }
    let element = ELEMENTS
        .iter()
        .find(|e| e.name == head.text)
        .ok_or_else(|| not_allowed(head))?;
    match (index, element.role) {
        (0, Role::Filter) => {
            return Err(refuse(
                head.offset,
                format!(
                    "`{}` is a filter, and the chain must start with a source",
                    element.name
                ),
                Some("start with v4l2src, nvarguscamerasrc or videotestsrc"),
            ))
        }
        (i, Role::Source) if i > 0 => {
            return Err(refuse(
                head.offset,
                format!(
                    "`{}` is a source, and a chain has one source, first",
                    element.name
                ),
                Some("one camera is one chain: give the second source its own [[camera]]"),
            ))
        }
        _ => {}
    }
    if group.len() - 1 > MAX_PROPERTIES {
        return Err(refuse(
            group[MAX_PROPERTIES + 1].offset,
            format!("over {MAX_PROPERTIES} properties on `{}`", element.name),
            None,
        ));
    }
    let mut properties = Vec::with_capacity(group.len() - 1);
    for word in &group[1..] {
        properties.push(property(element, word)?);
    }
    Ok(Link::Element {
        name: element.name,
        properties,
    })
}

fn not_allowed(word: &Word) -> ChainError {
    let name = word.text;
    let (message, hint) = if name.contains('=') {
        (
            format!("`{name}` is a property with no element before it"),
            "put it after its element, e.g. v4l2src device=/dev/video2",
        )
    } else if name.ends_with("sink") {
        (
            format!("`{name}` is a sink; a camera's pipeline is a source of pictures and the recorder adds its own sink"),
            "remove it and everything after it",
        )
    } else if matches!(
        name,
        "tee" | "queue2" | "multiqueue" | "funnel" | "input-selector" | "output-selector"
    ) {
        (
            format!("`{name}` would branch or join chains; a camera's pipeline is one chain"),
            "remove it",
        )
    } else {
        (
            format!("the element `{name}` is not allowed in a camera's pipeline (files, sockets and other elements are refused)"),
            "use v4l2src, nvarguscamerasrc or videotestsrc and the filters videoconvert, videoscale, videorate, videoflip, videocrop, nvvidconv, jpegdec, capsfilter, queue, identity",
        )
    };
    refuse(word.offset, message, Some(hint))
}

/// One `key=value` of an element.
fn property(element: &Element, word: &Word) -> Result<(&'static str, String), ChainError> {
    let Some((key, raw)) = word.text.split_once('=') else {
        return Err(refuse(
            word.offset,
            format!(
                "`{}` follows `{}` without `!`: two elements not linked start a second chain",
                word.text, element.name
            ),
            Some("link them with `!`, or write it as key=value if it is a property"),
        ));
    };
    let value_at = word.offset + key.len() + 1;
    if key == "name" {
        return Err(refuse(
            word.offset,
            "a property `name` is refused: a named element can be linked to a second chain",
            Some("remove name=..."),
        ));
    }
    if key.contains("location") {
        return Err(refuse(
            word.offset,
            format!("`{key}` names a file or address, which a camera's pipeline may not"),
            Some("remove it"),
        ));
    }
    if key == "num-buffers" {
        return Err(refuse(
            word.offset,
            "num-buffers is refused: a source that ends would end the camera's recording while the recorder looks healthy",
            Some("remove it"),
        ));
    }
    let Some(&(key, kind)) = element.properties.iter().find(|(k, _)| *k == key) else {
        let allowed: Vec<&str> = element.properties.iter().map(|(k, _)| *k).collect();
        let hint = if allowed.is_empty() {
            format!("`{}` takes no properties here", element.name)
        } else {
            format!("`{}` may set {}", element.name, allowed.join(", "))
        };
        return Err(ChainError {
            offset: word.offset,
            message: format!("the property `{key}` is not allowed on `{}`", element.name),
            hint: Some(hint),
        });
    };
    let value = raw
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(raw);
    if value.len() > MAX_VALUE {
        return Err(refuse(
            value_at,
            format!(
                "the value of `{key}` is {} bytes, over {MAX_VALUE}",
                value.len()
            ),
            None,
        ));
    }
    check_value(key, kind, value).map_err(|(message, hint)| ChainError {
        offset: value_at,
        message,
        hint,
    })?;
    let value = if matches!(kind, Kind::Caps) {
        caps(value_at, value)?
    } else {
        value.to_owned()
    };
    Ok((key, value))
}

type ValueError = (String, Option<String>);

fn check_value(key: &str, kind: Kind, value: &str) -> Result<(), ValueError> {
    match kind {
        Kind::Int(low, high) => match value.parse::<i64>() {
            Ok(n) if (low..=high).contains(&n) => Ok(()),
            _ => Err((
                format!("`{key}` must be an integer from {low} to {high}, got `{value}`"),
                None,
            )),
        },
        Kind::Number(low, high) => match value.parse::<f64>() {
            Ok(n) if n >= low && n <= high => Ok(()),
            _ => Err((
                format!("`{key}` must be a number from {low} to {high}, got `{value}`"),
                None,
            )),
        },
        Kind::Bool => match value {
            "true" | "false" => Ok(()),
            _ => Err((
                format!("`{key}` must be true or false, got `{value}`"),
                None,
            )),
        },
        Kind::Choice(words) => {
            if words.contains(&value) {
                Ok(())
            } else {
                Err((
                    format!("`{key}` must be one of {}, got `{value}`", words.join(", ")),
                    None,
                ))
            }
        }
        Kind::Word => check_word(value).map_err(|m| (format!("`{key}`: {m}"), None)),
        Kind::Range => {
            let parts: Vec<&str> = value.split(' ').collect();
            if parts.len() == 2
                && parts
                    .iter()
                    .all(|p| p.parse::<f64>().is_ok_and(f64::is_finite))
            {
                Ok(())
            } else {
                Err((
                    format!("`{key}` must be two numbers, got `{value}`"),
                    Some(format!("write {key}=\"LOW HIGH\"")),
                ))
            }
        }
        Kind::Device => check_video_device(value).map_err(|m| (m, None)),
        // Checked by `caps` with its offset.
        Kind::Caps => Ok(()),
    }
}

/// Letters, digits, `-` and `_`, 1 to 32: a value put into gst-launch text
/// as one word.
pub fn check_word(value: &str) -> Result<(), String> {
    if value.is_empty() || value.len() > 32 {
        return Err(format!("`{value}` must be 1 to 32 characters"));
    }
    match value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        Some(bad) => Err(format!(
            "`{value}` contains `{bad}`; use letters, digits, `-` and `_`"
        )),
        None => Ok(()),
    }
}

/// A V4L2 capture node: `/dev/videoN`, or a link under `/dev/v4l/by-id/`
/// or `/dev/v4l/by-path/` (names udev makes from the device).
pub fn check_video_device(value: &str) -> Result<(), String> {
    let ok = if let Some(n) = value.strip_prefix("/dev/video") {
        !n.is_empty() && n.len() <= 3 && n.bytes().all(|b| b.is_ascii_digit())
    } else if let Some(name) = value
        .strip_prefix("/dev/v4l/by-id/")
        .or_else(|| value.strip_prefix("/dev/v4l/by-path/"))
    {
        !name.is_empty()
            && name.len() <= 128
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
    } else {
        false
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{value}` is not a V4L2 capture node: write /dev/videoN, /dev/v4l/by-id/NAME or /dev/v4l/by-path/NAME"
        ))
    }
}

/// Checks a caps word: `video/x-raw[(memory:NVMM)]` or `image/jpeg`, then
/// `,field=value` from the list. Returns it as given.
fn caps(offset: usize, text: &str) -> Result<String, ChainError> {
    let mut fields = text.split(',');
    let media = fields.next().unwrap_or("");
    let base = media.strip_suffix("(memory:NVMM)").unwrap_or(media);
    if !MEDIA.contains(&base) || (base != media && base != "video/x-raw") {
        return Err(refuse(
            offset,
            format!("caps `{media}` are not allowed"),
            Some("use video/x-raw, video/x-raw(memory:NVMM) or image/jpeg"),
        ));
    }
    for field in fields {
        let Some((key, value)) = field.split_once('=') else {
            return Err(refuse(
                offset,
                format!("caps field `{field}` has no value"),
                Some("write field=value"),
            ));
        };
        if !CAPS_FIELDS.contains(&key) {
            return Err(refuse(
                offset,
                format!("caps field `{key}` is not allowed"),
                Some(&format!("use {}", CAPS_FIELDS.join(", "))),
            ));
        }
        let value = CAPS_TYPES
            .iter()
            .find_map(|t| value.strip_prefix(t))
            .unwrap_or(value);
        if value.is_empty()
            || value.len() > MAX_VALUE
            || !value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-/.:".contains(c))
        {
            return Err(refuse(
                offset,
                format!("caps value `{value}` of `{key}` is not allowed"),
                Some("use letters, digits and _-/.: (at most 64)"),
            ));
        }
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> ChainError {
        match parse(text) {
            Ok(chain) => panic!("accepted {text:?} as {:?}", chain.describe()),
            Err(e) => e,
        }
    }

    #[test]
    fn one_chain_is_accepted_and_written_out_again() {
        let chain = parse(
            " v4l2src device=/dev/video2 io-mode=mmap ! videoflip method=rotate-180 !\n \
             video/x-raw,format=YUY2,width=(int)1280 ! queue max-size-buffers=4 leaky=downstream ",
        )
        .unwrap();
        assert_eq!(
            chain.describe(),
            "v4l2src device=/dev/video2 io-mode=mmap ! videoflip method=rotate-180 ! \
             video/x-raw,format=YUY2,width=(int)1280 ! queue max-size-buffers=4 leaky=downstream"
        );
        assert_eq!(
            chain.element_names().collect::<Vec<_>>(),
            ["v4l2src", "videoflip", "queue"]
        );
        let argus =
            parse("nvarguscamerasrc sensor-id=1 gainrange=\"1 16\" ! nvvidconv flip-method=2")
                .unwrap();
        assert_eq!(
            argus.describe(),
            "nvarguscamerasrc sensor-id=1 gainrange=\"1 16\" ! nvvidconv flip-method=2"
        );
    }

    #[test]
    fn sinks_files_sockets_and_other_elements_are_refused() {
        for (text, element) in [
            ("videotestsrc ! filesink", "filesink"),
            ("filesrc ! jpegdec", "filesrc"),
            ("udpsrc port=5000 ! jpegdec", "udpsrc"),
            ("videotestsrc ! tee ! videoconvert", "tee"),
            ("appsrc ! videoconvert", "appsrc"),
            ("videotestsrc ! tcpserversink", "tcpserversink"),
        ] {
            let e = refused(text);
            assert!(e.message.contains(element), "{text}: {e}");
            assert_eq!(&text[e.offset..e.offset + element.len()], element, "{text}");
        }
        assert!(refused("videotestsrc ! filesink location=/etc/x")
            .message
            .contains("sink"));
    }

    #[test]
    fn two_chains_are_refused() {
        let e = refused("videotestsrc videotestsrc");
        assert!(e.message.contains("second chain"), "{e}");
        assert_eq!(e.offset, 13);
        let e = refused("videotestsrc ! videotestsrc");
        assert!(e.message.contains("one source"), "{e}");
        assert!(refused("videotestsrc name=a ! videoconvert")
            .message
            .contains("name"));
        assert!(refused("videoconvert")
            .message
            .contains("start with a source"));
        assert!(refused("video/x-raw ! videoconvert")
            .message
            .contains("caps"));
    }

    #[test]
    fn links_properties_and_values_are_checked() {
        assert!(refused("! videotestsrc").message.contains("link two"));
        assert!(refused("videotestsrc !").message.contains("ends in"));
        assert!(refused("videotestsrc ! ! videoconvert")
            .message
            .contains("link two"));
        assert!(refused("").message.contains("empty"));
        assert!(refused("videotestsrc num-buffers=10")
            .message
            .contains("num-buffers"));
        assert!(refused("v4l2src device=/etc/passwd")
            .message
            .contains("V4L2"));
        assert!(refused("v4l2src device=/dev/video0/../sda")
            .message
            .contains("V4L2"));
        assert!(refused("videotestsrc pattern=\"a ! filesink\"")
            .message
            .contains("pattern"));
        assert!(refused("videotestsrc pattern=a\\ b")
            .message
            .contains("escape"));
        assert!(refused("videotestsrc pat\"tern\"=x")
            .message
            .contains("quote"));
        assert!(refused("videotestsrc pattern=\"x")
            .message
            .contains("not closed"));
        assert!(refused("videotestsrc pattern=\"x\"y")
            .message
            .contains("end its word"));
        assert!(refused("videotestsrc dump=true")
            .message
            .contains("not allowed"));
        assert!(refused("videotestsrc ! identity dump=true")
            .message
            .contains("dump"));
        assert!(refused("videotestsrc ! queue max-size-buffers=0")
            .message
            .contains("1 to 64"));
        assert!(refused("videotestsrc ! queue max-size-bytes=0")
            .message
            .contains("integer"));
        assert!(refused("videotestsrc ! queue leaky=3")
            .message
            .contains("one of"));
        assert!(refused("videotestsrc ! video/x-h264")
            .message
            .contains("caps"));
        assert!(refused("videotestsrc ! video/x-raw,foo=1")
            .message
            .contains("foo"));
        assert!(refused("videotestsrc ! video/x-raw, width=1")
            .message
            .contains("one word"));
        assert!(
            refused("videotestsrc ! capsfilter caps=\"video/x-raw,width=1 ! x\"")
                .message
                .contains("caps value")
        );
        assert!(refused("videotestsrc ! image/jpeg(memory:NVMM)")
            .message
            .contains("caps"));
        assert!(refused("videotestsrc ! videoconvert location=x")
            .message
            .contains("location"));
        assert!(refused("videotestsrc é").message.contains("not allowed"));
        assert!(refused(&"videotestsrc ! ".repeat(400))
            .message
            .contains("bytes"));
        assert!(
            refused(&format!("videotestsrc{}", " ! videoconvert".repeat(32)))
                .message
                .contains("elements")
        );
        assert!(
            refused(&format!("videotestsrc{}", " is-live=true".repeat(17)))
                .message
                .contains("properties")
        );
        assert!(refused(&format!("videotestsrc pattern={}", "a".repeat(65)))
            .message
            .contains("bytes"));
    }

    #[test]
    fn words_and_devices() {
        assert!(check_word("smpte").is_ok());
        assert!(check_word("rotate-180").is_ok());
        assert!(check_word("a b").is_err());
        assert!(check_word("").is_err());
        assert!(check_video_device("/dev/video12").is_ok());
        assert!(check_video_device("/dev/v4l/by-id/usb-046d_C920-video-index0").is_ok());
        assert!(check_video_device("/dev/v4l/by-path/../../sda").is_err());
        assert!(check_video_device("/dev/video").is_err());
        assert!(check_video_device("/dev/sda").is_err());
    }

    #[test]
    fn every_allowed_element_is_listed_once() {
        let mut names: Vec<&str> = allowed_elements().map(|(n, _)| n).collect();
        let all = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all);
    }
}
