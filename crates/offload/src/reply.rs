//! The store's error replies: S3's XML `<Error><Code>…</Code><Message>…
//! </Message>…</Error>`, read from at most [`MAX_REPLY`] bytes, and what to
//! do about each code that retrying cannot fix.
//!
//! Only the text of the first `<Code>` and `<Message>` inside `<Error>` is
//! wanted, so they are found by their tags rather than by a general XML
//! deserializer: quick-xml 0.38's serde reader panicked ("entered
//! unreachable code") on a reply the `s3_reply` fuzz target made (kept in
//! `fuzz/finds/s3_reply` and the test below). The five predefined entities
//! and numeric character references are decoded; anything else is kept as
//! written.

/// The most of a reply body that is read.
pub const MAX_REPLY: u64 = 64 << 10;

/// The text between `<tag>` and `</tag>` in `xml`, after `from`.
fn element<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let start = xml.find(&open)? + open.len();
    let len = xml[start..].find(&close)?;
    Some(&xml[start..start + len])
}

/// XML text with its entity and character references decoded.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        // A reference is short: look for its `;` in the next 12 bytes (a
        // byte search: `;` is ASCII, so the slices below fall on
        // character boundaries).
        let window = &rest.as_bytes()[..rest.len().min(12)];
        let Some(semi) = window.iter().position(|&b| b == b';') else {
            out.push('&');
            rest = &rest[1..];
            continue;
        };
        let name = &rest[1..semi];
        let c = match name {
            "lt" => Some('<'),
            "gt" => Some('>'),
            "amp" => Some('&'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => name
                .strip_prefix("#x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| name.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match c {
            Some(c) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// S3's code and message in an error reply; `None` when the body is not
/// one (empty, HTML from a proxy, garbage).
pub fn parse_error(body: &str) -> Option<(String, String)> {
    let error = element(body, "Error")?;
    let clean = |s: &str| -> String {
        unescape(s)
            .chars()
            .filter(|c| !c.is_control())
            .take(512)
            .collect::<String>()
            .trim()
            .to_owned()
    };
    let code = clean(element(error, "Code")?);
    let message = element(error, "Message").map(clean).unwrap_or_default();
    (!code.is_empty()).then_some((code, message))
}

/// What to do about an error the store answered with `status` and
/// `code`, when the answer is not "try again".
pub fn fix_for(status: u16, code: &str) -> Option<String> {
    let fix = match code {
        "InvalidAccessKeyId"
        | "SignatureDoesNotMatch"
        | "AccessDenied"
        | "InvalidToken"
        | "ExpiredToken" => {
            "check the keys in offload.credentials_file (offload.profile) or AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY, and that they may write to the bucket"
        }
        "NoSuchBucket" => "create the bucket on the store, or fix offload.bucket",
        "RequestTimeTooSkewed" => {
            "the vehicle's clock is too far from the store's: fix its time synchronisation"
        }
        "AuthorizationHeaderMalformed" | "InvalidRegion" | "IllegalLocationConstraintException" => {
            "set offload.region to the bucket's region"
        }
        "PermanentRedirect" | "TemporaryRedirect" => {
            "the bucket is at another endpoint or region: fix offload.endpoint and offload.region"
        }
        "EntityTooLarge" | "EntityTooSmall" | "InvalidPart" | "InvalidPartOrder" => {
            "the store refuses the part sizes: change offload.part_size"
        }
        "BadDigest" | "InvalidDigest" => {
            "the bytes that arrived are not the ones read: the file changed while it was sent, or \
             the link corrupted them; it is sent again next time"
        }
        "KMS.NotFoundException" | "InvalidEncryptionAlgorithmError" => {
            "the store refuses the encryption asked"
        }
        _ => match status {
            401 | 403 => "check the credentials and the bucket's policy",
            404 => "check offload.endpoint, offload.bucket and offload.addressing",
            _ => return None,
        },
    };
    Some(fix.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_errors_and_what_is_not_one() {
        let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchBucket</Code>\
                    <Message>The specified bucket does not exist</Message>\
                    <BucketName>nope</BucketName><RequestId>1</RequestId></Error>";
        assert_eq!(
            parse_error(body),
            Some((
                "NoSuchBucket".to_owned(),
                "The specified bucket does not exist".to_owned()
            ))
        );
        assert_eq!(
            parse_error("<Error><Code>SlowDown</Code></Error>"),
            Some(("SlowDown".to_owned(), String::new()))
        );
        for junk in [
            "",
            "<html><body>502 Bad Gateway</body></html>",
            "<Error>",
            "\u{0}\u{1}",
            "<Error><Code></Code></Error>",
        ] {
            assert_eq!(parse_error(junk), None, "{junk:?}");
        }
        assert!(fix_for(404, "NoSuchBucket")
            .unwrap()
            .contains("offload.bucket"));
        assert!(fix_for(403, "SignatureDoesNotMatch")
            .unwrap()
            .contains("credentials_file"));
        assert!(fix_for(403, "RequestTimeTooSkewed")
            .unwrap()
            .contains("clock"));
        assert_eq!(fix_for(503, "SlowDown"), None);
    }
}
