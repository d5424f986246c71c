//! UDP packet streams: the message ([`packet`]), the socket ([`socket`])
//! and the source ([`source`]).

pub mod packet;
pub mod socket;
pub mod source;

pub use source::{UdpSource, UdpStats};
