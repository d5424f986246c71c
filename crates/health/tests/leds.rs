//! LEDs against a temporary directory laid out like `/sys/class/leds`
//! (`<root>/<name>/{brightness,max_brightness,trigger}`): what each state
//! writes, that an unchanged state writes nothing, and missing LEDs.

use std::fs;
use std::path::Path;

use edgerec_health::leds::{LedMap, LedPattern, Leds};
use edgerec_health::state::HealthState;

fn led_dir(root: &Path, name: &str, max_brightness: Option<u32>) {
    let dir = root.join(name);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("brightness"), "0\n").unwrap();
    fs::write(dir.join("trigger"), "[none] timer heartbeat\n").unwrap();
    if let Some(max) = max_brightness {
        fs::write(dir.join("max_brightness"), format!("{max}\n")).unwrap();
    }
}

fn read(root: &Path, led: &str, attr: &str) -> String {
    fs::read_to_string(root.join(led).join(attr))
        .unwrap()
        .trim()
        .to_owned()
}

fn map() -> LedMap {
    let p = |s: &str| s.parse::<LedPattern>().unwrap();
    let mut map = LedMap::new();
    map.insert(HealthState::Idle, vec![("status".to_owned(), p("blink"))]);
    map.insert(
        HealthState::Recording,
        vec![("status".to_owned(), p("on")), ("rec".to_owned(), p("on"))],
    );
    map.insert(
        HealthState::Degraded,
        vec![
            ("status".to_owned(), p("blink:200/800")),
            ("error".to_owned(), p("on")),
        ],
    );
    map.insert(
        HealthState::Fault,
        vec![("error".to_owned(), p("blink-fast"))],
    );
    map
}

#[test]
fn each_state_writes_its_patterns() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    led_dir(root, "status", Some(255));
    led_dir(root, "error", None);
    // "rec" is in the map but not on this board.
    let mut leds = Leds::new(root.to_path_buf(), map());

    leds.show(HealthState::Recording);
    assert_eq!(read(root, "status", "trigger"), "none");
    assert_eq!(read(root, "status", "brightness"), "255");
    // Named for other states, not this one: off.
    assert_eq!(read(root, "error", "trigger"), "none");
    assert_eq!(read(root, "error", "brightness"), "0");
    assert!(!root.join("rec").exists(), "a missing LED is not created");

    leds.show(HealthState::Fault);
    assert_eq!(read(root, "error", "trigger"), "timer");
    assert_eq!(read(root, "error", "delay_on"), "100");
    assert_eq!(read(root, "error", "delay_off"), "100");
    assert_eq!(read(root, "status", "trigger"), "none");
    assert_eq!(read(root, "status", "brightness"), "0");

    leds.show(HealthState::Degraded);
    assert_eq!(read(root, "status", "trigger"), "timer");
    assert_eq!(read(root, "status", "delay_on"), "200");
    assert_eq!(read(root, "status", "delay_off"), "800");
    assert_eq!(read(root, "error", "trigger"), "none");
    // No max_brightness: 1 means on.
    assert_eq!(read(root, "error", "brightness"), "1");

    leds.show(HealthState::Idle);
    assert_eq!(read(root, "status", "delay_on"), "500");
    assert_eq!(read(root, "status", "delay_off"), "500");
    assert_eq!(read(root, "error", "brightness"), "0");

    // A state with no entry turns every LED off.
    leds.show(HealthState::Booting);
    assert_eq!(read(root, "status", "trigger"), "none");
    assert_eq!(read(root, "status", "brightness"), "0");
    assert_eq!(read(root, "error", "brightness"), "0");
}

#[test]
fn unchanged_state_writes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    led_dir(root, "status", Some(1));
    led_dir(root, "error", Some(1));
    let mut leds = Leds::new(root.to_path_buf(), map());
    assert_eq!(leds.writes(), 0, "nothing written before the first show");

    leds.show(HealthState::Recording);
    // status on + error off: trigger and brightness each.
    assert_eq!(leds.writes(), 4);
    let mtime = |led: &str| {
        fs::metadata(root.join(led).join("brightness"))
            .unwrap()
            .modified()
            .unwrap()
    };
    let before = (mtime("status"), mtime("error"));
    std::thread::sleep(std::time::Duration::from_millis(20));
    for _ in 0..5 {
        leds.show(HealthState::Recording);
    }
    assert_eq!(leds.writes(), 4);
    assert_eq!((mtime("status"), mtime("error")), before);

    // Recording -> Booting: only status changes (error is already off).
    leds.show(HealthState::Booting);
    assert_eq!(leds.writes(), 6);
    assert_eq!(mtime("error"), before.1);

    // Booting -> Fault: error starts blinking (3 writes), status stays off.
    leds.show(HealthState::Fault);
    assert_eq!(leds.writes(), 9);
}

#[test]
fn missing_leds_are_listed_and_skipped() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    led_dir(root, "status", None);
    let mut leds = Leds::new(root.to_path_buf(), map());
    let status = leds.status();
    assert_eq!(status.present, ["status"]);
    assert_eq!(status.missing, ["error", "rec"]);
    assert_eq!(status.showing, None);

    leds.show(HealthState::Fault);
    assert!(!root.join("error").exists());
    assert_eq!(read(root, "status", "brightness"), "0");
    let status = leds.status();
    assert_eq!(status.showing, Some(HealthState::Fault));
    assert_eq!(status.last_error, None);
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(json["showing"], "fault");

    // No LED directory at all: still fine, nothing written.
    let mut none = Leds::new(root.join("absent"), map());
    none.show(HealthState::Recording);
    assert_eq!(none.writes(), 0);
    assert_eq!(none.status().missing.len(), 3);
}

#[test]
fn a_failed_write_is_reported_not_fatal() {
    // Root ignores file modes; a directory in place of the attribute file
    // fails for everyone.
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    led_dir(root, "status", Some(1));
    fs::remove_file(root.join("status/trigger")).unwrap();
    fs::create_dir(root.join("status/trigger")).unwrap();
    let mut leds = Leds::new(root.to_path_buf(), map());
    leds.show(HealthState::Recording);
    let error = leds.status().last_error.expect("the failure is kept");
    assert!(error.contains("status/trigger"), "{error}");
}
