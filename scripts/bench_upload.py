#!/usr/bin/env python3
"""The upload benchmark: `edgerec upload` against boto3's `upload_file` (the
reference S3 client, what a hand-written offload script calls), sending the
same file to the same S3 server on loopback, in one run.

The server is s3rver 3.7.1 (npm, tests/js: a Node S3 server that stores
objects in a directory; moto keeps them in Python memory and is slower
than either client). The bag directory holds four segments of
incompressible noise, 1 GiB in all (128 MiB with --short), sent one after
the other, each in parts: the same part size (16 MiB, edgerec's default)
and concurrency (4) for both clients:

  edgerec   edgerec upload --config CFG BAG   (release build; one hashing
            read for SHA-256 and the part MD5s, then the parts with their
            Content-MD5, the ETag checked, then the session manifest)
  boto3     for each segment: s3.upload_file(FILE, BUCKET, KEY, Config=TransferConfig(
            multipart_threshold=16 MiB, multipart_chunksize=16 MiB,
            max_concurrency=4)) in a process of its own, with
            request_checksum_calculation="when_required" (its default
            CRC32 trailer is a streaming encoding s3rver does not take);
            boto3 sends no Content-MD5 and checks nothing after.

s3rver gives a multipart object the MD5 of its bytes as its ETag, not S3's
MD5 of the parts' MD5s: edgerec reads the first segment a second time to
check it, and computes that MD5 in its one read for the segments after
(AWS S3, MinIO and Ceph give S3's ETag, which needs no second read).

Each round runs both, one after the other, each to a key of its own, as a
process timed from start to exit; CPU is the process's user+system time
(getrusage of the child). Reported: the median MB/s (MB = 10^6 bytes) of
each, the ratio edgerec/boto3 (above 1: edgerec is faster), and the CPU
seconds per GB uploaded of each. 3 rounds (1 with --short).

usage: bench_upload.py [--short] [--rounds N] [--bin PATH] [--json FILE]
                       [--dir DIR]

--bin defaults to target/release/edgerec (under CARGO_TARGET_DIR when set);
scripts/bench --upload builds it. The venv ($REPO/.venv or EDGEREC_PYTHON)
has boto3; s3rver is tests/js/node_modules/.bin/s3rver (npm ci in tests/js).

Internal: bench_upload.py --boto3 ENDPOINT BUCKET PREFIX FILE... (the
boto3 side of one round).
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20
PART = 16 * MIB
CONCURRENCY = 4
KEY_ID, SECRET = "S3RVER", "S3RVER"
BUCKET = "fleet-recordings"


def boto3_upload(endpoint: str, bucket: str, prefix: str, paths) -> int:
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    import boto3
    from boto3.s3.transfer import TransferConfig
    from botocore.config import Config
    s3 = boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET, region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"},
                      request_checksum_calculation="when_required",
                      max_pool_connections=CONCURRENCY * 2))
    cfg = TransferConfig(multipart_threshold=PART, multipart_chunksize=PART,
                         max_concurrency=CONCURRENCY, use_threads=True)
    for path in paths:
        s3.upload_file(path, bucket, f"{prefix}/{os.path.basename(path)}", Config=cfg)
    return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_s3rver(s3rver: str, store: str):
    """s3rver keeping its objects in `store`, with the bucket made: the
    process (its own session) and its endpoint, once it answers."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [s3rver, "-d", store, "-a", "127.0.0.1", "-p", str(port), "--silent",
         "--configure-bucket", BUCKET],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(endpoint + "/", timeout=2).read()
            return server, endpoint
        except Exception:
            if time.monotonic() > deadline or server.poll() is not None:
                sys.exit("s3rver did not answer within 30 s")
            time.sleep(0.2)


def timed(cmd, env=None):
    """Runs cmd; (wall seconds, child CPU seconds), or exits with its output."""
    before = os.times()
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.monotonic() - t0
    after = os.times()
    if p.returncode != 0:
        sys.exit(f"bench_upload: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return wall, cpu


def noise_file(path: str, size: int) -> None:
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 8 * MIB)
            f.write(os.urandom(n))
            left -= n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--bin")
    ap.add_argument("--json")
    ap.add_argument("--dir")
    ap.add_argument("--boto3", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.boto3:
        endpoint, bucket, prefix, *paths = args.boto3
        return boto3_upload(endpoint, bucket, prefix, paths)

    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    edgerec = args.bin or os.path.join(target, "release", "edgerec")
    s3rver = os.path.join(REPO, "tests", "js", "node_modules", ".bin", "s3rver")
    python = os.environ.get("EDGEREC_PYTHON", os.path.join(REPO, ".venv", "bin", "python"))
    for what, path in (("edgerec", edgerec), ("s3rver", s3rver), ("the venv's python", python)):
        if not os.path.exists(path):
            sys.exit(f"bench_upload: {what} is missing at {path} (scripts/bench --upload builds "
                     "and installs what it needs)")
    rounds = args.rounds or (1 if args.short else 3)
    size = (128 if args.short else 1024) * MIB

    work = tempfile.mkdtemp(prefix="edgerec-bench-upload-", dir=args.dir)
    server = None
    try:
        store = os.path.join(work, "store")
        os.mkdir(store)
        server, endpoint = start_s3rver(s3rver, store)

        bag = os.path.join(work, "bench_20261206T120000Z")
        os.mkdir(bag)
        segments = [os.path.join(bag, f"bench_20261206T120000Z_{i}.mcap") for i in range(4)]
        for seg in segments:
            noise_file(seg, size // 4)
        creds = os.path.join(work, "credentials")
        fd = os.open(creds, os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"[default]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n")

        results = {"edgerec": [], "boto3": []}
        for r in range(rounds):
            cfg = os.path.join(work, f"edgerec-{r}.toml")
            with open(cfg, "w") as f:
                f.write(f"""[offload]
endpoint = "{endpoint}"
allow_http = true
bucket = "{BUCKET}"
vehicle_id = "bench-round-{r}"
credentials_file = "{creds}"
journal_dir = "{os.path.join(work, 'journal')}"
part_size = "{PART // MIB}MiB"
concurrency = {CONCURRENCY}
""")
            env = dict(os.environ, EDGEREC_LOG="warn", AWS_EC2_METADATA_DISABLED="true")
            wall, cpu = timed([edgerec, "upload", "--quiet", "--config", cfg, bag], env)
            results["edgerec"].append((wall, cpu))
            wall, cpu = timed([python, os.path.abspath(__file__), "--boto3", endpoint, BUCKET,
                               f"boto3-round-{r}"] + segments)
            results["boto3"].append((wall, cpu))

        gb = size / 1e9
        out = {"size_bytes": size, "part_size": PART, "concurrency": CONCURRENCY,
               "rounds": rounds, "server": "s3rver 3.7.1 on 127.0.0.1"}
        for name, runs in results.items():
            out[name] = {
                "mb_per_s": statistics.median(size / 1e6 / w for w, _ in runs),
                "cpu_s_per_gb": statistics.median(c / gb for _, c in runs),
                "runs": [{"wall_s": w, "cpu_s": c} for w, c in runs],
            }
        out["ratio"] = out["edgerec"]["mb_per_s"] / out["boto3"]["mb_per_s"]
        print(f"upload of {size / 1e6:.0f} MB to s3rver on loopback, part size "
              f"{PART // MIB} MiB, concurrency {CONCURRENCY}, median of {rounds} round(s):")
        for name in ("edgerec", "boto3"):
            print(f"  {name:8} {out[name]['mb_per_s']:7.1f} MB/s  "
                  f"{out[name]['cpu_s_per_gb']:5.2f} CPU s/GB")
        print(f"  edgerec/boto3 throughput: {out['ratio']:.2f}x")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=2)
        return 0
    finally:
        if server is not None:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
