//! `edgerec export csv|video|candump|pcap` and `edgerec import candump`:
//! the CLI of `edgerec_tools` (csv), of `edgerec_camera::export` (with its
//! progress line and summary) and of `edgerec_bus::export`. Video needs the `camera` feature; the
//! bus exports do not (the static board build has them).

use std::path::PathBuf;
use std::process::ExitCode;

#[cfg(feature = "camera")]
use std::io::{IsTerminal, Write};
#[cfg(feature = "camera")]
use std::time::{Duration, Instant};

#[cfg(feature = "camera")]
use edgerec_camera::export::{export_video, ExportError, ExportSummary};
#[cfg(feature = "camera")]
use edgerec_format::info::human_bytes;

/// How often the progress line is redrawn on a terminal.
#[cfg(feature = "camera")]
const LIVE_EVERY: Duration = Duration::from_millis(200);
/// How often a progress line is printed when stderr is not a terminal
/// (only long exports print any).
#[cfg(feature = "camera")]
const LOG_EVERY: Duration = Duration::from_secs(5);

/// `edgerec export`.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand, Debug)]
enum What {
    /// One topic of any bag (ROS 1 .bag, .mcap, rosbag2 directory) as CSV:
    /// `log_time`, then the message's scalars by path, the header stamp
    /// first (or the `--fields` named).
    Csv(edgerec_tools::cli::CsvArgs),
    /// CAN topics (can_msgs/msg/Frame, ros2_socketcan_msgs/msg/FdFrame) as
    /// a `candump -L` log, merged by receive time: what canplayer,
    /// SavvyCAN, python-can and cantools read.
    Candump {
        /// A bag directory (its segments in order) or one .mcap file.
        bag: PathBuf,
        /// A CAN topic; repeat for several (the classic and FD topics of an
        /// interface); none = every CAN topic.
        #[arg(long, short)]
        topic: Vec<String>,
        /// The log file.
        #[arg(long, short)]
        output: PathBuf,
    },
    /// UDP packet topics (edgerec_msgs/msg/Packet) as a pcap file
    /// (Ethernet/IPv4/UDP with the receive times) for Wireshark, VeloView
    /// and Ouster Studio.
    Pcap {
        /// A bag directory (its segments in order) or one .mcap file.
        bag: PathBuf,
        /// A packet topic; repeat for several; none = every packet topic.
        #[arg(long, short)]
        topic: Vec<String>,
        /// The pcap file.
        #[arg(long, short)]
        output: PathBuf,
    },
    /// A video topic (foxglove_msgs/msg/CompressedVideo, H.265) as a
    /// playable file, without re-encoding: .mp4, .mov or .mkv timed by the
    /// capture timestamps, or .h265/.hevc (the access units, Annex B).
    #[cfg(feature = "camera")]
    Video {
        /// A bag directory (its segments in order) or one .mcap file.
        bag: PathBuf,
        /// The video topic.
        #[arg(long, short)]
        topic: String,
        /// The output file; its extension picks the container.
        #[arg(long, short)]
        output: PathBuf,
    },
}

/// `edgerec import`.
#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    #[command(subcommand)]
    what: ImportWhat,
}

#[derive(clap::Subcommand, Debug)]
enum ImportWhat {
    /// A `candump -L` log as a new bag directory: /can/<interface>
    /// (can_msgs/msg/Frame) and /can/<interface>/fd
    /// (ros2_socketcan_msgs/msg/FdFrame), as edgerec records them.
    Candump {
        /// The log.
        log: PathBuf,
        /// The bag directory to make (must not exist).
        #[arg(long, short)]
        output: PathBuf,
    },
}

/// Runs `edgerec import ...`.
pub fn import(args: &ImportArgs) -> ExitCode {
    match &args.what {
        ImportWhat::Candump { log, output } => match edgerec_bus::import_candump(log, output) {
            Ok(s) => {
                let topics: Vec<String> =
                    s.topics.iter().map(|(t, n)| format!("{t} ({n})")).collect();
                println!(
                    "imported {} frames from {} into {}: {}",
                    s.frames,
                    log.display(),
                    s.file.display(),
                    topics.join(", ")
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("edgerec import candump: {e}");
                ExitCode::from(1)
            }
        },
    }
}

fn bus_summary(what: &str, unit: &str, s: &edgerec_bus::ExportSummary) {
    let secs = s.last_ns.saturating_sub(s.first_ns) as f64 / 1e9;
    println!(
        "exported {} {unit} of {} ({secs:.3} s) to {}",
        s.count,
        s.topics.join(", "),
        s.output.display()
    );
    if s.unfinished_segments > 0 {
        eprintln!(
            "edgerec export {what}: {} unfinished or unreadable segments were skipped (run `edgerec recover` on the bag first)",
            s.unfinished_segments
        );
    }
}

/// Runs `edgerec export ...`.
pub fn run(args: &ExportArgs) -> ExitCode {
    match &args.what {
        What::Csv(csv) => edgerec_tools::cli::csv_cmd(csv),
        What::Candump { bag, topic, output } => {
            match edgerec_bus::export_candump(bag, topic, output) {
                Ok(s) => {
                    bus_summary("candump", "frames", &s);
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("edgerec export candump: {e}");
                    ExitCode::from(1)
                }
            }
        }
        What::Pcap { bag, topic, output } => match edgerec_bus::export_pcap(bag, topic, output) {
            Ok(s) => {
                bus_summary("pcap", "packets", &s);
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("edgerec export pcap: {e}");
                ExitCode::from(1)
            }
        },
        #[cfg(feature = "camera")]
        What::Video { bag, topic, output } => {
            let mut progress = Progress::new();
            let result = export_video(bag, topic, output, |done, total| {
                progress.update(done, total)
            });
            progress.end();
            match result {
                Ok(s) => {
                    summary(topic, &s);
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("edgerec export video: {e}");
                    match e {
                        ExportError::UnknownContainer { .. } => ExitCode::from(2),
                        _ => ExitCode::from(1),
                    }
                }
            }
        }
    }
}

#[cfg(feature = "camera")]
fn summary(topic: &str, s: &ExportSummary) {
    let secs = s.duration_ns as f64 / 1e9;
    let fps = if secs > 0.0 {
        format!(", {:.2} fps", s.frames as f64 / secs)
    } else {
        String::new()
    };
    println!(
        "exported {} frames of {topic} ({secs:.3} s{fps}) to {}: {}",
        s.frames,
        s.output.display(),
        human_bytes(s.bytes)
    );
    if s.skipped_before_keyframe > 0 {
        eprintln!(
            "edgerec export video: skipped {} frames before the first keyframe (they cannot be decoded)",
            s.skipped_before_keyframe
        );
    }
    if s.restamped > 0 {
        eprintln!(
            "edgerec export video: {} frames had a timestamp not after the one before; each was put 1 us after it",
            s.restamped
        );
    }
    if s.unfinished_segments > 0 {
        eprintln!(
            "edgerec export video: {} unfinished or unreadable segments were skipped (run `edgerec recover` on the bag first)",
            s.unfinished_segments
        );
    }
}

/// The progress line: redrawn on a terminal, a line every few seconds
/// otherwise.
#[cfg(feature = "camera")]
struct Progress {
    live: bool,
    started: Instant,
    last: Option<Instant>,
    drawn: bool,
}

#[cfg(feature = "camera")]
impl Progress {
    fn new() -> Self {
        Progress {
            live: std::io::stderr().is_terminal(),
            started: Instant::now(),
            last: None,
            drawn: false,
        }
    }

    fn update(&mut self, done: u64, total: u64) {
        let every = if self.live { LIVE_EVERY } else { LOG_EVERY };
        let since = self.last.unwrap_or(self.started);
        if since.elapsed() < every {
            return;
        }
        self.last = Some(Instant::now());
        let pct = if total > 0 {
            done as f64 * 100.0 / total as f64
        } else {
            0.0
        };
        let mut err = std::io::stderr().lock();
        if self.live {
            let _ = write!(err, "\r\x1b[K{done}/{total} frames ({pct:.0} %)");
            self.drawn = true;
        } else {
            let _ = writeln!(
                err,
                "edgerec export video: {done}/{total} frames ({pct:.0} %)"
            );
        }
        let _ = err.flush();
    }

    fn end(&mut self) {
        if self.drawn {
            eprint!("\r\x1b[K");
        }
    }
}
