//! `filter` of MCAP files and bag directories: what it keeps is what the
//! topics and window select from `cat` of the input, read back by edgerec
//! and by readers nobody here wrote (`rosbags` through `metadata.yaml`,
//! Foxglove's `mcap` with CRCs checked); schemas and channel metadata are
//! carried unchanged; a damaged input is kept up to the damage, exit 3;
//! bad arguments name themselves and leave nothing behind.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use edgerec_format::bag;
use edgerec_format::cdr::msg;
use edgerec_format::chunk::{ChunkBuilder, ChunkCompressor, Compression};
use edgerec_format::info::{inspect, FileState};
use edgerec_format::records::{Channel, Schema};
use edgerec_format::writer::{McapWriter, PROFILE_ROS2};

use crate::support::*;

fn run(args: &[&str]) -> std::process::Output {
    tools(std::iter::once("filter").chain(args.iter().copied()))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The messages of `all` on `topics` logged in `[start, end)`.
fn select(all: &[Decoded], topics: &BTreeSet<&str>, start: u64, end: u64) -> Vec<Decoded> {
    all.iter()
        .filter(|m| topics.contains(m.topic.as_str()) && m.log_time >= start && m.log_time < end)
        .cloned()
        .collect()
}

/// (topic, encoding, metadata, schema name, encoding, definition) of every
/// channel of a bag, by topic.
type ChannelFacts = (String, BTreeMap<String, String>, String, String, Vec<u8>);

fn channel_facts(path: &Path) -> BTreeMap<String, ChannelFacts> {
    let info = inspect(path).unwrap();
    let mut out = BTreeMap::new();
    for f in &info.files {
        let FileState::Closed(sum) = &f.state else {
            panic!("{}: not closed", f.path.display())
        };
        for c in sum.channels.values() {
            let sc = &sum.schemas[&c.schema_id];
            out.insert(
                c.topic.clone(),
                (
                    c.message_encoding.clone(),
                    c.metadata.clone(),
                    sc.name.clone(),
                    sc.encoding.clone(),
                    sc.data.clone(),
                ),
            );
        }
    }
    out
}

fn metadata_count(dir: &Path) -> u64 {
    let text = std::fs::read_to_string(dir.join("metadata.yaml")).unwrap();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("message_count:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no message_count in\n{text}"))
}

#[test]
fn topics_and_window_of_a_converted_bag_directory_read_back_by_rosbags_and_mcap() {
    let (Some(dir), Some(py)) = (generated(), venv()) else {
        return;
    };
    let work = scratch("filter-dir");
    let src = converted(dir, &work);
    let all = cat_json(&src);
    let t0 = all.iter().map(|m| m.log_time).min().unwrap();
    let t1 = all.iter().map(|m| m.log_time).max().unwrap();
    let topics: BTreeSet<&str> = all.iter().map(|m| m.topic.as_str()).collect();
    assert!(topics.len() >= 3, "{topics:?}");
    let kept: BTreeSet<&str> = topics.iter().copied().take(2).collect();
    let (start, end) = (t0 + (t1 - t0) / 4, t0 + 3 * (t1 - t0) / 4);
    let want = select(&all, &kept, start, end);
    assert!(!want.is_empty() && want.len() < all.len());

    // Relative times, kept topics by name: a bag directory.
    let out = work.join("cut");
    let mut args = vec![s(&src), s(&out)];
    let rel_start = format!("+{}ns", start - t0);
    let rel_end = format!("+{}ns", end - t0);
    args.extend(["--start", &rel_start, "--end", &rel_end, "--topics"]);
    args.extend(kept.iter().copied());
    let r = run(&args);
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(
        stdout(&r).contains(&format!("{} of {} messages", want.len(), all.len())),
        "{}",
        stdout(&r)
    );
    let chk = tools(["check", s(&out)]);
    assert!(chk.status.success(), "{}", stdout(&chk));
    assert_eq!(metadata_count(&out), want.len() as u64);
    assert_same(&cat_json(&out), &want, "cat of the filtered directory");
    let by_readers = reader_decodes(&py, "rosbags", &out);
    assert_same(&by_readers, &want, "rosbags of the filtered directory");
    let by_mcap = reader_decodes(&py, "mcap-ros2", &out);
    assert_same(&by_mcap, &want, "mcap of the filtered directory");
    // Schemas and channel metadata (QoS profiles) carried unchanged.
    let before = channel_facts(&src);
    let after = channel_facts(&out);
    let got: BTreeSet<&str> = after.keys().map(String::as_str).collect();
    assert_eq!(got, kept, "channels of the output");
    for (t, facts) in &after {
        assert_eq!(facts, &before[t], "{t}: channel and schema unchanged");
    }

    // Absolute times (with the unit, and a bare 19-digit count of ns),
    // patterns: one file.
    let one = work.join("one");
    std::fs::create_dir_all(&one).unwrap();
    let file = one.join("cut.mcap");
    let pattern = format!(
        "({})",
        kept.iter()
            .map(|t| regex_escape(t))
            .collect::<Vec<_>>()
            .join("|")
    );
    let start_arg = format!("{start}ns");
    let end_arg = format!("{end}");
    let r = run(&[
        s(&src),
        s(&file),
        "--regex",
        &pattern,
        "--start",
        &start_arg,
        "--end",
        &end_arg,
        "--compression",
        "lz4",
    ]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert_same(&cat_json(&file), &want, "cat of the filtered file");
    assert_same(
        &reader_decodes(&py, "mcap-ros2", &one),
        &want,
        "mcap of the filtered file",
    );
    // Everything but the kept topics, by --exclude: the rest.
    let rest = work.join("rest.mcap");
    let r = run(&[s(&src), s(&rest), "--exclude", &pattern]);
    assert!(r.status.success(), "{}", stderr(&r));
    let others: BTreeSet<&str> = topics.difference(&kept).copied().collect();
    assert_same(
        &cat_json(&rest),
        &select(&all, &others, 0, u64::MAX),
        "cat of the excluded rest",
    );
}

/// Debian's rosbag's generated `lz4.bag` as a rosbag2 directory (zstd):
/// /camera/image, /chatter, /imu, /tf, /tf_static.
fn converted(generated: &Path, work: &Path) -> PathBuf {
    let src = work.join("src_ros2");
    let r = tools([
        "convert",
        "--to",
        "ros2",
        "--compression",
        "zstd",
        s(&generated.join("lz4.bag")),
        s(&src),
    ]);
    assert!(r.status.success(), "{}", stderr(&r));
    src
}

/// A decoded message's `header.stamp` in seconds, as rospy's `to_sec()`.
fn stamp_secs(m: &Decoded) -> Option<f64> {
    let st = m.message.get("header")?.get("stamp")?;
    Some(st["sec"].as_f64()? + st["nanosec"].as_f64()? / 1e9)
}

#[test]
fn expressions_keep_what_they_hold_for_and_refuse_what_is_not_the_language() {
    let (Some(dir), Some(py)) = (generated(), venv()) else {
        return;
    };
    let work = scratch("filter-expr");
    let src = converted(dir, &work);
    let all = cat_json(&src);
    let mut imu: Vec<f64> = all
        .iter()
        .filter(|m| m.topic == "/imu")
        .filter_map(stamp_secs)
        .collect();
    imu.sort_by(f64::total_cmp);
    let threshold = imu[imu.len() / 3];
    let log_cut = all[all.len() / 2].log_time;
    // The seed's form, a time literal, a list and the log time.
    let text = format!(
        "(topic == '/imu' and m.header.stamp.to_sec() > {threshold}) or (topic in (\"/tf\", '/camera/image') and t < {log_cut}ns)"
    );
    let want: Vec<Decoded> = all
        .iter()
        .filter(|m| {
            (m.topic == "/imu" && stamp_secs(m).is_some_and(|x| x > threshold))
                || ((m.topic == "/tf" || m.topic == "/camera/image") && m.log_time < log_cut)
        })
        .cloned()
        .collect();
    assert!(want.iter().any(|m| m.topic == "/imu") && want.iter().any(|m| m.topic == "/tf"));
    let out = work.join("expr");
    let r = run(&[s(&src), s(&out), &text]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert_same(&cat_json(&out), &want, "cat of the expression's output");
    assert_same(
        &reader_decodes(&py, "rosbags", &out),
        &want,
        "rosbags of the expression's output",
    );
    // With --topics and a window the expression tests what they keep.
    let out = work.join("stamp.mcap");
    let ns = (threshold * 1e9) as u64;
    let r = run(&[
        s(&src),
        s(&out),
        &format!("header.stamp >= {ns}ns"),
        "--topics",
        "/imu",
        "/camera/image",
    ]);
    assert!(r.status.success(), "{}", stderr(&r));
    let want: Vec<Decoded> = all
        .iter()
        .filter(|m| {
            (m.topic == "/imu" || m.topic == "/camera/image")
                && m.message["header"]["stamp"]["sec"].as_u64().unwrap() * 1_000_000_000
                    + m.message["header"]["stamp"]["nanosec"].as_u64().unwrap()
                    >= ns
        })
        .cloned()
        .collect();
    assert_same(&cat_json(&out), &want, "header.stamp >= ns");

    // Refused, with the column and a caret, and nothing written.
    let bad = work.join("bad");
    for (text, says) in [
        (
            "__import__('os').system('ls')",
            "at column 11: `__import__(` is a call",
        ),
        (
            "topic == '/imu' and m.header.nope > 1",
            "(on /imu, of type sensor_msgs/msg/Imu): at column 30: unknown field `nope`",
        ),
        (
            "topic == '/imu' and m.header.frame_id > 1",
            "at column 21: comparing a string field with a number",
        ),
        (
            "topic == '/imu' and m.header.stamp > 100",
            "at column 21: `m.header.stamp` is a time",
        ),
        (
            "m.header.stamp > 100s",
            "at column 3: unknown field `header`",
        ),
        ("topic == '/imu' and", "at column 20: expected a field"),
    ] {
        let r = run(&[s(&src), s(&bad), text]);
        assert_eq!(r.status.code(), Some(2), "{text}: {}", stderr(&r));
        let e = stderr(&r);
        assert!(e.contains(says), "{text}: {e}");
        assert!(e.contains(&format!("\n    {text}\n")), "{text}: {e}");
        assert!(!bad.exists(), "{text} left the output");
    }
}

fn regex_escape(t: &str) -> String {
    t.chars()
        .flat_map(|c| {
            if c.is_ascii_alphanumeric() || c == '/' || c == '_' {
                vec![c]
            } else {
                vec!['\\', c]
            }
        })
        .collect()
}

/// The file offsets and lengths of a closed file's chunks, in order.
fn chunks(path: &Path) -> Vec<(u64, u64)> {
    let info = inspect(path).unwrap();
    let FileState::Closed(sum) = &info.files[0].state else {
        panic!("{}: not closed", path.display())
    };
    let mut v: Vec<(u64, u64)> = sum
        .chunk_indexes
        .iter()
        .map(|c| (c.chunk_start_offset, c.chunk_length))
        .collect();
    v.sort_unstable();
    v
}

const STRING_DEF: &str = "string data";

/// Writes segment `n` of `dir` with `channels` (id, topic) as
/// std_msgs/msg/String, `per` messages each, 1 ms apart from `t0`, in
/// chunks of 10 messages, and one Metadata record `seg<n>`.
fn segment(dir: &Path, n: usize, channels: &[(u16, &str)], t0: u64, per: u32) -> PathBuf {
    let name = dir.file_name().unwrap().to_str().unwrap();
    let path = dir.join(format!("{name}_{n}.mcap"));
    let f = BufWriter::new(File::create(&path).unwrap());
    let mut w = McapWriter::new(f, PROFILE_ROS2, "test").unwrap();
    w.add_schema(&Schema {
        id: 7,
        name: "std_msgs/msg/String".into(),
        encoding: "ros2msg".into(),
        data: STRING_DEF.as_bytes().to_vec(),
    })
    .unwrap();
    for (id, topic) in channels {
        w.add_channel(&Channel {
            id: *id,
            schema_id: 7,
            topic: (*topic).into(),
            message_encoding: "cdr".into(),
            metadata: BTreeMap::from([(
                "offered_qos_profiles".to_owned(),
                bag::qos_profile_yaml(true, *topic == "/latched", 1),
            )]),
        })
        .unwrap();
    }
    w.write_metadata(
        &format!("seg{n}"),
        &BTreeMap::from([("n".to_owned(), n.to_string())]),
    )
    .unwrap();
    let mut z = ChunkCompressor::new(Compression::Zstd { level: 1 }).unwrap();
    let mut b = ChunkBuilder::new(1 << 16);
    for i in 0..per {
        for (id, topic) in channels {
            let t = t0 + u64::from(i) * 1_000_000;
            b.push(*id, i, t, t + 5, &msg::string(&format!("{topic} {i}")));
        }
        if (i + 1) % 10 == 0 {
            w.write_chunk(&b.take().seal(&mut z)).unwrap();
        }
    }
    if !b.is_empty() {
        w.write_chunk(&b.take().seal(&mut z)).unwrap();
    }
    w.finish().unwrap();
    path
}

/// A bag directory of two segments that number their channels
/// differently, 100 messages a topic in each.
fn two_segments(work: &Path) -> PathBuf {
    let dir = work.join("twoseg");
    std::fs::create_dir_all(&dir).unwrap();
    segment(
        &dir,
        0,
        &[(1, "/a"), (2, "/b"), (3, "/latched")],
        1_000_000_000,
        100,
    );
    segment(
        &dir,
        1,
        &[(1, "/b"), (2, "/a"), (4, "/c")],
        2_000_000_000,
        100,
    );
    bag::rewrite_metadata(&dir).unwrap();
    dir
}

#[test]
fn segments_that_number_channels_differently_merge_and_keep_their_metadata() {
    let work = scratch("filter-merge");
    let src = two_segments(&work);
    let all = cat_json(&src);
    assert_eq!(all.len(), 600);
    let out = work.join("ab.mcap");
    let r = run(&[s(&src), s(&out), "--regex", "/[ab]", "--exclude", "/b"]);
    assert!(r.status.success(), "{}", stderr(&r));
    let want = select(&all, &BTreeSet::from(["/a"]), 0, u64::MAX);
    assert_eq!(want.len(), 200);
    assert_same(&cat_json(&out), &want, "/a of both segments");
    let info = inspect(&out).unwrap();
    let FileState::Closed(sum) = &info.files[0].state else {
        panic!("not closed")
    };
    assert_eq!(sum.channels.len(), 1, "{:?}", sum.channels);
    assert_eq!(sum.channels[&1].topic, "/a", "the first segment's id kept");
    let names: Vec<&str> = sum
        .metadata_records
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(names, ["seg0", "seg1"]);
    let chk = tools(["check", s(&out)]);
    assert!(chk.status.success(), "{}", stdout(&chk));

    // Into a directory: a segment per input segment that kept a message,
    // channel ids unchanged where they do not clash.
    let out = work.join("ac");
    let r = run(&[
        s(&src),
        s(&out),
        "--topics",
        "/a",
        "/c",
        "--start",
        "+0.95s",
    ]);
    assert!(r.status.success(), "{}", stderr(&r));
    let want = select(&all, &BTreeSet::from(["/a", "/c"]), 1_950_000_000, u64::MAX);
    assert_eq!(want.len(), 200, "/a and /c of the second segment");
    assert_same(&cat_json(&out), &want, "the second segment's /a and /c");
    let files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(files, ["ac_0.mcap", "metadata.yaml"], "{files:?}");
    assert_eq!(metadata_count(&out), 200);
}

#[test]
fn a_cut_or_corrupt_segment_is_kept_up_to_the_damage_and_ends_3() {
    let work = scratch("filter-damage");
    let src = two_segments(&work);
    // The second segment cut inside its sixth chunk, as a power cut
    // leaves it.
    let second = src.join("twoseg_1.mcap");
    let bytes = std::fs::read(&second).unwrap();
    let sixth = chunks(&second)[5].0;
    std::fs::remove_file(&second).unwrap();
    let cut = src.join("twoseg_1.mcap.active");
    std::fs::write(&cut, &bytes[..sixth as usize + 20]).unwrap();
    let out = work.join("out");
    let r = run(&[s(&src), s(&out), "--topics", "/a"]);
    assert_eq!(r.status.code(), Some(3), "{}", stderr(&r));
    let e = stderr(&r);
    assert!(e.contains("twoseg_1.mcap.active: not closed"), "{e}");
    assert!(e.contains("1 input file(s) damaged"), "{e}");
    let kept = cat_json(&out);
    let from_second = kept.iter().filter(|m| m.log_time >= 2_000_000_000).count();
    assert_eq!(from_second, 50, "the five whole chunks of the cut segment");
    assert_eq!(kept.len(), 150);
    assert!(tools(["check", s(&out)]).status.success());

    // A chunk whose bytes were changed fails its CRC: kept up to it.
    let work = scratch("filter-crc");
    let src = two_segments(&work);
    let first = src.join("twoseg_0.mcap");
    let mut bytes = std::fs::read(&first).unwrap();
    let (third, len) = chunks(&first)[2];
    // The last bytes of the third chunk's compressed records.
    bytes[(third + len - 4) as usize] ^= 0xff;
    std::fs::remove_file(&first).unwrap();
    std::fs::write(&first, &bytes).unwrap();
    let out = work.join("out.mcap");
    let r = run(&[s(&src), s(&out), "--topics", "/b"]);
    assert_eq!(r.status.code(), Some(3), "{}", stderr(&r));
    let e = stderr(&r);
    assert!(e.contains("twoseg_0.mcap"), "{e}");
    assert!(e.contains(&format!("at byte {third}")), "{e}");
    let kept = cat_json(&out);
    assert_eq!(
        kept.len(),
        20 + 100,
        "two chunks of the first, all the second"
    );
    // One decompression thread: the same messages, the same damage.
    let out1 = work.join("out1.mcap");
    let r = run(&[s(&src), s(&out1), "--topics", "/b", "--threads", "1"]);
    assert_eq!(r.status.code(), Some(3), "{}", stderr(&r));
    assert!(stderr(&r).contains(&format!("at byte {third}")));
    assert_eq!(cat_json(&out1), kept);
}

#[test]
fn bad_arguments_name_themselves_and_leave_nothing() {
    let work = scratch("filter-args");
    let src = two_segments(&work);
    let out = work.join("out");
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["--topics", "/nope"],
            2,
            "no topic \"/nope\" in the bag (it has: /a, /b, /c, /latched)",
        ),
        (
            &["--regex", "/a("],
            2,
            "--regex \"/a(\" is not a regular expression",
        ),
        (&["--start", "yesterday"], 2, "--start \"yesterday\""),
        (
            &["--start", "+2s", "--end", "+1s"],
            2,
            "the window keeps nothing",
        ),
        (&["--to", "tar"], 2, "--to \"tar\""),
        (&["--threads", "0"], 2, "0 is not in 1..=64"),
    ];
    for (args, code, says) in cases {
        let mut a = vec![s(&src), s(&out)];
        a.extend_from_slice(args);
        let r = run(&a);
        assert_eq!(r.status.code(), Some(*code), "{args:?}: {}", stderr(&r));
        assert!(stderr(&r).contains(says), "{args:?}: {}", stderr(&r));
        assert!(!out.exists(), "{args:?} left {}", out.display());
    }
    let r = run(&[s(&src), s(&src.join("twoseg_0.mcap"))]);
    assert_eq!(r.status.code(), Some(1));
    assert!(stderr(&r).contains("exists already"), "{}", stderr(&r));
    // CDR messages do not go into a ROS 1 bag.
    let r = run(&[s(&src), s(&work.join("x.bag"))]);
    assert_eq!(r.status.code(), Some(2));
    assert!(
        stderr(&r).contains("a ROS 1 bag holds ROS 1 messages only"),
        "{}",
        stderr(&r)
    );
    assert!(!work.join("x.bag").exists() && !work.join("x.bag.part").exists());
}
