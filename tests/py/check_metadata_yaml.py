"""Reads a bag directory's metadata.yaml the way ROS tools do and checks
that every topic name, type and file path is what edgerec wrote.

    check_metadata_yaml.py BAG_DIR EXPECTED.json

EXPECTED.json: {"topics": [[name, type, count], ...], "files": [path, ...]}.
Two readers: PyYAML's yaml.safe_load (YAML 1.1, as the ros2 CLI's Python
tools read it) and rosbags' rosbag2 Reader (ruamel.yaml, then the MCAP
files, every message read). Exit 0 when both agree with EXPECTED, 1 with
what differs, 77 when a reader is not installed.
"""

import json
import sys
from pathlib import Path

try:
    import yaml
    from rosbags.rosbag2 import Reader
except ImportError as e:  # pragma: no cover - the venv lacks a reader
    print(f"SKIP: {e}")
    sys.exit(77)


def main():
    bag = Path(sys.argv[1])
    want = json.loads(Path(sys.argv[2]).read_text(encoding="utf-8"))
    problems = []

    doc = yaml.safe_load((bag / "metadata.yaml").read_text(encoding="utf-8"))
    info = doc["rosbag2_bagfile_information"]
    got = [[t["topic_metadata"]["name"], t["topic_metadata"]["type"], t["message_count"]]
           for t in info["topics_with_message_count"]]
    if sorted(got) != sorted(want["topics"]):
        problems.append(f"yaml.safe_load topics: {got!r} != {want['topics']!r}")
    if info["relative_file_paths"] != want["files"]:
        problems.append(f"yaml.safe_load files: {info['relative_file_paths']!r} != {want['files']!r}")
    if [f["path"] for f in info["files"]] != want["files"]:
        problems.append("yaml.safe_load files[].path differ")

    with Reader(bag) as reader:
        conns = sorted([c.topic, c.msgtype, c.msgcount] for c in reader.connections)
        if conns != sorted(want["topics"]):
            problems.append(f"rosbags connections: {conns!r} != {want['topics']!r}")
        counts = {}
        for conn, _t, _raw in reader.messages():
            counts[conn.topic] = counts.get(conn.topic, 0) + 1
        for name, _type, n in want["topics"]:
            if counts.get(name, 0) != n:
                problems.append(f"rosbags read {counts.get(name, 0)} messages of {name!r}, want {n}")

    for p in problems:
        print(p)
    print(f"{len(want['topics'])} topics: " + ("FAIL" if problems else "every name read back as written"))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
