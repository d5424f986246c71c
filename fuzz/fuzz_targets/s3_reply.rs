//! What an object store answers, and the credentials file: S3's error XML
//! (`edgerec_offload::reply::parse_error`), the replies the uploader reads
//! a value from (`upload_id`, `completed`, `parts_page`), the AWS
//! shared-credentials file
//! (`edgerec_offload::credentials::parse`, rust-ini) and the upload
//! journal (`edgerec_offload::journal::parse`, serde_json lines) and the
//! ledger of what was sent (`edgerec_offload::ledger::parse`). Any bytes
//! give a value or an error, never a panic; an error code is never empty,
//! holds no control character and is at most 512 characters; an upload
//! id is never empty and holds no control character; listed parts are
//! numbered 1 to 10,000 with an ETag; accepted
//! credentials have a key and a secret; a journal's parts are numbered 1
//! to 10,000 with an ETag; a ledger's entries are absolute paths, and
//! entries plus lines left out never exceed its lines.
#![no_main]

use edgerec_offload::{credentials, journal, ledger, reply};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (entries, dropped) = ledger::parse(data);
    assert!(entries.iter().all(|(p, _)| p.is_absolute()));
    assert!(entries.len() + dropped <= data.split(|b| *b == b'\n').count());
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Some((code, message)) = reply::parse_error(text) {
        assert!(!code.is_empty() && code.chars().count() <= 512, "{code:?}");
        assert!(!code.chars().any(char::is_control), "{code:?}");
        assert!(!message.chars().any(char::is_control), "{message:?}");
    }
    if let Some(id) = reply::upload_id(text) {
        assert!(!id.is_empty() && !id.chars().any(char::is_control), "{id:?}");
    }
    let _ = reply::completed(text);
    if let Some(page) = reply::parts_page(text) {
        for (n, (etag, _)) in &page.parts {
            assert!((1..=10_000).contains(n) && !etag.is_empty());
        }
    }
    if let Ok(s) = credentials::parse(text, "default", std::path::Path::new("fuzz")) {
        assert!(!s.key.is_empty() && !s.secret.is_empty());
    }
    if let Some(r) = journal::parse(text) {
        assert_eq!(r.header.v, 1);
        for (n, p) in &r.parts {
            assert!((1..=10_000).contains(n) && *n == p.part && !p.etag.is_empty());
        }
    }
});
