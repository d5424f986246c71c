//! Metrics against an Orin-like fixture tree (tests/data, see its README),
//! against fake NVML answers, and against this machine's own /sys and /proc.

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use edgerec_health::metrics::{
    Collector, GpuQuery, GpuQueryError, Metric, MetricsOptions, NvmlGpu,
};
use tempfile::TempDir;

const NVME: &str =
    "devices/platform/bus@0/14160000.pcie/pci0004:00/0004:00:00.0/0004:01:00.0/nvme/nvme0";

/// A copy of tests/data/orin-{sys,proc} in a temporary directory, with the
/// sysfs symlinks a real Orin has, and a data directory whose st_dev is
/// linked (dev/block/<major>:<minor>) to the fixture's nvme0n1p1.
struct OrinTree {
    _dir: TempDir,
    sys: PathBuf,
    proc: PathBuf,
    data: PathBuf,
}

impl OrinTree {
    fn new() -> OrinTree {
        let dir = tempfile::tempdir().unwrap();
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
        let sys = dir.path().join("sys");
        let proc = dir.path().join("proc");
        let data = dir.path().join("data");
        copy_tree(&fixtures.join("orin-sys"), &sys);
        copy_tree(&fixtures.join("orin-proc"), &proc);
        fs::create_dir(&data).unwrap();

        let link = |target: &str, at: &str| {
            let at = sys.join(at);
            fs::create_dir_all(at.parent().unwrap()).unwrap();
            symlink(target, at).unwrap();
        };
        link(
            "../../devices/platform/17000000.ga10b/devfreq/17000000.ga10b",
            "class/devfreq/17000000.ga10b",
        );
        link(
            "../../../17000000.ga10b",
            "devices/platform/17000000.ga10b/devfreq/17000000.ga10b/device",
        );
        link(&format!("../../{NVME}"), "class/nvme/nvme0");
        link(&format!("../../{NVME}/hwmon1"), "class/hwmon/hwmon1");
        link(
            "../../devices/platform/bus@0/c240000.i2c/i2c-1/1-0040/hwmon/hwmon0",
            "class/hwmon/hwmon0",
        );
        let dev = fs::metadata(&data).unwrap().dev();
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        link(
            &format!("../../{NVME}/nvme0n1/nvme0n1p1"),
            &format!("dev/block/{major}:{minor}"),
        );
        OrinTree {
            _dir: dir,
            sys,
            proc,
            data,
        }
    }

    fn options(&self) -> MetricsOptions {
        MetricsOptions {
            sys_root: self.sys.clone(),
            proc_root: self.proc.clone(),
            data_dir: self.data.clone(),
            nvml: false,
        }
    }

    /// Replaces /proc/stat and /proc/diskstats by the sample taken one
    /// second later (tests/data/orin-proc/next).
    fn next_sample(&self) {
        for f in ["stat", "diskstats"] {
            fs::copy(self.proc.join("next").join(f), self.proc.join(f)).unwrap();
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn find<'a>(metrics: &'a [Metric], name: &str) -> Option<&'a Metric> {
    metrics.iter().find(|m| m.name == name)
}

fn get<'a>(metrics: &'a [Metric], name: &str) -> &'a Metric {
    find(metrics, name).unwrap_or_else(|| panic!("no {name} in {metrics:#?}"))
}

fn source(c: &Collector, family: &str) -> String {
    c.sources()
        .into_iter()
        .find(|(f, _)| *f == family)
        .unwrap_or_else(|| panic!("no family {family}"))
        .1
}

fn nvml_absent() -> Result<Box<dyn GpuQuery>, GpuQueryError> {
    Err(GpuQueryError::Failed(
        "libnvidia-ml.so.1: cannot open shared object file".into(),
    ))
}

/// Answers like NVML would, per metric.
struct FakeGpu {
    load: Result<f64, GpuQueryError>,
    temperature: Result<f64, GpuQueryError>,
    encoder: Result<f64, GpuQueryError>,
}

impl GpuQuery for FakeGpu {
    fn gpu_load(&self) -> Result<f64, GpuQueryError> {
        self.load.clone()
    }
    fn gpu_temperature(&self) -> Result<f64, GpuQueryError> {
        self.temperature.clone()
    }
    fn encoder_load(&self) -> Result<f64, GpuQueryError> {
        self.encoder.clone()
    }
    fn describe(&self) -> String {
        "fake NVML device 0".into()
    }
}

#[test]
fn orin_gpu_load_from_devfreq_per_mille() {
    let tree = OrinTree::new();
    let mut c = Collector::probe_with_gpu(tree.options(), nvml_absent());
    let m = c.collect();
    let load = get(&m, "gpu.load");
    assert_eq!(load.value, 53.7);
    assert_eq!(load.unit, "percent");
    // The class link is resolved: the origin names the device's own file.
    let real = fs::canonicalize(tree.sys.join("devices/platform/17000000.ga10b/load")).unwrap();
    assert_eq!(
        load.origin,
        format!(
            "NVML not available (libnvidia-ml.so.1: cannot open shared object file), using {} (per-mille)",
            real.display()
        )
    );
    assert_eq!(source(&c, "gpu load"), load.origin);
}

#[test]
fn orin_temperatures_from_thermal_zones() {
    let tree = OrinTree::new();
    let mut c = Collector::probe_with_gpu(tree.options(), nvml_absent());
    let m = c.collect();
    for (name, want) in [
        ("thermal.cpu-thermal", 46.437),
        ("thermal.gpu-thermal", 44.812),
        ("thermal.cv0-thermal", 45.218),
        ("thermal.soc0-thermal", 43.5),
        ("thermal.soc1-thermal", 44.093),
        ("thermal.soc2-thermal", 42.75),
        ("thermal.tj-thermal", 46.437),
        ("gpu.temperature", 44.812),
    ] {
        let t = get(&m, name);
        assert!((t.value - want).abs() < 1e-9, "{name}: {}", t.value);
        assert_eq!(t.unit, "degC");
    }
    // cv1/cv2 read -256000 while power-gated: listed, but no value.
    assert!(find(&m, "thermal.cv1-thermal").is_none());
    assert!(find(&m, "thermal.cv2-thermal").is_none());
    assert!(source(&c, "thermal").contains("cv1-thermal"));
    let gpu = get(&m, "gpu.temperature");
    assert!(
        gpu.origin.starts_with("NVML not available ("),
        "{}",
        gpu.origin
    );
    assert!(
        gpu.origin
            .ends_with("thermal_zone1/temp (gpu-thermal, millidegC)"),
        "{}",
        gpu.origin
    );
    assert!(get(&m, "thermal.tj-thermal")
        .origin
        .ends_with("thermal_zone8/temp (millidegC)"));
}

#[test]
fn orin_has_no_encoder_source() {
    let tree = OrinTree::new();
    let mut c = Collector::probe_with_gpu(tree.options(), nvml_absent());
    assert!(find(&c.collect(), "encoder.load").is_none());
    let origin = source(&c, "encoder load");
    assert!(
        origin.starts_with("NVML not available (") && origin.contains("; no source on this board"),
        "{origin}"
    );
}

#[test]
fn nvml_absent_on_this_machine_falls_back_to_sysfs() {
    if let Ok(gpu) = NvmlGpu::init() {
        println!(
            "skipped: NVML initialised here ({}), the absent path is not reachable",
            gpu.describe()
        );
        return;
    }
    let tree = OrinTree::new();
    let mut opts = tree.options();
    opts.nvml = true;
    let mut c = Collector::probe(opts);
    let load = get(&c.collect(), "gpu.load").clone();
    assert_eq!(load.value, 53.7);
    assert!(
        load.origin.starts_with("NVML not available ("),
        "{}",
        load.origin
    );
    assert!(
        load.origin.contains("), using ")
            && load.origin.ends_with("17000000.ga10b/load (per-mille)"),
        "{}",
        load.origin
    );
    println!("gpu load: {}", load.origin);
}

#[test]
fn nvml_disabled_says_so() {
    let tree = OrinTree::new();
    let c = Collector::probe(tree.options());
    assert!(source(&c, "gpu load").starts_with("NVML disabled, using "));
}

#[test]
fn nvml_not_supported_falls_back_per_metric() {
    let tree = OrinTree::new();
    let fake = FakeGpu {
        load: Err(GpuQueryError::NotSupported),
        temperature: Err(GpuQueryError::NotSupported),
        encoder: Ok(12.0),
    };
    let mut c = Collector::probe_with_gpu(tree.options(), Ok(Box::new(fake)));
    let m = c.collect();
    let load = get(&m, "gpu.load");
    assert_eq!(load.value, 53.7);
    assert!(
        load.origin.starts_with("NVML: NotSupported, using ")
            && load.origin.ends_with("17000000.ga10b/load (per-mille)"),
        "{}",
        load.origin
    );
    let temp = get(&m, "gpu.temperature");
    assert_eq!(temp.value, 44.812);
    assert!(
        temp.origin.starts_with("NVML: NotSupported, using "),
        "{}",
        temp.origin
    );
    let enc = get(&m, "encoder.load");
    assert_eq!(enc.value, 12.0);
    assert_eq!(enc.origin, "fake NVML device 0 encoder_utilization()");
}

#[test]
fn nvml_failure_without_sysfs_names_both() {
    let empty = tempfile::tempdir().unwrap();
    let opts = MetricsOptions {
        sys_root: empty.path().to_path_buf(),
        proc_root: empty.path().to_path_buf(),
        data_dir: empty.path().to_path_buf(),
        nvml: true,
    };
    let fake = FakeGpu {
        load: Err(GpuQueryError::Failed("GPU is lost".into())),
        temperature: Err(GpuQueryError::NotSupported),
        encoder: Err(GpuQueryError::NotSupported),
    };
    let mut c = Collector::probe_with_gpu(opts, Ok(Box::new(fake)));
    let m = c.collect();
    assert!(m
        .iter()
        .all(|m| !m.name.starts_with("gpu.") && m.name != "encoder.load"));
    let load = source(&c, "gpu load");
    assert!(
        load.starts_with("NVML: GPU is lost; no devfreq under "),
        "{load}"
    );
    assert!(source(&c, "gpu temperature").starts_with("NVML: NotSupported; no thermal zone"));
}

#[test]
fn nvml_values_win_over_sysfs() {
    let tree = OrinTree::new();
    let fake = FakeGpu {
        load: Ok(97.0),
        temperature: Ok(61.0),
        encoder: Ok(40.0),
    };
    let mut c = Collector::probe_with_gpu(tree.options(), Ok(Box::new(fake)));
    let m = c.collect();
    for (name, value, call) in [
        ("gpu.load", 97.0, "utilization_rates().gpu"),
        ("gpu.temperature", 61.0, "temperature(Gpu)"),
        ("encoder.load", 40.0, "encoder_utilization()"),
    ] {
        let metric = get(&m, name);
        assert_eq!(metric.value, value);
        assert_eq!(metric.origin, format!("fake NVML device 0 {call}"));
    }
    // The thermal zones are still reported on their own.
    assert_eq!(get(&m, "thermal.gpu-thermal").value, 44.812);
}

#[test]
fn cpu_load_from_two_stat_samples() {
    let tree = OrinTree::new();
    let mut c = Collector::probe_with_gpu(tree.options(), nvml_absent());
    let t0 = Instant::now();
    let first = c.collect_at(t0);
    // Same file as at probe: no jiffies passed, so no load yet.
    assert!(find(&first, "cpu.load").is_none());
    assert_eq!(get(&first, "cpu.count").value, 12.0);
    tree.next_sample();
    let m = c.collect_at(t0 + Duration::from_secs(1));
    // busy +450 (user 300, system 130, softirq 20) of 1200 jiffies.
    let load = get(&m, "cpu.load");
    assert_eq!(load.value, 37.5);
    assert_eq!(load.origin, tree.proc.join("stat").display().to_string());
}

#[test]
fn disk_write_rate_from_two_diskstats_samples() {
    let tree = OrinTree::new();
    let mut c = Collector::probe_with_gpu(tree.options(), nvml_absent());
    // Strictly after the probe's own sample, however coarse the clock.
    let t0 = Instant::now() + Duration::from_millis(1);
    let first = c.collect_at(t0);
    assert_eq!(get(&first, "disk.write_rate").value, 0.0);
    tree.next_sample();
    let m = c.collect_at(t0 + Duration::from_secs(1));
    // nvme0n1p1 wrote 409600 sectors of 512 bytes in that second.
    let rate = get(&m, "disk.write_rate");
    assert_eq!(rate.value, 209_715_200.0);
    assert_eq!(rate.unit, "bytes/s");
    assert_eq!(
        rate.origin,
        format!("{} nvme0n1p1", tree.proc.join("diskstats").display())
    );
    // The same instant again gives no rate rather than a division by zero.
    assert!(find(
        &c.collect_at(t0 + Duration::from_secs(1)),
        "disk.write_rate"
    )
    .is_none());
    let idle = c.collect_at(t0 + Duration::from_secs(3));
    assert_eq!(get(&idle, "disk.write_rate").value, 0.0);
}

#[test]
fn memory_from_meminfo() {
    let tree = OrinTree::new();
    let mut c = Collector::probe_with_gpu(tree.options(), nvml_absent());
    let m = c.collect();
    assert_eq!(get(&m, "memory.total").value, 31_330_036.0 * 1024.0);
    assert_eq!(get(&m, "memory.available").value, 27_000_000.0 * 1024.0);
    assert_eq!(get(&m, "memory.used").value, 4_330_036.0 * 1024.0);
    assert_eq!(get(&m, "memory.used").unit, "bytes");
}

#[test]
fn nvme_temperature_of_the_data_drive() {
    let tree = OrinTree::new();
    let mut c = Collector::probe_with_gpu(tree.options(), nvml_absent());
    let t = get(&c.collect(), "nvme.temperature").clone();
    assert_eq!(t.value, 38.85);
    let real = fs::canonicalize(tree.sys.join(NVME).join("hwmon1/temp1_input")).unwrap();
    assert_eq!(t.origin, format!("{} (millidegC)", real.display()));
    assert!(source(&c, "disk write rate").contains("nvme0n1p1"));
}

#[test]
fn broken_files_cost_metrics_not_panics() {
    let tree = OrinTree::new();
    let mut c = Collector::probe_with_gpu(tree.options(), nvml_absent());
    fs::write(
        tree.sys.join("devices/platform/17000000.ga10b/load"),
        "busy\n",
    )
    .unwrap();
    fs::write(
        tree.sys.join("devices/virtual/thermal/thermal_zone1/temp"),
        "",
    )
    .unwrap();
    fs::remove_file(tree.sys.join("devices/virtual/thermal/thermal_zone0/temp")).unwrap();
    fs::write(tree.sys.join(NVME).join("hwmon1/temp1_input"), "\0\0\0").unwrap();
    fs::write(tree.proc.join("stat"), "cpu 1 2 three\n").unwrap();
    fs::write(tree.proc.join("meminfo"), "MemTotal: lots\n").unwrap();
    fs::write(tree.proc.join("diskstats"), [0xff, 0xfe, b'\n']).unwrap();
    let m = c.collect();
    for gone in [
        "gpu.load",
        "gpu.temperature",
        "thermal.cpu-thermal",
        "thermal.gpu-thermal",
        "nvme.temperature",
        "cpu.count",
        "memory.used",
        "disk.write_rate",
    ] {
        assert!(find(&m, gone).is_none(), "{gone} still reported");
    }
    assert!(find(&m, "thermal.tj-thermal").is_some());
    assert!(find(&m, "disk.free").is_some());
}

#[test]
fn disk_space_matches_df() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Collector::probe(MetricsOptions {
        nvml: false,
        ..MetricsOptions::new(dir.path())
    });
    let m = c.collect();
    let free = get(&m, "disk.free").value;
    let total = get(&m, "disk.total").value;
    assert!(free <= total && total > 0.0, "free {free} total {total}");
    assert_eq!(
        get(&m, "disk.free").origin,
        format!("statvfs({})", dir.path().display())
    );
    let df = Command::new("df")
        .args(["-B1", "--output=avail,size"])
        .arg(dir.path())
        .output();
    let Some(df) = df.ok().filter(|o| o.status.success()) else {
        println!("skipped the df comparison: df -B1 --output did not run here");
        return;
    };
    let text = String::from_utf8_lossy(&df.stdout);
    let nums: Vec<f64> = text
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .map(|s| s.parse().unwrap())
        .collect();
    // Other processes write meanwhile: agree within 1% of the size.
    let slack = total * 0.01;
    assert!(
        (nums[0] - free).abs() <= slack,
        "df avail {} vs {free}",
        nums[0]
    );
    assert!(
        (nums[1] - total).abs() <= slack,
        "df size {} vs {total}",
        nums[1]
    );
}

#[test]
fn this_host_without_tegra_gpu_paths() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Collector::probe(MetricsOptions {
        nvml: false,
        ..MetricsOptions::new(dir.path())
    });
    let gpu_load = source(&c, "gpu load");
    if !gpu_load.contains("no devfreq") {
        println!("skipped: this host has a GPU load source: {gpu_load}");
        return;
    }
    let m = c.collect();
    assert!(find(&m, "gpu.load").is_none());
    assert!(find(&m, "encoder.load").is_none());
    assert!(gpu_load.starts_with("NVML disabled; no devfreq under /sys/class/devfreq"));
    assert!(source(&c, "encoder load").contains("no source on this board"));
}

#[test]
fn this_host_cpu_memory_disk_are_plausible() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Collector::probe(MetricsOptions::new(dir.path()));
    for (family, origin) in c.sources() {
        println!("{family}: {origin}");
    }
    let t0 = Instant::now();
    c.collect_at(t0);
    // Burn a little CPU and write a little so the deltas are not all zero.
    let mut x = 0u64;
    while t0.elapsed() < Duration::from_millis(200) {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
    }
    fs::write(dir.path().join("f"), x.to_le_bytes().repeat(1 << 16)).unwrap();
    let m = c.collect();
    for metric in &m {
        println!(
            "{} = {} {} ({})",
            metric.name, metric.value, metric.unit, metric.origin
        );
        assert!(metric.value.is_finite(), "{metric:?}");
    }
    let load = get(&m, "cpu.load").value;
    assert!((0.0..=100.0).contains(&load), "cpu.load {load}");
    let cpus = get(&m, "cpu.count").value;
    assert!((1.0..=4096.0).contains(&cpus), "cpu.count {cpus}");
    let total = get(&m, "memory.total").value;
    let used = get(&m, "memory.used").value;
    let avail = get(&m, "memory.available").value;
    assert!(total > 64.0 * 1024.0 * 1024.0, "memory.total {total}");
    assert!(used > 0.0 && used < total && avail <= total);
    assert!(get(&m, "disk.free").value <= get(&m, "disk.total").value);
    match find(&m, "disk.write_rate") {
        Some(rate) => assert!(rate.value >= 0.0),
        None => println!("no disk.write_rate: {}", source(&c, "disk write rate")),
    }
}

#[test]
fn metrics_serialize_with_their_origin() {
    let m = Metric {
        name: "gpu.load".into(),
        value: 53.7,
        unit: "percent",
        origin: "/sys/devices/platform/17000000.ga10b/load (per-mille)".into(),
    };
    assert_eq!(
        serde_json::to_string(&m).unwrap(),
        r#"{"name":"gpu.load","value":53.7,"unit":"percent","origin":"/sys/devices/platform/17000000.ga10b/load (per-mille)"}"#
    );
}

#[test]
fn sources_name_every_family_once() {
    let tree = OrinTree::new();
    let c = Collector::probe_with_gpu(tree.options(), nvml_absent());
    let families: Vec<&str> = c.sources().iter().map(|(f, _)| *f).collect();
    assert_eq!(
        families,
        [
            "gpu load",
            "gpu temperature",
            "encoder load",
            "thermal",
            "cpu",
            "memory",
            "disk space",
            "disk write rate",
            "nvme temperature",
        ]
    );
    assert!(format!("{c:?}").contains("gpu load"));
}
