//! What is at a path, in words, for the errors that refuse it (a socket
//! path holding a file, a watchdog path that is not a device).

use std::fs::FileType;
use std::os::unix::fs::FileTypeExt;

/// `t` in words: "a regular file", "a symbolic link", ...
pub(crate) fn describe(t: &FileType) -> &'static str {
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_file() {
        "a regular file"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "something else"
    }
}
