"""Tests of scripts/flash against a fake tegraflash package and a fake USB
sysfs: its refusals (no board in recovery mode, two boards, a package for
another machine or chip, a layout without DATA, a declined answer) must
name the problem and run nothing; an accepted flash must run the
package's initrd-flash in the package's directory with the arguments
given. The fake initrd-flash only records how it was called.

    scripts/yocto-check --self-test
"""

import os
import shutil
import subprocess
import tarfile
import tempfile
import unittest

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FLASH = os.path.join(REPO, "scripts", "flash")
LAYOUT = os.path.join(REPO, "yocto", "meta-edgerec", "dynamic-layers", "meta-tegra", "recipes-bsp",
                      "tegra-binaries", "tegra-storage-layout-base", "edgerec-flash_l4t_t234_nvme.xml")

ENV = """FLASH_HELPER=tegra-flash-helper.sh
BOOTDEV="nvme0n1p1"
ROOTFS_DEVICE="nvme0n1"
CHIPID="{chip}"
MACHINE="{machine}"
DEFAULTS[BOARDID]="3701"
DEFAULTS[FAB]="300"
DEFAULTS[CHIPREV]=""
DEFAULTS[BOARDSKU]="0000"
DEFAULTS[BOARDREV]=""
LNXFILE="boot.img"
ROOTFS_IMAGE="edgerec-image.ext4"
DATAFILE=""
EXTERNAL_ROOTFS_DRIVE=1
NO_INTERNAL_STORAGE=0
"""

FAKE_FLASHER = """#!/bin/sh
# records how scripts/flash called it
{ pwd; for a in "$@"; do echo "arg $a"; done; } > "$FLASH_CALLED"
"""


class FlashTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="flash-test-")
        self.root = self.tmp.name
        self.pkg = os.path.join(self.root, "pkg")
        os.makedirs(self.pkg)
        self.write_env()
        with open(os.path.join(self.pkg, "initrd-flash"), "w", encoding="utf-8") as f:
            f.write(FAKE_FLASHER)
        os.chmod(os.path.join(self.pkg, "initrd-flash"), 0o755)
        shutil.copy(LAYOUT, os.path.join(self.pkg, "external-flash.xml.in"))
        self.usb = os.path.join(self.root, "usb")
        os.makedirs(self.usb)
        self.add_usb("1-1", "1d6b", "0002")  # a root hub: not a Jetson
        self.called = os.path.join(self.root, "called")

    def tearDown(self):
        self.tmp.cleanup()

    def write_env(self, machine="jetson-agx-orin-devkit", chip="0x23"):
        with open(os.path.join(self.pkg, ".env.initrd-flash"), "w", encoding="utf-8") as f:
            f.write(ENV.format(machine=machine, chip=chip))

    def add_usb(self, path, vid, pid):
        d = os.path.join(self.usb, path)
        os.makedirs(d)
        for name, value in (("idVendor", vid), ("idProduct", pid)):
            with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                f.write(value + "\n")

    def flash(self, *args, answer=None):
        env = dict(os.environ, EDGEREC_FLASH_USB_SYSFS=self.usb, FLASH_CALLED=self.called)
        if answer is not None:
            env["EDGEREC_FLASH_ASSUME_TTY"] = "1"
        return subprocess.run([FLASH, *args], input=answer if answer is not None else "",
                              capture_output=True, text=True, env=env, check=False)

    def flashed(self):
        if not os.path.exists(self.called):
            return None
        with open(self.called, encoding="utf-8") as f:
            return f.read().splitlines()

    def assertRefused(self, proc, rc, *words):
        self.assertEqual(proc.returncode, rc, proc.stdout + proc.stderr)
        for w in words:
            self.assertIn(w, proc.stderr)
        self.assertIsNone(self.flashed(), "initrd-flash ran although the flash was refused")

    def test_no_board_in_recovery_mode(self):
        self.assertRefused(self.flash("--yes", self.pkg), 3, "no board in recovery mode", "0955:7023",
                           "Force Recovery")

    def test_two_boards_need_usb_instance(self):
        self.add_usb("1-3", "0955", "7023")
        self.add_usb("2-1", "0955", "7023")
        self.assertRefused(self.flash("--yes", self.pkg), 3, "2 boards", "--usb-instance")
        self.assertRefused(self.flash("--yes", "--usb-instance", "3-9", self.pkg), 3, "3-9")
        proc = self.flash("--yes", "--usb-instance", "2-1", self.pkg)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(self.flashed()[1:], ["arg --usb-instance", "arg 2-1"])

    def test_package_for_another_machine_or_chip(self):
        self.add_usb("1-3", "0955", "7023")
        self.write_env(machine="jetson-orin-nano-devkit")
        self.assertRefused(self.flash("--yes", self.pkg), 1, 'MACHINE="jetson-orin-nano-devkit"',
                           "not jetson-agx-orin-devkit")
        self.write_env(chip="0x19")
        self.assertRefused(self.flash("--yes", self.pkg), 1, "0x19", "T234")

    def test_layout_without_data_partition(self):
        self.add_usb("1-3", "0955", "7023")
        path = os.path.join(self.pkg, "external-flash.xml.in")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace('name="DATA"', 'name="UDA"'))
        self.assertRefused(self.flash("--yes", self.pkg), 1, "no DATA partition after APP", "UDA")

    def test_declined_answer_flashes_nothing(self):
        self.add_usb("1-3", "0955", "7023")
        proc = self.flash(self.pkg, answer="yes\n")
        self.assertRefused(proc, 1, 'answer was "yes"')
        self.assertIn('type "erase"', proc.stdout)
        # Without a terminal and without --yes it does not ask at all.
        proc = self.flash(self.pkg)
        self.assertRefused(proc, 1, "--yes")

    def test_dry_run_prints_the_plan_and_flashes_nothing(self):
        self.add_usb("1-3", "0955", "7023")
        proc = self.flash("--dry-run", self.pkg)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        for want in ("USB 0955:7023 at 1-3", "MACHINE=jetson-agx-orin-devkit", "CHIPID=0x23",
                     "DATA", "grows to the end", "APP", "initrd-flash", "treat", "dry run"):
            self.assertIn(want, proc.stdout)
        self.assertIsNone(self.flashed())

    def test_accepted_flash_runs_initrd_flash_in_the_package(self):
        self.add_usb("1-3", "0955", "7023")
        proc = self.flash(self.pkg, "--", "--erase-nvme", answer="erase\n")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        called = self.flashed()
        self.assertEqual(os.path.realpath(called[0]), os.path.realpath(self.pkg))
        self.assertEqual(called[1:], ["arg --erase-nvme"])

    def test_tarball_is_unpacked_beside_it(self):
        self.add_usb("1-3", "0955", "7023")
        tarball = os.path.join(self.root, "edgerec-image-jetson-agx-orin-devkit.tegraflash.tar.gz")
        with tarfile.open(tarball, "w:gz") as t:
            for name in os.listdir(self.pkg):
                t.add(os.path.join(self.pkg, name), arcname=name)
        proc = self.flash("--yes", tarball)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        unpacked = os.path.join(self.root, "edgerec-image-jetson-agx-orin-devkit.tegraflash")
        self.assertEqual(os.path.realpath(self.flashed()[0]), os.path.realpath(unpacked))
        os.remove(self.called)
        self.assertRefused(self.flash("--yes", os.path.join(self.root, "image.tar.gz")), 2, "no such file")


if __name__ == "__main__":
    unittest.main()
