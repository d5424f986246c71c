//! Offload: sends recordings (bag directories, or single files) to an
//! S3-compatible object store (AWS S3, MinIO, Ceph RGW), beside the
//! recorder and never in its path: the recorder does not depend on this
//! crate, and nothing here runs while a segment is written.
//!
//! - [`agent`]: inside `edgerec run`, the files the recorder closes,
//!   queued and sent as it goes on;
//! - [`ledger`]: what is at the store, for retention and restarts;
//! - [`queue`]: what goes first (event clips, then the segments an event
//!   overlaps, then the rest);
//! - [`command`]: the `upload` command both binaries run;
//! - [`settings`]: `[offload]` turned into what the client needs (the
//!   vehicle's name, the store, the limits);
//! - [`credentials`]: the AWS shared-credentials file (owner-only) or the
//!   environment;
//! - [`key`]: each file's object key from `offload.key_template`;
//! - [`s3`]: the requests (rusty-s3 signs them, ureq sends them over
//!   rustls), each answered or turned into an error that names the fix;
//! - [`reply`]: the XML of the store's error replies, bounded and parsed;
//! - [`journal`]: the multipart uploads in progress and their acknowledged
//!   parts, durable on the data partition, so a cut upload goes on;
//! - [`upload`]: one file (a single PUT, or a multipart upload in parts
//!   sent `concurrency` at a time, each with the Content-MD5 the store
//!   checks, the object's ETag checked after), and a bag directory in
//!   order, `metadata.yaml` and then the session [`manifest`] last;
//! - [`platform`]: what differs on the laptops the tools run on
//!   (positioned reads, the page cache, secrets' permissions);
//! - [`priority`]: the upload's reads at the idle I/O class;
//! - [`uncached`]: the recording read past the page cache (`O_DIRECT`);
//! - [`pace`]: the bandwidth cap, kept as bodies go to the connection;
//! - [`link`]: when the agent may send (time windows, the interface the
//!   route to the store takes, metered links);
//! - [`manifest`]: what a session holds (each file's size, SHA-256,
//!   messages and time range), sent after its files;
//! - [`error`]: what can go wrong, each with its place and its fix.
//!
//! A file counts as uploaded when the store holds an object at its key
//! with its size and the ETag its part MD5s give (not compared under
//! SSE-KMS, whose ETags are opaque), and, for a file sent in one PUT, the
//! SHA-256 stored in the object's metadata (`x-amz-meta-sha256`); such a
//! file is skipped the next time.

pub mod agent;
pub mod command;
pub mod credentials;
pub mod error;
pub mod journal;
pub mod key;
pub mod ledger;
pub mod link;
pub mod manifest;
pub mod pace;
pub mod platform;
pub mod priority;
pub mod queue;
pub mod reply;
pub mod s3;
pub mod settings;
pub mod uncached;
pub mod upload;

pub use error::OffloadError;
pub use settings::Settings;
pub use upload::{FileOutcome, Plan, PlannedFile, Report, Uploader};
