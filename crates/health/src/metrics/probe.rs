//! Choosing, once at start, the source of each metric family and the
//! origin text that says why it was chosen, or why there is none.

use std::path::Path;
use std::time::Instant;

use super::read::read_text;
use super::tegra::{self, origin_of, ThermalZone};
use super::{disk, proc, NvmlCall, NvmlState, Reading, Scalar, WriteRate};

/// The GPU families (`gpu load`, `gpu temperature`, `encoder load`): NVML
/// per metric where it answers now, else sysfs, else nothing.
pub(super) fn gpu(
    sys: &Path,
    nvml: &NvmlState,
    zones: &[ThermalZone],
) -> (Vec<Scalar>, Vec<(&'static str, String)>) {
    let load =
        tegra::find_gpu_load(sys).map(|p| (origin_of(&p, "per-mille"), Reading::PerMille(p)));
    let temp = tegra::gpu_zone(zones).map(|z| {
        let unit = format!("{}, millidegC", z.kind);
        (origin_of(&z.temp, &unit), Reading::MilliDeg(z.temp.clone()))
    });
    let nvenc =
        tegra::find_nvenc_load(sys).map(|p| (origin_of(&p, "per-mille"), Reading::PerMille(p)));
    let no_temp = format!(
        "no thermal zone typed gpu-thermal under {}",
        sys.join("devices/virtual/thermal").display()
    );
    let no_nvenc = format!(
        "no source on this board (no devfreq device named nvenc under {})",
        sys.join("class/devfreq").display()
    );
    let families = [
        (
            "gpu load",
            "gpu.load",
            "percent",
            NvmlCall::Load,
            load,
            tegra::gpu_load_search(sys),
        ),
        (
            "gpu temperature",
            "gpu.temperature",
            "degC",
            NvmlCall::Temperature,
            temp,
            no_temp,
        ),
        (
            "encoder load",
            "encoder.load",
            "percent",
            NvmlCall::Encoder,
            nvenc,
            no_nvenc,
        ),
    ];
    let mut scalars = Vec::new();
    let mut sources = Vec::new();
    for (family, name, unit, call, sysfs, none) in families {
        let (scalar, origin) = choose(nvml, name, unit, call, sysfs, none);
        scalars.extend(scalar);
        sources.push((family, origin));
    }
    (scalars, sources)
}

fn choose(
    nvml: &NvmlState,
    name: &'static str,
    unit: &'static str,
    call: NvmlCall,
    sysfs: Option<(String, Reading)>,
    none: String,
) -> (Option<Scalar>, String) {
    let why_not_nvml = match nvml {
        NvmlState::Disabled => "NVML disabled".to_string(),
        NvmlState::Unavailable(e) => format!("NVML not available ({e})"),
        NvmlState::Ready(gpu) => match call.ask(gpu.as_ref()) {
            Ok(_) => {
                let origin = format!("{} {}", gpu.describe(), call.function());
                let reading = Reading::Nvml(call);
                let scalar = Scalar {
                    name,
                    unit,
                    reading,
                    origin: origin.clone(),
                };
                return (Some(scalar), origin);
            }
            Err(e) => format!("NVML: {e}"),
        },
    };
    match sysfs {
        Some((path_origin, reading)) => {
            let origin = format!("{why_not_nvml}, using {path_origin}");
            (
                Some(Scalar {
                    name,
                    unit,
                    reading,
                    origin: origin.clone(),
                }),
                origin,
            )
        }
        None => (None, format!("{why_not_nvml}; {none}")),
    }
}

/// The `thermal` family: the zones found and the ones skipped.
pub(super) fn thermal_origin(sys: &Path, zones: &[ThermalZone], skipped: &[String]) -> String {
    let dir = sys.join("devices/virtual/thermal");
    let mut origin = if zones.is_empty() {
        format!("no readable thermal zones under {}", dir.display())
    } else {
        let kinds: Vec<&str> = zones.iter().map(|z| z.kind.as_str()).collect();
        format!("{} ({}), millidegC", dir.display(), kinds.join(", "))
    };
    if !skipped.is_empty() {
        origin.push_str(&format!("; skipped {}", skipped.join(", ")));
    }
    origin
}

/// A procfs file that reads and parses now, or why not.
pub(super) fn parsed<T>(path: &Path, parse: impl Fn(&str) -> Option<T>) -> Result<T, String> {
    read_text(path)
        .and_then(|t| parse(&t))
        .ok_or_else(|| format!("{} unreadable or malformed", path.display()))
}

/// The origin of a chosen source, or `no source: <why>`.
pub(super) fn origin_or_why<T>(
    source: &Result<T, String>,
    origin: impl FnOnce(&T) -> String,
) -> String {
    match source {
        Ok(s) => origin(s),
        Err(why) => format!("no source: {why}"),
    }
}

/// The diskstats line of the block device that holds `data_dir`, with its
/// first sample taken now.
pub(super) fn write_rate(
    sys: &Path,
    proc_root: &Path,
    data_dir: &Path,
) -> Result<WriteRate, String> {
    let diskstats = proc_root.join("diskstats");
    let text = read_text(&diskstats);
    let (device, how) = disk::block_device(sys, text.as_deref(), data_dir)?;
    let sectors = text
        .as_deref()
        .and_then(|t| proc::sectors_written(t, &device))
        .ok_or_else(|| format!("{device} (from {how}) not in {}", diskstats.display()))?;
    Ok(WriteRate {
        origin: format!(
            "{} {device} (sectors written x 512 per second; {} found from {how})",
            diskstats.display(),
            data_dir.display()
        ),
        diskstats,
        device,
        prev: Some((Instant::now(), sectors)),
    })
}

/// The NVMe temperature, preferring the controller of the data drive.
pub(super) fn nvme(sys: &Path, controller: Option<&str>) -> Result<Scalar, String> {
    let (path, own) = disk::find_nvme_temp(sys, controller).ok_or_else(|| {
        format!(
            "no readable NVMe hwmon under {} or {}",
            sys.join("class/nvme").display(),
            sys.join("class/hwmon").display()
        )
    })?;
    let mut origin = origin_of(&path, "millidegC");
    if !own {
        origin.push_str(match controller {
            Some(_) => "; not the data directory's controller, which has none",
            None => "; the data directory is not on NVMe, first NVMe found",
        });
    }
    Ok(Scalar {
        name: "nvme.temperature",
        unit: "degC",
        reading: Reading::MilliDeg(path),
        origin,
    })
}
