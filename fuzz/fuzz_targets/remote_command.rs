//! A payload on the fleet link's `<prefix>/cmd` (whoever the broker lets
//! publish there): the command parser answers a command or a refusal with
//! a reason, never a panic; a refusal never claims an id the payload does
//! not hold; a command's text form (what the audit trail records) parses
//! back to the same command.
#![no_main]

use edgerec_remote::command::{parse, MAX_COMMAND};
use edgerec_ros::control::Command;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match parse(data) {
        Ok(c) => {
            assert!(data.len() <= MAX_COMMAND);
            assert!(!c.id.is_empty() && c.id.len() <= 64, "{:?}", c.id);
            let text = c.command.to_string();
            let again: Command = text
                .parse()
                .unwrap_or_else(|e| panic!("{:?} printed as {text:?}, which does not parse: {e}", c.command));
            assert_eq!(again, c.command, "{text:?}");
            let _ = c.expired(0);
            let _ = c.expired(i64::MAX);
        }
        Err(rej) => {
            assert!(!rej.reason.is_empty());
            if let Some(id) = &rej.id {
                let needle = format!("\"{id}\"");
                assert!(
                    String::from_utf8_lossy(data).contains(&needle),
                    "refusal names id {id:?} the payload does not hold"
                );
            }
        }
    }
});
