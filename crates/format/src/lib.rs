//! MCAP (ros2 profile) writing, reading and checking, rosbag2 bag
//! directories, ROS 2 message definitions and CDR.
//!
//! The format stage knows nothing of the kernel: [`writer::McapWriter`]
//! frames a file over any [`std::io::Write`], [`chunk`] builds and seals
//! chunks on whichever thread calls it, and [`reader`] verifies files with
//! bounded memory. [`msgtype`] parses a channel's `ros2msg` schema into
//! types and [`cdr_read`] reads single fields of its CDR messages by path;
//! [`cdr_decode`] and [`ros1_decode`] decode whole ROS 2 and ROS 1 messages
//! into one [`value::MsgValue`] tree, which [`mod@print`] writes as JSON lines
//! or CSV columns.
//!
//! ```
//! use edgerec_format::chunk::{ChunkBuilder, ChunkCompressor, Compression};
//! use edgerec_format::records::{Channel, Schema};
//! use edgerec_format::writer::{McapWriter, PROFILE_ROS2};
//!
//! let mut w = McapWriter::new(Vec::new(), PROFILE_ROS2, "doc").unwrap();
//! w.add_schema(&Schema { id: 1, name: "std_msgs/msg/String".into(),
//!     encoding: "ros2msg".into(), data: b"string data".to_vec() }).unwrap();
//! w.add_channel(&Channel { id: 1, schema_id: 1, topic: "/chatter".into(),
//!     message_encoding: "cdr".into(), metadata: Default::default() }).unwrap();
//! let mut b = ChunkBuilder::new(1 << 16);
//! b.push(1, 0, 10, 10, &edgerec_format::cdr::msg::string("hi"));
//! let mut z = ChunkCompressor::new(Compression::Zstd { level: 3 }).unwrap();
//! w.write_chunk(&b.take().seal(&mut z)).unwrap();
//! let (bytes, summary) = w.finish().unwrap();
//! assert_eq!(summary.statistics.message_count, 1);
//! assert_eq!(&bytes[..8], edgerec_format::records::MAGIC);
//! ```
#![deny(missing_docs)]

pub mod bag;
pub mod cdr;
pub mod cdr_decode;
pub mod cdr_read;
pub mod chunk;
pub mod decode;
pub mod info;
pub mod messages;
pub mod msgdefs;
pub mod msgtype;
pub mod nofollow;
pub mod print;
pub mod reader;
pub mod records;
pub mod recover;
pub mod ros1_decode;
pub mod value;
pub mod wire;
pub mod writer;
pub mod yaml;

/// Errors of reading and writing MCAP files.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The sink or source failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// An earlier write failed; the writer refuses further writes.
    #[error("the writer failed earlier and accepts no more records")]
    WriterFailed,
    /// Bytes that are not valid MCAP.
    #[error("at byte {offset}: {what}")]
    Corrupt {
        /// File offset of the bad record.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// A CRC does not match.
    #[error(
        "at byte {offset}: {what} CRC mismatch (stored {saved:#010x}, computed {calculated:#010x})"
    )]
    BadCrc {
        /// File offset of the record holding the CRC.
        offset: u64,
        /// Which CRC.
        what: &'static str,
        /// The stored value.
        saved: u32,
        /// The computed value.
        calculated: u32,
    },
    /// A record field could not be decoded.
    #[error("record does not decode: {0}")]
    Decode(#[from] records::DecodeError),
    /// A length or size field claims more bytes than there can be: more
    /// than the file or the enclosing record has left, or more than any
    /// record this crate accepts. Checked before anything is allocated.
    #[error("at byte {offset}: {field} claims {claimed} bytes, more than the {limit} possible")]
    LengthOutOfBounds {
        /// File offset of the record holding the field.
        offset: u64,
        /// The field, as `record.field` (`chunk.uncompressed_size`).
        field: &'static str,
        /// The length the field claims.
        claimed: u64,
        /// The most it could be.
        limit: u64,
    },
    /// Publishing a finished file under its final name failed.
    #[error(transparent)]
    Publish(#[from] bag::PublishError),
    /// The caller broke an invariant (a channel without its schema...).
    #[error("{0}")]
    Inconsistent(String),
}
