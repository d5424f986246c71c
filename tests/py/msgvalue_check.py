#!/usr/bin/env python3
"""Differential test of edgerec's whole-message decoders against rosbags.

Run by crates/format/tests/msgvalue_rosbags.rs in two steps:

  msgvalue_check.py gen DIR    serialize known messages with rosbags (ROS 2
                               Humble CDR, one of them big endian, and ROS 1
                               Noetic), write DIR/<id>.bin, for ROS 1 the
                               connection's message_definition as rosbags
                               generates it (DIR/<id>.msg), and the index
                               DIR/samples.tsv: id, dialect, type, .bin, .msg
                               (`-` for ROS 2: the Rust side uses the Humble
                               definitions edgerec embeds).
  msgvalue_check.py check DIR  compare each DIR/<id>.json (the Rust decoder's
                               tree, printed by edgerec_format::print as one
                               JSON line) field by field, in order, with what
                               rosbags' own deserializer reads from the same
                               bytes (deserialize_cdr / deserialize_ros1).
                               Floats must be equal exactly
                               (float32 widened), NaN and infinities are the
                               strings edgerec prints, byte arrays lists of
                               ints, and ROS 1 time/duration {secs, nsecs}.

Exit 0 when everything matches, 1 on any mismatch, 77 when rosbags cannot be
imported (a skip).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any

try:
    import numpy as np
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore
except ImportError as err:  # pragma: no cover - environment probe
    print(f"SKIP: cannot import rosbags: {err}")
    sys.exit(77)

# tf2_msgs is not in rosbags' Noetic store; its ROS 1 definition.
ROS1_TF_MESSAGE = "geometry_msgs/TransformStamped[] transforms\n"


def stores() -> dict[str, Any]:
    ros1 = get_typestore(Stores.ROS1_NOETIC)
    ros1.register(get_types_from_msg(ROS1_TF_MESSAGE, "tf2_msgs/msg/TFMessage"))
    return {"ros2": get_typestore(Stores.ROS2_HUMBLE), "ros1": ros1}


def messages(ts: Any, dialect: str) -> list[tuple[str, str, Any]]:
    """(id, type name, message) for one store, the same values for both."""
    T = ts.types
    ros1 = dialect == "ros1"

    def stamp(sec: int, nsec: int) -> Any:
        return T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nsec)

    def header(sec: int, nsec: int, frame: str, seq: int = 0) -> Any:
        if ros1:
            return T["std_msgs/msg/Header"](seq=seq, stamp=stamp(sec, nsec), frame_id=frame)
        return T["std_msgs/msg/Header"](stamp=stamp(sec, nsec), frame_id=frame)

    def vec3(x: float, y: float, z: float) -> Any:
        return T["geometry_msgs/msg/Vector3"](x=x, y=y, z=z)

    def quat(x: float, y: float, z: float, w: float) -> Any:
        return T["geometry_msgs/msg/Quaternion"](x=x, y=y, z=z, w=w)

    out = []
    for i, text in enumerate(["grüße, 世界 🚀 \"q\" \\ \t", ""]):
        out.append((f"string{i}", "std_msgs/msg/String", T["std_msgs/msg/String"](data=text)))

    for i, frame in enumerate(["imu", "imu_link_x"]):
        cov = np.array([1e-3, -0.0, 1e300, 5e-324, math.nan, math.inf, -math.inf, 0.1, 2.5])
        out.append((f"imu{i}", "sensor_msgs/msg/Imu", T["sensor_msgs/msg/Imu"](
            header=header(1_700_000_000 + i, 123_456_789, frame, seq=41 + i),
            orientation=quat(0.5, -0.5, 0.5, -0.5),
            orientation_covariance=cov,
            angular_velocity=vec3(0.01, -0.02, 0.03),
            angular_velocity_covariance=np.arange(9, dtype=np.float64) / 7,
            linear_acceleration=vec3(0.0, 0.0, 9.80665),
            linear_acceleration_covariance=np.zeros(9),
        )))

    data = np.array([(i * 37 + 11) % 256 for i in range(2 * 3 * 3)], dtype=np.uint8)
    out.append(("image", "sensor_msgs/msg/Image", T["sensor_msgs/msg/Image"](
        header=header(1_700_000_002, 1, "camera_optical", seq=7),
        height=2, width=3, encoding="rgb8", is_bigendian=0, step=9, data=data,
    )))

    pf = T["sensor_msgs/msg/PointField"]
    pfields = [pf(name="x", offset=0, datatype=7, count=1), pf(name="y", offset=4, datatype=7, count=1),
               pf(name="z", offset=8, datatype=7, count=1), pf(name="intensity", offset=12, datatype=2, count=1)]
    cloud = np.array([(i * 7 + 3) % 256 for i in range(2 * 3 * 13)], dtype=np.uint8)
    out.append(("point_cloud2", "sensor_msgs/msg/PointCloud2", T["sensor_msgs/msg/PointCloud2"](
        header=header(1_700_000_001, 500_000_000, "lidar", seq=3),
        height=2, width=3, fields=pfields, is_bigendian=False, point_step=13, row_step=39,
        data=cloud, is_dense=True,
    )))

    scan = T["sensor_msgs/msg/LaserScan"](
        header=header(5, 6, "laser"), angle_min=-1.5, angle_max=1.5, angle_increment=0.1,
        time_increment=1e-5, scan_time=0.1, range_min=0.05, range_max=30.0,
        ranges=np.array([0.1, 1.5, math.inf, math.nan, 29.99], dtype=np.float32),
        intensities=np.array([], dtype=np.float32),
    )
    out.append(("laser_scan", "sensor_msgs/msg/LaserScan", scan))

    kv = T["diagnostic_msgs/msg/KeyValue"]
    ds = T["diagnostic_msgs/msg/DiagnosticStatus"]
    out.append(("diagnostic_array", "diagnostic_msgs/msg/DiagnosticArray", T["diagnostic_msgs/msg/DiagnosticArray"](
        header=header(1_700_000_004, 0, "", seq=9),
        status=[
            ds(level=2, name="edgerec: storage", message="disk full", hardware_id="nvme0n1",
               values=[kv(key="free_bytes", value="0"), kv(key="température", value="41.5 °C")]),
            ds(level=0, name="edgerec: clock", message="", hardware_id="", values=[]),
        ],
    )))

    ts_ = T["geometry_msgs/msg/TransformStamped"]
    tr = T["geometry_msgs/msg/Transform"]
    out.append(("tf_message", "tf2_msgs/msg/TFMessage", T["tf2_msgs/msg/TFMessage"](transforms=[
        ts_(header=header(10, 20, "map", seq=1), child_frame_id="odom",
            transform=tr(translation=vec3(1.0, 2.0, 3.0), rotation=quat(0.0, 0.0, 0.0, 1.0))),
        ts_(header=header(10, 30, "odom", seq=2), child_frame_id="base_link",
            transform=tr(translation=vec3(-0.5, 0.25, 0.0), rotation=quat(0.0, 0.0, 0.7071067811865476, 0.7071067811865476))),
    ])))
    return out


def samples() -> list[tuple[str, str, str, Any, Any, bool]]:
    """(id, dialect, type name, store, message, little endian)."""
    out = []
    for dialect, ts in stores().items():
        for mid, typename, msg in messages(ts, dialect):
            out.append((f"{dialect}_{mid}", dialect, typename, ts, msg, True))
    ts = stores()["ros2"]
    for mid, typename, msg in messages(ts, "ros2"):
        if mid in ("imu1", "diagnostic_array"):
            out.append((f"ros2be_{mid}", "ros2", typename, ts, msg, False))
    return out


def ros1_name(typename: str) -> str:
    return typename.replace("/msg/", "/")


def gen(d: Path) -> int:
    d.mkdir(parents=True, exist_ok=True)
    lines = []
    for sid, dialect, typename, ts, msg, little in samples():
        if dialect == "ros1":
            raw = bytes(ts.serialize_ros1(msg, typename))
            text, _md5 = ts.generate_msgdef(typename, ros_version=1)
            (d / f"{sid}.msg").write_text(text, encoding="utf-8")
            lines.append(f"{sid}\tros1\t{ros1_name(typename)}\t{sid}.bin\t{sid}.msg")
        else:
            raw = bytes(ts.serialize_cdr(msg, typename, little_endian=little))
            lines.append(f"{sid}\tros2\t{typename}\t{sid}.bin\t-")
        (d / f"{sid}.bin").write_bytes(raw)
    (d / "samples.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"gen: {len(lines)} samples")
    return 0


TIME_TYPES = ("builtin_interfaces/msg/Time", "builtin_interfaces/msg/Duration")


def compare(path: str, want: Any, got: Any, ros1: bool, errors: list[str], ts: Any) -> None:
    def bad(what: str) -> None:
        errors.append(f"{path or '<root>'}: {what}")

    if is_dataclass(want):
        typename = getattr(want, "__msgtype__", type(want).__name__)
        # Fields only: rosbags' dataclasses hold the constants too.
        names = [name for name, _ in ts.fielddefs[typename][1]]
        keys = names
        if ros1 and typename in TIME_TYPES:
            keys = ["secs", "nsecs"]
        if not isinstance(got, dict):
            return bad(f"expected a {typename} object, got {got!r:.80}")
        if list(got) != keys:
            return bad(f"members {list(got)}, expected {keys}")
        for name, key in zip(names, keys):
            compare(f"{path}.{key}" if path else key, getattr(want, name), got[key], ros1, errors, ts)
        return
    if isinstance(want, np.ndarray):
        want = want.tolist()
    if isinstance(want, (list, tuple)):
        if not isinstance(got, list) or len(got) != len(want):
            return bad(f"expected {len(want)} elements, got {got!r:.80}")
        for i, (w, g) in enumerate(zip(want, got)):
            compare(f"{path}[{i}]", w, g, ros1, errors, ts)
        return
    if isinstance(want, (bool, np.bool_)):
        if got is not bool(want):
            bad(f"expected {bool(want)}, got {got!r}")
        return
    if isinstance(want, (int, np.integer)):
        if isinstance(got, bool) or not isinstance(got, int) or got != int(want):
            bad(f"expected {int(want)}, got {got!r}")
        return
    if isinstance(want, (float, np.floating)):
        w = float(want)
        if math.isnan(w):
            ok = got == "NaN"
        elif math.isinf(w):
            ok = got == ("Infinity" if w > 0 else "-Infinity")
        else:
            ok = isinstance(got, (int, float)) and not isinstance(got, bool) and float(got) == w
        if not ok:
            bad(f"expected {w!r}, got {got!r}")
        return
    if isinstance(want, str):
        if got != want:
            bad(f"expected {want!r}, got {got!r}")
        return
    bad(f"cannot compare a {type(want).__name__}")


def check(d: Path) -> int:
    failed = 0
    for sid, dialect, typename, ts, _msg, _little in samples():
        raw = (d / f"{sid}.bin").read_bytes()
        if dialect == "ros1":
            read = ts.deserialize_ros1(raw, typename)
        else:
            read = ts.deserialize_cdr(raw, typename)
        got = json.loads((d / f"{sid}.json").read_text(encoding="utf-8"))
        errors: list[str] = []
        compare("", read, got, dialect == "ros1", errors, ts)
        if errors:
            failed += 1
            print(f"FAIL {sid}:")
            for e in errors[:20]:
                print(f"  {e}")
        else:
            print(f"ok   {sid}")
    return 1 if failed else 0


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] not in ("gen", "check"):
        print(__doc__)
        return 2
    d = Path(sys.argv[2])
    return gen(d) if sys.argv[1] == "gen" else check(d)


if __name__ == "__main__":
    sys.exit(main())
