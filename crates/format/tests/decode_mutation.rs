//! Arbitrary bytes and arbitrary definitions never panic the decoders.
//!
//! Deterministic (a fixed-seed xorshift), so a failure reruns the same
//! way: every embedded definition, parsed as ROS 2 and as ROS 1, decodes
//! random bytes and mutated real payloads (bytes flipped, cut, inserted,
//! counts set to huge values) with both `cdr_decode` and `ros1_decode`,
//! and definitions mutated line by line (types swapped for huge fixed
//! arrays, empty types, ROS 1 time names, sequences; lines dropped,
//! doubled or garbled) parse or fail cleanly and then decode the same
//! payloads. Every tree that decodes is printed as JSON and flattened, so
//! the printer sees odd trees too. A panic, an abort from a huge
//! allocation, or a hang fails the test.

use edgerec_format::cdr::{msg, DiagnosticStatusSpec, PointFieldSpec, Time};
use edgerec_format::msgtype::{Dialect, TypeTable};
use edgerec_format::{cdr_decode, msgdefs, print, ros1_decode};

const SEP: &str =
    "================================================================================";

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

fn seeds() -> Vec<Vec<u8>> {
    let stamp = Time::from(1_700_000_000_123_456_789);
    let fields = [PointFieldSpec {
        name: "x",
        offset: 0,
        datatype: PointFieldSpec::FLOAT32,
        count: 1,
    }];
    let status = [DiagnosticStatusSpec {
        level: 1,
        name: "n",
        message: "m",
        hardware_id: "h",
        values: &[("k", "v")],
    }];
    vec![
        msg::string("grüße"),
        msg::imu(
            stamp,
            "imu",
            [0.0, 0.0, 0.0, 1.0],
            [0.1; 3],
            [9.8; 3],
            [[0.5; 9]; 3],
        ),
        msg::image(stamp, "cam", 2, 2, "mono8", 0, 2, &[1, 2, 3, 4]),
        msg::point_cloud2(stamp, "lidar", 1, 2, &fields, false, 4, 8, &[0; 8], true),
        msg::diagnostic_array(stamp, &status),
        msg::compressed_video(stamp, "cam", &[0, 0, 0, 1, 0x65], "h264"),
    ]
}

/// A payload: random, or a seed with a few bytes changed.
fn payload(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    if rng.below(4) == 0 {
        let len = rng.below(96);
        let mut p: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if rng.below(2) == 0 && p.len() >= 2 {
            // A valid CDR header, so the body is reached.
            p[0] = 0;
            p[1] = 1;
        }
        return p;
    }
    let mut p = rng.pick(seeds).clone();
    for _ in 0..=rng.below(4) {
        match rng.below(5) {
            0 if !p.is_empty() => {
                let at = rng.below(p.len());
                p[at] = rng.next() as u8;
            }
            1 => p.truncate(rng.below(p.len() + 1)),
            2 => {
                let at = rng.below(p.len() + 1);
                p.insert(at, rng.next() as u8);
            }
            3 if p.len() >= 4 => {
                // A count or length made huge.
                let at = rng.below(p.len() - 3);
                let v: u32 = *rng.pick(&[u32::MAX, 0x7fff_ffff, 1 << 24, 65_536]);
                p[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
            _ => {
                let at = rng.below(p.len() + 1);
                p.splice(at..at, [0xff, 0xff, 0xff, 0x0f]);
            }
        }
    }
    p
}

const TYPES: &[&str] = &[
    "bool",
    "byte",
    "char",
    "int8",
    "uint16",
    "int64",
    "float32",
    "float64",
    "string",
    "wstring",
    "string<=3",
    "uint8[]",
    "uint8[4294967295]",
    "float64[4000000000]",
    "float64[0]",
    "int32[<=2]",
    "string[]",
    "string[3]",
    "time",
    "duration",
    "time[]",
    "Header",
    "E",
    "E[]",
    "E[1000000]",
    "p/E[65536]",
    "Missing",
    "x/y/z/w",
    "int8[x]",
];

/// A definition with a few lines changed, and sometimes an empty type
/// `p/E` (zero bytes in ROS 1) added.
fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for _ in 0..=rng.below(3) {
        if lines.is_empty() {
            lines.push(String::new());
        }
        let at = rng.below(lines.len());
        match rng.below(6) {
            0 | 1 => {
                let name = lines[at]
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("f")
                    .to_owned();
                lines[at] = format!("{} {name}", rng.pick(TYPES));
            }
            2 => {
                lines.remove(at);
            }
            3 => {
                let line = lines[at].clone();
                lines.insert(at, line);
            }
            4 => {
                let line: String = (0..rng.below(20))
                    .map(|_| *rng.pick(&[' ', 'a', '[', ']', '=', '#', '/', '<', '1', '\t']))
                    .collect();
                lines[at] = line;
            }
            _ => lines.insert(at, format!("{} extra{}", rng.pick(TYPES), rng.below(99))),
        }
    }
    let mut out = lines.join("\n");
    if rng.below(2) == 0 {
        out.push_str(&format!("\n{SEP}\nMSG: p/E\n"));
        if rng.below(3) == 0 {
            out.push_str("E[] again\n");
        }
    }
    out.push('\n');
    out
}

fn decode_all(types: &TypeTable, payload: &[u8]) -> usize {
    let mut ok = 0;
    for value in [
        cdr_decode::decode(types, payload),
        ros1_decode::decode(types, payload),
    ]
    .into_iter()
    .flatten()
    {
        ok += 1;
        let line = print::json_line(&value);
        assert!(line.starts_with('{'), "{line}");
        let _ = print::flatten(&value);
    }
    ok
}

/// The embedded types the seeds are messages of, in `seeds()` order.
const SEED_TYPES: [&str; 6] = [
    "std_msgs/String",
    "sensor_msgs/Imu",
    "sensor_msgs/Image",
    "sensor_msgs/PointCloud2",
    "diagnostic_msgs/DiagnosticArray",
    "foxglove_msgs/CompressedVideo",
];

#[test]
fn random_bytes_into_every_embedded_type() {
    let mut rng = Rng(0x5eed_0ed9_e0ec_0001);
    let seeds = seeds();
    let mut tables = 0;
    for def in msgdefs::all() {
        for dialect in [Dialect::Ros2, Dialect::Ros1] {
            let Ok(types) = TypeTable::parse_with(def.name, def.text(), dialect) else {
                continue;
            };
            tables += 1;
            for _ in 0..12 {
                decode_all(&types, &payload(&mut rng, &seeds));
            }
        }
    }
    // Every embedded definition parses in both dialects.
    assert_eq!(tables, 2 * msgdefs::all().len());
}

#[test]
fn mutated_payloads_of_real_types() {
    let mut rng = Rng(0x5eed_0ed9_e0ec_0002);
    let seeds = seeds();
    let mut decoded = 0;
    let mut tried = 0;
    for (name, seed) in SEED_TYPES.iter().zip(&seeds) {
        let def = msgdefs::lookup(name).unwrap();
        let types = TypeTable::parse(def.name, def.text()).unwrap();
        for _ in 0..1500 {
            let mut p = payload(&mut rng, std::slice::from_ref(seed));
            if rng.below(8) == 0 {
                // Some mutations hit nothing that is read.
                p.clone_from(seed);
            }
            tried += 1;
            decoded += decode_all(&types, &p);
        }
    }
    println!("{decoded} of {tried} mutated payloads decoded");
    assert!(
        decoded > tried / 8 && decoded < tried,
        "{decoded} of {tried}"
    );
}

#[test]
fn mutated_definitions_parse_or_fail_cleanly_and_decode() {
    let mut rng = Rng(0x5eed_0ed9_e0ec_0003);
    let seeds = seeds();
    let (mut decoded, mut parsed, mut tried) = (0usize, 0usize, 0usize);
    let all: Vec<(&str, &str)> = SEED_TYPES
        .iter()
        .map(|n| {
            let def = msgdefs::lookup(n).unwrap();
            (def.name, def.text())
        })
        .chain(msgdefs::all().iter().map(|d| (d.name, d.text())))
        .collect();
    for (i, (name, text)) in all.iter().enumerate() {
        let rounds = if i < SEED_TYPES.len() { 200 } else { 4 };
        for _ in 0..rounds {
            let text = mutate(&mut rng, text);
            for dialect in [Dialect::Ros2, Dialect::Ros1] {
                tried += 1;
                let Ok(types) = TypeTable::parse_with(name, &text, dialect) else {
                    continue;
                };
                parsed += 1;
                let own = std::slice::from_ref(&seeds[i.min(SEED_TYPES.len() - 1)]);
                for _ in 0..4 {
                    let p = payload(&mut rng, if i < SEED_TYPES.len() { own } else { &seeds });
                    decoded += decode_all(&types, &p);
                }
            }
        }
    }
    println!("{parsed} of {tried} mutated definitions parsed, {decoded} payloads decoded");
    assert!(parsed > tried / 10 && parsed < tried, "{parsed} of {tried}");
    assert!(decoded > 50, "{decoded}");
}

#[test]
fn the_seeds_decode_before_mutation() {
    for (name, seed) in SEED_TYPES.iter().zip(seeds()) {
        let def = msgdefs::lookup(name).unwrap();
        let types = TypeTable::parse(def.name, def.text()).unwrap();
        cdr_decode::decode(&types, &seed).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
