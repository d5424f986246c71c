//! The store's credentials: the AWS shared-credentials file named by
//! `offload.credentials_file` (its `[profile]`: `aws_access_key_id`,
//! `aws_secret_access_key`, optionally `aws_session_token`), which must be
//! readable by its owner only, or, when that file does not exist,
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`
//! from the environment. Nothing else is asked: no instance metadata
//! service, no other file.

use std::path::{Path, PathBuf};

use crate::OffloadError;

/// A credentials file larger than this is refused unread.
pub const MAX_FILE: u64 = 64 << 10;

/// An access key and its secret (and session token).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    /// The access key id.
    pub key: String,
    /// The secret access key.
    pub secret: String,
    /// A session token, for temporary credentials.
    pub token: Option<String>,
    /// Where they came from (the file, or `the environment`), for
    /// messages.
    pub origin: String,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("key", &self.key)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

/// The credentials of `profile` in `file`, or from the environment when
/// `file` does not exist.
pub fn load(file: &Path, profile: &str) -> Result<Secret, OffloadError> {
    match std::fs::symlink_metadata(file) {
        Ok(_) => from_file(file, profile),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => from_env(file),
        Err(e) => Err(OffloadError::Io {
            path: file.to_path_buf(),
            what: "read the credentials file's metadata",
            source: e,
        }),
    }
}

fn refuse(path: &Path, message: impl Into<String>) -> OffloadError {
    OffloadError::Credentials {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

fn from_file(path: &Path, profile: &str) -> Result<Secret, OffloadError> {
    let bytes = read_private(path, "credentials file", MAX_FILE)?;
    let text = String::from_utf8(bytes).map_err(|_| refuse(path, "not UTF-8 text"))?;
    parse(&text, profile, path)
}

/// The bytes of a file that holds a secret (`what`: the credentials
/// file, the client key), refused unread unless it is a regular file (not
/// a symbolic link), readable by its owner only and at most `max` bytes.
/// Opened once and checked through that descriptor, so what is checked is
/// what is read.
pub fn read_private(path: &Path, what: &str, max: u64) -> Result<Vec<u8>, OffloadError> {
    use std::io::Read as _;
    let f = crate::platform::open_private(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidInput {
            refuse(
                path,
                format!("the {what} is a symbolic link: name the file itself"),
            )
        } else {
            OffloadError::Io {
                path: path.to_path_buf(),
                what: "open",
                source: e,
            }
        }
    })?;
    let meta = f.metadata().map_err(|e| OffloadError::Io {
        path: path.to_path_buf(),
        what: "read the metadata of",
        source: e,
    })?;
    if !meta.is_file() {
        return Err(refuse(path, format!("the {what} is not a regular file")));
    }
    if let Some(mode) = crate::platform::readable_by_others(&meta) {
        return Err(refuse(
            path,
            format!(
                "readable by others (mode {mode:04o}): the secret in the {what} must be the \
                 owner's alone; run `chmod 600 {}`",
                path.display()
            ),
        ));
    }
    if meta.len() > max {
        return Err(refuse(
            path,
            format!("{} bytes: not a {what} (at most {max})", meta.len()),
        ));
    }
    let mut out = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut out)
        .map_err(|e| OffloadError::Io {
            path: path.to_path_buf(),
            what: "read",
            source: e,
        })?;
    if out.len() as u64 > max {
        return Err(refuse(path, format!("grew past {max} bytes while read")));
    }
    Ok(out)
}

/// The credentials of `profile` in the text of a shared-credentials file
/// read from `path`.
pub fn parse(text: &str, profile: &str, path: &Path) -> Result<Secret, OffloadError> {
    let ini = ini::Ini::load_from_str_noescape(text).map_err(|e| {
        refuse(
            path,
            format!("not in the AWS shared-credentials format: {e}"),
        )
    })?;
    let Some(section) = ini.section(Some(profile)) else {
        return Err(refuse(
            path,
            format!(
                "no [{profile}] profile; add one, or set offload.profile to the one that holds \
                 the store's keys"
            ),
        ));
    };
    let get = |k: &str| {
        section
            .get(k)
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let (Some(key), Some(secret)) = (get("aws_access_key_id"), get("aws_secret_access_key")) else {
        return Err(refuse(
            path,
            format!("[{profile}] needs aws_access_key_id and aws_secret_access_key"),
        ));
    };
    Ok(Secret {
        key,
        secret,
        token: get("aws_session_token"),
        origin: path.display().to_string(),
    })
}

fn from_env(file: &Path) -> Result<Secret, OffloadError> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
        (Some(key), Some(secret)) => Ok(Secret {
            key,
            secret,
            token: var("AWS_SESSION_TOKEN"),
            origin: "the environment".to_owned(),
        }),
        _ => Err(OffloadError::Credentials {
            path: PathBuf::from(file),
            message: "no such file, and AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not \
                      both set: write the store's keys there (AWS shared-credentials format, \
                      mode 600), or set offload.credentials_file"
                .to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn reads_a_profile_and_refuses_what_others_can_read() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("creds");
        std::fs::write(
            &f,
            "[default]\naws_access_key_id = AKIA1\naws_secret_access_key = s/e+c\\ret\n\n\
             [fleet]\naws_access_key_id=AKIA2\naws_secret_access_key=x\naws_session_token=t\n",
        )
        .unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        let s = load(&f, "default").unwrap();
        assert_eq!((s.key.as_str(), s.secret.as_str()), ("AKIA1", "s/e+c\\ret"));
        assert_eq!(s.token, None);
        let s = load(&f, "fleet").unwrap();
        assert_eq!(s.token.as_deref(), Some("t"));
        // The secret never shows in Debug.
        assert!(!format!("{s:?}").contains("\"x\""));
        let e = load(&f, "other").unwrap_err().to_string();
        assert!(e.contains("no [other] profile"), "{e}");

        for mode in [0o640, 0o604, 0o644] {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = load(&f, "default").unwrap_err().to_string();
            assert!(
                e.contains("readable by others") && e.contains("chmod 600"),
                "{e}"
            );
        }
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(&f, "[default]\naws_access_key_id = A\n").unwrap();
        let e = load(&f, "default").unwrap_err().to_string();
        assert!(
            e.contains("needs aws_access_key_id and aws_secret_access_key"),
            "{e}"
        );
        std::fs::write(&f, "[default\n").unwrap();
        let e = load(&f, "default").unwrap_err().to_string();
        assert!(e.contains("shared-credentials format"), "{e}");
    }
}
