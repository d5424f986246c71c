//! Parsers for `/proc/stat`, `/proc/meminfo` and `/proc/diskstats`, kept
//! apart from any file reading so their arithmetic is tested on known text.

/// Jiffies of the aggregate `cpu` line of `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CpuTimes {
    /// Every state but idle and iowait.
    pub busy: u64,
    /// user + nice + system + idle + iowait + irq + softirq + steal
    /// (guest time is already inside user and nice).
    pub total: u64,
}

/// One sample of `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StatSample {
    /// All CPUs together.
    pub all: CpuTimes,
    /// `cpuN` lines: the CPUs online now (nvpmodel modes switch cores off).
    pub online: usize,
}

/// Parses `/proc/stat`; `None` without a well-formed `cpu` line.
pub(crate) fn parse_stat(text: &str) -> Option<StatSample> {
    let mut all = None;
    let mut online = 0;
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        match fields.next() {
            Some("cpu") => {
                let v: Vec<u64> = fields
                    .take(8)
                    .map(str::parse::<u64>)
                    .collect::<Result<_, _>>()
                    .ok()?;
                // Kernels since 2.6.33 print at least user..steal.
                if v.len() < 8 {
                    return None;
                }
                // Checked: a garbled line must not overflow into a panic.
                let total = v.iter().try_fold(0u64, |sum, &x| sum.checked_add(x))?;
                let idle = v[3].checked_add(v[4])?;
                all = Some(CpuTimes {
                    busy: total - idle,
                    total,
                });
            }
            Some(name) if name.starts_with("cpu") => online += 1,
            _ => {}
        }
    }
    Some(StatSample { all: all?, online })
}

/// Percent of the interval the CPUs were busy; `None` when no time passed
/// or the counters went backwards (a reset).
pub(crate) fn cpu_load(prev: CpuTimes, now: CpuTimes) -> Option<f64> {
    let total = now.total.checked_sub(prev.total)?;
    let busy = now.busy.checked_sub(prev.busy)?;
    if total == 0 || busy > total {
        return None;
    }
    Some(100.0 * busy as f64 / total as f64)
}

/// The two `/proc/meminfo` fields the status shows, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemInfo {
    /// `MemTotal`.
    pub total: u64,
    /// `MemAvailable`: what can be allocated without swapping, counting
    /// reclaimable page cache (which a recorder fills quickly).
    pub available: u64,
}

impl MemInfo {
    /// total - available, as `free(1)` counts "used".
    pub fn used(&self) -> u64 {
        self.total.saturating_sub(self.available)
    }
}

/// Parses `/proc/meminfo` (values in kB, i.e. KiB).
pub(crate) fn parse_meminfo(text: &str) -> Option<MemInfo> {
    let field = |key: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        let kib: u64 = line[key.len()..]
            .split_ascii_whitespace()
            .next()?
            .parse()
            .ok()?;
        kib.checked_mul(1024)
    };
    Some(MemInfo {
        total: field("MemTotal:")?,
        available: field("MemAvailable:")?,
    })
}

/// Sectors written (field 10 of a line; diskstats sectors are always 512
/// bytes, whatever the device's logical block size) by device `name`.
pub(crate) fn sectors_written(diskstats: &str, name: &str) -> Option<u64> {
    let line = diskstats
        .lines()
        .find(|line| line.split_ascii_whitespace().nth(2) == Some(name))?;
    line.split_ascii_whitespace().nth(9)?.parse().ok()
}

/// The name diskstats gives device `major:minor`.
pub(crate) fn diskstats_name(diskstats: &str, major: u32, minor: u32) -> Option<String> {
    diskstats.lines().find_map(|line| {
        let mut f = line.split_ascii_whitespace();
        let number = (
            f.next()?.parse::<u32>().ok()?,
            f.next()?.parse::<u32>().ok()?,
        );
        let name = f.next()?;
        (number == (major, minor)).then(|| name.to_string())
    })
}

/// Bytes per diskstats sector.
pub(crate) const SECTOR_BYTES: u64 = 512;

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 20 50 800 30 0 0 0 0 0\n\
                        cpu0 50 10 25 400 15 0 0 0 0 0\n\
                        cpu1 50 10 25 400 15 0 0 0 0 0\n\
                        intr 1 2 3\nctxt 4\n";

    #[test]
    fn stat_busy_and_total() {
        let s = parse_stat(STAT).unwrap();
        assert_eq!(s.online, 2);
        assert_eq!(
            s.all,
            CpuTimes {
                busy: 170,
                total: 1000
            }
        );
    }

    #[test]
    fn cpu_load_over_an_interval() {
        let a = CpuTimes {
            busy: 170,
            total: 1000,
        };
        let b = CpuTimes {
            busy: 245,
            total: 1200,
        };
        assert_eq!(cpu_load(a, b), Some(37.5));
        assert_eq!(cpu_load(a, a), None);
        assert_eq!(cpu_load(b, a), None);
    }

    #[test]
    fn malformed_stat_is_none() {
        assert_eq!(parse_stat("cpu 1 2 x 4 5 6 7 8\n"), None);
        assert_eq!(parse_stat("cpu 1 2 3\n"), None);
        assert_eq!(parse_stat("intr 1\n"), None);
    }

    #[test]
    fn meminfo_in_bytes() {
        let m =
            parse_meminfo("MemTotal:  1000 kB\nMemFree: 10 kB\nMemAvailable:   600 kB\n").unwrap();
        assert_eq!(m.total, 1_024_000);
        assert_eq!(m.available, 614_400);
        assert_eq!(m.used(), 409_600);
        assert_eq!(parse_meminfo("MemTotal: 1000 kB\n"), None);
    }

    #[test]
    fn diskstats_by_name_and_number() {
        let text = " 259       0 nvme0n1 10 0 20 1 300 0 4000 5 0 6 7\n \
                     259       1 nvme0n1p1 9 0 18 1 290 0 3900 5 0 6 7\n";
        assert_eq!(sectors_written(text, "nvme0n1p1"), Some(3900));
        assert_eq!(sectors_written(text, "nvme0n1"), Some(4000));
        assert_eq!(sectors_written(text, "sda"), None);
        assert_eq!(diskstats_name(text, 259, 1).as_deref(), Some("nvme0n1p1"));
        assert_eq!(diskstats_name(text, 8, 0), None);
        assert_eq!(sectors_written("259 1 nvme0n1p1 x\n", "nvme0n1p1"), None);
    }
}
