//! The recorder's rooms: the directories it may create, replace and remove
//! files in. The configuration file lives on the data partition, which
//! someone with the drive in hand (or a compromised sync job) can edit, so
//! the rooms come from the service instead (its unit's environment, on
//! the read-only root file system), never from the file they confine:
//!
//! - the data directory (`EDGEREC_DATA_DIR`, `/data` on the appliance):
//!   `recording.root`, `health.fault_file`, `offload.journal_dir` and
//!   `remote.journal` must be below it;
//! - the runtime directory (`EDGEREC_RUNTIME_DIR`, `/run/edgerec`, the
//!   unit's `RuntimeDirectory=`): `health.status_socket` and
//!   `health.control_socket` must be below it (or below the data
//!   directory).
//!
//! A path must be absolute and hold no `.` or `..` part, so that what is
//! checked is what is opened. With neither variable set (a developer's
//! machine, the tests) nothing is confined; `edgerec check` says so.

use std::ops::Range;
use std::path::{Component, Path, PathBuf};

use crate::document::{Cx, Table};
use crate::schema::Result;
use crate::Config;

/// The environment variable naming the data directory.
pub const DATA_DIR_VAR: &str = "EDGEREC_DATA_DIR";
/// The environment variable naming the runtime directory.
pub const RUNTIME_DIR_VAR: &str = "EDGEREC_RUNTIME_DIR";

/// The directories the configuration's paths must stay in, and the memory
/// its budgets must fit in; `None`: not confined.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rooms {
    /// The data partition's directory (recordings, fault file, journals).
    pub data: Option<PathBuf>,
    /// The runtime directory (sockets).
    pub runtime: Option<PathBuf>,
    /// The machine's memory in bytes (`MemTotal`): the memory budgets
    /// together may take at most half of it.
    pub memory: Option<u64>,
}

/// The machine's memory from `/proc/meminfo` (`MemTotal`), `None` where it
/// does not say.
pub fn machine_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Whether `path` is absolute and holds no `.` or `..` part.
fn plain_absolute(path: &Path) -> bool {
    path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
}

impl Rooms {
    /// No confinement.
    pub fn none() -> Rooms {
        Rooms::default()
    }

    /// The rooms named by [`DATA_DIR_VAR`] and [`RUNTIME_DIR_VAR`]; an
    /// empty or unset variable confines nothing. A value that is not a
    /// plain absolute path is an error naming the variable.
    pub fn from_env() -> std::result::Result<Rooms, String> {
        let read = |var: &str| -> std::result::Result<Option<PathBuf>, String> {
            match std::env::var_os(var) {
                None => Ok(None),
                Some(v) if v.is_empty() => Ok(None),
                Some(v) => Rooms::room(var, PathBuf::from(v)).map(Some),
            }
        };
        Ok(Rooms {
            data: read(DATA_DIR_VAR)?,
            runtime: read(RUNTIME_DIR_VAR)?,
            memory: None,
        })
    }

    /// `dir` as a room named `what` in errors: absolute, no `.` or `..`,
    /// not `/` itself.
    pub fn room(what: &str, dir: PathBuf) -> std::result::Result<PathBuf, String> {
        if !plain_absolute(&dir) || dir == Path::new("/") {
            return Err(format!(
                "{what}={}: the recorder's rooms are absolute directories below / with no `.` or `..` parts (the appliance's are /data and /run/edgerec)",
                dir.display()
            ));
        }
        Ok(dir)
    }

    /// Whether any directory is confined.
    pub fn any(&self) -> bool {
        self.data.is_some() || self.runtime.is_some()
    }

    /// These rooms, with the budgets held to `memory` bytes too.
    pub fn with_memory(mut self, memory: Option<u64>) -> Rooms {
        self.memory = memory;
        self
    }

    /// One line for `edgerec check`: which rooms the paths were held to.
    pub fn describe(&self) -> String {
        let room = |p: &Option<PathBuf>| {
            p.as_ref()
                .map_or_else(|| "not confined".to_owned(), |p| p.display().to_string())
        };
        let paths = if self.any() {
            format!(
                "paths held to data {} and runtime {}",
                room(&self.data),
                room(&self.runtime)
            )
        } else {
            format!("paths not confined: {DATA_DIR_VAR} and {RUNTIME_DIR_VAR} are not set, as the service sets them")
        };
        match self.memory {
            Some(m) => format!(
                "{paths}; memory budgets within half of this machine's {} MiB",
                m / (1024 * 1024)
            ),
            None => paths,
        }
    }
}

/// Which rooms a key's path must be in.
#[derive(Clone, Copy)]
enum Allowed {
    Data,
    RuntimeOrData,
}

/// Refuses every path of `config` that leaves its rooms, at the key's line
/// and column (or, for a default the file does not set, naming the key),
/// and memory budgets that do not fit in the machine's memory.
pub(crate) fn check(cx: &Cx, root: &Table, config: &Config, rooms: &Rooms) -> Result<()> {
    if let Some(memory) = rooms.memory {
        fits_memory(cx, root, config, memory)?;
    }
    if !rooms.any() {
        return Ok(());
    }
    let keys: [(&str, &str, &Path, Allowed, &str); 6] = [
        (
            "recording",
            "root",
            &config.recording.root,
            Allowed::Data,
            "edgerec/recordings",
        ),
        (
            "health",
            "fault_file",
            &config.health.fault_file,
            Allowed::Data,
            "edgerec/last-fault.json",
        ),
        (
            "offload",
            "journal_dir",
            &config.offload.journal_dir,
            Allowed::Data,
            "edgerec/offload-journal",
        ),
        (
            "remote",
            "journal",
            &config.remote.journal,
            Allowed::Data,
            "edgerec/remote-commands.jsonl",
        ),
        (
            "health",
            "status_socket",
            &config.health.status_socket,
            Allowed::RuntimeOrData,
            "status.sock",
        ),
        (
            "health",
            "control_socket",
            &config.health.control_socket,
            Allowed::RuntimeOrData,
            "control.sock",
        ),
    ];
    // Device and sysfs paths edgerec writes to: the watchdog device node
    // and the LEDs' attributes.
    for (table, key, path, under, example) in [
        (
            "health",
            "watchdog",
            &config.health.watchdog,
            "/dev",
            "/dev/watchdog0",
        ),
        (
            "leds",
            "sysfs_root",
            &config.leds.sysfs_root,
            "/sys",
            "/sys/class/leds",
        ),
    ] {
        if path.as_os_str().is_empty() || (plain_absolute(path) && path.starts_with(under)) {
            continue;
        }
        let field = root.field_in(table, key);
        return Err(cx.error(
            field.as_ref().and_then(|f| f.span()),
            Some(format!("{table}.{key}")),
            format!(
                "`{}` is not below {under}: the recorder writes there, so under the service it must be the kernel's",
                path.display()
            ),
            Some(format!("write \"{example}\" or the board's own path below {under}")),
        ));
    }
    for (table, key, path, allowed, example) in keys {
        // Empty: the feature is off, nothing is made.
        if path.as_os_str().is_empty() {
            continue;
        }
        let dirs: Vec<&PathBuf> = match allowed {
            Allowed::Data => rooms.data.iter().collect(),
            Allowed::RuntimeOrData => rooms.runtime.iter().chain(rooms.data.iter()).collect(),
        };
        if dirs.is_empty() {
            continue;
        }
        let inside = plain_absolute(path) && dirs.iter().any(|d| path.starts_with(d) && path != *d);
        if inside {
            continue;
        }
        let field = root.field_in(table, key);
        let span: Option<Range<usize>> = field.as_ref().and_then(|f| f.span());
        let names: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        let what = if field.is_some() {
            format!("`{}`", path.display())
        } else {
            format!("the default `{}`", path.display())
        };
        let why = if plain_absolute(path) {
            "is outside"
        } else {
            "is not a plain absolute path (no `.` or `..`) inside"
        };
        let room_names = match allowed {
            Allowed::Data => "the data directory",
            Allowed::RuntimeOrData if rooms.runtime.is_some() && rooms.data.is_some() => {
                "the runtime or data directory"
            }
            Allowed::RuntimeOrData if rooms.runtime.is_some() => "the runtime directory",
            Allowed::RuntimeOrData => "the data directory",
        };
        return Err(cx.error(
            span,
            Some(format!("{table}.{key}")),
            format!(
                "{what} {why} {room_names} ({}): the recorder makes, replaces and removes files only there",
                names.join(", ")
            ),
            Some(format!(
                "write a path under {}, such as \"{}\"",
                names[0],
                Path::new(names[0].as_str()).join(example).display()
            )),
        ));
    }
    Ok(())
}

/// `pipeline.memory_budget`, and `triggers.memory_budget` when a rule
/// needs the pre-roll ring, together at most half of `memory`: the rest is
/// the robot's (its perception, planning and drivers run beside the
/// recorder). Blamed on the larger budget.
fn fits_memory(cx: &Cx, root: &Table, config: &Config, memory: u64) -> Result<()> {
    let pipeline = config.pipeline.memory_budget;
    let pre_roll = if config.trigger.is_empty() {
        0
    } else {
        config.triggers.memory_budget
    };
    let limit = memory / 2;
    if pipeline.saturating_add(pre_roll) <= limit {
        return Ok(());
    }
    let (table, key) = if pre_roll > pipeline {
        ("triggers", "memory_budget")
    } else {
        ("pipeline", "memory_budget")
    };
    let field = root.field_in(table, key);
    let mib = |b: u64| b / (1024 * 1024);
    Err(cx.error(
        field.as_ref().and_then(|f| f.span()),
        Some(format!("{table}.{key}")),
        format!(
            "the memory budgets take {} MiB (pipeline {} MiB{}), more than half of this machine's {} MiB",
            mib(pipeline.saturating_add(pre_roll)),
            mib(pipeline),
            if pre_roll > 0 {
                format!(" + pre-roll {} MiB", mib(pre_roll))
            } else {
                String::new()
            },
            mib(memory)
        ),
        Some(format!(
            "lower {table}.{key} so that the budgets together stay under {} MiB",
            mib(limit)
        )),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rooms() -> Rooms {
        Rooms {
            data: Some(PathBuf::from("/data")),
            runtime: Some(PathBuf::from("/run/edgerec")),
            memory: None,
        }
    }

    #[test]
    fn memory_budgets_fit_in_half_the_machine() {
        let gib = 1024 * 1024 * 1024;
        let on = |memory: u64, text: &str| {
            Config::parse_in(
                text,
                Path::new("edgerec.toml"),
                &Rooms::none().with_memory(Some(memory)),
            )
        };
        // The defaults on a 2 GiB board.
        on(2 * gib, "").unwrap();
        let err = on(
            32 * gib,
            "[pipeline]
memory_budget = \"20GiB\"\n",
        )
        .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("pipeline.memory_budget"));
        assert_eq!(err.line, Some(2));
        assert!(
            err.to_string()
                .contains("more than half of this machine's 32768 MiB"),
            "{err}"
        );
        // The pre-roll ring counts only when a rule needs it.
        let rule = "[[trigger]]\nname = \"low_battery\"\ntopic = \"/battery\"\nwhen = \"voltage < 12.1\"\n";
        on(32 * gib, "[triggers]\nmemory_budget = \"20GiB\"\n").unwrap();
        let err = on(
            32 * gib,
            &format!(
                "[recording]\nmode = \"triggered\"\n[triggers]\nmemory_budget = \"20GiB\"\n{rule}"
            ),
        )
        .unwrap_err();
        assert_eq!(err.key.as_deref(), Some("triggers.memory_budget"), "{err}");
        assert!(err.to_string().contains("+ pre-roll 20480 MiB"), "{err}");
        assert!(machine_memory().is_some_and(|m| m > 0));
    }

    fn parse(text: &str) -> std::result::Result<Config, crate::ConfigError> {
        Config::parse_in(text, Path::new("edgerec.toml"), &rooms())
    }

    #[test]
    fn the_shipped_defaults_are_inside_the_appliances_rooms() {
        parse("").unwrap();
        parse("[health]\ncontrol_socket = \"/run/edgerec/control.sock\"\n").unwrap();
        parse("[health]\nstatus_socket = \"/data/edgerec/status.sock\"\nfault_file = \"\"\n")
            .unwrap();
    }

    #[test]
    fn a_path_outside_its_room_is_refused_at_its_line() {
        let err = parse("[health]\n\nfault_file = \"/etc/cron.d/evil\"\n").unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        assert_eq!(err.key.as_deref(), Some("health.fault_file"));
        let text = err.to_string();
        assert!(
            text.contains("`/etc/cron.d/evil` is outside the data directory (/data)")
                && text.contains("\"/data/edgerec/last-fault.json\""),
            "{text}"
        );
        // A socket may not be made where it would replace a system file.
        let err = parse("[health]\ncontrol_socket = \"/etc/passwd\"\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("health.control_socket"));
        assert!(
            err.to_string()
                .contains("outside the runtime or data directory (/run/edgerec, /data)"),
            "{err}"
        );
        let err = parse("[recording]\nroot = \"/var/lib\"\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("recording.root"));
        let err = parse("[offload]\njournal_dir = \"/tmp/j\"\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("offload.journal_dir"));
        let err = parse("[remote]\njournal = \"/root/j\"\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("remote.journal"));
    }

    #[test]
    fn the_watchdog_and_the_leds_are_the_kernels() {
        let err = parse("[health]\nwatchdog = \"/etc/shadow\"\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("health.watchdog"));
        assert_eq!(err.line, Some(2));
        let err = parse("[leds]\nsysfs_root = \"/etc\"\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("leds.sysfs_root"), "{err}");
        let err = parse("[leds]\nsysfs_root = \"/sys/../etc\"\n").unwrap_err();
        assert_eq!(err.key.as_deref(), Some("leds.sysfs_root"), "{err}");
        parse("[health]\nwatchdog = \"\"\n[leds]\nsysfs_root = \"/sys/class/leds\"\n").unwrap();
    }

    #[test]
    fn dot_dot_relative_and_the_room_itself_are_refused() {
        for bad in [
            "/data/../etc/shadow",
            "/data/./x/../../etc",
            "data/edgerec/f.json",
            "/data",
            "/database/f.json",
        ] {
            let err = parse(&format!("[health]\nfault_file = \"{bad}\"\n")).unwrap_err();
            assert_eq!(
                err.key.as_deref(),
                Some("health.fault_file"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn a_default_outside_other_rooms_is_named_without_a_line() {
        let rooms = Rooms {
            data: Some(PathBuf::from("/mnt/nvme")),
            runtime: None,
            memory: None,
        };
        let err = Config::parse_in("", Path::new("edgerec.toml"), &rooms).unwrap_err();
        assert_eq!(err.line, None);
        assert_eq!(err.key.as_deref(), Some("recording.root"));
        assert!(
            err.to_string()
                .contains("the default `/data/edgerec/recordings` is outside"),
            "{err}"
        );
    }

    #[test]
    fn no_rooms_confine_nothing_and_bad_rooms_are_refused() {
        Config::parse_in(
            "[health]\nfault_file = \"/tmp/f.json\"\n",
            Path::new("edgerec.toml"),
            &Rooms::none(),
        )
        .unwrap();
        for bad in ["/", "relative", "/data/../etc"] {
            let err = Rooms::room(DATA_DIR_VAR, PathBuf::from(bad)).unwrap_err();
            assert!(err.starts_with("EDGEREC_DATA_DIR="), "{err}");
        }
        assert_eq!(
            Rooms::room(DATA_DIR_VAR, PathBuf::from("/data")).unwrap(),
            PathBuf::from("/data")
        );
    }
}
