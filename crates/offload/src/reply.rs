//! The store's replies, read from at most [`MAX_REPLY`] bytes: S3's error
//! XML `<Error><Code>…</Code><Message>…</Message>…</Error>` and what to do
//! about each code that retrying cannot fix, and the three replies the
//! uploader needs a value from (CreateMultipartUpload's `UploadId`,
//! CompleteMultipartUpload's result, ListParts' parts and next marker).
//!
//! Only a few elements' text is wanted, so they are found by their tags
//! rather than by a general XML deserializer: quick-xml 0.38's serde
//! reader panicked ("entered unreachable code") on a reply the `s3_reply`
//! fuzz target made (kept in `fuzz/finds/s3_reply` and the test below),
//! and rusty-s3's parsers refuse a reply without S3's XML namespace, which
//! some S3-compatible stores leave out (s3rver). The five predefined
//! entities and numeric character references are decoded; anything else
//! is kept as written.

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

/// Every `<tag>…</tag>` text in `xml`, in order.
fn elements<'a>(xml: &'a str, tag: &str) -> impl Iterator<Item = &'a str> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    let mut rest = xml;
    std::iter::from_fn(move || {
        let start = rest.find(&open)? + open.len();
        let len = rest[start..].find(&close)?;
        let text = &rest[start..start + len];
        rest = &rest[start + len + close.len()..];
        Some(text)
    })
}

/// The text of `<tag>` in `xml`, decoded, trimmed, without control
/// characters, at most `max` characters; `None` when absent or empty.
fn text_of(xml: &str, tag: &str, max: usize) -> Option<String> {
    let t: String = unescape(element(xml, tag)?)
        .chars()
        .filter(|c| !c.is_control())
        .take(max)
        .collect();
    let t = t.trim();
    (!t.is_empty()).then(|| t.to_owned())
}

/// CreateMultipartUpload's upload id.
pub fn upload_id(body: &str) -> Option<String> {
    element(body, "UploadId")?;
    text_of(body, "UploadId", 1024)
}

/// Whether `body` is a CompleteMultipartUpload result (its ETag).
pub fn completed(body: &str) -> Option<String> {
    if !body.contains("<CompleteMultipartUploadResult") {
        return None;
    }
    text_of(body, "ETag", 256)
}

/// One page of ListParts: part number to (ETag, size), and the marker
/// of the next page when the list is truncated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartsPage {
    /// The parts on this page.
    pub parts: std::collections::BTreeMap<u16, (String, u64)>,
    /// Where the next page starts, when there is one.
    pub next_marker: Option<u16>,
}

/// A ListParts reply; `None` when it is not one. Parts numbered outside
/// 1..=10,000 or without an ETag are left out.
pub fn parts_page(body: &str) -> Option<PartsPage> {
    if !body.contains("<ListPartsResult") {
        return None;
    }
    let mut page = PartsPage::default();
    for part in elements(body, "Part") {
        let number = text_of(part, "PartNumber", 8).and_then(|n| n.parse::<u16>().ok());
        let etag = text_of(part, "ETag", 256);
        let size = text_of(part, "Size", 24).and_then(|n| n.parse::<u64>().ok());
        if let (Some(n @ 1..=10_000), Some(etag)) = (number, etag) {
            page.parts.insert(n, (etag, size.unwrap_or(0)));
        }
    }
    let truncated = text_of(body, "IsTruncated", 8).is_some_and(|t| t == "true");
    if truncated {
        page.next_marker = text_of(body, "NextPartNumberMarker", 8).and_then(|n| n.parse().ok());
    }
    Some(page)
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

    /// As AWS S3 writes them (with its namespace) and as s3rver does
    /// (without).
    #[test]
    fn the_replies_the_uploader_reads_with_and_without_the_namespace() {
        for ns in [" xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"", ""] {
            let create = format!(
                "<?xml version=\"1.0\"?><InitiateMultipartUploadResult{ns}><Bucket>b</Bucket>\
                 <Key>k</Key><UploadId>VXBsb2FkIElE&amp;1</UploadId></InitiateMultipartUploadResult>"
            );
            assert_eq!(upload_id(&create).as_deref(), Some("VXBsb2FkIElE&1"));
            let done = format!(
                "<CompleteMultipartUploadResult{ns}><Location>l</Location><Bucket>b</Bucket>\
                 <Key>k</Key><ETag>&quot;3858f62230ac3c915f300c664312c11f-9&quot;</ETag>\
                 </CompleteMultipartUploadResult>"
            );
            assert_eq!(
                completed(&done).as_deref(),
                Some("\"3858f62230ac3c915f300c664312c11f-9\"")
            );
            let list = format!(
                "<ListPartsResult{ns}><Bucket>b</Bucket><Key>k</Key><UploadId>u</UploadId>\
                 <NextPartNumberMarker>2</NextPartNumberMarker><IsTruncated>true</IsTruncated>\
                 <Part><PartNumber>1</PartNumber><ETag>\"a\"</ETag><Size>5242880</Size></Part>\
                 <Part><PartNumber>2</PartNumber><ETag>\"b\"</ETag><Size>7</Size></Part>\
                 <Part><PartNumber>0</PartNumber><ETag>\"c\"</ETag><Size>7</Size></Part>\
                 <Part><PartNumber>3</PartNumber><Size>7</Size></Part></ListPartsResult>"
            );
            let page = parts_page(&list).unwrap();
            assert_eq!(page.next_marker, Some(2));
            assert_eq!(
                page.parts.into_iter().collect::<Vec<_>>(),
                [
                    (1, ("\"a\"".to_owned(), 5_242_880)),
                    (2, ("\"b\"".to_owned(), 7))
                ]
            );
        }
        for junk in [
            "",
            "<html>502</html>",
            "<UploadId></UploadId>",
            "<UploadId>",
        ] {
            assert_eq!(upload_id(junk), None, "{junk:?}");
            assert_eq!(completed(junk), None, "{junk:?}");
            assert_eq!(parts_page(junk), None, "{junk:?}");
        }
        let last = parts_page(
            "<ListPartsResult><IsTruncated>false</IsTruncated>\
                               <NextPartNumberMarker>9</NextPartNumberMarker></ListPartsResult>",
        )
        .unwrap();
        assert_eq!(last.next_marker, None);
    }
}
