#!/usr/bin/env python3
"""Writes MCAP files with the reference writers nobody here wrote, for the
readers' tests (crates/format/tests/reference_writers.rs).

    write_reference_mcaps.py OUT_DIR

Each file is OUT_DIR/<writer>.mcap (or a rosbag2 directory for rosbags),
and OUT_DIR/expected.json says, per file, how many messages each topic has,
so the test checks counts, not just that nothing failed.

- mcap-<compression>[-<variant>]: Foxglove's Python `mcap` Writer (1.6),
  with its options: chunked or not, zstd / lz4 / none, summary offsets,
  statistics, CRCs on and off, attachments and metadata records.
- mcap-ros2: `mcap-ros2-support`'s Writer (sensor_msgs-free: std_msgs/String
  and a nested type from its own definition), the writer that emits summary
  offsets with group_length 0 for empty index groups.
- rosbags: `rosbags.rosbag2.Writer` with the MCAP storage plugin (version
  9), a rosbag2 bag directory: metadata.yaml plus one .mcap.
"""

import json
import sys
from pathlib import Path

from mcap.writer import CompressionType, IndexType, Writer


def raw_writer(path, n, **options):
    """Two channels, `n` messages each, through mcap.writer.Writer."""
    attach = options.pop("attachments", False)
    with open(path, "wb") as f:
        w = Writer(f, **options)
        w.start(profile="ros2", library="reference-writers")
        schema = w.register_schema(
            name="std_msgs/msg/String", encoding="ros2msg", data=b"string data"
        )
        a = w.register_channel(
            topic="/chatter", message_encoding="cdr", schema_id=schema
        )
        b = w.register_channel(
            topic="/blob", message_encoding="cdr", schema_id=schema,
            metadata={"offered_qos_profiles": ""},
        )
        t = 1_700_000_000_000_000_000
        for i in range(n):
            text = f"hello {i}".encode() + b"\0"
            cdr = b"\0\x01\0\0" + len(text).to_bytes(4, "little") + text
            w.add_message(a, log_time=t + i * 1000, data=cdr,
                          publish_time=t + i * 1000, sequence=i)
            big = bytes((i + k) % 251 for k in range(3000 + i % 500))
            w.add_message(b, log_time=t + i * 1000 + 1, data=big,
                          publish_time=t + i * 1000 + 1, sequence=i)
        if attach:
            w.add_attachment(create_time=t, log_time=t, name="calib.yaml",
                             media_type="application/yaml", data=b"k: 1\n")
            w.add_metadata("run", {"vehicle": "test", "driver": "none"})
        w.finish()
    return {"/chatter": n, "/blob": n}


def ros2_writer(path, n):
    """mcap-ros2-support's Writer: schemas from .msg text, CDR it encodes."""
    from mcap_ros2.writer import Writer as Ros2Writer

    with open(path, "wb") as f:
        w = Ros2Writer(f)
        string = w.register_msgdef("std_msgs/msg/String", "string data")
        point = w.register_msgdef(
            "geometry_msgs/msg/PointStamped",
            "std_msgs/Header header\ngeometry_msgs/Point point\n"
            + "=" * 80 + "\nMSG: std_msgs/Header\n"
            "builtin_interfaces/Time stamp\nstring frame_id\n"
            + "=" * 80 + "\nMSG: builtin_interfaces/Time\n"
            "int32 sec\nuint32 nanosec\n"
            + "=" * 80 + "\nMSG: geometry_msgs/Point\n"
            "float64 x\nfloat64 y\nfloat64 z\n",
        )
        t = 1_700_000_000_000_000_000
        for i in range(n):
            w.write_message("/chatter", string, {"data": f"hi {i}"},
                            log_time=t + i * 1000, publish_time=t + i * 1000,
                            sequence=i)
            w.write_message(
                "/point", point,
                {"header": {"stamp": {"sec": i, "nanosec": 5},
                            "frame_id": "map"},
                 "point": {"x": float(i), "y": -1.5, "z": 2.25}},
                log_time=t + i * 1000 + 1, publish_time=t + i * 1000 + 1,
                sequence=i)
        w.finish()
    return {"/chatter": n, "/point": n}


def rosbags_writer(path, n):
    """rosbags' rosbag2 writer with the MCAP storage plugin."""
    from rosbags.rosbag2 import StoragePlugin, Writer as BagWriter
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    String = store.types["std_msgs/msg/String"]
    Imu = store.types["sensor_msgs/msg/Imu"]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]
    Quat = store.types["geometry_msgs/msg/Quaternion"]
    Vec3 = store.types["geometry_msgs/msg/Vector3"]
    import numpy as np

    with BagWriter(path, version=9, storage_plugin=StoragePlugin.MCAP) as w:
        c1 = w.add_connection("/chatter", String.__msgtype__, typestore=store)
        c2 = w.add_connection("/imu", Imu.__msgtype__, typestore=store)
        t = 1_700_000_000_000_000_000
        for i in range(n):
            w.write(c1, t + i * 1000,
                    store.serialize_cdr(String(data=f"x{i}"), String.__msgtype__))
            imu = Imu(
                header=Header(stamp=Time(sec=i, nanosec=1), frame_id="imu"),
                orientation=Quat(x=0.0, y=0.0, z=0.0, w=1.0),
                orientation_covariance=np.zeros(9),
                angular_velocity=Vec3(x=0.1, y=0.2, z=0.3),
                angular_velocity_covariance=np.zeros(9),
                linear_acceleration=Vec3(x=0.0, y=0.0, z=9.81),
                linear_acceleration_covariance=np.zeros(9),
            )
            w.write(c2, t + i * 1000 + 1,
                    store.serialize_cdr(imu, Imu.__msgtype__))
    return {"/chatter": n, "/imu": n}


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    n = 500
    expected = {}
    variants = {
        "mcap-zstd": dict(compression=CompressionType.ZSTD),
        "mcap-lz4": dict(compression=CompressionType.LZ4),
        "mcap-none": dict(compression=CompressionType.NONE),
        "mcap-small-chunks": dict(chunk_size=4096, attachments=True),
        "mcap-unchunked": dict(use_chunking=False, attachments=True),
        "mcap-no-crcs": dict(enable_crcs=False, enable_data_crcs=False),
        "mcap-data-crcs": dict(enable_data_crcs=True),
        "mcap-no-summary-offsets": dict(use_summary_offsets=False),
        "mcap-no-statistics": dict(use_statistics=False),
        "mcap-no-index": dict(index_types=IndexType.NONE, repeat_channels=False,
                              repeat_schemas=False),
    }
    for name, options in variants.items():
        expected[f"{name}.mcap"] = raw_writer(out / f"{name}.mcap", n, **options)
    expected["mcap-ros2.mcap"] = ros2_writer(out / "mcap-ros2.mcap", n)
    expected["rosbags"] = rosbags_writer(out / "rosbags", n)
    (out / "expected.json").write_text(json.dumps(expected, indent=1))


if __name__ == "__main__":
    main()
