#!/usr/bin/env python3
"""Prints the CAN frames of a bag as `candump -L` lines, decoded by readers
that share no code with edgerec: Python `mcap` (every chunk CRC checked)
and `mcap-ros2-support` (CDR decoded from the schema text in the file).

usage: verify_can_bag.py BAG_DIR_OR_MCAP > frames.log

Every can_msgs/msg/Frame and ros2_socketcan_msgs/msg/FdFrame message of the
closed segments (segment order), merged by log time (a tie keeps topic
order), one line each, formatted as can-utils' lib.c prints a frame:
3 hex digits for a standard id, 8 for an extended id or an error frame
(with CAN_ERR_FLAG 0x20000000), `R` and the length for a remote request,
`_<dlc>` for a raw DLC above 8, `##<flags>` for CAN FD, whose flags
(brs 1, esi 2, fdf 4) edgerec keeps as words after the interface in
header.frame_id. The header stamp must equal the log time. Exit 0; 1 on a
message that does not decode; 77 when the readers cannot be imported.
"""
import sys
from pathlib import Path

try:
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory
except ImportError as err:  # pragma: no cover - environment probe
    print(f"SKIP: cannot import the reference readers: {err}", file=sys.stderr)
    sys.exit(77)

FRAME = "can_msgs/msg/Frame"
FD_FRAME = "ros2_socketcan_msgs/msg/FdFrame"
FLAG_WORDS = {"brs": 1, "esi": 2, "fdf": 4, "flag8": 8}


def segments(path: Path):
    if path.is_file():
        return [path]
    def index(p):
        return int(p.name.split(".")[0].rsplit("_", 1)[1])
    return sorted(path.glob("*.mcap"), key=index)


def line(log_time, msg, fd):
    us = log_time // 1000
    words = msg.header.frame_id.split(" ")
    iface, flags = words[0], sum(FLAG_WORDS[w] for w in words[1:])
    stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
    if stamp != log_time:
        raise ValueError(f"header.stamp {stamp} != log time {log_time}")
    data = bytes(msg.data)
    if msg.is_error:
        ident = f"{msg.id | 0x20000000:08X}"
    elif msg.is_extended:
        ident = f"{msg.id:08X}"
    else:
        ident = f"{msg.id:03X}"
    if fd:
        if msg.len != len(data):
            raise ValueError(f"len {msg.len} but {len(data)} data bytes")
        frame = f"{ident}##{flags:X}{data.hex().upper()}"
    else:
        n = min(msg.dlc, 8)
        tail = f"_{msg.dlc:X}" if msg.dlc > 8 else ""
        if msg.is_rtr:
            frame = f"{ident}#R{n if n else ''}{tail}"
        else:
            frame = f"{ident}#{data[:n].hex().upper()}{tail}"
    return f"({us // 1_000_000:010d}.{us % 1_000_000:06d}) {iface} {frame}"


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = []
    factory = DecoderFactory()
    decoders = {}
    for seg in segments(Path(sys.argv[1])):
        with open(seg, "rb") as f:
            reader = make_reader(f, validate_crcs=True)
            for schema, channel, message in reader.iter_messages():
                if schema is None or schema.name not in (FRAME, FD_FRAME):
                    continue
                if schema.id not in decoders:
                    decoders[schema.id] = factory.decoder_for(channel.message_encoding, schema)
                msg = decoders[schema.id](message.data)
                out.append((message.log_time, channel.topic, line(message.log_time, msg, schema.name == FD_FRAME)))
    out.sort(key=lambda x: (x[0], x[1]))
    sys.stdout.write("".join(l + "\n" for _, _, l in out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
