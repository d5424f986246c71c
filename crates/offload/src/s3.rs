//! The requests to the store: rusty-s3 builds and signs each one
//! (SigV4, as a presigned URL valid for [`SIGNED_FOR`]), ureq sends it
//! over rustls, and every reply other than 2xx becomes an
//! [`OffloadError`] that names the request, the object and the fix. A
//! request that fails for a reason that may pass (the link, a 5xx, S3's
//! `SlowDown`) is sent again after a jittered exponential backoff (to at
//! most [`MAX_BACKOFF`]) or the `Retry-After` the store asked for, until
//! [`GIVE_UP_AFTER`] has passed since its first try: a store down for
//! minutes, or a link lost in a tunnel, costs time, not the upload.

use std::io::Read;
use std::time::Duration;

use rusty_s3::actions::S3Action;
use rusty_s3::{Bucket, Credentials, UrlStyle};

use crate::credentials::Secret;
use crate::reply::{completed, fix_for, parse_error, parts_page, upload_id, MAX_REPLY};
use crate::settings::Settings;
use crate::OffloadError;

/// How long a signed request stays valid.
pub const SIGNED_FOR: Duration = Duration::from_secs(3600);

/// How long one request is tried again before its error is returned
/// (the next `edgerec upload` goes on from the journal).
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(300);

/// The first backoff; it doubles each try (with up to half of it added
/// at random), to at most [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// The longest wait between two tries.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The object metadata key that holds the file's SHA-256 (hex).
pub const SHA256_META: &str = "x-amz-meta-sha256";

/// System CA bundles, the first that exists is used when no `ca_file`
/// is set (also the fleet link's, `edgerec-remote`).
pub const SYSTEM_CAS: [&str; 3] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// What the store says of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Its size.
    pub size: u64,
    /// The SHA-256 an upload stored with it, if any.
    pub sha256: Option<String>,
    /// Its ETag, without quotes.
    pub etag: Option<String>,
}

/// A connection to one bucket.
pub struct Client {
    bucket: Bucket,
    credentials: Credentials,
    agent: ureq::Agent,
    /// The server-side encryption headers of each upload.
    sse: Vec<(&'static str, String)>,
    /// Set to stop trying again: a request that fails is not retried, and
    /// a wait before a retry ends (a recorder that is stopping).
    give_up: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The bandwidth cap every request body keeps to (`offload.max_rate`),
    /// and the bytes sent.
    pace: std::sync::Arc<crate::pace::Pace>,
}

/// A private key file (PEM) larger than this is refused unread.
const MAX_KEY_FILE: u64 = 64 << 10;

/// A certificate file (PEM: a CA bundle, a client chain) larger than this
/// is refused unread (a system bundle is about 200 KiB).
pub const MAX_CERT_FILE: u64 = 4 << 20;

/// The bytes of the certificate file `path`, at most [`MAX_CERT_FILE`]
/// (a path that names a device or a growing file cannot fill memory).
pub fn read_cert_file(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_CERT_FILE + 1)
        .read_to_end(&mut out)?;
    if out.len() as u64 > MAX_CERT_FILE {
        return Err(std::io::Error::other(format!(
            "more than {MAX_CERT_FILE} bytes: not a certificate file"
        )));
    }
    Ok(out)
}

/// The certificates in PEM text (other items are passed over).
fn pem_certificates(pem: &[u8]) -> Vec<ureq::tls::Certificate<'static>> {
    ureq::tls::parse_pem(pem)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect()
}

/// The client certificate of mutual TLS, when `client_cert` is set: its
/// chain (PEM) and its private key (PEM, owner-only).
fn client_cert(settings: &Settings) -> Result<Option<ureq::tls::ClientCert>, OffloadError> {
    if settings.client_cert.as_os_str().is_empty() {
        return Ok(None);
    }
    let pem = read_cert_file(&settings.client_cert).map_err(|e| OffloadError::Io {
        path: settings.client_cert.clone(),
        what: "read offload.client_cert",
        source: e,
    })?;
    let chain = pem_certificates(&pem);
    if chain.is_empty() {
        return Err(OffloadError::NotConfigured(format!(
            "{}: offload.client_cert holds no PEM certificate",
            settings.client_cert.display()
        )));
    }
    let key_pem = crate::credentials::read_private(
        &settings.client_key,
        "client key (offload.client_key)",
        MAX_KEY_FILE,
    )?;
    let key = ureq::tls::PrivateKey::from_pem(&key_pem).map_err(|e| {
        OffloadError::NotConfigured(format!(
            "{}: offload.client_key holds no PEM private key ({e})",
            settings.client_key.display()
        ))
    })?;
    Ok(Some(ureq::tls::ClientCert::new_with_certs(&chain, key)))
}

/// A reply read: status, the headers asked for, the body (at most
/// [`MAX_REPLY`]).
struct Reply {
    status: u16,
    etag: Option<String>,
    length: Option<u64>,
    sha256: Option<String>,
    retry_after: Option<Duration>,
    body: String,
}

/// The root certificates: `ca_file`'s, else the system bundle's, else
/// the ones built into webpki-roots.
fn root_certs(ca_file: &std::path::Path) -> Result<ureq::tls::RootCerts, OffloadError> {
    let (path, required) = if ca_file.as_os_str().is_empty() {
        match SYSTEM_CAS.iter().find(|p| std::path::Path::new(p).exists()) {
            Some(p) => (std::path::PathBuf::from(p), false),
            None => return Ok(ureq::tls::RootCerts::WebPki),
        }
    } else {
        (ca_file.to_path_buf(), true)
    };
    let pem = match read_cert_file(&path) {
        Ok(p) => p,
        Err(_) if !required => return Ok(ureq::tls::RootCerts::WebPki),
        Err(e) => {
            return Err(OffloadError::Io {
                path,
                what: "read offload.ca_file",
                source: e,
            })
        }
    };
    let certs = pem_certificates(&pem);
    if certs.is_empty() {
        if !required {
            return Ok(ureq::tls::RootCerts::WebPki);
        }
        return Err(OffloadError::NotConfigured(format!(
            "{}: offload.ca_file holds no PEM certificate",
            path.display()
        )));
    }
    Ok(ureq::tls::RootCerts::new_with_certs(&certs))
}

impl Client {
    /// A client of the store and bucket `settings` name, signing with
    /// `secret`.
    pub fn new(settings: &Settings, secret: &Secret) -> Result<Client, OffloadError> {
        let endpoint: url::Url = settings.endpoint.parse().map_err(|e| {
            OffloadError::NotConfigured(format!(
                "offload.endpoint `{}` is not a URL: {e}",
                settings.endpoint
            ))
        })?;
        let style = match settings.addressing {
            edgerec_config::Addressing::Path => UrlStyle::Path,
            edgerec_config::Addressing::Virtual => UrlStyle::VirtualHost,
        };
        let bucket = Bucket::new(
            endpoint,
            style,
            settings.bucket.clone(),
            settings.region.clone(),
        )
        .map_err(|e| {
            OffloadError::NotConfigured(format!(
                "offload: bucket `{}` at `{}` ({} addressing): {e}; path addressing works with \
                 an IP address or a name a bucket cannot prefix",
                settings.bucket,
                settings.endpoint,
                settings.addressing.as_str()
            ))
        })?;
        let credentials = match &secret.token {
            Some(t) => Credentials::new_with_token(&secret.key, &secret.secret, t),
            None => Credentials::new(&secret.key, &secret.secret),
        };
        let tls = ureq::tls::TlsConfig::builder()
            .root_certs(root_certs(&settings.ca_file)?)
            .client_cert(client_cert(settings)?)
            .build();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .https_only(settings.endpoint.starts_with("https://"))
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_resolve(Some(Duration::from_secs(10)))
            .timeout_per_read(Some(Duration::from_secs(60)))
            .timeout_per_write(Some(Duration::from_secs(60)))
            .max_redirects(0)
            .user_agent(concat!("edgerec/", env!("CARGO_PKG_VERSION")))
            .tls_config(tls)
            .build()
            .into();
        Ok(Client {
            bucket,
            credentials,
            agent,
            sse: settings.sse_headers(),
            give_up: Default::default(),
            pace: std::sync::Arc::new(crate::pace::Pace::new(settings.max_rate)),
        })
    }

    /// The bandwidth cap and the bytes sent so far, shared.
    pub fn pace(&self) -> std::sync::Arc<crate::pace::Pace> {
        self.pace.clone()
    }

    /// Sends one signed request; the reply, or the transport's error.
    fn send(
        &self,
        method: &str,
        url: &url::Url,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<Reply, (String, bool)> {
        let url = url.as_str();
        let resp = if method == "PUT" || method == "POST" {
            let mut rb = if method == "PUT" {
                self.agent.put(url)
            } else {
                self.agent.post(url)
            };
            for (k, v) in headers {
                rb = rb.header(*k, *v);
            }
            // Handed to the connection piece by piece, at the cap.
            let body = body.unwrap_or(&[]);
            let mut paced = self.pace.reader(body);
            rb.header("content-length", body.len().to_string())
                .send(ureq::SendBody::from_reader(&mut paced))
        } else {
            let mut rb = match method {
                "HEAD" => self.agent.head(url),
                "DELETE" => self.agent.delete(url),
                _ => self.agent.get(url),
            };
            for (k, v) in headers {
                rb = rb.header(*k, *v);
            }
            rb.call()
        }
        .map_err(|e| (e.to_string(), is_tls_failure(&e)))?;
        let header = |k: &str| {
            resp.headers()
                .get(k)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let status = resp.status().as_u16();
        let etag = header("etag");
        let length = header("content-length").and_then(|v| v.parse().ok());
        let sha256 = header(SHA256_META);
        let retry_after = header("retry-after")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|s| Duration::from_secs(s.min(300)));
        let mut body = String::new();
        if method != "HEAD" {
            let mut resp = resp;
            let _ = resp
                .body_mut()
                .as_reader()
                .take(MAX_REPLY)
                .read_to_string(&mut body);
        }
        Ok(Reply {
            status,
            etag,
            length,
            sha256,
            retry_after,
            body,
        })
    }

    /// `send` with retries; a 2xx reply, or the error of the last try.
    fn call(
        &self,
        op: &str,
        key: &str,
        make: &dyn Fn() -> (url::Url, Vec<(String, String)>),
        method: &str,
        body: Option<&[u8]>,
        ok_statuses: &[u16],
    ) -> Result<Reply, OffloadError> {
        let mut wait = FIRST_BACKOFF;
        let mut attempt = 0;
        let first = std::time::Instant::now();
        loop {
            attempt += 1;
            let (url, headers) = make();
            let hs: Vec<(&str, &str)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let (err, asked) = match self.send(method, &url, &hs, body) {
                Ok(r) if (200..300).contains(&r.status) || ok_statuses.contains(&r.status) => {
                    return Ok(r)
                }
                Ok(r) => {
                    let (code, message) = parse_error(&r.body).unwrap_or_else(|| {
                        let what = excerpt(&r.body);
                        let message = if r.body.trim().is_empty() {
                            what
                        } else {
                            format!("a reply that is not S3's error XML: {what}")
                        };
                        ("-".to_owned(), message)
                    });
                    (
                        OffloadError::Refused {
                            op: op.to_owned(),
                            key: key.to_owned(),
                            status: r.status,
                            fix: fix_for(r.status, &code),
                            code,
                            message,
                        },
                        r.retry_after,
                    )
                }
                Err((message, true)) => (
                    OffloadError::Tls {
                        op: op.to_owned(),
                        key: key.to_owned(),
                        message,
                    },
                    None,
                ),
                Err((message, false)) => (
                    OffloadError::Transport {
                        op: op.to_owned(),
                        key: key.to_owned(),
                        message,
                    },
                    None,
                ),
            };
            let pause = asked.unwrap_or_else(|| jitter(wait));
            if !err.is_transient() || first.elapsed() + pause > GIVE_UP_AFTER || self.gave_up() {
                return Err(err);
            }
            tracing::warn!(
                "{err}; trying again in {:.1} s (try {})",
                pause.as_secs_f64(),
                attempt + 1
            );
            let resume = std::time::Instant::now() + pause;
            while std::time::Instant::now() < resume {
                if self.gave_up() {
                    return Err(err);
                }
                std::thread::sleep(
                    resume
                        .saturating_duration_since(std::time::Instant::now())
                        .min(Duration::from_millis(100)),
                );
            }
            wait = (wait * 2).min(MAX_BACKOFF);
        }
    }

    /// A flag that, once set, stops this client trying requests again
    /// (the request in flight still ends by itself, within its timeouts).
    pub fn give_up_flag(&self) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        self.give_up.clone()
    }

    fn gave_up(&self) -> bool {
        self.give_up.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What the store holds at `key`; `None` when nothing.
    pub fn head(&self, key: &str) -> Result<Option<ObjectInfo>, OffloadError> {
        let make = || {
            let a = self.bucket.head_object(Some(&self.credentials), key);
            (a.sign(SIGNED_FOR), Vec::new())
        };
        let r = self.call("HEAD", key, &make, "HEAD", None, &[404])?;
        if r.status == 404 {
            return Ok(None);
        }
        Ok(Some(ObjectInfo {
            size: r.length.unwrap_or(0),
            sha256: r.sha256,
            etag: r.etag.map(|e| e.trim_matches('"').to_owned()),
        }))
    }

    /// One PUT of the whole object, with its Content-MD5 (base64, of the
    /// bytes the caller read before: the store refuses the body if it is
    /// not what was hashed), its SHA-256 and the server-side encryption
    /// asked.
    pub fn put(
        &self,
        key: &str,
        body: &[u8],
        md5: &str,
        sha256: Option<&str>,
    ) -> Result<String, OffloadError> {
        let make = || {
            let mut a = self.bucket.put_object(Some(&self.credentials), key);
            let mut headers = vec![("content-md5".to_owned(), md5.to_owned())];
            if let Some(sha) = sha256 {
                headers.push((SHA256_META.to_owned(), sha.to_owned()));
            }
            headers.extend(self.sse.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
            for (k, v) in &headers {
                a.headers_mut().insert(k.clone(), v.clone());
            }
            (a.sign(SIGNED_FOR), headers)
        };
        let r = self.call("PUT", key, &make, "PUT", Some(body), &[])?;
        Ok(r.etag.unwrap_or_default())
    }

    /// Starts a multipart upload (with the server-side encryption asked);
    /// its id.
    pub fn create_multipart(&self, key: &str) -> Result<String, OffloadError> {
        // Signed here rather than by rusty-s3's action, which asks for
        // `?uploads=1`: S3 takes that, but servers that route by S3's own
        // model (moto, and some gateways) want `?uploads` with no value.
        let make = || {
            let c = &self.credentials;
            // Sorted by name, as the signature wants them.
            let mut headers: Vec<(&str, &str)> =
                self.sse.iter().map(|(k, v)| (*k, v.as_str())).collect();
            headers.sort_unstable();
            let url = rusty_s3::signing::sign(
                &jiff::Timestamp::now(),
                rusty_s3::Method::Post,
                self.bucket.object_url(key),
                c.key(),
                c.secret(),
                c.token(),
                self.bucket.region(),
                SIGNED_FOR.as_secs(),
                [("uploads", "")].into_iter(),
                headers.iter().copied(),
            );
            let headers = headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            (url, headers)
        };
        let r = self.call("CreateMultipartUpload", key, &make, "POST", None, &[])?;
        upload_id(&r.body).ok_or_else(|| OffloadError::BadReply {
            op: "CreateMultipartUpload".to_owned(),
            key: key.to_owned(),
            message: format!("no upload id in it: {}", excerpt(&r.body)),
        })
    }

    /// Sends part `number` (from 1); its ETag.
    pub fn upload_part(
        &self,
        key: &str,
        upload_id: &str,
        number: u16,
        body: &[u8],
        md5: &str,
    ) -> Result<String, OffloadError> {
        let op = format!("UploadPart {number}");
        let make = || {
            let mut a = self
                .bucket
                .upload_part(Some(&self.credentials), key, number, upload_id);
            a.headers_mut().insert("content-md5", md5.to_owned());
            (
                a.sign(SIGNED_FOR),
                vec![("content-md5".to_owned(), md5.to_owned())],
            )
        };
        let r = self.call(&op, key, &make, "PUT", Some(body), &[])?;
        r.etag.ok_or_else(|| OffloadError::BadReply {
            op,
            key: key.to_owned(),
            message: "no ETag header".to_owned(),
        })
    }

    /// Completes the upload from its parts' ETags, in part order.
    pub fn complete(
        &self,
        key: &str,
        upload_id: &str,
        etags: &[String],
    ) -> Result<(), OffloadError> {
        let body = self
            .bucket
            .complete_multipart_upload(
                Some(&self.credentials),
                key,
                upload_id,
                etags.iter().map(String::as_str),
            )
            .body();
        let make = || {
            let a = self.bucket.complete_multipart_upload(
                Some(&self.credentials),
                key,
                upload_id,
                etags.iter().map(String::as_str),
            );
            (a.sign(SIGNED_FOR), Vec::new())
        };
        let r = self.call(
            "CompleteMultipartUpload",
            key,
            &make,
            "POST",
            Some(body.as_bytes()),
            &[],
        )?;
        // S3 may answer 200 and still fail: the body says which.
        if let Some((code, message)) = parse_error(&r.body) {
            return Err(OffloadError::Refused {
                op: "CompleteMultipartUpload".to_owned(),
                key: key.to_owned(),
                status: r.status,
                fix: fix_for(r.status, &code),
                code,
                message,
            });
        }
        completed(&r.body)
            .map(|_| ())
            .ok_or_else(|| OffloadError::BadReply {
                op: "CompleteMultipartUpload".to_owned(),
                key: key.to_owned(),
                message: format!("not a CompleteMultipartUploadResult: {}", excerpt(&r.body)),
            })
    }

    /// The parts the store holds of an upload: number to (ETag, size).
    pub fn list_parts(
        &self,
        key: &str,
        upload_id: &str,
    ) -> Result<std::collections::BTreeMap<u16, (String, u64)>, OffloadError> {
        let mut out = std::collections::BTreeMap::new();
        let mut marker: Option<u16> = None;
        // At most 10,000 parts, 1,000 a page.
        for _ in 0..11 {
            let make = || {
                let mut a = self
                    .bucket
                    .list_parts(Some(&self.credentials), key, upload_id);
                if let Some(m) = marker {
                    a.set_part_number_marker(m);
                }
                (a.sign(SIGNED_FOR), Vec::new())
            };
            let r = self.call("ListParts", key, &make, "GET", None, &[])?;
            let page = parts_page(&r.body).ok_or_else(|| OffloadError::BadReply {
                op: "ListParts".to_owned(),
                key: key.to_owned(),
                message: format!("not a ListPartsResult: {}", excerpt(&r.body)),
            })?;
            out.extend(page.parts);
            match page.next_marker {
                Some(m) if Some(m) != marker => marker = Some(m),
                _ => return Ok(out),
            }
        }
        Ok(out)
    }

    /// Abandons the upload (the store lets its parts go).
    pub fn abort(&self, key: &str, upload_id: &str) -> Result<(), OffloadError> {
        let make = || {
            let a = self
                .bucket
                .abort_multipart_upload(Some(&self.credentials), key, upload_id);
            (a.sign(SIGNED_FOR), Vec::new())
        };
        self.call("AbortMultipartUpload", key, &make, "DELETE", None, &[404])
            .map(|_| ())
    }
}

/// The start of a reply body, for an error message.
fn excerpt(body: &str) -> String {
    if body.trim().is_empty() {
        return "(no body)".to_owned();
    }
    format!("{:?}", body.chars().take(120).collect::<String>())
}

/// Whether `e` is the TLS handshake failing (the store's certificate not
/// trusted, the store refusing ours): a setting to fix, not a link that
/// may come back. ureq passes rustls's handshake errors inside an I/O
/// error, so its text is what tells them apart.
fn is_tls_failure(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::Rustls(_) | ureq::Error::Tls(_) | ureq::Error::Pem(_) => true,
        ureq::Error::Io(io) => {
            let text = io.to_string();
            text.contains("peer certificate")
                || text.contains("fatal alert")
                || text.contains("peer sent no certificates")
        }
        _ => false,
    }
}

/// `base` plus up to half of it, at random (a cheap generator: the clock's
/// nanoseconds; the point is only that vehicles do not retry in step).
fn jitter(base: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    base + base.mul_f64(f64::from(nanos % 1000) / 2000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_and_jitter() {
        // RFC 1864's digest of "" and S3's documented example form.
        assert_eq!(
            crate::upload::Digests::of(b"").content_md5(0),
            "1B2M2Y8AsgTpgAmY7PhCfg=="
        );
        for _ in 0..100 {
            let j = jitter(Duration::from_secs(2));
            assert!(
                j >= Duration::from_secs(2) && j <= Duration::from_secs(3),
                "{j:?}"
            );
        }
    }
}
