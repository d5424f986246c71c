#!/usr/bin/env python3
"""Write the .msg files of Humble types that no stored upstream copy matched.

Usage: from_rosbags.py pkg/msg/Type ...  (run from crates/format/msg/)

Each file is the top-level section of rosbags' Stores.ROS2_HUMBLE rendering
(`generate_msgdef`): the fields and constants of the Humble definition, with
fully qualified type names and no comments. README.md lists which files were
made this way and with which rosbags version; rerunning this script with
that version rewrites them byte for byte.
"""

import sys
from pathlib import Path

from rosbags.typesys import Stores, get_typestore

SEPARATOR = "=" * 80


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    store = get_typestore(Stores.ROS2_HUMBLE)
    for name in sys.argv[1:]:
        pkg, kind, ty = name.split("/")
        if kind != "msg" or name not in store.types:
            print(f"{name}: not a message type of Stores.ROS2_HUMBLE", file=sys.stderr)
            return 1
        text, _md5 = store.generate_msgdef(name, ros_version=2)
        # The top level ends where the first dependency's separator starts.
        top = text.split(SEPARATOR, 1)[0]
        path = Path(pkg) / "msg" / f"{ty}.msg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(top, encoding="utf-8", newline="")
        print(f"wrote {path} ({len(top)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
