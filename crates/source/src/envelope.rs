//! Envelopes: one message on its way from a source to a chunk.

use crate::channel::ChannelId;

/// One message. The payload is moved, never copied, until the chunker
/// copies it once into the chunk's record buffer.
#[derive(Debug)]
pub struct Envelope {
    /// The channel it belongs to.
    pub channel: ChannelId,
    /// Receive (capture) instant on the recording clock, ns since epoch.
    pub log_time: u64,
    /// The source's own stamp (header.stamp), else equal to `log_time`.
    pub publish_time: u64,
    /// The serialized message (CDR with its encapsulation header for ROS 2).
    pub payload: Vec<u8>,
}

impl Envelope {
    /// Bytes this envelope holds against the memory budget: the payload's
    /// allocation plus the envelope itself.
    #[inline]
    pub fn charge(&self) -> u64 {
        (self.payload.capacity() + std::mem::size_of::<Envelope>()) as u64
    }
}
