//! The store's error replies: S3's XML `<Error><Code>…</Code><Message>…
//! </Message>…</Error>`, read with quick-xml from at most [`MAX_REPLY`]
//! bytes, and what to do about each code that retrying cannot fix.

use serde::Deserialize;

/// The most of a reply body that is read.
pub const MAX_REPLY: u64 = 64 << 10;

#[derive(Debug, Deserialize)]
struct ErrorXml {
    #[serde(rename = "Code")]
    code: String,
    #[serde(rename = "Message", default)]
    message: String,
}

/// S3's code and message in an error reply; `None` when the body is not
/// one (empty, HTML from a proxy, garbage).
pub fn parse_error(body: &str) -> Option<(String, String)> {
    let e: ErrorXml = quick_xml::de::from_str(body).ok()?;
    let clean = |s: &str| -> String {
        s.chars()
            .filter(|c| !c.is_control())
            .take(512)
            .collect::<String>()
            .trim()
            .to_owned()
    };
    let code = clean(&e.code);
    (!code.is_empty()).then(|| (code, clean(&e.message)))
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
