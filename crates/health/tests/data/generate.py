#!/usr/bin/env python3
"""Writes the fixture trees orin-sys/ and orin-proc/ (see README.md).

Run from anywhere: python3 crates/health/tests/data/generate.py
The numbers are chosen so the tests can check the arithmetic by hand;
the layout mirrors a Jetson AGX Orin devkit on JetPack 5/6 (L4T R35/R36).
Symlinks (class/devfreq, class/nvme, class/hwmon, dev/block) are not
stored: tests/metrics.rs makes them in a temporary copy, because
dev/block/<major>:<minor> must name the test directory's real st_dev.
"""
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
SYS = os.path.join(HERE, "orin-sys")
PROC = os.path.join(HERE, "orin-proc")

# nvgpu's device and its devfreq node (JetPack 5 name; JetPack 6 may call
# it 17000000.gpu with of_node name "gpu", which the collector also takes).
GPU = "devices/platform/17000000.ga10b"
# The devkit's M.2 Key M slot hangs off PCIe controller C4 (14160000.pcie).
NVME = "devices/platform/bus@0/14160000.pcie/pci0004:00/0004:00:00.0/0004:01:00.0/nvme/nvme0"
INA = "devices/platform/bus@0/c240000.i2c/i2c-1/1-0040/hwmon/hwmon0"

THERMAL = [  # (type, millidegC); cv1/cv2 power-gated read -256000
    ("cpu-thermal", 46437), ("gpu-thermal", 44812), ("cv0-thermal", 45218),
    ("cv1-thermal", -256000), ("cv2-thermal", -256000),
    ("soc0-thermal", 43500), ("soc1-thermal", 44093), ("soc2-thermal", 42750),
    ("tj-thermal", 46437),
]

CPUS = 12
# Aggregate cpu line: user nice system idle iowait irq softirq steal guest guest_nice
STAT_1 = [1_000_000, 2_000, 300_000, 10_000_000, 50_000, 0, 8_000, 0, 0, 0]
# One second later on 12 CPUs at USER_HZ 100: 1200 jiffies, of which
# user +300, system +130, softirq +20 busy (450) and idle +690, iowait +60:
# cpu.load = 450 / 1200 = 37.5 %.
DELTA = [300, 0, 130, 690, 60, 0, 20, 0, 0, 0]
STAT_2 = [a + d for a, d in zip(STAT_1, DELTA)]

# diskstats sectors written (field 10) of nvme0n1p1; +409600 sectors of 512
# bytes in one second = 209715200 B/s (200 MiB/s).
SECTORS_1 = 73_521_680
SECTORS_2 = SECTORS_1 + 409_600


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", newline="") as f:
        f.write(text)


def stat(total):
    per_cpu = [[v // CPUS for v in total] for _ in range(CPUS)]
    for i, v in enumerate(total):  # remainders on cpu0 so the lines add up
        per_cpu[0][i] += v - sum(c[i] for c in per_cpu)
    lines = ["cpu  " + " ".join(map(str, total))]
    lines += [f"cpu{n} " + " ".join(map(str, c)) for n, c in enumerate(per_cpu)]
    lines += ["intr 912345678 0 0 0", "ctxt 1234567890", "btime 1764690000",
              "processes 45678", "procs_running 3", "procs_blocked 0",
              "softirq 23456789 0 1234 5 6789 0 0 12 3456 0 7890"]
    return "\n".join(lines) + "\n"


def diskstats(sectors):
    # 5.15 format: 20 fields (reads, merges, sectors, ms; writes ...; in
    # flight, io ms, weighted ms; discards ...; flushes ...).
    rows = [
        (7, 0, "loop0", "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0"),
        (179, 0, "mmcblk0", f"1830 412 210422 1201 20 3 184 31 0 1540 1232 0 0 0 0 0 0"),
        (179, 1, "mmcblk0p1", f"1702 412 201822 1150 20 3 184 31 0 1480 1181 0 0 0 0 0 0"),
        (259, 0, "nvme0n1", f"5230 120 912344 1830 88412 9120 {sectors + 96} 402210 0 160320 404040 0 0 0 0 412 1930"),
        (259, 1, "nvme0n1p1", f"5102 120 908120 1810 88400 9120 {sectors} 402200 0 160300 404010 0 0 0 0 0 0"),
        (252, 0, "zram0", "402 0 3216 2 0 0 0 0 0 4 2 0 0 0 0 0 0"),
    ]
    return "".join(f"{ma:4d} {mi:7d} {name} {rest}\n" for ma, mi, name, rest in rows)


def main():
    for root in (SYS, PROC):
        shutil.rmtree(root, ignore_errors=True)
    write(SYS, f"{GPU}/of_node/name", "ga10b\0")  # device-tree strings end in NUL
    write(SYS, f"{GPU}/load", "537\n")  # per-mille: 53.7 %
    write(SYS, f"{GPU}/devfreq/17000000.ga10b/cur_freq", "306000000\n")
    write(SYS, f"{GPU}/devfreq/17000000.ga10b/governor", "nvhost_podgov\n")
    for n, (kind, temp) in enumerate(THERMAL):
        write(SYS, f"devices/virtual/thermal/thermal_zone{n}/type", kind + "\n")
        write(SYS, f"devices/virtual/thermal/thermal_zone{n}/temp", f"{temp}\n")
    write(SYS, f"{NVME}/hwmon1/name", "nvme\n")
    write(SYS, f"{NVME}/hwmon1/temp1_input", "38850\n")
    write(SYS, f"{NVME}/nvme0n1/uevent", "MAJOR=259\nMINOR=0\nDEVNAME=nvme0n1\nDEVTYPE=disk\n")
    write(SYS, f"{NVME}/nvme0n1/nvme0n1p1/uevent",
          "MAJOR=259\nMINOR=1\nDEVNAME=nvme0n1p1\nDEVTYPE=partition\nPARTN=1\n")
    write(SYS, f"{NVME}/nvme0n1/nvme0n1p1/partition", "1\n")
    write(SYS, f"{INA}/name", "ina3221\n")  # a hwmon that is not the NVMe

    write(PROC, "stat", stat(STAT_1))
    write(PROC, "next/stat", stat(STAT_2))
    write(PROC, "diskstats", diskstats(SECTORS_1))
    write(PROC, "next/diskstats", diskstats(SECTORS_2))
    # 32 GB module (P3701-0000): MemTotal below 32 GiB because of carve-outs.
    write(PROC, "meminfo", "".join(f"{k + ':':<15}{v:>9} kB\n" for k, v in [
        ("MemTotal", 31330036), ("MemFree", 25214400), ("MemAvailable", 27000000),
        ("Buffers", 61236), ("Cached", 2101480), ("SwapCached", 0),
        ("Active", 1421600), ("Inactive", 2304012), ("SwapTotal", 15665008),
        ("SwapFree", 15665008), ("Dirty", 1024), ("Shmem", 40092),
        ("CmaTotal", 524288), ("CmaFree", 480212),
    ]))


if __name__ == "__main__":
    main()
