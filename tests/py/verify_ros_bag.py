#!/usr/bin/env python3
"""Checks a bag edgerec recorded from live ROS 2 publishers against what the
publishers say they sent (tests/py/ros2peer.py publish --record files).

usage: verify_ros_bag.py BAG_DIR TOPIC=RECORD.jsonl [TOPIC=RECORD.jsonl ...]
       [--latched TOPIC ...] [--undecodable TOPIC ...]

With two readers that share no code with edgerec:
  1. `mcap` (+ `mcap-ros2-support`): every segment read with CRC checks; for
     each topic the messages, in log-time order across segments (a latched
     topic's repeats at the start of each later segment left out), are byte
     for byte the samples the publisher wrote, in its order, none missing;
     publish_time equals the publisher's source timestamp; every message of a
     topic with a schema decodes from the schema text in the file.
  2. `rosbags`: opens the directory through metadata.yaml, and its per-topic
     message counts match.
A --latched topic must be in every segment. Exit 1 on the first mismatch.
"""
import json
import sys
from pathlib import Path

from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.rosbag2 import Reader as BagReader


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def main():
    args = sys.argv[1:]
    if not args:
        fail(__doc__)
    bag = Path(args.pop(0))
    expected, latched, undecodable = {}, set(), set()
    mode = None
    for a in args:
        if a == "--latched":
            mode = latched
        elif a == "--undecodable":
            mode = undecodable
        elif mode is not None:
            mode.add(a)
        else:
            topic, path = a.split("=", 1)
            expected[topic] = [json.loads(line) for line in Path(path).read_text().splitlines() if line]
    segments = sorted(bag.glob("*.mcap"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    if not segments:
        fail(f"no .mcap in {bag}")
    got = {t: [] for t in expected}
    per_segment = []
    decoders = DecoderFactory()
    for seg in segments:
        seen = {}
        with open(seg, "rb") as f:
            reader = make_reader(f, validate_crcs=True)
            for schema, channel, msg in reader.iter_messages(log_time_order=True):
                seen.setdefault(channel.topic, []).append(msg)
                if channel.topic in got:
                    got[channel.topic].append((seg.name, msg))
                if schema is not None and schema.data and channel.topic not in undecodable:
                    dec = decoders.decoder_for(channel.message_encoding, schema)
                    if dec is None:
                        fail(f"{seg.name}: no decoder for {channel.topic} ({schema.name})")
                    dec(msg.data)
                elif channel.topic not in undecodable:
                    fail(f"{seg.name}: {channel.topic} has no schema")
        per_segment.append((seg.name, seen))
    for t in latched:
        for name, seen in per_segment:
            if t not in seen:
                fail(f"latched {t} missing from {name}")
    for t, want in expected.items():
        msgs = got[t]
        if t in latched:
            # A latched message is repeated at the start of each segment:
            # keep each (publish_time, data) once.
            uniq, keys = [], set()
            for name, m in msgs:
                k = (m.publish_time, bytes(m.data))
                if k not in keys:
                    keys.add(k)
                    uniq.append((name, m))
            msgs = uniq
        if len(msgs) != len(want):
            fail(f"{t}: {len(msgs)} messages in the bag, the publisher sent {len(want)}")
        for i, ((name, m), w) in enumerate(zip(msgs, want)):
            if bytes(m.data).hex() != w["cdr_hex"]:
                fail(f"{t}: message {i} ({name}) differs from sample seq {w['seq']}")
            if m.publish_time != w["source_timestamp_ns"]:
                fail(f"{t}: message {i} publish_time {m.publish_time} != source timestamp {w['source_timestamp_ns']}")
        print(f"mcap    {t}: {len(want)} messages, in order, byte-identical, publish_time = source timestamp")
    counts = {}
    with BagReader(bag) as r:
        for conn, _, _ in r.messages():
            counts[conn.topic] = counts.get(conn.topic, 0) + 1
    for t, want in expected.items():
        n = counts.get(t, 0)
        lo = len(want)
        hi = len(want) + (len(segments) - 1 if t in latched else 0)
        if not lo <= n <= hi:
            fail(f"rosbags {t}: {n} messages, expected {lo}..{hi}")
        print(f"rosbags {t}: {n} messages through metadata.yaml")
    print(f"PASS {bag}: {len(segments)} segment(s)")


if __name__ == "__main__":
    main()
