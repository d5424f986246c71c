//! Rebuilding the index of an unindexed bag (a `.bag.active` left by a
//! power cut, or a cut copy): scan it, keep every whole message (those of
//! a cut last chunk included, where `rosbag reindex` drops that chunk), and
//! write a new indexed bag. The source is only read. The new bag is written
//! under a temporary name beside the destination, synced, and renamed into
//! place, so the destination is either the old file or the whole new bag.

use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use crate::bag::{Bag, ScanReport};
use crate::error::{Error, Result};
use crate::messages::Filter;
use crate::writer::BagWriter;
use crate::writer::WriteSummary;

/// What [`reindex`] kept.
#[derive(Debug)]
pub struct ReindexReport {
    /// What the scan of the source found and where it stopped.
    pub scan: ScanReport,
    /// Messages written to the new bag.
    pub messages: u64,
    /// Chunks written.
    pub chunks: u64,
    /// Connections written.
    pub connections: u32,
    /// Bytes written.
    pub bytes: u64,
}

fn temp_path(dst: &Path) -> PathBuf {
    let name = dst
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "bag".into());
    dst.with_file_name(format!(".{name}.reindex-{}", std::process::id()))
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Scans `src` and writes its whole messages as an indexed bag to `dst`.
pub fn reindex(src: &Path, dst: &Path) -> Result<ReindexReport> {
    if same_file(src, dst) {
        return Err(Error::DestinationIsSource(dst.to_path_buf()));
    }
    let (mut bag, scan) = Bag::scan_for_report(src)?;
    let tmp = temp_path(dst);
    let written = write_bag(&mut bag, &tmp).and_then(|summary| {
        fs::rename(&tmp, dst)?;
        sync_parent(dst)?;
        Ok(summary)
    });
    let summary = match written {
        Ok(s) => s,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
    };
    Ok(ReindexReport {
        scan,
        messages: summary.messages,
        chunks: summary.chunks,
        connections: summary.connections,
        bytes: summary.bytes,
    })
}

fn write_bag(bag: &mut Bag<std::io::BufReader<File>>, tmp: &Path) -> Result<WriteSummary> {
    let file = File::create(tmp)?;
    let mut w = BagWriter::new(BufWriter::new(file))?;
    for c in bag.connections().values() {
        w.add_connection((**c).clone())?;
    }
    for m in bag.messages(&Filter::default()) {
        let m = m?;
        w.write(m.connection.id, m.time, &m.data)?;
    }
    let (out, summary) = w.finish()?;
    let file = out.into_inner().map_err(|e| Error::Io(e.into_error()))?;
    file.sync_all()?;
    Ok(summary)
}

/// Makes the rename durable; directories cannot be opened for syncing on
/// every OS, so elsewhere this is best effort.
fn sync_parent(path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        File::open(dir)?.sync_all()?;
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}
