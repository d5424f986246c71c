#!/usr/bin/python3
"""Dumps the decoded messages of a ROS 1 bag, as Debian's rosbag reads them.

The oracle for `edgerec-tools cat --json` and `edgerec-tools convert`:
rosbag's own reader (Debian bookworm python3-rosbag 1.15, genpy) decodes
every message (read_messages(), not raw), and this writes them as JSON in
the mapping `edgerec-tools cat --json` prints, so a test compares the two
directly. Run it with Debian's /usr/bin/python3 (python3-rosbag and the
message packages of the bag's types: python3-std-msgs, python3-sensor-msgs,
python3-geometry-msgs, python3-tf2-msgs; rosbag falls back to the bag's
own definitions for types it does not find).

usage:
  ros1_oracle.py [--ros2] BAG OUT.json

OUT.json: {"messages": [{"topic", "log_time" (the bag's receive time, int
ns), "type" (msg._type), "message"}]}, in the order read_messages() gives
(the bag's time order). "message" is the decoded message as a JSON object,
members in definition order (genpy's __slots__ and _slot_types):
time and duration as {"secs", "nsecs"}; uint8[] and char[] (bytes to
genpy) as lists of ints; other arrays as lists; float32 as the float64
genpy widened it to; NaN and the infinities as the strings "NaN",
"Infinity", "-Infinity"; bool as true/false; nested messages as objects.

--ros2: the mapping a ROS 1 -> ROS 2 conversion should give, to compare
with tests/py/read_converted.py's rosbags and mcap-ros2 dumps: "type" as
pkg/msg/Type (tf/tfMessage as tf2_msgs/msg/TFMessage), std_msgs/Header
without seq wherever one appears, time and duration as {"sec",
"nanosec"} (builtin_interfaces/Time and Duration).

tests/py/read_converted.py imports message_dict() from here, for the
genpy classes mcap_ros1 generates (no rosbag import at module level).
"""
import json
import math
import re
import sys

ARRAY = re.compile(r"^(.*)\[(\d*)\]$")
# ROS 1 types a conversion renames (besides pkg/Type -> pkg/msg/Type).
ROS2_RENAMES = {"tf/tfMessage": "tf2_msgs/msg/TFMessage"}


def json_float(x):
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def time_dict(v, ros2):
    if ros2:
        return {"sec": v.secs, "nanosec": v.nsecs}
    return {"secs": v.secs, "nsecs": v.nsecs}


def value(v, slot_type, ros2=False):
    """One field's value, by its genpy slot type."""
    m = ARRAY.match(slot_type)
    if m:
        base = m.group(1)
        if isinstance(v, (bytes, bytearray)):
            return list(v)
        return [value(x, base, ros2) for x in v]
    if slot_type in ("time", "duration"):
        return time_dict(v, ros2)
    if slot_type in ("float32", "float64"):
        return json_float(v)
    if hasattr(v, "_slot_types"):
        return message_dict(v, ros2)
    if isinstance(v, (bytes, bytearray)):
        # A string genpy could not decode: not expected in these bags.
        return v.decode("utf-8", "replace")
    return v


def message_dict(msg, ros2=False):
    """A genpy message (Debian's genpy, or the copy mcap_ros1 vendors) as
    a dict, members in definition order."""
    header = msg._type == "std_msgs/Header"
    out = {}
    for name, slot_type in zip(msg.__slots__, msg._slot_types):
        if ros2 and header and name == "seq":
            continue
        out[name] = value(getattr(msg, name), slot_type, ros2)
    return out


def ros2_type(ros1_type):
    if ros1_type in ROS2_RENAMES:
        return ROS2_RENAMES[ros1_type]
    pkg, name = ros1_type.split("/", 1)
    return f"{pkg}/msg/{name}"


def record(topic, log_time, msg, ros2=False):
    return {
        "topic": topic,
        "log_time": log_time,
        "type": ros2_type(msg._type) if ros2 else msg._type,
        "message": message_dict(msg, ros2),
    }


def dump(path, ros2):
    import rosbag  # Debian's python3-rosbag; only here, see the docstring

    messages = []
    with rosbag.Bag(path, "r") as bag:
        for topic, msg, t in bag.read_messages():
            messages.append(record(topic, t.to_nsec(), msg, ros2))
    return {"messages": messages}


def main(argv):
    args = argv[1:]
    ros2 = "--ros2" in args
    args = [a for a in args if a != "--ros2"]
    if len(args) != 2 or any(a.startswith("--") for a in args):
        sys.exit(__doc__)
    doc = dump(args[0], ros2)
    with open(args[1], "w") as f:
        json.dump(doc, f, allow_nan=False)


if __name__ == "__main__":
    main(sys.argv)
