//! Object keys: `offload.key_template` with `{vehicle}`, `{session}` (the
//! bag directory's name), `{file}` and `{date}` (the session's UTC date,
//! `YYYY-MM-DD`) filled in. The template was checked when the
//! configuration was read (`{file}` is in it, every placeholder known).

/// What fills a template's placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyParts<'a> {
    /// This vehicle's name.
    pub vehicle: &'a str,
    /// The bag directory's name (the file's own name without its
    /// extension for a file given alone).
    pub session: &'a str,
    /// The file's name.
    pub file: &'a str,
    /// The session's UTC date, `YYYY-MM-DD`.
    pub date: &'a str,
}

/// The key of `parts` under `template`.
///
/// ```
/// use edgerec_offload::key::{object_key, KeyParts};
/// let parts = KeyParts { vehicle: "robot-7", session: "demo_20261206T101500Z", file: "demo_20261206T101500Z_0.mcap", date: "2026-12-06" };
/// assert_eq!(
///     object_key("{vehicle}/{date}/{session}/{file}", &parts),
///     "robot-7/2026-12-06/demo_20261206T101500Z/demo_20261206T101500Z_0.mcap"
/// );
/// ```
pub fn object_key(template: &str, parts: &KeyParts) -> String {
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        match &rest[open + 1..open + close] {
            "vehicle" => out.push_str(parts.vehicle),
            "session" => out.push_str(parts.session),
            "file" => out.push_str(parts.file),
            "date" => out.push_str(parts.date),
            other => {
                out.push('{');
                out.push_str(other);
                out.push('}');
            }
        }
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    out
}

/// The UTC date a session started, from its name
/// (`<prefix>_YYYYMMDDTHHMMSSZ`, as edgerec and rosbag2 name them); `None`
/// when the name holds no such stamp.
pub fn date_from_session(name: &str) -> Option<String> {
    let stamp = name
        .rsplit('_')
        .find(|p| p.len() >= 9 && p.as_bytes()[8] == b'T')?;
    let d = &stamp[..8];
    if !d.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (y, m, day) = (&d[..4], &d[4..6], &d[6..8]);
    let (mi, di): (u32, u32) = (m.parse().ok()?, day.parse().ok()?);
    ((1..=12).contains(&mi) && (1..=31).contains(&di)).then(|| format!("{y}-{m}-{day}"))
}

/// The UTC date of `secs` since the Unix epoch, `YYYY-MM-DD` (the civil
/// calendar, as `date -u +%F`).
pub fn date_from_unix(secs: i64) -> String {
    // Howard Hinnant's days-to-civil.
    let z = secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(date_from_unix(0), "1970-01-01");
        assert_eq!(date_from_unix(951_782_400), "2000-02-29");
        assert_eq!(date_from_unix(1_796_580_374), "2026-12-06");
        assert_eq!(date_from_unix(-86_400), "1969-12-31");
        assert_eq!(
            date_from_session("demo_20261206T101500Z").as_deref(),
            Some("2026-12-06")
        );
        assert_eq!(date_from_session("rosbag2_2026_12_06-10_15_00"), None);
        assert_eq!(date_from_session("x_20261340T000000Z"), None);
    }

    #[test]
    fn every_placeholder() {
        let p = KeyParts {
            vehicle: "v",
            session: "s",
            file: "f.mcap",
            date: "2026-01-02",
        };
        assert_eq!(object_key("{file}", &p), "f.mcap");
        assert_eq!(
            object_key("fleet/{vehicle}-{date}/{session}/{file}", &p),
            "fleet/v-2026-01-02/s/f.mcap"
        );
    }
}
