//! Why a channel could not be registered and why a source run ended.

/// Registration refused.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum RegisterError {
    /// The topic is registered with this type already, with another
    /// encoding or schema (a topic published with two *types* is two
    /// channels; one type with two definitions cannot be told apart).
    #[error("topic {topic} ({type_name}) is already recorded with another {what}; a type's messages need one definition in a recording")]
    SchemaConflict {
        /// The topic.
        topic: String,
        /// Its type.
        type_name: String,
        /// What differs: `schema`, `schema encoding` or `message encoding`.
        what: &'static str,
    },
    /// MCAP channel ids are u16; 0 and 65535 are not used.
    #[error("more than 65534 channels: {topic} cannot be recorded")]
    TooManyChannels {
        /// The topic that did not fit.
        topic: String,
    },
}

/// Why a source's run ended with an error.
///
/// The supervisor restarts a source after every error except
/// [`SourceError::Config`], which no restart can cure.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A channel could not be registered.
    #[error(transparent)]
    Register(#[from] RegisterError),
    /// An I/O call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done (`open /dev/video0`, `recv on can0`).
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A device, peer or library reported a failure.
    #[error("{device}: {reason}")]
    Device {
        /// The device, peer or element.
        device: String,
        /// What it said.
        reason: String,
    },
    /// The source's configuration cannot work; restarting would not help.
    #[error("configuration: {reason}")]
    Config {
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// A fault injected on purpose (`sources.synthetic[].fault`).
    #[error("injected fault: {fault}")]
    Injected {
        /// The fault as configured.
        fault: String,
    },
}

impl SourceError {
    /// True when restarting the source cannot help.
    pub fn is_permanent(&self) -> bool {
        matches!(self, SourceError::Config { .. })
    }
}
