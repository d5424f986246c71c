//! The Tegra sysfs sources: GPU and NVENC load from the nvgpu/devfreq
//! `load` attribute (per-mille), temperatures from the thermal zones
//! (millidegrees C). They exist because NVML on Jetson enumerates the GPU
//! but answers NOT_SUPPORTED for utilisation and temperature.

use std::path::{Path, PathBuf};

use tracing::debug;

use super::read::{display_path, entries, read_i64, read_text};

/// Device-tree node names of Tegra integrated GPUs: `ga10b` (Orin), `gv11b`
/// (Xavier), `gp10b` (TX2), and `gpu`, the generic node name newer device
/// trees use (jetson_stats matches the same list).
const GPU_NODE_NAMES: &[&str] = &["ga10b", "gv11b", "gp10b", "gpu"];

/// nvgpu's `load` attribute at the fixed places L4T releases have put it.
const GPU_FIXED_LOADS: &[&str] = &[
    "devices/platform/gpu.0/load",
    "devices/platform/17000000.ga10b/load",
    "devices/platform/17000000.gpu/load",
    "devices/gpu.0/load",
    "devices/17000000.ga10b/load",
    "devices/17000000.gv11b/load",
];

/// Thermal zones report this (millidegC) while their sensor is off, e.g.
/// the CV zones of an Orin whose DLA/PVA cluster is power-gated.
const SENSOR_OFFLINE_MILLIDEG: i64 = -256_000;

/// What was looked at for the GPU load, for an origin saying why none.
pub(crate) fn gpu_load_search(sys: &Path) -> String {
    format!(
        "no devfreq under {} with of_node name {} and none of {}/{{{}}}",
        sys.join("class/devfreq").display(),
        GPU_NODE_NAMES.join("/"),
        sys.display(),
        GPU_FIXED_LOADS.join(", ")
    )
}

/// The nvgpu `load` file: first the devfreq device whose device-tree node
/// is a GPU, then the fixed paths.
pub(crate) fn find_gpu_load(sys: &Path) -> Option<PathBuf> {
    let by_devfreq = find_devfreq_load(sys, |node, dir| {
        GPU_NODE_NAMES.contains(&node)
            || GPU_NODE_NAMES
                .iter()
                .any(|n| dir.ends_with(&format!(".{n}")))
    });
    by_devfreq.or_else(|| {
        GPU_FIXED_LOADS
            .iter()
            .map(|p| sys.join(p))
            .find(|p| read_i64(p).is_some())
    })
}

/// The NVENC engine's `load`, where a devfreq device for it exists.
pub(crate) fn find_nvenc_load(sys: &Path) -> Option<PathBuf> {
    find_devfreq_load(sys, |node, dir| {
        node.contains("nvenc") || dir.contains("nvenc")
    })
}

/// `<devfreq>/device/load` of the first devfreq device (natural order) that
/// `matches(of_node name, devfreq directory name)` and whose load reads as
/// a number now.
fn find_devfreq_load(sys: &Path, matches: impl Fn(&str, &str) -> bool) -> Option<PathBuf> {
    for devfreq in entries(&sys.join("class/devfreq"), "") {
        let dir = devfreq
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let node = read_text(&devfreq.join("device/of_node/name")).unwrap_or_default();
        if !matches(&node, &dir) {
            continue;
        }
        let load = devfreq.join("device/load");
        if read_i64(&load).is_some() {
            return Some(load);
        }
        debug!("devfreq {dir} (of_node {node:?}) has no readable load");
    }
    None
}

/// A `load` file in per-mille, as percent.
pub(crate) fn read_per_mille(path: &Path) -> Option<f64> {
    let v = read_i64(path)?;
    if !(0..=1000).contains(&v) {
        debug!("skipping {}: load {v} outside 0..=1000", path.display());
        return None;
    }
    Some(v as f64 / 10.0)
}

/// A temperature file in millidegrees C, as degrees C; `None` while the
/// sensor reports itself offline.
pub(crate) fn read_millideg(path: &Path) -> Option<f64> {
    let v = read_i64(path)?;
    if v <= SENSOR_OFFLINE_MILLIDEG {
        debug!("skipping {}: sensor offline ({v})", path.display());
        return None;
    }
    Some(v as f64 / 1000.0)
}

/// One thermal zone that answered at probe time.
#[derive(Debug, Clone)]
pub(crate) struct ThermalZone {
    /// The zone's `type`, e.g. `gpu-thermal`.
    pub kind: String,
    /// `thermal.<type>`, made unique with the zone number when two zones
    /// share a type.
    pub metric: String,
    /// Its `temp` file.
    pub temp: PathBuf,
    /// The resolved `temp` path and unit, for the metric's origin.
    pub origin: String,
}

/// The zones under `<sys>/devices/virtual/thermal`, and the ones skipped
/// with why.
pub(crate) fn thermal_zones(sys: &Path) -> (Vec<ThermalZone>, Vec<String>) {
    let mut zones: Vec<ThermalZone> = Vec::new();
    let mut skipped = Vec::new();
    for dir in entries(&sys.join("devices/virtual/thermal"), "thermal_zone") {
        let zone = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(kind) = read_text(&dir.join("type")).filter(|k| !k.is_empty()) else {
            skipped.push(format!("{zone} (no type)"));
            continue;
        };
        let temp = dir.join("temp");
        if read_i64(&temp).is_none() {
            skipped.push(format!("{zone} {kind} (temp unreadable)"));
            continue;
        }
        let mut metric = format!("thermal.{kind}");
        if zones.iter().any(|z| z.metric == metric) {
            metric = format!("{metric}.{zone}");
        }
        let origin = origin_of(&temp, "millidegC");
        zones.push(ThermalZone {
            kind,
            metric,
            temp,
            origin,
        });
    }
    (zones, skipped)
}

/// The zone that measures the GPU: `gpu-thermal` on Orin (`GPU-therm` on
/// Xavier and older).
pub(crate) fn gpu_zone(zones: &[ThermalZone]) -> Option<&ThermalZone> {
    zones
        .iter()
        .find(|z| z.kind.to_ascii_lowercase().starts_with("gpu-therm"))
}

/// Origin text for a sysfs file: its resolved path and unit.
pub(crate) fn origin_of(path: &Path, unit: &str) -> String {
    format!("{} ({unit})", display_path(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn gpu_devfreq_wins_over_other_devfreq_devices() {
        let sys = tempfile::tempdir().unwrap();
        let s = sys.path();
        // A decoy devfreq device that is not a GPU, sorted first.
        write(
            s,
            "class/devfreq/13e40000.host1x/device/of_node/name",
            "host1x\0",
        );
        write(s, "class/devfreq/13e40000.host1x/device/load", "999\n");
        write(
            s,
            "class/devfreq/17000000.ga10b/device/of_node/name",
            "ga10b\0",
        );
        write(s, "class/devfreq/17000000.ga10b/device/load", "537\n");
        let load = find_gpu_load(s).unwrap();
        assert!(load.ends_with("17000000.ga10b/device/load"), "{load:?}");
        assert_eq!(read_per_mille(&load), Some(53.7));
        assert_eq!(find_nvenc_load(s), None);
    }

    #[test]
    fn gpu_fixed_path_when_no_devfreq() {
        let sys = tempfile::tempdir().unwrap();
        write(sys.path(), "devices/platform/17000000.ga10b/load", "0\n");
        let load = find_gpu_load(sys.path()).unwrap();
        assert!(load.ends_with("devices/platform/17000000.ga10b/load"));
        assert_eq!(read_per_mille(&load), Some(0.0));
    }

    #[test]
    fn devfreq_named_by_directory_and_nvenc() {
        let sys = tempfile::tempdir().unwrap();
        let s = sys.path();
        // A devfreq device without of_node, known only by its name.
        write(s, "class/devfreq/17000000.gpu/device/load", "120\n");
        write(s, "class/devfreq/15a80000.nvenc/device/load", "250\n");
        assert!(find_gpu_load(s)
            .unwrap()
            .ends_with("17000000.gpu/device/load"));
        let nvenc = find_nvenc_load(s).unwrap();
        assert_eq!(read_per_mille(&nvenc), Some(25.0));
    }

    #[test]
    fn bad_values_are_skipped() {
        let sys = tempfile::tempdir().unwrap();
        let s = sys.path();
        write(s, "load", "1500\n");
        assert_eq!(read_per_mille(&s.join("load")), None);
        write(s, "temp", "-256000\n");
        assert_eq!(read_millideg(&s.join("temp")), None);
        write(s, "temp", "45.5\n");
        assert_eq!(read_millideg(&s.join("temp")), None);
        write(s, "temp", "-5500\n");
        assert_eq!(read_millideg(&s.join("temp")), Some(-5.5));
        // A load file that does not parse does not count as a GPU source.
        write(
            s,
            "class/devfreq/17000000.ga10b/device/of_node/name",
            "ga10b",
        );
        write(s, "class/devfreq/17000000.ga10b/device/load", "busy\n");
        assert_eq!(find_gpu_load(s), None);
    }

    #[test]
    fn thermal_zones_skip_broken_and_rename_duplicates() {
        let sys = tempfile::tempdir().unwrap();
        let s = sys.path();
        let base = "devices/virtual/thermal";
        write(s, &format!("{base}/thermal_zone0/type"), "acpitz\n");
        write(s, &format!("{base}/thermal_zone0/temp"), "27800\n");
        write(s, &format!("{base}/thermal_zone1/type"), "acpitz\n");
        write(s, &format!("{base}/thermal_zone1/temp"), "29800\n");
        write(s, &format!("{base}/thermal_zone2/type"), "gpu-thermal\n");
        write(s, &format!("{base}/thermal_zone2/temp"), "n/a\n");
        write(s, &format!("{base}/thermal_zone3/temp"), "1000\n");
        let (zones, skipped) = thermal_zones(s);
        let metrics: Vec<&str> = zones.iter().map(|z| z.metric.as_str()).collect();
        assert_eq!(metrics, ["thermal.acpitz", "thermal.acpitz.thermal_zone1"]);
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        assert!(gpu_zone(&zones).is_none());
    }
}
