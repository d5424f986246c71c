"""Negative tests of scripts/yocto-check: each breaks one thing in a
temporary copy of the files the checks read and expects the check to name
the file and the fix. The real tree is never modified.

The copy gets a synthetic, complete board/ (every file the recipe
installs, kernel-cmdline matching the distro's KERNEL_ARGS), so these tests
do not depend on the state of the real board/ directory.

    scripts/yocto-check --self-test
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "yocto", "tools"))

import yocto_check  # noqa: E402


def copy_tree(dst):
    """The files yocto-check reads, copied to dst, plus a synthetic board/."""
    for rel in ("Cargo.toml", "Cargo.lock", "LICENSE", "crates/edgerec/Cargo.toml", "scripts/yocto-crates",
                "scripts/yocto-qemu-data", "scripts/lib.sh"):
        os.makedirs(os.path.dirname(os.path.join(dst, rel)) or dst, exist_ok=True)
        shutil.copy2(os.path.join(REPO, rel), os.path.join(dst, rel))
    shutil.copytree(os.path.join(REPO, "yocto"), os.path.join(dst, "yocto"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(os.path.join(REPO, yocto_check.CLI_SHARE), os.path.join(dst, yocto_check.CLI_SHARE))
    cmdline = yocto_check.kernel_args(dst)[0].value
    for board, (_, active) in yocto_check.boards(dst).items():
        units = {u for us in yocto_check.systemd_units(dst, active).values() for u in us}
        files = {"edgerec.toml": "[recording]\n", "kernel-cmdline": cmdline + "\n",
                 "TUNING.md": "# tuning\n", "linuxptp/ptp4l.conf": "[global]\n",
                 "udev/60-edgerec-nvme.rules": "# rules\n"}
        files.update({f"systemd/{u}": "[Unit]\n" for u in units})
        for rel, text in files.items():
            path = os.path.join(dst, "board", board, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)


def edit(path, old, new, count=1):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if old not in text:
        raise AssertionError(f"{old!r} not in {path}")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(old, new, count))


class YoctoCheckTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="yocto-check-")
        self.root = self.tmp.name
        copy_tree(self.root)

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, rel):
        return os.path.join(self.root, rel)

    def run_checks(self, only):
        return yocto_check.run(self.root, only=only)

    def assertFails(self, report, path_part, what_part):
        for path, what, fix in report.problems:
            if path_part in path and re.search(what_part, what):
                self.assertTrue(fix, "a problem without a fix")
                return
        self.fail(f"no problem matching {path_part!r} / {what_part!r} in {report.problems}")

    # The baseline: the copy passes, so each test below fails for its one change.
    def test_copy_passes_every_offline_check(self):
        report = yocto_check.run(self.root, skip=("oelint",))
        self.assertEqual(report.problems, [])
        self.assertEqual(report.skips, [])

    def test_completion_not_installed_is_caught(self):
        edit(self.path(f"{yocto_check.RECIPE_DIR}/edgerec_0.1.0.bb"),
             '    install -D -m 0644 "$share/completions/_edgerec" ${D}${datadir}/zsh/site-functions/_edgerec\n', "")
        report = self.run_checks(["cli-share"])
        self.assertFails(report, "edgerec_0.1.0.bb", r"does not install crates/edgerec/share/completions/_edgerec")

    def test_completion_dir_not_packaged_is_caught(self):
        edit(self.path(f"{yocto_check.RECIPE_DIR}/edgerec_0.1.0.bb"), "                ${datadir}/fish \\\n", "")
        report = self.run_checks(["cli-share"])
        self.assertFails(report, "edgerec_0.1.0.bb", r"FILES:\$\{PN\} does not hold \$\{datadir\}/fish")

    def test_missing_generated_file_is_caught(self):
        os.remove(self.path(f"{yocto_check.CLI_SHARE}/completions/edgerec.bash"))
        os.remove(self.path(f"{yocto_check.CLI_SHARE}/man/edgerec.1"))
        report = self.run_checks(["cli-share"])
        self.assertFails(report, "completions/edgerec.bash", "missing")
        self.assertFails(report, "man/edgerec.1", "missing")

    def crates_check(self):
        return subprocess.run([sys.executable, self.path("scripts/yocto-crates"), "--check"],
                              capture_output=True, text=True, check=False)

    def test_stale_crates_file_is_caught(self):
        self.assertEqual(self.crates_check().returncode, 0)
        lock = self.path("Cargo.lock")
        with open(lock, encoding="utf-8") as f:
            text = f.read()
        # A dependency update: one crate's version and checksum change.
        m = re.search(r'name = "(\S+)"\nversion = "(\S+)"\nsource = "registry\+[^"]+"\nchecksum = "([0-9a-f]+)"', text)
        name, version, checksum = m.groups()
        edit(lock, m.group(0), m.group(0).replace(f'version = "{version}"', 'version = "99.0.0"')
             .replace(checksum, "0" * 64))
        proc = self.crates_check()
        self.assertEqual(proc.returncode, 1)
        self.assertIn("edgerec-crates.inc is stale", proc.stderr)
        self.assertIn(f"+ {name}/99.0.0", proc.stderr)
        self.assertIn(f"- {name}/{version}", proc.stderr)
        self.assertIn("fix: run scripts/yocto-crates", proc.stderr)

    def test_changed_checksum_alone_is_caught(self):
        lock = self.path("Cargo.lock")
        with open(lock, encoding="utf-8") as f:
            checksum = re.search(r'checksum = "([0-9a-f]{64})"', f.read()).group(1)
        edit(lock, checksum, "f" * 64)
        proc = self.crates_check()
        self.assertEqual(proc.returncode, 1)
        self.assertIn("checksums or formatting differ", proc.stderr)

    def test_bad_kas_key_is_caught(self):
        edit(self.path("yocto/kas/qemuarm64.yml"), "machine: qemuarm64", "machine: qemuarm64\nmachnie: qemuarm64")
        report = self.run_checks(["kas"])
        self.assertFails(report, "yocto/kas/qemuarm64.yml", "machnie")

    def test_bad_key_in_an_include_fails_every_file_using_it(self):
        edit(self.path("yocto/kas/include/common.yml"), "distro: edgerec", "distro: edgerec\nlocal_conf: x")
        report = self.run_checks(["kas"])
        for top in ("qemuarm64.yml", "jetson-agx-orin-devkit.yml", "jetson-agx-orin-devkit-ros2.yml"):
            self.assertFails(report, f"yocto/kas/{top}", "local_conf")

    def test_unpinned_repository_is_caught(self):
        edit(self.path("yocto/kas/jetson-agx-orin-devkit.yml"), "    branch: scarthgap\n    commit:", "    commit:")
        edit(self.path("yocto/kas/jetson-agx-orin-devkit.yml"), "    commit: ", "    tag: ")
        report = self.run_checks(["kas"])
        self.assertFails(report, "jetson-agx-orin-devkit.yml", r"repos\.meta-tegra is not pinned")

    def test_short_commit_is_caught(self):
        edit(self.path("yocto/kas/include/common.yml"),
             "commit: b301218f4da7793624db3545efd8bf66888b77b0", "commit: b301218f")
        self.assertFails(self.run_checks(["kas"]), "qemuarm64.yml", r"repos\.poky\.commit .* not a full")

    def test_kernel_cmdline_mismatch_is_caught(self):
        with open(self.path("board/jetson-agx-orin/kernel-cmdline"), "w", encoding="utf-8") as f:
            f.write("nvme_core.default_ps_max_latency_us=5500\n")
        report = self.run_checks(["kernel"])
        self.assertFails(report, "edgerec-tegra.inc", r"default_ps_max_latency_us=0.*5500")

    def test_missing_board_file_is_caught(self):
        os.remove(self.path("board/qemuarm64/systemd/data.mount"))
        self.assertFails(self.run_checks(["board"]), "board/qemuarm64/systemd/data.mount", "missing")

    def test_jetson_only_unit_is_required_on_jetson_only(self):
        self.assertFalse(os.path.exists(self.path("board/qemuarm64/systemd/jetson-clocks.service")))
        os.remove(self.path("board/jetson-agx-orin/systemd/jetson-clocks.service"))
        report = self.run_checks(["board"])
        self.assertFails(report, "board/jetson-agx-orin/systemd/jetson-clocks.service",
                         "SYSTEMD_SERVICE:edgerec-jetson-clocks")
        self.assertEqual(len(report.problems), 1, report.problems)

    def test_broken_board_symlink_is_caught(self):
        target = self.path("board/qemuarm64/edgerec.toml")
        os.remove(target)
        os.symlink("../jetson-agx-orin/no-such-file", target)
        self.assertFails(self.run_checks(["board"]), "board/qemuarm64/edgerec.toml", "broken symlink")

    def test_unknown_cargo_feature_is_caught(self):
        edit(self.path("yocto/meta-edgerec/dynamic-layers/meta-ros2/recipes-edgerec/edgerec/edgerec_%.bbappend"),
             'EDGEREC_CARGO_FEATURES:append = " ros2"', 'EDGEREC_CARGO_FEATURES:append = " ros2 lidar"')
        self.assertFails(self.run_checks(["features"]), "edgerec_%.bbappend", "'lidar' does not exist")

    def test_version_mismatch_is_caught(self):
        edit(self.path("Cargo.toml"), 'version = "0.1.0"', 'version = "0.2.0"')
        self.assertFails(self.run_checks(["version"]), "edgerec_0.1.0.bb", "not the workspace version 0.2.0")

    def test_license_file_other_than_the_checksum_is_caught(self):
        with open(self.path("LICENSE"), "a", encoding="utf-8") as f:
            f.write("   Copyright 2026 edgerec\n")
        self.assertFails(self.run_checks(["version"]), "edgerec_0.1.0.bb",
                         r"LIC_FILES_CHKSUM gives LICENSE md5 \w+, the file's is")
        os.unlink(self.path("LICENSE"))
        self.assertFails(self.run_checks(["version"]), "edgerec_0.1.0.bb",
                         "names LICENSE, which the repository does not have")

    def test_rust_older_than_workspace_is_caught(self):
        edit(self.path("yocto/meta-edgerec/conf/distro/edgerec.conf"),
             'RUSTVERSION = "1.91.0%"', 'RUSTVERSION = "1.75%"')
        self.assertFails(self.run_checks(["rust"]), "edgerec.conf", "older than the workspace rust-version")

    def test_second_growing_partition_is_caught(self):
        xml = self.path(yocto_check.PARTITION_XML)
        with open(xml, encoding="utf-8") as f:
            text = f.read()
        app = text.index('name="APP"')
        fixed = text.index("<allocation_attribute> 8 </allocation_attribute>", app)
        text = text[:fixed] + "<allocation_attribute> 0x808 </allocation_attribute>" + \
            text[fixed + len("<allocation_attribute> 8 </allocation_attribute>"):]
        with open(xml, "w", encoding="utf-8") as f:
            f.write(text)
        self.assertFails(self.run_checks(["partitions"]), "edgerec-flash_l4t_t234_nvme.xml", "'APP', 'DATA'")

    def test_layerseries_compat_is_checked(self):
        edit(self.path(yocto_check.LAYER_CONF), 'LAYERSERIES_COMPAT_edgerec = "scarthgap"',
             'LAYERSERIES_COMPAT_edgerec = "kirkstone"')
        self.assertFails(self.run_checks(["layer"]), "layer.conf", "scarthgap")

    def test_oelint_finding_is_reported_and_reasonless_suppression_rejected(self):
        edit(self.path("yocto/meta-edgerec/recipes-edgerec/packagegroups/packagegroup-edgerec.bb"),
             'RDEPENDS:${PN}-tools = "ethtool fio nvme-cli"', 'RDEPENDS:${PN}-tools = "nvme-cli fio ethtool"')
        with open(self.path(yocto_check.SUPPRESSIONS), "a", encoding="utf-8") as f:
            f.write("oelint.vars.dependsordered\n")
        report = self.run_checks(["oelint"])
        self.assertFails(report, "packagegroup-edgerec.bb", "dependsordered")
        self.assertFails(report, "oelint-suppressions.txt", "without a reason")

    def test_shellcheck_finding_in_a_script_is_caught(self):
        # Found by its #! line (no .sh), as /init of the QEMU board is.
        os.makedirs(self.path("scripts"), exist_ok=True)
        with open(self.path("scripts/broken"), "w", encoding="utf-8") as f:
            f.write("#!/bin/busybox sh\n# a test script\nrm -rf /data/$1\n")
        self.assertFails(self.run_checks(["shell"]), "scripts/broken:3", r"SC2086")

    def test_shellcheck_finding_in_a_unit_program_is_caught(self):
        unit = self.path("board/qemuarm64/systemd/edgerec-list.service")
        with open(unit, "w", encoding="utf-8") as f:
            f.write("[Unit]\nDescription=test\n\n[Service]\nType=oneshot\n"
                    "ExecStart=/bin/sh -eu -c '\\\n  for f in $$(ls /data); do \\\n"
                    "    echo \"$$f\"; done'\n")
        report = self.run_checks(["shell"])
        self.assertFails(report, "board/qemuarm64/systemd/edgerec-list.service:6", r"SC2045")
        self.assertEqual(len(report.problems), 1, report.problems)

    def qemu_board_with_watchdog(self):
        with open(self.path("board/qemuarm64/edgerec.toml"), "w", encoding="utf-8") as f:
            f.write('[health]\nwatchdog = "/dev/watchdog0"\n')

    def test_qemu_devices_pass_with_a_watchdog(self):
        self.qemu_board_with_watchdog()
        self.assertEqual(self.run_checks(["qemu"]).problems, [])

    def test_qemu_watchdog_without_i6300esb_is_caught(self):
        self.qemu_board_with_watchdog()
        edit(self.path(yocto_check.QEMU_INC), " -device i6300esb", "")
        self.assertFails(self.run_checks(["qemu"]), "edgerec-qemu.inc", "no -device i6300esb")

    def test_qemu_kernel_without_the_watchdog_driver_is_caught(self):
        self.qemu_board_with_watchdog()
        cfg = os.path.join(os.path.dirname(self.path(yocto_check.KERNEL_APPEND)), "files", "edgerec-qemu.cfg")
        edit(cfg, "CONFIG_I6300ESB_WDT=y", "CONFIG_I6300ESB_WDT=m")
        self.assertFails(self.run_checks(["qemu"]), "edgerec-qemu.cfg", "CONFIG_I6300ESB_WDT is m")

    def test_qemu_data_disk_other_than_the_script_makes_is_caught(self):
        edit(self.path(yocto_check.QEMU_INC), "@DEPLOY_DIR_IMAGE@/edgerec-data.img", "@DEPLOY_DIR_IMAGE@/data.img")
        self.assertFails(self.run_checks(["qemu"]), "edgerec-qemu.inc", "not @DEPLOY_DIR_IMAGE@/edgerec-data.img")


if __name__ == "__main__":
    unittest.main()
