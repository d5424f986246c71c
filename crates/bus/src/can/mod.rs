//! CAN and CAN FD from SocketCAN: the frames ([`frame`]), the socket
//! ([`socket`]) and the source ([`source`]).

pub mod frame;
pub mod socket;
pub mod source;

pub use frame::{CanFrame, FrameError};
pub use socket::can_unsupported;
pub use source::{CanSource, CanStats};
