#!/usr/bin/env python3
"""edgerec storage benchmark: one run, one directory, ratios within the run.

Measured, in interleaved rounds (median of the rounds is reported):
  fio      fio --rw=write --bs=1M --direct=1 --ioengine=io_uring --iodepth=8
           on the directory, a fresh file written once (no --time_based loop
           over an allocated file): the drive's limit for a recorder's
           access pattern, with fio's default preallocation like edgerec's;
  edgerec  `edgerec run`, one synthetic 1 MiB sensor_msgs/Image channel at
           rate "max", no compression: MB/s (bytes in the closed file over
           the run's wall time including the final fdatasync), CPU seconds
           per GB, peak RSS, drops;
  naive    the mcap crate's Writer over BufWriter<File>, the same messages,
           fsync at the end (crates/bench/src/naive_writer.rs);
  small    `edgerec run`, 256 B std_msgs/String at 1,000,000 Hz: sustained
           messages/s (from first to last log time) and drops; and at rate
           "max": the pipeline's capacity in messages/s;
  split    what a segment split costs: the edgerec run above splits every
           1 GiB (about twice a second here); the same run with segments
           that never split (A/B in one round) gives the time lost per
           split; the 100 ms throughput bins give each split's own loss,
           beside the same estimate between splits as the noise floor.
           10% of the second a split happens in is 100 ms.

  baseline with --baseline REV (scripts/bench builds that commit's edgerec
           in a git worktree under target/bench-baseline): the 1 MiB run and
           both 256 B runs again with the baseline's binary, each right
           beside this build's, the order alternating by round, so a change
           is judged against the same disk state and load (ratios
           new/baseline per round, medians of each).

usage: scripts/bench.py [--short] [--dir DIR] [--json FILE] [--rounds N] [--baseline-bin PATH]
Needs the release binaries (scripts/bench builds them) and fio.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EDGEREC = ROOT / "target/release/edgerec"
NAIVE = ROOT / "target/release/edgerec-naive-writer"
MIB = 1 << 20


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(map(str, cmd))} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.stdout


def settle():
    """Deleting the last run's gigabytes makes ext4 (mounted with discard
    here) issue discards in the background; let them finish so they do not
    land in the next measurement."""
    os.sync()
    time.sleep(3)


def fio(d, seconds, size, fallocate="native"):
    """A fresh file, written once (a recorder never overwrites): no
    --time_based, which would loop over an already-allocated file and
    measure overwrite speed instead. fio's default preallocation
    (fallocate=native) matches edgerec's; fallocate=none is reported too."""
    out = run([
        "fio", "--name=edgerec-bench", f"--directory={d}", "--rw=write", "--bs=1M",
        "--direct=1", "--ioengine=io_uring", "--iodepth=8", f"--size={size}",
        f"--runtime={seconds}", f"--fallocate={fallocate}", "--end_fsync=1",
        "--output-format=json",
    ])
    j = json.loads(out[out.index("{"):])
    for f in Path(d).glob("edgerec-bench*"):
        f.unlink()
    settle()
    return j["jobs"][0]["write"]["bw_bytes"] / 1e6


def edgerec(d, seconds, channel_toml, extra_toml="", binary=EDGEREC):
    with tempfile.TemporaryDirectory() as t:
        cfg = Path(t) / "bench.toml"
        cfg.write_text(f"""
[recording]
root = "{d}/rec"
session_prefix = "bench"
[mcap]
compression = "none"
[health]
watchdog = ""
status_socket = "{d}/rec.sock"
fault_file = "{d}/rec.fault.json"
{extra_toml}
{channel_toml}
""")
        rep = Path(t) / "report.json"
        run([binary, "run", "--config", cfg, "--duration", f"{seconds}s", "--quiet",
             "--report-json", rep], env={**os.environ, "EDGEREC_LOG": "warn"})
        r = json.loads(rep.read_text())
    shutil.rmtree(Path(d) / "rec")
    settle()
    segs = [x for x in r["segments"] if x["messages"] > 0 and x["end_ns"] > 0]
    span = (max(x["end_ns"] for x in segs) - min(x["start_ns"] for x in segs)) / 1e9 if segs else 0
    return {
        "mb_s": r["bytes_written"] / r["seconds"] / 1e6,
        "cpu_s_per_gb": r["cpu_seconds"] / (r["bytes_written"] / 1e9),
        "peak_rss_mib": r["peak_rss_bytes"] / MIB,
        "budget_mib": r["budget_limit"] / MIB,
        "drops": r["drops"],
        "messages": r["messages_written"],
        "msgs_s_sustained": (r["messages_written"] - 1) / span if span > 0 else 0.0,
        "backend": r["backend"],
        "bytes": r["bytes_written"],
        "bytes_per_bin": r["bytes_per_bin"],
        "throughput_bin_ms": r["throughput_bin_ms"],
        "split_at_seconds": r.get("split_at_seconds", []),
    }


def split_cost(run):
    """Time each split cost, from the 100 ms bins: the bytes missing in
    the 300 ms from 100 ms before a split to 200 ms after it, against the
    median bin of the two seconds around it (this disk drifts by 20% over
    seconds), in ms of writing at that median. The same estimator at the
    midpoints between splits, where nothing happens, is the noise floor.
    Splits in the first and last second (start-up, drain) are left out."""
    bins = run["bytes_per_bin"]
    w = run["throughput_bin_ms"] / 1000.0
    if len(bins) < 30:
        return None

    def lost_ms(t):
        i = int((t - 0.1) / w)
        near = bins[max(0, int((t - 1.0) / w)):int((t + 1.0) / w)]
        base = statistics.median(near)
        if base <= 0:
            # Nothing written for most of the two seconds around it: the
            # whole window counts as lost, and says so.
            return 2000.0
        win = bins[i:i + int(round(0.3 / w))]
        return sum(base - b for b in win) / base * w * 1000.0

    end = len(bins) * w - 1.0
    splits = [t for t in run["split_at_seconds"] if 1.0 <= t <= end]
    mids = [(a + b) / 2 for a, b in zip(splits, splits[1:])]
    return {"split_lost_ms": [lost_ms(t) for t in splits], "mid_lost_ms": [lost_ms(t) for t in mids]}


def split_ab(with_splits, without):
    """Paired runs (same round, same duration, one with the default 1 GiB
    segments, one with 1 TiB segments that never split): the extra time
    the split run took for its bytes, per split, in ms."""
    n = len(with_splits["split_at_seconds"])
    if n == 0 or without["split_at_seconds"]:
        return None
    b = with_splits["bytes"]
    extra_s = b / (with_splits["mb_s"] * 1e6) - b / (without["mb_s"] * 1e6)
    return {"splits": n, "ms_per_split": extra_s / n * 1000.0}


def naive(d, seconds, kind, size):
    out = run([NAIVE, d, kind, str(size), str(seconds)])
    j = json.loads(out.strip().splitlines()[-1])
    settle()
    return {"mb_s": j["file_bytes"] / j["seconds"] / 1e6, "msgs_s": j["messages"] / j["seconds"]}


IMAGE = """
[[sources.synthetic]]
topic = "/camera/raw"
type = "sensor_msgs/msg/Image"
rate = "max"
payload_size = "1MiB"
"""
SMALL = """
[[sources.synthetic]]
topic = "/can/frames"
type = "std_msgs/msg/String"
rate = {rate}
payload_size = 256
"""


def med(rows, key):
    return statistics.median(r[key] for r in rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--short", action="store_true", help="seconds, not minutes: keeps the benchmark working in CI")
    ap.add_argument("--dir", default=str(ROOT / "data/bench"))
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--baseline-bin", help="an edgerec binary of another commit, run in the same rounds")
    a = ap.parse_args()
    secs = 2 if a.short else 8
    rounds = a.rounds or (1 if a.short else 5)
    d = Path(a.dir).resolve()
    d.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(d).free
    need = (10 if a.short else 24) * (1 << 30)
    if free < need:
        print(f"SKIP bench: {d} has {free / 2**30:.1f} GiB free, the {'short ' if a.short else ''}benchmark needs {need / 2**30:.0f} GiB")
        return 0
    fio_size = "6G" if a.short else "16G"

    res = {"nosplit": [], "fio": [], "fio_nofalloc": [], "edgerec": [], "naive": [], "small": [], "small_max": [], "naive_small": [],
           "base": [], "base_small": [], "base_small_max": []}
    for i in range(rounds):
        print(f"round {i + 1}/{rounds} ...", file=sys.stderr)
        res["fio"].append({"mb_s": fio(d, secs, fio_size)})
        res["fio_nofalloc"].append({"mb_s": fio(d, secs, fio_size, "none")})
        b = Path(a.baseline_bin) if a.baseline_bin else None

        def pair(key, base_key, *args):
            """This build's run and the baseline's back to back, the order
            alternating by round: a run right after fio's deleted 16 GiB
            (discards still landing) is slower, so neither side may always
            take that place."""
            order = [(key, EDGEREC), (base_key, b)] if b else [(key, EDGEREC)]
            if b and i % 2 == 1:
                order.reverse()
            for k, binary in order:
                res[k].append(edgerec(d, secs, *args, binary=binary))

        pair("edgerec", "base", IMAGE)
        res["naive"].append(naive(d, secs, "image", MIB))
        # A 1 MHz source needs a queue that covers a scheduling stall of the
        # chunker at its rate: 262144 slots = 262 ms (the default 16384 is
        # 16 ms, and 2 loaded cores showed stalls of 30-80 ms).
        big_queue = "[pipeline]\nqueue_capacity = 262144"
        pair("small", "base_small", SMALL.format(rate=1_000_000), big_queue)
        pair("small_max", "base_small_max", SMALL.format(rate='"max"'), big_queue)
        res["naive_small"].append(naive(d, secs, "string", 256))
        # The same run with segments that never split in it: the A/B pair
        # that prices a split (the run above splits every 1 GiB).
        res["nosplit"].append(edgerec(d, secs, IMAGE, '[segment]\nmax_bytes = "1TiB"'))

    if a.json:
        # The raw rounds first: a summary that fails must not lose them.
        Path(a.json).write_text(json.dumps({"rounds_raw": res}, indent=2))
    fio_mb = med(res["fio"], "mb_s")
    e = res["edgerec"]
    e_mb = med(e, "mb_s")
    n_mb = med(res["naive"], "mb_s")
    small_rate = med(res["small"], "msgs_s_sustained")
    small_drops = max(r["drops"] for r in res["small"])
    small_max = med(res["small_max"], "msgs_s_sustained")
    naive_small = med(res["naive_small"], "msgs_s")
    rss = max(r["peak_rss_mib"] for r in e + res["small"] + res["small_max"] + res["nosplit"])
    ab = [x for x in (split_ab(s, n) for s, n in zip(e, res["nosplit"])) if x]
    ab_ms = statistics.median(x["ms_per_split"] for x in ab) if ab else None
    costs = [c for c in (split_cost(r) for r in e) if c]
    split_lost = sorted(x for c in costs for x in c["split_lost_ms"])
    mid_lost = sorted(x for c in costs for x in c["mid_lost_ms"])

    def pct(xs, q):
        return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None
    budget = e[0]["budget_mib"]
    summary = {
        "mode": "short" if a.short else "full",
        "seconds_per_run": secs,
        "rounds": rounds,
        "dir": str(d),
        "backend": e[0]["backend"],
        "fio_mb_s": fio_mb,
        "fio_nofalloc_mb_s": med(res["fio_nofalloc"], "mb_s"),
        "edgerec_mb_s": e_mb,
        "edgerec_cpu_s_per_gb": med(e, "cpu_s_per_gb"),
        "edgerec_peak_rss_mib": max(r["peak_rss_mib"] for r in e),
        "edgerec_drops": max(r["drops"] for r in e),
        "naive_mb_s": n_mb,
        # Against the faster of the two fio variants: conservative.
        "ratio_edgerec_fio": e_mb / max(fio_mb, med(res["fio_nofalloc"], "mb_s")),
        "ratio_edgerec_naive": e_mb / n_mb,
        "small_msgs_s_at_1M_hz": small_rate,
        "small_drops_at_1M_hz": small_drops,
        "small_msgs_s_max": small_max,
        "naive_small_msgs_s": naive_small,
        "peak_rss_mib_any": rss,
        "splits_per_second": statistics.median(len(r["split_at_seconds"]) / secs for r in e),
        "split_ab_ms_per_split": ab_ms,
        "split_ab_rounds_ms": [x["ms_per_split"] for x in ab],
        "split_local_count": len(split_lost),
        "split_local_lost_ms_median": statistics.median(split_lost) if split_lost else None,
        "split_local_lost_ms_worst": split_lost[-1] if split_lost else None,
        "mid_local_lost_ms_median": statistics.median(mid_lost) if mid_lost else None,
        "mid_local_lost_ms_p95": pct(mid_lost, 0.95),
        "mid_local_lost_ms_worst": mid_lost[-1] if mid_lost else None,
        "memory_budget_mib": budget,
        "rounds_raw": res,
    }
    bars = [
        ("edgerec >= 0.90 x fio (1 MiB, no compression)", summary["ratio_edgerec_fio"] >= 0.90),
        ("edgerec >= 3 x naive writer", summary["ratio_edgerec_naive"] >= 3.0),
        ("256 B: >= 1,000,000 msg/s sustained, 0 drops", small_rate >= 0.999e6 and small_drops == 0),
        ("peak RSS <= budget + 48 MiB", rss <= budget + 48),
        # 10% of the second a split happens in is 100 ms of writing.
        ("a split costs <= 10% of its second: A/B median <= 100 ms per split",
         ab_ms is not None and ab_ms <= 100.0),
        ("... and the worst single split <= 100 ms lost (100 ms bins)",
         bool(split_lost) and split_lost[-1] <= 100.0),
    ]
    summary["bars"] = {name: ok for name, ok in bars}
    if a.baseline_bin:
        base_mb = med(res["base"], "mb_s")
        summary["baseline"] = {
            "binary": a.baseline_bin,
            "mb_s": base_mb,
            "ratio_fio": base_mb / max(fio_mb, med(res["fio_nofalloc"], "mb_s")),
            "small_msgs_s_at_1M_hz": med(res["base_small"], "msgs_s_sustained"),
            "small_drops_at_1M_hz": max(r["drops"] for r in res["base_small"]),
            "small_msgs_s_max": med(res["base_small_max"], "msgs_s_sustained"),
            "peak_rss_mib": max(r["peak_rss_mib"] for r in res["base"]),
            # Round by round, new over baseline: the spread is the noise.
            "round_ratios_mb_s": [n["mb_s"] / o["mb_s"] for n, o in zip(e, res["base"])],
            "round_ratios_small_max": [n["msgs_s_sustained"] / o["msgs_s_sustained"]
                                       for n, o in zip(res["small_max"], res["base_small_max"])],
        }

    print()
    print(f"edgerec benchmark ({summary['mode']}, {rounds} round(s) of {secs} s, medians) on {d}")
    print(f"backend: {summary['backend']}")
    print(f"{'measure':48} {'value':>14}")
    rows = [
        ("fio write 1M direct io_uring QD8 (MB/s)", f"{fio_mb:.0f}"),
        ("fio, same with --fallocate=none (MB/s)", f"{summary['fio_nofalloc_mb_s']:.0f}"),
        ("edgerec 1 MiB msgs, none (MB/s)", f"{e_mb:.0f}"),
        ("edgerec CPU seconds per GB", f"{summary['edgerec_cpu_s_per_gb']:.2f}"),
        ("edgerec peak RSS (MiB, budget %d)" % budget, f"{summary['edgerec_peak_rss_mib']:.0f}"),
        ("edgerec drops", f"{summary['edgerec_drops']}"),
        ("naive mcap+BufWriter+fsync (MB/s)", f"{n_mb:.0f}"),
        ("ratio edgerec / faster fio", f"{summary['ratio_edgerec_fio']:.2f}"),
        ("ratio edgerec / naive", f"{summary['ratio_edgerec_naive']:.2f}"),
        ("256 B at 1 MHz: sustained msg/s", f"{small_rate:,.0f}"),
        ("256 B at 1 MHz: drops", f"{small_drops}"),
        ("256 B at max rate: msg/s", f"{small_max:,.0f}"),
        ("naive 256 B: msg/s", f"{naive_small:,.0f}"),
        ("peak RSS any edgerec run (MiB)", f"{rss:.0f}"),
        ("splits per second (1 GiB segments)", f"{summary['splits_per_second']:.1f}"),
        ("A/B: ms lost per split (median of rounds)", "-" if ab_ms is None else f"{ab_ms:.1f}"),
        ("splits measured in 100 ms bins", f"{len(split_lost)}"),
        ("ms lost around a split: median / worst", "-" if not split_lost
         else f"{summary['split_local_lost_ms_median']:.0f} / {split_lost[-1]:.0f}"),
        ("same between splits (noise): median / p95 / worst", "-" if not mid_lost
         else f"{summary['mid_local_lost_ms_median']:.0f} / {summary['mid_local_lost_ms_p95']:.0f} / {mid_lost[-1]:.0f}"),
    ]
    if a.baseline_bin:
        bl = summary["baseline"]
        rows += [
            ("baseline: edgerec 1 MiB msgs (MB/s)", f"{bl['mb_s']:.0f}"),
            ("baseline: ratio to faster fio", f"{bl['ratio_fio']:.2f}"),
            ("new/baseline 1 MiB, per round", " ".join(f"{x:.2f}" for x in bl["round_ratios_mb_s"])),
            ("baseline: 256 B at 1 MHz sustained msg/s", f"{bl['small_msgs_s_at_1M_hz']:,.0f}"),
            ("baseline: 256 B at 1 MHz drops", f"{bl['small_drops_at_1M_hz']}"),
            ("baseline: 256 B at max rate msg/s", f"{bl['small_msgs_s_max']:,.0f}"),
            ("new/baseline 256 B max, per round", " ".join(f"{x:.2f}" for x in bl["round_ratios_small_max"])),
            ("baseline: peak RSS 1 MiB run (MiB)", f"{bl['peak_rss_mib']:.0f}"),
        ]
    for k, v in rows:
        print(f"{k:48} {v:>14}")
    print()
    if a.short:
        print("(short mode: 2-second runs keep the benchmark working; start-up and")
        print(" close weigh on them, so these verdicts are not the measurement of the bars)")
    for name, ok in bars:
        print(f"{'PASS' if ok else 'MISS'}  {name}")
    text = json.dumps(summary, indent=2)
    print(text if not a.json else f"\nJSON written to {a.json}")
    if a.json:
        Path(a.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
