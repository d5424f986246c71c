//! `edgerec-tools`: the bag commands of `edgerec` as a program for any OS
//! (Linux, Windows, macOS): no recorder, no io_uring, no GStreamer. It
//! only wires [`edgerec_tools::cli`] and `edgerec_offload`'s upload.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use edgerec_tools::cli;

#[derive(Parser, Debug)]
#[command(
    name = "edgerec-tools",
    version,
    about = "ROS 1 bags, MCAP files and rosbag2 directories without ROS: info, check, cat, export csv, convert, filter, reindex, upload"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Describe a bag (like `rosbag info` / `ros2 bag info`); exit 1 when
    /// a file cannot be read.
    Info {
        /// A ROS 1 .bag, an .mcap file or a rosbag2 bag directory.
        path: PathBuf,
    },
    /// Verify a bag's structure, index and CRCs; exit 0 when valid, 1 when
    /// not, naming the first problem and its byte offset.
    Check {
        /// A ROS 1 .bag, an .mcap file or a rosbag2 bag directory.
        path: PathBuf,
    },
    /// Print decoded messages, one a line (`--json`: one JSON object).
    Cat(cli::CatArgs),
    /// Export: `export csv BAG --topic T -o F.csv`.
    Export {
        #[command(subcommand)]
        what: Export,
    },
    /// Convert a ROS 1 bag to MCAP (`ros1` profile) or, with `--to ros2`,
    /// to a rosbag2 bag directory in CDR.
    Convert(cli::ConvertArgs),
    /// Copy the part of a bag that matters (topics, a time window) into a
    /// new MCAP file or bag directory; exit 3 when an input file was
    /// damaged (kept up to the damage).
    Filter(cli::FilterArgs),
    /// Write an indexed copy of an unindexed ROS 1 bag (`.bag.active`),
    /// keeping every whole message; the original is not touched.
    Reindex(cli::ReindexArgs),
    /// Recover: a ROS 1 bag as `reindex`; MCAP `.active` segments closed.
    Recover {
        /// A bag directory, an .mcap(.active) file or a ROS 1 bag.
        path: PathBuf,
    },
    /// Send bag directories or files to the S3-compatible store of a
    /// configuration's `[offload]` (as `edgerec upload` does on the
    /// vehicle: checked parts, resumable, a session manifest). Exit 0 when
    /// every file is at the store, 1 when one could not be sent, 78 for
    /// the configuration or the credentials.
    #[command(
        after_help = "Example:\n  edgerec-tools upload --config offload.toml D:\\bags\\demo_20261206T101500Z"
    )]
    Upload {
        /// A configuration file whose `[offload]` to use (only that table
        /// is needed).
        #[arg(long, short)]
        config: PathBuf,
        /// No progress line, only the summary.
        #[arg(long, short)]
        quiet: bool,
        /// Bag directories and files.
        #[arg(required = true, num_args = 1..)]
        paths: Vec<PathBuf>,
    },
    /// Print the version.
    Version,
}

#[derive(Subcommand, Debug)]
enum Export {
    /// One topic as CSV: `log_time`, then the message's scalars by path.
    Csv(cli::CsvArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Info { path } => cli::info(&path, |_| {}),
        Cmd::Check { path } => cli::check(&path),
        Cmd::Cat(args) => cli::cat_cmd(&args),
        Cmd::Export {
            what: Export::Csv(args),
        } => cli::csv_cmd(&args),
        Cmd::Convert(args) => cli::convert_cmd(&args),
        Cmd::Filter(args) => cli::filter_cmd(&args),
        Cmd::Reindex(args) => cli::reindex_cmd(&args),
        Cmd::Recover { path } => cli::recover_cmd(&path),
        Cmd::Upload {
            config,
            quiet,
            paths,
        } => ExitCode::from(edgerec_offload::command::run(
            "edgerec-tools upload",
            &config,
            &paths,
            quiet,
        )),
        Cmd::Version => {
            println!("edgerec-tools {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
    }
}
