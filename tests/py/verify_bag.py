#!/usr/bin/env python3
"""Independent verification of a bag directory recorded by edgerec.

Two readers that share no code with edgerec (nor with each other):
  1. `mcap` + `mcap-ros2-support`: reads every segment with CRC validation and
     decodes every message from the schema text stored in the file;
  2. `rosbags`: opens the bag directory through metadata.yaml and decodes
     every message with its own type store.

For every message the synthetic source's contract is checked (see
crates/synthetic/src/encode.rs): the embedded sequence number, header.stamp
== publish_time, the deterministic field values and the full data payload.
Per topic: sequence numbers strictly increase, the number missing equals the
drops edgerec reported, and the count equals what edgerec said it wrote.

A message whose payload is only the 4-byte CDR encapsulation header was cut
on purpose by `fault = "malformed-every:N"` (crates/synthetic/src/fault.rs):
both readers skip it undecoded and count it; it counts as written, and its
sequence number as missing, like a drop.

usage: verify_bag.py BAG_DIR REPORT_JSON
Prints one line per topic and reader; exits 1 on the first mismatch.
"""
import json
import math
import sys
from pathlib import Path

from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.rosbag2 import Reader as BagReader
from rosbags.typesys import Stores, get_typestore, get_types_from_msg

MASK = (1 << 64) - 1
# The payload of a message cut by fault = "malformed-every:N".
MALFORMED = bytes([0, 1, 0, 0])
_patterns = {}


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def pattern(topic, n):
    """crates/synthetic/src/encode.rs fill_pattern()."""
    key = (topic, n)
    if key in _patterns:
        return _patterns[key]
    half = n // 2
    out = bytearray(n)
    for i in range(half):
        out[i] = (i // 64) & 0xFF
    h = 0
    for c in topic.encode():
        h = (h * 31 + c) & MASK
    x = 0x9E3779B97F4A7C15 ^ h
    for i in range(half, n):
        x ^= (x << 13) & MASK
        x ^= x >> 7
        x ^= (x << 17) & MASK
        out[i] = x & 0xFF
    _patterns[key] = bytes(out)
    return _patterns[key]


def stamp_ns(header):
    return header.stamp.sec * 1_000_000_000 + header.stamp.nanosec


def check_message(topic, type_name, m, publish_time):
    """Returns the embedded sequence number after checking every field;
    None for edgerec's own topics, which carry none (they are numbered in
    the order read)."""
    if topic == "/edgerec/status":
        try:
            status = json.loads(m.data)
        except ValueError as err:
            fail(f"{topic}: not JSON: {err}: {m.data[:80]!r}")
        missing = [k for k in ("schema", "state", "clock", "storage", "sources", "channels", "metrics") if k not in status]
        if status.get("schema") != 2 or missing:
            fail(f"{topic}: schema {status.get('schema')}, missing {missing}")
        return None
    if topic == "/edgerec/clock":
        if type_name != "edgerec_msgs/msg/ClockQuality" or m.state not in (0, 1, 2, 3) or not m.source:
            fail(f"{topic}: {type_name} state {m.state} source {m.source!r}")
        if m.stamp.sec * 1_000_000_000 + m.stamp.nanosec != publish_time:
            fail(f"{topic}: stamp differs from publish_time")
        return None
    if type_name == "std_msgs/msg/String":
        if not m.data.startswith("seq="):
            fail(f"{topic}: string does not start with seq=: {m.data[:30]!r}")
        return int(m.data[4:24])
    if stamp_ns(m.header) != publish_time:
        fail(f"{topic}: header.stamp {stamp_ns(m.header)} != publish_time {publish_time}")
    if type_name == "sensor_msgs/msg/BatteryState":
        # crates/synthetic/src/battery.rs expected_battery().
        if not m.serial_number.startswith("seq="):
            fail(f"{topic}: serial_number does not start with seq=: {m.serial_number[:30]!r}")
        seq = int(m.serial_number[4:24])
        cells = list(m.cell_voltage)
        if len(cells) != 3 or any(abs(c - m.voltage / 3) > 1e-4 for c in cells):
            fail(f"{topic}: cell_voltage {cells} for voltage {m.voltage} at seq {seq}")
        if list(m.cell_temperature) != [25.0] * 3 or m.location != "synthetic" or not m.present:
            fail(f"{topic}: fixed fields differ from the synthetic battery's at seq {seq}")
        return seq
    if type_name == "sensor_msgs/msg/Imu":
        seq = int(m.angular_velocity.x)
        a = seq * 1e-3
        want = [0.0, 0.0, math.sin(a / 2), math.cos(a / 2)]
        got = [m.orientation.x, m.orientation.y, m.orientation.z, m.orientation.w]
        if any(abs(g - w) > 1e-12 for g, w in zip(got, want)):
            fail(f"{topic}: orientation {got} != {want} at seq {seq}")
        if (m.angular_velocity.y, m.angular_velocity.z) != (0.5, -0.25):
            fail(f"{topic}: angular_velocity {m.angular_velocity}")
        if m.linear_acceleration.z != 9.80665:
            fail(f"{topic}: linear_acceleration {m.linear_acceleration}")
        if list(m.angular_velocity_covariance)[::4] != [0.02, 0.02, 0.02]:
            fail(f"{topic}: angular_velocity_covariance {list(m.angular_velocity_covariance)}")
        return seq
    data = bytes(m.data)
    seq = int.from_bytes(data[:8], "little")
    if data[8:] != pattern(topic, len(data))[8:]:
        fail(f"{topic}: data payload differs from the synthetic pattern at seq {seq}")
    if type_name == "sensor_msgs/msg/Image":
        if m.height * m.step != len(data):
            fail(f"{topic}: height*step {m.height}*{m.step} != {len(data)}")
        if m.encoding not in ("rgb8", "mono8"):
            fail(f"{topic}: encoding {m.encoding}")
    elif type_name == "sensor_msgs/msg/PointCloud2":
        if [f.name for f in m.fields] != ["x", "y", "z", "intensity"]:
            fail(f"{topic}: fields {[f.name for f in m.fields]}")
        if m.point_step != 16 or m.width * 16 != len(data) or m.row_step != len(data):
            fail(f"{topic}: geometry {m.width}x{m.height} step {m.point_step}")
    return seq


class TopicLog:
    def __init__(self):
        self.seqs = []
        self.log_times = []
        self.repeats = 0
        self.malformed = 0

    def add(self, seq, log_time, segment_start):
        """A latched channel's last message is written again at the start
        of every new segment with the same sequence number: count it once."""
        if segment_start and self.seqs and seq == self.seqs[-1]:
            self.repeats += 1
            return
        self.seqs.append(seq)
        self.log_times.append(log_time)

    def verify(self, topic, reader, written, dropped):
        n = len(self.seqs)
        if n + self.malformed != written:
            fail(f"{reader} {topic}: {n} messages and {self.malformed} malformed, edgerec wrote {written}")
        if any(b <= a for a, b in zip(self.seqs, self.seqs[1:])):
            fail(f"{reader} {topic}: sequence numbers not strictly increasing")
        if n:
            # Seqs start at 0 at the source; the ones missing are drops.
            missing = self.seqs[-1] + 1 - n
            if missing > dropped + self.malformed:
                fail(f"{reader} {topic}: {missing} sequence numbers missing, edgerec reported {dropped} drops")
        if any(b < a for a, b in zip(self.log_times, self.log_times[1:])):
            fail(f"{reader} {topic}: log times go backwards")
        print(f"ok {reader:8} {topic}: {n} messages, seq {self.seqs[0] if n else '-'}..{self.seqs[-1] if n else '-'}, {dropped} drops, {self.malformed} malformed, {self.repeats} latched repeats")


def main():
    bag = Path(sys.argv[1])
    report = json.loads(Path(sys.argv[2]).read_text())
    chans = {c["topic"]: c for c in report["channels"]}

    # 1. mcap + mcap-ros2-support, every segment, CRCs validated.
    logs = {}
    types = {}
    latched = set()
    # topic -> segments after the one it first appeared in
    later_segments = {}
    factory = DecoderFactory()
    segments = sorted(bag.glob("*.mcap"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    if not segments:
        fail(f"no .mcap in {bag}")
    for seg in segments:
        started = set()
        with open(seg, "rb") as f:
            reader = make_reader(f, validate_crcs=True)
            summary = reader.get_summary()
            if summary is None or summary.statistics is None:
                fail(f"{seg}: no summary statistics")
            decoders = {}
            for schema, channel, message in reader.iter_messages():
                types[channel.topic] = schema.name
                if schema.encoding != "ros2msg" or channel.message_encoding != "cdr":
                    fail(f"{channel.topic}: encodings {schema.encoding}/{channel.message_encoding}")
                log = logs.setdefault(channel.topic, TopicLog())
                if message.data == MALFORMED:
                    log.malformed += 1
                    continue
                if schema.id not in decoders:
                    decoders[schema.id] = factory.decoder_for(channel.message_encoding, schema)
                decoded = decoders[schema.id](message.data)
                seq = check_message(channel.topic, schema.name, decoded, message.publish_time)
                if seq is None:
                    seq = len(log.seqs)
                first_in_segment = channel.topic not in started
                if first_in_segment and channel.topic in logs and logs[channel.topic].seqs:
                    later_segments[channel.topic] = later_segments.get(channel.topic, 0) + 1
                started.add(channel.topic)
                if "durability: 1" in channel.metadata.get("offered_qos_profiles", ""):
                    latched.add(channel.topic)
                log.add(seq, message.log_time, first_in_segment)
    for topic, c in chans.items():
        logs.get(topic, TopicLog()).verify(topic, "mcap", c["written"], c["dropped"] + c["lost"])
    for topic in latched:
        # Every segment after the topic's first starts with its last message.
        if logs[topic].repeats != later_segments.get(topic, 0):
            fail(f"latched {topic}: {logs[topic].repeats} repeats in {later_segments.get(topic, 0)} later segments")

    # 2. rosbags through metadata.yaml, its own type store.
    store = get_typestore(Stores.ROS2_HUMBLE)
    rlogs = {}
    with BagReader(bag) as r:
        meta_counts = {}
        for c in r.connections:
            meta_counts[c.topic] = meta_counts.get(c.topic, 0) + c.msgcount
        for conn in r.connections:
            if conn.msgtype not in store.types:
                store.register(get_types_from_msg(conn.msgdef.data, conn.msgtype))
        for conn, ts, raw in r.messages():
            log = rlogs.setdefault(conn.topic, TopicLog())
            if bytes(raw) == MALFORMED:
                log.malformed += 1
                continue
            m = store.deserialize_cdr(raw, conn.msgtype)
            pub = stamp_ns(m.header) if hasattr(m, "header") else ts
            seq = check_message(conn.topic, conn.msgtype, m, pub)
            if seq is None:
                seq = len(log.seqs)
            # rosbags merges the segments by time; a repeat arrives right
            # after its original (same sequence, same log time).
            log.add(seq, ts, True)
    for topic, c in chans.items():
        # metadata.yaml counts what is in the files, latched repeats included.
        want = c["written"] + logs.get(topic, TopicLog()).repeats
        if meta_counts.get(topic, 0) != want:
            fail(f"metadata.yaml says {meta_counts.get(topic)} messages on {topic}, the files hold {want}")
        rlogs.get(topic, TopicLog()).verify(topic, "rosbags", c["written"], c["dropped"] + c["lost"])
        if rlogs.get(topic, TopicLog()).seqs != logs.get(topic, TopicLog()).seqs:
            fail(f"{topic}: the two readers disagree on the sequence")
    total = sum(len(l.seqs) for l in logs.values())
    print(f"verified {total} messages on {len(logs)} topics with mcap+mcap-ros2-support and rosbags")


if __name__ == "__main__":
    main()
