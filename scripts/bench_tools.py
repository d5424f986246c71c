#!/usr/bin/env python3
"""The bag tools benchmark: `edgerec-tools` against the ROS tools people use
on the same ROS 1 bag, in one run.

First Debian's rosbag (python3-rosbag 1.15, run with /usr/bin/python3)
writes the bench bags, uncompressed (rosbag's default, 768 KiB chunks;
--compression lz4 for lz4 chunks):
  images  sensor_msgs/Image 640x480 rgb8 on /camera/image at 30 Hz and
          sensor_msgs/Imu on /imu, 125 per image (about 3.7 kHz), each
          message stamped and in time order (the images are a gradient
          with noise): 320 images and 40,000 Imu, about 310 MB; with
          --short 40 and 5,000, about 39 MB;
  small   the same Imu stream without the images: 200,000 Imu, about
          64 MB; with --short 20,000 (per-message costs show here).
--kind images|small picks one (default both).
Then, in rounds, each pair on that bag, one after the other, every
command a process of its own timed from start to exit (start-up
included), its output thrown away:

  convert         edgerec-tools convert --to ros2 --compression none BAG OUT
                  (uncompressed chunks, as rosbags-convert writes them)
                  against rosbags-convert --src BAG --dst OUT2 --dst-storage mcap
                  (rosbags 0.11.9, the venv's; both write a rosbag2 directory
                  of CDR messages in MCAP)
  info            edgerec-tools info BAG
                  against Debian's rosbag info BAG (/usr/bin/rosbag)
  cat/rosbags     edgerec-tools cat BAG --json > /dev/null
                  against a rosbags AnyReader loop deserializing every message
  cat/rosbag      the same edgerec-tools cat
                  against a Debian rosbag read_messages() loop (every
                  message deserialized by genpy)
  filter          edgerec-tools filter BAG OUT.bag EXPR
                  against Debian's rosbag filter BAG OUT2.bag EXPR, EXPR
                  the seed's form, keeping the second half of the main
                  topic: "topic == '/camera/image' and
                  m.header.stamp.to_sec() > MID" on the images bag (the
                  Imu left out), "topic == '/imu' and ..." on the small
                  one; both write an uncompressed ROS 1 bag. edgerec's
                  peak RSS (the process's maximum resident set) is
                  reported too.
  filter MCAP     edgerec-tools filter DIR OUT.mcap --topics T --start MIDns
                  --compression zstd (DIR: the bag converted to a rosbag2
                  directory of one zstd-chunked MCAP file first, by
                  edgerec-tools convert; T and MID as above), once with a
                  decompression thread per core and once with --threads 1,
                  against the same selection made with the Python mcap
                  library (make_reader().iter_messages(topics, start_time)
                  into its Writer, zstd chunks): what Foxglove's `mcap
                  filter` does, whose Go binary cannot be installed here.

The Python loops only deserialize; edgerec-tools cat also prints every
message as JSON (an image is about 3.5 MB of text), so the cat ratios are
what a person gets from each tool, not a like-for-like decode speed.

Throughput is the bag's size over the wall seconds (MB = 10^6 bytes); the
median over the rounds (3, 1 with --short) is reported, with the ratio
edgerec/other (above 1: edgerec-tools is faster), and the commands that
reproduce each number.

usage: bench_tools.py [--short] [--rounds N] [--bin PATH] [--json FILE]
                      [--dir DIR] [--compression none|lz4]
                      [--kind images|small] [--images N] [--only WHAT]

--images N writes N images (and 125 Imu each) instead (2200: a 2 GB bag);
--only filter|convert|info|cat (repeatable) runs only those pairs (filter:
both filter pairs).

--bin defaults to target/release/edgerec-tools (under CARGO_TARGET_DIR when
set), built with `cargo build --release -p edgerec-tools --bin
edgerec-tools` when missing. The venv ($REPO/.venv, scripts/lib.sh
ensure_venv; or EDGEREC_PYTHON) has rosbags; /usr/bin/python3 has Debian's
rosbag (ensure_ros1_python). scripts/bench --tools runs this after both.

Internal (what the rounds run; each prints nothing):
  bench_tools.py --make-bag BAG [--short] [--compression C]   (/usr/bin/python3)
  bench_tools.py --read rosbag BAG                            (/usr/bin/python3)
  bench_tools.py --read rosbags BAG                           (the venv)
  bench_tools.py --mcap-filter IN.mcap OUT.mcap TOPIC START_NS  (the venv)
"""
import argparse
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release"
DEFAULT_BIN = TARGET / "edgerec-tools"
SELF = Path(__file__).resolve()
DEBIAN_PY = "/usr/bin/python3"
VENV_PY = os.environ.get("EDGEREC_PYTHON", str(ROOT / ".venv/bin/python"))
ROSBAGS_CONVERT = str(Path(VENV_PY).parent / "rosbags-convert")
ROSBAG = shutil.which("rosbag", path="/usr/bin") or "/usr/bin/rosbag"

# (images, Imu messages per image), per bag kind: "images" is the camera
# bag, "small" the same stream without the images (Imu only: small
# messages, where per-message costs show).
SIZES = {
    ("images", False): (320, 125),
    ("images", True): (40, 125),
    ("small", False): (1600, 125),
    ("small", True): (160, 125),
}
WIDTH, HEIGHT = 640, 480
BASE_SEC = 1_700_000_000


# --- run by /usr/bin/python3 -------------------------------------------------

def make_bag(path, short, compression, kind="images", images_override=0):
    import genpy
    import rosbag
    from sensor_msgs.msg import Image, Imu

    images, imu_per_image = SIZES[(kind, short)]
    if images_override:
        images = images_override
    size = WIDTH * HEIGHT * 3
    # A gradient with noise in its low 4 bits, as a camera's: lz4 gets
    # little out of it, so --compression lz4 leaves the bag's size alike.
    noise = random.Random(1).randbytes(size)
    base = bytes(((x * 7 + (x >> 9)) & 0xF0) | (r & 0x0F) for x, r in zip(range(size), noise))
    period_ns = 1_000_000_000 // 30

    def stamp(ns):
        return genpy.Time(BASE_SEC + ns // 1_000_000_000, ns % 1_000_000_000)

    bag = rosbag.Bag(path, "w", compression=compression)
    try:
        for i in range(images):
            t0 = i * period_ns
            img = Image()
            img.header.seq = i
            img.header.stamp = stamp(t0)
            img.header.frame_id = "camera"
            img.height, img.width, img.encoding, img.step = HEIGHT, WIDTH, "rgb8", WIDTH * 3
            k = (i * 7) % 256
            img.data = base[k:] + base[:k]
            if kind == "images":
                bag.write("/camera/image", img, stamp(t0))
            for j in range(imu_per_image):
                n = i * imu_per_image + j
                t = t0 + j * (period_ns // imu_per_image)
                imu = Imu()
                imu.header.seq = n
                imu.header.stamp = stamp(t)
                imu.header.frame_id = "imu_link"
                imu.orientation.w = 1.0
                imu.orientation.z = (n % 1000) * 1e-4
                imu.angular_velocity.x = n * 1e-3
                imu.angular_velocity.z = -n * 2e-3
                imu.linear_acceleration.x = (n % 17) * 0.1
                imu.linear_acceleration.z = 9.81
                imu.orientation_covariance = [0.01 * (m + 1) for m in range(9)]
                imu.angular_velocity_covariance = [0.02] * 9
                imu.linear_acceleration_covariance = [0.03] * 9
                bag.write("/imu", imu, stamp(t))
    finally:
        bag.close()


def read_rosbag(path):
    import rosbag

    n = 0
    with rosbag.Bag(path, "r") as bag:
        for _topic, _msg, _t in bag.read_messages():
            n += 1
    return n


# --- run by the venv -----------------------------------------------------------

def read_rosbags(path):
    from rosbags.highlevel import AnyReader

    n = 0
    with AnyReader([Path(path)]) as reader:
        for conn, _t, raw in reader.messages():
            reader.deserialize(raw, conn.msgtype)
            n += 1
    return n


def mcap_filter(src, dst, topic, start_ns):
    """What `mcap filter --include-topic-regex T --start-nsecs S` does, with
    the Python mcap library (Foxglove's Go CLI cannot be installed here):
    the messages of `topic` logged at or after `start_ns`, with their
    schemas and channels, into a new zstd-chunked MCAP file."""
    from mcap.reader import make_reader
    from mcap.writer import CompressionType, Writer

    n = 0
    with open(src, "rb") as f, open(dst, "wb") as o:
        r = make_reader(f)
        w = Writer(o, compression=CompressionType.ZSTD)
        w.start(profile=r.get_header().profile, library="bench_tools mcap_filter")
        schemas, channels = {}, {}
        for schema, channel, m in r.iter_messages(topics=[topic], start_time=start_ns):
            if channel.id not in channels:
                if schema.id not in schemas:
                    schemas[schema.id] = w.register_schema(schema.name, schema.encoding, schema.data)
                channels[channel.id] = w.register_channel(channel.topic, channel.message_encoding,
                                                          schemas[schema.id], dict(channel.metadata))
            w.add_message(channels[channel.id], m.log_time, m.data, m.publish_time, m.sequence)
            n += 1
        w.finish()
    return n


# --- the bench -------------------------------------------------------------------

def q(cmd):
    return " ".join(shlex.quote(str(c)) for c in cmd)


def timed(cmd, cleanup=None):
    """Wall seconds of cmd, output thrown away; exits on failure."""
    if cleanup:
        cleanup()
    t0 = time.monotonic()
    p = subprocess.run([str(c) for c in cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dt = time.monotonic() - t0
    if p.returncode != 0:
        raise SystemExit(f"bench_tools: `{q(cmd)}` exited {p.returncode}: {p.stderr[-2000:]}")
    return dt


def unlink(path):
    def go():
        Path(path).unlink(missing_ok=True)
    return go


def timed_rss(cmd, cleanup=None):
    """Wall seconds and peak RSS (KiB) of cmd, output thrown away; exits on
    failure."""
    if cleanup:
        cleanup()
    t0 = time.monotonic()
    p = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = p.stderr.read() if p.stderr else ""
    _pid, status, usage = os.wait4(p.pid, 0)
    dt = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"bench_tools: `{q(cmd)}` exited {p.returncode}: {err[-2000:]}")
    return dt, usage.ru_maxrss


def rmtree(path):
    def go():
        shutil.rmtree(path, ignore_errors=True)
    return go


def ensure_bin(path, given):
    if path.exists():
        return
    if given:
        sys.exit(f"bench_tools: {path} missing")
    cmd = ["cargo", "build", "--release", "-p", "edgerec-tools", "--bin", "edgerec-tools"]
    print(f"==> {path} missing: {q(cmd)}", file=sys.stderr, flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)
    if not path.exists():
        sys.exit(f"bench_tools: {q(cmd)} did not make {path}")


def bench(a):
    tools = Path(a.bin) if a.bin else DEFAULT_BIN
    ensure_bin(tools, bool(a.bin))
    for p in (DEBIAN_PY, VENV_PY, ROSBAGS_CONVERT, ROSBAG):
        if not Path(p).exists():
            sys.exit(f"bench_tools: {p} missing (scripts/lib.sh: ensure_venv, ensure_ros1_python)")
    everything = []
    for kind in a.kind:
        everything += bench_bag(a, tools, kind)
    if a.json:
        Path(a.json).write_text(json.dumps({"rounds": 1 if a.short else a.rounds,
                                            "compression": a.compression, "results": everything}, indent=2))
    return 0


def bench_bag(a, tools, kind):
    rounds = 1 if a.short else a.rounds
    work = Path(a.dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    bag = work / f"bench-{kind}.bag"
    make = [DEBIAN_PY, SELF, "--make-bag", bag, "--kind", kind, "--compression", a.compression] + (["--short"] if a.short else []) + (["--images", str(a.images)] if a.images else [])
    print(f"==> writing the bench bag: {q(make)}", file=sys.stderr, flush=True)
    bag.unlink(missing_ok=True)
    t0 = time.monotonic()
    subprocess.run([str(c) for c in make], check=True)
    print(f"==> {bag}: {bag.stat().st_size / 1e6:.1f} MB in {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    mb = bag.stat().st_size / 1e6
    images, per = SIZES[(kind, a.short)]
    if a.images:
        images = a.images
    out, out2 = work / "edgerec-ros2", work / "rosbags-ros2"

    edgerec_cat = [tools, "cat", bag, "--json"]
    # The second half of the main topic, by header stamp, rosbag filter's way.
    period_ns = 1_000_000_000 // 30
    mid = BASE_SEC + images * period_ns / 2 / 1e9
    topic = "/camera/image" if kind == "images" else "/imu"
    expr = f"topic == '{topic}' and m.header.stamp.to_sec() > {mid}"
    f_out, f_out2 = work / "edgerec-filtered.bag", work / "rosbag-filtered.bag"
    # The same bag as MCAP with zstd chunks (what edgerec and rosbag2
    # record), for filter against the MCAP library: the topic's second
    # half by log time.
    mcap_dir = work / f"bench-{kind}-mcap"
    mid_ns = int(mid * 1e9)
    m_out, m_out2 = work / "edgerec-filtered.mcap", work / "python-filtered.mcap"
    pairs = [
        ("convert --to ros2", "rosbags-convert (mcap)",
         ([tools, "convert", "--to", "ros2", "--compression", "none", bag, out], rmtree(out)),
         ([ROSBAGS_CONVERT, "--src", bag, "--dst", out2, "--dst-storage", "mcap"], rmtree(out2))),
        ("info", "rosbag info",
         ([tools, "info", bag], None),
         ([ROSBAG, "info", bag], None)),
        ("cat --json", "rosbags AnyReader loop",
         (edgerec_cat, None),
         ([VENV_PY, SELF, "--read", "rosbags", bag], None)),
        ("cat --json", "rosbag read_messages loop",
         (edgerec_cat, None),
         ([DEBIAN_PY, SELF, "--read", "rosbag", bag], None)),
        ("filter EXPR", "rosbag filter EXPR",
         ([tools, "filter", bag, f_out, expr], unlink(f_out)),
         ([ROSBAG, "filter", bag, f_out2, expr], unlink(f_out2))),
    ]
    mcap_filter_cmd = ([VENV_PY, SELF, "--mcap-filter", "MCAP", m_out2, topic, str(mid_ns)], unlink(m_out2))
    for threads in ([], ["--threads", "1"]):
        pairs.append((" ".join(["filter MCAP"] + threads), "mcap library filter",
                      ([tools, "filter", mcap_dir, m_out, "--topics", topic, "--start", f"{mid_ns}ns",
                        "--compression", "zstd"] + threads, unlink(m_out)),
                      mcap_filter_cmd))
    if a.only:
        pairs = [p for p in pairs if p[0].split()[0] in a.only]
    mcap_mb = 0.0
    if any(p[0].startswith("filter MCAP") for p in pairs):
        rmtree(mcap_dir)()
        conv = [tools, "convert", "--to", "ros2", "--compression", "zstd", bag, mcap_dir]
        subprocess.run([str(c) for c in conv], check=True, stdout=subprocess.DEVNULL)
        mcaps = sorted(mcap_dir.glob("*.mcap"))
        if len(mcaps) != 1:
            sys.exit(f"bench_tools: {q(conv)} wrote {len(mcaps)} MCAP files, not one")
        print(f"==> {mcaps[0]}: {mcaps[0].stat().st_size / 1e6:.1f} MB (zstd chunks), from {q(conv)}",
              file=sys.stderr, flush=True)
        pairs = [(w, o, e, ([mcaps[0] if c == "MCAP" else c for c in ocmd], oclean))
                 for (w, o, e, (ocmd, oclean)) in pairs]
        mcap_mb = mcaps[0].stat().st_size / 1e6
    # Throughput is of the pair's input: the ROS 1 bag, or the MCAP file.
    in_mb = [mcap_mb if p[0].startswith("filter MCAP") else mb for p in pairs]
    secs = {i: ([], []) for i in range(len(pairs))}
    rss = {}
    for rnd in range(rounds):
        for i, (what, other, (ecmd, eclean), (ocmd, oclean)) in enumerate(pairs):
            e, peak = timed_rss(ecmd, eclean)
            rss[i] = max(rss.get(i, 0), peak)
            o = timed(ocmd, oclean)
            secs[i][0].append(e)
            secs[i][1].append(o)
            print(json.dumps({"round": rnd, "edgerec": what, "other": other,
                              "edgerec_s": round(e, 3), "other_s": round(o, 3)}), flush=True)
    rmtree(out)()
    rmtree(out2)()
    unlink(f_out)()
    unlink(f_out2)()
    unlink(m_out)()
    unlink(m_out2)()
    rmtree(mcap_dir)()

    comp = "lz4 chunks" if a.compression == "lz4" else "uncompressed"
    print()
    n_img = images if kind == "images" else 0
    print(f"bag: {bag}, {mb:.1f} MB, {n_img + images * per:,} messages ({n_img:,} sensor_msgs/Image "
          f"{WIDTH}x{HEIGHT} rgb8, {images * per:,} sensor_msgs/Imu), {comp}; "
          f"median of {rounds} round{'s' if rounds > 1 else ''}; MB/s = input MB / wall s"
          + (f" (for filter MCAP the zstd MCAP of the bag, {mcap_mb:.1f} MB)" if mcap_mb else ""))
    print(f"filter: {expr}")
    print(f"{'edgerec-tools':<24} {'MB/s':>9}  {'other':<27} {'MB/s':>9} {'edgerec/other':>14} {'edgerec peak RSS':>17}")
    results = []
    for i, (what, other, (ecmd, _), (ocmd, _)) in enumerate(pairs):
        e_s, o_s = statistics.median(secs[i][0]), statistics.median(secs[i][1])
        e_r, o_r = in_mb[i] / e_s, in_mb[i] / o_s
        print(f"{what:<24} {e_r:>9.1f}  {other:<27} {o_r:>9.1f} {e_r / o_r:>13.2f}x {rss[i] / 1024:>13.1f} MiB")
        results.append({"bag": kind, "edgerec": what, "other": other, "edgerec_mb_s": round(e_r, 2),
                        "edgerec_peak_rss_kib": rss[i],
                        "other_mb_s": round(o_r, 2), "ratio": round(e_r / o_r, 3),
                        "edgerec_s": secs[i][0], "other_s": secs[i][1],
                        "edgerec_cmd": q(ecmd), "other_cmd": q(ocmd)})
    print()
    print("reproduce: the bag, then each command timed (`time CMD`), its output thrown away:")
    print(f"  {q(make)}")
    seen = set()
    for r in results:
        for c in (r["edgerec_cmd"], r["other_cmd"]):
            if c not in seen:
                seen.add(c)
                print(f"  {c} >/dev/null")
    print(f"this run: python3 {q([SELF.relative_to(ROOT)] + sys.argv[1:])} "
          f"(scripts/bench --tools passes its options on)")
    print()
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--short", action="store_true", help="a 39 MB bag, one round (CI)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bin", default="", help="the edgerec-tools binary (default target/release/edgerec-tools)")
    ap.add_argument("--json", default="")
    ap.add_argument("--dir", default=str(ROOT / "data/bench-tools"))
    ap.add_argument("--compression", choices=("none", "lz4"), default="none")
    ap.add_argument("--kind", action="append", choices=("images", "small"),
                    help="which bag (repeat; default both): images (camera + Imu) or small (Imu only)")
    ap.add_argument("--images", type=int, default=0, help="images in the images bag (2200: about 2 GB)")
    ap.add_argument("--only", action="append", choices=("convert", "info", "cat", "filter"),
                    help="only these pairs (repeat; default all)")
    ap.add_argument("--make-bag", metavar="BAG", help=argparse.SUPPRESS)
    ap.add_argument("--read", nargs=2, metavar=("READER", "BAG"), help=argparse.SUPPRESS)
    ap.add_argument("--mcap-filter", nargs=4, metavar=("IN", "OUT", "TOPIC", "START_NS"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.mcap_filter:
        src, dst, topic, start_ns = a.mcap_filter
        if mcap_filter(src, dst, topic, int(start_ns)) == 0:
            sys.exit(f"bench_tools: {src}: no {topic} message at or after {start_ns}")
        return 0
    if a.make_bag:
        make_bag(a.make_bag, a.short, a.compression, (a.kind or ["images"])[0], a.images)
        return 0
    a.kind = a.kind or ["images", "small"]
    if a.read:
        reader, path = a.read
        if reader not in ("rosbag", "rosbags"):
            sys.exit(f"bench_tools: --read {reader}: rosbag or rosbags")
        n = (read_rosbag if reader == "rosbag" else read_rosbags)(path)
        if n == 0:
            sys.exit(f"bench_tools: {path}: no messages")
        return 0
    return bench(a)


if __name__ == "__main__":
    sys.exit(main())
