//! Integration tests of edgerec-config, by theme: the shipped files and the
//! defaults, then one test per class of error.

mod bus;
mod camera;
mod errors;
mod files;
mod triggers;
