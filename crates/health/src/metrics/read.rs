//! Reading the one-value text files of sysfs and procfs. A file that cannot
//! be read or parsed yields `None` and a debug line, never a panic: sensors
//! come and go (a power-gated engine, an offline thermal zone) and a metric
//! that is missing for one tick is better than a recorder that stops.

use std::fs;
use std::path::{Path, PathBuf};

use tracing::debug;

/// The file's text without trailing whitespace or NUL bytes (device-tree
/// properties under `of_node/` end with a NUL).
pub(crate) fn read_text(path: &Path) -> Option<String> {
    match fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            Some(
                text.trim_matches(|c: char| c == '\0' || c.is_whitespace())
                    .to_string(),
            )
        }
        Err(e) => {
            debug!("cannot read {}: {e}", path.display());
            None
        }
    }
}

/// The file's content as one integer (sysfs load, temp, temp1_input).
pub(crate) fn read_i64(path: &Path) -> Option<i64> {
    let text = read_text(path)?;
    match text.parse::<i64>() {
        Ok(v) => Some(v),
        Err(e) => {
            debug!(
                "skipping {}: {text:?} is not an integer ({e})",
                path.display()
            );
            None
        }
    }
}

/// The entries of `dir` whose name starts with `prefix`, in natural order
/// (`thermal_zone2` before `thermal_zone10`). A missing directory is empty.
pub(crate) fn entries(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(read) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = read
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect();
    found.sort_by_key(|p| natural_key(p));
    found
}

/// Sort key: the name without its trailing digits, then those digits as a
/// number.
fn natural_key(path: &Path) -> (String, u64, String) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let number = name[stem.len()..].parse().unwrap_or(0);
    (stem.to_string(), number, name.clone())
}

/// The path with symlinks resolved, for origins that name the real device
/// (`/sys/devices/platform/17000000.ga10b/load` rather than the class link);
/// the path as given when it cannot be resolved.
pub(crate) fn display_path(path: &Path) -> String {
    fs::canonicalize(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_device_tree_strings_and_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let name = dir.path().join("name");
        fs::write(&name, b"ga10b\0").unwrap();
        assert_eq!(read_text(&name).as_deref(), Some("ga10b"));
        let load = dir.path().join("load");
        fs::write(&load, "537\n").unwrap();
        assert_eq!(read_i64(&load), Some(537));
        fs::write(&load, "n/a\n").unwrap();
        assert_eq!(read_i64(&load), None);
        assert_eq!(read_i64(&dir.path().join("missing")), None);
    }

    #[test]
    fn entries_sort_naturally() {
        let dir = tempfile::tempdir().unwrap();
        for n in [10, 2, 1] {
            fs::create_dir(dir.path().join(format!("thermal_zone{n}"))).unwrap();
        }
        fs::create_dir(dir.path().join("cooling_device0")).unwrap();
        let names: Vec<String> = entries(dir.path(), "thermal_zone")
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["thermal_zone1", "thermal_zone2", "thermal_zone10"]);
        assert!(entries(&dir.path().join("absent"), "x").is_empty());
    }
}
