#!/usr/bin/env python3
"""System tests of edgerec on an emulated aarch64 board (qemu-system-aarch64,
`-M virt`, an NVMe disk holding ext4, an i6300esb watchdog).

The board is image/qemu/out (built by image/qemu/build); each scenario
writes a fresh ext4 image holding /data/edgerec/edgerec.toml, boots the
board with `edgerec.scenario=NAME` (tests/qemu/guest/NAME.sh runs in the
guest), reads the serial console (lines starting with "@@ " are the
guest's reports) and, after the board is off, copies results out of the
image with debugfs and checks them on the host: `edgerec check` (host
build) and tests/py/verify_bag.py (two independent Python readers).

usage: run.py [--only NAME,...] [--seed N] [--keep] [--work DIR]
              [--edgerec HOST_BINARY] [--json FILE] [--camera-hz N] [--board DIR]
Run through scripts/qemu-test, which builds and installs what this needs.
Prints one result table; exits 1 when a scenario failed.
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BOARD = REPO / "image/qemu/out"
MIB = 1 << 20

# What the recorded synthetic sensors look like (tests/py/verify_bag.py
# checks every field and payload byte of these).
SENSORS = """
[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 200

[[sources.synthetic]]
topic = "/camera/image_raw"
type = "sensor_msgs/msg/Image"
rate = {camera_hz}
payload_size = 1048576

[[sources.synthetic]]
topic = "/lidar/points"
type = "sensor_msgs/msg/PointCloud2"
rate = 10
payload_size = 614400
"""
# The sparse disk images are large enough that retention (with the default
# 256 MiB preallocation counted as write-ahead) never has to act, except in
# disk-full.
RETENTION = """
[retention]
min_free_bytes = "128MiB"
min_free_percent = 0
"""
RT_PRIO = 10
RT = f"""
[storage]
realtime_priority = {RT_PRIO}
"""
RATES = {"/imu": 200, "/camera/image_raw": 20, "/lidar/points": 10}


def config(*, watchdog="", watchdog_timeout="10s", stage_deadline="5s", extra=""):
    return f"""# written by tests/qemu/run.py
[recording]
root = "/data/edgerec/recordings"
session_prefix = "qemu"

[health]
watchdog = "{watchdog}"
watchdog_timeout = "{watchdog_timeout}"
stage_deadline = "{stage_deadline}"
fault_file = "/data/edgerec/last-fault.json"
status_socket = "/run/edgerec/status.sock"
{extra}
{SENSORS.format(camera_hz=RATES["/camera/image_raw"])}"""


class Fail(Exception):
    """A scenario's assertion failed; the message says what and why."""


class Skip(Exception):
    """The board cannot run a scenario; the message says why."""


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


# --- the disk ------------------------------------------------------------


def in_image(guest_path):
    """The path inside the ext4 image of a guest path under /data (where
    the board mounts it)."""
    p = str(guest_path)
    check(p == "/data" or p.startswith("/data/"), f"{p} is not on the data disk")
    return p[len("/data"):] or "/"


class Disk:
    """An ext4 image for the board's NVMe (mounted at /data in the guest);
    read back with debugfs. Paths are the guest's."""

    def __init__(self, path, size_mib, files):
        self.path = Path(path)
        self.size_mib = size_mib
        stage = self.path.with_suffix(".stage")
        shutil.rmtree(stage, ignore_errors=True)
        for rel, text in files.items():
            # A (text, mode) pair for a file that must not be world-readable
            # (the offload credentials: edgerec refuses them otherwise).
            text, mode = text if isinstance(text, tuple) else (text, 0o644)
            p = stage / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
            p.chmod(mode)
        self.path.unlink(missing_ok=True)
        with open(self.path, "wb") as f:
            f.truncate(size_mib * MIB)
        # -m 0: no blocks reserved for root, so the free space the recorder
        # sees (f_bavail) is the disk's.
        sh(["mkfs.ext4", "-q", "-F", "-m", "0", "-L", "edgerec-data", "-d", str(stage), str(self.path)])
        shutil.rmtree(stage)

    def cat(self, guest_path):
        """A file's bytes, or None when it does not exist."""
        r = subprocess.run(["debugfs", "-R", f"cat {in_image(guest_path)}", str(self.path)], capture_output=True)
        if r.returncode != 0 or b"File not found" in r.stderr:
            return None
        return r.stdout

    def exists(self, guest_path):
        r = subprocess.run(["debugfs", "-R", f"stat {in_image(guest_path)}", str(self.path)], capture_output=True, text=True)
        return r.returncode == 0 and "File not found" not in r.stderr and "Inode:" in r.stdout

    def ls(self, guest_path):
        r = sh(["debugfs", "-R", f"ls -l {in_image(guest_path)}", str(self.path)])
        return r.stdout

    def rdump(self, guest_path, host_dir):
        """Copies the directory guest_path into host_dir; returns the copy."""
        host_dir = Path(host_dir)
        host_dir.mkdir(parents=True, exist_ok=True)
        name = guest_path.rstrip("/").rsplit("/", 1)[1]
        shutil.rmtree(host_dir / name, ignore_errors=True)
        r = subprocess.run(["debugfs", "-R", f"rdump {in_image(guest_path)} {host_dir}", str(self.path)],
                           capture_output=True, text=True)
        check((host_dir / name).is_dir(), f"debugfs rdump {guest_path}: {r.stderr.strip()[-300:]}")
        return host_dir / name

    def fsck(self):
        """e2fsck -fn: (rc, output). rc 0 = clean."""
        r = subprocess.run(["e2fsck", "-fn", str(self.path)], capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr


# --- the board -----------------------------------------------------------


class Boot:
    """One boot of the board, its console read line by line with the host's
    monotonic time of arrival."""

    def __init__(self, name, scenario, disk, workdir, args="", timeout=120, monitor=None, net=False):
        self.name = name
        self.monitor = monitor
        self.timeout = timeout
        self.lines = []  # (host monotonic s, text)
        self.cond = threading.Condition()
        self.console = Path(workdir) / f"{name}.console.log"
        append = f"console=ttyAMA0 quiet panic=-1 edgerec.scenario={scenario} {args}".strip()
        self.cmd = [
            "qemu-system-aarch64", "-M", "virt", "-cpu", "cortex-a76", "-smp", "2", "-m", "2048",
            "-nic", "none", "-display", "none", "-serial", "stdio",
            # The QEMU monitor on a Unix socket when a scenario drives the
            # machine (system_powerdown: the power button's GPIO line).
            "-monitor", f"unix:{monitor},server=on,wait=off" if monitor else "none",
            # A reset (watchdog) or a panic (panic=-1) ends QEMU instead of
            # rebooting; the console says which.
            "-no-reboot",
            "-kernel", str(BOARD / "Image"), "-initrd", str(BOARD / "initrd.gz"),
            "-append", append,
            "-drive", f"file={disk.path},if=none,id=nvm,format=raw,cache=none",
            "-device", "nvme,serial=edgerec01,drive=nvm",
            "-device", "i6300esb",
        ]
        if net:
            # QEMU's user-mode network: the guest (10.0.2.15, set by the
            # scenario) reaches this host's loopback as 10.0.2.2, through
            # QEMU's own sockets; it has no default route and no DNS, and
            # its configuration names only 10.0.2.2.
            i = self.cmd.index("-nic")
            self.cmd[i:i + 2] = ["-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0"]
        if os.access("/dev/kvm", os.R_OK | os.W_OK) and os.uname().machine == "aarch64":
            self.cmd[1:5] = ["-M", "virt", "-accel", "kvm", "-cpu", "host"]
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.t_exit = None
        self.killed = False
        self.timed_out = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        with open(self.console, "w", errors="replace") as out:
            for raw in self.proc.stdout:
                t = time.monotonic()
                text = raw.decode(errors="replace").rstrip("\r\n")
                out.write(f"{t - self.t0:9.3f} {text}\n")
                with self.cond:
                    self.lines.append((t, text))
                    self.cond.notify_all()
        self.proc.wait()
        with self.cond:
            self.t_exit = time.monotonic()
            self.cond.notify_all()

    def wait_for(self, prefix, timeout):
        """The first report line starting with "@@ prefix", waiting up to
        timeout s; (t, text) or raises Fail."""
        deadline = time.monotonic() + timeout
        want = "@@ " + prefix
        i = 0
        with self.cond:
            while True:
                while i < len(self.lines):
                    if self.lines[i][1].startswith(want):
                        return self.lines[i]
                    i += 1
                if self.t_exit is not None:
                    raise Fail(f"{self.name}: board ended before '{want}'\n{self.tail()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Fail(f"{self.name}: no '{want}' within {timeout} s\n{self.tail()}")
                self.cond.wait(left)

    def monitor_command(self, command):
        """Sends one command to the QEMU monitor (the boot's `monitor`
        socket); returns what the monitor printed back."""
        import socket

        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(self.monitor))
            out = b""
            while b"(qemu)" not in out:
                chunk = s.recv(4096)
                if not chunk:
                    break
                out += chunk
            s.sendall(command.encode() + b"\n")
            reply = b""
            try:
                while b"(qemu)" not in reply:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    reply += chunk
            except socket.timeout:
                pass
        return reply.decode(errors="replace")

    def kill(self):
        """SIGKILL to QEMU: the power cut."""
        self.killed = True
        self.proc.kill()
        t = time.monotonic()
        self.finish()
        return t

    def finish(self):
        """Waits for the end (the scenario's own timeout); a board still
        running then is killed and reported."""
        left = self.timeout - (time.monotonic() - self.t0)
        try:
            self.proc.wait(timeout=max(left, 0.1))
        except subprocess.TimeoutExpired:
            self.timed_out = True
            self.proc.kill()
            self.proc.wait()
        self.reader.join(timeout=10)
        return self

    @property
    def seconds(self):
        return (self.t_exit or time.monotonic()) - self.t0

    def reports(self, prefix):
        """[(t, fields after the prefix)] of every "@@ prefix ..." line."""
        want = "@@ " + prefix + " "
        return [(t, x[len(want):]) for t, x in self.lines if x.startswith(want)]

    def numbers(self, prefix, n):
        """[(t, [n numbers])] of the "@@ prefix N N ..." lines; a line the
        console interleaved with another writer is skipped."""
        out = []
        for t, x in self.reports(prefix):
            f = x.split()
            if len(f) == n and all(re.fullmatch(r"\d+(\.\d+)?", v) for v in f):
                out.append((t, [float(v) if "." in v else int(v) for v in f]))
        return out

    def statuses(self):
        out = []
        for t, x in self.reports("status"):
            try:
                out.append((t, json.loads(x)))
            except ValueError:
                pass  # a line the console cut: the next one will do
        return out

    def clean_end(self):
        """True when the guest powered off by itself ("@@ poweroff" is the
        init's last line)."""
        return any(x.startswith("@@ poweroff") for _, x in self.lines)

    def panicked(self):
        return any("Kernel panic" in x for _, x in self.lines)

    def tail(self, n=25):
        return "\n".join("    | " + x for _, x in self.lines[-n:])

    def expect_clean(self, edgerec_ok=True):
        """The board powered off by itself, and (edgerec_ok) the scenario's
        edgerec exited 0."""
        check(not self.timed_out, f"{self.name}: hung past {self.timeout} s, killed\n{self.tail()}")
        check(not self.panicked(), f"{self.name}: kernel panic\n{self.tail()}")
        check(self.clean_end(), f"{self.name}: board stopped without a clean power-off (reset?)\n{self.tail()}")
        check(self.proc.returncode == 0, f"{self.name}: qemu exit status {self.proc.returncode}\n{self.tail()}")
        if edgerec_ok:
            self.expect_edgerec_ok()

    def expect_edgerec_ok(self):
        rc = [x for _, x in self.reports("edgerec-exit")]
        check(rc, f"{self.name}: edgerec never exited\n{self.tail()}")
        if not rc[-1].startswith("rc=0 "):
            # The first errors say more than the last lines.
            errors = [x for _, x in self.lines if " ERROR " in x or "storage failed" in x][:3]
            first = re.sub(r"^\S+Z\s+", "", errors[0]) if errors else "no error logged"
            if len(first) > 200:
                first = first[:60] + " ... " + first[-135:]
            raise Fail(f"{self.name}: edgerec {rc[-1].split()[0]}: {first}\n  first errors:\n"
                       + "\n".join("    | " + x for x in errors) + f"\n  console tail:\n{self.tail(8)}")


def field(text, key):
    m = re.search(rf"\b{key}=(\S+)", text)
    return m.group(1) if m else None


# --- host-side checks ----------------------------------------------------


class Host:
    def __init__(self, edgerec, python):
        self.edgerec = edgerec
        self.python = python

    def check_bag(self, bag):
        r = subprocess.run([self.edgerec, "check", str(bag)], capture_output=True, text=True)
        check(r.returncode == 0, f"edgerec check {bag.name}: {(r.stdout + r.stderr).strip()[-800:]}")
        oks = [x for x in r.stdout.splitlines() if x.startswith("OK")]
        check(oks, f"edgerec check {bag.name} printed no OK line: {r.stdout[-300:]}")
        n = sum(int(m.group(1)) for m in (re.search(r": (\d+) messages", x) for x in oks) if m)
        return f"edgerec check (host): {len(oks)} segment(s), {n} messages, every CRC verified"

    def verify_bag(self, bag, report, workdir):
        rp = Path(workdir) / f"{bag.name}.report.json"
        rp.write_text(json.dumps(report))
        r = subprocess.run([self.python, str(REPO / "tests/py/verify_bag.py"), str(bag), str(rp)],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"verify_bag.py {bag.name}: {(r.stdout + r.stderr).strip()[-1500:]}")
        return r.stdout.strip().splitlines()[-1]


def segment_index(p):
    return int(p.name.split(".")[0].rsplit("_", 1)[1])


def bag_contents(bag):
    """Per topic: distinct messages (a latched repeat, same sequence at a
    segment start, counted once), first and last log time, by the
    independent mcap reader."""
    from mcap.reader import make_reader  # the .venv's pinned reader

    topics = {}
    for seg in sorted(bag.glob("*.mcap"), key=segment_index):
        started = set()
        with open(seg, "rb") as f:
            for _schema, channel, msg in make_reader(f, validate_crcs=True).iter_messages():
                t = topics.setdefault(channel.topic, {"count": 0, "first": None, "last": 0, "seq": None})
                first_here = channel.topic not in started
                started.add(channel.topic)
                if first_here and t["seq"] is not None and msg.sequence == t["seq"]:
                    continue  # a latched channel's repeat at the segment start
                t["seq"] = msg.sequence
                t["count"] += 1
                t["first"] = msg.log_time if t["first"] is None else min(t["first"], msg.log_time)
                t["last"] = max(t["last"], msg.log_time)
    return topics


def report_from_bag(contents, dropped):
    """A report in edgerec's --report-json shape for verify_bag.py, for a
    bag whose recorder could not write one (killed) or whose oldest
    segments retention deleted: what the files hold is `written`, and
    `dropped` (per topic) is what may be missing from their sequences."""
    return {"channels": [
        {"topic": topic, "written": c["count"], "dropped": dropped.get(topic, 0), "lost": 0}
        for topic, c in sorted(contents.items())
    ]}


# --- scenarios -----------------------------------------------------------


class Scenario:
    name = ""
    what = ""

    def __init__(self, work, host, seed):
        self.work = Path(work) / self.name
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        self.host = host
        self.seed = seed
        self.boots = []
        self.notes = []

    def boot(self, name, scenario, disk, args="", timeout=120, monitor=None, net=False):
        log(f"{self.name}: boot {name} (edgerec.scenario={scenario} {args})".rstrip())
        b = Boot(name, scenario, disk, self.work, args, timeout, monitor, net)
        self.boots.append(b)
        return b

    def note(self, msg):
        self.notes.append(msg)
        log(f"{self.name}: {msg}")


class Record(Scenario):
    name = "record"
    what = "20 s of IMU 200 Hz, 1 MiB images 20 Hz, lidar 10 Hz to NVMe ext4; bag checked on the host"
    SECONDS = 20

    def run(self):
        disk = Disk(self.work / "nvme.img", 2048, {"edgerec/edgerec.toml": config(extra=RETENTION + RT)})
        b = self.boot("boot", "record", disk, f"edgerec.seconds={self.SECONDS}", timeout=150).finish()
        b.expect_clean()
        st = b.statuses()
        check(st, "no status printed mid-run")
        mid = st[-1][1]
        # The emulated board has no PTP: its clock is free-running, which
        # the status calls degraded ("clock unlocked"); nothing else may be.
        check(mid["state"] in ("recording", "degraded") and set(mid["reasons"]) <= {"clock unlocked"},
              f"mid-run state {mid['state']} {mid.get('reasons')}")
        # storage.realtime_priority: the storage stage's threads, and only
        # they, under SCHED_FIFO at that priority on the arm64 kernel.
        sched = [x.split() for _, x in b.reports("sched")]
        fifo = {c.strip("()") for c, policy, rt in sched if policy == "1" and rt == str(RT_PRIO)}
        check({"edgerec-seq", "edgerec-io"} <= fifo, f"storage threads not SCHED_FIFO {RT_PRIO}: {sched}")
        other = [c for c, policy, _ in sched if policy != "0" and c.strip("()") not in
                 ("edgerec-seq", "edgerec-io", "edgerec-close") and not c.startswith("(iou-")]
        check(not other, f"threads outside the storage stage under a real-time policy: {other}")
        self.note(f"SCHED_FIFO {RT_PRIO}: {sorted(fifo)}; {len(sched)} threads in all")
        # As edgerec.service runs it: user and group edgerec (990 on this
        # board), CAP_IPC_LOCK and CAP_SYS_NICE (bits 14 and 23) and
        # nothing else, effective, bounding and ambient. The SCHED_FIFO
        # above is what CAP_SYS_NICE is for; the O_DIRECT io_uring writes
        # with registered buffers are what CAP_IPC_LOCK is for.
        creds = [x.split() for _, x in b.reports("creds")]
        want = ["990", "990"] + [f"{1 << 14 | 1 << 23:016x}"] * 3
        check(creds == [want], f"the recorder's credentials {creds}, not {want}")
        self.note("as user edgerec (990) with CAP_IPC_LOCK and CAP_SYS_NICE only")
        # ... and the status says so, from the same /proc.
        rt = mid["storage"].get("realtime") or {}
        check(rt.get("priority") == RT_PRIO and not rt.get("other")
              and {"edgerec-seq", "edgerec-io"} <= {n for n, _ in rt.get("fifo", [])},
              f"status storage.realtime {rt}")
        self.note(f"status storage.realtime: SCHED_FIFO {rt['priority']} on {rt['fifo']}, normal: {rt['other']}")
        check(mid["storage"]["backend"] == "io_uring+O_DIRECT",
              f"mid-run backend {mid['storage']['backend']} ({mid['storage'].get('fallback_reason')})")
        report = json.loads(disk.cat("/data/edgerec/report.json") or b"null")
        check(report, "no /data/edgerec/report.json in the image")
        check(report["backend"] == "io_uring+O_DIRECT",
              f"backend {report['backend']} ({report.get('fallback_reason')})")
        bag = disk.rdump(report["session_dir"], self.work / "pulled")
        self.note(self.host.check_bag(bag))
        self.note(self.host.verify_bag(bag, report, self.work))
        mbs = report["bytes_written"] / report["seconds"] / 1e6
        drops = report["drops"]
        total = sum(c["written"] for c in report["channels"])
        check(drops == 0, f"{drops} messages dropped at {mbs:.1f} MB/s: the emulated board did not keep up")
        per_s = report.get("bytes_per_second", [])[1:-1]
        self.note(f"{report['bytes_written'] / MIB:.0f} MiB, {total} messages in {report['seconds']:.1f} s, "
                  f"per second {min(per_s) / 1e6:.1f}..{max(per_s) / 1e6:.1f} MB/s" if per_s else "")
        return f"{mbs:.1f} MB/s ({report['backend']}, {drops} drops)"


class CutTiming:
    """Where the guest stood when the host killed it, from the heartbeats
    (guest CLOCK_REALTIME, host arrival time) read before the kill.

    The guest's clock runs at the host's rate (TCG's virtual clock is the
    host's), so arrival minus guest time is a constant plus that line's
    delay: the guest shell between reading the clock and printing, and the
    serial console. The smallest of these offsets is the constant to within
    the smallest delay, so the host's kill time minus it is the guest's
    clock at the kill (`cut_s`), early by at most that smallest delay.
    """

    def __init__(self, hbs, t_kill):
        # hbs: [(host arrival s, guest realtime s)], arrival order.
        offsets = [t - g for t, g in hbs]
        self.offset_min = min(offsets)
        self.offset_spread_ms = 1000 * (max(offsets) - self.offset_min)
        self.cut_s = t_kill - self.offset_min
        t_last, self.last_hb_s = hbs[-1]
        # How stale the guest's last word was at the kill: the host's wait
        # since it arrived, plus that line's own delay beyond the smallest.
        self.host_gap_ms = 1000 * (t_kill - t_last)
        self.console_ms = 1000 * (offsets[-1] - self.offset_min)
        self.staleness_ms = 1000 * (self.cut_s - self.last_hb_s)
        guest = sorted(g for _, g in hbs)
        # Gaps between heartbeats, and from the last one to the cut.
        self.gaps = list(zip(guest, guest[1:])) + [(guest[-1], self.cut_s)]
        inner = sorted(b - a for a, b in self.gaps[:-1])
        self.period_ms = 1000 * inner[len(inner) // 2]

    def stall_ms(self, since_s, until_s=None):
        """The longest time the guest's userspace made no progress between
        since_s and until_s (default: the cut) beyond one normal heartbeat
        period: the largest heartbeat gap overlapping that span, less the
        median gap. The recorder's threads share those vCPUs, so a chunk
        close or a sync due then ran about that much late."""
        until_s = self.cut_s if until_s is None else until_s
        late = [1000 * (b - a) - self.period_ms for a, b in self.gaps if b > since_s and a < until_s]
        return max([0.0] + late)


class SegmentSyncs:
    """The segment's fdatasyncs as the guest kernel saw them ("@@ fsync",
    ext4's sync_file tracepoints, stamped with the trace clock `tai`, which
    is CLOCK_REALTIME on this board), including lines that reached the host
    after the kill: their stamps are the kernel's, only their arrival was
    late. The segment is the inode with the most datasync entries (the
    session directory and metadata.yaml get fsync, datasync 0)."""

    def __init__(self, boot):
        events = []
        for _, x in boot.reports("fsync"):
            f = x.split()
            if len(f) == 5 and f[0] in ("enter", "exit") and re.fullmatch(r"\d+\.\d+", f[1]):
                events.append((f[0], float(f[1]), int(f[2]), int(f[4])))
        self.unavailable = any(x.startswith("@@ fsync-trace unavailable") for _, x in boot.lines)
        # The trace clock against the realtime the guest wrote into a marker
        # just before: positive and small when `tai` is the realtime clock.
        clock = [x.split() for _, x in boot.reports("fsync-clock")]
        self.clock_skew_ms = (1000 * (float(clock[0][0]) - int(clock[0][1]) - int(clock[0][2]) / 1e6)
                              if clock and len(clock[0]) == 3 else None)
        data = [i for k, _, i, v in events if k == "enter" and v == 1]
        ino = max(set(data), key=data.count) if data else None
        self.starts = sorted(t for k, t, i, v in events if k == "enter" and i == ino and v == 1)
        exits = sorted(t for k, t, i, _ in events if k == "exit" and i == ino)
        self.durations_ms = []
        for a in self.starts:
            x = next((x for x in exits if x >= a), None)
            if x is not None:
                self.durations_ms.append(1000 * (x - a))
        self.intervals = list(zip(self.starts, self.starts[1:]))


class PowerCut(Scenario):
    name = "power-cut"
    what = ("QEMU SIGKILLed mid-recording; next boot's start-up recovery; bag checked; loss vs the design's "
            "window plus the emulation lag measured at this cut; fdatasync cadence")
    SYNC_MS = 1000  # storage.sync_interval (default)
    AGE_MS = 500  # mcap.chunk_max_age (default)
    TICK_MS = 20  # the sequencer's sync check (crates/recorder/src/sequencer.rs TICK)

    def run(self):
        rng = random.Random(self.seed)
        delay = rng.uniform(3.0, 12.0)
        self.note(f"seed {self.seed}: cut {delay:.2f} s after recording starts")
        disk = Disk(self.work / "nvme.img", 2048, {"edgerec/edgerec.toml": config(extra=RETENTION)})
        b = self.boot("cut", "powercut", disk, timeout=90)
        t_rec, _ = b.wait_for("recording", 60)
        time.sleep(max(0.0, t_rec + delay - time.monotonic()))
        t_kill = b.kill()
        hbs = [(t, sec + usec / 1e6) for t, (sec, usec, _up) in b.numbers("hb", 3) if t <= t_kill]
        check(len(hbs) >= 10, f"only {len(hbs)} heartbeats before the cut")
        cut = CutTiming(hbs, t_kill)
        st = [s for t, s in b.statuses() if t <= t_kill]
        check(st, "no status before the cut")
        last_status = st[-1]
        dropped = {s["topic"]: s["dropped"] + s["lost"] for s in last_status["channels"]}
        self.note(f"cut at +{t_kill - t_rec:.2f} s; {last_status['storage']['bytes_written'] / MIB:.0f} MiB written "
                  f"by the last status; the guest's clock at the kill {cut.staleness_ms:.0f} ms past its last "
                  f"heartbeat ({cut.host_gap_ms:.0f} ms the host waited since it arrived + {cut.console_ms:.0f} ms "
                  f"that line's own delay); heartbeat every {cut.period_ms:.0f} ms (median)")
        syncs = SegmentSyncs(b)
        check(not syncs.unavailable, "the guest kernel has no tracefs: the fdatasync cadence cannot be checked")
        check(syncs.clock_skew_ms is not None and 0 <= syncs.clock_skew_ms < 1000,
              f"trace clock tai vs the guest's realtime: {syncs.clock_skew_ms} ms (a marker written just after "
              f"reading the realtime must be stamped 0-1000 ms later)")
        check(len(syncs.intervals) >= 1 and syncs.durations_ms,
              f"{len(syncs.starts)} fdatasyncs of the segment seen before the cut: too few to check their cadence")

        r = self.boot("recover", "recover", disk, "edgerec.seconds=3", timeout=120).finish()
        r.expect_clean()
        before = [x for _, x in r.reports("before")]
        actives = [x for x in before if x.endswith(".mcap.active")]
        check(len(actives) == 1, f"after the cut the image held {before}, expected one .mcap.active")
        cut_session = actives[0].rsplit("/", 1)[0]
        after = [x for _, x in r.reports("after")]
        check(not any(x.endswith(".active") or x.endswith(".recovering") for x in after),
              f"still unfinished after start-up recovery: {after}")
        recovered_logs = [x for _, x in r.lines if "recovery:" in x and actives[0] in x]
        check(recovered_logs, f"edgerec logged no recovery of {actives[0]} at start\n{r.tail()}")
        rc, out = disk.fsck()
        check(rc == 0, f"e2fsck -fn after the recovery boot: rc {rc}: {out[-500:]}")

        bag = disk.rdump(cut_session, self.work / "pulled")
        segs = list(bag.glob("*.mcap"))
        check(len(segs) == 1 and not list(bag.glob("*.active")), f"cut session holds {os.listdir(bag)}")
        self.note(self.host.check_bag(bag))
        contents = bag_contents(bag)
        self.note(self.host.verify_bag(bag, report_from_bag(contents, dropped), self.work))

        # 1. The loss, against the guest's clock at the kill, per topic:
        # what the design allows (a sync at most sync_interval + one tick
        # after the last, a chunk held at most chunk_max_age, one message
        # period), plus the emulation lag measured at this cut (the guest's
        # longest stall since the topic's last kept message; the writer
        # behind its sources by more than a chunk's age at the last
        # statuses; the emulated disk's slowest fdatasync in this run), plus
        # one heartbeat period: a stall shorter than that hides inside a
        # normal heartbeat gap. None of the lag terms grows when a sync
        # comes late, so the lag cannot excuse one.
        sync_max_ms = max(syncs.durations_ms)
        status_s = last_status["time_unix_ns"] / 1e9
        # The writer's lag behind each source: messages accepted but not yet
        # handed to storage (queued, in the open chunk, compressing,
        # reordering), at the last two statuses before the cut, which are up
        # to about 2 s old by then (a snapshot a second, and `edgerec status`
        # itself is slow under TCG). Up to chunk_max_age of it is the design;
        # more means the emulated board fell behind its sources (the budget
        # absorbs that, and a power cut loses it).
        pending = {}
        for s in st[-2:]:
            for c in s["channels"]:
                pending[c["topic"]] = max(pending.get(c["topic"], 0), c["accepted"] - c["written"] - c["lost"])
        m = {"cut_guest_s": round(cut.cut_s, 3), "cut_after_recording_s": round(t_kill - t_rec, 2),
             "kill_s": round(t_kill - b.t0, 3),  # on the console log's time scale
             "heartbeat_ms": round(cut.period_ms), "staleness_ms": round(cut.staleness_ms),
             "host_gap_ms": round(cut.host_gap_ms), "console_ms": round(cut.console_ms),
             "last_status_before_cut_ms": round(1000 * (cut.cut_s - status_s)),
             "sync_ms_max": round(sync_max_ms), "topics": {}}
        worst = None
        for topic, hz in RATES.items():
            check(topic in contents, f"{topic}: nothing kept")
            last_s = contents[topic]["last"] / 1e9
            loss_ms = 1000 * (cut.cut_s - last_s)
            period_ms = 1000 / hz
            design_ms = self.SYNC_MS + self.AGE_MS + self.TICK_MS + period_ms
            writer_ms = 1000 * pending.get(topic, 0) / hz
            backlog_ms = max(0.0, writer_ms - self.AGE_MS)
            stall_ms = cut.stall_ms(last_s)
            lag_ms = stall_ms + backlog_ms + sync_max_ms
            bound_ms = design_ms + lag_ms + cut.period_ms
            t = {"loss_ms": round(loss_ms), "loss_vs_last_heartbeat_ms": round(loss_ms - cut.staleness_ms),
                 "design_ms": round(design_ms), "stall_ms": round(stall_ms), "writer_behind_ms": round(writer_ms),
                 "backlog_ms": round(backlog_ms), "sync_ms": round(sync_max_ms), "lag_ms": round(lag_ms),
                 "granularity_ms": round(cut.period_ms), "bound_ms": round(bound_ms),
                 "margin_ms": round(bound_ms - loss_ms)}
            m["topics"][topic] = t
            self.note(f"{topic}: {contents[topic]['count']} kept; lost {loss_ms:.0f} ms before the cut "
                      f"({loss_ms - cut.staleness_ms:.0f} before the last heartbeat + {cut.staleness_ms:.0f}); "
                      f"bound {bound_ms:.0f} = design {design_ms:.0f} + lag {lag_ms:.0f} (stall {stall_ms:.0f}, "
                      f"writer backlog {backlog_ms:.0f} of {writer_ms:.0f} behind, slowest sync {sync_max_ms:.0f}) "
                      f"+ heartbeat {cut.period_ms:.0f}; margin {bound_ms - loss_ms:.0f} ms")
            if worst is None or t["margin_ms"] < m["topics"][worst]["margin_ms"]:
                worst = topic

        # 2. The cadence: every fdatasync of the segment began at most
        # sync_interval + one tick after the one before, plus the guest's
        # stall in between and one heartbeat period. Unlike the loss, this
        # does not depend on where in the sync cycle the cut fell.
        cadence = []
        for a, b2 in syncs.intervals:
            allow = self.SYNC_MS + self.TICK_MS + cut.stall_ms(a, b2) + cut.period_ms
            cadence.append((1000 * (b2 - a), allow))
        late = max(cadence, key=lambda c: c[0] - c[1])
        m["sync_intervals_ms"] = [round(x) for x, _ in cadence]
        m["sync_cadence_worst"] = {"interval_ms": round(late[0]), "allowed_ms": round(late[1])}
        self.note(f"{len(syncs.starts)} fdatasyncs of the segment before the cut (guest kernel's trace): every "
                  f"{min(x for x, _ in cadence):.0f}..{max(x for x, _ in cadence):.0f} ms, each "
                  f"{min(syncs.durations_ms):.0f}..{sync_max_ms:.0f} ms long; closest to late: {late[0]:.0f} ms "
                  f"(allowed {late[1]:.0f} = sync_interval {self.SYNC_MS} + tick {self.TICK_MS} + stall "
                  f"{late[1] - self.SYNC_MS - self.TICK_MS - cut.period_ms:.0f} + heartbeat {cut.period_ms:.0f})")
        self.measures = m
        for topic, t in m["topics"].items():
            check(t["loss_ms"] <= t["bound_ms"],
                  f"{topic}: lost {t['loss_ms']} ms > bound {t['bound_ms']} ms (design {t['design_ms']} + "
                  f"lag {t['lag_ms']} + heartbeat {t['granularity_ms']})")
        check(late[0] <= late[1], f"an fdatasync came late: {late[0]:.0f} ms after the one before, allowed "
                                  f"{late[1]:.0f} ms (sync_interval {self.SYNC_MS} ms)")
        w = m["topics"][worst]
        return (f"loss {w['loss_ms']} ms ({worst}) <= bound {w['bound_ms']} = design {w['design_ms']} + lag "
                f"{w['lag_ms']} + heartbeat {w['granularity_ms']}, margin {w['margin_ms']} ms; syncs every "
                f"<= {max(x for x, _ in cadence):.0f} ms; seed {self.seed}")


class Watchdog(Scenario):
    name = "watchdog"
    what = ("i6300esb armed; SIGUSR2 stalls storage; reset; next boot reports the fault; 30 s healthy run; "
            "a start-up error after arming disarms it")
    TIMEOUT_S = 4
    # Not 1 s: the control stage beats once per 1 s tick, so a 1 s deadline
    # calls it stalled on ordinary jitter (seen here: "stage `control`
    # silent for 1006 ms", pings stopped, a fault file written).
    DEADLINE_S = 2
    # Emulation lag and the guest's console on top of the design bound.
    MARGIN_S = 3.0
    HEALTHY_S = 30

    def run(self):
        cfg = config(watchdog="/dev/watchdog0", watchdog_timeout=f"{self.TIMEOUT_S}s",
                     stage_deadline=f"{self.DEADLINE_S}s", extra=RETENTION)
        # Room for the 30 s healthy run at full rate (a sparse file: only
        # what is written takes space on the host).
        # A configuration that fails only after the watchdog is armed: the
        # PHC it names does not exist (step 4).
        bad = config(watchdog="/dev/watchdog0", watchdog_timeout=f"{self.TIMEOUT_S}s",
                     stage_deadline=f"{self.DEADLINE_S}s",
                     extra='[clock]\nsource = "phc"\nphc = "/dev/ptp7"\n')
        disk = Disk(self.work / "nvme.img", 4096, {"edgerec/edgerec.toml": cfg,
                                                   "edgerec/bad-clock.toml": bad})
        # 1. The stall and the reset.
        b = self.boot("stall", "watchdog-stall", disk, "edgerec.stall_after=4", timeout=120)
        t_stall, stall_line = b.wait_for("stall", 90)
        b.finish()
        check(not b.timed_out, f"no reset within {b.timeout} s\n{b.tail()}")
        check(not b.clean_end() and not any(x.startswith("@@ no-reset") for _, x in b.lines),
              f"the board was not reset\n{b.tail()}")
        check(not b.panicked(), f"kernel panic, not a watchdog reset\n{b.tail()}")
        boot_line = b.wait_for("boot", 0)[1]
        armed = [s for t, s in b.statuses() if t < t_stall]
        check(armed and armed[-1].get("watchdog") and armed[-1]["watchdog"].get("device"),
              f"the watchdog was not armed before the stall: {armed[-1].get('watchdog') if armed else None}")
        wd = armed[-1]["watchdog"]
        check(wd["timeout_s"] == self.TIMEOUT_S and wd["pings"] > 0, f"watchdog status {wd}")
        reset_s = b.t_exit - t_stall
        up_stall = float(field(stall_line, "uptime"))
        hbs = b.numbers("hb", 3)
        up_last = hbs[-1][1][2] if hbs else up_stall
        stalled = [s for t, s in b.statuses() if t > t_stall and (s.get("watchdog") or {}).get("stalled")]
        check(stalled and stalled[-1]["watchdog"]["stalled"][0]["name"] == "storage",
              f"the status never showed storage stalled: {[s.get('watchdog') for _, s in b.statuses()[-2:]]}")
        # The supervisor checks every timeout/4 and the device fires timeout
        # after the last keepalive.
        bound = self.DEADLINE_S + self.TIMEOUT_S / 4 + self.TIMEOUT_S + self.MARGIN_S
        self.note(f"reset {reset_s:.2f} s after the stall signal (host clock; the guest's last heartbeat "
                  f"{up_last - up_stall:.2f} s after it; bound {bound:.1f} s); device {wd['device']!r}")
        check(self.DEADLINE_S <= reset_s <= bound, f"reset {reset_s:.2f} s after the stall, outside "
                                                    f"[{self.DEADLINE_S}, {bound:.1f}] s")

        # 2. The next boot reports the fault.
        r = self.boot("report", "watchdog-report", disk, "edgerec.seconds=4", timeout=120).finish()
        r.expect_clean()
        check(any(x == "last-fault.json" for _, x in r.reports("before")), "no fault file after the reset")
        st = [s for _, s in r.statuses()]
        check(st and st[-1].get("last_fault"), f"status has no last_fault: {st[-1] if st else None}")
        lf = st[-1]["last_fault"]
        check(lf["stage"] == "storage", f"status last_fault names {lf['stage']!r}, not storage")
        data = disk.cat("/data/edgerec/last-fault.reported.json")
        check(data is not None, f"no last-fault.reported.json\n{disk.ls('/data/edgerec')}")
        check(not disk.exists("/data/edgerec/last-fault.json"), "last-fault.json still there after it was reported")
        fault = json.loads(data)
        check(fault["stage"] == "storage", f"fault file names {fault['stage']!r}")
        check(fault["boot_id"] == field(boot_line, "boot_id"),
              f"fault boot_id {fault['boot_id']} is not the stalled boot's {field(boot_line, 'boot_id')}")
        check(fault["silent_for_ms"] >= self.DEADLINE_S * 1000, f"fault silent_for_ms {fault['silent_for_ms']}")
        # The supervisor's decision, by the guest's own clock: after the
        # deadline, within a check period (timeout/4) of it.
        decided_s = (fault["at_unix_ns"] / 1000 - int(field(stall_line, "realtime_us"))) / 1e6
        latest = self.DEADLINE_S + self.TIMEOUT_S / 4 + self.MARGIN_S
        self.note(f"fault written {decided_s:.2f} s after the stall signal (guest clock; bound "
                  f"[{self.DEADLINE_S}, {latest:.2f}] s)")
        check(self.DEADLINE_S * 0.9 <= decided_s <= latest, f"fault decided {decided_s:.2f} s after the stall")
        self.note(f"fault file: stage {fault['stage']}, silent {fault['silent_for_ms']} ms, "
                  f"deadline {fault['deadline_ms']} ms: {fault['message']}")

        # 3. A healthy recording with the watchdog armed is not reset.
        h = self.boot("healthy", "watchdog-healthy", disk, f"edgerec.seconds={self.HEALTHY_S}", timeout=180).finish()
        h.expect_clean()
        hs = h.statuses()
        check(hs and all(s.get("watchdog") and s["watchdog"]["stalled"] == [] for _, s in hs),
              f"no watchdog, or a stage stalled, in the healthy run: {[s.get('watchdog') for _, s in hs[-1:]]}")
        pings = max(s["watchdog"]["pings"] for _, s in hs)
        check(pings > 0 and hs[-1][1]["watchdog"]["device"], f"watchdog not fed: {hs[-1][1]['watchdog']}")
        check(not disk.exists("/data/edgerec/last-fault.json"),
              f"the healthy run wrote a fault file: {disk.cat('/data/edgerec/last-fault.json')!r}")
        rep = json.loads(disk.cat("/data/edgerec/report.json") or b"null")
        check(rep and rep["seconds"] >= self.HEALTHY_S - 1, f"healthy run report {rep and rep['seconds']}")
        self.note(f"healthy run: {rep['seconds']:.0f} s recorded, {pings} keepalives, clean power-off, "
                  f"{rep['drops']} drops")

        # 4. A start-up error after the watchdog is armed disarms it: exit 78
        # (EX_CONFIG), then twice the timeout without a reset.
        wait_s = 2 * self.TIMEOUT_S
        e = self.boot("starterr", "watchdog-starterr", disk, f"edgerec.wait={wait_s}", timeout=90).finish()
        e.expect_clean(edgerec_ok=False)
        rcs = [x for _, x in e.reports("edgerec-exit")]
        check(rcs and rcs[-1].startswith("rc=78"), f"bad-clock.toml: edgerec exit {rcs}, not 78\n{e.tail()}")
        check(any(x.startswith("@@ no-reset") for _, x in e.lines), f"no @@ no-reset line\n{e.tail()}")
        self.note(f"start-up error after arming (clock.phc /dev/ptp7): exit 78, no reset in {wait_s} s")
        return (f"reset {reset_s:.1f} s after stall (bound {bound:.1f}); stage=storage reported; "
                f"{self.HEALTHY_S} s healthy: no reset; start-up error: disarmed")


class DiskFull(Scenario):
    name = "disk-full"
    what = "256 MiB NVMe, ballast then retention: pause, resume, oldest segments deleted, floor kept"
    DISK_MIB = 256
    FLOOR_MIB = 32
    # The guest records until AFTER_MIB more are written once the ballast
    # goes (more than twice the disk, with a margin for the status sampled
    # up to a second before the stop); SECONDS only caps a run that never
    # gets there, so a slow host makes the run longer, not the check false.
    AFTER_MIB = 2 * DISK_MIB + 64
    SECONDS = 150

    def run(self):
        cfg = config(extra=f"""
[storage]
preallocate = "4MiB"

[segment]
max_bytes = "16MiB"

[mcap]
chunk_size = "2MiB"

[retention]
min_free_bytes = "{self.FLOOR_MIB}MiB"
min_free_percent = 0
""")
        disk = Disk(self.work / "nvme.img", self.DISK_MIB, {"edgerec/edgerec.toml": cfg})
        b = self.boot("boot", "diskfull", disk, f"edgerec.seconds={self.SECONDS} edgerec.floor_mib={self.FLOOR_MIB} "
                      f"edgerec.after_mib={self.AFTER_MIB}", timeout=self.SECONDS + 150).finish()
        # edgerec's exit status last, after the figures are taken.
        b.expect_clean(edgerec_ok=False)
        paused = b.wait_for("paused", 0)[1]
        check(paused.startswith("@@ paused yes"), f"recording never paused with the ballast in place\n{b.tail()}")
        states = [s["state"] for _, s in b.statuses()]
        t_removed = b.wait_for("ballast-removed", 0)[0]
        before = [s for t, s in b.statuses() if t <= t_removed]
        after = [s for t, s in b.statuses() if t > t_removed + 2]
        check(before and after, "no status around the ballast's removal")
        check(before[-1]["storage"]["disk_full"] is not None or before[-1]["state"] == "disk-full"
              or any(s["state"] == "disk-full" for s in before), "the status never said disk-full during the pause")
        check(after[-1]["storage"]["disk_full"] is None and after[-1]["state"] != "disk-full",
              f"still paused after the space came back: {after[-1]['state']} {after[-1]['storage']['disk_full']}")
        resumed = after[-1]["storage"]["bytes_written"] - before[-1]["storage"]["bytes_written"]
        samples = b.numbers("df", 3)
        check(len(samples) > 10, "too few free-space samples")
        lowest = min(avail * bsize for _, (_up, avail, bsize) in samples)
        report = json.loads(disk.cat("/data/edgerec/report.json") or b"null")
        check(report, "no report.json")
        written_mib = report["bytes_written"] / MIB
        self.note(f"{written_mib:.0f} MiB written through the {self.DISK_MIB} MiB disk; lowest free "
                  f"{lowest / MIB:.1f} MiB in {len(samples)} samples (floor {self.FLOOR_MIB} MiB); "
                  f"states seen {sorted(set(states))}")
        check(lowest >= self.FLOOR_MIB * MIB, f"free space fell to {lowest / MIB:.1f} MiB < floor {self.FLOOR_MIB} MiB")
        check(resumed > 2 * self.DISK_MIB * MIB,
              f"only {resumed / MIB:.0f} MiB written after the pause: not past the disk's capacity")
        b.expect_edgerec_ok()
        bag = disk.rdump(report["session_dir"], self.work / "pulled")
        segs = sorted(bag.glob("*.mcap"), key=segment_index)
        idx = [segment_index(s) for s in segs]
        made = max(segment_index(Path(s["path"])) for s in report["segments"]) + 1
        check(idx and idx[0] > 0, f"no segment was deleted: {idx}")
        check(idx == list(range(idx[0], idx[0] + len(idx))) and idx[-1] == made - 1,
              f"kept segments {idx} are not the newest ones of {made}")
        self.note(self.host.check_bag(bag))
        contents = bag_contents(bag)
        # What the kept files lack of each sequence: the deleted segments'
        # messages and the drops (the pause) the recorder reported.
        missing_ok = {c["topic"]: c["written"] - contents.get(c["topic"], {"count": 0})["count"]
                      + c["dropped"] + c["lost"] for c in report["channels"]}
        self.note(self.host.verify_bag(bag, report_from_bag(contents, missing_ok), self.work))
        drops = report["drops"]
        check(drops > 0, "no drops counted during the pause")
        return (f"{written_mib:.0f} MiB through {self.DISK_MIB} MiB, lowest free {lowest / MIB:.1f} MiB "
                f"(floor {self.FLOOR_MIB}), segments {idx[0]}..{idx[-1]} of {made} kept, {drops} dropped in pause")


class GpioTrigger(Scenario):
    name = "gpio-trigger"
    what = "triggered mode, [[trigger]] on gpiochip0:3 (QEMU's power button on the PL061): one clip with pre/post"
    PRE_S = 1
    POST_S = 1
    RATE = 100
    # After "@@ recording": long enough for the pre-roll ring to hold PRE_S.
    PRESS_AFTER_S = 3

    def run(self):
        cfg = f"""# written by tests/qemu/run.py
[recording]
root = "/data/edgerec/recordings"
session_prefix = "qemu"
mode = "triggered"

[health]
watchdog = ""
fault_file = "/data/edgerec/last-fault.json"
status_socket = "/run/edgerec/status.sock"
{RETENTION}
[triggers]
pre = "{self.PRE_S}s"
post = "{self.POST_S}s"

[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = {self.RATE}

[[trigger]]
name = "button"
gpio = "gpiochip0:3"
edge = "rising"
"""
        disk = Disk(self.work / "nvme.img", 1024, {"edgerec/edgerec.toml": cfg})
        sock = self.work / "monitor.sock"
        b = self.boot("boot", "gpio-trigger", disk, timeout=150, monitor=sock)
        gpio = b.wait_for("gpio", 60)[1]
        if "chips=none" in gpio:
            b.finish()
            raise Skip(f"the board has no /dev/gpiochip* ({gpio}): the kernel lacks CONFIG_GPIO_PL061 or "
                       "CONFIG_GPIO_CDEV, so QEMU's power button line cannot be watched")
        b.wait_for("recording", 60)
        time.sleep(self.PRESS_AFTER_S)
        t_press = time.monotonic()
        b.monitor_command("system_powerdown")
        self.note(f"system_powerdown sent {self.PRESS_AFTER_S} s after recording began; {gpio[3:]}")
        b.finish()
        b.expect_clean()
        watching = [x for _, x in b.lines if "trigger button: watching gpiochip0:3" in x]
        check(watching, f"edgerec never said it watches gpiochip0:3\n{b.tail()}")
        self.note(re.sub(r"^.*?trigger button:", "edgerec: trigger button:", watching[0]))
        fired = [(t, x) for t, x in b.lines if "trigger button: gpio gpiochip0:3" in x]
        check(fired, f"no edge of gpiochip0:3 reached the recorder\n{b.tail()}")
        # The press to the recorder's log line on the console, host clock:
        # the kernel's 50 ms debounce, the watcher, the log and the console.
        latency_ms = 1000 * (fired[0][0] - t_press)
        self.note(f"press to 'trigger button' on the console: {latency_ms:.0f} ms")
        check(len(fired) == 1, f"{len(fired)} edges fired for one 100 ms press (debounce?): {fired}")
        clips = b.wait_for("clips", 0)[1]
        check(clips.startswith("@@ clips 1"), f"the status never counted a finished clip: {clips}\n{b.tail()}")
        events = disk.rdump("/data/edgerec/recordings/events", self.work / "pulled")
        dirs = sorted(p for p in events.iterdir() if p.is_dir())
        check([p.name.startswith("button_") for p in dirs] == [True],
              f"expected one button_* clip in events/, found {[p.name for p in dirs]}")
        clip = dirs[0]
        check((clip / "metadata.yaml").is_file(), f"{clip.name} has no metadata.yaml")
        mcaps = list(clip.glob("*.mcap"))
        check(len(mcaps) == 1, f"{clip.name} holds {[p.name for p in clip.iterdir()]}, not one .mcap")
        self.note(self.host.check_bag(clip))
        from mcap.reader import make_reader  # the .venv's pinned reader

        meta = {}
        times = []
        seqs = []
        with open(mcaps[0], "rb") as f:
            r = make_reader(f, validate_crcs=True)
            for m in r.iter_metadata():
                meta.setdefault(m.name, []).append(dict(m.metadata))
            f.seek(0)
            for _schema, channel, msg in make_reader(f, validate_crcs=True).iter_messages():
                if channel.topic == "/imu":
                    times.append(msg.log_time)
                    seqs.append(msg.sequence)
        ev = meta.get("edgerec.event", [])
        check(len(ev) == 1, f"{len(ev)} edgerec.event metadata records: {meta}")
        ev = ev[0]
        check(ev.get("rule") == "button", f"edgerec.event rule {ev.get('rule')!r}, not button")
        check(ev.get("reason") == "gpio gpiochip0:3 rising edge", f"edgerec.event reason {ev.get('reason')!r}")
        check(times, f"no /imu messages in {mcaps[0].name}")
        at = int(ev["trigger_time_ns"])
        span = (times[-1] - times[0]) / 1e9
        before = (at - times[0]) / 1e9
        after = (times[-1] - at) / 1e9
        gaps = sum(1 for a, b in zip(seqs, seqs[1:]) if b != a + 1)
        self.note(f"clip {clip.name}: /imu {len(times)} messages over {span:.2f} s, "
                  f"{before:.2f} s before the event and {after:.2f} s after; {gaps} sequence gaps; "
                  f"reason {ev['reason']!r}")
        want = self.PRE_S + self.POST_S
        # The ring keeps whole compressed blocks, so the clip may start a
        # block before event - pre; it must not start after it (a 100 ms
        # slack for the message period and the rounding of the ring).
        check(before >= self.PRE_S - 0.1, f"the clip starts {before:.2f} s before the event, not the {self.PRE_S} s pre")
        check(after >= self.POST_S - 0.1, f"the clip ends {after:.2f} s after the event, not the {self.POST_S} s post")
        check(span <= want + 1.0, f"the clip spans {span:.2f} s, far more than pre + post = {want} s")
        check(gaps == 0, f"{gaps} gaps in the /imu sequence of the clip")
        check(abs(len(times) - span * self.RATE) <= 2, f"{len(times)} messages in {span:.2f} s at {self.RATE} Hz")
        return (f"1 clip {clip.name}: /imu {span:.2f} s ({before:.2f} pre + {after:.2f} post), "
                f"{len(times)} msgs, rule=button, reason 'gpio gpiochip0:3 rising edge', press to log {latency_ms:.0f} ms")


def candump_frames(text):
    """{interface: [(time "SEC.USEC", frame)]} of a candump -L log, in its
    order (DROPCOUNT lines of candump -d left out, counted)."""
    out, drops = {}, 0
    for line in text.splitlines():
        if line.startswith("DROPCOUNT"):
            drops += 1
            continue
        f = line.split()
        if len(f) < 3 or not f[0].startswith("("):
            continue
        out.setdefault(f[1], []).append((f[0].strip("()"), f[2]))
    return out, drops


class Can(Scenario):
    name = "can"
    what = ("vcan0 (classic) and vcan1 (FD) flooded by cangen: the bag equals candump -L's log frame "
            "for frame; vcan0 down and up: its source restarts and records again")
    FRAMES = 20000
    FD_FRAMES = 10000

    def run(self):
        cfg = f"""# written by tests/qemu/run.py
[recording]
root = "/data/edgerec/recordings"
session_prefix = "qemu"

[health]
watchdog = ""
fault_file = "/data/edgerec/last-fault.json"
status_socket = "/run/edgerec/status.sock"

[sources]
restart_backoff_min = "200ms"
restart_backoff_max = "1s"
{RETENTION}
[[can]]
interface = "vcan0"

[[can]]
interface = "vcan1"
fd = true
"""
        disk = Disk(self.work / "nvme.img", 1024, {"edgerec/edgerec.toml": cfg})
        b = self.boot("boot", "can", disk,
                      f"edgerec.can_frames={self.FRAMES} edgerec.can_fd_frames={self.FD_FRAMES}", timeout=240)
        b.finish()
        setup = [x for _, x in b.reports("can-setup")]
        if setup:
            raise Skip(f"the board could not make vcan interfaces ({setup[0]}): the kernel lacks vcan")
        b.expect_clean()
        links = b.wait_for("can-links", 0)[1]
        check("vcan1 mtu=72" in links, f"vcan1 is not FD-capable: {links}")
        gen = b.wait_for("cangen", 0)[1]
        t0, t1 = float(field(gen, "start")), float(field(gen, "end"))
        rate = (self.FRAMES + self.FD_FRAMES) / max(t1 - t0, 1e-3)
        self.note(f"cangen: {self.FRAMES} classic frames on vcan0 and {self.FD_FRAMES} mixed on vcan1 "
                  f"in {t1 - t0:.2f} s of guest time: {rate:,.0f} frames/s (emulated, TCG)")
        down = b.wait_for("can-down", 0)[1]
        check("restarting" in down.split(), f"vcan0 down: the source did not restart: {down}\n{b.tail()}")
        up = b.wait_for("can-up", 0)[1]
        check(" running" in up, f"vcan0 up again: the source did not record again: {up}\n{b.tail()}")
        degraded = [s for _, s in b.statuses()
                    if any("source can vcan0 restarting" in r for r in s.get("reasons", []))]
        check(degraded, "no status while vcan0 was down said 'degraded: source can vcan0 restarting'")
        check(degraded[0]["state"] == "degraded", f"state {degraded[0]['state']} while vcan0 was down")
        self.note(f"vcan0 down: status {degraded[0]['state']}: {degraded[0]['reasons']}")
        report = json.loads(disk.cat("/data/edgerec/report.json") or b"null")
        check(report, "no /data/edgerec/report.json in the image")
        for c in report["channels"]:
            if c["topic"].startswith("/can/"):
                check(c["dropped"] == 0 and c["lost"] == 0 and c["upstream_lost"] == 0,
                      f"{c['topic']}: dropped {c['dropped']}, lost {c['lost']}, kernel drops {c['upstream_lost']}")
        bag = disk.rdump(report["session_dir"], self.work / "pulled")
        self.note(self.host.check_bag(bag))
        log = disk.cat("/data/can/candump.log")
        check(log is not None, "no /data/can/candump.log in the image")
        (self.work / "candump.log").write_bytes(log)
        theirs, drops = candump_frames(log.decode(errors="replace"))
        check(drops == 0, f"candump itself dropped frames ({drops} DROPCOUNT lines): the comparison needs all")
        exported = self.work / "exported.log"
        r = subprocess.run([self.host.edgerec, "export", "candump", str(bag), "-o", str(exported)],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"edgerec export candump: {r.stderr.strip()}")
        ours, _ = candump_frames(exported.read_text())
        # Per interface in order (candump reads its two sockets in turn, so
        # lines of the two interfaces interleave in its own order), times
        # to the microsecond.
        for iface in ("vcan0", "vcan1"):
            a, e = theirs.get(iface, []), ours.get(iface, [])
            if a != e:
                first = next((i for i, (x, y) in enumerate(zip(a, e)) if x != y), min(len(a), len(e)))
                raise Fail(f"{iface}: candump logged {len(a)} frames, the bag holds {len(e)}; first difference "
                           f"at {first}: candump {a[first:first + 2]} bag {e[first:first + 2]}")
        n0, n1 = len(theirs.get("vcan0", [])), len(theirs.get("vcan1", []))
        want0 = self.FRAMES + 4 + 500
        check(n0 == want0, f"vcan0: {n0} frames, cangen and cansend sent {want0}")
        check(n1 == self.FD_FRAMES, f"vcan1: {n1} frames, cangen sent {self.FD_FRAMES}")
        kinds = {"fd": sum(1 for _, f in ours["vcan1"] if "##" in f),
                 "extended": sum(1 for _, f in ours["vcan1"] if f.index("#") == 8),
                 "remote": sum(1 for _, f in ours["vcan0"] + ours["vcan1"] if "#R" in f),
                 "error": sum(1 for _, f in ours["vcan0"] if f.startswith("2000"))}
        check(all(kinds.values()), f"the mix lacks a kind of frame: {kinds}")
        self.note(f"frame for frame equal to candump -L: vcan0 {n0}, vcan1 {n1} ({kinds})")
        # An independent decoder of the bag (Python mcap + mcap_ros2).
        r = subprocess.run([self.host.python, str(REPO / "tests/py/verify_can_bag.py"), str(bag)],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"verify_can_bag.py: {r.stderr.strip()[-500:]}")
        check(r.stdout == exported.read_text(), "verify_can_bag.py decodes the bag differently from edgerec export")
        self.note("tests/py/verify_can_bag.py (mcap + mcap_ros2) decodes the bag to the same log")
        self.measures = {"cangen_frames_per_s": round(rate), "frames_vcan0": n0, "frames_vcan1": n1}
        return (f"{n0 + n1} frames equal to candump's log; cangen {rate:,.0f} frames/s emulated, 0 drops; "
                f"vcan0 down -> restarting (degraded) -> up -> recording")


class S3Store:
    """The fleet's store for the offload scenario: moto over TLS on this
    host's loopback (tests/py/s3peer.py serve, its certificate valid for
    10.0.2.2 too, the address the guest reaches it by), and boto3 against
    it through s3peer.client (the endpoint, CA and keys named, never an
    SDK default)."""

    BUCKET = "fleet-recordings"

    def __init__(self, work):
        import socket

        sys.path.insert(0, str(REPO / "tests/py"))
        import s3peer  # sets AWS_EC2_METADATA_DISABLED before boto3 loads

        self.KEY, self.SECRET = s3peer.KEY, s3peer.SECRET

        self.tls = Path(work) / "tls"
        self.tls.mkdir(parents=True, exist_ok=True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true"}
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "tests/py/s3peer.py"), "serve", "--port", str(self.port),
             "--tls", str(self.tls), "--san", "10.0.2.2"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            self.stop()
            raise Fail(f"s3peer.py serve did not start: {line!r} {self.proc.stderr.read()[-800:]}")
        os.environ["S3PEER_TLS_DIR"] = str(self.tls)
        self.s3 = s3peer.client(f"https://127.0.0.1:{self.port}")
        self.s3.create_bucket(Bucket=self.BUCKET)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()

    def pending(self):
        """{key: (upload id, [part numbers])} of the multipart uploads begun
        and neither completed nor aborted."""
        out = {}
        for u in self.s3.list_multipart_uploads(Bucket=self.BUCKET).get("Uploads", []):
            parts = self.s3.list_parts(Bucket=self.BUCKET, Key=u["Key"], UploadId=u["UploadId"]).get("Parts", [])
            out[u["Key"]] = (u["UploadId"], sorted(p["PartNumber"] for p in parts))
        return out

    def objects(self):
        keys = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.BUCKET):
            keys += [o["Key"] for o in page.get("Contents", [])]
        return keys

    def sha256(self, key):
        import hashlib

        body = self.s3.get_object(Bucket=self.BUCKET, Key=key)["Body"]
        h = hashlib.sha256()
        for chunk in iter(lambda: body.read(1 << 20), b""):
            h.update(chunk)
        return h.hexdigest()


class OffloadCut(Scenario):
    name = "offload-cut"
    what = ("[offload] to the host's S3 server (moto, TLS, through QEMU's user-mode network); power cut while "
            "a segment's multipart upload is half sent; after the reboot it goes on from the parts at the store, "
            "and every file of both boots is in the bucket, byte-identical (boto3)")
    VEHICLE = "board-1"
    # 16 MiB segments of 1 MiB images at 4 Hz (and the IMU): one every ~4 s.
    # 5 MiB parts (S3's smallest), one at a time, at 2 MB/s in the first
    # boot: each part takes ~2.6 s, so the harness sees one at the store
    # and cuts the power while the next is on the wire.
    SENSORS = """
[segment]
max_bytes = "16MiB"

[[sources.synthetic]]
topic = "/imu"
type = "sensor_msgs/msg/Imu"
rate = 200

[[sources.synthetic]]
topic = "/camera/image_raw"
type = "sensor_msgs/msg/Image"
rate = 4
payload_size = 1048576
"""

    def offload(self, port, extra):
        return f"""
[offload]
endpoint = "https://10.0.2.2:{port}"
ca_file = "/data/edgerec/offload/ca.pem"
credentials_file = "/data/edgerec/offload/credentials"
bucket = "{S3Store.BUCKET}"
vehicle_id = "{self.VEHICLE}"
journal_dir = "/data/edgerec/offload-journal"
upload = "all"
part_size = "5MiB"
concurrency = 1
{extra}"""

    def run(self):
        store = S3Store(self.work)
        try:
            return self.cut_and_resume(store)
        finally:
            store.stop()

    def cut_and_resume(self, store):
        base = config(extra=RETENTION).split("\n[[sources.synthetic]]", 1)[0]
        creds = (f"[default]\naws_access_key_id = {store.KEY}\naws_secret_access_key = {store.SECRET}\n", 0o600)
        files = {
            "edgerec/edgerec.toml": base + self.offload(store.port, 'max_rate = "2MB"\ndrain_on_stop = "0s"')
            + self.SENSORS,
            # The second boot: no cap, and time to send what is left.
            "edgerec/resume.toml": base + self.offload(store.port, 'drain_on_stop = "600s"') + self.SENSORS,
            "edgerec/offload/ca.pem": (store.tls / "ca.pem").read_text(),
            "edgerec/offload/credentials": creds,
        }
        disk = Disk(self.work / "nvme.img", 1024, files)

        # 1. Record and upload; cut the power once the guest logged a part
        # of a file sent (it logs that after the part's line in the
        # journal is on the disk) and before the file's last part.
        b = self.boot("cut", "offload-cut", disk, timeout=240, net=True)
        b.wait_for("net up", 60)
        t_rec, _ = b.wait_for("recording", 60)
        sent_re = re.compile(r"INFO edgerec_offload::upload: (\S+): part (\d+) of (\d+) sent")
        deadline = time.monotonic() + 150
        logged = None
        while time.monotonic() < deadline and b.t_exit is None and not logged:
            with b.cond:
                lines = [x for _, x in b.lines]
            for x in lines:
                m = sent_re.search(x)
                if m and int(m.group(2)) < int(m.group(3)):
                    logged = m
                    break
            time.sleep(0.05)
        check(logged, f"no file's upload logged a part sent within 150 s of recording\n{b.tail()}")
        t_kill = b.kill()
        key = logged.group(1)
        journaled = sorted({int(m.group(2)) for m in (sent_re.search(x) for _, x in b.lines)
                            if m and m.group(1) == key})
        pending = store.pending()
        check(key in pending, f"{key}: no open multipart upload at the store after the cut ({pending})")
        upload_id, parts = pending[key]
        check(set(journaled) <= set(parts), f"{key}: parts {journaled} logged sent, the store holds {parts}")
        done_before = store.objects()
        self.note(f"power cut {t_kill - t_rec:.1f} s after recording began, {key} half sent: parts "
                  f"{journaled} logged sent (journaled), {parts} at the store, of upload {upload_id[:12]}...; "
                  f"{len(done_before)} objects complete before")

        # 2. The next boot goes on with it, records a little and drains.
        r = self.boot("resume", "offload-resume", disk, "edgerec.seconds=4", timeout=600, net=True).finish()
        r.expect_clean()
        went_on = [x for _, x in r.lines if "going on with the upload cut before" in x and key in x]
        check(went_on, f"the second boot did not go on with the cut upload of {key}:\n"
                       + "\n".join(["    | " + x for _, x in r.lines if "offload" in x or key in x][-15:]))
        kept = int(re.search(r"\((\d+) of its parts at the store\)", went_on[0]).group(1))
        # Every part journaled before the cut is kept (not sent again); a
        # part the store acknowledged that the journal never recorded was
        # in flight, and is sent again.
        check(len(journaled) <= kept <= len(parts),
              f"{kept} parts kept from before the cut; {journaled} were journaled, the store held {parts}")
        left = store.pending()
        check(not left, f"multipart uploads left open at the store: {left}")

        # 3. Every file of both boots' sessions is in the bucket, the same bytes.
        pulled = disk.rdump("/data/edgerec/recordings", self.work / "pulled")
        import hashlib

        # A segment opened just before the cut may hold nothing yet:
        # recovery leaves it as it is (its log says so), and there is
        # nothing in it to send.
        empty = set(re.findall(r"recovery: /data/edgerec/recordings/(\S+\.active): NOTHING RECOVERABLE",
                               "\n".join(x for _, x in r.lines)))
        local = {}
        for f in sorted(pulled.rglob("*")):
            rel = f.relative_to(pulled)
            if f.is_file() and str(rel) not in empty:
                local[f"{self.VEHICLE}/{rel}"] = hashlib.sha256(f.read_bytes()).hexdigest()
        if empty:
            self.note(f"left by recovery, nothing recoverable in it (opened just before the cut): {sorted(empty)}")
        sessions = {k.split("/")[1] for k in local}
        check(len(sessions) == 2, f"expected the two boots' sessions on the disk, found {sorted(sessions)}")
        objects = set(store.objects())
        missing = sorted(set(local) - objects)
        check(not missing, f"files not in the bucket after the drain: {missing}")
        extra = sorted(k for k in objects - set(local) if not k.endswith("/manifest.json"))
        check(not extra, f"objects in the bucket that no file on the disk matches: {extra}")
        differ = [k for k in sorted(local) if store.sha256(k) != local[k]]
        check(not differ, f"objects whose bytes differ from the file on the disk: {differ}")
        manifests = sorted(k for k in objects if k.endswith("/manifest.json"))
        self.note(f"after the reboot: {key} went on with {kept} of its parts kept; {len(local)} files of "
                  f"{len(sessions)} sessions in the bucket, byte-identical; {len(manifests)} session manifests")
        return (f"cut with {key.rsplit('/', 1)[1]} at parts {parts}; went on keeping {kept}; "
                f"{len(local)} files byte-identical at the store")


SCENARIOS = [Record, PowerCut, Watchdog, DiskFull, GpioTrigger, Can, OffloadCut]


def main():
    global BOARD
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated scenario names")
    ap.add_argument("--seed", type=int, default=None, help="power-cut seed (default: random, printed)")
    ap.add_argument("--keep", action="store_true", help="keep disk images and pulled bags of passing scenarios")
    ap.add_argument("--work", default=str(REPO / "target/qemu-test"))
    ap.add_argument("--board", default=str(BOARD), help="the built board (image/qemu/build --out)")
    ap.add_argument("--edgerec", default=str(REPO / "target/release/edgerec"), help="host edgerec for check")
    ap.add_argument("--json", default="", help="write the results here too")
    ap.add_argument("--camera-hz", type=int, default=RATES["/camera/image_raw"],
                    help="rate of the 1 MiB image stream (default %(default)s)")
    a = ap.parse_args()
    RATES["/camera/image_raw"] = a.camera_hz
    BOARD = Path(a.board)
    for f in ("Image", "initrd.gz"):
        if not (BOARD / f).exists():
            sys.exit(f"run.py: no {BOARD / f}: run image/qemu/build first (scripts/qemu-test does)")
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 32)
    host = Host(a.edgerec, sys.executable)
    only = [x for x in a.only.split(",") if x]
    unknown = set(only) - {s.name for s in SCENARIOS}
    if unknown:
        sys.exit(f"run.py: no scenario {sorted(unknown)}; there are {[s.name for s in SCENARIOS]}")
    manifest = json.loads((BOARD / "manifest.json").read_text())
    log(f"board: {manifest['kernel_package']} {manifest['kernel_package_version']}, "
        f"busybox-static {manifest['busybox_static_version']}, edgerec {manifest['edgerec_sha256'][:12]} "
        f"({manifest['edgerec_features']}); qemu TCG, seed {seed}")
    results = []
    t_all = time.monotonic()
    for cls in SCENARIOS:
        if only and cls.name not in only:
            continue
        s = cls(a.work, host, seed)
        t = time.monotonic()
        result = None
        try:
            figure = s.run()
            ok = True
        except Skip as e:
            ok, result, figure = True, "SKIP", str(e)
        except Fail as e:
            ok, figure = False, str(e)
        except Exception:  # a harness bug or a missing file: a failure with its trace
            ok, figure = False, traceback.format_exc()
        finally:
            for b in s.boots:
                if b.proc.poll() is None:
                    b.proc.kill()
                    b.proc.wait()
        secs = time.monotonic() - t
        result = result or ("PASS" if ok else "FAIL")
        log(f"{s.name}: {result} in {secs:.0f} s: {figure}")
        if ok and not a.keep:
            for p in list(s.work.glob("*.img")) + [s.work / "pulled"]:
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        results.append({"scenario": s.name, "result": result, "figure": figure,
                        "seconds": round(secs, 1), "boots": len(s.boots), "notes": s.notes, "what": s.what,
                        "measures": getattr(s, "measures", None)})
    total = time.monotonic() - t_all
    print()
    w = max(len(r["scenario"]) for r in results)
    print(f"{'scenario':<{w}}  result  time   key figure")
    for r in results:
        first = r["figure"].splitlines()[0] if r["figure"] else ""
        print(f"{r['scenario']:<{w}}  {r['result']:<6}  {r['seconds']:>4.0f}s  {first}")
    print(f"{'camera':<{w}}  n/a        -   the board's binary is static and built without cameras (Debian ships no static GStreamer); cameras are tested on the host and under qemu-user")
    print(f"total {total:.0f} s on {os.cpu_count()} host cores, TCG; work files in {a.work}")
    for r in results:
        if r["result"] == "FAIL":
            print(f"\n{r['scenario']} FAILED:\n{r['figure']}")
    if a.json:
        Path(a.json).write_text(json.dumps({"seed": seed, "seconds": round(total, 1), "manifest": manifest,
                                            "results": results}, indent=2))
    sys.exit(0 if all(r["result"] in ("PASS", "SKIP") for r in results) else 1)


if __name__ == "__main__":
    main()
