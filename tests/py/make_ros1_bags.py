#!/usr/bin/python3
"""Writes ROS 1 bags with Debian's rosbag and dumps what rosbag reads back.

The oracle for crates/rosbag1's tests: the bags come from rosbag's own
writer (Debian bookworm python3-rosbag 1.15, no roscore needed) and the
expected messages from rosbag's own reader, so edgerec's reader is checked
against code nobody here wrote. Run it with Debian's /usr/bin/python3
(python3-rosbag, python3-std-msgs, python3-sensor-msgs,
python3-geometry-msgs, python3-tf2-msgs).

usage:
  make_ros1_bags.py make OUT_DIR
      writes OUT_DIR/{none,bz2,lz4}.bag (4 KiB chunks, so many chunks),
      each with OUT_DIR/<name>.json, and OUT_DIR/encrypted.bag (none.bag
      with an `encryptor` field added to its bag header)
  make_ros1_bags.py dump BAG JSON
      writes what rosbag reads from BAG to JSON

The bags hold std_msgs/String on /chatter from two publishers (two
connections, callerids /talker_a and /talker_b), sensor_msgs/Imu on /imu,
tf2_msgs/TFMessage (geometry_msgs/TransformStamped) on /tf, a latched
/tf_static, and sensor_msgs/Image on /camera/image, each image larger than
a chunk. Every message has its own time stamp, in write order.

The JSON: {"messages": [{"topic", "time_ns", "callerid", "data" (hex of
the serialized bytes, read_messages(raw=True))}], "connections": [{"id",
"topic", "type", "md5sum", "message_definition", "callerid", "latching"}],
"chunk_positions": [...], "index_pos", "topics": {topic: {"type",
"messages", "connections"}}} (from get_type_and_topic_info).
"""
import json
import os
import struct
import sys

import genpy
import rosbag
from geometry_msgs.msg import TransformStamped
from sensor_msgs.msg import Image, Imu
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

CHUNK_THRESHOLD = 4 * 1024
BASE_SEC = 1_700_000_000


def header_for(msg, topic, callerid, latching):
    return {
        "topic": topic,
        "type": msg._type,
        "md5sum": msg._md5sum,
        "message_definition": msg._full_text,
        "callerid": callerid,
        "latching": "1" if latching else "0",
    }


class Writer:
    """rosbag.Bag.write keeps one connection per topic (bag.py: "currently
    using a connection per topic; ignoring message connection header");
    `rosbag record` keeps one per publisher. To write a bag like the
    recorder's, the topic is pointed at its publisher's connection before
    each write, so rosbag's own writer makes and reuses them."""

    def __init__(self, bag):
        self.bag = bag
        self.known = {}

    def write(self, topic, msg, t, callerid, latching=False):
        key = (topic, callerid)
        if key in self.known:
            self.bag._topic_connections[topic] = self.known[key]
        else:
            self.bag._topic_connections.pop(topic, None)
        self.bag.write(topic, msg, t, connection_header=header_for(msg, topic, callerid, latching))
        self.known[key] = self.bag._topic_connections[topic]


def stamp(i):
    return genpy.Time(BASE_SEC + i // 1000, (i % 1000) * 1_000_000 + 17)


def tf(i, child, stamp_t):
    ts = TransformStamped()
    ts.header.seq = i
    ts.header.stamp = stamp_t
    ts.header.frame_id = "map"
    ts.child_frame_id = child
    ts.transform.translation.x = i * 0.5
    ts.transform.translation.y = -i * 0.25
    ts.transform.rotation.w = 1.0
    return TFMessage(transforms=[ts])


def write_bag(path, compression):
    bag = rosbag.Bag(path, "w", compression=compression, chunk_threshold=CHUNK_THRESHOLD)
    w = Writer(bag)
    i = 0

    def t():
        return stamp(i)

    w.write("/tf_static", tf(0, "base_link", t()), t(), "/static_tf_publisher", latching=True)
    i += 1
    for step in range(400):
        caller = "/talker_a" if step % 3 else "/talker_b"
        w.write("/chatter", String(data=f"hello {step} from {caller}"), t(), caller)
        i += 1
        imu = Imu()
        imu.header.seq = step
        imu.header.stamp = t()
        imu.header.frame_id = "imu_link"
        imu.orientation.w = 1.0
        imu.angular_velocity.z = step * 0.01
        imu.linear_acceleration.z = 9.81
        imu.orientation_covariance = [float(k) for k in range(9)]
        w.write("/imu", imu, t(), "/imu_driver")
        i += 1
        if step % 4 == 0:
            w.write("/tf", tf(step, "base_link", t()), t(), "/robot_state_publisher")
            i += 1
        if step % 25 == 0:
            img = Image()
            img.header.seq = step
            img.header.stamp = t()
            img.header.frame_id = "camera"
            img.height, img.width, img.encoding, img.step = 120, 160, "rgb8", 160 * 3
            # Larger than a chunk; not all zeros, so bz2 and lz4 have work.
            img.data = bytes((x * 7 + step * 13 + (x >> 9)) & 0xFF for x in range(160 * 120 * 3))
            w.write("/camera/image", img, t(), "/camera_driver")
            i += 1
    bag.close()


def text(v):
    """rosbag hands header values back as bytes when it read them."""
    return v.decode() if isinstance(v, bytes) else v


def dump(path, out):
    bag = rosbag.Bag(path, "r")
    messages = []
    for topic, raw, t, conn_header in bag.read_messages(raw=True, return_connection_header=True):
        messages.append({
            "topic": topic,
            "time_ns": t.to_nsec(),
            "callerid": text(conn_header.get("callerid")),
            "data": raw[1].hex(),
        })
    connections = []
    for c in sorted(bag._connections.values(), key=lambda c: c.id):
        connections.append({
            "id": c.id,
            "topic": c.topic,
            "type": text(c.header["type"]),
            "md5sum": text(c.header["md5sum"]),
            "message_definition": text(c.header["message_definition"]),
            "callerid": text(c.header.get("callerid")),
            "latching": text(c.header.get("latching")) == "1",
        })
    info = bag.get_type_and_topic_info()
    topics = {name: {"type": ti.msg_type, "messages": ti.message_count, "connections": ti.connections}
              for name, ti in info.topics.items()}
    doc = {
        "messages": messages,
        "connections": connections,
        "chunk_positions": [c.pos for c in bag._chunks],
        "index_pos": bag._index_data_pos,
        "topics": topics,
    }
    bag.close()
    with open(out, "w") as f:
        json.dump(doc, f)


def add_encryptor(src, dst):
    """The bag header record with an `encryptor` field added, still 4096
    bytes (the padding shrinks)."""
    with open(src, "rb") as f:
        data = bytearray(f.read())
    magic = len(b"#ROSBAG V2.0\n")
    (header_len,) = struct.unpack_from("<I", data, magic)
    header = bytes(data[magic + 4:magic + 4 + header_len])
    value = b"encryptor=rosbag/AesCbcEncryptor"
    header += struct.pack("<I", len(value)) + value
    padding = 4096 - 8 - len(header)
    record = struct.pack("<I", len(header)) + header + struct.pack("<I", padding) + b" " * padding
    data[magic:magic + 4096] = record
    with open(dst, "wb") as f:
        f.write(data)


def main(argv):
    if len(argv) == 3 and argv[1] == "make":
        out = argv[2]
        os.makedirs(out, exist_ok=True)
        for compression in ("none", "bz2", "lz4"):
            path = f"{out}/{compression}.bag"
            write_bag(path, compression)
            dump(path, f"{out}/{compression}.json")
        add_encryptor(f"{out}/none.bag", f"{out}/encrypted.bag")
    elif len(argv) == 4 and argv[1] == "dump":
        dump(argv[2], argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
