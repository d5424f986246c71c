#!/usr/bin/env python3
"""Self-test of ros2peer.py: every type's encoding against rosbags', then
real DDS traffic between its peers. Run by ros2peer_selftest.sh, which makes
the network namespace (the peers refuse to run outside one). Prints a PASS or
FAIL line per check and exits 1 if any failed.
"""

import dataclasses
import hashlib
import json
import select
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rosbags.interfaces import Nodetype
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import ros2peer  # noqa: E402

PEER = [sys.executable, str(HERE / "ros2peer.py")]


class Failed(Exception):
    """A check did not hold; the message says what was seen."""


# ---------------------------------------------------------------------------
# Encodings: every ros2peer type against rosbags' serialize_cdr, an encoder
# that shares nothing with cyclonedds'. The .msg text of the types rosbags'
# Humble store lacks is written here, apart from ros2peer's structs.

EMPTY = "uint8 structure_needs_at_least_one_member\n"
MSGDEFS = {
    "edgerec_test_msgs/msg/Custom": "builtin_interfaces/Time stamp\nuint32 seq\n"
                                    "string label\nfloat32[] values\nbool flag\nint16 code\n",
    # rosbags takes only pkg/msg/Name; the name is not part of the CDR.
    "rosbag2_interfaces/msg/Pause_Request": EMPTY,
    "rosbag2_interfaces/msg/Pause_Response": EMPTY,
    "rosbag2_interfaces/msg/Resume_Request": EMPTY,
    "rosbag2_interfaces/msg/Resume_Response": EMPTY,
    "rosbag2_interfaces/msg/IsPaused_Request": EMPTY,
    "rosbag2_interfaces/msg/IsPaused_Response": "bool paused\n",
    "rosbag2_interfaces/msg/SplitBagfile_Request": EMPTY,
    "rosbag2_interfaces/msg/SplitBagfile_Response": EMPTY,
    "std_srvs/msg/Trigger_Request": EMPTY,
    "std_srvs/msg/Trigger_Response": "bool success\nstring message\n",
}
CDR_LE_HEADER = b"\x00\x01\x00\x00"  # XCDR1 little endian, as rmw_cyclonedds writes
RMW_HEADER = ("header_guid", "header_seq")


def rosbags_store():
    store = get_typestore(Stores.ROS2_HUMBLE)
    types = {}
    for name, text in MSGDEFS.items():
        types.update(get_types_from_msg(text, name))
    store.register(types)
    return store


def to_rosbags(store, ros_name: str, value, skip=()) -> object:
    """The same values as an instance of rosbags' class for `ros_name`."""
    def conv(node: tuple, v: object) -> object:
        ntype, desc = node
        if ntype == Nodetype.BASE:
            return v
        if ntype == Nodetype.NAME:
            return to_rosbags(store, desc, v)
        elem, _ = desc  # ARRAY or SEQUENCE: (element node, length or bound)
        if elem[0] == Nodetype.BASE and elem[1][0] != "string":
            dtype = {"byte": "uint8", "char": "uint8"}.get(elem[1][0], elem[1][0])
            return np.frombuffer(v, dtype=dtype) if isinstance(v, bytes) \
                else np.array(v, dtype=dtype)
        return [conv(elem, x) for x in v]

    _, fields = store.fielddefs[ros_name]
    return store.types[ros_name](**{name: conv(node, getattr(value, name))
                                    for name, node in fields if name not in skip})


def check_cdr() -> list[tuple[str, bool, str]]:
    """(type, ok, detail) per message type and service part."""
    store = rosbags_store()
    results = []
    for kind in ros2peer.MESSAGES.values():
        # An odd payload size makes the end padding show.
        sample = kind.make(7, 1_700_000_000_123_456_789,
                           ros2peer.Payload(33) if kind.has_payload else None)
        ours = sample.serialize(use_version_2=False)
        theirs = bytes(store.serialize_cdr(to_rosbags(store, kind.ros_name, sample),
                                           kind.ros_name))
        results.append(compare(kind.ros_name, ours, theirs, sample, kind.decoder))
        # The topic's type (sequence[uint8]) encodes as its `bytes` twin does.
        if kind.codec and kind.idl.deserialize(ours).serialize(use_version_2=False) != ours:
            results.append((kind.ros_name, False, "the bytes twin and the topic type differ"))
    guid, seq = 0x0123456789ABCDEF, 42
    for svc in ros2peer.SERVICES.values():
        for part, cls in (("_Request", svc.request), ("_Response", svc.response)):
            sample = cls(header_guid=guid, header_seq=seq)
            for f in dataclasses.fields(cls):
                if f.type is bool:
                    setattr(sample, f.name, True)
                elif f.type is str:
                    setattr(sample, f.name, "odd")
            name = svc.ros_name.replace("/srv/", "/msg/") + part
            body = store.serialize_cdr(to_rosbags(store, name, sample, skip=RMW_HEADER), name)
            # rmw_cyclonedds' header by hand: u64 guid, i64 seq, little endian.
            theirs = CDR_LE_HEADER + struct.pack("<Qq", guid, seq) + bytes(body)[4:]
            ours = sample.serialize(use_version_2=False)
            results.append(compare(svc.ros_name + part, ours, theirs, sample, cls))
    return results


def compare(name: str, ours: bytes, theirs: bytes, sample, cls: type) -> tuple[str, bool, str]:
    if ours != theirs:
        return (name, False, f"ros2peer {ours.hex()} != rosbags {theirs.hex()}")
    if ours[:4] != CDR_LE_HEADER:
        return (name, False, f"encapsulation {ours[:4].hex()}, want {CDR_LE_HEADER.hex()}")
    if cls.deserialize(ros2peer.pad4(ours)) != sample:
        return (name, False, "the padded bytes do not decode to the same values")
    return (name, True, f"{len(ours)} bytes equal to rosbags serialize_cdr")


# ---------------------------------------------------------------------------
# Exchanges between peers

def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(PEER + list(args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: float, ok_codes=(0,)) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise Failed(f"{' '.join(proc.args[2:4])} did not end in {timeout} s: {err.strip()}")
    if proc.returncode not in ok_codes:
        raise Failed(f"{' '.join(proc.args[2:4])} exited {proc.returncode}: {err.strip()}")
    return proc.returncode, out, err


def stop(proc: subprocess.Popen) -> None:
    """Ends a peer this test started (after another one failed)."""
    proc.terminate()
    try:
        proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def last_json(text: str) -> dict:
    lines = [line for line in text.splitlines() if line.startswith("{")]
    if not lines:
        raise Failed(f"no JSON summary in {text!r}")
    return json.loads(lines[-1])


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def exchange(tmp: Path, name: str, topic: str, ros_type: str, count: int, rate: float,
             pub_args=(), sub_args=(), min_received=None) -> tuple[dict, list, list]:
    """A subscriber, then a publisher that waits for it; returns the
    publisher's summary, the subscriber's lines and the record."""
    out, rec = tmp / f"{name}.sub.jsonl", tmp / f"{name}.rec.jsonl"
    sub = start("subscribe", "--topic", topic, "--type", ros_type, "--count", str(count),
                "--duration", "20" if min_received is None else "8", "--out", str(out),
                *sub_args)
    pub = start("publish", "--topic", topic, "--type", ros_type, "--count", str(count),
                "--rate", str(rate), "--wait-readers", "1", "--start-delay", "0.5",
                "--record", str(rec), *pub_args)
    try:
        _, pub_out, _ = finish(pub, 60)
    except Failed:
        stop(sub)
        raise
    finish(sub, 30, ok_codes=(0,) if min_received is None else (0, ros2peer.EXIT_TIMEOUT))
    return last_json(pub_out), read_jsonl(out), read_jsonl(rec)


def check_samples(lines: list, count: int, ros_type: str, exact: bool = True) -> None:
    """Each sample carries its seq; stamps equal source timestamps."""
    seqs = [line["seq"] for line in lines]
    if exact and seqs != list(range(count)):
        raise Failed(f"seqs {seqs[:10]}... of {len(seqs)}, want 0..{count - 1} in order")
    if not exact and (seqs != sorted(set(seqs)) or not set(seqs) <= set(range(count))):
        raise Failed(f"seqs out of order or unknown: {seqs}")
    for line in lines:
        decoded = line["decoded"]
        stamp = (decoded.get("header") or {}).get("stamp") or decoded.get("stamp")
        if stamp and stamp["sec"] * 10**9 + stamp["nanosec"] != line["source_timestamp_ns"]:
            raise Failed(f"{ros_type} seq {line['seq']}: stamp {stamp} != source timestamp "
                         f"{line['source_timestamp_ns']}")


def check_record(lines: list, record: list) -> str:
    """Byte for byte: what the subscriber got is what publish recorded."""
    by_seq = {r["seq"]: r for r in record}
    for line in lines:
        r = by_seq.get(line["seq"])
        if r is None:
            raise Failed(f"seq {line['seq']} received but not in the record")
        if line["cdr_hex"] != r["cdr_hex"]:
            raise Failed(f"seq {line['seq']}: received {line['cdr_hex'][:64]}... "
                         f"!= recorded {r['cdr_hex'][:64]}...")
        if line["source_timestamp_ns"] != r["source_timestamp_ns"]:
            raise Failed(f"seq {line['seq']}: source timestamp {line['source_timestamp_ns']} "
                         f"!= recorded {r['source_timestamp_ns']}")
        if r["size"] % 4 or r["size"] != len(r["cdr_hex"]) // 2:
            raise Failed(f"seq {line['seq']}: recorded size {r['size']} not padded to 4")
    return f"{len(lines)} samples equal to the record byte for byte"


def test_imu_best_effort(tmp: Path) -> str:
    count = 50
    _, lines, _ = exchange(tmp, "imu_be", "/selftest/imu_be", "sensor_msgs/msg/Imu", count, 100,
                           pub_args=("--reliability", "best_effort"),
                           sub_args=("--reliability", "best_effort"), min_received=True)
    # Best effort may lose a sample on a loaded machine; 90% is the bar.
    if len(lines) < 0.9 * count:
        raise Failed(f"{len(lines)} of {count} received")
    check_samples(lines, count, "sensor_msgs/msg/Imu", exact=False)
    return f"{len(lines)} of {count} received, seq and stamps check"


def test_imu_reliable_record(tmp: Path) -> str:
    count = 50
    summary, lines, record = exchange(tmp, "imu_rel", "/selftest/imu", "sensor_msgs/msg/Imu",
                                      count, 100)
    check_samples(lines, count, "sensor_msgs/msg/Imu")
    if summary["acked"] is not True:
        raise Failed(f"publisher summary {summary}")
    return f"{count} of {count} in order; " + check_record(lines, record)


def test_transient_local(tmp: Path) -> str:
    out = tmp / "tf_static.sub.jsonl"
    pub = start("publish", "--topic", "/selftest/tf_static", "--type", "tf2_msgs/msg/TFMessage",
                "--durability", "transient_local", "--count", "1", "--linger", "30")
    try:
        ready, _, _ = select.select([pub.stdout], [], [], 20)
        if not ready:
            raise Failed("publisher printed no summary in 20 s")
        summary = json.loads(pub.stdout.readline())
        if summary.get("sent") != 1:
            raise Failed(f"publisher summary {summary}")
        joined_ns = time.time_ns()
        sub = start("subscribe", "--topic", "/selftest/tf_static", "--type",
                    "tf2_msgs/msg/TFMessage", "--durability", "transient_local",
                    "--count", "1", "--duration", "10", "--out", str(out))
        finish(sub, 30)
    finally:
        pub.terminate()
        finish(pub, 10)
    lines = read_jsonl(out)
    check_samples(lines, 1, "tf2_msgs/msg/TFMessage")
    if lines[0]["source_timestamp_ns"] >= joined_ns:
        raise Failed("the sample was written after the subscriber started")
    return "a sample written before the subscriber existed reached it"


def test_two_types_one_topic(tmp: Path) -> str:
    """Two publisher processes, one topic name, two types: each reader gets
    its own type only."""
    procs = []
    count, topic = 20, "/selftest/mixed"
    kinds = {"string": "std_msgs/msg/String", "custom": "edgerec_test_msgs/msg/Custom"}
    for name, ros_type in kinds.items():
        procs.append(start("subscribe", "--topic", topic, "--type", ros_type, "--count",
                           str(count), "--duration", "20", "--out", str(tmp / f"{name}.sub.jsonl")))
    for name, ros_type in kinds.items():
        procs.append(start("publish", "--topic", topic, "--type", ros_type, "--count", str(count),
                           "--rate", "50", "--wait-readers", "1", "--start-delay", "0.5",
                           "--record", str(tmp / f"{name}.rec.jsonl")))
    for proc in procs:
        finish(proc, 60)
    for name, ros_type in kinds.items():
        lines = read_jsonl(tmp / f"{name}.sub.jsonl")
        check_samples(lines, count, ros_type)
        check_record(lines, read_jsonl(tmp / f"{name}.rec.jsonl"))
    return f"{count} String and {count} Custom samples, each equal to its record"


def test_large_samples(tmp: Path) -> str:
    count, size = 20, 1 << 20
    # KEEP_ALL: the writer waits for this slow reader (it writes 2 MiB of hex
    # a sample) instead of overwriting what it has not acknowledged.
    summary, lines, _ = exchange(tmp, "image", "/selftest/image", "sensor_msgs/msg/Image", count,
                                 50, pub_args=("--payload-bytes", str(size), "--depth", "0",
                                               "--max-blocking-ms", "10000"))
    check_samples(lines, count, "sensor_msgs/msg/Image")
    payload = ros2peer.Payload(size)
    for line in lines:
        want = hashlib.sha256(payload.at(line["seq"])).hexdigest()
        if line["decoded"]["data"] != {"len": size, "sha256": want}:
            raise Failed(f"seq {line['seq']}: data {line['decoded']['data']}")
    return f"{count} x {line['size']} bytes (KEEP_ALL), payloads check, sent at " \
           f"{summary['achieved_rate_hz']:.1f} Hz"


SERVICE_RESPONSES = {
    "rosbag2_interfaces/srv/IsPaused": {"paused": True},
    "std_srvs/srv/Trigger": {"success": True, "message": "triggered"},
}


def test_service(tmp: Path, ros_type: str) -> str:
    service = "/selftest/" + ros_type.rsplit("/", 1)[1].lower()
    response = SERVICE_RESPONSES.get(ros_type, {})
    serve = start("serve", "--service", service, "--type", ros_type, "--count", "1",
                  "--duration", "30", "--response", json.dumps(response))
    try:
        _, call_out, _ = finish(start("call", "--service", service, "--type", ros_type,
                                      "--timeout", "15"), 30)
    except Failed:
        stop(serve)
        raise
    _, serve_out, _ = finish(serve, 30)
    reply, served = last_json(call_out), last_json(serve_out)
    want = response or {"structure_needs_at_least_one_member": 0}
    if reply["response"] != want:
        raise Failed(f"response {reply['response']}, want {want}")
    if (served["header_guid"], served["header_seq"]) != (reply["header_guid"], 1):
        raise Failed(f"server saw header {served['header_guid']}/{served['header_seq']}, "
                     f"client sent {reply['header_guid']}/1")
    if served["client_id"] != reply["client_id"]:
        raise Failed(f"server saw clientid {served['client_id']!r}, "
                     f"client has {reply['client_id']!r}")
    return f"reply {reply['response']} in {reply['latency_ms']:.1f} ms"


def test_call_timeout(tmp: Path) -> str:
    rc, _, err = finish(start("call", "--service", "/selftest/nobody", "--type",
                              "std_srvs/srv/Trigger", "--timeout", "1"),
                        30, ok_codes=(ros2peer.EXIT_TIMEOUT,))
    if "no service /selftest/nobody" not in err:
        raise Failed(f"stderr {err!r}")
    return f"exit {rc}: {err.strip()}"


def main() -> int:
    passed = failed = 0

    def report(name: str, ok: bool, detail: str) -> None:
        nonlocal passed, failed
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)
        passed, failed = passed + ok, failed + (not ok)

    for name, ok, detail in check_cdr():
        report(f"cdr {name}", ok, detail)

    tests = [
        ("imu best_effort", test_imu_best_effort),
        ("imu reliable + record", test_imu_reliable_record),
        ("tf_static transient_local", test_transient_local),
        ("one topic, two types", test_two_types_one_topic),
        ("image 1 MiB", test_large_samples),
        *[(f"service {t}", lambda tmp, t=t: test_service(tmp, t)) for t in ros2peer.SERVICES],
        ("call timeout", test_call_timeout),
    ]
    with tempfile.TemporaryDirectory(prefix="ros2peer-selftest.") as tmp:
        for name, test in tests:
            try:
                report(name, True, test(Path(tmp)))
            except (Failed, OSError, ValueError, KeyError) as e:
                report(name, False, f"{type(e).__name__}: {e}" if not isinstance(e, Failed)
                       else str(e))
    print(f"ros2peer self-test: {passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
