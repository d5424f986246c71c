#!/usr/bin/env python3
"""ext4 or XFS for the data partition: measured on the emulated aarch64
board (scripts/qemu-fsbench; not part of scripts/test: a benchmark, not a
test).

Each round boots the board (image/qemu/build --fsbench: the usual board
plus a static fio and the xfs module) once on an ext4 data disk made with
the appliance's mkfs options (board/jetson-agx-orin/systemd/
data-makefs.service) and once on XFS (mkfs.xfs defaults), both mounted
`noatime,lazytime` as /data is on the Orin, in alternating order. In each
boot (tests/qemu/guest/fsbench.sh) fio writes the way edgerec does
(sequential 1 MiB O_DIRECT io_uring writes at depth 8, fdatasync every
32 MiB; into a preallocated file, then into a growing one), then edgerec
records the synthetic sensors at a rate above what the board sustains, and
`edgerec check` (in the guest) validates every segment it wrote.

Prints per metric the median over the rounds of each file system, their
range, and the XFS/ext4 ratio of the medians. The emulated NVMe under TCG
is a CPU-bound stand-in for the Orin's drive: what this compares is the
two file systems' write paths on an aarch64 kernel, not the drive.

usage: fsbench.py [--rounds N] [--fio-seconds S] [--seconds S]
                  [--camera-hz N] [--board DIR] [--work DIR] [--json FILE]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as q  # noqa: E402  (the QEMU harness: Boot, config, check)

MIB = 1 << 20
MOUNT_OPTS = "noatime,lazytime"
# data-makefs.service's mkfs.ext4, less its discard (an image file).
MKFS = {
    "ext4": ["mkfs.ext4", "-q", "-F", "-m", "0", "-i", "1048576", "-E",
             "lazy_itable_init=0,lazy_journal_init=0,nodiscard", "-L", "DATA"],
    "xfs": ["mkfs.xfs", "-q", "-f", "-K", "-L", "DATA"],
}


class FsDisk:
    """A data-disk image of either file system holding edgerec.toml; Boot
    only needs .path."""

    def __init__(self, path, size_mib, fstype, toml):
        self.path = Path(path)
        stage = self.path.with_suffix(".stage")
        shutil.rmtree(stage, ignore_errors=True)
        (stage / "edgerec").mkdir(parents=True)
        (stage / "edgerec/edgerec.toml").write_text(toml)
        self.path.unlink(missing_ok=True)
        with open(self.path, "wb") as f:
            f.truncate(size_mib * MIB)
        if fstype == "ext4":
            q.sh(MKFS["ext4"] + ["-d", str(stage), str(self.path)])
        else:
            # mkfs.xfs -p: a protofile (mkfs.xfs(8)) lays the tree out.
            proto = self.path.with_suffix(".proto")
            proto.write_text("/dev/null\n0 0\nd--755 0 0\nedgerec d--755 0 0\n"
                             f"edgerec.toml ---644 0 0 {stage / 'edgerec/edgerec.toml'}\n$\n$\n")
            q.sh(MKFS["xfs"] + ["-p", str(proto), str(self.path)])
            proto.unlink()
        shutil.rmtree(stage)


def fio_figures(job, data):
    """MB/s, write completion p99 (ms) and fdatasync p99 (ms) of one fio
    job's JSON."""
    j = data["jobs"][0]
    w = j["write"]
    out = {f"fio {job} MB/s": w["bw_bytes"] / 1e6}
    pct = (w.get("clat_ns") or {}).get("percentile") or {}
    if "99.000000" in pct:
        out[f"fio {job} write p99 ms"] = pct["99.000000"] / 1e6
    spct = (j.get("sync", {}).get("lat_ns") or {}).get("percentile") or {}
    if "99.000000" in spct:
        out[f"fio {job} fdatasync p99 ms"] = spct["99.000000"] / 1e6
    return out


def one_boot(work, fstype, rnd, a):
    name = f"{fstype}-{rnd}"
    toml = q.config(extra=q.RETENTION + q.RT)
    disk = FsDisk(work / f"{name}.img", 4096, fstype, toml)
    args = (f"edgerec.fstype={fstype} edgerec.mountopts={MOUNT_OPTS} edgerec.fio_seconds={a.fio_seconds} "
            f"edgerec.seconds={a.seconds}")
    q.log(f"boot {name} ({args})")
    b = q.Boot(name, "fsbench", disk, work, args, timeout=120 + 3 * a.fio_seconds + 3 * a.seconds).finish()
    b.expect_clean(edgerec_ok=True)
    mounted = [x for _, x in b.reports("fs")]
    q.check(mounted and f" {fstype} " in mounted[0], f"{name}: /data is not {fstype}: {mounted}")
    fig = {}
    failed = [x for _, x in b.reports("fio-failed")]
    q.check(not failed, f"{name}: fio failed: {failed}")
    for _, x in b.reports("fio"):
        job, _, text = x.partition(" ")
        fig.update(fio_figures(job, json.loads(text)))
    q.check(len([k for k in fig if k.endswith("MB/s")]) == 2, f"{name}: fio printed {sorted(fig)}")
    reports = [x for _, x in b.reports("report")]
    q.check(reports, f"{name}: edgerec printed no report")
    rep = json.loads(reports[-1])
    q.check(rep["backend"] == "io_uring+O_DIRECT", f"{name}: edgerec backend {rep['backend']}")
    chk = [x for _, x in b.reports("check")]
    q.check(chk and chk[0].startswith("rc=0 "), f"{name}: edgerec check in the guest: {chk}")
    offered = sum(c["written"] + c["dropped"] for c in rep["channels"])
    fig["edgerec MB/s"] = rep["bytes_written"] / rep["seconds"] / 1e6
    fig["edgerec dropped %"] = 100.0 * sum(c["dropped"] for c in rep["channels"]) / max(offered, 1)
    q.log(f"{name}: " + ", ".join(f"{k} {v:.1f}" for k, v in fig.items()) + f"; check: {chk[0][:60]}")
    if not a.keep:
        disk.path.unlink(missing_ok=True)
    return fig


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fio-seconds", type=int, default=15)
    ap.add_argument("--seconds", type=int, default=20, help="edgerec's recording per boot")
    ap.add_argument("--camera-hz", type=int, default=100,
                    help="rate of the 1 MiB image stream (default %(default)s: above what the board sustains)")
    ap.add_argument("--board", default=str(q.REPO / "image/qemu/out-fsbench"))
    ap.add_argument("--work", default=str(q.REPO / "target/qemu-fsbench"))
    ap.add_argument("--keep", action="store_true", help="keep the disk images")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    q.BOARD = Path(a.board)
    q.RATES["/camera/image_raw"] = a.camera_hz
    manifest = json.loads((q.BOARD / "manifest.json").read_text())
    if not manifest.get("fio_version"):
        sys.exit(f"fsbench.py: the board in {q.BOARD} has no fio: build it with image/qemu/build --fsbench")
    work = Path(a.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    q.log(f"board: {manifest['kernel_package']} {manifest['kernel_package_version']}, fio "
          f"{manifest['fio_version']}; {a.rounds} rounds; camera {a.camera_hz} Hz; qemu TCG")
    t0 = time.monotonic()
    runs = {"ext4": [], "xfs": []}
    for rnd in range(1, a.rounds + 1):
        order = ("ext4", "xfs") if rnd % 2 else ("xfs", "ext4")
        for fs in order:
            try:
                runs[fs].append(one_boot(work, fs, rnd, a))
            except q.Fail as e:
                sys.exit(f"fsbench.py: round {rnd} on {fs}: {e}")
    keys = [k for k in runs["ext4"][0] if all(k in r for rs in runs.values() for r in rs)]
    print()
    print(f"{'metric':<28} {'ext4 median (range)':>24} {'xfs median (range)':>24} {'xfs/ext4':>9}")
    table = []
    for k in keys:
        row = {"metric": k}
        cells = []
        for fs in ("ext4", "xfs"):
            v = [r[k] for r in runs[fs]]
            row[fs] = {"median": statistics.median(v), "min": min(v), "max": max(v), "all": v}
            cells.append(f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})")
        e, x = row["ext4"]["median"], row["xfs"]["median"]
        row["ratio"] = x / e if e else None
        table.append(row)
        print(f"{k:<28} {cells[0]:>24} {cells[1]:>24} {(f'{x / e:.2f}' if e else '-'):>9}")
    print(f"{a.rounds} rounds, {time.monotonic() - t0:.0f} s on {os.cpu_count()} host cores (TCG); "
          f"mount {MOUNT_OPTS}; ext4: {' '.join(MKFS['ext4'][1:])}; xfs: {' '.join(MKFS['xfs'][1:])}")
    if a.json:
        Path(a.json).write_text(json.dumps({"manifest": manifest, "rounds": a.rounds, "table": table,
                                            "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
