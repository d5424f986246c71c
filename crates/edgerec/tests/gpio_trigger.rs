//! `[[trigger]] gpio`: a line that cannot be watched fails the recording's
//! start with the rule, the line and the fix (exit 78, as a configuration
//! error), before anything is created. A real line is driven on the QEMU board (tests/qemu, scenario
//! gpio-trigger: the virt machine's power button on PL061 line 3).

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_edgerec");

fn config(root: &Path, gpio: &str) -> String {
    format!(
        r#"
[recording]
root = "{root}"
session_prefix = "test"
mode = "triggered"

[health]
watchdog = ""
status_socket = "{root}.sock"
fault_file = "{root}.fault.json"

[retention]
min_free_bytes = 0
min_free_percent = 0

[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 100

[[trigger]]
name = "every_minute"
every = "1min"

[[trigger]]
name = "button"
gpio = "{gpio}"
edge = "falling"
pre = "1s"
post = "1s"
"#,
        root = root.display()
    )
}

#[test]
fn a_missing_gpio_chip_fails_the_start_naming_the_rule() {
    if edgerec_testkit::skip_if_cannot_exec(BIN) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("rec");
    let cfg = d.path().join("edgerec.toml");
    std::fs::write(&cfg, config(&root, "/nonexistent/gpiochip9:3")).unwrap();
    let t = std::time::Instant::now();
    let o = Command::new(BIN)
        .args([
            "run",
            "--config",
            cfg.to_str().unwrap(),
            "--duration",
            "20s",
        ])
        .env("EDGEREC_LOG", "warn")
        .output()
        .expect("run edgerec");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(78), "{err}");
    // The second rule (index 1) is the GPIO one; the first has no line.
    assert!(
        err.contains("trigger[1].gpio = \"/nonexistent/gpiochip9:3\" (rule button)"),
        "{err}"
    );
    assert!(err.contains("no GPIO chip /nonexistent/gpiochip9"), "{err}");
    assert!(err.contains("ls /dev/gpiochip*"), "{err}");
    // It failed at the start, not after the 20 s it was asked to record,
    // and left no session behind.
    assert!(t.elapsed().as_secs() < 15, "took {:?}", t.elapsed());
    assert!(!root.exists(), "{} was created", root.display());
}
