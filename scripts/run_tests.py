#!/usr/bin/env python3
"""Runs the workspace's test binaries a few at a time.

    scripts/run_tests.py [--jobs N] [--limit S] [--extra 'CARGO ARGS'...] -- CARGO TEST ARGS

`cargo test` runs its test binaries one after the other, and most of this
workspace's time is spent waiting (DDS discovery, servers starting, a
recording's seconds going by, child processes), not computing: alone, the
slowest binaries use a fifth of a core. This builds them once
(`cargo test --no-run` with the arguments after `--`), then runs each as
cargo would (in its package's directory, with cargo's run-time
environment), N at a time, the longest first (the durations below), with
the doc tests (`cargo test --doc`) and each `--extra` cargo command as jobs
of their own. Each binary keeps its own test threads and in-process locks,
as under cargo. A binary's output is shown when it fails, whole; a binary
past --limit seconds is killed and named. Ends with the slowest binaries
and exits 1 when any failed.
"""

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import tomllib

# Seconds each binary took alone (2 cores, 2026-12-07): only orders the
# runs, longest first; one not listed goes after these.
MEASURED = {
    "edgerec-offload/moto": 52, "edgerec/power_cut": 44, "edgerec/triggers": 42,
    "edgerec/upload": 33, "edgerec/camera_topic": 22, "edgerec/camera": 22,
    "edgerec-tools/integration": 22, "edgerec-rosbag1/integration": 22,
    "edgerec/trigger_flood": 21, "edgerec/ros_burst": 21,
    "edgerec-recorder/pipeline": 18, "edgerec/bus_udp": 17,
    "edgerec/supervision": 17, "edgerec-recorder/triggers": 17,
    "edgerec/ros_record": 15, "edgerec/offload_run": 61, "edgerec/cli": 15,
    "edgerec/ros_control": 14, "edgerec-clock/ptp4l_peer": 13,
    "edgerec/triggers_ros": 13, "edgerec/ros_hostile": 7, "edgerec-ros/dds_smoke": 7,
    "edgerec-format/recover": 7, "edgerec/export_video": 7, "edgerec-camera/stall": 6,
}


# Binaries whose tests wait on a store, a fault proxy's outage or a
# recording's seconds, and assert what arrived, not how fast: their
# tests run this many at a time (libtest's --test-threads; its default
# is the number of cores). offload_run alone took 120 s two at a time
# and 61 s ten at a time, its 30 s store outage the longest (2026-12-07).
# The fleet link's tests wait on a broker, a keepalive and a recording's
# seconds, each with a broker of its own.
TEST_THREADS = {
    "edgerec/offload_run": 10,
    "edgerec/upload": 4,
    "edgerec/remote_link": 3,
    "edgerec-remote/link": 6,
}


# Binaries whose tests assert a rate or a zero-drop flood (100k UDP
# packets/s, a flooding channel beside a quiet one, DDS bursts, trigger
# floods, the clip windows of overlapping events): they run alone,
# nothing beside them, with the builds scripts/test starts ahead
# (--pause-pgid) stopped meanwhile.
ALONE = {
    "edgerec/bus_udp", "edgerec-recorder/pipeline", "edgerec/ros_burst",
    "edgerec/trigger_flood", "edgerec/triggers",
}


def log(msg: str) -> None:
    print(f"==> {msg}", file=sys.stderr, flush=True)


def package_name(manifest: str, cache: dict = {}) -> str:
    if manifest not in cache:
        with open(manifest, "rb") as f:
            cache[manifest] = tomllib.load(f)["package"]["name"]
    return cache[manifest]


def test_binaries(cargo_args: list[str]) -> list[dict]:
    """Builds the tests; each executable with its package and target."""
    cmd = ["cargo", "test", "--no-run", "--message-format=json-render-diagnostics", *cargo_args]
    log(" ".join(cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
    if p.returncode != 0:
        sys.exit(p.returncode)
    out = []
    for line in p.stdout.splitlines():
        m = json.loads(line)
        if m.get("reason") != "compiler-artifact" or not m.get("executable"):
            continue
        if not m["profile"]["test"]:
            continue
        name = m["target"]["name"]
        pkg_name = package_name(m["manifest_path"])
        out.append({
            "id": f"{pkg_name}/{name}" if m["target"]["kind"][0] == "test" else f"{pkg_name}/{name} (unit)",
            "exe": m["executable"],
            "dir": os.path.dirname(m["manifest_path"]),
            "package": pkg_name,
            "lib": "lib" in m["target"]["kind"] or "rlib" in m["target"]["kind"],
        })
    return out


def doc_command(cargo_args: list[str], lib_packages: set[str]) -> list[str] | None:
    """`cargo test --doc` of the libraries among the packages selected
    (cargo refuses `--doc` for a package without one); None when none."""
    if "--workspace" in cargo_args:
        return ["cargo", "test", "--doc", *cargo_args]
    rest, it = [], iter(cargo_args)
    for a in it:
        if a in ("-p", "--package"):
            next(it, None)
        elif not a.startswith("--package="):
            rest.append(a)
    if not lib_packages:
        return None
    pkgs = [x for p in sorted(lib_packages) for x in ("-p", p)]
    return ["cargo", "test", "--doc", *pkgs, *rest]


def measured(job: dict) -> float:
    return MEASURED.get(job["id"], 0)


class Running:
    def __init__(self, job: dict, limit: float):
        self.job = job
        self.log = tempfile.TemporaryFile(mode="w+b")
        env = dict(os.environ)
        if "exe" in job:
            cmd = [job["exe"]]
            if job["id"] in TEST_THREADS:
                cmd.append(f"--test-threads={TEST_THREADS[job['id']]}")
            env["CARGO_MANIFEST_DIR"] = job["dir"]
            env["CARGO_PKG_NAME"] = job["package"]
            cwd = job["dir"]
        else:
            cmd = job["cmd"]
            cwd = None
        self.started = time.monotonic()
        self.deadline = self.started + limit
        # Its own process group, so a hung binary's children go with it.
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.timed_out = False

    def poll(self):
        rc = self.proc.poll()
        if rc is None and time.monotonic() > self.deadline:
            self.timed_out = True
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass
            rc = self.proc.wait()
        return rc

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--limit", type=float, default=600, help="seconds one binary may run")
    ap.add_argument("--extra", action="append", default=[],
                    help="another cargo command to run as a job (its arguments, quoted)")
    ap.add_argument("--pause-pgid", type=int,
                    help="a process group to stop (SIGSTOP) while a binary of ALONE runs")
    ap.add_argument("--go-file",
                    help="a file to create once the compiling is done (the build, the cargo jobs) and "
                         "the first test binary starts: what scripts/test's builds ahead wait for")
    ap.add_argument("cargo_args", nargs="*")
    args = ap.parse_args()
    start = time.monotonic()
    jobs = sorted(test_binaries(args.cargo_args), key=lambda j: -measured(j))
    extras = []
    doc = doc_command(args.cargo_args, {j["package"] for j in jobs if j["lib"]})
    if doc:
        extras.append({"id": "doc tests", "cmd": doc})
    for e in args.extra:
        extras.append({"id": f"cargo {e}", "cmd": ["cargo", *shlex.split(e)]})
    # The cargo jobs first: they compile while the first binaries wait.
    queue = extras + jobs
    log(f"{len(jobs)} test binaries and {len(extras)} cargo jobs, {args.jobs} at a time")
    running: list[Running] = []
    done: list[tuple[str, float, str]] = []
    failed: list[str] = []
    # The ALONE binaries last: each waits for the others to finish.
    alone = [j for j in queue if j["id"] in ALONE]
    queue = [j for j in queue if j["id"] not in ALONE] + alone
    paused = False

    def pause(on: bool) -> None:
        nonlocal paused
        if args.pause_pgid and on != paused:
            try:
                os.killpg(args.pause_pgid, signal.SIGSTOP if on else signal.SIGCONT)
            except ProcessLookupError:
                pass
            paused = on

    while queue or running:
        while queue and len(running) < args.jobs:
            if queue[0]["id"] in ALONE:
                if running:
                    break
                pause(True)
                running.append(Running(queue.pop(0), args.limit))
                break
            if args.go_file and "cmd" not in queue[0] and not any("cmd" in r.job for r in running):
                # The compilers are done: the builds ahead may start.
                open(args.go_file, "a").close()
                args.go_file = None
            pause(False)
            running.append(Running(queue.pop(0), args.limit))
        time.sleep(0.05)
        for r in list(running):
            rc = r.poll()
            if rc is None:
                continue
            running.remove(r)
            took = time.monotonic() - r.started
            name = r.job["id"]
            if rc == 0:
                result = "ok"
            elif r.timed_out:
                result = f"TIMEOUT after {args.limit:.0f} s"
            else:
                result = f"FAILED (exit {rc})"
            done.append((name, took, result))
            print(f"    {result:<8} {took:6.1f} s  {name}", file=sys.stderr, flush=True)
            if rc != 0:
                failed.append(name)
                out = r.output()
                print(f"---- {name}: its whole output ----\n{out}---- end of {name} ----",
                      flush=True)
    pause(False)
    if args.go_file:
        open(args.go_file, "a").close()
    log("the slowest: " + ", ".join(f"{n} {t:.0f} s" for n, t, _ in
                                    sorted(done, key=lambda d: -d[1])[:8]))
    took = time.monotonic() - start
    if failed:
        log(f"{len(failed)} of {len(done)} failed in {took:.0f} s: {', '.join(failed)}")
        return 1
    log(f"all {len(done)} passed in {took:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
