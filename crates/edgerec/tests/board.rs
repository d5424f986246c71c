//! The board files (`board/<board>/`, issue 6): what the image bakes in
//! must agree with itself, with the board's `edgerec.toml` and with the real
//! `edgerec` binary, and every value must be explained in the board's
//! `TUNING.md`. Each relation checked here is one that TUNING.md argues
//! for (the systemd watchdog restarting a stalled recorder before the
//! hardware watchdog resets the board, the I/O class having a scheduler
//! that honours it, the status socket living in the unit's runtime
//! directory, ...), so a change to one file that breaks it fails here.
//!
//! External tools are used where present and skipped with a printed reason
//! where not: `systemd-analyze verify`, Debian's `ptp4l` (parsing the
//! configuration on a non-existent interface, free-running: no clock and
//! no network is touched) and `phc2sys -h`, `wipefs`/`blkid`/`mkfs.ext4`
//! (the first-boot scripts run on image files), and a loop mount (root).
//! Nothing here opens a watchdog or adjusts a clock.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use edgerec_config::{Config, HEALTH_STATES};

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

/// The files the Yocto recipe installs from every board directory (the
/// layout contract in board/README.md).
const LAYOUT: &[&str] = &[
    "edgerec.toml",
    "kernel-cmdline",
    "udev/60-edgerec-nvme.rules",
    "udev/61-edgerec-devices.rules",
    "sysusers.d/edgerec.conf",
    "sysctl.d/60-edgerec-dds.conf",
    "systemd/edgerec.service",
    "systemd/edgerec-seed-config.service",
    "systemd/data.mount",
    "systemd/data-makefs.service",
    "systemd/ptp4l-edgerec.service",
    "systemd/phc2sys-edgerec.service",
    "systemd/edgerec-fstrim.service",
    "systemd/edgerec-fstrim.timer",
    "systemd/edgerec-fault-led.service",
    "systemd/edgerec-journal-on-data.service",
    "journald.conf.d/60-edgerec.conf",
    "linuxptp/ptp4l.conf",
    "TUNING.md",
];

/// I/O schedulers that honour I/O priorities (`IOSchedulingClass=`);
/// `none` and kyber do not.
const PRIORITY_SCHEDULERS: &[&str] = &["mq-deadline", "bfq"];

/// The APST settings TUNING.md weighs: 0 turns APST off, 5500 drops only
/// the deepest power state.
const APST_CHOICES: &[&str] = &["0", "5500"];

/// `edgerec run`'s exit status for a configuration error (sysexits
/// EX_CONFIG, README "Using it").
const EXIT_CONFIG: &str = "78";

// ---------------------------------------------------------------------
// Boards and files

struct Board {
    name: String,
    dir: PathBuf,
}

impl Board {
    fn file(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    fn read(&self, rel: &str) -> String {
        let p = self.file(rel);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    fn config(&self) -> Config {
        // Exactly what `edgerec run --config <file>` does first.
        let p = self.file("edgerec.toml");
        Config::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    fn unit(&self, name: &str) -> Unit {
        Unit::load(&self.file(&format!("systemd/{name}")))
    }

    /// The directory of the board whose file `rel` really is (symlinks
    /// followed): where its TUNING.md explains it.
    fn home_of(&self, rel: &str) -> PathBuf {
        let real = canonical(&self.file(rel));
        let boards = canonical(&boards_dir());
        let sub = real
            .strip_prefix(&boards)
            .unwrap_or_else(|_| panic!("{} leads outside board/", self.file(rel).display()));
        let first = sub.components().next().expect("a board directory");
        boards.join(first.as_os_str())
    }
}

fn boards_dir() -> PathBuf {
    edgerec_testkit::workspace_root().join("board")
}

fn boards() -> Vec<Board> {
    let dir = boards_dir();
    let mut out: Vec<Board> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_dir())
        .map(|p| Board {
            name: p
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned(),
            dir: p,
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(
        out.iter().any(|b| b.name == "jetson-agx-orin"),
        "board/jetson-agx-orin is missing"
    );
    out
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Whether `path` is `base` or below it, component by component.
fn is_under(path: &Path, base: &Path) -> bool {
    path.starts_with(base)
}

fn span(text: &str) -> Duration {
    parse_span(text).unwrap_or_else(|| panic!("`{text}` is not a systemd time span"))
}

/// A systemd time span (`3s`, `5min`, `1min 30s`, `300` = seconds).
fn parse_span(text: &str) -> Option<Duration> {
    let t = text.trim();
    if t.is_empty() {
        return None;
    }
    if let Ok(secs) = t.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let mut total = Duration::ZERO;
    let mut rest = t;
    while !rest.is_empty() {
        rest = rest.trim_start();
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = rest[digits..].trim_start();
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c.is_whitespace())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let secs = match unit {
            "us" | "usec" => 1e-6,
            "ms" | "msec" => 1e-3,
            "" | "s" | "sec" | "second" | "seconds" => 1.0,
            "m" | "min" | "minute" | "minutes" => 60.0,
            "h" | "hr" | "hour" | "hours" => 3600.0,
            "d" | "day" | "days" => 86400.0,
            _ => return None,
        };
        total += Duration::from_secs_f64(number * secs);
    }
    Some(total)
}

/// A systemd resource-limit size (`64M` = 64 MiB, `infinity`); None for
/// infinity.
fn parse_limit_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    if t == "infinity" {
        return None;
    }
    let (num, mult) = match t.chars().last() {
        Some('K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        Some('T') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .unwrap_or_else(|_| panic!("`{text}` is not a size"));
    Some(n * mult)
}

// ---------------------------------------------------------------------
// systemd unit files

struct Entry {
    section: String,
    key: String,
    value: String,
}

struct Unit {
    name: String,
    entries: Vec<Entry>,
}

impl Unit {
    /// Parses a unit file the way systemd reads one: `[Section]` headers,
    /// `Key=Value` lines, `#`/`;` comments, and lines ending in a backslash
    /// joined to the next with a space (comment lines inside such a
    /// continuation are skipped).
    fn load(path: &Path) -> Unit {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut entries = Vec::new();
        let mut section = String::new();
        let mut pending: Option<String> = None;
        for raw in text.lines() {
            let line = raw.trim();
            let is_comment = line.starts_with('#') || line.starts_with(';');
            let logical = match pending.take() {
                Some(mut acc) => {
                    if is_comment {
                        pending = Some(acc);
                        continue;
                    }
                    acc.push(' ');
                    acc.push_str(line);
                    acc
                }
                None => {
                    if line.is_empty() || is_comment {
                        continue;
                    }
                    line.to_owned()
                }
            };
            if let Some(stripped) = logical.strip_suffix('\\') {
                pending = Some(stripped.to_owned());
                continue;
            }
            if logical.starts_with('[') && logical.ends_with(']') {
                section = logical[1..logical.len() - 1].to_owned();
                continue;
            }
            let (key, value) = logical
                .split_once('=')
                .unwrap_or_else(|| panic!("{}: not a Key=Value line: {logical}", path.display()));
            entries.push(Entry {
                section: section.clone(),
                key: key.trim().to_owned(),
                value: value.trim().to_owned(),
            });
        }
        assert!(
            pending.is_none(),
            "{}: ends inside a continuation",
            path.display()
        );
        Unit {
            name: path
                .file_name()
                .expect("a file name")
                .to_string_lossy()
                .into_owned(),
            entries,
        }
    }

    fn values(&self, section: &str, key: &str) -> Vec<&str> {
        self.entries
            .iter()
            .filter(|e| e.section == section && e.key == key)
            .map(|e| e.value.as_str())
            .collect()
    }

    /// The value of a key that must appear exactly once.
    fn one(&self, section: &str, key: &str) -> &str {
        match self.values(section, key).as_slice() {
            [v] => v,
            [] => panic!("{}: [{section}] {key}= is missing", self.name),
            more => panic!(
                "{}: [{section}] {key}= is set {} times",
                self.name,
                more.len()
            ),
        }
    }

    fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.values(section, key).last().copied()
    }

    /// A list-valued key (After=, Wants=, ...): every word of every
    /// occurrence.
    fn words(&self, section: &str, key: &str) -> Vec<String> {
        self.values(section, key)
            .iter()
            .flat_map(|v| v.split_whitespace().map(str::to_owned))
            .collect()
    }

    /// `ExecStart=` (or another Exec key) as argv.
    fn argv(&self, key: &str) -> Vec<String> {
        exec_argv(self.one("Service", key))
    }
}

/// Splits an `Exec*=` value into argv as systemd does for what these
/// units use: an optional prefix (`-@:+!`) on the program, words separated
/// by white space, `'...'` and `"..."` quoting, `$$` for `$` and `%%` for
/// `%`. Environment variable expansion and specifiers are refused: the
/// tests below run these command lines, and would run them wrong.
fn exec_argv(value: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut chars = value.trim().chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut word = String::new();
        match c {
            '\'' | '"' => {
                chars.next();
                let mut closed = false;
                for d in chars.by_ref() {
                    if d == c {
                        closed = true;
                        break;
                    }
                    word.push(d);
                }
                assert!(closed, "unterminated quote in `{value}`");
            }
            _ => {
                while let Some(&d) = chars.peek() {
                    if d.is_whitespace() {
                        break;
                    }
                    word.push(d);
                    chars.next();
                }
            }
        }
        args.push(unescape_systemd(&word, value));
    }
    if let Some(first) = args.first_mut() {
        let program = first
            .trim_start_matches(['-', '@', ':', '+', '!'])
            .to_owned();
        *first = program;
    }
    args
}

fn unescape_systemd(word: &str, whole: &str) -> String {
    let mut out = String::new();
    let mut it = word.chars().peekable();
    while let Some(c) = it.next() {
        match (c, it.peek().copied()) {
            ('$', Some('$')) => {
                it.next();
                out.push('$');
            }
            ('$', Some(n)) if n.is_ascii_alphanumeric() || n == '{' || n == '_' => {
                panic!("environment expansion in `{whole}`: extend exec_argv to run it")
            }
            ('%', Some('%')) => {
                it.next();
                out.push('%');
            }
            ('%', _) => panic!("a specifier in `{whole}`: extend exec_argv to run it"),
            _ => out.push(c),
        }
    }
    out
}

/// The value after `flag` (`--config X`, `-c X` or `--config=X`).
fn flag_value<'a>(argv: &'a [String], long: &str, short: &str) -> Option<&'a str> {
    let prefix = format!("{long}=");
    argv.iter().enumerate().find_map(|(i, a)| {
        if a == long || a == short {
            argv.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(&prefix)
        }
    })
}

/// The script and the shell flags of an `ExecStart=/bin/sh [flags] -c
/// 'script'` line.
fn shell_script(unit: &Unit) -> (Vec<String>, String) {
    let argv = unit.argv("ExecStart");
    assert_eq!(
        argv[0], "/bin/sh",
        "{}: ExecStart is not a /bin/sh script",
        unit.name
    );
    let c = argv
        .iter()
        .position(|a| a == "-c")
        .unwrap_or_else(|| panic!("{}: no -c in ExecStart", unit.name));
    let flags = argv[1..c].to_vec();
    let script = argv
        .get(c + 1)
        .unwrap_or_else(|| panic!("{}: nothing after -c", unit.name))
        .clone();
    (flags, script)
}

// ---------------------------------------------------------------------
// udev

struct UdevRule {
    matches: Vec<(String, String, String)>,
    assigns: Vec<(String, String)>,
}

/// The rules of a udev rules file: `KEY=="v"`/`KEY!="v"` matches and
/// `KEY="v"` assignments, continuation lines joined.
fn udev_rules(path: &Path) -> Vec<UdevRule> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut logical = Vec::new();
    let mut acc = String::new();
    for line in text.lines() {
        let l = line.trim();
        if acc.is_empty() && (l.is_empty() || l.starts_with('#')) {
            continue;
        }
        match l.strip_suffix('\\') {
            Some(part) => acc.push_str(part),
            None => {
                acc.push_str(l);
                logical.push(std::mem::take(&mut acc));
            }
        }
    }
    logical
        .iter()
        .map(|rule| {
            let mut matches = Vec::new();
            let mut assigns = Vec::new();
            for part in rule.split(',') {
                let part = part.trim();
                let (key, op, value) = ["==", "!=", "+=", ":=", "="]
                    .iter()
                    .find_map(|op| part.split_once(op).map(|(k, v)| (k, *op, v)))
                    .unwrap_or_else(|| panic!("{}: cannot read `{part}`", path.display()));
                let value = value.trim().trim_matches('"').to_owned();
                let key = key.trim().to_owned();
                if op == "==" || op == "!=" {
                    matches.push((key, op.to_owned(), value));
                } else {
                    assigns.push((key, value));
                }
            }
            UdevRule { matches, assigns }
        })
        .collect()
}

impl UdevRule {
    /// Whether the rule's KERNEL, SUBSYSTEM and ENV{DEVTYPE} matches accept
    /// a block device of that name and type on `add`.
    fn applies_to(&self, kernel: &str, devtype: &str) -> bool {
        self.matches.iter().all(|(key, op, pattern)| {
            let subject = match key.as_str() {
                "KERNEL" => kernel,
                "SUBSYSTEM" => "block",
                "ENV{DEVTYPE}" => devtype,
                "ACTION" => "add",
                other => panic!("the test does not know udev match key {other}"),
            };
            let hit = pattern.split('|').any(|alt| glob(alt, subject));
            (op == "==") == hit
        })
    }

    fn attr(&self, name: &str) -> Option<&str> {
        let key = format!("ATTR{{{name}}}");
        self.assigns
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// fnmatch as udev uses it: `*`, `?` and `[...]` classes with ranges.
fn glob(pattern: &str, text: &str) -> bool {
    fn go(p: &[char], t: &[char]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some('*') => (0..=t.len()).any(|i| go(&p[1..], &t[i..])),
            Some('?') => !t.is_empty() && go(&p[1..], &t[1..]),
            Some('[') => {
                let Some(end) = p.iter().position(|&c| c == ']') else {
                    return false;
                };
                let Some(&c) = t.first() else {
                    return false;
                };
                let class = &p[1..end];
                let mut hit = false;
                let mut i = 0;
                while i < class.len() {
                    if i + 2 < class.len() && class[i + 1] == '-' {
                        hit |= class[i] <= c && c <= class[i + 2];
                        i += 3;
                    } else {
                        hit |= class[i] == c;
                        i += 1;
                    }
                }
                hit && go(&p[end + 1..], &t[1..])
            }
            Some(&c) => t.first() == Some(&c) && go(&p[1..], &t[1..]),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    go(&p, &t)
}

/// The board's NVMe rule: the one that sets the scheduler.
fn nvme_rule(board: &Board) -> UdevRule {
    let path = board.file("udev/60-edgerec-nvme.rules");
    let mut rules: Vec<UdevRule> = udev_rules(&path)
        .into_iter()
        .filter(|r| r.attr("queue/scheduler").is_some())
        .collect();
    assert_eq!(
        rules.len(),
        1,
        "{}: exactly one rule sets queue/scheduler",
        path.display()
    );
    rules.remove(0)
}

// ---------------------------------------------------------------------
// ptp4l configuration

struct PtpConf {
    /// (section, key, value), in file order; section "global" or a port.
    items: Vec<(String, String, String)>,
}

impl PtpConf {
    fn load(path: &Path) -> PtpConf {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut items = Vec::new();
        let mut section = String::new();
        for line in text.lines() {
            let l = line.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            if let Some(name) = l.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                section = name.trim().to_owned();
                continue;
            }
            assert!(
                !section.is_empty(),
                "{}: `{l}` before any section",
                path.display()
            );
            let mut words = l.split_whitespace();
            let key = words.next().expect("a key").to_owned();
            let value = words.collect::<Vec<_>>().join(" ");
            items.push((section.clone(), key, value));
        }
        PtpConf { items }
    }

    fn global(&self, key: &str) -> Option<&str> {
        self.items
            .iter()
            .rev()
            .find(|(s, k, _)| s == "global" && k == key)
            .map(|(_, _, v)| v.as_str())
    }

    /// A port's setting, else the global one.
    fn port(&self, port: &str, key: &str) -> Option<&str> {
        self.items
            .iter()
            .rev()
            .find(|(s, k, _)| s == port && k == key)
            .map(|(_, _, v)| v.as_str())
            .or_else(|| self.global(key))
    }

    fn ports(&self) -> BTreeSet<&str> {
        self.items
            .iter()
            .map(|(s, _, _)| s.as_str())
            .filter(|s| *s != "global")
            .collect()
    }
}

// ---------------------------------------------------------------------
// Running things

/// PATH with the sbin directories, where Debian keeps ptp4l, mkfs and
/// blkid (not on an unprivileged user's PATH).
fn sbin_path() -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    format!("{path}:/usr/local/sbin:/usr/sbin:/sbin")
}

/// The first of `tools` missing on [`sbin_path`], if any.
fn missing_tool(tools: &[&str]) -> Option<String> {
    tools
        .iter()
        .find(|t| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {t}")])
                .env("PATH", sbin_path())
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .map(|t| (*t).to_owned())
}

#[track_caller]
fn skip(test: &str, why: &str) {
    edgerec_testkit::skip::skip(format!("{test}: {why}"));
}

fn output_text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `cmd`, killing it after `limit`; the output and whether it was
/// still running.
fn run_for(cmd: &mut Command, limit: Duration) -> (Output, bool) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let start = Instant::now();
    let mut killed = false;
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            killed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (
        child.wait_with_output().expect("the child's output"),
        killed,
    )
}

// ---------------------------------------------------------------------
// The tests

#[test]
fn every_board_has_the_layout_the_recipe_installs() {
    let boards_root = canonical(&boards_dir());
    for board in boards() {
        for rel in LAYOUT {
            let p = board.file(rel);
            assert!(p.exists(), "{}: missing (or a broken symlink)", p.display());
            // Shared files are relative symlinks inside board/, so that git
            // keeps them and any checkout resolves them.
            if let Ok(target) = std::fs::read_link(&p) {
                assert!(
                    target.is_relative(),
                    "{}: a symlink must be relative, not {}",
                    p.display(),
                    target.display()
                );
                assert!(
                    canonical(&p).starts_with(&boards_root),
                    "{}: points outside board/",
                    p.display()
                );
            }
        }
    }
    let orin = boards_dir().join("jetson-agx-orin/systemd/jetson-clocks.service");
    assert!(
        orin.exists(),
        "the Orin ships jetson-clocks.service (installed disabled)"
    );
}

#[test]
fn board_configs_load_and_hold_what_the_appliance_needs() {
    let can_exec = !edgerec_testkit::skip_if_cannot_exec(BIN);
    for board in boards() {
        let cfg = board.config();
        let b = &board.name;
        let data = Path::new("/data");
        assert!(
            is_under(&cfg.recording.root, data),
            "{b}: recordings must be on the data partition, not {}",
            cfg.recording.root.display()
        );
        // The fault file is read after the reset it announces.
        assert!(
            is_under(&cfg.health.fault_file, data),
            "{b}: fault_file must survive a reset (on /data): {}",
            cfg.health.fault_file.display()
        );
        assert!(
            cfg.health.watchdog.starts_with("/dev/"),
            "{b}: the appliance runs with a hardware watchdog, got `{}`",
            cfg.health.watchdog.display()
        );
        // A healthy storage stage can be silent for a chunk's age plus a
        // sync; twice that must not count as a stall.
        let healthy_silence = cfg.storage.sync_interval + cfg.mcap.chunk_max_age;
        assert!(
            cfg.health.stage_deadline >= healthy_silence * 2,
            "{b}: stage_deadline {:?} is within twice a healthy sync cycle {:?}",
            cfg.health.stage_deadline,
            healthy_silence
        );
        // LEDs: every health state shown, names that can be sysfs entries.
        let leds_named = cfg.leds.states.iter().any(|(_, leds)| !leds.is_empty());
        if b == "jetson-agx-orin" {
            assert!(leds_named, "{b}: the Orin's carrier LEDs must be named");
        }
        if leds_named {
            for state in HEALTH_STATES {
                assert!(
                    cfg.leds
                        .states
                        .iter()
                        .any(|(s, leds)| s.as_str() == state && !leds.is_empty()),
                    "{b}: no LED pattern for health state `{state}`"
                );
            }
            for (_, leds) in &cfg.leds.states {
                for (name, _) in leds {
                    assert!(
                        !name.is_empty()
                            && name != "."
                            && name != ".."
                            && name
                                .chars()
                                .all(|c| c.is_ascii_alphanumeric() || ":_.+-".contains(c)),
                        "{b}: `{name}` cannot be an LED class directory name"
                    );
                }
            }
        }
        // The status socket lives in the directory systemd makes for the
        // unit (RuntimeDirectory= under /run).
        let unit = board.unit("edgerec.service");
        let runtime = unit.one("Service", "RuntimeDirectory");
        assert_eq!(
            cfg.health.status_socket.parent(),
            Some(Path::new("/run").join(runtime).as_path()),
            "{b}: status_socket {} is not in RuntimeDirectory=/run/{runtime}",
            cfg.health.status_socket.display()
        );

        // `edgerec check` (the binary's own validation) accepts the file.
        if !can_exec {
            continue;
        }
        let out = Command::new(BIN)
            .arg("check")
            .arg(board.file("edgerec.toml"))
            .output()
            .expect("edgerec check");
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).starts_with("OK"),
            "{b}: edgerec check: {}",
            output_text(&out)
        );
    }
}

#[test]
fn a_broken_config_on_data_fails_the_unit_and_lights_the_fault_led() {
    let can_exec = !edgerec_testkit::skip_if_cannot_exec(BIN);
    for board in boards() {
        let b = &board.name;
        let unit = board.unit("edgerec.service");
        // A configuration error is a failed unit at once (never
        // restarted), and a failed recorder or /data starts the LED unit.
        assert!(
            unit.words("Service", "RestartPreventExitStatus")
                .contains(&EXIT_CONFIG.to_owned()),
            "{b}"
        );
        for u in ["edgerec.service", "data.mount"] {
            assert_eq!(
                board.unit(u).words("Unit", "OnFailure"),
                ["edgerec-fault-led.service"],
                "{b}: {u}"
            );
        }
        let led_unit = board.unit("edgerec-fault-led.service");
        assert_eq!(led_unit.one("Service", "Type"), "oneshot", "{b}");
        let argv = led_unit.argv("ExecStart");
        assert_eq!(argv[..3], ["/usr/bin/edgerec", "leds", "fault"], "{b}");
        let recorder_argv = unit.argv("ExecStart");
        let data_config = flag_value(&recorder_argv, "--config", "-c").expect("--config");
        assert_eq!(
            flag_value(&argv, "--config", "-c"),
            Some(data_config),
            "{b}: the LED unit reads the recorder's configuration first"
        );
        assert_eq!(
            flag_value(&argv, "--fallback", "--fallback"),
            Some("/usr/share/edgerec/edgerec.toml"),
            "{b}: the fallback is the board default the recipe installs"
        );
        if !can_exec {
            continue;
        }

        // The same on files: a broken edgerec.toml on "/data", the board's
        // default as the fallback with its LEDs under a fake sysfs.
        let d = tempfile::tempdir().expect("tempdir");
        let leds = d.path().join("leds");
        let cfg = board.config();
        let mut names: Vec<&String> = cfg
            .leds
            .states
            .iter()
            .flat_map(|(_, l)| l.iter().map(|(n, _)| n))
            .collect();
        names.sort();
        names.dedup();
        for n in &names {
            std::fs::create_dir_all(leds.join(n)).expect("led dir");
            std::fs::write(leds.join(n).join("max_brightness"), "255\n").expect("max");
            // Lit before: the fault state must put out what it does not name.
            std::fs::write(leds.join(n).join("brightness"), "255\n").expect("brightness");
            std::fs::write(leds.join(n).join("trigger"), "[none] timer\n").expect("trigger");
        }
        let default = board.read("edgerec.toml");
        let fallback = d.path().join("default.toml");
        if cfg.leds.states.is_empty() {
            // A board without LEDs: its default as it is.
            std::fs::write(&fallback, &default).expect("fallback");
        } else {
            let sysfs_line = format!("sysfs_root = \"{}\"", cfg.leds.sysfs_root.display());
            assert!(default.contains(&sysfs_line), "{b}: {sysfs_line}");
            std::fs::write(
                &fallback,
                default.replace(&sysfs_line, &format!("sysfs_root = \"{}\"", leds.display())),
            )
            .expect("fallback");
        }
        let broken = d.path().join("edgerec.toml");
        std::fs::write(
            &broken,
            "[recording]\nroot = \"/data/edgerec/recordings\"\nsplit_size = 1\n",
        )
        .expect("broken");

        // edgerec.service's command fails with EX_CONFIG, naming the line.
        let run = Command::new(BIN)
            .args(["run", "--config"])
            .arg(&broken)
            .output()
            .expect("edgerec run");
        let err = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(78), "{b}: {}", output_text(&run));
        assert!(
            err.contains("split_size") && err.contains(":3"),
            "{b}: {err}"
        );

        // edgerec-fault-led.service's command, with the two paths moved.
        let mut led_argv: Vec<String> = argv[1..].to_vec();
        for a in led_argv.iter_mut() {
            if a.as_str() == data_config {
                *a = broken.display().to_string();
            } else if a.as_str() == "/usr/share/edgerec/edgerec.toml" {
                *a = fallback.display().to_string();
            }
        }
        let out = Command::new(BIN)
            .args(&led_argv)
            .output()
            .expect("edgerec leds");
        assert!(out.status.success(), "{b}: {}", output_text(&out));
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("did not load"), "{b}: {said}");
        if cfg.leds.states.is_empty() {
            assert!(said.contains("nothing shown"), "{b}: {said}");
            continue;
        }
        assert!(said.contains("fault shown on"), "{b}: {said}");
        let fault: Vec<&String> = cfg
            .leds
            .states
            .iter()
            .find(|(s, _)| s == "fault")
            .map(|(_, l)| l.iter().map(|(n, _)| n).collect())
            .expect("a fault pattern");
        assert!(!fault.is_empty(), "{b}: the fault state lights nothing");
        for n in &names {
            let bright = std::fs::read_to_string(leds.join(n).join("brightness")).expect("read");
            let trigger = std::fs::read_to_string(leds.join(n).join("trigger")).expect("read");
            let lit = bright.trim() != "0" || trigger.trim() == "timer";
            assert_eq!(
                lit,
                fault.contains(n),
                "{b}: LED {n} after `edgerec leds fault`: brightness {bright:?}, trigger {trigger:?}"
            );
        }
    }
}

#[test]
fn recorder_unit_matches_the_config_and_the_binary() {
    let can_exec = !edgerec_testkit::skip_if_cannot_exec(BIN);
    for board in boards() {
        let b = &board.name;
        let cfg = board.config();
        let unit = board.unit("edgerec.service");
        let seed = board.unit("edgerec-seed-config.service");

        // How systemd runs it: notify from the main process, the real CLI.
        assert_eq!(unit.one("Service", "Type"), "notify", "{b}");
        assert_eq!(
            unit.one("Service", "NotifyAccess"),
            "main",
            "{b}: edgerec notifies from its own process only"
        );
        let argv = unit.argv("ExecStart");
        assert_eq!(argv[0], "/usr/bin/edgerec", "{b}");
        assert_eq!(argv.get(1).map(String::as_str), Some("run"), "{b}");
        let config_path = flag_value(&argv, "--config", "-c")
            .unwrap_or_else(|| panic!("{b}: ExecStart names no --config"));
        let (_, seed_script) = shell_script(&seed);
        assert!(
            seed_script.contains(config_path)
                && seed_script.contains("/usr/share/edgerec/edgerec.toml"),
            "{b}: the seed service must create {config_path}, the file ExecStart reads"
        );
        assert!(
            seed.words("Unit", "Before")
                .contains(&"edgerec.service".to_owned()),
            "{b}: the seed runs before the recorder"
        );
        if can_exec {
            // clap rejects an unknown flag before it prints help.
            let out = Command::new(BIN)
                .args(&argv[1..])
                .arg("--help")
                .output()
                .expect("edgerec --help");
            assert!(
                out.status.success(),
                "{b}: the built edgerec refuses ExecStart's arguments {:?}: {}",
                &argv[1..],
                output_text(&out)
            );
        }

        // The rooms the unit holds the configuration's paths to: the data
        // partition and the unit's own runtime directory; the board's
        // configuration stays in them.
        let env: Vec<String> = unit.words("Service", "Environment");
        let var = |name: &str| {
            env.iter()
                .find_map(|w| w.strip_prefix(&format!("{name}=")))
                .map(PathBuf::from)
                .unwrap_or_else(|| panic!("{b}: the unit sets no Environment={name}=..."))
        };
        let rooms = edgerec_config::Rooms {
            data: Some(var(edgerec_config::DATA_DIR_VAR)),
            runtime: Some(var(edgerec_config::RUNTIME_DIR_VAR)),
            memory: None,
        };
        assert_eq!(rooms.data.as_deref(), Some(Path::new("/data")), "{b}");
        assert_eq!(
            rooms.runtime.clone(),
            Some(Path::new("/run").join(unit.one("Service", "RuntimeDirectory"))),
            "{b}: the runtime room is the unit's RuntimeDirectory"
        );
        if let Err(e) = Config::load_in(&board.file("edgerec.toml"), &rooms) {
            panic!("{b}: the board's configuration leaves the unit's rooms: {e}");
        }

        // The systemd watchdog restarts a stalled recorder before the
        // hardware watchdog resets the board: from the stall's detection
        // the hardware has the timeout less one keepalive period (a
        // quarter); systemd needs WatchdogSec to notice, TimeoutAbortSec
        // for the core dump, RestartSec, and about a second to start and
        // re-arm the device.
        let timeout = cfg.health.watchdog_timeout;
        let hardware_left = timeout - timeout / 4;
        let w = span(unit.one("Service", "WatchdogSec"));
        let abort = span(
            unit.get("Service", "TimeoutAbortSec")
                .or_else(|| unit.get("Service", "TimeoutStopSec"))
                .unwrap_or("90s"),
        );
        let restart = span(unit.one("Service", "RestartSec"));
        let start_up = Duration::from_secs(1);
        assert!(
            w + abort + restart + start_up <= hardware_left,
            "{b}: WatchdogSec {w:?} + abort {abort:?} + RestartSec {restart:?} + start-up \
             {start_up:?} exceeds the {hardware_left:?} the hardware watchdog leaves \
             (watchdog_timeout {timeout:?})"
        );
        // edgerec notifies every WatchdogSec/2; at least a second apart.
        assert!(
            w >= Duration::from_secs(2),
            "{b}: WatchdogSec {w:?} too short"
        );

        assert_eq!(unit.one("Service", "Restart"), "always", "{b}");
        assert!(
            unit.words("Service", "RestartPreventExitStatus")
                .iter()
                .any(|s| s == EXIT_CONFIG),
            "{b}: a configuration error (exit {EXIT_CONFIG}) must not restart"
        );
        // The start limit lives in [Unit] (systemd ignores it in
        // [Service]) and must be reachable by a crash loop.
        let interval = span(unit.one("Unit", "StartLimitIntervalSec"));
        let burst: u32 = unit
            .one("Unit", "StartLimitBurst")
            .parse()
            .expect("StartLimitBurst is a number");
        assert!(
            restart * burst < interval,
            "{b}: {burst} restarts {restart:?} apart never fit in {interval:?}"
        );

        // Start-up may recover an unfinished segment (a sequential read of
        // a whole segment and its preallocated tail) before READY=1; allow
        // it at 50 MB/s, a failing drive.
        let recovery_bytes = cfg.segment.max_bytes + cfg.storage.preallocate;
        let recovery = Duration::from_secs_f64(recovery_bytes as f64 / 50e6);
        let start_limit = span(unit.one("Service", "TimeoutStartSec"));
        assert!(
            start_limit >= recovery,
            "{b}: TimeoutStartSec {start_limit:?} < recovery of one segment at 50 MB/s {recovery:?}"
        );
        // A clean stop drains the memory budget (at a throttled 100 MB/s)
        // and syncs.
        let drain = Duration::from_secs_f64(cfg.pipeline.memory_budget as f64 / 100e6)
            + cfg.storage.sync_interval * 2;
        let stop_limit = span(unit.one("Service", "TimeoutStopSec"));
        assert!(
            stop_limit >= drain,
            "{b}: TimeoutStopSec {stop_limit:?} < draining the budget {drain:?}"
        );
        // Both signals make edgerec close its files cleanly.
        let kill = unit.get("Service", "KillSignal").unwrap_or("SIGTERM");
        assert!(
            kill == "SIGTERM" || kill == "SIGINT",
            "{b}: KillSignal={kill} is not one edgerec stops cleanly on"
        );

        // I/O and CPU priority.
        let io_class = unit.one("Service", "IOSchedulingClass");
        assert_eq!(io_class, "realtime", "{b}: ionice -c1");
        assert_eq!(
            unit.one("Service", "IOSchedulingPriority"),
            "0",
            "{b}: ionice -n0"
        );
        let policy = unit
            .get("Service", "CPUSchedulingPolicy")
            .unwrap_or("other");
        assert!(
            policy != "fifo" && policy != "rr",
            "{b}: real-time CPU scheduling for the whole service starves the kernel threads \
             fdatasync needs (TUNING.md); it belongs to the storage thread"
        );
        if cfg.storage.realtime_priority > 0 {
            // edgerec sets SCHED_FIFO on its storage threads itself.
            let caps = unit.get("Service", "CapabilityBoundingSet").unwrap_or("");
            assert!(
                caps.is_empty() || caps.split_whitespace().any(|c| c == "CAP_SYS_NICE"),
                "{b}: storage.realtime_priority = {} needs CAP_SYS_NICE in \
                 CapabilityBoundingSet ({caps})",
                cfg.storage.realtime_priority
            );
        }
        let memlock = parse_limit_bytes(unit.one("Service", "LimitMEMLOCK"));
        let pool = u64::from(cfg.storage.queue_depth) * cfg.storage.block_size;
        assert!(
            memlock.is_none_or(|m| m >= pool),
            "{b}: LimitMEMLOCK {memlock:?} below the registered-buffer pool {pool}"
        );
        let oom: i32 = unit
            .one("Service", "OOMScoreAdjust")
            .parse()
            .expect("OOMScoreAdjust is a number");
        assert!(
            (-999..0).contains(&oom),
            "{b}: OOMScoreAdjust {oom}: protected, but still killable if it leaks"
        );

        // Every path on /data the recorder uses is covered by
        // RequiresMountsFor=.
        let mounts = unit.words("Unit", "RequiresMountsFor");
        for path in [
            cfg.recording.root.as_path(),
            cfg.health.fault_file.as_path(),
            Path::new(config_path),
        ] {
            assert!(
                mounts.iter().any(|m| is_under(path, Path::new(m))),
                "{b}: {} is not under any RequiresMountsFor= ({mounts:?})",
                path.display()
            );
        }
        // Ordered after (and wanting) the seed and the PTP units this board
        // ships; after the clock was set, never waiting for a PTP lock.
        let after = unit.words("Unit", "After");
        let wants = unit.words("Unit", "Wants");
        for dep in [
            "edgerec-seed-config.service",
            "ptp4l-edgerec.service",
            "phc2sys-edgerec.service",
        ] {
            assert!(board.file(&format!("systemd/{dep}")).exists(), "{b}: {dep}");
            assert!(after.iter().any(|a| a == dep), "{b}: not After={dep}");
            assert!(wants.iter().any(|a| a == dep), "{b}: not Wants={dep}");
        }
        assert!(
            after.iter().any(|a| a == "time-set.target"),
            "{b}: After=time-set.target"
        );
        assert!(
            !after.iter().any(|a| a == "time-sync.target"),
            "{b}: recording must not wait for a clock lock"
        );

        // Least privilege that leaves what the recorder uses usable: the
        // system user, the two capabilities it uses, /data, its runtime
        // directory, the LEDs it drives and the devices it opens.
        let yes = |key: &str| {
            unit.get("Service", key)
                .is_some_and(|v| ["yes", "true", "1", "on"].contains(&v))
        };
        assert_eq!(
            unit.get("Service", "User"),
            Some("edgerec"),
            "{b}: the recorder runs as the system user edgerec"
        );
        let ambient = unit.words("Service", "AmbientCapabilities");
        let bounding = unit.words("Service", "CapabilityBoundingSet");
        for cap in &ambient {
            assert!(
                ["CAP_IPC_LOCK", "CAP_SYS_NICE"].contains(&cap.as_str()),
                "{b}: ambient {cap}: only io_uring's memlock and SCHED_FIFO are used"
            );
            assert!(bounding.contains(cap), "{b}: {cap} ambient but not bounded");
        }
        if cfg.storage.realtime_priority > 0 {
            assert!(
                ambient.iter().any(|c| c == "CAP_SYS_NICE"),
                "{b}: storage.realtime_priority = {} needs AmbientCapabilities=CAP_SYS_NICE",
                cfg.storage.realtime_priority
            );
        }
        let read_write = unit.words("Service", "ReadWritePaths");
        let writable = |path: &Path| {
            read_write
                .iter()
                .any(|w| is_under(path, Path::new(w.trim_start_matches('-'))))
        };
        if unit.get("Service", "ProtectSystem") == Some("strict") {
            let runtime = Path::new("/run").join(unit.one("Service", "RuntimeDirectory"));
            for (key, path) in [
                ("recording.root", cfg.recording.root.as_path()),
                ("health.fault_file", cfg.health.fault_file.as_path()),
            ] {
                assert!(
                    writable(path),
                    "{b}: {key} {} is read-only under ProtectSystem=strict: \
                     add it to ReadWritePaths= ({read_write:?})",
                    path.display()
                );
            }
            for (key, path) in [
                ("health.status_socket", cfg.health.status_socket.as_path()),
                ("health.control_socket", cfg.health.control_socket.as_path()),
            ] {
                assert!(
                    path.as_os_str().is_empty() || is_under(path, &runtime) || writable(path),
                    "{b}: {key} {} is neither in {} nor writable",
                    path.display(),
                    runtime.display()
                );
            }
        }
        if yes("ProtectKernelTunables") {
            // /sys is read-only but for each LED the board names.
            for (_, leds) in &cfg.leds.states {
                for (name, _) in leds {
                    let dir = cfg.leds.sysfs_root.join(name);
                    assert!(
                        read_write
                            .iter()
                            .any(|w| w.trim_start_matches('-') == dir.as_os_str()),
                        "{b}: LED {} is read-only under ProtectKernelTunables: \
                         add ReadWritePaths=-{}",
                        dir.display(),
                        dir.display()
                    );
                }
            }
        }
        if unit.get("Service", "DevicePolicy").is_some() {
            let allowed = unit.values("Service", "DeviceAllow").join(" ");
            let mut needs = vec![];
            if !cfg.health.watchdog.as_os_str().is_empty() {
                needs.push("char-watchdog");
            }
            // The PHC that ptp4l disciplines, read for the status.
            if board.file("systemd/ptp4l-edgerec.service").exists() {
                needs.push("char-ptp");
            }
            for need in needs {
                assert!(
                    allowed.contains(need),
                    "{b}: DevicePolicy without DeviceAllow={need}: {allowed}"
                );
            }
        }
        assert!(
            !yes("PrivateDevices"),
            "{b}: PrivateDevices hides /dev/watchdog0 and the PHC"
        );
        // The memory budgets and the program fit under MemoryHigh, below
        // MemoryMax.
        let high = unit
            .get("Service", "MemoryHigh")
            .and_then(parse_limit_bytes);
        let max = unit.get("Service", "MemoryMax").and_then(parse_limit_bytes);
        if let (Some(high), Some(max)) = (high, max) {
            let need = cfg.pipeline.memory_budget + cfg.triggers.memory_budget + (512 << 20);
            assert!(
                need <= high && high < max,
                "{b}: the budgets (pipeline {} + triggers {} + 512 MiB for the program = {need}) \
                 must fit under MemoryHigh {high}, below MemoryMax {max}",
                cfg.pipeline.memory_budget,
                cfg.triggers.memory_budget
            );
        }
    }
}

#[test]
fn udev_rule_schedules_whole_nvme_disks_as_the_unit_needs() {
    for board in boards() {
        let b = &board.name;
        let rule = nvme_rule(&board);
        assert!(
            rule.applies_to("nvme0n1", "disk"),
            "{b}: the rule misses nvme0n1"
        );
        assert!(
            rule.applies_to("nvme1n2", "disk"),
            "{b}: the rule misses nvme1n2"
        );
        assert!(
            !rule.applies_to("nvme0n1p1", "partition"),
            "{b}: partitions have no queue of their own"
        );
        assert!(
            !rule.applies_to("nvme0c0n1", "disk"),
            "{b}: multipath's per-path node must be left alone"
        );
        assert!(!rule.applies_to("sda", "disk"), "{b}: only NVMe");

        let scheduler = rule.attr("queue/scheduler").expect("a scheduler");
        let unit = board.unit("edgerec.service");
        let realtime = unit.get("Service", "IOSchedulingClass") == Some("realtime");
        assert_eq!(
            PRIORITY_SCHEDULERS.contains(&scheduler),
            realtime,
            "{b}: scheduler `{scheduler}` with IOSchedulingClass={:?}: a real-time I/O class \
             needs a scheduler that honours priorities, and such a scheduler is chosen for it",
            unit.get("Service", "IOSchedulingClass")
        );
        assert_eq!(
            rule.attr("queue/wbt_lat_usec"),
            Some("0"),
            "{b}: writeback throttling off (TUNING.md)"
        );
        let ra: u64 = rule
            .attr("queue/read_ahead_kb")
            .expect("read_ahead_kb")
            .parse()
            .expect("read_ahead_kb is a number");
        assert!(ra >= 128, "{b}: read-ahead below the kernel's default");
    }
}

#[test]
fn kernel_cmdline_is_one_line_with_the_apst_choice() {
    for board in boards() {
        let text = board.read("kernel-cmdline");
        let b = &board.name;
        assert!(
            text.ends_with('\n') && text.matches('\n').count() == 1,
            "{b}: kernel-cmdline must be exactly one line"
        );
        let args: Vec<&str> = text.split_whitespace().collect();
        assert!(!args.is_empty(), "{b}: empty kernel-cmdline");
        let apst: Vec<&str> = args
            .iter()
            .filter_map(|a| a.strip_prefix("nvme_core.default_ps_max_latency_us="))
            .collect();
        assert_eq!(
            apst.len(),
            1,
            "{b}: one nvme_core.default_ps_max_latency_us="
        );
        assert!(
            APST_CHOICES.contains(&apst[0]),
            "{b}: APST value {} is not one TUNING.md weighs ({APST_CHOICES:?})",
            apst[0]
        );
    }
}

#[test]
fn ptp_configuration_agrees_with_the_clock_and_phc2sys() {
    for board in boards() {
        let b = &board.name;
        let cfg = board.config();
        let conf = PtpConf::load(&board.file("linuxptp/ptp4l.conf"));
        // ptp4l's management socket is a port that inherits global port
        // settings: a global transportSpecific makes it ignore edgerec's
        // (and phc2sys's) management messages.
        assert!(
            conf.global("transportSpecific")
                .is_none_or(|v| v == "0" || v == "0x0"),
            "{b}: transportSpecific belongs in the port section"
        );
        let ports = conf.ports();
        assert_eq!(ports.len(), 1, "{b}: one PTP port, got {ports:?}");
        let uds = conf.global("uds_address").expect("uds_address is named");
        let domain = conf.global("domainNumber").unwrap_or("0");

        let phc2sys = board.unit("phc2sys-edgerec.service").argv("ExecStart");
        assert_eq!(
            flag_value(&phc2sys, "-z", "-z"),
            Some(uds),
            "{b}: phc2sys -z"
        );
        assert_eq!(
            flag_value(&phc2sys, "-n", "-n"),
            Some(domain),
            "{b}: phc2sys -n"
        );
        assert!(phc2sys.iter().any(|a| a == "-a"), "{b}: phc2sys -a");
        assert_eq!(
            phc2sys.iter().filter(|a| *a == "-r").count(),
            1,
            "{b}: one -r: the system clock is a sink, never a source"
        );
        let ptp4l = board.unit("ptp4l-edgerec.service").argv("ExecStart");
        assert_eq!(
            flag_value(&ptp4l, "-f", "-f"),
            Some("/etc/linuxptp/edgerec-ptp4l.conf"),
            "{b}: where the recipe installs linuxptp/ptp4l.conf"
        );

        // The ptp4l unit allows no IP traffic (IPAddressDeny=any): every
        // port speaks layer 2 (UDP is linuxptp's default).
        let ptp4l_unit = board.unit("ptp4l-edgerec.service");
        if ptp4l_unit.get("Service", "IPAddressDeny") == Some("any") {
            for port in &ports {
                assert_eq!(
                    conf.port(port, "network_transport"),
                    Some("L2"),
                    "{b}: port {port}: ptp4l-edgerec.service denies IP (IPAddressDeny=any)"
                );
            }
        }

        let wrong = clock_disagreements(&conf, &cfg);
        assert!(wrong.is_empty(), "{b}: {}", wrong.join("; "));
    }

    // The check itself, on the Orin's files: naming ptp4l's port in
    // clock.phc agrees, naming another interface does not.
    let orin = boards_dir().join("jetson-agx-orin");
    let conf = PtpConf::load(&orin.join("linuxptp/ptp4l.conf"));
    let mut cfg = Config::load(&orin.join("edgerec.toml")).expect("the Orin's config");
    let port = conf.ports().into_iter().next().expect("a port").to_owned();
    cfg.clock.phc = port.clone();
    assert!(clock_disagreements(&conf, &cfg).is_empty());
    cfg.clock.phc = format!("{port}x");
    assert_eq!(clock_disagreements(&conf, &cfg).len(), 1);
    cfg.clock.phc = String::new();
    cfg.clock.domain = cfg.clock.domain.wrapping_add(1);
    assert_eq!(clock_disagreements(&conf, &cfg).len(), 1);
}

/// Where edgerec's `[clock]` contradicts ptp4l's configuration: the
/// management socket and domain it asks (when it asks at all), and the
/// interface whose PHC it watches (when it names one).
fn clock_disagreements(conf: &PtpConf, cfg: &Config) -> Vec<String> {
    let mut wrong = Vec::new();
    let uds = conf.global("uds_address").unwrap_or("/var/run/ptp4l");
    let uds_ro = conf.global("uds_ro_address").unwrap_or("/var/run/ptp4lro");
    let domain = conf.global("domainNumber").unwrap_or("0");
    if !cfg.clock.ptp4l_socket.as_os_str().is_empty() {
        // The read-only socket: the recorder only asks, as an unprivileged
        // user, and ptp4l's read-write socket is root's (mode 0660).
        if cfg.clock.ptp4l_socket != Path::new(uds_ro) {
            wrong.push(format!(
                "clock.ptp4l_socket {} is not ptp4l's read-only uds_ro_address {uds_ro} \
                 (uds_address {uds} is root's)",
                cfg.clock.ptp4l_socket.display()
            ));
        }
        if cfg.clock.domain.to_string() != domain {
            wrong.push(format!(
                "clock.domain {} is not ptp4l's domainNumber {domain}",
                cfg.clock.domain
            ));
        }
    }
    let ports = conf.ports();
    if !cfg.clock.phc.is_empty()
        && !cfg.clock.phc.starts_with('/')
        && !ports.contains(cfg.clock.phc.as_str())
    {
        wrong.push(format!(
            "clock.phc `{}` is not ptp4l's port {ports:?}",
            cfg.clock.phc
        ));
    }
    wrong
}

#[test]
fn ptp4l_and_phc2sys_accept_the_configuration() {
    let test = "ptp4l_and_phc2sys_accept_the_configuration";
    if let Some(tool) = missing_tool(&["ptp4l", "phc2sys"]) {
        return skip(test, &format!("{tool} is not installed (Debian: linuxptp)"));
    }
    let mut seen = BTreeSet::new();
    for board in boards() {
        let conf_path = canonical(&board.file("linuxptp/ptp4l.conf"));
        if seen.insert(conf_path.clone()) {
            let dir = tempfile::tempdir().expect("tempdir");
            // The port renamed to an interface that does not exist (ptp4l
            // parses every option, then fails to create the clock), the
            // socket moved, and free-running: nothing real is touched.
            let text = std::fs::read_to_string(&conf_path).expect("ptp4l.conf");
            let mut copy = String::new();
            for line in text.lines() {
                let l = line.trim();
                if l.starts_with('[') && l != "[global]" {
                    copy.push_str("[edgerec-none0]\n");
                } else if l.starts_with("uds_address") {
                    copy.push_str(&format!("uds_address {}\n", dir.path().join("s").display()));
                } else {
                    copy.push_str(line);
                    copy.push('\n');
                    if l == "[global]" {
                        copy.push_str("free_running 1\n");
                    }
                }
            }
            let copy_path = dir.path().join("ptp4l.conf");
            std::fs::write(&copy_path, copy).expect("write the copy");
            let (out, _) = run_for(
                Command::new("ptp4l")
                    .env("PATH", sbin_path())
                    .arg("-f")
                    .arg(&copy_path)
                    .args(["-S", "-m"]),
                Duration::from_secs(3),
            );
            let said = output_text(&out);
            for bad in [
                "failed to parse configuration",
                "unknown option",
                "bad value",
            ] {
                assert!(
                    !said.contains(bad),
                    "{}: ptp4l refuses it: {said}",
                    conf_path.display()
                );
            }
        }
    }
    // phc2sys: every flag the unit passes is one it documents.
    let help = Command::new("phc2sys")
        .env("PATH", sbin_path())
        .arg("-h")
        .output()
        .expect("phc2sys -h");
    let help = output_text(&help);
    for board in boards() {
        let argv = board.unit("phc2sys-edgerec.service").argv("ExecStart");
        for flag in argv.iter().filter(|a| a.starts_with('-')) {
            assert!(
                help.lines()
                    .any(|l| l.trim_start().starts_with(&format!("{flag} "))),
                "{}: phc2sys has no {flag}",
                board.name
            );
        }
    }
}

#[test]
fn seed_service_never_overwrites_the_users_configuration() {
    let test = "seed_service_never_overwrites_the_users_configuration";
    let mut seen = BTreeSet::new();
    for board in boards() {
        let unit_path = canonical(&board.file("systemd/edgerec-seed-config.service"));
        if !seen.insert(unit_path.clone()) {
            continue;
        }
        let unit = Unit::load(&unit_path);
        assert_eq!(unit.one("Service", "Type"), "oneshot");
        assert!(unit
            .words("Unit", "RequiresMountsFor")
            .contains(&"/data".to_owned()));
        let (flags, script) = shell_script(&unit);
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_string_lossy().into_owned();
        assert!(!root.contains("/data/") && !root.contains("/usr/share/"));
        // The recorder's user is not on this machine: root stands in.
        assert!(
            script.contains("owner=edgerec:edgerec;"),
            "the seed gives /data/edgerec to the recorder's user"
        );
        let script = script
            .replace("/data/", &format!("{root}/data/"))
            .replace("/usr/share/edgerec/", &format!("{root}/usr/share/edgerec/"))
            .replace("owner=edgerec:edgerec;", "owner=root:root;");
        let shipped = dir.path().join("usr/share/edgerec/edgerec.toml");
        std::fs::create_dir_all(shipped.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&shipped, board.read("edgerec.toml")).expect("write");
        // An earlier image's tree, owned by another user, holding a link
        // to a file outside: the tree changes hands, the file outside
        // does not.
        let old_tree = dir.path().join("data/edgerec/recordings/old-session");
        std::fs::create_dir_all(&old_tree).expect("mkdir");
        let outside = dir.path().join("outside");
        std::fs::write(&outside, "not the recorder's").expect("write");
        std::os::unix::fs::symlink(&outside, old_tree.join("link")).expect("symlink");
        let stranger = 4242;
        // Only root can give files away (these tests run as root).
        let mut as_root = true;
        for p in [
            dir.path().join("data/edgerec"),
            dir.path().join("data/edgerec/recordings"),
            old_tree.clone(),
            outside.clone(),
        ] {
            as_root &= std::os::unix::fs::chown(&p, Some(stranger), Some(stranger)).is_ok();
        }
        let seeded = dir.path().join("data/edgerec/edgerec.toml");
        let run = || {
            Command::new("sh")
                .args(&flags)
                .arg("-c")
                .arg(&script)
                .output()
                .expect("sh")
        };

        // First boot: seeded, whole, recordings directory made.
        let out = run();
        assert!(out.status.success(), "{test}: {}", output_text(&out));
        assert_eq!(
            std::fs::read(&seeded).expect("seeded"),
            std::fs::read(&shipped).expect("shipped")
        );
        assert!(dir.path().join("data/edgerec/recordings").is_dir());
        assert!(!dir.path().join("data/edgerec/.edgerec.toml.seed").exists());
        if as_root {
            use std::os::unix::fs::MetadataExt;
            for p in ["data/edgerec", "data/edgerec/recordings/old-session"] {
                let m = std::fs::symlink_metadata(dir.path().join(p)).expect("stat");
                assert_eq!(
                    (m.uid(), m.gid()),
                    (0, 0),
                    "{p}: given to the recorder's user"
                );
            }
            let m = std::fs::metadata(&outside).expect("stat");
            assert_eq!(m.uid(), stranger, "the seed's chown followed a link");
        }

        // The user's edit survives every later boot.
        std::fs::write(&seeded, "# the user's\n").expect("edit");
        let out = run();
        assert!(out.status.success(), "{test}: {}", output_text(&out));
        assert_eq!(
            std::fs::read_to_string(&seeded).expect("read"),
            "# the user's\n"
        );

        // A symlink in its place (even a dangling one) is not followed
        // and not replaced.
        std::fs::remove_file(&seeded).expect("rm");
        let elsewhere = dir.path().join("elsewhere.toml");
        std::os::unix::fs::symlink(&elsewhere, &seeded).expect("symlink");
        let out = run();
        assert!(out.status.success(), "{test}: {}", output_text(&out));
        assert_eq!(
            std::fs::read_link(&seeded).expect("still a symlink"),
            elsewhere
        );
        assert!(!elsewhere.exists(), "the seed wrote through a symlink");
    }
}

#[test]
fn makefs_formats_only_a_blank_nvme_partition() {
    let test = "makefs_formats_only_a_blank_nvme_partition";
    if let Some(tool) = missing_tool(&["wipefs", "blkid", "mkfs.ext4", "mkswap", "dumpe2fs"]) {
        return skip(
            test,
            &format!("{tool} is not installed (util-linux, e2fsprogs)"),
        );
    }
    let mut seen = BTreeSet::new();
    for board in boards() {
        let unit_path = canonical(&board.file("systemd/data-makefs.service"));
        if !seen.insert(unit_path.clone()) {
            continue;
        }
        let unit = Unit::load(&unit_path);
        let mount = board.unit("data.mount");
        // The same device for both, and the mount after the decision.
        let what = mount.one("Mount", "What");
        let (flags, script) = shell_script(&unit);
        assert!(script.contains(what), "data-makefs does not probe {what}");
        assert!(mount
            .words("Unit", "After")
            .contains(&"data-makefs.service".to_owned()));
        assert!(unit
            .words("Unit", "Before")
            .contains(&"data.mount".to_owned()));

        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_string_lossy().into_owned();
        assert!(!root.contains("/dev/"));
        let script = script
            .replace("/dev/disk/", &format!("{root}/dev/disk/"))
            .replace("/dev/nvme", &format!("{root}/dev/nvme"));
        let link = PathBuf::from(what.replace("/dev/", &format!("{root}/dev/")));
        std::fs::create_dir_all(link.parent().expect("a parent")).expect("mkdir");
        let image = |name: &str| {
            let p = dir.path().join("dev").join(name);
            std::fs::File::create(&p)
                .and_then(|f| f.set_len(64 << 20))
                .expect("image");
            p
        };
        let point_at = |target: &Path| {
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(target, &link).expect("symlink");
        };
        let run = || {
            Command::new("sh")
                .env("PATH", sbin_path())
                .args(&flags)
                .arg("-c")
                .arg(&script)
                .output()
                .expect("sh")
        };
        let probe = |p: &Path| {
            let o = Command::new("blkid")
                .env("PATH", sbin_path())
                .args(["-p", "-o", "export"])
                .arg(p)
                .output()
                .expect("blkid");
            String::from_utf8_lossy(&o.stdout).into_owned()
        };

        // Blank: ext4, labelled, no reserved blocks, one inode per MiB.
        let blank = image("nvme0n1p9");
        point_at(&blank);
        let out = run();
        assert!(out.status.success(), "{test}: {}", output_text(&out));
        let first = probe(&blank);
        assert!(
            first.contains("TYPE=ext4") && first.contains("LABEL=DATA"),
            "{first}"
        );
        let dump = Command::new("dumpe2fs")
            .env("PATH", sbin_path())
            .arg("-h")
            .arg(&blank)
            .output()
            .expect("dumpe2fs");
        let dump = String::from_utf8_lossy(&dump.stdout).into_owned();
        let field = |name: &str| -> u64 {
            dump.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("dumpe2fs has no {name}"))
        };
        assert_eq!(field("Reserved block count:"), 0, "-m 0");
        assert!(field("Inode count:") <= 64, "about one inode per MiB");

        // Again: the file system is left exactly as it is.
        let out = run();
        assert!(out.status.success(), "{test}: {}", output_text(&out));
        assert_eq!(probe(&blank), first, "the second boot reformatted");

        // Something else (here swap) is never formatted.
        let swap = image("nvme0n2p1");
        let made = Command::new("mkswap")
            .env("PATH", sbin_path())
            .arg("-q")
            .arg(&swap)
            .output()
            .expect("mkswap");
        assert!(made.status.success(), "{}", output_text(&made));
        point_at(&swap);
        let out = run();
        assert!(out.status.success(), "{test}: {}", output_text(&out));
        assert!(probe(&swap).contains("TYPE=swap"), "swap was overwritten");

        // A DATA partition that is not on an NVMe drive is refused.
        let stick = image("sda1");
        point_at(&stick);
        let out = run();
        assert!(
            !out.status.success(),
            "a non-NVMe DATA partition was accepted"
        );
        assert!(probe(&stick).is_empty(), "a non-NVMe partition was written");

        mount_options_are_accepted(test, &mount, &blank, dir.path());
    }
}

/// Mounts the image made above with data.mount's options (root and a loop
/// device needed; otherwise a printed skip): ext4 must accept every one.
fn mount_options_are_accepted(test: &str, mount: &Unit, image: &Path, dir: &Path) {
    assert_eq!(mount.one("Mount", "Type"), "ext4");
    assert_eq!(mount.one("Mount", "Where"), "/data");
    let options = mount.one("Mount", "Options");
    assert!(
        !options.split(',').any(|o| o == "discard"),
        "online discard: see TUNING.md (fstrim.timer instead)"
    );
    // SAFETY: geteuid(2) has no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return skip(
            test,
            "mounting the image needs root; the options are not tried",
        );
    }
    let point = dir.join("mnt");
    std::fs::create_dir_all(&point).expect("mkdir");
    let mount_with = |opts: &str| {
        Command::new("mount")
            .env("PATH", sbin_path())
            .args(["-t", "ext4", "-o", opts])
            .arg(image)
            .arg(&point)
            .output()
            .expect("mount")
    };
    let umount = || {
        let _ = Command::new("umount")
            .env("PATH", sbin_path())
            .arg(&point)
            .status();
    };
    let plain = mount_with("loop");
    if !plain.status.success() {
        return skip(
            test,
            &format!(
                "this machine refuses loop mounts: {}",
                output_text(&plain).trim()
            ),
        );
    }
    umount();
    let out = mount_with(&format!("loop,{options}"));
    assert!(
        out.status.success(),
        "ext4 refuses Options={options}: {}",
        output_text(&out)
    );
    let mounts = std::fs::read_to_string("/proc/self/mounts").expect("mounts");
    let point_str = point.to_string_lossy().into_owned();
    let line = mounts
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(point_str.as_str()))
        .map(str::to_owned);
    umount();
    let line = line.expect("the image is mounted");
    for want in ["noatime", "lazytime", "errors=remount-ro"] {
        if options.split(',').any(|o| o == want) {
            assert!(line.contains(want), "{want} not in effect: {line}");
        }
    }
}

#[test]
fn systemd_analyze_verify_finds_nothing_to_say() {
    let test = "systemd_analyze_verify_finds_nothing_to_say";
    if let Some(tool) = missing_tool(&["systemd-analyze"]) {
        return skip(test, &format!("{tool} is not installed"));
    }
    for board in boards() {
        // The units as the image installs them, side by side so that their
        // dependencies on each other resolve; programs this machine lacks
        // (edgerec itself, jetson_clocks) replaced by ones it has, since
        // verify checks that every Exec* program is executable.
        let dir = tempfile::tempdir().expect("tempdir");
        let mut names = Vec::new();
        let systemd_dir = board.file("systemd");
        for entry in std::fs::read_dir(&systemd_dir).expect("systemd/") {
            let path = entry.expect("entry").path();
            let name = path
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&path).expect("unit");
            let mut out = String::new();
            for line in text.lines() {
                out.push_str(&with_host_program(line));
                out.push('\n');
            }
            std::fs::write(dir.path().join(&name), out).expect("write");
            names.push(name);
        }
        names.sort();
        let (o, killed) = run_for(
            Command::new("systemd-analyze")
                .env("PATH", sbin_path())
                .args(["verify", "--man=no"])
                .args(names.iter().map(|n| dir.path().join(n))),
            Duration::from_secs(60),
        );
        assert!(!killed, "systemd-analyze verify hung");
        let said = output_text(&o);
        let ours: Vec<&str> = said
            .lines()
            .filter(|l| names.iter().any(|n| l.contains(n.as_str())))
            .collect();
        assert!(
            ours.is_empty(),
            "{}: systemd-analyze verify:\n{}",
            board.name,
            ours.join("\n")
        );
        if !o.status.success() {
            // Failures that name none of our units come from this machine
            // (no systemd as PID 1 in a container, and the like).
            return skip(
                test,
                &format!("systemd-analyze verify cannot run here: {}", said.trim()),
            );
        }
        println!(
            "{}: systemd-analyze verify: {} units clean",
            board.name,
            names.len()
        );
    }
}

/// An `Exec*=` line with its program replaced by one this machine has, if
/// it lacks it: the built edgerec for edgerec, `/bin/true` otherwise.
fn with_host_program(line: &str) -> String {
    let Some((key, value)) = line.split_once('=') else {
        return line.to_owned();
    };
    if !key.trim().starts_with("Exec") {
        return line.to_owned();
    }
    let value = value.trim_start();
    let prefix_len = value.len() - value.trim_start_matches(['-', '@', ':', '+', '!']).len();
    let (prefix, rest) = value.split_at(prefix_len);
    let (program, args) = rest.split_once(' ').unwrap_or((rest, ""));
    if Path::new(program).exists() {
        return line.to_owned();
    }
    let host = if program.ends_with("/edgerec") {
        BIN
    } else {
        "/bin/true"
    };
    format!("{key}={prefix}{host} {args}")
}

#[test]
fn tuning_md_names_every_value() {
    for board in boards() {
        let b = &board.name;
        let tuning = |rel: &str| -> (PathBuf, String) {
            let home = board.home_of(rel);
            let path = home.join("TUNING.md");
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (path, text)
        };
        let mut missing = Vec::new();

        let rel = "systemd/edgerec.service";
        let (doc, text) = tuning(rel);
        for e in &board.unit("edgerec.service").entries {
            if e.key == "Description" {
                continue;
            }
            let named = format!("{}={}", e.key, e.value);
            if !text.contains(&named) {
                missing.push(format!("{}: `{named}` ({rel})", doc.display()));
            }
        }

        let rel = "udev/60-edgerec-nvme.rules";
        let (doc, text) = tuning(rel);
        for (key, value) in &nvme_rule(&board).assigns {
            let attr = key
                .strip_prefix("ATTR{")
                .and_then(|k| k.strip_suffix('}'))
                .unwrap_or(key);
            let named = format!("{attr}={value}");
            if !text.contains(&named) {
                missing.push(format!("{}: `{named}` ({rel})", doc.display()));
            }
        }

        let rel = "kernel-cmdline";
        let (doc, text) = tuning(rel);
        for arg in board.read(rel).split_whitespace() {
            if !text.contains(arg) {
                missing.push(format!("{}: `{arg}` ({rel})", doc.display()));
            }
        }

        let rel = "systemd/data.mount";
        let (doc, text) = tuning(rel);
        for option in board.unit("data.mount").one("Mount", "Options").split(',') {
            if !text.contains(option) {
                missing.push(format!(
                    "{}: mount option `{option}` ({rel})",
                    doc.display()
                ));
            }
        }
        assert!(
            missing.is_empty(),
            "{b}: not explained:\n{}",
            missing.join("\n")
        );
    }
}

/// The board's sysctl file and the `net.core.rmem_max` it sets.
fn rmem_max(b: &Board) -> (String, u64) {
    let text = b.read("sysctl.d/60-edgerec-dds.conf");
    let max = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == "net.core.rmem_max")
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{}: no net.core.rmem_max", b.name));
    (text, max)
}

/// The kernel grants a socket at most net.core.rmem_max: the board's
/// sysctl must allow the receive buffer edgerec's Cyclone DDS
/// configuration asks for, or multi-MB samples are dropped before edgerec
/// sees them.
#[test]
fn sysctl_allows_the_dds_receive_buffer_edgerec_asks_for() {
    let asked = edgerec_ros_dds_buffer();
    for b in boards() {
        let (_, max) = rmem_max(&b);
        assert!(
            max >= asked,
            "{}: rmem_max {max} < the {asked} edgerec asks for",
            b.name
        );
    }
}

/// The `SocketReceiveBufferSize max` of edgerec's built-in Cyclone
/// configuration, in bytes.
fn edgerec_ros_dds_buffer() -> u64 {
    let xml = edgerec_ros::dds::DEFAULT_CONFIG;
    let v = xml
        .split("max=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("SocketReceiveBufferSize max in DEFAULT_CONFIG");
    let (n, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len()));
    let n: u64 = n.parse().expect("a size");
    n * match unit {
        "MB" | "MiB" => 1 << 20,
        "kB" | "KiB" => 1 << 10,
        "" | "B" => 1,
        other => panic!("unit {other}"),
    }
}

/// A `[[can]]` interface or `[[udp]]` stream needs its socket family: the
/// unit's `RestrictAddressFamilies=` (seccomp) must allow AF_CAN and
/// AF_INET, or `socket(2)` fails with EAFNOSUPPORT under systemd only.
#[test]
fn the_unit_lets_the_bus_sources_open_their_sockets() {
    for b in boards() {
        let unit = b.unit("edgerec.service");
        let Some(families) = unit.get("Service", "RestrictAddressFamilies") else {
            continue;
        };
        for f in ["AF_CAN", "AF_INET"] {
            assert!(
                families.split_whitespace().any(|x| x == f),
                "{}: RestrictAddressFamilies={families} lacks {f}",
                b.name
            );
        }
    }
}

/// Offload on the appliance: what it reads and writes (the credentials,
/// the CA and client certificate when set, the journal and its ledger of
/// what was sent) is on /data, which the unit leaves writable and which a
/// new image does not overwrite; the unit lets it open TCP connections
/// (AF_INET, AF_INET6; no PrivateNetwork, no IPAddressDeny) and read the
/// resolver's configuration (/etc stays readable under ProtectSystem).
#[test]
fn offload_is_provisioned_on_data_and_the_unit_lets_it_connect() {
    let data = Path::new("/data");
    for b in boards() {
        let cfg = b.config();
        let o = &cfg.offload;
        for (key, path) in [
            ("credentials_file", &o.credentials_file),
            ("journal_dir", &o.journal_dir),
            ("ca_file", &o.ca_file),
            ("client_cert", &o.client_cert),
            ("client_key", &o.client_key),
        ] {
            assert!(
                path.as_os_str().is_empty() || is_under(path, data),
                "{}: offload.{key} must be on the data partition (provisioned per vehicle, kept across images): {}",
                b.name,
                path.display()
            );
        }
        // The fleet link's files likewise (the same unit rules let it
        // connect out).
        let r = &cfg.remote;
        for (key, path) in [
            ("journal", &r.journal),
            ("ca_file", &r.ca_file),
            ("cert_file", &r.cert_file),
            ("key_file", &r.key_file),
        ] {
            assert!(
                path.as_os_str().is_empty() || is_under(path, data),
                "{}: remote.{key} must be on the data partition: {}",
                b.name,
                path.display()
            );
        }
        let unit = b.unit("edgerec.service");
        if let Some(families) = unit.get("Service", "RestrictAddressFamilies") {
            for f in ["AF_INET", "AF_INET6"] {
                assert!(
                    families.split_whitespace().any(|x| x == f),
                    "{}: RestrictAddressFamilies={families} lacks {f}: offload cannot reach the store",
                    b.name
                );
            }
        }
        for key in ["PrivateNetwork", "IPAddressDeny"] {
            assert!(
                unit.get("Service", key)
                    .is_none_or(|v| v == "no" || v.is_empty()),
                "{}: {key} would cut offload off from the store",
                b.name
            );
        }
        if unit.get("Service", "ProtectSystem") == Some("strict") {
            let rw = unit.words("Service", "ReadWritePaths");
            assert!(
                rw.iter()
                    .any(|w| is_under(&cfg.recording.root, Path::new(w.trim_start_matches('-')))),
                "{}: ProtectSystem=strict without /data in ReadWritePaths= makes the \
                 upload journal and the ledger read-only",
                b.name
            );
        }
    }
    let readme = std::fs::read_to_string(boards_dir().join("README.md")).unwrap();
    assert!(
        readme.contains("## Offload provisioning"),
        "board/README.md says how to provision offload"
    );
}

/// The receive buffers `[[udp]]` and `[[can]]` ask for by default fit
/// under the board's `net.core.rmem_max` (edgerec has no CAP_NET_ADMIN to
/// force more).
#[test]
fn sysctl_allows_the_bus_receive_buffers() {
    let udp = edgerec_config::UdpConfig::new("/x", "0.0.0.0:1".parse().unwrap()).receive_buffer;
    let can = edgerec_config::CanConfig::new("can0").receive_buffer;
    for b in boards() {
        let (text, max) = rmem_max(&b);
        assert!(
            max >= udp.max(can),
            "{}: rmem_max {max} < {}",
            b.name,
            udp.max(can)
        );
        assert!(
            text.contains("[[udp]]") && text.contains("[[can]]"),
            "{}: say why",
            b.name
        );
    }
}

/// Each board's CAN interfaces are brought up by systemd-networkd with a
/// bitrate, a restart after bus-off and listen-only mode; each `[[can]]`
/// of the board's default configuration has its `.network` file, and every
/// setting is explained in TUNING.md.
#[test]
fn can_network_files_bring_the_interfaces_up_for_a_listening_recorder() {
    for b in boards() {
        let dir = b.file("network");
        let files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        let mut names = Vec::new();
        for f in &files {
            assert_eq!(
                f.extension().and_then(|e| e.to_str()),
                Some("network"),
                "{}",
                f.display()
            );
            let u = Unit::load(f);
            let name = u
                .get("Match", "Name")
                .unwrap_or_else(|| panic!("{}: no [Match] Name=", f.display()));
            assert!(name.starts_with("can"), "{}: Name={name}", f.display());
            names.push(name.to_owned());
            let rate = u
                .get("CAN", "BitRate")
                .unwrap_or_else(|| panic!("{}: no BitRate=", f.display()));
            assert!(
                rate.trim_end_matches(['K', 'M']).parse::<u32>().is_ok(),
                "{}: BitRate={rate}",
                f.display()
            );
            assert!(
                u.get("CAN", "RestartSec").is_some(),
                "{}: no RestartSec= (restart-ms)",
                f.display()
            );
            assert_eq!(
                u.get("CAN", "ListenOnly"),
                Some("yes"),
                "{}: a recorder listens",
                f.display()
            );
            assert_eq!(
                u.get("Link", "RequiredForOnline"),
                Some("no"),
                "{}",
                f.display()
            );
            if u.get("CAN", "FDMode") == Some("yes") {
                assert!(
                    u.get("CAN", "DataBitRate").is_some(),
                    "{}: FD without DataBitRate=",
                    f.display()
                );
            }
            let tuning = std::fs::read_to_string(
                b.home_of(&format!(
                    "network/{}",
                    f.file_name().unwrap().to_string_lossy()
                ))
                .join("TUNING.md"),
            )
            .unwrap();
            for key in [
                "BitRate=",
                "RestartSec=",
                "ListenOnly=",
                "RequiredForOnline=",
            ] {
                assert!(
                    tuning.contains(key),
                    "{}: TUNING.md does not explain {key}",
                    b.name
                );
            }
        }
        for c in &b.config().can {
            assert!(
                names.contains(&c.interface),
                "{}: [[can]] {} has no network/*.network to bring it up",
                b.name,
                c.interface
            );
        }
        println!("{}: CAN interfaces brought up: {names:?}", b.name);
    }
}

/// Where `/var/log` is on the image: oe-core's VOLATILE_LOG_DIR = "yes"
/// makes it a symlink to /var/volatile/log (tmpfs), and a mount unit or
/// `mount` must name the real path.
const VOLATILE_JOURNAL: &str = "/var/volatile/log/journal";

#[test]
fn the_journal_is_kept_on_data_and_survives_power_off() {
    let test = "the_journal_is_kept_on_data_and_survives_power_off";
    let distro =
        edgerec_testkit::workspace_root().join("yocto/meta-edgerec/conf/distro/edgerec.conf");
    let distro = std::fs::read_to_string(&distro).expect("edgerec.conf");
    assert!(
        distro
            .lines()
            .any(|l| l.trim() == "VOLATILE_LOG_DIR = \"yes\""),
        "the distro must keep /var/log on /var/volatile, where the bind mount goes"
    );
    let recipe = edgerec_testkit::workspace_root()
        .join("yocto/meta-edgerec/recipes-edgerec/edgerec/edgerec_0.1.0.bb");
    let recipe = std::fs::read_to_string(&recipe).expect("recipe");
    assert!(
        recipe.contains("journald.conf.d") && recipe.contains("edgerec-journal-on-data.service"),
        "the recipe installs the journald drop-in and enables the unit"
    );
    for board in boards() {
        let b = &board.name;
        let conf = board.read("journald.conf.d/60-edgerec.conf");
        let settings: Vec<&str> = conf
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .collect();
        for needed in ["[Journal]", "Storage=persistent", "SystemKeepFree=0"] {
            assert!(
                settings.contains(&needed),
                "{b}: journald drop-in lacks {needed}"
            );
        }
        let max = settings
            .iter()
            .find_map(|l| l.strip_prefix("SystemMaxUse="))
            .unwrap_or_else(|| panic!("{b}: SystemMaxUse= bounds the journal's share of /data"));
        let max = parse_limit_bytes(max).unwrap_or_else(|| panic!("{b}: SystemMaxUse={max}"));
        assert!(
            (64 << 20..=(2 << 30)).contains(&max),
            "{b}: SystemMaxUse {max} bytes"
        );

        let unit = board.unit("edgerec-journal-on-data.service");
        assert!(unit
            .words("Unit", "Before")
            .contains(&"systemd-journal-flush.service".into()));
        assert!(unit
            .words("Unit", "RequiresMountsFor")
            .contains(&"/data".into()));
        assert!(unit
            .words("Install", "WantedBy")
            .contains(&"systemd-journal-flush.service".into()));
        let lines = unit.values("Service", "ExecStart");
        let argvs: Vec<Vec<String>> = lines.iter().map(|l| exec_argv(l)).collect();
        let bind = argvs
            .iter()
            .find(|a| a.iter().any(|w| w == "--bind"))
            .unwrap_or_else(|| panic!("{b}: no `mount --bind`"));
        let (src, dst) = (&bind[bind.len() - 2], &bind[bind.len() - 1]);
        assert!(
            is_under(Path::new(src), Path::new("/data")),
            "{b}: {src} is not on /data"
        );
        assert_eq!(dst, VOLATILE_JOURNAL, "{b}: the bind target");

        // Run the unit's commands in a mount namespace of their own, with
        // /data and /var/volatile as directories of a temporary one: the
        // journal directory is made, and what journald writes under
        // /var/log/journal lands on /data, on a nodev,nosuid,noexec mount.
        if let Some(tool) = missing_tool(&["unshare", "mount", "install"]) {
            return skip(test, &format!("{tool} is not installed"));
        }
        let root = tempfile::tempdir().expect("tempdir");
        let data = root.path().join("data");
        let volatile = root.path().join("var/volatile");
        std::fs::create_dir_all(&data).expect("data");
        std::fs::create_dir_all(&volatile).expect("volatile");
        let relocate = |w: &str| -> String {
            if let Some(rest) = w.strip_prefix("/data") {
                format!("{}{rest}", data.display())
            } else if let Some(rest) = w.strip_prefix("/var/volatile") {
                format!("{}{rest}", volatile.display())
            } else {
                w.to_owned()
            }
        };
        let mut script = String::from("set -e\n");
        for argv in &argvs {
            let words: Vec<String> = argv.iter().map(|w| relocate(w)).collect();
            script.push_str(&words.join(" "));
            script.push('\n');
        }
        let journal = relocate(VOLATILE_JOURNAL);
        script.push_str(&format!(
            "echo entry > {journal}/system.journal\ngrep ' {journal} ' /proc/self/mountinfo\n"
        ));
        let (o, killed) = run_for(
            Command::new("unshare").args(["-m", "--propagation", "private", "sh", "-c", &script]),
            Duration::from_secs(30),
        );
        assert!(!killed, "{b}: the unit's commands hung");
        let said = output_text(&o);
        if !o.status.success() && said.contains("unshare failed") {
            return skip(test, &format!("no mount namespace here: {}", said.trim()));
        }
        assert!(
            o.status.success(),
            "{b}: the unit's commands failed:\n{said}"
        );
        let on_data = data.join("journal/system.journal");
        assert_eq!(
            std::fs::read_to_string(&on_data).unwrap_or_default(),
            "entry\n",
            "{b}: a journal file written under /var/log/journal is not on /data"
        );
        let mountinfo = said.lines().find(|l| l.contains(&journal)).unwrap_or("");
        for flag in ["nodev", "nosuid", "noexec"] {
            assert!(
                mountinfo.contains(flag),
                "{b}: bind mount lacks {flag}: {mountinfo}"
            );
        }
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(data.join("journal"))
            .expect("journal dir")
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o2755, "{b}: journal directory mode");
    }
}

/// The units that run edgerec's code or touch its clock: their exposure
/// (`systemd-analyze security --offline=yes`) stays at or below 2.5, and
/// docs/security.md states each figure as measured here.
const SANDBOXED_UNITS: [&str; 4] = [
    "edgerec.service",
    "edgerec-fault-led.service",
    "ptp4l-edgerec.service",
    "phc2sys-edgerec.service",
];

#[test]
fn sandboxed_units_score_at_most_2_5_as_the_docs_say() {
    let test = "sandboxed_units_score_at_most_2_5_as_the_docs_say";
    if let Some(tool) = missing_tool(&["systemd-analyze"]) {
        return skip(test, &format!("{tool} is not installed"));
    }
    let docs = std::fs::read_to_string(boards_dir().join("../docs/security.md"))
        .expect("docs/security.md");
    for board in boards() {
        if !board.file("systemd/edgerec.service").exists() {
            continue;
        }
        for name in SANDBOXED_UNITS {
            let path = board.file(&format!("systemd/{name}"));
            let (o, killed) = run_for(
                Command::new("systemd-analyze")
                    .args(["security", "--offline=yes", "--no-pager"])
                    .arg(&path),
                Duration::from_secs(60),
            );
            assert!(!killed, "systemd-analyze security {name} hung");
            let said = output_text(&o);
            let overall = said
                .lines()
                .find_map(|l| l.split_once(&format!("Overall exposure level for {name}: ")))
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .unwrap_or_else(|| panic!("{}: {name}: no overall level in:\n{said}", board.name));
            let score: f64 = overall.parse().expect("a number");
            println!("{}: {name}: exposure {overall}", board.name);
            assert!(
                score <= 2.5,
                "{}: {name} scores {overall} (at most 2.5):\n{said}",
                board.name
            );
            let row = format!("| `{name}` | {overall} |");
            assert!(
                docs.contains(&row),
                "docs/security.md (\"The service's sandbox\") lacks the row `{row}`: \
                 the figure measured now"
            );
        }
    }
}
