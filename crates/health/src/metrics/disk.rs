//! The storage the recording lands on: free space from `statvfs(3)` of the
//! data directory, the block device that holds it (for its write rate in
//! `/proc/diskstats`) and the temperature of its NVMe controller. The
//! device is found from the directory's `st_dev`, so a data directory on
//! a second drive is measured on that drive, not on the root disk.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::proc::diskstats_name;
use super::read::{entries, read_i64, read_text};

/// Space of the filesystem holding a directory, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Space {
    /// Available to an unprivileged writer (`f_bavail`): the recorder does
    /// not run as root, so root's reserved blocks are not its to fill.
    pub free: u64,
    /// Size of the filesystem (`f_blocks`).
    pub total: u64,
}

/// `statvfs(3)` of `path`.
pub(crate) fn statvfs(path: &Path) -> io::Result<Space> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a NUL-terminated string that outlives the call;
    // `st` points to writable memory of the struct's size.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it filled the whole struct.
    let st = unsafe { st.assume_init() };
    // The field types differ between targets (u64 on 64-bit glibc, u32 on
    // some 32-bit ones), hence the `as` casts.
    #[allow(clippy::unnecessary_cast)]
    let (frsize, bavail, blocks) = (st.f_frsize as u64, st.f_bavail as u64, st.f_blocks as u64);
    Ok(Space {
        free: bavail.saturating_mul(frsize),
        total: blocks.saturating_mul(frsize),
    })
}

/// The block device holding `data_dir`: its kernel name (`nvme0n1p1`) and
/// how it was found, or why none was.
pub(crate) fn block_device(
    sys: &Path,
    diskstats: Option<&str>,
    data_dir: &Path,
) -> Result<(String, String), String> {
    let dev = fs::metadata(data_dir)
        .map_err(|e| format!("cannot stat {}: {e}", data_dir.display()))?
        .dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let sys_dev = sys.join(format!("dev/block/{major}:{minor}"));
    if let Some(uevent) = read_text(&sys_dev.join("uevent")) {
        if let Some(name) = uevent.lines().find_map(|l| l.strip_prefix("DEVNAME=")) {
            return Ok((name.to_string(), sys_dev.display().to_string()));
        }
    }
    if let Some(name) = diskstats.and_then(|d| diskstats_name(d, major, minor)) {
        return Ok((name, format!("diskstats {major}:{minor}")));
    }
    let hint = if major == 0 {
        " (major 0: a virtual filesystem such as overlay or tmpfs, or a btrfs subvolume)"
    } else {
        ""
    };
    Err(format!(
        "no block device {major}:{minor} for {} in {} or /proc/diskstats{hint}",
        data_dir.display(),
        sys.join("dev/block").display()
    ))
}

/// The NVMe controller of a namespace or partition name: `nvme0n1p1` and
/// `nvme0n1` give `nvme0`. Without native multipath (the Jetson kernels)
/// namespace `nvmeXnY` belongs to controller `nvmeX`.
pub(crate) fn nvme_controller(device: &str) -> Option<String> {
    let rest = device.strip_prefix("nvme")?;
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    (digits > 0 && rest[digits..].starts_with('n')).then(|| format!("nvme{}", &rest[..digits]))
}

/// The `temp1_input` (millidegC, the composite temperature) of an NVMe
/// controller's hwmon: `controller`'s when given and present, else the
/// first one found. The bool says whether it is `controller`'s.
pub(crate) fn find_nvme_temp(sys: &Path, controller: Option<&str>) -> Option<(PathBuf, bool)> {
    let readable = |p: &PathBuf| read_i64(p).is_some();
    let under_class_nvme = |ctrl: &str| -> Vec<PathBuf> {
        entries(&sys.join("class/nvme").join(ctrl), "hwmon")
            .into_iter()
            .map(|h| h.join("temp1_input"))
            .collect()
    };
    // /sys/class/hwmon/hwmonN with name "nvme", with the controller it
    // hangs under (its real path is .../nvme/nvme0/hwmonN).
    let class_hwmon: Vec<(PathBuf, Option<String>)> = entries(&sys.join("class/hwmon"), "hwmon")
        .into_iter()
        .filter(|h| read_text(&h.join("name")).as_deref() == Some("nvme"))
        .map(|h| {
            let owner = fs::canonicalize(&h)
                .ok()
                .and_then(|real| Some(real.parent()?.file_name()?.to_string_lossy().into_owned()));
            (h.join("temp1_input"), owner)
        })
        .collect();
    if let Some(ctrl) = controller {
        let mut own = under_class_nvme(ctrl).into_iter().chain(
            class_hwmon
                .iter()
                .filter(|(_, owner)| owner.as_deref() == Some(ctrl))
                .map(|(p, _)| p.clone()),
        );
        if let Some(p) = own.find(readable) {
            return Some((p, true));
        }
    }
    entries(&sys.join("class/nvme"), "nvme")
        .iter()
        .filter_map(|c| c.file_name().map(|n| n.to_string_lossy().into_owned()))
        .flat_map(|c| under_class_nvme(&c))
        .chain(class_hwmon.into_iter().map(|(p, _)| p))
        .find(readable)
        .map(|p| (p, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_names() {
        assert_eq!(nvme_controller("nvme0n1p1").as_deref(), Some("nvme0"));
        assert_eq!(nvme_controller("nvme12n3").as_deref(), Some("nvme12"));
        assert_eq!(nvme_controller("nvme0").as_deref(), None);
        assert_eq!(nvme_controller("nvmen1").as_deref(), None);
        assert_eq!(nvme_controller("sda1").as_deref(), None);
        assert_eq!(nvme_controller("mmcblk0p1").as_deref(), None);
    }

    #[test]
    fn statvfs_of_a_tempdir() {
        let dir = tempfile::tempdir().unwrap();
        let space = statvfs(dir.path()).unwrap();
        assert!(space.total > 0 && space.free <= space.total, "{space:?}");
        assert!(statvfs(&dir.path().join("absent")).is_err());
    }

    #[test]
    fn prefers_the_data_disks_controller() {
        let sys = tempfile::tempdir().unwrap();
        let s = sys.path();
        for (ctrl, temp) in [("nvme0", "30850"), ("nvme1", "41850")] {
            let hwmon = s.join(format!("class/nvme/{ctrl}/hwmon{}", &ctrl[4..]));
            fs::create_dir_all(&hwmon).unwrap();
            fs::write(hwmon.join("name"), "nvme\n").unwrap();
            fs::write(hwmon.join("temp1_input"), temp).unwrap();
        }
        let (p, own) = find_nvme_temp(s, Some("nvme1")).unwrap();
        assert!(own && p.ends_with("nvme1/hwmon1/temp1_input"), "{p:?}");
        let (p, own) = find_nvme_temp(s, Some("nvme7")).unwrap();
        assert!(!own && p.ends_with("nvme0/hwmon0/temp1_input"), "{p:?}");
        let (p, own) = find_nvme_temp(s, None).unwrap();
        assert!(!own && p.ends_with("nvme0/hwmon0/temp1_input"), "{p:?}");
    }

    #[test]
    fn hwmon_class_named_nvme() {
        let sys = tempfile::tempdir().unwrap();
        let s = sys.path();
        for (n, name) in [(0, "acpitz"), (3, "nvme")] {
            let hwmon = s.join(format!("class/hwmon/hwmon{n}"));
            fs::create_dir_all(&hwmon).unwrap();
            fs::write(hwmon.join("name"), format!("{name}\n")).unwrap();
            fs::write(hwmon.join("temp1_input"), "35000\n").unwrap();
        }
        let (p, own) = find_nvme_temp(s, Some("nvme0")).unwrap();
        assert!(!own && p.ends_with("hwmon3/temp1_input"), "{p:?}");
        assert_eq!(find_nvme_temp(&s.join("nothing"), None), None);
    }
}
