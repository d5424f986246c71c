//! `reindex` (and `recover` of a ROS 1 bag): the whole messages of an
//! unindexed bag, a `.bag.active` left by a power cut included, written as
//! a new indexed bag beside it. The source is never written; the new bag
//! appears under its name only when synced and whole
//! ([`edgerec_rosbag1::reindex`]). Every whole message is kept, those of a
//! cut last chunk too (`rosbag reindex` drops that chunk).

use std::path::{Path, PathBuf};

use edgerec_rosbag1::ReindexReport;

use crate::error::{Result, ToolError};

/// Where the indexed copy of `src` goes when no output is named:
/// `x.bag.active` becomes `x.bag`, anything else `x.reindexed.bag`.
pub fn default_output(src: &Path) -> PathBuf {
    let name = src
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(stem) = name.strip_suffix(".bag.active") {
        return src.with_file_name(format!("{stem}.bag"));
    }
    let stem = name.strip_suffix(".bag").unwrap_or(&name);
    src.with_file_name(format!("{stem}.reindexed.bag"))
}

/// Reindexes `src` into `dst` (default [`default_output`]), refusing an
/// existing output.
pub fn reindex(src: &Path, dst: Option<&Path>) -> Result<(PathBuf, ReindexReport)> {
    let dst = dst
        .map(Path::to_path_buf)
        .unwrap_or_else(|| default_output(src));
    if dst.exists() {
        return Err(ToolError::OutputExists { path: dst });
    }
    let rep = edgerec_rosbag1::reindex(src, &dst).map_err(ToolError::ros1(src))?;
    Ok((dst, rep))
}

/// What `reindex` prints about `rep`.
pub fn describe(src: &Path, dst: &Path, rep: &ReindexReport) -> String {
    let mut s = format!(
        "{}: {} messages in {} chunks ({} connections) written to {} ({} bytes); {} untouched",
        src.display(),
        rep.messages,
        rep.chunks,
        rep.connections,
        dst.display(),
        rep.bytes,
        src.display()
    );
    if let Some(cut) = &rep.scan.cut_chunk {
        s.push_str(&format!(
            "\n  the file ends inside the chunk at byte {} ({} of {} data bytes): {} whole messages kept from it",
            cut.pos, cut.available, cut.data_len, cut.messages
        ));
    }
    if let Some(e) = &rep.scan.stop_error {
        s.push_str(&format!(
            "\n  reading stopped at byte {} of {}: {e}",
            rep.scan.stop_offset,
            src.display()
        ));
    }
    if rep.scan.orphan_messages > 0 {
        s.push_str(&format!(
            "\n  {} messages had no connection record and were left out",
            rep.scan.orphan_messages
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_sit_beside_the_source() {
        assert_eq!(
            default_output(Path::new("/d/run.bag.active")),
            Path::new("/d/run.bag")
        );
        assert_eq!(
            default_output(Path::new("run.bag")),
            Path::new("run.reindexed.bag")
        );
        assert_eq!(
            default_output(Path::new("/d/x")),
            Path::new("/d/x.reindexed.bag")
        );
    }
}
