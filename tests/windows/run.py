#!/usr/bin/env python3
"""The any-OS tools as a Windows program: edgerec-tools.exe under Wine.

usage: run.py EXE NATIVE WORK

EXE is edgerec-tools.exe (x86_64-pc-windows-gnu), NATIVE the same
commands built for this Linux host, WORK an empty directory. Real ROS 1
bags are written by Debian's rosbag (tests/py/make_ros1_bags.py: none, bz2
and lz4 chunks, several types, latched and several connections per topic,
images larger than a chunk), an MCAP file by Foxglove's mcap-ros2-support
writer and a rosbag2 directory by rosbags' writer
(tests/py/write_reference_mcaps.py). For each bag, under Wine:

- `info` and `check` print exactly what the Linux build prints, with the
  same exit status;
- `cat --json` of every topic prints exactly the Linux build's lines;
- `convert` (ROS 1 to MCAP) and `convert --to ros2` (to a rosbag2
  directory) write files that the Linux build's `check` accepts and whose
  `cat --json` equals that of the Linux build's own conversion.

Then `upload` of rosbags' bag directory (with a 6 MiB segment added, so
it goes in parts) to a real S3 server on loopback (PyPI moto, through
tests/py/s3peer.py, plain HTTP with allow_http): exit 0, every file in
the bucket byte for byte and the session manifest (boto3); run again,
nothing is sent.

A difference is printed and the script exits 1. Wine's own noise on
stderr is not compared (WINEDEBUG=-all keeps most of it away); stdout and
exit status are.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


class Tools:
    def __init__(self, exe, native, prefix):
        self.exe = exe
        self.native = native
        self.env = dict(os.environ, WINEDEBUG="-all", WINEPREFIX=str(prefix))

    def wine(self, *args):
        return run(["wine", str(self.exe), *map(str, args)], env=self.env)

    def linux(self, *args):
        return run([str(self.native), *map(str, args)])


failures = []


def same(what, a, b, paths=False):
    """Same exit status and stdout; `paths`: the output names files, which
    Windows joins with a backslash (`dir\\file.mcap`), so those compare
    with the separators made alike."""
    if paths:
        a = subprocess.CompletedProcess(a.args, a.returncode, a.stdout.replace("\\", "/"), a.stderr)
    if (a.returncode, a.stdout) != (b.returncode, b.stdout):
        failures.append(what)
        print(f"DIFFERENT {what}: exit {a.returncode} under Wine, {b.returncode} on Linux")
        wl, ll = a.stdout.splitlines(), b.stdout.splitlines()
        for i, (x, y) in enumerate(zip(wl, ll)):
            if x != y:
                print(f"  line {i + 1}:\n    wine:  {x[:200]}\n    linux: {y[:200]}")
                break
        else:
            print(f"  {len(wl)} lines under Wine, {len(ll)} on Linux")
        print(f"  wine stderr: {a.stderr.strip()[-400:]}")
        return False
    print(f"same {what}: exit {a.returncode}, {len(a.stdout.splitlines())} lines")
    return True


def topics_of(t, bag):
    """The topics the Linux build's `cat --json` finds in the bag."""
    out = t.linux("cat", bag, "--json")
    if out.returncode != 0:
        sys.exit(f"cat --json {bag} failed on Linux: {out.stderr}")
    return sorted({json.loads(l)["topic"] for l in out.stdout.splitlines() if l})


def upload(t, work, py):
    """`upload` under Wine to moto on loopback, checked with boto3."""
    import socket
    s3peer = REPO / "tests/py/s3peer.py"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([py, s3peer, "serve", "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        if server.stdout.readline().strip() != "ready":
            sys.exit("s3peer.py serve: moto did not start")
        mk = run([py, s3peer, "mkbucket", "--endpoint", endpoint, "--bucket", "fleet"])
        if mk.returncode != 0:
            sys.exit(f"s3peer.py mkbucket: {mk.stderr}")
        bag = work / "upload" / "laptop_20261206T101500Z"
        shutil.rmtree(bag.parent, ignore_errors=True)
        shutil.copytree(work / "ref" / "rosbags", bag)
        (bag / "laptop_20261206T101500Z_9.mcap").write_bytes(os.urandom(6 << 20))
        creds = work / "upload" / "credentials"
        creds.write_text("[default]\naws_access_key_id = edgerec-test\n"
                         "aws_secret_access_key = edgerec-test-secret\n")
        creds.chmod(0o600)
        cfg = work / "upload" / "offload.toml"
        cfg.write_text(f"""[offload]
endpoint = "{endpoint}"
allow_http = true
bucket = "fleet"
vehicle_id = "laptop"
credentials_file = "{creds}"
journal_dir = "{work / 'upload' / 'journal'}"
part_size = "5MiB"
""")
        first = t.wine("upload", "--quiet", "--config", cfg, bag)
        if first.returncode != 0:
            failures.append("upload")
            print(f"FAILED upload under Wine: exit {first.returncode}\n{first.stdout}"
                  f"{first.stderr[-1500:]}")
            return
        v = run([py, s3peer, "verify", "--endpoint", endpoint, "--bucket", "fleet",
                 "--prefix", f"laptop/{bag.name}/", "--dir", bag])
        objects = json.loads(v.stdout or "{}")
        local = sorted(p.name for p in bag.iterdir())
        names = sorted(k.rsplit("/", 1)[-1] for k in objects)
        ok = names == sorted(local + ["manifest.json"]) and all(
            o["equal"] for k, o in objects.items() if not k.endswith("/manifest.json"))
        again = t.wine("upload", "--quiet", "--config", cfg, bag)
        ok = ok and again.returncode == 0 and again.stdout.startswith("0 sent")
        if not ok:
            failures.append("upload")
            print(f"FAILED upload under Wine: objects {names}, local {local}\n"
                  f"{json.dumps(objects, indent=1)[:2000]}\nagain: {again.stdout}{again.stderr[-800:]}")
            return
        print(f"upload under Wine: {first.stdout.strip()}; boto3 reads {len(local)} files back "
              "byte for byte and the manifest; again: 0 sent")
    finally:
        server.terminate()
        server.wait()


def filter_same(t, bag, ext, *args):
    """`filter` under Wine and on Linux, the same arguments: both succeed
    and their outputs hold the same messages (the Linux build's `cat`)."""
    w = Path("out") / f"{bag.stem}.filter.wine{ext}"
    l = Path("out") / f"{bag.stem}.filter.linux{ext}"
    for p in (w, l):
        shutil.rmtree(p, ignore_errors=True)
        if p.is_file():
            p.unlink()
    Path("out").mkdir(exist_ok=True)
    what = f"filter {bag} -> {ext} {' '.join(args)}"
    fw, fl = t.wine("filter", bag, w, *args), t.linux("filter", bag, l, *args)
    if fw.returncode != 0 or fl.returncode != 0:
        failures.append(what)
        print(f"FAILED {what}: wine {fw.returncode} {fw.stderr[-400:]}"
              f" linux {fl.returncode} {fl.stderr[-400:]}")
        return
    kept = t.linux("cat", l, "--json")
    if kept.returncode != 0 or not kept.stdout.strip():
        failures.append(what)
        print(f"EMPTY {what}: the Linux build kept nothing ({kept.stderr[-400:]})")
        return
    same(f"cat of {what}", t.linux("cat", w, "--json"), kept)


def main():
    exe, native, work = (Path(a).resolve() for a in sys.argv[1:4])
    work.mkdir(parents=True, exist_ok=True)
    prefix = work / "wineprefix"
    t = Tools(exe, native, prefix)
    # One wineserver for the whole run: without it each `wine` call
    # starts a server and the prefix's services again (about 1.5 s of
    # waiting per call, 140 s of this script's 165 s); with it a call
    # takes about 0.15 s. Stopped at the end, also on failure.
    prefix.mkdir(exist_ok=True)
    subprocess.run(["wineserver", "--persistent"], env=t.env, check=True)
    try:
        # The first start makes the Wine prefix (about 20 s) and starts
        # the prefix's services, which live as long as the server: their
        # output goes nowhere, not into a pipe that a later call's
        # capture would wait on.
        subprocess.run(["wine", str(t.exe), "version"], env=t.env, check=False,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        compare(t, work)
    finally:
        subprocess.run(["wineserver", "--kill"], env=t.env, check=False)


def compare(t, work):
    os.chdir(work)
    bags = work / "bags"
    mk = run(["/usr/bin/python3", REPO / "tests/py/make_ros1_bags.py", "make", bags])
    if mk.returncode != 0:
        sys.exit(f"make_ros1_bags.py: {mk.stderr}")
    ref = work / "ref"
    py = REPO / ".venv/bin/python"
    mk = run([py, REPO / "tests/py/write_reference_mcaps.py", ref])
    if mk.returncode != 0:
        sys.exit(f"write_reference_mcaps.py: {mk.stderr}")
    inputs = [Path("bags") / f"{c}.bag" for c in ("none", "bz2", "lz4")]
    # Foxglove's mcap-ros2-support writer's file and rosbags' bag directory
    # (the raw writer's files carry a topic of bytes that are not CDR).
    inputs += [Path("ref") / "mcap-ros2.mcap", Path("ref") / "rosbags"]
    for bag in inputs:
        same(f"info {bag}", t.wine("info", bag), t.linux("info", bag), paths=True)
        same(f"check {bag}", t.wine("check", bag), t.linux("check", bag), paths=True)
        topics = topics_of(t, bag)
        for topic in topics:
            same(f"cat {bag} --topic {topic} --json",
                 t.wine("cat", bag, "--topic", topic, "--json"),
                 t.linux("cat", bag, "--topic", topic, "--json"))
        # filter: an expression in rosbag filter's form (topic and receive
        # time), and topics with a time window relative to the start; ROS
        # 1 into a bag and into MCAP, the rest into MCAP.
        expr = f"topic in ('{topics[0]}', '{topics[-1]}') and t.to_sec() > 0"
        for ext in (".bag", ".mcap") if bag.suffix == ".bag" else (".mcap",):
            filter_same(t, bag, ext, expr)
        filter_same(t, bag, ".mcap", "--topics", topics[0], topics[-1],
                    "--start", "+0ms", "--end", "+3600s")
        if bag.suffix != ".bag":
            continue
        for how, ext in ((), ".mcap"), (("--to", "ros2"), ".ros2"):
            w = Path("out") / f"{bag.stem}.wine{ext}"
            l = Path("out") / f"{bag.stem}.linux{ext}"
            for p in (w, l):
                shutil.rmtree(p, ignore_errors=True)
                if p.is_file():
                    p.unlink()
            Path("out").mkdir(exist_ok=True)
            cw, cl = t.wine("convert", *how, bag, w), t.linux("convert", *how, bag, l)
            if cw.returncode != 0 or cl.returncode != 0:
                failures.append(f"convert {how} {bag}")
                print(f"FAILED convert {how} {bag}: wine {cw.returncode} {cw.stderr[-400:]}"
                      f" linux {cl.returncode} {cl.stderr[-400:]}")
                continue
            chk = t.linux("check", w)
            if chk.returncode != 0:
                failures.append(f"check of Wine's convert {how} {bag}")
                print(f"INVALID Wine's convert {how} {bag}: {chk.stdout}{chk.stderr}")
                continue
            same(f"cat of convert {' '.join(how) or '(ros1 mcap)'} {bag}",
                 t.linux("cat", w, "--json"), t.linux("cat", l, "--json"))
    upload(t, work, py)
    if failures:
        print(f"{len(failures)} differences: {failures}")
        sys.exit(1)
    print(f"the Windows build agrees with the Linux build on {len(inputs)} bags")


if __name__ == "__main__":
    main()
