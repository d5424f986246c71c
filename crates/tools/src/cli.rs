//! The command lines of the tools, shared by the `edgerec` binary and the
//! any-OS `edgerec-tools` binary: clap argument structs and a function per
//! command that prints what the libraries report and returns the exit
//! status (0 done, 1 the input is bad or unreadable, 2 the command line
//! does not fit the input, 3 `recover` skipped a corrupt record or
//! `filter` met a damaged input).

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use edgerec_format::chunk::Compression;
use edgerec_format::info::{self, human_bytes, BagInfo, FileState};
use edgerec_format::print::FieldSelection;
use edgerec_format::reader::CheckReport;
use edgerec_format::recover;

use crate::cat::{cat, CatOptions};
use crate::convert::{convert, ConvertOptions, Progress, Target};
use crate::csv::export_csv;
use crate::error::{Result, ToolError};
use crate::open::{kind, open, Input, Kind};
use crate::select::TimeSpec;
use crate::walk::{self, Selection};

/// The messages a command reads: topics and a time window.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SelectArgs {
    /// Start at this time: seconds since the epoch (`1700000000.5`) or
    /// after the bag's first message (`+2.5`).
    #[arg(long)]
    pub start: Option<String>,
    /// End at this time (inclusive), as `--start`.
    #[arg(long)]
    pub end: Option<String>,
}

/// `cat`.
#[derive(clap::Args, Debug, Clone)]
pub struct CatArgs {
    /// A ROS 1 .bag, an .mcap file or a rosbag2 bag directory.
    pub bag: PathBuf,
    /// Only this topic; repeat for several (default: every topic).
    #[arg(long, short)]
    pub topic: Vec<String>,
    /// One JSON object a line: {"topic","log_time","type","message"}.
    #[arg(long)]
    pub json: bool,
    /// Stop after this many messages.
    #[arg(long, short = 'n')]
    pub limit: Option<u64>,
    /// The time window.
    #[command(flatten)]
    pub window: SelectArgs,
}

/// `export csv`.
#[derive(clap::Args, Debug, Clone)]
pub struct CsvArgs {
    /// A ROS 1 .bag, an .mcap file or a rosbag2 bag directory.
    pub bag: PathBuf,
    /// The topic.
    #[arg(long, short)]
    pub topic: String,
    /// Only these fields, comma-separated paths (`header.stamp,
    /// linear_acceleration.x, ranges[0]`); default every scalar.
    #[arg(long)]
    pub fields: Option<String>,
    /// The CSV file (`-` for standard output).
    #[arg(long, short)]
    pub output: PathBuf,
    /// The time window.
    #[command(flatten)]
    pub window: SelectArgs,
}

/// `convert`.
#[derive(clap::Args, Debug, Clone)]
pub struct ConvertArgs {
    /// The ROS 1 .bag.
    pub input: PathBuf,
    /// The output: an .mcap file (default), or with `--to ros2` a new
    /// rosbag2 bag directory.
    pub output: PathBuf,
    /// `ros1`: MCAP with the ros1 profile, messages unchanged (as `mcap
    /// convert`); `ros2`: a rosbag2 directory in CDR (as rosbags-convert).
    #[arg(long, default_value = "ros1", value_parser = ["ros1", "ros2"])]
    pub to: String,
    /// Chunk compression of the output: none (as rosbag2 and
    /// rosbags-convert write), zstd (level 1) or lz4.
    #[arg(long, default_value = "none", value_parser = ["none", "zstd", "lz4"])]
    pub compression: String,
}

/// `filter`.
#[derive(clap::Args, Debug, Clone)]
pub struct FilterArgs {
    /// A ROS 1 .bag, an .mcap file or a rosbag2 bag directory.
    pub input: PathBuf,
    /// The output: a ROS 1 .bag, an .mcap file, or (any other name) a new
    /// rosbag2 bag directory; `--to` overrides the name.
    pub output: PathBuf,
    /// Keep only the messages this holds for: the trigger rule language
    /// over the message's fields, `topic` and `t` (the log time), with
    /// `rosbag filter`'s forms (`topic == '/imu' and
    /// m.header.stamp.to_sec() > 100`, `topic in ('/a', '/b')`).
    pub expression: Option<String>,
    /// Keep these topics (by name; several after one flag, or the flag
    /// repeated).
    #[arg(long, num_args = 1..)]
    pub topics: Vec<String>,
    /// Keep the topics this regular expression matches, whole (`/camera_(front|back)`);
    /// repeatable.
    #[arg(long)]
    pub regex: Vec<String>,
    /// Drop the topics this regular expression matches, whole; repeatable.
    #[arg(long)]
    pub exclude: Vec<String>,
    /// Keep messages logged at or after this time: seconds since the epoch
    /// (`1700000000.5`), nanoseconds (`1700000000500000000ns`), RFC 3339
    /// (`2023-11-14T22:13:20.5Z`) or after the bag's first message (`+12.5s`).
    #[arg(long)]
    pub start: Option<String>,
    /// Keep messages logged before this time (exclusive), as `--start`.
    #[arg(long)]
    pub end: Option<String>,
    /// The output's kind: `bag` (ROS 1), `mcap` (one file) or `dir` (a
    /// rosbag2 bag directory); default from the output's name.
    #[arg(long)]
    pub to: Option<String>,
    /// Chunk compression of an MCAP output (default: the input's; a ROS 1
    /// bag is written uncompressed, as rosbag writes).
    #[arg(long, value_parser = ["none", "zstd", "lz4"])]
    pub compression: Option<String>,
    /// Threads decompressing the input's MCAP chunks (default: one per
    /// core, at most 8).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: Option<u16>,
}

/// `reindex`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReindexArgs {
    /// The unindexed ROS 1 bag (`.bag.active`, or a cut `.bag`).
    pub bag: PathBuf,
    /// The new bag (default: `x.bag` beside `x.bag.active`, else
    /// `x.reindexed.bag`).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

fn fail(cmd: &str, e: &ToolError) -> ExitCode {
    eprintln!("edgerec {cmd}: {e}");
    ExitCode::from(e.exit_code())
}

fn selection(input: &Input, topics: &[String], w: &SelectArgs) -> Result<Selection> {
    let start = w
        .start
        .as_deref()
        .map(|s| TimeSpec::parse("--start", s))
        .transpose()?;
    let end = w
        .end
        .as_deref()
        .map(|s| TimeSpec::parse("--end", s))
        .transpose()?;
    let first = if matches!(start, Some(TimeSpec::AfterStart(_)))
        || matches!(end, Some(TimeSpec::AfterStart(_)))
    {
        walk::start_ns(input)?
    } else {
        0
    };
    let topics: Option<BTreeSet<String>> =
        (!topics.is_empty()).then(|| topics.iter().cloned().collect());
    if let Some(t) = &topics {
        walk::check_topics(input, t)?;
    }
    Ok(Selection {
        topics,
        start_ns: start.map(|s| s.resolve(first)),
        end_ns: end.map(|s| s.resolve(first)),
    })
}

fn warn_skipped(cmd: &str, input: &Input) {
    for s in walk::skipped_files(input) {
        eprintln!("edgerec {cmd}: {s}");
    }
}

/// `info`: a ROS 1 bag like `rosbag info`; MCAP files and bag
/// directories like `ros2 bag info`, after `annotate` (the camera build
/// adds video figures). Exit 1 when a file cannot be read.
pub fn info(path: &Path, annotate: impl FnOnce(&mut BagInfo)) -> ExitCode {
    let input = match open(path) {
        Ok(i) => i,
        Err(e) => return fail("info", &e),
    };
    match input {
        Input::Ros1(r) => match crate::info::ros1_info(r.path()) {
            Ok(i) => {
                print!("{i}");
                ExitCode::SUCCESS
            }
            Err(e) => fail("info", &e),
        },
        Input::Mcap(mut i) => {
            annotate(&mut i);
            print!("{i}");
            let broken = i
                .files
                .iter()
                .filter(|f| matches!(f.state, FileState::Broken(_)))
                .count();
            if broken == 0 {
                ExitCode::SUCCESS
            } else {
                eprintln!(
                    "edgerec info: {broken} file(s) of {} unreadable (see UNREADABLE above; `edgerec check` names the first problem, `edgerec recover` rescues an unfinished MCAP file)",
                    path.display()
                );
                ExitCode::from(1)
            }
        }
    }
}

/// `check` of a bag of any kind: exit 0 when valid, 1 when not.
pub fn check(path: &Path) -> ExitCode {
    let kind = match kind(path) {
        Ok(k) => k,
        Err(e) => {
            println!("INVALID {e}");
            return ExitCode::from(1);
        }
    };
    if kind == Kind::Ros1 {
        return match crate::check::check_ros1(path) {
            Ok(r) => {
                println!(
                    "OK      {}: {} messages in {} chunks, {} connections, every record parsed, every chunk decompressed, the index agrees with the data (ROS 1 bags carry no CRCs)",
                    path.display(),
                    r.messages,
                    r.chunks,
                    r.connections
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                println!("INVALID {e}");
                ExitCode::from(1)
            }
        };
    }
    match info::check(path) {
        Ok(results) => {
            let mut ok = true;
            for r in results {
                match r.result {
                    Ok(rep) => println!(
                        "OK      {}: {} messages in {} chunks, {} channels, {}",
                        r.path.display(),
                        rep.messages,
                        rep.chunks,
                        rep.channels,
                        checked_note(&rep)
                    ),
                    Err(e) => {
                        ok = false;
                        println!("INVALID {}: {e}", r.path.display());
                    }
                }
            }
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            println!("INVALID {}: {e}", path.display());
            ExitCode::from(1)
        }
    }
}

/// What `check` could not verify in a valid MCAP file: CRCs its writer
/// left out and chunks it did not index (both optional in the spec).
fn checked_note(rep: &CheckReport) -> String {
    let mut note = match rep.crcs_absent {
        0 => "every CRC verified".to_owned(),
        n => format!("{n} CRC(s) absent (the writer left them 0; those parts are not verified)"),
    };
    if rep.unindexed_chunks > 0 {
        note.push_str(&format!(
            ", {} chunk(s) without message indexes",
            rep.unindexed_chunks
        ));
    }
    note
}

/// `cat`.
pub fn cat_cmd(args: &CatArgs) -> ExitCode {
    let run = || -> Result<crate::cat::CatReport> {
        let input = open(&args.bag)?;
        let selection = selection(&input, &args.topic, &args.window)?;
        warn_skipped("cat", &input);
        let opts = CatOptions {
            selection,
            json: args.json,
            limit: args.limit,
        };
        let stdout = std::io::stdout();
        let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
        cat(&input, &opts, &mut out, &mut std::io::stderr())
    };
    match run() {
        Ok(rep) if rep.undecodable > 0 => {
            eprintln!(
                "edgerec cat: {} message(s) did not decode (named above); {} printed",
                rep.undecodable, rep.printed
            );
            ExitCode::from(1)
        }
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => fail("cat", &e),
    }
}

/// `export csv`.
pub fn csv_cmd(args: &CsvArgs) -> ExitCode {
    let run = || -> Result<crate::csv::CsvReport> {
        let fields = args
            .fields
            .as_deref()
            .map(FieldSelection::parse)
            .transpose()?;
        let input = open(&args.bag)?;
        let selection = selection(&input, &[], &args.window)?;
        warn_skipped("export csv", &input);
        if args.output == Path::new("-") {
            let stdout = std::io::stdout();
            let mut out = BufWriter::new(stdout.lock());
            return export_csv(&input, &args.topic, fields.as_ref(), &selection, &mut out);
        }
        if args.output.exists() {
            return Err(ToolError::OutputExists {
                path: args.output.clone(),
            });
        }
        let f = File::create(&args.output).map_err(ToolError::io(&args.output))?;
        let mut out = BufWriter::with_capacity(1 << 16, f);
        let r = export_csv(&input, &args.topic, fields.as_ref(), &selection, &mut out);
        if r.is_err() {
            drop(out);
            let _ = std::fs::remove_file(&args.output);
        }
        r
    };
    match run() {
        Ok(rep) => {
            if args.output != Path::new("-") {
                eprintln!(
                    "edgerec export csv: {} rows of {} columns from {} to {}",
                    rep.rows,
                    rep.columns,
                    args.topic,
                    args.output.display()
                );
            }
            if rep.wider_rows > 0 {
                eprintln!(
                    "edgerec export csv: {} rows had values past the first message's columns (a longer sequence); those values are not in the file: name them with --fields",
                    rep.wider_rows
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail("export csv", &e),
    }
}

/// `convert`, with a progress line on a terminal.
pub fn convert_cmd(args: &ConvertArgs) -> ExitCode {
    let target = if args.to == "ros2" {
        Target::Ros2
    } else {
        Target::Ros1Mcap
    };
    let compression = compression_of(&args.compression);
    match kind(&args.input) {
        Ok(Kind::Ros1) => {}
        Ok(Kind::Mcap) => {
            eprintln!(
                "edgerec convert: {} is MCAP already; convert reads ROS 1 bags (.bag)",
                args.input.display()
            );
            return ExitCode::from(2);
        }
        Err(e) => return fail("convert", &e),
    }
    let live = std::io::stderr().is_terminal();
    let began = Instant::now();
    let mut last = Instant::now();
    let mut show = |p: Progress| {
        if !live || last.elapsed() < Duration::from_millis(200) {
            return;
        }
        last = Instant::now();
        let pct = if p.total > 0 {
            100.0 * p.messages as f64 / p.total as f64
        } else {
            100.0
        };
        let rate = p.bytes as f64 / began.elapsed().as_secs_f64().max(1e-3);
        eprint!(
            "\rconverting: {}/{} messages ({pct:.0}%), {} read, {}/s   ",
            p.messages,
            p.total,
            human_bytes(p.bytes),
            human_bytes(rate as u64)
        );
        let _ = std::io::stderr().flush();
    };
    let opts = ConvertOptions {
        target,
        compression,
    };
    let r = convert(&args.input, &args.output, opts, &mut show);
    if live {
        eprint!("\r\x1b[K");
    }
    match r {
        Ok(rep) => {
            println!(
                "{} -> {}: {} messages on {} topics ({} channels), {} in {:.1} s",
                args.input.display(),
                rep.file.display(),
                rep.messages,
                rep.topics.len(),
                rep.channels,
                human_bytes(rep.bytes),
                began.elapsed().as_secs_f64()
            );
            for (from, to) in &rep.types {
                if from != to {
                    println!("  type {from} -> {to}");
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail("convert", &e),
    }
}

/// `filter`: exit 0 when the output is written, 3 when it is written but
/// an input file was cut or corrupt (each named, with what was kept
/// before it) or messages could not be tested by the expression, 2 when the command line does not fit the input, 1 when the
/// input cannot be read or the output cannot be written (nothing is left).
pub fn filter_cmd(args: &FilterArgs) -> ExitCode {
    let began = Instant::now();
    let run = || -> Result<crate::filter::FilterReport> {
        let opts = crate::filter::FilterOptions {
            topics: crate::filter::Topics::new(&args.topics, &args.regex, &args.exclude)?,
            start: args
                .start
                .as_deref()
                .map(|s| TimeSpec::parse("--start", s))
                .transpose()?,
            end: args
                .end
                .as_deref()
                .map(|s| TimeSpec::parse("--end", s))
                .transpose()?,
            to: args
                .to
                .as_deref()
                .map(crate::filter::OutputKind::parse)
                .transpose()?,
            compression: args.compression.as_deref().map(compression_of),
            threads: args.threads.map(usize::from),
            expression: args
                .expression
                .as_deref()
                .map(|text| {
                    edgerec_trigger::Condition::parse(text).map_err(|error| {
                        ToolError::Expression(Box::new(crate::error::ExpressionError {
                            text: text.to_owned(),
                            context: String::new(),
                            error,
                        }))
                    })
                })
                .transpose()?,
        };
        crate::filter::filter(&args.input, &args.output, &opts)
    };
    match run() {
        Ok(rep) => {
            println!(
                "{} -> {}: {} of {} messages on {} topics, {} of message data, {} file(s), in {:.1} s",
                args.input.display(),
                args.output.display(),
                rep.messages,
                rep.input_messages,
                rep.topics.len(),
                human_bytes(rep.bytes),
                rep.files.len(),
                began.elapsed().as_secs_f64()
            );
            for (topic, n) in &rep.topics {
                println!("  {topic}: {n}");
            }
            if rep.undecodable > 0 {
                eprintln!(
                    "edgerec filter: {} message(s) could not be tested (their bytes do not fit their schema) and were left out; the first: {}",
                    rep.undecodable,
                    rep.first_undecodable.as_deref().unwrap_or("")
                );
            }
            if rep.damage.is_empty() && rep.undecodable == 0 {
                return ExitCode::SUCCESS;
            }
            for d in &rep.damage {
                eprintln!("edgerec filter: {d}");
            }
            if !rep.damage.is_empty() {
                eprintln!(
                    "edgerec filter: {} input file(s) damaged: the output is complete and valid but holds only what came before the damage",
                    rep.damage.len()
                );
            }
            ExitCode::from(3)
        }
        Err(e) => fail("filter", &e),
    }
}

fn compression_of(name: &str) -> Compression {
    match name {
        "none" => Compression::None,
        "lz4" => Compression::Lz4,
        _ => Compression::Zstd { level: 1 },
    }
}

/// `reindex`.
pub fn reindex_cmd(args: &ReindexArgs) -> ExitCode {
    match kind(&args.bag) {
        Ok(Kind::Ros1) => {}
        Ok(Kind::Mcap) => {
            eprintln!(
                "edgerec reindex: {} is MCAP; `edgerec recover` closes an unfinished MCAP file",
                args.bag.display()
            );
            return ExitCode::from(2);
        }
        Err(e) => return fail("reindex", &e),
    }
    match crate::reindex::reindex(&args.bag, args.output.as_deref()) {
        Ok((dst, rep)) => {
            println!("{}", crate::reindex::describe(&args.bag, &dst, &rep));
            ExitCode::SUCCESS
        }
        Err(e) => fail("reindex", &e),
    }
}

/// `recover`: a ROS 1 bag is reindexed beside itself; MCAP `.active`
/// segments are closed (exit 0 clean, 3 when a corrupt record was
/// skipped, 1 when nothing was recoverable).
pub fn recover_cmd(path: &Path) -> ExitCode {
    if path.is_file() && matches!(kind(path), Ok(Kind::Ros1)) {
        return reindex_cmd(&ReindexArgs {
            bag: path.to_path_buf(),
            output: None,
        });
    }
    let result = if path.is_dir() {
        recover::recover_dir(path)
    } else {
        recover::recover_file(path).map(|r| vec![r])
    };
    match result {
        Ok(reports) if reports.is_empty() => {
            println!("{}: no .active segment, nothing to recover", path.display());
            ExitCode::SUCCESS
        }
        Ok(reports) => {
            for r in &reports {
                println!("{r}");
            }
            let worst = reports
                .iter()
                .map(|r| r.outcome)
                .max_by_key(|o| o.severity())
                .map_or(0, |o| o.exit_code());
            ExitCode::from(worst)
        }
        Err(e) => {
            eprintln!("edgerec recover: {}: {e}", path.display());
            ExitCode::from(1)
        }
    }
}
