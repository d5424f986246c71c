//! Mutated and cut bags never panic and never allocate much: a small,
//! deterministic mutation loop over rosbag's own bags (byte flips, huge
//! lengths written over record and field lengths, cuts) through open,
//! scan, message iteration, summary and reindex. Every call may answer Ok
//! or Err; a panic fails the test. The loop runs in a child process under
//! `prlimit --as` (1 GiB of address space), so one huge allocation aborts
//! the child and fails the test too.

use std::io::Cursor;
use std::path::Path;
use std::process::Command;

use edgerec_rosbag1::{reindex, Bag, Filter};

use crate::support::{generated, oracle, scratch};

const CHILD_ENV: &str = "EDGEREC_ROSBAG1_MUTATION_DIR";
const ADDRESS_SPACE: &str = "1073741824";

/// xorshift64*: deterministic, so a failure names its iteration.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn exercise(bytes: Vec<u8>, reindex_dir: Option<&Path>) {
    if let Ok(mut bag) = Bag::from_reader(Cursor::new(bytes.clone())) {
        let _ = bag.summary();
        for m in bag.messages(&Filter::default()) {
            if m.is_err() {
                break;
            }
        }
    }
    if let Ok(mut bag) = Bag::scan_reader(Cursor::new(bytes.clone())) {
        let _ = bag.summary();
        let _ = bag.messages(&Filter::topics(["/imu"])).count();
    }
    if let Some(dir) = reindex_dir {
        let src = dir.join("in.bag");
        std::fs::write(&src, &bytes).unwrap();
        if reindex(&src, &dir.join("out.bag")).is_ok() {
            let _ =
                Bag::open(dir.join("out.bag")).map(|mut b| b.messages(&Filter::default()).count());
        }
    }
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    if at + 4 <= b.len() {
        b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
}

fn run_mutations(dir: &Path) {
    let work = scratch("mutation-child");
    let last = work.join("last-input.bag");
    let mut rng = Rng(0x5eed_0fb0_a7a7_0001);
    let mut runs = 0;
    // Fewer compressed ones: in a debug build lz4_flex zero-fills its 1 MiB
    // block buffer byte by byte for every chunk (roslz4 declares 1 MiB
    // blocks), so each lz4 bag takes about 0.2 s per read there.
    // Under user-mode QEMU (scripts/test-aarch64) a quarter of them: the
    // full loop takes almost 3 minutes there; the native run covers it.
    let share = if edgerec_testkit::qemu_user().is_some() {
        4
    } else {
        1
    };
    for (c, iterations) in [
        ("none", 300 / share),
        ("lz4", 48 / share),
        ("bz2", 48 / share),
    ] {
        let started = std::time::Instant::now();
        let base = std::fs::read(dir.join(format!("{c}.bag"))).unwrap();
        let chunks = oracle(dir, c).chunk_positions;
        for i in 0..iterations {
            let mut b = base.clone();
            let huge = [u32::MAX, 0x8000_0000, 0x4000_0001, b.len() as u32 + 1][rng.below(4)];
            match i % 6 {
                // Byte flips anywhere.
                0 | 1 => {
                    for _ in 0..1 + rng.below(8) {
                        let at = rng.below(b.len());
                        b[at] ^= 1 << rng.below(8);
                    }
                }
                // A huge record header length, data length, or first
                // field length of a chunk record.
                2 => {
                    let pos = chunks[rng.below(chunks.len())] as usize;
                    let header_len =
                        u32::from_le_bytes(b[pos..pos + 4].try_into().unwrap()) as usize;
                    let at = [pos, pos + 4, pos + 4 + header_len][rng.below(3)];
                    put_u32(&mut b, at, huge);
                }
                // A huge length inside a chunk's data (for `none`: the
                // first record's header length or its first field).
                3 => {
                    let pos = chunks[rng.below(chunks.len())] as usize;
                    let header_len =
                        u32::from_le_bytes(b[pos..pos + 4].try_into().unwrap()) as usize;
                    let data = pos + 8 + header_len;
                    put_u32(&mut b, data + 4 * rng.below(3), huge);
                }
                // Damage in the index at the end, or the bag header.
                4 => {
                    let at = if rng.below(2) == 0 {
                        b.len() - 1 - rng.below(b.len() / 8)
                    } else {
                        13 + rng.below(64)
                    };
                    if rng.below(2) == 0 {
                        put_u32(&mut b, at, huge);
                    } else {
                        b[at] ^= 0xff;
                    }
                }
                // A cut anywhere.
                _ => {
                    let cut = rng.below(b.len());
                    b.truncate(cut);
                }
            }
            std::fs::write(&last, &b).unwrap();
            let reindex_dir = (i % 10 == 0).then_some(work.as_path());
            exercise(b, reindex_dir);
            runs += 1;
        }
        println!(
            "{c}: {iterations} mutated bags in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    println!(
        "{runs} mutated bags: no panic, no allocation over the {ADDRESS_SPACE}-byte address space"
    );
}

#[test]
fn mutated_and_cut_bags_never_panic_nor_allocate_much() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        run_mutations(Path::new(&dir));
        return;
    }
    let Some(dir) = generated() else { return };
    let exe = std::env::current_exe().unwrap();
    let name = "mutation::mutated_and_cut_bags_never_panic_nor_allocate_much";
    let out = Command::new("prlimit")
        .arg(format!("--as={ADDRESS_SPACE}"))
        .arg("--")
        .arg(&exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .output();
    match out {
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout);
            print!("{text}");
            assert!(
                out.status.success(),
                "the mutation loop failed ({}); the last input is in {}: {}",
                out.status,
                scratch_path(),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                text.contains("mutated bags: no panic"),
                "the child ran no mutations"
            );
        }
        Err(e) => {
            println!("NOTE: prlimit does not run ({e}); the mutation loop runs without an address-space limit");
            run_mutations(dir);
        }
    }
}

fn scratch_path() -> String {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("rosbag1-scratch/mutation-child/last-input.bag")
        .display()
        .to_string()
}
