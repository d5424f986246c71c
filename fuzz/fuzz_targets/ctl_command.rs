//! A control socket line from any local user (the socket takes every
//! connection; the peer check comes after the parse): `Command`'s parser
//! on arbitrary text answers a command or an error, never a panic; a
//! command prints back (`edgerec ctl` sends its `Display`) to a line that
//! parses to the same command, and says whether it changes anything.
#![no_main]

use edgerec_ros::control::Command;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The socket reads at most 4096 bytes, lossily as UTF-8.
    let line = String::from_utf8_lossy(&data[..data.len().min(4096)]);
    let Ok(cmd) = line.parse::<Command>() else {
        return;
    };
    let text = cmd.to_string();
    let again: Command = text
        .parse()
        .unwrap_or_else(|e| panic!("{line:?} printed as {text:?}, which does not parse: {e}"));
    assert_eq!(again, cmd, "{line:?} printed as {text:?}");
    assert_eq!(again.changes_anything(), cmd.changes_anything());
    assert!(!text.contains('\n'), "{text:?}");
});
