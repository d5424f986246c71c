//! `edgerec`: the recorder daemon and its tools. This file only wires the
//! library crates together: parse the command line, load the config, start
//! and stop the recorder, print what the libraries report, choose the exit
//! code.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand};
use edgerec_config::{Config, Rooms};
use edgerec_format::{info, recover};
use edgerec_health::state::HealthState;
use edgerec_recorder::{
    Recorder, RecorderOptions, RecorderStatus, RecordingReport, THROUGHPUT_BIN,
};
use edgerec_source::RecordingClock;
use edgerec_synthetic::SyntheticSource;

mod bus;
mod cameras;
mod cli_docs;
mod controls;
mod daemon;
mod export_cmd;
#[cfg(feature = "fault-injection")]
mod fault_injection;
mod gpio_triggers;
mod health_triggers;
mod offload;
mod record_cmd;
mod remote;
mod ros;

/// sysexits EX_CONFIG: the configuration is wrong; nothing was created.
const EXIT_CONFIG: u8 = 78;
/// sysexits EX_IOERR: storage failed during the recording.
const EXIT_IOERR: u8 = 74;
/// sysexits EX_SOFTWARE: a stage of the pipeline died (panicked); the
/// open segment is left `.active` and the next start recovers it.
const EXIT_SOFTWARE: u8 = 70;

#[derive(Parser, Debug)]
#[command(
    name = "edgerec",
    version,
    about = "Data recorder for NVIDIA Jetson: ROS 2 topics and cameras into rosbag2 MCAP bags"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Record until SIGINT/SIGTERM (or --duration).
    #[command(
        after_help = "Example:\n  edgerec run --config /data/edgerec/edgerec.toml --duration 10m"
    )]
    Run {
        /// The configuration file.
        #[arg(long, short, default_value = "/data/edgerec/edgerec.toml")]
        config: PathBuf,
        /// Stop after this long (`10s`, `5m`, `1h`).
        #[arg(long, short)]
        duration: Option<String>,
        /// Write the final report as JSON to this file.
        #[arg(long)]
        report_json: Option<PathBuf>,
        /// Never print the live status line, even on a terminal.
        #[arg(long)]
        quiet: bool,
    },
    /// Record ROS 2 topics into a bag directory until SIGINT, with `ros2
    /// bag record`'s flags and the same pipeline as `run`.
    #[command(
        after_help = "Example:\n  edgerec record /imu /camera/image_raw -o drive_01 --compression-format zstd"
    )]
    Record(record_cmd::RecordArgs),
    /// Describe a bag: a rosbag2 directory or an MCAP file (like `ros2
    /// bag info`), or a ROS 1 .bag (like `rosbag info`). Exit 1 when a
    /// file cannot be read.
    #[command(
        after_help = "Example:\n  edgerec info /data/edgerec/recordings/edgerec_20261206T141701Z"
    )]
    Info {
        /// A bag directory, an .mcap file or a ROS 1 .bag.
        path: PathBuf,
    },
    /// Print decoded messages of any bag, one a line (`--json`: one JSON
    /// object a line), like `rostopic echo -b` / `ros2 bag` without ROS.
    #[command(after_help = "Example:\n  edgerec cat drive_01.bag --topic /imu --json --limit 5")]
    Cat(edgerec_tools::cli::CatArgs),
    /// Convert a ROS 1 bag to MCAP (`ros1` profile, as `mcap convert`) or,
    /// with `--to ros2`, to a rosbag2 bag directory in CDR (as
    /// rosbags-convert).
    #[command(after_help = "Example:\n  edgerec convert drive_01.bag drive_01_ros2 --to ros2")]
    Convert(edgerec_tools::cli::ConvertArgs),
    /// Copy the part of a bag that matters into a new MCAP file or bag
    /// directory: topics by name or pattern, a log-time window; exit 3
    /// when an input file was cut or corrupt (kept up to the damage).
    #[command(
        after_help = "Example:\n  edgerec filter drive_01 drive_01_cut --topics /imu /camera/image_raw --start +12.5s --end +20s"
    )]
    Filter(edgerec_tools::cli::FilterArgs),
    /// Write an indexed copy of an unindexed ROS 1 bag (a `.bag.active`
    /// left by a power cut), keeping every whole message, those of a cut
    /// last chunk included; the original is not touched.
    #[command(after_help = "Example:\n  edgerec reindex drive_01.bag.active")]
    Reindex(edgerec_tools::cli::ReindexArgs),
    /// Export from a bag: `export csv BAG --topic T -o F.csv`, `export
    /// candump BAG -o F.log`, `export pcap BAG -o F.pcap`, `export video
    /// BAG --topic T -o OUT.mp4`.
    #[command(
        after_help = "Example:\n  edgerec export video ./data/demo_20261206T141701Z --topic /camera/front/h265 -o front.mp4"
    )]
    Export(export_cmd::ExportArgs),
    /// Import into a bag: `import candump F.log -o BAG`.
    #[command(after_help = "Example:\n  edgerec import candump can0.log -o can0_bag")]
    Import(export_cmd::ImportArgs),
    /// Verify a bag (structure, index and every CRC the format has) or a
    /// configuration file; exit 0 when valid, 1 for a bag that is not, 78
    /// (as `run`) for a configuration that is not.
    #[command(after_help = "Example:\n  edgerec check /data/edgerec/edgerec.toml")]
    Check {
        /// A bag directory, an .mcap file, a ROS 1 .bag, or an edgerec
        /// .toml file.
        path: PathBuf,
    },
    /// Recover unfinished segments (`.mcap.active`, left by a crash or
    /// power cut) into closed files, and rewrite the bag's metadata.yaml;
    /// a ROS 1 `.bag.active` is reindexed beside itself (as `reindex`).
    /// Exit 0 when nothing was lost beyond the unsynced tail, 3 when a
    /// corrupt record was skipped, 1 when nothing was recoverable.
    #[command(
        after_help = "Example:\n  edgerec recover /data/edgerec/recordings/edgerec_20261206T141701Z"
    )]
    Recover {
        /// A bag directory (every .active segment in it) or one file.
        path: PathBuf,
    },
    /// Show a running recorder's status: health and why, clock, storage,
    /// sources, metrics with their origins, stages and the watchdog.
    #[command(after_help = "Example:\n  edgerec status --config config/demo.toml --json")]
    Status {
        /// The configuration file, for `health.status_socket`.
        #[arg(long, short, default_value = "/data/edgerec/edgerec.toml")]
        config: PathBuf,
        /// The status socket (overrides the configuration).
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Print the snapshot's JSON as served.
        #[arg(long)]
        json: bool,
    },
    /// Show a health state on the board's LEDs (`[leds]` of the
    /// configuration) and exit. systemd's `edgerec-fault-led.service` runs
    /// `edgerec leds fault` when edgerec.service has failed for good (a
    /// configuration error, or a crash loop); by hand it checks the LED
    /// names on a new carrier.
    #[command(
        after_help = "Example:\n  edgerec leds recording --config /data/edgerec/edgerec.toml"
    )]
    Leds {
        /// booting, idle, recording, degraded, fault, disk-full or paused.
        state: String,
        /// The configuration whose `[leds]` to use.
        #[arg(long, short, default_value = "/data/edgerec/edgerec.toml")]
        config: PathBuf,
        /// Used when `--config` cannot be loaded (the broken file is why
        /// the recorder failed): the board's default configuration.
        #[arg(long)]
        fallback: Option<PathBuf>,
    },
    /// Send bag directories (or files) to the S3-compatible object store
    /// of `[offload]`: each file once (what the store holds already, same
    /// SHA-256, is skipped), large files in parts with a Content-MD5 each,
    /// `metadata.yaml` of a bag last. Exit 0 when every file is there, 1
    /// when one could not be sent, 78 for a configuration or credentials
    /// error.
    #[command(
        after_help = "Example:\n  edgerec upload --config /data/edgerec/edgerec.toml /data/edgerec/recordings/demo_20261206T101500Z"
    )]
    Upload {
        /// The configuration whose `[offload]` to use.
        #[arg(long, short, default_value = "/data/edgerec/edgerec.toml")]
        config: PathBuf,
        /// No progress line, only the summary.
        #[arg(long, short)]
        quiet: bool,
        /// Bag directories and files.
        #[arg(required = true, num_args = 1..)]
        paths: Vec<PathBuf>,
    },
    /// Give a running recorder a command over its control socket
    /// (`health.control_socket`): pause, resume, split, is-paused, status
    /// (the snapshot as JSON), list (the sessions, segments and event clips
    /// on the vehicle with their time ranges and upload state, as JSON), or
    /// trigger [--name NAME] [--pre DURATION] [--post DURATION] [--reason
    /// TEXT] (an event clip, in `triggered` and `mixed` mode; `--pre` and
    /// `--post` override the rule's window, 0 to 1 h). Exit 0 when it was
    /// carried out.
    #[command(
        after_help = "Example:\n  edgerec ctl trigger --reason \"hard brake at the depot gate\"\n  edgerec ctl trigger --pre 30s --post 5s --reason \"lane drift\"\n  edgerec ctl list"
    )]
    Ctl {
        /// The configuration file, for `health.control_socket`.
        #[arg(long, short, default_value = "/data/edgerec/edgerec.toml")]
        config: PathBuf,
        /// The control socket (overrides the configuration).
        #[arg(long)]
        socket: Option<PathBuf>,
        /// The command and its arguments.
        #[arg(required = true, num_args = 1.., allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Offload of a running recorder (`offload.upload`), over its control
    /// socket: `status` prints the queue by class, the rate and the link
    /// as JSON; `pause` stops sending after the request in flight,
    /// `resume` sends again, `retry` tries every waiting file now. Each is
    /// logged with who asked. Exit 0 when it was carried out.
    #[command(after_help = "Example:\n  edgerec offload status\n  edgerec offload pause")]
    Offload {
        /// status, pause, resume or retry.
        verb: OffloadCli,
        /// The configuration file, for `health.control_socket`.
        #[arg(long, short, default_value = "/data/edgerec/edgerec.toml")]
        config: PathBuf,
        /// The control socket (overrides the configuration).
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Print the shell completion script for bash, zsh, fish, elvish or
    /// powershell (the image installs bash's, zsh's and fish's).
    #[command(
        after_help = "Example:\n  source <(edgerec completions bash)\n  edgerec completions zsh > ~/.zfunc/_edgerec"
    )]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the edgerec(1) man page (roff), or with `--dir` write it and
    /// one page per subcommand (edgerec-run.1, edgerec-export-video.1, ...).
    #[command(
        after_help = "Example:\n  edgerec man | man -l -\n  edgerec man --dir /usr/share/man/man1"
    )]
    Man {
        /// Write every page into this directory instead of printing one.
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Print the version.
    #[command(after_help = "Example:\n  edgerec version")]
    Version,
}

fn main() -> ExitCode {
    {
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        use tracing_subscriber::Layer as _;
        let filter = tracing_subscriber::EnvFilter::try_from_env("EDGEREC_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        // Warnings and errors also go to the fleet once a link runs
        // (`[remote]`), whatever EDGEREC_LOG shows locally.
        let forward =
            remote::log_forward().with_filter(tracing_subscriber::filter::LevelFilter::WARN);
        tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    // Colour only for a person at a terminal who did not
                    // turn it off (NO_COLOR, no-color.org): the journal and
                    // log files get plain text, whose fields tools can match.
                    .with_ansi(
                        std::io::IsTerminal::is_terminal(&std::io::stderr())
                            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
                    )
                    .with_filter(filter),
            )
            .with(forward)
            .init();
    }
    let cli = Cli::parse();
    if !matches!(cli.cmd, Cmd::Run { .. }) {
        // The tools end quietly when their reader goes away (`| head`),
        // like other Unix tools. The recorder itself keeps Rust's default
        // (SIGPIPE ignored): a closed stdout must not stop a recording.
        // SAFETY: signal(2) with SIG_DFL for SIGPIPE, before any thread
        // is started; no handler code runs.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match cli.cmd {
        Cmd::Run {
            config,
            duration,
            report_json,
            quiet,
        } => run(&config, duration.as_deref(), report_json.as_deref(), quiet),
        Cmd::Record(args) => match record_cmd::config(&args) {
            Ok((cfg, origin, dir)) => start_and_record(
                &cfg,
                &origin,
                Some(dir),
                None,
                None,
                args.quiet,
                args.start_paused,
            ),
            Err(e) => {
                eprintln!("edgerec record: {e:#}");
                ExitCode::from(EXIT_CONFIG)
            }
        },
        Cmd::Info { path } => edgerec_tools::cli::info(&path, |_i| {
            // Video topics' picture size, rate, bitrate and keyframe
            // interval (not in the camera-less board build).
            #[cfg(feature = "camera")]
            edgerec_camera::figures::annotate(_i);
        }),
        Cmd::Cat(args) => edgerec_tools::cli::cat_cmd(&args),
        Cmd::Convert(args) => edgerec_tools::cli::convert_cmd(&args),
        Cmd::Filter(args) => edgerec_tools::cli::filter_cmd(&args),
        Cmd::Reindex(args) => edgerec_tools::cli::reindex_cmd(&args),
        Cmd::Export(args) => export_cmd::run(&args),
        Cmd::Import(args) => export_cmd::import(&args),
        Cmd::Check { path } => check(&path),
        Cmd::Recover { path } => edgerec_tools::cli::recover_cmd(&path),
        Cmd::Status {
            config,
            socket,
            json,
        } => status_cmd(&config, socket.as_deref(), json),
        Cmd::Leds {
            state,
            config,
            fallback,
        } => {
            let state = match state.parse() {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("edgerec leds: {e}");
                    return ExitCode::from(2);
                }
            };
            match daemon::show_on_leds(&config, fallback.as_deref(), state) {
                Ok(text) => {
                    println!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("edgerec leds: {e:#}");
                    ExitCode::from(1)
                }
            }
        }
        Cmd::Ctl {
            config,
            socket,
            command,
        } => ctl_cmd(&config, socket.as_deref(), &command),
        Cmd::Offload {
            verb,
            config,
            socket,
        } => offload_cmd(&config, socket.as_deref(), verb),
        Cmd::Upload {
            config,
            quiet,
            paths,
        } => ExitCode::from(edgerec_offload::command::run(
            "edgerec upload",
            &config,
            &paths,
            quiet,
        )),
        Cmd::Completions { shell } => {
            cli_docs::completions(Cli::command(), shell, &mut std::io::stdout().lock());
            ExitCode::SUCCESS
        }
        Cmd::Man { dir } => man_cmd(dir.as_deref()),
        Cmd::Version => {
            println!("edgerec {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
    }
}

fn man_cmd(dir: Option<&Path>) -> ExitCode {
    let done = match dir {
        None => cli_docs::man_page(Cli::command(), &mut std::io::stdout().lock()),
        Some(d) => cli_docs::man_pages(Cli::command(), d).map(|files| {
            println!("wrote {} man pages into {}", files.len(), d.display());
        }),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe is the reader's choice (`| head`); SIGPIPE's default
        // ends the process before this for stdout.
        Err(e) => {
            match dir {
                Some(d) => eprintln!("edgerec man: cannot write into {}: {e}", d.display()),
                None => eprintln!("edgerec man: {e}"),
            }
            ExitCode::from(1)
        }
    }
}

/// The rooms the service holds the configuration's paths to
/// (`EDGEREC_DATA_DIR`, `EDGEREC_RUNTIME_DIR`, set by its unit) and this
/// machine's memory, which the budgets must fit in; or the exit status for
/// a bad value.
fn service_rooms(tool: &str) -> Result<Rooms, ExitCode> {
    Rooms::from_env()
        .map(|r| r.with_memory(edgerec_config::machine_memory()))
        .map_err(|e| {
            eprintln!("{tool}: {e}");
            ExitCode::from(EXIT_CONFIG)
        })
}

fn check(path: &Path) -> ExitCode {
    if path.extension().is_some_and(|e| e == "toml") {
        let rooms = match service_rooms("edgerec check") {
            Ok(r) => r,
            Err(code) => return code,
        };
        return match Config::load_in(path, &rooms) {
            Ok(c) => {
                println!(
                    "OK      {}: valid configuration ({} synthetic sources, recordings in {}; {})",
                    path.display(),
                    c.sources.synthetic.len(),
                    c.recording.root.display(),
                    rooms.describe()
                );
                ExitCode::SUCCESS
            }
            // EX_CONFIG, as `edgerec run` exits on the same file.
            Err(e) => {
                println!("INVALID {e}");
                ExitCode::from(EXIT_CONFIG)
            }
        };
    }
    edgerec_tools::cli::check(path)
}

fn status_cmd(config: &Path, socket: Option<&Path>, json: bool) -> ExitCode {
    let socket = match socket {
        Some(s) => s.to_path_buf(),
        None => match Config::load(config) {
            Ok(c) => c.health.status_socket,
            // No readable configuration: the appliance default.
            Err(e) if !config.exists() => {
                let d = edgerec_config::HealthConfig::default().status_socket;
                tracing::debug!("{e}; using {}", d.display());
                d
            }
            Err(e) => {
                eprintln!("edgerec status: configuration error: {e}");
                return ExitCode::from(EXIT_CONFIG);
            }
        },
    };
    if socket.as_os_str().is_empty() {
        eprintln!(
            "edgerec status: health.status_socket is empty in {}: the recorder serves no status",
            config.display()
        );
        return ExitCode::from(1);
    }
    let text = match edgerec_health::status::fetch(&socket, Duration::from_secs(2)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "edgerec status: no recorder answers at {}: {e} (is `edgerec run` running with this configuration? `--socket PATH` names another socket)",
                socket.display()
            );
            return ExitCode::from(1);
        }
    };
    let parsed = serde_json::from_str::<serde_json::Value>(&text);
    if let Ok(v) = &parsed {
        // A refusal (not in the groups that may read), not a status.
        if v["ok"] == false {
            let error = v["error"].as_str().unwrap_or("refused");
            eprintln!("edgerec status: {}: {error}", socket.display());
            return ExitCode::from(1);
        }
    }
    if json {
        print!("{text}");
        return ExitCode::SUCCESS;
    }
    match parsed {
        Ok(v) => {
            print!("{}", edgerec_health::status::render_text(&v));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "edgerec status: {} answered with something that is not a status ({e}): {:.200}",
                socket.display(),
                text
            );
            ExitCode::from(1)
        }
    }
}

/// Recovers every `.active` segment under the recordings root before a new
/// recording starts. Failures are logged, never fatal: what could not be
/// recovered stays on disk as it is.
fn recover_at_start(root: &Path) {
    // Event clips are bag directories too, one level down.
    let events = root.join("events");
    let mut dirs = Vec::new();
    for r in std::iter::once(root).chain(events.is_dir().then_some(events.as_path())) {
        match recover::recover_root(r) {
            Ok(d) => dirs.extend(d),
            Err(e) => tracing::error!(
                "recovery: cannot scan {} for unfinished segments: {e}",
                r.display()
            ),
        }
    }
    for recover::DirRecovery { dir, result } in dirs {
        match result {
            Ok(reports) => {
                for r in reports {
                    let text = r.to_string().replace('\n', "; ");
                    match r.outcome {
                        recover::Outcome::Clean | recover::Outcome::AlreadyClosed => {
                            tracing::info!("recovery: {text}")
                        }
                        _ => tracing::warn!("recovery: {text}"),
                    }
                }
            }
            Err(e) => tracing::error!("recovery of {} failed: {e}", dir.display()),
        }
    }
}

fn run(config: &Path, duration: Option<&str>, report_json: Option<&Path>, quiet: bool) -> ExitCode {
    let rooms = match service_rooms("edgerec") {
        Ok(r) => r,
        Err(code) => return code,
    };
    let cfg = match Config::load_in(config, &rooms) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("edgerec: configuration error: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let limit = match duration.map(edgerec_config::parse_duration).transpose() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("edgerec: --duration {}: {e}", duration.unwrap_or(""));
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    start_and_record(&cfg, config, None, limit, report_json, quiet, false)
}

/// Starts the daemon's parts and records until stopped; `session_dir` is
/// `edgerec record -o`.
fn start_and_record(
    cfg: &Config,
    config: &Path,
    session_dir: Option<PathBuf>,
    limit: Option<Duration>,
    report_json: Option<&Path>,
    quiet: bool,
    start_paused: bool,
) -> ExitCode {
    if let Err(e) = check_rules(cfg) {
        eprintln!("edgerec: {e}");
        return ExitCode::from(EXIT_CONFIG);
    }
    let (cameras, taps) = match cameras::sources(cfg) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("edgerec: {}: {e:#}", config.display());
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let bus = match bus::sources(cfg) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("edgerec: {}: {e:#}", config.display());
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let ros = match ros::source(cfg, taps) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("edgerec: {}: {e:#}", config.display());
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    // GPIO lines are requested before anything is created.
    let recorder = gpio_triggers::RecorderSlot::default();
    let gpio = match gpio_triggers::start(cfg, recorder.clone()) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("edgerec: {}: {e:#}", config.display());
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let daemon = match daemon::Daemon::start(cfg) {
        Ok(d) => d,
        Err(daemon::StartError::Config(e)) => {
            eprintln!("edgerec: {}: {e:#}", config.display());
            return ExitCode::from(EXIT_CONFIG);
        }
        Err(daemon::StartError::Other(e)) => {
            eprintln!("edgerec: {e:#}");
            return ExitCode::from(1);
        }
    };
    let offload = match offload::start(cfg) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("edgerec: {}: {e}", config.display());
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let controls = edgerec_ros::control::ControlSlot::new(edgerec_ros::rate_limit::RateLimits {
        per_second: cfg.health.control_rate,
        burst: cfg.health.control_burst,
    });
    let link = match remote::start(cfg, daemon.board.clone(), controls.clone()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("edgerec: {}: {e}", config.display());
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let session = Session {
        start_paused,
        controls: controls.clone(),
        ros: ros.map(|r| {
            let r = r.with_health(ros::health_feed(daemon.board.clone()));
            // The services only when asked for (`ros.services`).
            if cfg.ros.services {
                r.with_controls(controls)
            } else {
                r
            }
        }),
        dir: session_dir,
        cameras,
        bus,
        gpio,
        recorder,
        offload,
        link,
    };
    match record(cfg, daemon, session, limit, report_json, quiet) {
        Ok(Ended::Clean) => ExitCode::SUCCESS,
        Ok(Ended::StorageFailed) => ExitCode::from(EXIT_IOERR),
        Ok(Ended::StageDied) => ExitCode::from(EXIT_SOFTWARE),
        Err(e) => {
            eprintln!("edgerec: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Checks every `[[trigger]]` rule whose topic's type is known before the
/// recording starts (a synthetic source's): a field its type lacks is a
/// configuration error with the line and column of the field. Rules on
/// ROS 2 topics are checked when the topic is discovered (logged and in
/// the status).
fn check_rules(cfg: &Config) -> Result<(), Box<edgerec_config::ConfigError>> {
    let Some(plan) = edgerec_recorder::events::TriggerPlan::from_config(cfg) else {
        return Ok(());
    };
    for rule in &plan.rules {
        let known = cfg
            .sources
            .synthetic
            .iter()
            .find(|c| c.topic == rule.topic)
            .and_then(|c| SyntheticSource::new(c.clone()).spec().ok());
        if let Some(spec) = known {
            edgerec_recorder::events::rules::check_rule(
                rule,
                &spec.type_name,
                &String::from_utf8_lossy(&spec.schema),
            )?;
        }
    }
    Ok(())
}

/// How a recording ended.
enum Ended {
    /// Every file closed.
    Clean,
    /// Storage failed during the recording (what was written before
    /// stays on disk).
    StorageFailed,
    /// A pipeline stage died; the open segment is left for recovery.
    StageDied,
}

fn non_empty_path(p: &Path) -> Option<&Path> {
    (!p.as_os_str().is_empty()).then_some(p)
}

/// What a recording holds besides the configured synthetic sources.
struct Session {
    /// Pause as soon as the recorder runs (`edgerec record --start-paused`).
    start_paused: bool,
    /// Where the operator's commands find the recorder once it runs.
    controls: edgerec_ros::control::ControlSlot,
    /// The ROS 2 source, when `[ros]` is on.
    ros: Option<edgerec_ros::dds::DdsSource>,
    /// The bag directory (`edgerec record -o`); else a new one under the root.
    dir: Option<PathBuf>,
    /// The cameras.
    cameras: Vec<cameras::Camera>,
    /// The CAN interfaces and UDP streams.
    bus: Vec<Box<dyn edgerec_source::Source>>,
    /// The GPIO lines of `[[trigger]]` rules, requested already.
    gpio: gpio_triggers::GpioTriggers,
    /// Where their edges find the recorder once it runs.
    recorder: gpio_triggers::RecorderSlot,
    /// What sends closed files to the store (`offload.upload`).
    offload: Option<edgerec_offload::agent::Agent>,
    /// The fleet link (`remote.broker`).
    link: Option<edgerec_remote::Link>,
}

/// Records until stopped, the time limit, or a stage of the pipeline dies.
fn record(
    cfg: &Config,
    mut daemon: daemon::Daemon,
    session: Session,
    limit: Option<Duration>,
    report_json: Option<&Path>,
    quiet: bool,
) -> anyhow::Result<Ended> {
    // Before the signal handlers: a signal during recovery ends the
    // process at once, which recovery is built to survive.
    if session.dir.is_none() {
        recover_at_start(&cfg.recording.root);
    }
    // Earlier runs' files the store lacks, once recovery has closed the
    // segments a power cut left open (picked up before it, those were
    // still `.active`, and never sent).
    if let Some(agent) = &session.offload {
        agent.pick_up(&cfg.recording.root);
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal while stopping exits at once.
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
            .context("installing the signal handler")?;
        signal_hook::flag::register(sig, stop.clone()).context("installing the signal handler")?;
    }
    let mut sources = SyntheticSource::from_config(&cfg.sources.synthetic);
    // What the ROS 2 source saw on the graph, for the status.
    let ros_stats = session.ros.as_ref().map(|r| r.stats());
    if let Some(r) = session.ros {
        sources.push(Box::new(r));
    }
    for c in session.cameras {
        sources.push(Box::new(c));
    }
    sources.extend(session.bus);
    if sources.is_empty() {
        tracing::warn!("no sources configured: the recording will hold only edgerec's own topics");
    }
    // The operator's commands that change something, into /edgerec/audit.
    let audit = Arc::new(edgerec_health::own_topics::AuditRecords::default());
    session
        .controls
        .set_audit(controls::audit_sink(audit.clone()));
    sources.extend(daemon.own_topics(&audit));
    let mut opts = RecorderOptions::from_config(cfg);
    opts.session_dir = session.dir;
    opts.watch = daemon.watch();
    let agent = session.offload;
    opts.watch.on_announce = agent.as_ref().map(offload::on_announce);
    opts.watch.offload = agent.as_ref().map(|a| offload::retention(cfg, a));
    #[cfg(feature = "fault-injection")]
    {
        opts.watch.faults = Some(fault_injection::install()?);
    }
    let clock: Arc<dyn RecordingClock> = daemon.clock();
    let rec = match Recorder::start(opts, sources, clock) {
        Ok(r) => r,
        Err(e) => {
            daemon.finish(None, HealthState::Fault);
            return Err(e).context("starting the recording");
        }
    };
    let _ = session.recorder.set(rec.status_handle());
    if session.start_paused {
        rec.status_handle().pause("`--start-paused`");
    }
    let _ = session.controls.set(Arc::new(controls::RecorderControls {
        recorder: rec.status_handle(),
        offload: agent.as_ref().map(|a| (a.view(), a.ledger())),
        board: daemon.board.clone(),
        root: cfg.recording.root.clone(),
    }));
    let _ctl = match non_empty_path(&cfg.health.control_socket) {
        Some(p) => Some(
            controls::serve(
                p,
                &cfg.health.control_group,
                &cfg.health.read_group,
                session.controls.clone(),
            )
            .context("health.control_socket")?,
        ),
        None => None,
    };
    let mut control = daemon.control(
        rec.status_handle(),
        &cfg.recording.root,
        cfg,
        ros_stats,
        Some(session.controls.clone()),
        daemon::Layers {
            offload: agent.as_ref().map(|a| a.view()),
            remote: session.link.as_ref().map(|l| l.handle()),
        },
    );
    let mut health_triggers = health_triggers::HealthTriggers::new(cfg);
    let trigger_handle = rec.status_handle();
    let mut died = None;
    control.tick();
    if let Some(n) = &daemon.notifier {
        let _ = n.ready();
    }
    let live = !quiet && std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut last = (Instant::now(), 0u64);
    let mut last_log = Instant::now();
    let mut last_tick = Instant::now();
    while !stop.load(Ordering::Relaxed) && limit.is_none_or(|l| started.elapsed() < l) {
        std::thread::sleep(Duration::from_millis(100));
        control.alive();
        if let Some(d) = rec.stage_died() {
            // Say it everywhere before stopping: the status (fault), the
            // fault file (the watchdog's check names the dead stage),
            // systemd's STATUS= line.
            control.tick();
            control.check_watchdog_now();
            died = Some(d);
            break;
        }
        if last_tick.elapsed() >= Duration::from_secs(1) {
            last_tick = Instant::now();
            let reasons = control.tick().reasons.clone();
            health_triggers.observe(&reasons, &trigger_handle);
        }
        if live && last.0.elapsed() >= Duration::from_millis(500) {
            let s = rec.status();
            live_line(&s, &mut last);
        } else if !live && last_log.elapsed() >= Duration::from_secs(10) {
            last_log = Instant::now();
            let s = rec.status();
            tracing::info!(
                "{} MB written, {} messages, {} drops, {}",
                s.bytes_written / 1_000_000,
                s.messages_written,
                s.drops(),
                s.backend
            );
        }
    }
    if live {
        eprintln!();
    }
    // No edge between here and the end asks a stopping recorder for a clip.
    drop(session.gpio);
    let handle = rec.status_handle();
    let report = rec.stop();
    let secs = started.elapsed().as_secs_f64();
    let report = match report {
        Ok(r) if died.is_none() => r,
        // A stage died or hung: the recording ended in fault, nothing more
        // was written; the open segment is left for the next start.
        other => {
            daemon.finish(Some(control), HealthState::Fault);
            match other {
                Err(e) => eprintln!("edgerec: {e}"),
                Ok(_) => eprintln!("edgerec: {}", handle.snapshot().fault.unwrap_or_default()),
            }
            let s = handle.snapshot();
            eprintln!(
                "edgerec: the recording ended in fault: {} messages are in whole chunks on disk, {} accepted messages were not written, {} dropped; the next start recovers the unfinished segment",
                s.channels.iter().map(|c| c.written).sum::<u64>(),
                s.channels
                    .iter()
                    .map(|c| c.accepted.saturating_sub(c.written))
                    .sum::<u64>(),
                s.channels.iter().map(|c| c.dropped).sum::<u64>()
            );
            return Ok(Ended::StageDied);
        }
    };
    let failed = !report.storage_errors.is_empty();
    daemon.finish(
        Some(control),
        if failed {
            HealthState::Fault
        } else {
            HealthState::Idle
        },
    );
    // The fleet is told the vehicle stopped (not the last will).
    if let Some(link) = session.link {
        link.stop();
    }
    // After the daemon let go of the watchdog: draining may take a while.
    if let Some(agent) = agent {
        offload::finish(agent, cfg.offload.drain_on_stop);
    }
    let RecordingReport {
        status,
        segments,
        bytes_per_bin: per_bin,
        split_at_seconds: splits,
        storage_errors,
        ..
    } = report;
    println!("session:   {}", status.session_dir.display());
    for s in &segments {
        println!(
            "segment:   {} ({} messages, {})",
            s.path.display(),
            s.messages,
            info::human_bytes(s.bytes)
        );
    }
    println!(
        "recorded:  {} messages, {} in {:.1} s ({:.1} MB/s), {} dropped, backend {}",
        status.messages_written,
        info::human_bytes(status.bytes_written),
        secs,
        status.bytes_written as f64 / secs / 1e6,
        status.drops(),
        status.backend
    );
    if status.deleted_unsent > 0 {
        println!(
            "retention: {} segment(s) or clip(s) deleted before offload sent them: they never reached the store (each is in the log)",
            status.deleted_unsent
        );
    }
    if status.deleted_sent > 0 {
        println!(
            "retention: {} segment(s) or clip(s) deleted after they reached the store",
            status.deleted_sent
        );
    }
    if let Some(p) = report_json {
        let mut j = report_to_json(&status, secs, &segments);
        let bins_per_second = (1000 / THROUGHPUT_BIN.as_millis()).max(1) as usize;
        let per_second: Vec<u64> = per_bin
            .chunks(bins_per_second)
            .map(|c| c.iter().sum())
            .collect();
        j["throughput_bin_ms"] = serde_json::json!(THROUGHPUT_BIN.as_millis() as u64);
        j["bytes_per_bin"] = serde_json::json!(per_bin);
        j["bytes_per_second"] = serde_json::json!(per_second);
        j["split_at_seconds"] = serde_json::json!(splits);
        j["storage_errors"] = serde_json::json!(storage_errors);
        std::fs::write(p, serde_json::to_vec_pretty(&j)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if !storage_errors.is_empty() {
        for e in &storage_errors {
            eprintln!("edgerec: storage failed during the recording: {e}");
        }
        eprintln!("edgerec: each failed segment was closed at its last good chunk and recovered; recording went on in a new one");
        return Ok(Ended::StorageFailed);
    }
    Ok(Ended::Clean)
}

fn live_line(s: &RecorderStatus, last: &mut (Instant, u64)) {
    let dt = last.0.elapsed().as_secs_f64().max(1e-3);
    let rate = (s.bytes_written.saturating_sub(last.1)) as f64 / dt / 1e6;
    *last = (Instant::now(), s.bytes_written);
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r\x1b[K{:>8.1} MB/s  {:>10} msgs  {:>6} drops  {}  {}  {:.0} s",
        rate,
        s.messages_written,
        s.drops(),
        s.backend,
        s.state.as_str(),
        s.elapsed.as_secs_f64()
    );
    let _ = err.flush();
}

/// CPU seconds (user + system) and peak RSS in bytes of this process.
fn rusage() -> (f64, u64) {
    // SAFETY: getrusage writes into the zeroed struct we own; RUSAGE_SELF
    // is always valid.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
            return (0.0, 0);
        }
        ru
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime) + t(ru.ru_stime), ru.ru_maxrss as u64 * 1024)
}

fn report_to_json(
    s: &RecorderStatus,
    secs: f64,
    segments: &[edgerec_recorder::segment::ClosedSegment],
) -> serde_json::Value {
    let (cpu_seconds, peak_rss_bytes) = rusage();
    serde_json::json!({
        "cpu_seconds": cpu_seconds,
        "peak_rss_bytes": peak_rss_bytes,
        "session_dir": s.session_dir,
        "backend": s.backend,
        "fallback_reason": s.fallback_reason,
        "seconds": secs,
        "bytes_written": s.bytes_written,
        "messages_written": s.messages_written,
        "chunks_written": s.chunks_written,
        "drops": s.drops(),
        "budget_peak": s.budget_peak,
        "budget_limit": s.budget_limit,
        "segments": segments.iter().map(|c| serde_json::json!({
            "path": c.path, "messages": c.messages, "bytes": c.bytes,
            "start_ns": c.start_ns, "end_ns": c.end_ns,
        })).collect::<Vec<_>>(),
        "channels": s.channels.iter().map(|c| serde_json::json!({
            "topic": c.topic, "type": c.type_name, "accepted": c.accepted,
            "dropped": c.dropped, "lost": c.lost, "upstream_lost": c.upstream_lost,
            "written": c.written, "bytes": c.bytes,
        })).collect::<Vec<_>>(),
        "sources": s.sources.iter().map(|x| serde_json::json!({
            "name": x.name, "state": x.state.as_str(), "restarts": x.restarts,
            "last_error": x.last_error,
        })).collect::<Vec<_>>(),
        "unknown_channel_pushes": s.unknown_channel_pushes,
    })
}

/// `edgerec ctl`: one command to the running recorder, its reply printed.
fn ctl_cmd(config: &Path, socket: Option<&Path>, args: &[String]) -> ExitCode {
    let cmd = match edgerec_ros::control::Command::from_args(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("edgerec ctl: {e}");
            return ExitCode::from(2);
        }
    };
    match send_ctl("edgerec ctl", config, socket, &cmd) {
        Ok((ok, reply)) => {
            println!("{reply}");
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(code) => code,
    }
}

/// `edgerec offload VERB`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum OffloadCli {
    /// The queue by class, the rate and the link, as JSON.
    Status,
    /// Stop sending after the request in flight.
    Pause,
    /// Send again.
    Resume,
    /// Try every waiting file now.
    Retry,
}

fn offload_cmd(config: &Path, socket: Option<&Path>, verb: OffloadCli) -> ExitCode {
    use edgerec_ros::control::{Command, OffloadVerb};
    let cmd = Command::Offload(match verb {
        OffloadCli::Status => OffloadVerb::Status,
        OffloadCli::Pause => OffloadVerb::Pause,
        OffloadCli::Resume => OffloadVerb::Resume,
        OffloadCli::Retry => OffloadVerb::Retry,
    });
    match send_ctl("edgerec offload", config, socket, &cmd) {
        Ok((ok, reply)) => {
            // The reply's message: the status JSON, or what was done.
            let message = serde_json::from_str::<serde_json::Value>(&reply)
                .ok()
                .and_then(|v| v["message"].as_str().map(str::to_owned))
                .unwrap_or(reply);
            if ok {
                println!("{message}");
                ExitCode::SUCCESS
            } else {
                eprintln!("edgerec offload: {message}");
                ExitCode::from(1)
            }
        }
        Err(code) => code,
    }
}

/// Sends `cmd` to the control socket (`socket`, else `config`'s
/// `health.control_socket`): whether it was carried out, and the reply;
/// or the exit code after saying what went wrong.
fn send_ctl(
    tool: &str,
    config: &Path,
    socket: Option<&Path>,
    cmd: &edgerec_ros::control::Command,
) -> Result<(bool, String), ExitCode> {
    let path = match socket {
        Some(s) => s.to_path_buf(),
        None => match Config::load(config) {
            Ok(c) if !c.health.control_socket.as_os_str().is_empty() => c.health.control_socket,
            Ok(_) => {
                eprintln!(
                    "{tool}: {} sets no health.control_socket; set one (and restart the recorder) or give --socket",
                    config.display()
                );
                return Err(ExitCode::from(EXIT_CONFIG));
            }
            Err(e) => {
                eprintln!("{tool}: {e}; give --socket PATH");
                return Err(ExitCode::from(EXIT_CONFIG));
            }
        },
    };
    match edgerec_health::ctl::send(&path, &cmd.to_string(), Duration::from_secs(5)) {
        Ok(reply) => {
            let ok = serde_json::from_str::<serde_json::Value>(&reply)
                .ok()
                .and_then(|v| v["ok"].as_bool())
                .unwrap_or(false);
            Ok((ok, reply))
        }
        Err(e) => {
            eprintln!(
                "{tool}: {}: {e} (is the recorder running, and may this user use its control socket?)",
                path.display()
            );
            Err(ExitCode::from(1))
        }
    }
}
