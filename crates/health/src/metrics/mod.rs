//! Metrics for the recorder's status, each carrying the place it came from.
//!
//! On a Jetson the obvious source is often not the one that answers: NVML
//! enumerates the Orin GPU but returns NOT_SUPPORTED for its load and
//! temperature, the GPU load hides in an nvgpu sysfs attribute in
//! per-mille, and NVENC may have no readable load at all. A number whose
//! origin is unknown cannot be trusted when reading a recording's status
//! later, so [`Collector::probe`] decides once, at start, which source
//! answers for each family of metrics, logs one line per family saying so,
//! and every [`Metric`] repeats its origin. [`Collector::collect`] then only
//! reads the chosen files (at 1 Hz), keeping the previous samples that CPU
//! load and disk write rate are computed from. Files that vanish or hold
//! garbage cost a metric for one tick and a debug line, never a panic.
//!
//! ```no_run
//! use edgerec_health::metrics::{Collector, MetricsOptions};
//!
//! let mut collector = Collector::probe(MetricsOptions::new("/data/edgerec"));
//! for (family, origin) in collector.sources() {
//!     println!("{family}: {origin}");
//! }
//! for m in collector.collect() {
//!     println!("{} = {} {} ({})", m.name, m.value, m.unit, m.origin);
//! }
//! ```

pub(crate) mod disk;
mod nvml;
mod probe;
mod proc;
mod read;
mod tegra;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use tracing::{debug, info};

pub use self::nvml::{GpuQuery, GpuQueryError, NvmlGpu};
use self::proc::{CpuTimes, SECTOR_BYTES};
use self::read::read_text;
use self::tegra::ThermalZone;

/// One measured value and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metric {
    /// Dotted name: `gpu.load`, `thermal.gpu-thermal`, `disk.write_rate`...
    pub name: String,
    /// The value, in `unit`.
    pub value: f64,
    /// `percent`, `degC`, `bytes`, `bytes/s` or `count`.
    pub unit: &'static str,
    /// The source: a file path with its raw unit, an NVML call, or why the
    /// first choice was passed over (`NVML: NotSupported, using ...`).
    pub origin: String,
}

/// Where the collector looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsOptions {
    /// Root of sysfs; `/sys`, or a fixture tree in tests.
    pub sys_root: PathBuf,
    /// Root of procfs; `/proc`, or a fixture tree in tests.
    pub proc_root: PathBuf,
    /// The recording directory: free space, write rate and NVMe
    /// temperature are those of the drive that holds it.
    pub data_dir: PathBuf,
    /// Try NVML first for the GPU metrics.
    pub nvml: bool,
}

impl MetricsOptions {
    /// `/sys`, `/proc`, NVML on, for `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>) -> MetricsOptions {
        MetricsOptions {
            sys_root: PathBuf::from("/sys"),
            proc_root: PathBuf::from("/proc"),
            data_dir: data_dir.into(),
            nvml: true,
        }
    }
}

/// What NVML said at probe time.
enum NvmlState {
    Disabled,
    Unavailable(String),
    Ready(Box<dyn GpuQuery>),
}

/// An NVML question.
#[derive(Debug, Clone, Copy)]
enum NvmlCall {
    Load,
    Temperature,
    Encoder,
}

impl NvmlCall {
    fn ask(self, gpu: &dyn GpuQuery) -> Result<f64, GpuQueryError> {
        match self {
            NvmlCall::Load => gpu.gpu_load(),
            NvmlCall::Temperature => gpu.gpu_temperature(),
            NvmlCall::Encoder => gpu.encoder_load(),
        }
    }

    fn function(self) -> &'static str {
        match self {
            NvmlCall::Load => "utilization_rates().gpu",
            NvmlCall::Temperature => "temperature(Gpu)",
            NvmlCall::Encoder => "encoder_utilization()",
        }
    }
}

/// How a single-valued metric is read.
#[derive(Debug, Clone)]
enum Reading {
    Nvml(NvmlCall),
    PerMille(PathBuf),
    MilliDeg(PathBuf),
}

/// A single-valued metric with its chosen source.
#[derive(Debug, Clone)]
struct Scalar {
    name: &'static str,
    unit: &'static str,
    reading: Reading,
    origin: String,
}

/// The block device whose diskstats give the write rate.
#[derive(Debug, Clone)]
struct WriteRate {
    diskstats: PathBuf,
    device: String,
    origin: String,
    prev: Option<(Instant, u64)>,
}

/// Reads the metrics from the sources chosen once by [`Collector::probe`].
pub struct Collector {
    gpu: Option<Box<dyn GpuQuery>>,
    scalars: Vec<Scalar>,
    thermal: Vec<ThermalZone>,
    stat: Option<(PathBuf, Option<CpuTimes>)>,
    meminfo: Option<PathBuf>,
    space: Option<PathBuf>,
    write_rate: Option<WriteRate>,
    nvme: Option<Scalar>,
    sources: Vec<(&'static str, String)>,
}

impl fmt::Debug for Collector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Collector")
            .field("sources", &self.sources)
            .finish_non_exhaustive()
    }
}

impl Collector {
    /// Decides which source answers for each family: NVML first when
    /// `opts.nvml` (falling back to sysfs per metric), then the Tegra sysfs
    /// files, procfs and the data directory's drive. Logs one info line per
    /// family. Never fails: a family without a source is left out of
    /// [`collect`](Self::collect) and [`sources`](Self::sources) says why.
    pub fn probe(opts: MetricsOptions) -> Collector {
        let nvml = if !opts.nvml {
            NvmlState::Disabled
        } else {
            match NvmlGpu::init() {
                Ok(gpu) => NvmlState::Ready(Box::new(gpu)),
                Err(e) => NvmlState::Unavailable(e.to_string()),
            }
        };
        Collector::probe_nvml(opts, nvml)
    }

    /// Like [`probe`](Self::probe) with `gpu` standing in for NVML,
    /// whatever `opts.nvml` says: `Err` plays an NVML that failed to
    /// initialise. For tests, and for a caller that already holds NVML.
    pub fn probe_with_gpu(
        opts: MetricsOptions,
        gpu: Result<Box<dyn GpuQuery>, GpuQueryError>,
    ) -> Collector {
        let nvml = match gpu {
            Ok(gpu) => NvmlState::Ready(gpu),
            Err(e) => NvmlState::Unavailable(e.to_string()),
        };
        Collector::probe_nvml(opts, nvml)
    }

    fn probe_nvml(opts: MetricsOptions, nvml: NvmlState) -> Collector {
        let sys = opts.sys_root.as_path();
        let proc_root = opts.proc_root.as_path();
        let data_dir = opts.data_dir.as_path();
        let (thermal, skipped) = tegra::thermal_zones(sys);
        let (scalars, mut sources) = probe::gpu(sys, &nvml, &thermal);
        sources.push(("thermal", probe::thermal_origin(sys, &thermal, &skipped)));

        let stat_path = proc_root.join("stat");
        let stat = probe::parsed(&stat_path, proc::parse_stat);
        let origin = probe::origin_or_why(&stat, |_| {
            format!(
                "{} (jiffies between collects; cpuN lines)",
                stat_path.display()
            )
        });
        sources.push(("cpu", origin));

        let meminfo_path = proc_root.join("meminfo");
        let meminfo = probe::parsed(&meminfo_path, proc::parse_meminfo);
        let origin = probe::origin_or_why(&meminfo, |_| {
            format!("{} (MemTotal, MemAvailable)", meminfo_path.display())
        });
        sources.push(("memory", origin));

        let space =
            disk::statvfs(data_dir).map_err(|e| format!("statvfs({}): {e}", data_dir.display()));
        let origin = probe::origin_or_why(&space, |_| format!("statvfs({})", data_dir.display()));
        sources.push(("disk space", origin));

        let write_rate = probe::write_rate(sys, proc_root, data_dir);
        sources.push((
            "disk write rate",
            probe::origin_or_why(&write_rate, |w| w.origin.clone()),
        ));

        let controller = write_rate
            .as_ref()
            .ok()
            .and_then(|w| disk::nvme_controller(&w.device));
        let nvme = probe::nvme(sys, controller.as_deref());
        sources.push((
            "nvme temperature",
            probe::origin_or_why(&nvme, |s| s.origin.clone()),
        ));

        for (family, origin) in &sources {
            info!("{family}: {origin}");
        }
        Collector {
            gpu: match nvml {
                NvmlState::Ready(gpu) => Some(gpu),
                _ => None,
            },
            scalars,
            thermal,
            stat: stat.ok().map(|s| (stat_path, Some(s.all))),
            meminfo: meminfo.ok().map(|_| meminfo_path),
            space: space.ok().map(|_| data_dir.to_path_buf()),
            write_rate: write_rate.ok(),
            nvme: nvme.ok(),
            sources,
        }
    }

    /// Each family and its origin, as decided at probe time: `gpu load`,
    /// `gpu temperature`, `encoder load`, `thermal`, `cpu`, `memory`,
    /// `disk space`, `disk write rate`, `nvme temperature`. A family
    /// without a source says why (`no source: ...`, or for the GPU
    /// families the NVML answer followed by what sysfs lacked).
    pub fn sources(&self) -> Vec<(&'static str, String)> {
        self.sources.clone()
    }

    /// Reads every metric whose source answered at probe time. Rates
    /// (`cpu.load`, `disk.write_rate`) cover the time since the previous
    /// call (or the probe). Meant to be called about once a second.
    pub fn collect(&mut self) -> Vec<Metric> {
        self.collect_at(Instant::now())
    }

    /// [`collect`](Self::collect) with the monotonic time of the sample
    /// given, so rates can be checked on known intervals. An instant not
    /// after the previous sample's yields no rate this time.
    pub fn collect_at(&mut self, now: Instant) -> Vec<Metric> {
        let mut out = Vec::new();
        for s in self.scalars.iter().chain(&self.nvme) {
            if let Some(value) = read_scalar(s, self.gpu.as_deref()) {
                out.push(metric(s.name, value, s.unit, &s.origin));
            }
        }
        for z in &self.thermal {
            if let Some(v) = tegra::read_millideg(&z.temp) {
                out.push(metric(&z.metric, v, "degC", &z.origin));
            }
        }
        if let Some((path, prev)) = &mut self.stat {
            collect_cpu(path, prev, &mut out);
        }
        if let Some(path) = &self.meminfo {
            let origin = path.display().to_string();
            if let Some(m) = read_text(path).and_then(|t| proc::parse_meminfo(&t)) {
                out.push(metric("memory.used", m.used() as f64, "bytes", &origin));
                out.push(metric(
                    "memory.available",
                    m.available as f64,
                    "bytes",
                    &origin,
                ));
                out.push(metric("memory.total", m.total as f64, "bytes", &origin));
            }
        }
        if let Some(dir) = &self.space {
            let origin = format!("statvfs({})", dir.display());
            match disk::statvfs(dir) {
                Ok(s) => {
                    out.push(metric("disk.free", s.free as f64, "bytes", &origin));
                    out.push(metric("disk.total", s.total as f64, "bytes", &origin));
                }
                Err(e) => debug!("{origin}: {e}"),
            }
        }
        if let Some(w) = &mut self.write_rate {
            collect_write_rate(w, now, &mut out);
        }
        out
    }
}

fn metric(name: &str, value: f64, unit: &'static str, origin: &str) -> Metric {
    Metric {
        name: name.to_string(),
        value,
        unit,
        origin: origin.to_string(),
    }
}

fn read_scalar(s: &Scalar, gpu: Option<&dyn GpuQuery>) -> Option<f64> {
    match &s.reading {
        Reading::PerMille(p) => tegra::read_per_mille(p),
        Reading::MilliDeg(p) => tegra::read_millideg(p),
        Reading::Nvml(call) => match call.ask(gpu?) {
            Ok(v) => Some(v),
            Err(e) => {
                debug!("{}: {}: {e}", s.name, s.origin);
                None
            }
        },
    }
}

fn collect_cpu(path: &Path, prev: &mut Option<CpuTimes>, out: &mut Vec<Metric>) {
    let Some(sample) = read_text(path).and_then(|t| proc::parse_stat(&t)) else {
        debug!("{}: unreadable or malformed", path.display());
        return;
    };
    let origin = path.display().to_string();
    if let Some(load) = prev.and_then(|p| proc::cpu_load(p, sample.all)) {
        out.push(metric("cpu.load", load, "percent", &origin));
    }
    *prev = Some(sample.all);
    out.push(metric("cpu.count", sample.online as f64, "count", &origin));
}

fn collect_write_rate(w: &mut WriteRate, now: Instant, out: &mut Vec<Metric>) {
    let Some(sectors) = read_text(&w.diskstats).and_then(|t| proc::sectors_written(&t, &w.device))
    else {
        debug!("{}: no line for {}", w.diskstats.display(), w.device);
        return;
    };
    match w.prev {
        Some((then, _)) if now <= then => {
            debug!("disk.write_rate: sample time not after the previous one");
            return;
        }
        Some((then, before)) if sectors >= before => {
            let secs = now.duration_since(then).as_secs_f64();
            let bytes = (sectors - before).saturating_mul(SECTOR_BYTES);
            let origin = format!("{} {}", w.diskstats.display(), w.device);
            out.push(metric(
                "disk.write_rate",
                bytes as f64 / secs,
                "bytes/s",
                &origin,
            ));
        }
        // Counters went backwards (device re-attached): start over.
        _ => {}
    }
    w.prev = Some((now, sectors));
}
