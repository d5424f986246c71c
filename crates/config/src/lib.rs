//! edgerec's configuration: the TOML schema, its defaults and its
//! validation.
//!
//! The appliance reads one file, `/data/edgerec/edgerec.toml`. Every key
//! but those that define a synthetic channel is optional: a key left out
//! takes the default documented on its field (and in `config/edgerec.toml`,
//! which lists them all), so an empty file is a valid configuration. What is in the file is checked strictly, because a
//! recorder that starts with a silently ignored setting loses data later: an
//! unknown key is an error naming the nearest valid key, a value out of its
//! range is an error naming the range, and every error names the file, line,
//! column and dotted key it is about.
//!
//! ```
//! use std::path::Path;
//! use std::time::Duration;
//! use edgerec_config::{Compression, Config, Rate, SyntheticKind};
//!
//! let text = r#"
//! [mcap]
//! compression = "zstd"
//! chunk_max_age = "250ms"
//!
//! [[sources.synthetic]]
//! topic = "/imu"
//! type = "sensor_msgs/msg/Imu"
//! rate = 400
//! "#;
//! let config = Config::parse(text, Path::new("edgerec.toml"))?;
//! assert_eq!(config.mcap.compression, Compression::Zstd);
//! assert_eq!(config.mcap.chunk_max_age, Duration::from_millis(250));
//! assert_eq!(config.storage.block_size, 1 << 20); // the default
//! assert_eq!(config.sources.synthetic[0].kind, SyntheticKind::Imu);
//! assert_eq!(config.sources.synthetic[0].rate, Rate::Hz(400.0));
//!
//! let err = Config::parse("[storage]\nblok_size = 4096\n", Path::new("edgerec.toml"))
//!     .unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "edgerec.toml:2:1: storage.blok_size: unknown key; did you mean `block_size`? \
//!      (valid keys: backend, block_size, queue_depth, sync_interval, preallocate, realtime_priority)"
//! );
//! # Ok::<(), edgerec_config::ConfigError>(())
//! ```
//!
//! Sizes are written as bytes (`4096`) or with a unit (`"512KiB"`,
//! `"4 MiB"`, `"1MB"`), durations always with a unit (`"500ms"`, `"1.5s"`);
//! see [`parse_size`] and [`parse_duration`].
//!
//! Each key is defined once, as one row of a `section!` table in
//! `src/config.rs`: its field and docs, its default, and the rule that reads
//! and checks it (`block_size: u64 = MIB, power_of_two_size(4 * KIB..=64 *
//! MIB);`). The table makes the public struct, its `Default`, the key list
//! behind the nearest-key and "belongs in" hints, and the reading of the
//! table, in row order, so that a check that compares keys sees the rows
//! above it. Keys that compare with others name a check (`src/checks.rs`),
//! values with a grammar of their own name a reader (`src/readers.rs`).
//! `config/edgerec.toml` documents the same keys, and a test fails when a
//! key is missing from it or set to anything but its default. The table is
//! a `macro_rules!` macro rather than a derive: a derive needs its own
//! proc-macro crate, `syn` and `quote` in every build (the appliance's
//! cross build included), and attributes whose defaults and rules would be
//! Rust expressions in strings; the macro keeps them plain, type-checked Rust
//! in the crate that uses them, at the cost of a fixed row syntax.
#![deny(missing_docs)]
// `ConfigError` is a plain struct of path, position, key, message and hint
// that other crates read field by field; boxing it to shrink `Result` would
// save nothing worth having in a parse that runs once at start-up.
#![allow(clippy::result_large_err)]

mod bus;
mod checks;
mod config;
mod document;
mod error;
pub mod gst_chain;
mod offload;
mod readers;
pub mod remote;
mod rooms;
mod schema;
mod units;
mod values;
mod voltage;

use std::path::Path;

pub use bus::{CanConfig, CanFilter, PacketDecoder, PacketSender, UdpConfig};
pub use config::{
    CameraConfig, ClockConfig, Config, HealthConfig, LedsConfig, McapConfig, MetricsConfig,
    OffloadConfig, PipelineConfig, RecordingConfig, RemoteConfig, RetentionConfig, RosConfig,
    RosQos, SegmentConfig, SourcesConfig, StorageConfig, SyntheticChannel, TriggerConfig,
    TriggersConfig,
};
pub use error::ConfigError;
pub use rooms::{machine_memory, Rooms, DATA_DIR_VAR, RUNTIME_DIR_VAR};
pub use units::{parse_duration, parse_size, UnitError};
pub use values::{
    Addressing, CameraSourceKind, ClockSourceKind, Compression, EncoderChoice, GpioEdge, Located,
    OffloadMode, Rate, RateControl, RecordingMode, RosDistro, SourceFault, Sse, StorageBackend,
    SyntheticKind, TimeWindow, HEALTH_CONDITIONS, HEALTH_STATES,
};
pub use voltage::{VoltageProfile, VoltageProfileError, VoltageStep};

/// The largest configuration file read: far more than any real one (the
/// shipped ones are a few KiB), so a wrong path (a log, a device, an image)
/// fails at once instead of being read into memory.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

impl Config {
    /// Reads and validates the configuration file at `path`.
    ///
    /// A file that cannot be read is a [`ConfigError`] naming the path and
    /// the operating system's error, with no line; so is one that is not a
    /// regular file (a FIFO would block, a device never end), one longer
    /// than [`MAX_CONFIG_BYTES`] (nothing past that is read) and one that
    /// is not UTF-8 (naming the byte).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::load_in(path, &Rooms::none())
    }

    /// [`Config::load`], then every path the recorder creates files at held
    /// to `rooms` (see [`Rooms`]): one outside is an error at its key.
    pub fn load_in(path: &Path, rooms: &Rooms) -> Result<Config, ConfigError> {
        let fail = |message: String| ConfigError {
            path: path.to_path_buf(),
            line: None,
            column: None,
            key: None,
            message,
            hint: None,
        };
        let read = || -> std::io::Result<Result<Vec<u8>, String>> {
            // Asked before opening: opening a FIFO would wait for a writer.
            let meta = std::fs::metadata(path)?;
            if !meta.is_file() {
                return Ok(Err(format!(
                    "cannot read the configuration: not a regular file ({}); give the path of the TOML file",
                    if meta.is_dir() { "a directory" } else { "a device, FIFO or socket" }
                )));
            }
            let f = std::fs::File::open(path)?;
            let mut text = Vec::new();
            std::io::Read::read_to_end(
                &mut std::io::Read::take(f, MAX_CONFIG_BYTES + 1),
                &mut text,
            )?;
            if text.len() as u64 > MAX_CONFIG_BYTES {
                return Ok(Err(format!(
                    "the configuration is larger than {} KiB: is this the right file? (a configuration is a few KiB of TOML)",
                    MAX_CONFIG_BYTES / 1024
                )));
            }
            Ok(Ok(text))
        };
        let bytes = read()
            .map_err(|err| fail(format!("cannot read the configuration: {err}")))?
            .map_err(fail)?;
        let text = String::from_utf8(bytes).map_err(|e| {
            fail(format!(
                "the configuration is not UTF-8 text (byte {} is not); save it as UTF-8",
                e.utf8_error().valid_up_to()
            ))
        })?;
        Config::parse_in(&text, path, rooms)
    }

    /// Validates `text`, the contents of a configuration file; `origin` is
    /// the file name errors give.
    pub fn parse(text: &str, origin: &Path) -> Result<Config, ConfigError> {
        Config::parse_in(text, origin, &Rooms::none())
    }

    /// [`Config::parse`] with the paths held to `rooms`.
    pub fn parse_in(text: &str, origin: &Path, rooms: &Rooms) -> Result<Config, ConfigError> {
        document::parse(text, origin, rooms)
    }
}
