//! The readers and checks of `[offload]`: the store's URL, the bucket's
//! and region's names, the key template and the vehicle id, each refused
//! with what is wrong and an example that is right.

use crate::document::{Cx, Field, Table};
use crate::schema::Result;

/// `offload.endpoint`: empty, or an `http://` or `https://` URL with a
/// host and nothing after the path.
pub(crate) fn offload_endpoint(cx: &Cx, field: &Field) -> Result<String> {
    let url = cx.string(field)?;
    if url.is_empty() {
        return Ok(String::new());
    }
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    let host = rest.map(|r| r.split(['/', '?', '#']).next().unwrap_or(""));
    let bad = match (rest, host) {
        (None, _) => Some("an object store's URL starts with https:// (or http://)"),
        (_, Some("")) | (_, None) => Some("the URL has no host"),
        (Some(r), _) if r.contains(['?', '#']) => Some("the URL has a query or a fragment"),
        (Some(r), _) if r.chars().any(|c| c.is_whitespace() || c.is_control()) => {
            Some("the URL holds white space")
        }
        _ => None,
    };
    match bad {
        Some(why) => Err(cx.at(
            field,
            format!("`{url}` is not an object store's URL: {why}"),
            Some("write e.g. \"https://s3.eu-central-1.amazonaws.com\" or \"https://minio.example:9000\"".to_owned()),
        )),
        None => Ok(url.trim_end_matches('/').to_owned()),
    }
}

/// `offload.bucket`: S3's bucket naming rules (3 to 63 lowercase letters,
/// digits, `.` and `-`, starting and ending with a letter or digit), or
/// empty.
pub(crate) fn bucket_name(cx: &Cx, field: &Field) -> Result<String> {
    let name = cx.string(field)?;
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ok = name.is_empty()
        || ((3..=63).contains(&name.len())
            && name.chars().all(|c| alnum(c) || c == '.' || c == '-')
            && name.starts_with(alnum)
            && name.ends_with(alnum)
            && !name.contains(".."));
    if !ok {
        return Err(cx.at(
            field,
            format!("`{name}` is not a bucket name"),
            Some(
                "use 3 to 63 lowercase letters, digits, `.` and `-`, starting and ending with a \
                 letter or digit (\"fleet-recordings\")"
                    .to_owned(),
            ),
        ));
    }
    Ok(name.to_owned())
}

/// `offload.region`: letters, digits and `-` (`us-east-1`), 1 to 64.
pub(crate) fn region(cx: &Cx, field: &Field) -> Result<String> {
    let region = cx.string(field)?;
    let ok = (1..=64).contains(&region.len())
        && region
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !ok {
        return Err(cx.at(
            field,
            format!("`{region}` is not a region"),
            Some("write the store's region, e.g. \"eu-central-1\"; servers without regions take \"us-east-1\"".to_owned()),
        ));
    }
    Ok(region.to_owned())
}

/// The placeholders `offload.key_template` may hold.
pub const KEY_PLACEHOLDERS: [&str; 4] = ["vehicle", "session", "file", "date"];

/// `offload.key_template`: text and the placeholders of
/// [`KEY_PLACEHOLDERS`], `{file}` among them; no empty path part, no
/// leading `/`.
pub(crate) fn key_template(cx: &Cx, field: &Field) -> Result<String> {
    let t = cx.string(field)?;
    let fail = |why: String| {
        Err(cx.at(
            field,
            why,
            Some("write e.g. \"{vehicle}/{date}/{session}/{file}\"; placeholders: {vehicle}, {session}, {file}, {date}".to_owned()),
        ))
    };
    let mut rest = t;
    let mut has_file = false;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return fail(format!("`{t}`: a `{{` without its `}}`"));
        };
        let name = &rest[open + 1..open + close];
        if !KEY_PLACEHOLDERS.contains(&name) {
            return fail(format!("`{t}`: unknown placeholder `{{{name}}}`"));
        }
        has_file |= name == "file";
        rest = &rest[open + close + 1..];
    }
    if rest.contains('}') {
        return fail(format!("`{t}`: a `}}` without its `{{`"));
    }
    if !has_file {
        return fail(format!(
            "`{t}` has no {{file}}: every file would get the same key"
        ));
    }
    if t.starts_with('/') || t.contains("//") || t.len() > 512 || t.chars().any(|c| c.is_control())
    {
        return fail(format!(
            "`{t}` is not a key: no leading `/`, no `//`, no control characters, at most 512 bytes"
        ));
    }
    Ok(t.to_owned())
}

/// `offload.vehicle_id`: letters, digits, `.`, `_` and `-`, at most 64;
/// empty for the host name.
pub(crate) fn vehicle_id(cx: &Cx, field: &Field) -> Result<String> {
    let id = cx.string(field)?;
    let ok = id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && id != "."
        && id != "..";
    if !ok {
        return Err(cx.at(
            field,
            format!("`{id}` is not a vehicle id"),
            Some("use up to 64 letters, digits, `.`, `_` and `-` (\"robot-07\"), or \"\" for the host name".to_owned()),
        ));
    }
    Ok(id.to_owned())
}

/// An `http://` endpoint only with `allow_http`.
fn offload_endpoint_scheme(cx: &Cx, table: &Table, config: &crate::OffloadConfig) -> Result<()> {
    let Some(field) = table.field("endpoint") else {
        return Ok(());
    };
    if config.endpoint.starts_with("http://") && !config.allow_http {
        return Err(cx.at(
            &field,
            "an http:// endpoint sends the recordings and the signed requests in the clear",
            Some(
                "use https://, or set offload.allow_http = true for a store on a network you trust"
                    .to_owned(),
            ),
        ));
    }
    Ok(())
}

/// The checks of `[offload]` that span keys.
pub(crate) fn check(cx: &Cx, table: &Table, config: &crate::OffloadConfig) -> Result<()> {
    offload_endpoint_scheme(cx, table, config)?;
    offload_tls_and_sse(cx, table, config)?;
    if config.upload != crate::OffloadMode::None
        && (config.endpoint.is_empty() || config.bucket.is_empty())
    {
        if let Some(field) = table.field("upload") {
            return Err(cx.at(
                &field,
                format!(
                    "offload.upload = \"{}\" needs a store to send to",
                    config.upload.as_str()
                ),
                Some(
                    "set offload.endpoint and offload.bucket, or offload.upload = \"none\""
                        .to_owned(),
                ),
            ));
        }
    }
    Ok(())
}

/// `client_cert` and `client_key` come together; a KMS key id only with
/// `sse = "aws:kms"`.
fn offload_tls_and_sse(cx: &Cx, table: &Table, config: &crate::OffloadConfig) -> Result<()> {
    let cert = !config.client_cert.as_os_str().is_empty();
    let key = !config.client_key.as_os_str().is_empty();
    if cert != key {
        let (have, missing) = if cert {
            ("client_cert", "client_key")
        } else {
            ("client_key", "client_cert")
        };
        if let Some(field) = table.field(have) {
            return Err(cx.at(
                &field,
                format!("offload.{have} is set but offload.{missing} is not"),
                Some(format!(
                    "a client certificate needs its private key: set offload.{missing} too, or \
                     neither"
                )),
            ));
        }
    }
    if !config.sse_kms_key_id.is_empty() && config.sse != crate::Sse::Kms {
        if let Some(field) = table.field("sse_kms_key_id") {
            return Err(cx.at(
                &field,
                "offload.sse_kms_key_id is only used with SSE-KMS",
                Some("set offload.sse = \"aws:kms\", or remove sse_kms_key_id".to_owned()),
            ));
        }
    }
    Ok(())
}

/// `offload.sse_kms_key_id`: a key id, alias or ARN (letters, digits and
/// `-:/_.`), at most 2048 bytes; or empty.
pub(crate) fn kms_key_id(cx: &Cx, field: &Field) -> Result<String> {
    let id = cx.string(field)?;
    let ok = id.len() <= 2048
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | ':' | '/' | '_' | '.'));
    if !ok {
        return Err(cx.at(
            field,
            format!("`{id}` is not a KMS key id"),
            Some(
                "write the key's id, alias or ARN, e.g. \"arn:aws:kms:eu-central-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab\""
                    .to_owned(),
            ),
        ));
    }
    Ok(id.to_owned())
}

/// `offload.max_rate`: bytes per second, 0 (no cap) or at least 8 KiB.
pub(crate) fn max_rate(cx: &Cx, field: &Field) -> Result<u64> {
    let rate = cx.size(field)?;
    if rate != 0 && rate < 8 * 1024 {
        return Err(cx.at(
            field,
            format!("{rate} bytes per second is too low to send a request in time"),
            Some("write at least \"8KiB\" (64 kbit/s), or 0 for no cap".to_owned()),
        ));
    }
    Ok(rate)
}

/// The most windows `offload.windows` holds.
const MAX_WINDOWS: usize = 32;

/// `offload.windows`: `"HH:MM-HH:MM"` each, at most 32.
pub(crate) fn time_windows(cx: &Cx, field: &Field) -> Result<Vec<crate::TimeWindow>> {
    let list = crate::readers::string_list(cx, field)?;
    if list.len() > MAX_WINDOWS {
        return Err(cx.at(
            field,
            format!("{} windows; at most {MAX_WINDOWS}", list.len()),
            Some("merge the windows that touch".to_owned()),
        ));
    }
    list.iter()
        .map(|w| {
            parse_window(w).ok_or_else(|| {
                cx.at(
                    field,
                    format!("`{w}` is not a time window"),
                    Some(
                        "write \"HH:MM-HH:MM\" in the vehicle's local time, e.g. \"22:00-06:00\" \
                         (spans midnight) or \"12:00-13:30\""
                            .to_owned(),
                    ),
                )
            })
        })
        .collect()
}

fn parse_window(text: &str) -> Option<crate::TimeWindow> {
    let minute = |t: &str| -> Option<u16> {
        let (h, m) = t.trim().split_once(':')?;
        if h.is_empty() || h.len() > 2 || m.len() != 2 {
            return None;
        }
        let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
        (h < 24 && m < 60).then_some(h * 60 + m)
    };
    let (a, b) = text.split_once('-')?;
    let (start, end) = (minute(a)?, minute(b)?);
    (start != end).then_some(crate::TimeWindow { start, end })
}

/// `offload.interfaces`, `offload.metered_interfaces`: network interface
/// names as the kernel takes them (1 to 15 bytes, no `/`, white space or
/// `:`; not `.` or `..`), at most 16.
pub(crate) fn interface_names(cx: &Cx, field: &Field) -> Result<Vec<String>> {
    let list = crate::readers::string_list(cx, field)?;
    if list.len() > 16 {
        return Err(cx.at(
            field,
            format!("{} interfaces; at most 16", list.len()),
            None,
        ));
    }
    for name in &list {
        let ok = (1..=15).contains(&name.len())
            && name != "."
            && name != ".."
            && name
                .chars()
                .all(|c| c.is_ascii_graphic() && c != '/' && c != ':');
        if !ok {
            return Err(cx.at(
                field,
                format!("`{name}` is not a network interface name"),
                Some(
                    "use the name `ip link` shows (1 to 15 characters, no `/`, `:` or spaces), \
                     e.g. \"wlan0\""
                        .to_owned(),
                ),
            ));
        }
    }
    Ok(list)
}
