#!/usr/bin/env python3
"""Reads what `edgerec-tools convert` wrote with readers nobody here wrote,
and dumps the decoded messages as JSON.

The other half of tests/py/ros1_oracle.py: the test converts a ROS 1 bag,
dumps the result with this, and compares it with ros1_oracle.py's dump of
the bag (plain for mcap-ros1, --ros2 for rosbags and mcap-ros2). Run it
with the venv's Python ($REPO/.venv, scripts/lib.sh ensure_venv: mcap
1.6.0, mcap-ros1-support, mcap-ros2-support 0.6.0, rosbags 0.11.9).

usage:
  read_converted.py KIND PATH OUT.json

KIND:
  mcap-ros1   PATH is an MCAP file with the ros1 profile (schema encoding
              ros1msg, message encoding ros1), read with mcap's reader
              (CRCs checked) and mcap_ros1.decoder.DecoderFactory
  rosbags     PATH is a rosbag2 directory (metadata.yaml and its files),
              read with rosbags.highlevel.AnyReader, which registers the
              types from the bag's own definitions and checks their
              RIHS01 hashes
  mcap-ros2   PATH is a rosbag2 directory: each of its .mcap files (in
              metadata.yaml's relative_file_paths order, else by name),
              read with mcap's reader (CRCs checked) and
              mcap_ros2.decoder.DecoderFactory

OUT.json has ros1_oracle.py's shape: {"messages": [{"topic", "log_time"
(int ns), "type", "message"}]}, in the reader's file order (mcap:
log_time_order=False; AnyReader: its time order). "type" is the schema
name (mcap) or the connection's msgtype (rosbags). mcap-ros1 messages use
ros1_oracle.py's ROS 1 mapping (its message_dict on the genpy classes
mcap_ros1 generates); rosbags and mcap-ros2 ones its --ros2 mapping:
members in definition order, builtin_interfaces/Time and Duration as
{"sec", "nanosec"} (their own members), uint8/byte arrays and numpy
arrays as lists of ints or floats, NaN and the infinities as the strings
"NaN", "Infinity", "-Infinity". The member ROS 2 adds to an empty message
(uint8 structure_needs_at_least_one_member) is left out, so an empty
message is {} as in ROS 1.

A reader that refuses PATH (an error opening, reading or decoding) makes
this exit 1 with the reader's message on stderr: the caller reports it
as the test's failure.
"""
import array
import dataclasses
import json
import sys
import traceback
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ left in tests/py
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ros1_oracle import json_float, message_dict  # noqa: E402

EMPTY_MEMBER = "structure_needs_at_least_one_member"


class Refused(Exception):
    pass


def ros2_value(v):
    """A value of a rosbags dataclass or a mcap_ros2 message."""
    import numpy as np

    if isinstance(v, (bytes, bytearray, memoryview)):
        return list(bytes(v))
    if isinstance(v, np.ndarray):
        return [ros2_value(x) for x in v.tolist()]
    if isinstance(v, array.array):
        return [ros2_value(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [ros2_value(x) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return json_float(v)
    if isinstance(v, str):
        return v
    if dataclasses.is_dataclass(v):  # rosbags
        # rosbags 0.11 keeps the type name as a field too (__msgtype__).
        names = [f.name for f in dataclasses.fields(v) if not f.name.startswith("__")]
    elif hasattr(v, "__slots__") and hasattr(v, "_type"):  # mcap_ros2
        names = list(v.__slots__)
    else:
        raise Refused(f"unexpected value {v!r} ({type(v).__name__})")
    return {n: ros2_value(getattr(v, n)) for n in names if n != EMPTY_MEMBER}


def mcap_messages(path, factory):
    from mcap.reader import make_reader

    out = []
    with open(path, "rb") as f:
        reader = make_reader(f, validate_crcs=True, decoder_factories=[factory])
        for schema, channel, message, decoded in reader.iter_decoded_messages(log_time_order=False):
            out.append((channel.topic, message.log_time, schema.name if schema else "", decoded))
    return out


def read_mcap_ros1(path):
    from mcap_ros1.decoder import DecoderFactory

    return [{"topic": t, "log_time": lt, "type": ty, "message": message_dict(m)}
            for t, lt, ty, m in mcap_messages(path, DecoderFactory())]


def bag_files(d, suffix):
    d = Path(d)
    if not d.is_dir():
        raise Refused(f"{d} is not a directory")
    meta = d / "metadata.yaml"
    if meta.exists():
        import yaml

        info = yaml.safe_load(meta.read_text())["rosbag2_bagfile_information"]
        files = [d / p for p in info.get("relative_file_paths", [])]
        files = [p for p in files if p.suffix == suffix]
    else:
        files = []
    if not files:
        files = sorted(d.glob(f"*{suffix}"))
    if not files:
        raise Refused(f"no {suffix} file in {d}")
    return files


def read_mcap_ros2(path):
    from mcap_ros2.decoder import DecoderFactory

    out = []
    for f in bag_files(path, ".mcap"):
        out += [{"topic": t, "log_time": lt, "type": ty, "message": ros2_value(m)}
                for t, lt, ty, m in mcap_messages(f, DecoderFactory())]
    return out


def read_rosbags(path):
    from rosbags.highlevel import AnyReader

    out = []
    with AnyReader([Path(path)]) as reader:
        for conn, t, raw in reader.messages():
            msg = reader.deserialize(raw, conn.msgtype)
            out.append({"topic": conn.topic, "log_time": t, "type": conn.msgtype,
                        "message": ros2_value(msg)})
    return out


KINDS = {"mcap-ros1": read_mcap_ros1, "rosbags": read_rosbags, "mcap-ros2": read_mcap_ros2}


def main(argv):
    if len(argv) != 4 or argv[1] not in KINDS:
        sys.exit(__doc__)
    kind, path, out = argv[1:]
    try:
        messages = KINDS[kind](path)
    except Exception as e:  # noqa: BLE001  (any refusal is the finding)
        tb = "" if isinstance(e, Refused) else traceback.format_exc(limit=-3)
        sys.exit(f"read_converted.py: {kind} refused {path}: {type(e).__name__}: {str(e)[:2000]}\n{tb}")
    with open(out, "w") as f:
        json.dump({"messages": messages}, f, allow_nan=False)


if __name__ == "__main__":
    main(sys.argv)
