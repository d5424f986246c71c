//! `info` agrees with Debian's `rosbag info` and fails loudly on a file it
//! cannot read.

use std::process::Command;

use crate::support::*;

fn rosbag_info_yaml(bag: &std::path::Path) -> String {
    let out = Command::new(ROSBAG)
        .args(["info", "--yaml"])
        .arg(bag)
        .output()
        .unwrap();
    assert!(out.status.success(), "rosbag info: {}", stderr(&out));
    stdout(&out)
}

/// `key: value` of the top level of rosbag info's YAML.
fn field<'a>(yaml: &'a str, key: &str) -> &'a str {
    yaml.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("rosbag info --yaml has no {key}: {yaml}"))
        .trim()
}

#[test]
fn info_agrees_with_rosbag_info() {
    let Some(dir) = generated() else { return };
    if !std::path::Path::new(ROSBAG).exists() {
        edgerec_testkit::skip::skip(format!(
            "{ROSBAG} is missing (apt-get install python3-rosbag)"
        ));
        return;
    }
    for c in COMPRESSIONS {
        let bag = dir.join(format!("{c}.bag"));
        let yaml = rosbag_info_yaml(&bag);
        let out = tools(["info", bag.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        let ours = stdout(&out);
        let line = |k: &str| {
            ours.lines()
                .find_map(|l| l.strip_prefix(k))
                .unwrap_or_else(|| panic!("no {k} in {ours}"))
                .trim()
                .to_owned()
        };
        assert_eq!(line("messages:"), field(&yaml, "messages"), "{c}: messages");
        // rosbag prints the start and end as seconds with 6 decimals... or
        // more; compare as numbers to the nanosecond rosbag keeps.
        let ours_start = line("start:");
        let theirs_start: f64 = field(&yaml, "start").parse().unwrap();
        let ours_secs: f64 = ours_start
            .rsplit('(')
            .next()
            .unwrap()
            .trim_end_matches(')')
            .parse()
            .unwrap();
        assert!(
            (ours_secs - theirs_start).abs() < 1e-6,
            "{c}: start {ours_start} vs {theirs_start}"
        );
        let theirs_dur: f64 = field(&yaml, "duration").parse().unwrap();
        let ours_dur: f64 = line("duration:").trim_end_matches('s').parse().unwrap();
        assert!(
            (ours_dur - theirs_dur).abs() < 1e-3,
            "{c}: duration {ours_dur} vs {theirs_dur}"
        );
        assert_eq!(
            field(&yaml, "compression"),
            c,
            "rosbag info's compression of {c}.bag"
        );
        assert!(
            line("compression:").starts_with(c),
            "{c}: {}",
            line("compression:")
        );
        // Every topic with its count and type, as rosbag lists them.
        let mut lines = yaml.lines().skip_while(|l| !l.starts_with("topics:"));
        lines.next();
        let mut topics = 0;
        let rest: Vec<&str> = lines.collect();
        let mut i = 0;
        while i < rest.len() {
            if let Some(topic) = rest[i].trim().strip_prefix("- topic: ") {
                let get = |k: &str| {
                    rest[i + 1..]
                        .iter()
                        .take_while(|l| !l.trim().starts_with("- topic:"))
                        .find_map(|l| l.trim().strip_prefix(k))
                        .map(str::trim)
                };
                let n = get("messages: ").unwrap();
                let ty = get("type: ").unwrap();
                let ours_line = ours
                    .lines()
                    .find(|l| l.split_whitespace().any(|w| w == topic))
                    .unwrap_or_else(|| panic!("{c}: no {topic} in {ours}"));
                assert!(
                    ours_line.contains(&format!(" {n} msgs")) && ours_line.contains(ty),
                    "{c}: {topic}: rosbag says {n} msgs of {ty}; we say {ours_line}"
                );
                if let Some(conns) = get("connections: ") {
                    if conns != "1" {
                        assert!(
                            ours_line.contains(&format!("({conns} connections)")),
                            "{ours_line}"
                        );
                    }
                }
                topics += 1;
            }
            i += 1;
        }
        assert_eq!(topics, 5, "{c}: rosbag lists 5 topics");
    }
}

#[test]
fn info_of_an_unreadable_file_is_an_error() {
    let Some(dir) = generated() else { return };
    let work = scratch("info-bad");
    let bag = std::fs::read(dir.join("none.bag")).unwrap();
    let mut broken = bag.clone();
    broken[..13].copy_from_slice(b"#ROSBAG V1.2\n");
    let p = work.join("old.bag");
    std::fs::write(&p, &broken).unwrap();
    let out = tools(["info", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("old.bag"), "{}", stderr(&out));

    // Cut mid-chunk and unindexed: readable by a scan, which it says.
    let cut = work.join("cut.bag.active");
    std::fs::write(&cut, &bag[..bag.len() / 2]).unwrap();
    let out = tools(["info", cut.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("indexed:     no") && text.contains("edgerec reindex"),
        "{text}"
    );
}
