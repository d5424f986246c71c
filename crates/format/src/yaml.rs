//! YAML text written by libyaml's emitter (`unsafe-libyaml-norway`, the
//! Rust translation of libyaml that serde_norway is built on; PyYAML's C
//! extension is libyaml too): [`to_string`] builds a libyaml document from
//! a small tree and lets libyaml write it, escapes included. The one
//! choice made here is each string's style: plain only when no YAML 1.1 or
//! 1.2 reader can take it for anything but that string ([`plain_safe`]),
//! double-quoted otherwise, which libyaml escapes for every reader (control
//! characters, C1, the Unicode line breaks U+0085/U+2028/U+2029, a BOM).
//!
//! serde_norway's serializer is not used for writing because it picks the
//! style by YAML 1.2's rules alone: it writes `yes`, `on` or `2001-12-14`
//! plain, which PyYAML (YAML 1.1, what ROS's Python tools read with) takes
//! for a boolean or a date.

use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::ptr;

use unsafe_libyaml_norway as unsafe_yaml;

/// A node of the document to write.
#[derive(Debug, Clone, PartialEq)]
pub enum Yaml<'a> {
    /// A string, written as itself whatever it holds.
    Str(&'a str),
    /// An unsigned integer.
    UInt(u64),
    /// A signed integer.
    Int(i64),
    /// A floating-point number (`.nan`, `.inf`, `-.inf` as YAML spells them).
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
    /// `~`.
    Null,
    /// A sequence (`[]` when empty).
    Seq(Vec<Yaml<'a>>),
    /// A mapping, its keys in this order.
    Map(Vec<(&'a str, Yaml<'a>)>),
}

/// Why a document could not be written.
#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    /// A string longer than libyaml takes (2 GiB).
    #[error("a string of {0} bytes is longer than YAML can be written with (2 GiB)")]
    TooLong(usize),
    /// libyaml refused (out of memory, or a problem it names).
    #[error("libyaml could not write the document: {0}")]
    Libyaml(String),
}

impl<'a> Yaml<'a> {
    /// The tree of a parsed YAML value (strings, numbers, booleans, null,
    /// sequences, mappings with string keys; other keys and tags are left
    /// out).
    pub fn from_value(v: &'a serde_norway::Value) -> Yaml<'a> {
        use serde_norway::Value;
        match v {
            Value::Null => Yaml::Null,
            Value::Bool(b) => Yaml::Bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
                (Some(u), _, _) => Yaml::UInt(u),
                (_, Some(i), _) => Yaml::Int(i),
                (_, _, Some(f)) => Yaml::Float(f),
                _ => Yaml::Null,
            },
            Value::String(s) => Yaml::Str(s),
            Value::Sequence(items) => Yaml::Seq(items.iter().map(Yaml::from_value).collect()),
            Value::Mapping(m) => Yaml::Map(
                m.iter()
                    .filter_map(|(k, v)| Some((k.as_str()?, Yaml::from_value(v))))
                    .collect(),
            ),
            Value::Tagged(t) => Yaml::from_value(&t.value),
        }
    }
}

/// Whether `s` can be written as a plain scalar that YAML 1.1 and 1.2
/// readers both read back as this string: `[A-Za-z0-9_./-]`, not starting
/// with a digit, `.` or `-` (numbers, dates, `.inf`, `-` items) and none
/// of YAML 1.1's boolean and null words. Everything else is quoted.
pub fn plain_safe(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "y", "n", "yes", "no", "true", "false", "on", "off", "null", "~",
    ];
    let Some(first) = s.chars().next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || first == '_' || first == '/')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-'))
        && !WORDS.iter().any(|w| w.eq_ignore_ascii_case(s))
}

/// The document as YAML text (no `---`, block style, no line folding).
pub fn to_string(root: &Yaml) -> Result<String, YamlError> {
    let mut doc = MaybeUninit::<unsafe_yaml::yaml_document_t>::uninit();
    let doc_ptr = doc.as_mut_ptr();
    // SAFETY: `doc_ptr` points at writable memory for a yaml_document_t,
    // which yaml_document_initialize fills in; no version or tag
    // directives; implicit start and end (no `---`, no `...`).
    let init = unsafe {
        unsafe_yaml::yaml_document_initialize(
            doc_ptr,
            ptr::null_mut(),
            ptr::null_mut(),
            ptr::null_mut(),
            true,
            true,
        )
    };
    if init.fail {
        return Err(YamlError::Libyaml("no memory for a document".into()));
    }
    if let Err(e) = add_node(doc_ptr, root) {
        // SAFETY: the document was initialized above and is not used again.
        unsafe { unsafe_yaml::yaml_document_delete(doc_ptr) };
        return Err(e);
    }

    let mut out: Vec<u8> = Vec::with_capacity(4096);
    let mut emitter = MaybeUninit::<unsafe_yaml::yaml_emitter_t>::uninit();
    let em = emitter.as_mut_ptr();
    // SAFETY: `em` points at writable memory for a yaml_emitter_t, which
    // yaml_emitter_initialize fills in.
    if unsafe { unsafe_yaml::yaml_emitter_initialize(em) }.fail {
        // SAFETY: the document was initialized and is not used again.
        unsafe { unsafe_yaml::yaml_document_delete(doc_ptr) };
        return Err(YamlError::Libyaml("no memory for an emitter".into()));
    }
    // SAFETY: `em` is initialized. The output handler gets `&mut out` as
    // its data; `out` outlives the emitter, which is deleted below before
    // `out` is read, and nothing else touches `out` meanwhile.
    let result = unsafe {
        unsafe_yaml::yaml_emitter_set_unicode(em, true);
        unsafe_yaml::yaml_emitter_set_width(em, -1);
        unsafe_yaml::yaml_emitter_set_output(em, write_handler, ptr::addr_of_mut!(out).cast());
        let ok = unsafe_yaml::yaml_emitter_open(em).ok
            // Dumping deletes the document, written or not.
            && unsafe_yaml::yaml_emitter_dump(em, doc_ptr).ok
            && unsafe_yaml::yaml_emitter_close(em).ok
            && unsafe_yaml::yaml_emitter_flush(em).ok;
        let result = if ok {
            Ok(())
        } else {
            Err(YamlError::Libyaml(problem(em)))
        };
        unsafe_yaml::yaml_emitter_delete(em);
        result
    };
    result?;
    String::from_utf8(out).map_err(|e| YamlError::Libyaml(format!("wrote invalid UTF-8: {e}")))
}

/// The emitter's own description of its error.
///
/// # Safety
/// `em` is an initialized emitter.
unsafe fn problem(em: *mut unsafe_yaml::yaml_emitter_t) -> String {
    // SAFETY: the caller's promise; `problem` is null or a static
    // NUL-terminated string of libyaml's.
    unsafe {
        let p = (&*em).problem;
        if p.is_null() {
            "unknown error".into()
        } else {
            std::ffi::CStr::from_ptr(p.cast())
                .to_string_lossy()
                .into_owned()
        }
    }
}

/// libyaml's output callback: appends to the `Vec<u8>` in `data`.
///
/// # Safety
/// `data` is the `*mut Vec<u8>` given to yaml_emitter_set_output, and
/// `buffer` holds `size` bytes (libyaml's promise).
unsafe fn write_handler(data: *mut c_void, buffer: *mut u8, size: u64) -> i32 {
    let Ok(size) = usize::try_from(size) else {
        return 0;
    };
    // SAFETY: see the function's contract.
    unsafe {
        let out = &mut *data.cast::<Vec<u8>>();
        out.extend_from_slice(std::slice::from_raw_parts(buffer, size));
    }
    1
}

fn scalar(
    doc: *mut unsafe_yaml::yaml_document_t,
    value: &str,
    plain: bool,
) -> Result<i32, YamlError> {
    let len = i32::try_from(value.len()).map_err(|_| YamlError::TooLong(value.len()))?;
    let style = if plain {
        unsafe_yaml::YAML_PLAIN_SCALAR_STYLE
    } else {
        unsafe_yaml::YAML_DOUBLE_QUOTED_SCALAR_STYLE
    };
    // SAFETY: `doc` is an initialized document; libyaml copies `len`
    // bytes of `value` (valid UTF-8, as it requires); a null tag is the
    // default (string) tag, written implicitly.
    let id = unsafe {
        unsafe_yaml::yaml_document_add_scalar(doc, ptr::null(), value.as_ptr(), len, style)
    };
    if id == 0 {
        return Err(YamlError::Libyaml(format!(
            "refused a scalar of {} bytes",
            value.len()
        )));
    }
    Ok(id)
}

/// Adds `node` (and what it holds) to `doc`; returns its node id.
fn add_node(doc: *mut unsafe_yaml::yaml_document_t, node: &Yaml) -> Result<i32, YamlError> {
    match node {
        Yaml::Str(s) => scalar(doc, s, plain_safe(s)),
        // Plain, untagged: read as an integer, or null, by every reader.
        Yaml::UInt(n) => scalar(doc, &n.to_string(), true),
        Yaml::Int(n) => scalar(doc, &n.to_string(), true),
        Yaml::Float(f) => {
            let text = if f.is_nan() {
                ".nan".to_string()
            } else if f.is_infinite() {
                if *f > 0.0 { ".inf" } else { "-.inf" }.to_string()
            } else if f.fract() == 0.0 && f.abs() < 1e15 {
                // `2.0`, not `2`, so it stays a float.
                format!("{f:.1}")
            } else {
                format!("{f:?}")
            };
            scalar(doc, &text, true)
        }
        Yaml::Bool(b) => scalar(doc, if *b { "true" } else { "false" }, true),
        Yaml::Null => scalar(doc, "~", true),
        Yaml::Seq(items) => {
            // SAFETY: `doc` is an initialized document; null tag = default.
            let seq = unsafe {
                unsafe_yaml::yaml_document_add_sequence(
                    doc,
                    ptr::null(),
                    unsafe_yaml::YAML_BLOCK_SEQUENCE_STYLE,
                )
            };
            if seq == 0 {
                return Err(YamlError::Libyaml("refused a sequence".into()));
            }
            for item in items {
                let id = add_node(doc, item)?;
                // SAFETY: `seq` and `id` are nodes of `doc`.
                if unsafe { unsafe_yaml::yaml_document_append_sequence_item(doc, seq, id) }.fail {
                    return Err(YamlError::Libyaml("refused a sequence item".into()));
                }
            }
            Ok(seq)
        }
        Yaml::Map(pairs) => {
            // SAFETY: `doc` is an initialized document; null tag = default.
            let map = unsafe {
                unsafe_yaml::yaml_document_add_mapping(
                    doc,
                    ptr::null(),
                    unsafe_yaml::YAML_BLOCK_MAPPING_STYLE,
                )
            };
            if map == 0 {
                return Err(YamlError::Libyaml("refused a mapping".into()));
            }
            for (k, v) in pairs {
                let key = scalar(doc, k, plain_safe(k))?;
                let value = add_node(doc, v)?;
                // SAFETY: `map`, `key` and `value` are nodes of `doc`.
                if unsafe { unsafe_yaml::yaml_document_append_mapping_pair(doc, map, key, value) }
                    .fail
                {
                    return Err(YamlError::Libyaml("refused a mapping pair".into()));
                }
            }
            Ok(map)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_is_written_in_block_style_with_plain_and_quoted_strings() {
        let doc = Yaml::Map(vec![
            ("version", Yaml::UInt(5)),
            ("name", Yaml::Str("/imu")),
            ("yes_word", Yaml::Str("yes")),
            ("date", Yaml::Str("2001-12-14")),
            ("empty", Yaml::Seq(vec![])),
            ("none", Yaml::Null),
            (
                "items",
                Yaml::Seq(vec![Yaml::Map(vec![("path", Yaml::Str("a_0.mcap"))])]),
            ),
        ]);
        let text = to_string(&doc).unwrap();
        assert_eq!(
            text,
            "version: 5\nname: /imu\nyes_word: \"yes\"\ndate: \"2001-12-14\"\nempty: []\nnone: ~\nitems:\n- path: a_0.mcap\n"
        );
    }

    #[test]
    fn plain_only_where_no_reader_can_mistake_it() {
        for s in [
            "/imu",
            "sensor_msgs/msg/Imu",
            "a_0.mcap",
            "cdr",
            "mcap",
            "jazzy",
        ] {
            assert!(plain_safe(s), "{s}");
        }
        for s in [
            "",
            "yes",
            "No",
            "ON",
            "y",
            "~",
            "null",
            "1",
            "2001-12-14",
            "-a",
            ".inf",
            "a b",
            "a:b",
            "é",
            "0x1f",
            "1_000",
        ] {
            assert!(!plain_safe(s), "{s}");
        }
    }

    #[test]
    fn any_string_reads_back_with_serde_norway() {
        let cases = [
            "a\nb",
            "trailing\n",
            " lead",
            "q\"uote'",
            "\u{0}\u{7}\u{1b}\u{7f}\u{85}\u{2028}\u{feff}\u{80}",
            "tab\there",
            "ünïcödé ✓ 🚗",
        ];
        for s in cases {
            let text = to_string(&Yaml::Map(vec![("k", Yaml::Str(s))])).unwrap();
            let v: serde_norway::Value = serde_norway::from_str(&text).unwrap();
            assert_eq!(v["k"].as_str(), Some(s), "{text}");
        }
    }
}
