//! The tools' one error type. Each variant names the file it is about,
//! the place in it where the bytes say so (the reader errors it wraps
//! carry byte offsets), and where there is one, the fix.

use std::path::PathBuf;

use edgerec_format::print::SelectionError;
use edgerec_format::FormatError;

/// Result of the tools' operations.
pub type Result<T, E = ToolError> = std::result::Result<T, E>;

/// Why a command could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The input is neither a ROS 1 bag, an MCAP file nor a rosbag2
    /// directory.
    #[error("{}: {what}", path.display())]
    NotABag {
        /// The file.
        path: PathBuf,
        /// What it is instead, and what would be accepted.
        what: String,
    },
    /// The ROS 1 bag reader refused the bag (the error names the byte).
    #[error("{}: {source}", path.display())]
    Ros1 {
        /// The bag.
        path: PathBuf,
        /// The reader's error, with its offset.
        #[source]
        source: edgerec_rosbag1::Error,
    },
    /// The MCAP reader or writer refused the file (the error names the byte).
    #[error("{}: {source}", path.display())]
    Mcap {
        /// The file.
        path: PathBuf,
        /// The format crate's error, with its offset.
        #[source]
        source: FormatError,
    },
    /// A topic asked for is not in the bag.
    #[error("{}: no topic {topic:?} in the bag (it has: {})", path.display(), available.join(", "))]
    NoSuchTopic {
        /// The bag.
        path: PathBuf,
        /// The topic asked for.
        topic: String,
        /// The topics there are.
        available: Vec<String>,
    },
    /// The output exists already; the tools never write over a file.
    #[error("{}: exists already; remove it or name another output", path.display())]
    OutputExists {
        /// The output.
        path: PathBuf,
    },
    /// A message type whose definition is missing or does not parse.
    #[error("{topic}: type {type_name} has no usable definition: {why}")]
    Definition {
        /// The topic.
        topic: String,
        /// The type.
        type_name: String,
        /// What is wrong with it.
        why: String,
    },
    /// A message that does not decode with its definition.
    #[error(transparent)]
    Decode(Box<MessageError>),
    /// A message that does not convert (its bytes do not fit its definition).
    #[error(transparent)]
    Convert(Box<MessageError>),
    /// A `--fields` list that does not parse.
    #[error("--fields: {0}")]
    Fields(#[from] SelectionError),
    /// A `--start` or `--end` that is not a time.
    #[error("{flag} {value:?}: {why}")]
    BadTime {
        /// `--start` or `--end`.
        flag: &'static str,
        /// As given.
        value: String,
        /// What a time looks like.
        why: &'static str,
    },
    /// An argument that does not fit the input.
    #[error("{0}")]
    Usage(String),
    /// A `filter` expression that does not parse, or does not fit a
    /// channel's type.
    #[error(transparent)]
    Expression(Box<ExpressionError>),
    /// What a [`crate::walk::walk`] visitor returns to end the walk early
    /// (a `--limit` reached); the walk returns `Ok` and no command reports it.
    #[error("the walk was ended early")]
    Enough,
}

/// Why a `filter` expression was refused: the column, what is wrong, and
/// the text with a caret under the column.
#[derive(Debug, thiserror::Error)]
#[error("the expression{context}: {error}\n    {text}\n    {}^", " ".repeat(error.column.saturating_sub(1)))]
pub struct ExpressionError {
    /// The expression.
    pub text: String,
    /// Where it was compiled (` (on /imu, of type ...)`), or empty.
    pub context: String,
    /// The parser's or compiler's error.
    pub error: edgerec_trigger::ExprError,
}

/// One message a command could not use, and where it is.
#[derive(Debug, thiserror::Error)]
#[error("{}: {topic} message at {time_ns} ns ({place}) of type {type_name}: {why}", path.display())]
pub struct MessageError {
    /// The bag.
    pub path: PathBuf,
    /// The topic.
    pub topic: String,
    /// Its type.
    pub type_name: String,
    /// The message's log time.
    pub time_ns: u64,
    /// Where it is in the file (`record at byte M of the chunk at byte N`).
    pub place: String,
    /// What is wrong, naming the field.
    pub why: String,
}

impl ToolError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ToolError {
        let path = path.into();
        move |source| ToolError::Io { path, source }
    }

    /// A ROS 1 reader error on `path`.
    pub fn ros1(path: impl Into<PathBuf>) -> impl FnOnce(edgerec_rosbag1::Error) -> ToolError {
        let path = path.into();
        move |source| ToolError::Ros1 { path, source }
    }

    /// An MCAP error on `path`.
    pub fn mcap(path: impl Into<PathBuf>) -> impl FnOnce(FormatError) -> ToolError {
        let path = path.into();
        move |source| ToolError::Mcap { path, source }
    }

    /// The exit status a command ends with after this error: 2 for a
    /// command line that cannot work, 1 for everything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            ToolError::Fields(_)
            | ToolError::BadTime { .. }
            | ToolError::Usage(_)
            | ToolError::Expression(_)
            | ToolError::NoSuchTopic { .. } => 2,
            _ => 1,
        }
    }
}
