//! The logical block size of the device under a file, which sets the
//! alignment `O_DIRECT` demands of buffer addresses, lengths and offsets. It
//! is read from `/sys/dev/block/MAJ:MIN/queue/logical_block_size` for the
//! file system's `st_dev`, walking up to the whole disk for a partition
//! (partitions have no `queue/`). File systems without a block device
//! (tmpfs, overlay, NFS) have no such entry; 4096 is then used, which every
//! Jetson kernel (5.10, 5.15) and disk we target accepts.

use std::fs;
use std::path::Path;

/// Used when the device cannot be identified.
pub(crate) const DEFAULT_ALIGNMENT: usize = 4096;
/// No block device has smaller sectors.
const MIN_LOGICAL_BLOCK: usize = 512;

/// The logical block size of the block device `dev` (an `st_dev`), or
/// `None` when sysfs does not know it.
pub(crate) fn logical_block_size(dev: libc::dev_t) -> Option<usize> {
    let base = format!("/sys/dev/block/{}:{}", libc::major(dev), libc::minor(dev));
    let base = Path::new(&base);
    if let Some(size) = read_size(&base.join("queue/logical_block_size")) {
        return Some(size);
    }
    // A partition's sysfs directory sits inside its disk's directory and
    // has a `partition` file; the queue attributes are the disk's.
    if base.join("partition").exists() {
        let real = fs::canonicalize(base).ok()?;
        return read_size(&real.parent()?.join("queue/logical_block_size"));
    }
    None
}

fn read_size(path: &Path) -> Option<usize> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The alignment to use for I/O on a device with logical block size `lbs`:
/// the logical block size (a power of two, at least 512, 4096 when unknown),
/// raised to at least 4096 so buffers are page aligned and a padded tail
/// is valid on file systems whose direct-I/O granularity is the page.
pub(crate) fn io_alignment(lbs: Option<usize>) -> usize {
    let lbs = lbs
        .filter(|v| v.is_power_of_two())
        .unwrap_or(DEFAULT_ALIGNMENT)
        .max(MIN_LOGICAL_BLOCK);
    lbs.max(DEFAULT_ALIGNMENT)
}

/// The `st_dev` of the file system holding `path`.
pub(crate) fn device_of(path: &Path) -> std::io::Result<libc::dev_t> {
    use std::os::unix::fs::MetadataExt;
    Ok(fs::metadata(path)?.dev() as libc::dev_t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detected_logical_block_size_is_power_of_two_at_least_512() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dev = device_of(dir.path()).expect("stat");
        match logical_block_size(dev) {
            Some(lbs) => {
                assert!(lbs.is_power_of_two(), "{lbs}");
                assert!(lbs >= 512, "{lbs}");
                let align = io_alignment(Some(lbs));
                assert!(align >= 4096 && align % lbs == 0, "{align}");
            }
            None => eprintln!(
                "skip detection check: no /sys/dev/block entry for dev {}:{} (not a block-device file system); \
                 the 4096 default is used",
                libc::major(dev),
                libc::minor(dev)
            ),
        }
    }

    #[test]
    fn alignment_rules() {
        assert_eq!(io_alignment(None), 4096);
        assert_eq!(io_alignment(Some(512)), 4096);
        assert_eq!(io_alignment(Some(4096)), 4096);
        assert_eq!(io_alignment(Some(16384)), 16384);
        assert_eq!(
            io_alignment(Some(3000)),
            4096,
            "not a power of two: unknown"
        );
        assert_eq!(io_alignment(Some(256)), 4096, "below 512 is clamped");
    }

    #[test]
    fn unknown_device_is_none() {
        // Major 0 is the anonymous-device range (tmpfs, overlay): never in sysfs.
        assert_eq!(logical_block_size(libc::makedev(0, 12345)), None);
    }
}
