//! The crate's one error type. Every variant that comes from the bytes of a
//! file says where (`offset`: a file offset, or for records inside a chunk
//! the offset into the chunk's uncompressed data together with the chunk's
//! file offset) so a caller can report the first problem and its place.

use std::io;

/// Result of this crate's operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where a record sits: in the file, or inside a chunk's uncompressed data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// A file offset.
    File(u64),
    /// An offset into the uncompressed data of the chunk record at `chunk`.
    Chunk {
        /// File offset of the chunk record.
        chunk: u64,
        /// Offset into its uncompressed data.
        offset: u64,
    },
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::File(o) => write!(f, "byte {o}"),
            Place::Chunk { chunk, offset } => {
                write!(f, "byte {offset} of the chunk at byte {chunk}")
            }
        }
    }
}

/// Errors of reading and writing ROS 1 bags.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file or sink failed.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// The file does not start with `#ROSBAG V2.0\n`.
    #[error("not a ROS 1 bag v2.0: the file starts with {found:?}")]
    BadMagic {
        /// The first bytes of the file (at most 13), lossily as text.
        found: String,
    },
    /// The bag is encrypted (its bag header has an `encryptor` field).
    #[error(
        "the bag is encrypted with {encryptor:?}; encrypted bags are not supported (decrypt it with `rosbag decrypt` first)"
    )]
    Encrypted {
        /// The `encryptor` field's value, e.g. `rosbag/AesCbcEncryptor`.
        encryptor: String,
    },
    /// A record runs past the end of the bytes there are.
    #[error("at {at}: the {what} needs {need} bytes, only {have} remain")]
    Truncated {
        /// Where the record starts.
        at: Place,
        /// The part that does not fit (`record header`, `record data`, ...).
        what: &'static str,
        /// Bytes it needs.
        need: u64,
        /// Bytes there are.
        have: u64,
    },
    /// A header field without `=`, or with a name seen twice.
    #[error("at {at}: malformed header field: {what}")]
    BadField {
        /// Where the record starts.
        at: Place,
        /// What is wrong.
        what: &'static str,
    },
    /// A record lacks a field its op requires.
    #[error("at {at}: the op 0x{op:02x} record has no {field:?} field")]
    MissingField {
        /// Where the record starts.
        at: Place,
        /// The record's op.
        op: u8,
        /// The missing field.
        field: &'static str,
    },
    /// A field's value has the wrong size for its type.
    #[error("at {at}: field {field:?} is {len} bytes, expected {expected}")]
    FieldSize {
        /// Where the record starts.
        at: Place,
        /// The field.
        field: &'static str,
        /// Its size.
        len: usize,
        /// The size its type has.
        expected: usize,
    },
    /// A record of another op than the one expected at that place.
    #[error(
        "at {at}: expected a {expected} record (op 0x{expected_op:02x}), found op 0x{found:02x}"
    )]
    UnexpectedOp {
        /// Where the record starts.
        at: Place,
        /// What was expected.
        expected: &'static str,
        /// Its op.
        expected_op: u8,
        /// The op found.
        found: u8,
    },
    /// An index data or chunk info record of a version this reader does not know.
    #[error("at {at}: {what} version {version} is not supported (only 1)")]
    UnsupportedVersion {
        /// Where the record starts.
        at: Place,
        /// `index data` or `chunk info`.
        what: &'static str,
        /// The version found.
        version: u32,
    },
    /// A record's data does not have the layout its header announces.
    #[error("at {at}: {what}")]
    BadData {
        /// Where the record starts.
        at: Place,
        /// What is wrong.
        what: &'static str,
    },
    /// A chunk compression other than `none`, `bz2` and `lz4`.
    #[error("at byte {chunk}: unknown chunk compression {name:?}")]
    UnknownCompression {
        /// File offset of the chunk record.
        chunk: u64,
        /// The `compression` field's value.
        name: String,
    },
    /// A length beyond what this reader accepts.
    #[error("at {at}: {what} of {len} bytes is over the limit of {limit}")]
    TooLarge {
        /// Where the record starts.
        at: Place,
        /// What is that long.
        what: &'static str,
        /// Its length.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// The decoder refused a compressed chunk.
    #[error("at byte {chunk}: {compression} data does not decompress: {source}")]
    Decompress {
        /// File offset of the chunk record.
        chunk: u64,
        /// `bz2` or `lz4`.
        compression: &'static str,
        /// The decoder's error.
        #[source]
        source: io::Error,
    },
    /// A chunk decompressed to another size than its `size` field says.
    #[error(
        "at byte {chunk}: the chunk decompresses to {actual} bytes, its size field says {declared}"
    )]
    SizeMismatch {
        /// File offset of the chunk record.
        chunk: u64,
        /// The `size` field.
        declared: u64,
        /// Bytes decompressed (or, past `declared`, at least this many).
        actual: u64,
    },
    /// A message or index names a connection the bag does not define.
    #[error("at {at}: connection {conn} is not defined")]
    UnknownConnection {
        /// Where the record starts.
        at: Place,
        /// The connection id.
        conn: u32,
    },
    /// A writer was given two connections with one id.
    #[error("connection {conn} was added twice")]
    DuplicateConnection {
        /// The connection id.
        conn: u32,
    },
    /// An earlier write failed; the writer refuses further writes.
    #[error("the writer failed earlier and accepts no more records")]
    WriterFailed,
    /// `reindex` was asked to write over its source.
    #[error("the destination {0:?} is the source bag; reindex never modifies its source")]
    DestinationIsSource(std::path::PathBuf),
}
