//! Integration tests of edgerec-storage against the live kernel, by theme.
//! Tests that need something this host may refuse (io_uring, mount) probe
//! first and print why they skip.

mod backends;
mod durability;
mod enospc;
mod fallback;
mod faults;
mod realtime;
mod util;
