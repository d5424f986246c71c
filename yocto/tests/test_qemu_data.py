"""Tests of scripts/yocto-qemu-data, the Yocto qemuarm64 image's data disk:
a GPT whose one partition, labelled DATA, spans the disk and is blank (so
data-makefs.service formats it on first boot), and an existing disk never
touched (it holds the recordings).

    scripts/yocto-check --self-test
"""

import hashlib
import json
import os
import subprocess
import tempfile
import unittest

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(REPO, "scripts", "yocto-qemu-data")


class QemuDataTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="qemu-data-")
        self.img = os.path.join(self.tmp.name, "deploy", "edgerec-data.img")

    def tearDown(self):
        self.tmp.cleanup()

    def run_script(self, *args):
        return subprocess.run([SCRIPT, *args], capture_output=True, text=True, check=False)

    def test_one_blank_data_partition_over_the_disk(self):
        proc = self.run_script("--size", "64M", self.img)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(os.path.getsize(self.img), 64 << 20)
        # Sparse: only the two GPT copies are written.
        self.assertLess(os.stat(self.img).st_blocks * 512, 1 << 20)
        table = json.loads(subprocess.run(["sfdisk", "--json", self.img], capture_output=True, text=True,
                                          check=True).stdout)["partitiontable"]
        self.assertEqual(table["label"], "gpt")
        [part] = table["partitions"]
        self.assertEqual(part["name"], "DATA")
        self.assertEqual(part["type"], "0FC63DAF-8483-4772-8E79-3D69D8477DE4")  # Linux filesystem
        end = part["start"] + part["size"]
        self.assertLessEqual(table["lastlba"] + 1 - end, 2048, "DATA stops more than 1 MiB short of the end")
        # Blank: nothing for wipefs or blkid to find in the partition.
        with open(self.img, "rb") as f:
            f.seek(part["start"] * 512)
            self.assertEqual(f.read(1 << 20).count(0), 1 << 20)

    def test_an_existing_disk_is_left_alone(self):
        os.makedirs(os.path.dirname(self.img))
        with open(self.img, "wb") as f:
            f.write(b"recordings" * 1000)
        before = self.digest()
        proc = self.run_script("--size", "64M", self.img)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("left as it is", proc.stderr)
        self.assertEqual(self.digest(), before)

    def digest(self):
        with open(self.img, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()


if __name__ == "__main__":
    unittest.main()
