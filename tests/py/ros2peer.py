#!/usr/bin/env python3
"""ROS 2 test peers that speak rmw_cyclonedds' wire format, without a ROS install.

edgerec's tests need real DDS peers on the other end, not code pretending to
be ROS. This module is such a peer: PyPI `cyclonedds` (the wheel bundles
libddsc) with the message types below declared the way rmw_cyclonedds names
and encodes them: topics `rt/<name>`, services `rq/<name>Request` and
`rr/<name>Reply`, types `<pkg>::msg::dds_::<Type>_`, keyless, final
extensibility, XCDR1 (encapsulation `00 01 00 00`, CDR little endian), so a
ROS 2 node on rmw_cyclonedds sees the topic names, type names and bytes it
would see from another node.

Subcommands (`ros2peer.py SUBCOMMAND --help` for every option):
  publish    N samples at a rate, each carrying its sequence number; writes a
             record file of the exact bytes a reader receives.
  subscribe  JSON lines per sample received: raw bytes and decoded fields.
  call       a service client with rmw_cyclonedds' request framing.
  serve      a service server, only a test double for the self-test of call.

Record file (publish --record) and subscriber output (subscribe --out) are
JSON lines, one object per sample; both carry `seq`, `source_timestamp_ns`
(the DDS source timestamp, ns since the Unix epoch) and `cdr_hex`: the bytes
a DDS reader receives, i.e. the 4-byte encapsulation header, the CDR body and
zero padding to a multiple of 4 (DDS pads the serialized payload). See
tests/README.md.

Network rule: DDS discovers by multicast, so every participant of a test runs
in a network namespace the test made (`unshare -n`, then `ip link set lo up`
and `ip link set lo multicast on`). This module refuses to create a
participant when the current namespace has any interface besides `lo`,
unless given --allow-real-network.

Exit status: 0 success, 1 error, 2 usage, 3 timeout (no reply, too few
samples or readers).
"""

import argparse
import dataclasses
import fcntl
import hashlib
import json
import math
import os
import re
import signal
import socket
import struct
import sys
import time
import types
from dataclasses import dataclass
from typing import Callable, Optional

from cyclonedds._clayer import ddspy_take, ddspy_write_ts
from cyclonedds.core import DDSException, Policy, Qos, ReadCondition, SampleState, ViewState
from cyclonedds.core import InstanceState, WaitSet
from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl.types import array, float32, float64, int16, int32, int64, sequence
from cyclonedds.idl.types import uint8, uint32, uint64
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic

EXIT_ERROR = 1
EXIT_TIMEOUT = 3


class PeerError(Exception):
    """A failure the peer reports with a message and exit status 1."""


class PeerTimeout(PeerError):
    """Something awaited did not happen in time: exit status 3."""


# ---------------------------------------------------------------------------
# Message types, ROS 2 Humble layouts, field names as in ROS (the self-test
# checks each encoding against rosbags' serialize_cdr).

@dataclass
class Time_(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
    sec: int32
    nanosec: uint32


@dataclass
class Header_(IdlStruct, typename="std_msgs::msg::dds_::Header_"):
    stamp: Time_
    frame_id: str


@dataclass
class String_(IdlStruct, typename="std_msgs::msg::dds_::String_"):
    data: str


@dataclass
class Empty_(IdlStruct, typename="std_msgs::msg::dds_::Empty_"):
    # rosidl gives every empty struct this member: IDL has no empty structs.
    structure_needs_at_least_one_member: uint8


@dataclass
class Vector3_(IdlStruct, typename="geometry_msgs::msg::dds_::Vector3_"):
    x: float64
    y: float64
    z: float64


@dataclass
class Quaternion_(IdlStruct, typename="geometry_msgs::msg::dds_::Quaternion_"):
    x: float64
    y: float64
    z: float64
    w: float64


@dataclass
class Transform_(IdlStruct, typename="geometry_msgs::msg::dds_::Transform_"):
    translation: Vector3_
    rotation: Quaternion_


@dataclass
class TransformStamped_(IdlStruct, typename="geometry_msgs::msg::dds_::TransformStamped_"):
    header: Header_
    child_frame_id: str
    transform: Transform_


@dataclass
class TFMessage_(IdlStruct, typename="tf2_msgs::msg::dds_::TFMessage_"):
    transforms: sequence[TransformStamped_]


@dataclass
class Imu_(IdlStruct, typename="sensor_msgs::msg::dds_::Imu_"):
    header: Header_
    orientation: Quaternion_
    orientation_covariance: array[float64, 9]
    angular_velocity: Vector3_
    angular_velocity_covariance: array[float64, 9]
    linear_acceleration: Vector3_
    linear_acceleration_covariance: array[float64, 9]


@dataclass
class Image_(IdlStruct, typename="sensor_msgs::msg::dds_::Image_"):
    header: Header_
    height: uint32
    width: uint32
    encoding: str
    is_bigendian: uint8
    step: uint32
    data: sequence[uint8]


@dataclass
class CompressedImage_(IdlStruct, typename="sensor_msgs::msg::dds_::CompressedImage_"):
    header: Header_
    format: str
    data: sequence[uint8]


# Codec twins of the two above: `bytes` is the same CDR as sequence<uint8>
# but (de)serializes in one copy, where sequence[uint8] costs about 32 ms per
# MiB. The topics keep the faithful types (cyclonedds builds no XTypes type
# object for `bytes`); samples are written pre-serialized (write_raw).
@dataclass
class ImageBytes_(IdlStruct, typename="sensor_msgs::msg::dds_::Image_"):
    header: Header_
    height: uint32
    width: uint32
    encoding: str
    is_bigendian: uint8
    step: uint32
    data: bytes


@dataclass
class CompressedImageBytes_(IdlStruct, typename="sensor_msgs::msg::dds_::CompressedImage_"):
    header: Header_
    format: str
    data: bytes


@dataclass
class KeyValue_(IdlStruct, typename="diagnostic_msgs::msg::dds_::KeyValue_"):
    key: str
    value: str


@dataclass
class DiagnosticStatus_(IdlStruct, typename="diagnostic_msgs::msg::dds_::DiagnosticStatus_"):
    level: uint8  # ROS `byte` is IDL octet: one byte either way
    name: str
    message: str
    hardware_id: str
    values: sequence[KeyValue_]


@dataclass
class DiagnosticArray_(IdlStruct, typename="diagnostic_msgs::msg::dds_::DiagnosticArray_"):
    header: Header_
    status: sequence[DiagnosticStatus_]


# A type no standard package has, for edgerec's "unknown type" test. Its
# fields mix alignments on purpose.
@dataclass
class Custom_(IdlStruct, typename="edgerec_test_msgs::msg::dds_::Custom_"):
    """edgerec_test_msgs/msg/Custom: builtin_interfaces/Time stamp, uint32
    seq, string label, float32[] values, bool flag, int16 code."""

    stamp: Time_
    seq: uint32
    label: str
    values: sequence[float32]
    flag: bool
    code: int16


@dataclass
class BatteryState_(IdlStruct, typename="sensor_msgs::msg::dds_::BatteryState_"):
    header: Header_
    voltage: float32
    temperature: float32
    current: float32
    charge: float32
    capacity: float32
    design_capacity: float32
    percentage: float32
    power_supply_status: uint8
    power_supply_health: uint8
    power_supply_technology: uint8
    present: bool
    cell_voltage: sequence[float32]
    cell_temperature: sequence[float32]
    location: str
    serial_number: str


# ---------------------------------------------------------------------------
# Service types. rmw_cyclonedds puts a 16-byte header before the request and
# response fields; the structs below carry it as their first two members.
#
# Verified against ros2/rmw_cyclonedds (Humble branch code, stored commit
# 00331934407c088ed07e93725faeab1e5a1d6da5, rmw_cyclonedds_cpp/src/):
# - serdata.hpp: `typedef struct cdds_request_header { uint64_t guid;
#   int64_t seq; } cdds_request_header_t;`.
# - Serialization.cpp, CDRWriter::serialize_top_level(cursor, const
#   cdds_request_wrapper_t &): put_rtps_header, then put_bytes(&guid, 8),
#   put_bytes(&seq, 8) (native order: little endian on x86_64/aarch64), then
#   the request/response struct; alignment counts from after the 4-byte
#   encapsulation (rebase(+4)), so the 16 header bytes leave the fields'
#   alignment unchanged.
# - rmw_node.cpp rmw_send_request: `header.guid = info->client.pub->pubiid`
#   (the client's request writer's instance handle, a u64, not a GUID) and
#   `header.seq = ++next_request_id` (a process-wide counter from 1).
# - rmw_node.cpp rmw_send_response: echoes the request's guid and seq.
#   rmw_take_response keeps a reply only if `srcfilter == wrap.header.guid`
#   with srcfilter = the client's own pubiid; rcl then matches seq.
# - rmw_node.cpp rmw_init_cs: topics rq/<svc>Request and rr/<svc>Reply, QoS
#   from the rmw profile (create_readwrite_qos; rcl's services default is
#   reliable, volatile, keep last 10), and USER_DATA "clientid=<id>;" on the
#   client's writer and reader ("serviceid=<id>;" on a service), <id> from
#   get_unique_csid + csid_to_string: participant GUID prefix (12 bytes) and a
#   big-endian counter, printed in hex, the first byte setw(2), the others
#   each after a '.'.
# - rmw_node.cpp check_for_response_reader: before replying, a service looks
#   up the request writer's "clientid" and waits up to 100 ms until its reply
#   writer has matched a reader with the same clientid, else drops the reply
#   (a writer without a clientid is answered at once).
# Iron and later (read in Postrantor/rmw_cyclonedds, an annotated copy of
# upstream rmw_node.cpp rmw_init_cs/create_readwrite_qos) append the Jazzy
# type hash to that USER_DATA, "clientid=<id>;typehash=RIHS01_<hex>;", the
# request type's hash on the request endpoint and the response type's on the
# reply endpoint; publishers and subscriptions carry "typehash=RIHS01_<hex>;"
# alone (rmw_dds_common encode_type_hash_for_user_data_qos).

def _service_struct(typename: str, fields: list[tuple[str, type, object]]) -> type:
    """A dataclass IdlStruct: rmw_cyclonedds' request header (header_guid,
    header_seq), then `fields` as (name, type, default)."""
    annotations = {"header_guid": uint64, "header_seq": int64}
    defaults: dict[str, object] = {"header_guid": 0, "header_seq": 0}
    for name, ftype, default in fields:
        annotations[name] = ftype
        defaults[name] = default

    def body(ns: dict) -> None:
        ns.update(defaults)
        ns["__annotations__"] = annotations

    cls = types.new_class(typename.split("::")[-1], (IdlStruct,), {"typename": typename}, body)
    return dataclass(cls)


EMPTY_FIELDS = [("structure_needs_at_least_one_member", uint8, 0)]


@dataclass(frozen=True)
class ServiceKind:
    """A service type: its request and response structs."""

    ros_name: str
    request: type
    response: type


def _service(ros_name: str, request_fields: list, response_fields: list) -> ServiceKind:
    pkg, _, srv = ros_name.split("/")
    base = f"{pkg}::srv::dds_::{srv}"
    return ServiceKind(ros_name, _service_struct(f"{base}_Request_", request_fields),
                       _service_struct(f"{base}_Response_", response_fields))


SERVICES: dict[str, ServiceKind] = {
    s.ros_name: s
    for s in [
        _service("rosbag2_interfaces/srv/Pause", EMPTY_FIELDS, EMPTY_FIELDS),
        _service("rosbag2_interfaces/srv/Resume", EMPTY_FIELDS, EMPTY_FIELDS),
        _service("rosbag2_interfaces/srv/IsPaused", EMPTY_FIELDS, [("paused", bool, False)]),
        _service("rosbag2_interfaces/srv/SplitBagfile", EMPTY_FIELDS, EMPTY_FIELDS),
        _service("std_srvs/srv/Trigger", EMPTY_FIELDS,
                 [("success", bool, False), ("message", str, "")]),
    ]
}


# ---------------------------------------------------------------------------
# Sample content: every sample carries its sequence number (frame_id
# "seq:<n>", or a field of its own) and, where the type has a stamp, the
# source timestamp it is written with, so a test can check both.

def stamp_of(ns: int) -> Time_:
    return Time_(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def header_of(seq: int, ns: int) -> Header_:
    return Header_(stamp=stamp_of(ns), frame_id=f"seq:{seq}")


def identity() -> Quaternion_:
    return Quaternion_(0.0, 0.0, 0.0, 1.0)


def transform_stamped(seq: int, ns: int) -> TransformStamped_:
    return TransformStamped_(
        header=header_of(seq, ns),
        child_frame_id=f"child:{seq}",
        transform=Transform_(Vector3_(float(seq), 0.5, -0.25), identity()),
    )


def imu(seq: int, ns: int) -> Imu_:
    cov = [float(seq)] + [0.0] * 8
    return Imu_(
        header=header_of(seq, ns),
        orientation=identity(),
        orientation_covariance=cov,
        angular_velocity=Vector3_(seq * 1e-3, 0.0, -seq * 1e-3),
        angular_velocity_covariance=cov,
        linear_acceleration=Vector3_(0.0, 0.0, 9.81),
        linear_acceleration_covariance=cov,
    )


class Payload:
    """Payload bytes that differ per sample without a per-byte Python loop:
    a slice of a 0..255 ramp, starting at seq % 256."""

    def __init__(self, size: int):
        self.size = size
        self._ramp = bytes(range(256)) * (size // 256 + 2)

    def at(self, seq: int) -> bytes:
        start = seq % 256
        return self._ramp[start:start + self.size]


def diagnostic_status(seq: int) -> DiagnosticStatus_:
    return DiagnosticStatus_(
        level=seq % 4,
        name=f"seq:{seq}",
        message="ok",
        hardware_id="edgerec-test",
        values=[KeyValue_("seq", str(seq))],
    )


def battery_state(seq: int, ns: int, volts: float = 12.6) -> BatteryState_:
    """A 3-cell pack at `volts` (publish --voltage gives a profile), the
    sequence number in serial_number as "seq:<n>"."""
    # float32 values in the sample, so that it equals what it decodes to.
    def f32(x: float) -> float:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    cell = f32(volts / 3)
    percentage = f32(min(max((cell - 3.0) / 1.2, 0.0), 1.0))
    return BatteryState_(
        header=header_of(seq, ns), voltage=f32(volts), temperature=25.0, current=-2.0,
        charge=f32(5.0 * percentage), capacity=5.0, design_capacity=5.0,
        percentage=percentage, power_supply_status=2, power_supply_health=1,
        power_supply_technology=2, present=True, cell_voltage=[cell] * 3,
        cell_temperature=[25.0] * 3, location="ros2peer", serial_number=f"seq:{seq}")


def voltage_profile(text: str) -> list[tuple[float, float]]:
    """--voltage: "12.6, 11.8@1.5s, 12.6@3.5s" (the syntax of edgerec's
    synthetic battery), piecewise constant from the first sample's stamp:
    [(from_s, volts), ...] in order, the first from 0."""
    steps = []
    for i, part in enumerate(p.strip() for p in text.split(",")):
        volts, _, at = part.partition("@")
        try:
            v = float(volts)
            t = float(at.removesuffix("s")) if at else None
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r}: want VOLTS or VOLTS@SECONDSs")
        if (i == 0) != (t is None) or (steps and t <= steps[-1][0]) or not math.isfinite(v):
            raise argparse.ArgumentTypeError(
                f"{text!r}: the first step has no time, the others increasing times")
        steps.append((0.0 if t is None else t, v))
    return steps


def volts_at(profile: list[tuple[float, float]], offset_s: float) -> float:
    return [v for t, v in profile if t <= offset_s][-1]


@dataclass(frozen=True)
class MessageKind:
    """A message type this peer publishes: its struct and how to fill one."""

    ros_name: str
    idl: type  # the topic's type
    # make(seq, stamp_ns, payload) -> a `codec` sample; payload is None for
    # types without a byte array.
    make: Callable[[int, int, Optional[Payload]], IdlStruct]
    # The struct that (de)serializes samples: `idl`, or its `bytes` twin.
    codec: Optional[type] = None
    has_payload: bool = False

    @property
    def decoder(self) -> type:
        return self.codec or self.idl


MESSAGES: dict[str, MessageKind] = {
    k.ros_name: k
    for k in [
        MessageKind("builtin_interfaces/msg/Time", Time_, lambda s, ns, p: stamp_of(ns)),
        MessageKind("std_msgs/msg/Header", Header_, lambda s, ns, p: header_of(s, ns)),
        MessageKind("std_msgs/msg/String", String_, lambda s, ns, p: String_(f"seq:{s}")),
        MessageKind("std_msgs/msg/Empty", Empty_, lambda s, ns, p: Empty_(0)),
        MessageKind("geometry_msgs/msg/Vector3", Vector3_,
                    lambda s, ns, p: Vector3_(float(s), 2.0 * s, 3.0 * s)),
        MessageKind("geometry_msgs/msg/Quaternion", Quaternion_,
                    lambda s, ns, p: Quaternion_(s * 1e-3, 0.0, 0.0, 1.0)),
        MessageKind("geometry_msgs/msg/Transform", Transform_,
                    lambda s, ns, p: Transform_(Vector3_(float(s), 0.0, 0.0), identity())),
        MessageKind("geometry_msgs/msg/TransformStamped", TransformStamped_,
                    lambda s, ns, p: transform_stamped(s, ns)),
        MessageKind("tf2_msgs/msg/TFMessage", TFMessage_,
                    lambda s, ns, p: TFMessage_([transform_stamped(s, ns)])),
        MessageKind("sensor_msgs/msg/Imu", Imu_, lambda s, ns, p: imu(s, ns)),
        MessageKind(
            "sensor_msgs/msg/Image", Image_,
            lambda s, ns, p: ImageBytes_(header_of(s, ns), height=1, width=p.size,
                                         encoding="mono8", is_bigendian=0, step=p.size,
                                         data=p.at(s)),
            codec=ImageBytes_, has_payload=True),
        MessageKind(
            "sensor_msgs/msg/CompressedImage", CompressedImage_,
            lambda s, ns, p: CompressedImageBytes_(header_of(s, ns), format="jpeg",
                                                   data=p.at(s)),
            codec=CompressedImageBytes_, has_payload=True),
        MessageKind("diagnostic_msgs/msg/KeyValue", KeyValue_,
                    lambda s, ns, p: KeyValue_("seq", str(s))),
        MessageKind("diagnostic_msgs/msg/DiagnosticStatus", DiagnosticStatus_,
                    lambda s, ns, p: diagnostic_status(s)),
        MessageKind("diagnostic_msgs/msg/DiagnosticArray", DiagnosticArray_,
                    lambda s, ns, p: DiagnosticArray_(header_of(s, ns), [diagnostic_status(s)])),
        MessageKind("sensor_msgs/msg/BatteryState", BatteryState_,
                    lambda s, ns, p: battery_state(s, ns)),
        MessageKind(
            "edgerec_test_msgs/msg/Custom", Custom_,
            lambda s, ns, p: Custom_(stamp_of(ns), seq=s, label=f"seq:{s}",
                                     values=[s * 0.5, -1.0, 2.25], flag=s % 2 == 0,
                                     code=(s % 65536) - 32768)),
    ]
}

DEFAULT_PAYLOAD_BYTES = 64


def message_kind(ros_type: str) -> MessageKind:
    try:
        return MESSAGES[ros_type]
    except KeyError:
        raise PeerError(f"unknown message type {ros_type!r}; known: {', '.join(MESSAGES)}")


def service_kind(ros_type: str) -> ServiceKind:
    try:
        return SERVICES[ros_type]
    except KeyError:
        raise PeerError(f"unknown service type {ros_type!r}; known: {', '.join(SERVICES)}")


def seq_of(sample: IdlStruct) -> Optional[int]:
    """The sequence number publish put in a sample; None where the type has
    no room for one (Time, Empty, Quaternion) or the sample came from
    elsewhere (edgerec's own /diagnostics)."""
    if isinstance(sample, Custom_):
        return sample.seq
    if isinstance(sample, Vector3_):
        return int(sample.x)
    if isinstance(sample, Transform_):
        return int(sample.translation.x)
    text = _seq_text(sample)
    if text is not None and text.startswith("seq:") and text[4:].isdigit():
        return int(text[4:])
    return None


def _seq_text(sample: IdlStruct) -> Optional[str]:
    """The string field publish writes "seq:<n>" into."""
    if hasattr(sample, "header"):
        return sample.header.frame_id
    if isinstance(sample, Header_):
        return sample.frame_id
    if isinstance(sample, String_):
        return sample.data
    if isinstance(sample, TFMessage_) and sample.transforms:
        return sample.transforms[0].header.frame_id
    if isinstance(sample, DiagnosticStatus_):
        return sample.name
    if isinstance(sample, KeyValue_):
        return f"seq:{sample.value}" if sample.key == "seq" else None
    return None


# ---------------------------------------------------------------------------
# Encoding helpers

def pad4(data: bytes) -> bytes:
    """The serialized payload as a DDS reader receives it: DDS pads the
    payload to a multiple of 4 (cyclonedds' DataWriter.write does the same)."""
    return data + b"\0" * (-len(data) % 4)


def wire_bytes(sample: IdlStruct) -> bytes:
    # XCDR1, as rmw_cyclonedds writes (final structs, no DHEADERs).
    return pad4(sample.serialize(use_version_2=False))


def to_jsonable(value: object) -> object:
    """Decoded fields for JSON; byte arrays as their length and SHA-256
    (the raw hex is beside them)."""
    if dataclasses.is_dataclass(value):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"len": len(value), "sha256": hashlib.sha256(value).hexdigest()}
    if isinstance(value, list):
        return [to_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


TYPEHASH_RE = re.compile(r"^RIHS01_[0-9a-f]{64}$")


def image_size(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)x(\d+)", text)
    if not m or int(m[1]) < 2 or int(m[2]) < 2:
        raise argparse.ArgumentTypeError(f"{text!r} is not WxH (e.g. 320x240)")
    return int(m[1]), int(m[2])


def typehash_arg(text: str) -> str:
    if not TYPEHASH_RE.match(text):
        raise argparse.ArgumentTypeError("expected RIHS01_ and 64 lowercase hex digits")
    return text


def user_data(*entries: tuple[str, Optional[str]]) -> Optional[bytes]:
    """USER_DATA in rmw_dds_common's "key=value;" form, None if empty."""
    text = "".join(f"{k}={v};" for k, v in entries if v)
    return text.encode() if text else None


def parse_user_data(data: Optional[bytes]) -> dict[str, str]:
    out = {}
    for part in (data or b"").decode("utf-8", "replace").split(";"):
        key, sep, value = part.partition("=")
        if sep:
            out[key.strip()] = value
    return out


def ros_topic(name: str) -> str:
    """ROS 2 topic name to rmw_cyclonedds' DDS topic name: /imu -> rt/imu."""
    return "rt/" + name.lstrip("/")


def ros_service_topics(name: str) -> tuple[str, str]:
    base = name.lstrip("/")
    return f"rq/{base}Request", f"rr/{base}Reply"


# ---------------------------------------------------------------------------
# DDS set-up

SIOCGIFFLAGS = 0x8913
IFF_UP = 0x1
IFF_MULTICAST = 0x1000


def interface_flags(name: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", name.encode(), 0)
        return struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, req))[1]


def check_network(allow_real: bool) -> None:
    """Refuse to join DDS outside a test's network namespace (see module doc).

    socket.if_nameindex() lists the interfaces of this process' namespace
    (/sys/class/net would show the namespace that mounted /sys)."""
    names = [name for _, name in socket.if_nameindex()]
    others = [n for n in names if n != "lo"]
    if others and not allow_real:
        raise PeerError(
            f"refusing to start DDS: this network namespace has {', '.join(others)} besides lo; "
            "run inside one a test made (unshare -n; ip link set lo up; "
            "ip link set lo multicast on) or pass --allow-real-network")
    if not others:
        flags = interface_flags("lo") if "lo" in names else 0
        if flags & (IFF_UP | IFF_MULTICAST) != IFF_UP | IFF_MULTICAST:
            raise PeerError("lo must be up with multicast on for DDS discovery: "
                            "ip link set lo up; ip link set lo multicast on")


class Participant:
    """A DomainParticipant, with its Domain when options need a config."""

    def __init__(self, args: argparse.Namespace):
        check_network(args.allow_real_network)
        self.domain = None
        if args.rcvbuf:
            # A bigger socket receive buffer for multi-MB samples (the default
            # drops them: rmw_cyclonedds issue 137). `max` asks for it without
            # failing where net.core.rmem_max is lower, as `min` would.
            config = ("<CycloneDDS><Domain id=\"any\"><Internal>"
                      f"<SocketReceiveBufferSize max=\"{args.rcvbuf}B\"/>"
                      "</Internal></Domain></CycloneDDS>")
            self.domain = Domain(args.domain, config)
        self.dp = DomainParticipant(args.domain)


def endpoint_qos(reliability: str, durability: str, depth: int,
                 udata: Optional[bytes] = None, max_blocking_ms: int = 100) -> Qos:
    policies = [
        Policy.Reliability.Reliable(max_blocking_time=max_blocking_ms * 1_000_000)
        if reliability == "reliable" else Policy.Reliability.BestEffort,
        Policy.Durability.TransientLocal if durability == "transient_local"
        else Policy.Durability.Volatile,
        Policy.History.KeepLast(depth) if depth else Policy.History.KeepAll,
        Policy.DataRepresentation(use_cdrv0_representation=True),
    ]
    if udata:
        policies.append(Policy.Userdata(data=udata))
    return Qos(*policies)


ANY_STATE = SampleState.Any | ViewState.Any | InstanceState.Any


def take_raw(reader: DataReader, max_samples: int = 256) -> list:
    """(bytes, SampleInfo) pairs as the reader holds them: the serialized
    payload with its encapsulation header, before any decoding."""
    ret = ddspy_take(reader._ref, ANY_STATE, max_samples)
    if isinstance(ret, int):
        raise PeerError(f"dds take failed: {DDSException(ret, 'take')}")
    return ret


def write_raw(writer: DataWriter, data: bytes, timestamp_ns: int) -> None:
    """Writes pre-serialized bytes (what DataWriter.write does after its
    serialize), so the record holds exactly the bytes that were written."""
    ret = ddspy_write_ts(writer._ref, data, timestamp_ns)
    if ret < 0:
        raise PeerError(f"dds write failed: {DDSException(ret, 'write')}")


def wait_for_acks(writer: DataWriter, timeout_s: float) -> bool:
    """DataWriter.wait_for_acks, whose timeout branch raises AttributeError
    in cyclonedds 11.0.1 (pub.py compares with `Exception.DDS_RETCODE_TIMEOUT`)."""
    ret = writer._wait_for_acks(writer._ref, int(timeout_s * 1e9))
    if ret == 0:
        return True
    if ret == DDSException.DDS_RETCODE_TIMEOUT:
        return False
    raise PeerError(f"dds wait_for_acks failed: {DDSException(ret, 'wait_for_acks')}")


def matched(get: Callable[[], list]) -> list:
    """The matched endpoints `get` (a writer's get_matched_subscriptions or a
    reader's get_matched_publications) lists. cyclonedds 11 counts them
    and then fetches them in two calls: a match arriving in between makes
    its list one short and it raises IndexError; asked again, it answers."""
    for _ in range(50):
        try:
            return get()
        except IndexError:
            time.sleep(0.01)
    return get()


def wait_until(predicate: Callable[[], bool], timeout_s: float, step_s: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(step_s)
    return True


class Stop:
    """SIGTERM/SIGINT end a loop cleanly, so the summary is still written."""

    requested = False

    @classmethod
    def install(cls) -> None:
        def handler(signum, frame):
            cls.requested = True
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)


def emit(obj: dict) -> None:
    print(json.dumps(obj), flush=True)


def open_output(path: str):
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as e:
        raise PeerError(f"cannot open {path}: {e.strerror}")


def write_line(out, obj: dict) -> None:
    try:
        out.write(json.dumps(obj) + "\n")
        out.flush()
    except OSError as e:
        raise PeerError(f"cannot write {out.name}: {e.strerror}")


# ---------------------------------------------------------------------------
# publish

def cmd_publish(args: argparse.Namespace) -> int:
    kind = message_kind(args.type)
    if args.rgb8:
        if args.type != "sensor_msgs/msg/Image":
            raise PeerError("--rgb8 is for sensor_msgs/msg/Image")
        import pictures  # tests/py/pictures.py, beside this file
        w, h = args.rgb8
        hostile = set(args.hostile)

        def make_image(s: int, ns: int, p: Optional[Payload]) -> ImageBytes_:
            if s in hostile:
                # What an attacker sends: sizes for 120 GB, 16 bytes of data.
                return ImageBytes_(header_of(s, ns), height=200000, width=200000,
                                   encoding="rgb8", is_bigendian=0, step=600000,
                                   data=bytes(16))
            return ImageBytes_(header_of(s, ns), height=h, width=w, encoding="rgb8",
                               is_bigendian=0, step=3 * w, data=pictures.rgb8(s, w, h))
        kind = dataclasses.replace(kind, make=make_image)
    elif args.hostile:
        raise PeerError("--hostile is for --rgb8 images")
    if args.voltage:
        if args.type != "sensor_msgs/msg/BatteryState":
            raise PeerError("--voltage is for sensor_msgs/msg/BatteryState")
        origin: list[int] = []  # the first sample's stamp, once made

        def make_battery(s: int, ns: int, p: Optional[Payload]) -> BatteryState_:
            origin[:] = origin or [ns]
            return battery_state(s, ns, volts_at(args.voltage, (ns - origin[0]) / 1e9))
        kind = dataclasses.replace(kind, make=make_battery)
    if args.payload_bytes is not None and not kind.has_payload:
        raise PeerError(f"{args.type} has no byte array for --payload-bytes; "
                        "use sensor_msgs/msg/Image or sensor_msgs/msg/CompressedImage")
    payload = Payload(args.payload_bytes if args.payload_bytes is not None
                      else DEFAULT_PAYLOAD_BYTES) if kind.has_payload else None
    record = open_output(args.record) if args.record else None

    part = Participant(args)
    topic = Topic(part.dp, ros_topic(args.topic), kind.idl)
    qos = endpoint_qos(args.reliability, args.durability, args.depth,
                       user_data(("typehash", args.typehash)), args.max_blocking_ms)
    writer = DataWriter(part.dp, topic, qos=qos)

    if args.wait_readers:
        if not wait_until(lambda: len(matched(writer.get_matched_subscriptions)) >= args.wait_readers,
                          args.wait_timeout):
            raise PeerTimeout(f"{len(matched(writer.get_matched_subscriptions))} of {args.wait_readers} "
                              f"readers matched {args.topic} within {args.wait_timeout} s")
    if args.start_delay:
        time.sleep(args.start_delay)

    matched_at_start = len(matched(writer.get_matched_subscriptions))
    period = 1.0 / args.rate if args.rate > 0 else 0.0
    max_late = 0.0
    first_ns = last_ns = 0
    size = 0
    t0 = time.monotonic()
    for seq in range(args.count):
        due = t0 + seq * period
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        else:
            max_late = max(max_late, now - due)
        stamp_ns = time.time_ns()
        data = wire_bytes(kind.make(seq, stamp_ns, payload))
        write_raw(writer, data, stamp_ns)
        if record:
            line = {"seq": seq, "source_timestamp_ns": stamp_ns, "size": len(data)}
            if not args.rgb8:  # pictures are known by their seq; hex would be huge
                line["cdr_hex"] = data.hex()
            write_line(record, line)
        first_ns = first_ns or stamp_ns
        last_ns, size = stamp_ns, len(data)
    elapsed = (last_ns - first_ns) / 1e9
    achieved = (args.count - 1) / elapsed if args.count > 1 and elapsed > 0 else None

    acked = None
    if args.reliability == "reliable" and args.count:
        acked = wait_for_acks(writer, args.ack_timeout)
    if record:
        record.close()
    emit({
        "topic": args.topic, "dds_topic": ros_topic(args.topic),
        "type": args.type, "dds_type": kind.idl.__idl_typename__,
        "sent": args.count, "sample_bytes": size,
        "target_rate_hz": args.rate, "achieved_rate_hz": achieved,
        "rate_reached": (achieved is not None and achieved >= 0.98 * args.rate)
        if args.rate > 0 else None,
        "elapsed_s": elapsed, "max_late_ms": max_late * 1e3 if args.rate > 0 else None,
        "matched_readers_at_start": matched_at_start, "acked": acked,
    })
    if args.linger:
        Stop.install()
        wait_until(lambda: Stop.requested, args.linger, 0.05)
    if acked is False:
        raise PeerTimeout(f"readers did not acknowledge all samples within {args.ack_timeout} s")
    return 0


# ---------------------------------------------------------------------------
# burst

def cmd_burst(args: argparse.Namespace) -> int:
    """--topics writers on TOPIC_0 .. TOPIC_{N-1}, made as fast as Cyclone
    makes them, one sample each, then --linger: a burst of discoveries."""
    kind = message_kind(args.type)
    payload = Payload(DEFAULT_PAYLOAD_BYTES) if kind.has_payload else None
    part = Participant(args)
    qos = endpoint_qos(args.reliability, args.durability, 1,
                       user_data(("typehash", args.typehash)), 100)
    writers = []
    t0 = time.monotonic()
    for i in range(args.topics):
        topic = Topic(part.dp, ros_topic(f"{args.topic}_{i}"), kind.idl)
        writers.append(DataWriter(part.dp, topic, qos=qos))
    created_s = time.monotonic() - t0
    for seq, w in enumerate(writers):
        stamp_ns = time.time_ns()
        write_raw(w, wire_bytes(kind.make(seq, stamp_ns, payload)), stamp_ns)
    emit({"topics": args.topics, "created_s": created_s,
          "written_s": time.monotonic() - t0})
    if args.linger:
        Stop.install()
        wait_until(lambda: Stop.requested, args.linger, 0.05)
    return 0


# ---------------------------------------------------------------------------
# subscribe

def cmd_subscribe(args: argparse.Namespace) -> int:
    kind = message_kind(args.type)
    out = open_output(args.out) if args.out else None
    part = Participant(args)
    topic = Topic(part.dp, ros_topic(args.topic), kind.idl)
    qos = endpoint_qos(args.reliability, args.durability, args.depth,
                       user_data(("typehash", args.typehash)))
    reader = DataReader(part.dp, topic, qos=qos)
    waitset = WaitSet(part.dp)
    waitset.attach(ReadCondition(reader, ANY_STATE))
    Stop.install()

    received = invalid = received_bytes = 0
    decode_errors: list[str] = []
    deadline = time.monotonic() + args.duration
    first_recv = last_recv = 0
    while not Stop.requested and (not args.count or received < args.count):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        waitset.wait(int(min(remaining, 0.1) * 1e9))
        for data, info in take_raw(reader):
            if not info.valid_data:
                invalid += 1  # a writer went away (unregister/dispose)
                continue
            recv_ns = time.time_ns()
            if out:
                line = sample_line(kind, data, info, recv_ns)
                if "decode_error" in line:
                    decode_errors.append(line["decode_error"])
                write_line(out, line)
            received += 1
            received_bytes += len(data)
            first_recv = first_recv or recv_ns
            last_recv = recv_ns
    if out:
        out.close()
    span = (last_recv - first_recv) / 1e9
    emit({
        "topic": args.topic, "type": args.type, "received": received,
        "received_bytes": received_bytes, "invalid_samples": invalid,
        "decode_errors": len(decode_errors),
        "rate_hz": (received - 1) / span if received > 1 and span > 0 else None,
        "matched_writers": len(matched(reader.get_matched_publications)),
    })
    if decode_errors:
        raise PeerError(f"{len(decode_errors)} samples did not decode as {args.type}: "
                        f"{decode_errors[0]}")
    if args.count and received < args.count:
        raise PeerTimeout(f"received {received} of {args.count} samples on {args.topic} "
                          f"within {args.duration} s")
    return 0


def sample_line(kind: MessageKind, data: bytes, info, recv_ns: int) -> dict:
    """One subscribe --out line: raw bytes, timestamps and decoded fields."""
    line = {"seq": None, "recv_ns": recv_ns, "source_timestamp_ns": info.source_timestamp,
            "publication_handle": info.publication_handle, "size": len(data),
            "cdr_hex": data.hex()}
    try:
        sample = kind.decoder.deserialize(data)
    except Exception as e:  # noqa: BLE001 - any decode failure is reported
        line["decode_error"] = f"{type(e).__name__}: {e}"
        return line
    line["seq"] = seq_of(sample)
    line["decoded"] = to_jsonable(sample)
    return line


# ---------------------------------------------------------------------------
# call / serve

def csid(dp: DomainParticipant, counter: int) -> str:
    """A client/service id as rmw_cyclonedds get_unique_csid/csid_to_string
    make one (see the comment above the service types)."""
    raw = dp.guid.bytes[:12] + counter.to_bytes(4, "big")
    return f"{raw[0]:2x}" + "".join(f".{b:x}" for b in raw[1:])


def service_qos(udata: Optional[bytes]) -> Qos:
    # rmw_qos_profile_services_default: reliable, volatile, keep last 10.
    return endpoint_qos("reliable", "volatile", 10, udata, max_blocking_ms=1000)


def build_request(kind: ServiceKind, fields_json: str) -> IdlStruct:
    try:
        fields = json.loads(fields_json)
    except json.JSONDecodeError as e:
        raise PeerError(f"--args is not JSON: {e}")
    return _build(kind.request, fields, "--args")


def _build(cls: type, fields: object, what: str) -> IdlStruct:
    if not isinstance(fields, dict):
        raise PeerError(f"{what} must be a JSON object")
    names = {f.name for f in dataclasses.fields(cls)} - {"header_guid", "header_seq"}
    unknown = set(fields) - names
    if unknown:
        raise PeerError(f"{what}: {cls.__name__} has no field {', '.join(sorted(unknown))}; "
                        f"fields: {', '.join(sorted(names))}")
    return cls(**fields)


def body_of(sample: IdlStruct) -> dict:
    d = to_jsonable(sample)
    d.pop("header_guid")
    d.pop("header_seq")
    return d


def cmd_call(args: argparse.Namespace) -> int:
    kind = service_kind(args.type)
    request = build_request(kind, args.args)
    part = Participant(args)
    rq_name, rr_name = ros_service_topics(args.service)
    client_id = csid(part.dp, 1)
    writer = DataWriter(part.dp, Topic(part.dp, rq_name, kind.request), qos=service_qos(
        user_data(("clientid", client_id), ("typehash", args.request_typehash))))
    reader = DataReader(part.dp, Topic(part.dp, rr_name, kind.response), qos=service_qos(
        user_data(("clientid", client_id), ("typehash", args.response_typehash))))

    deadline = time.monotonic() + args.timeout
    # As rmw_service_server_is_available: both of the service's endpoints.
    if not wait_until(lambda: bool(matched(writer.get_matched_subscriptions))
                      and bool(matched(reader.get_matched_publications)), args.timeout):
        raise PeerTimeout(
            f"no service {args.service} ({args.type}) within {args.timeout} s: "
            f"request reader {'matched' if matched(writer.get_matched_subscriptions) else 'not found'}, "
            f"reply writer {'matched' if matched(reader.get_matched_publications) else 'not found'}")

    # cyclonedds returns the (unsigned) instance handle as a signed int.
    request.header_guid = writer.get_instance_handle() & 0xFFFF_FFFF_FFFF_FFFF
    request.header_seq = 1
    sent_ns = time.time_ns()
    write_raw(writer, wire_bytes(request), sent_ns)
    waitset = WaitSet(part.dp)
    waitset.attach(ReadCondition(reader, ANY_STATE))
    others = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise PeerTimeout(f"no reply from {args.service} within {args.timeout} s "
                              f"({others} replies for other clients seen)")
        waitset.wait(int(min(remaining, 0.1) * 1e9))
        for data, info in take_raw(reader):
            if not info.valid_data:
                continue
            reply = kind.response.deserialize(data)
            if reply.header_guid != request.header_guid or reply.header_seq != request.header_seq:
                others += 1
                continue
            emit({"service": args.service, "type": args.type, "client_id": client_id,
                  "writer_guid": writer.guid.hex,
                  "header_guid": request.header_guid, "header_seq": request.header_seq,
                  "request": body_of(request), "response": body_of(reply),
                  "latency_ms": (time.time_ns() - sent_ns) / 1e6})
            return 0


def endpoint_user_data(ep) -> dict[str, str]:
    """The key=value pairs in a discovered endpoint's USER_DATA."""
    udata = ep.qos[Policy.Userdata] if ep is not None else None
    return parse_user_data(udata.data if udata else None)


def client_reader_matched(writer: DataWriter, client_id: str) -> bool:
    """Whether the reply writer matched the reader of client `client_id`
    (rmw_cyclonedds check_for_response_reader)."""
    return any(endpoint_user_data(writer.get_matched_subscription_data(h)).get("clientid")
               == client_id for h in matched(writer.get_matched_subscriptions))


def cmd_serve(args: argparse.Namespace) -> int:
    kind = service_kind(args.type)
    try:
        response_fields = json.loads(args.response)
    except json.JSONDecodeError as e:
        raise PeerError(f"--response is not JSON: {e}")
    _build(kind.response, response_fields, "--response")  # fail early on bad fields
    part = Participant(args)
    rq_name, rr_name = ros_service_topics(args.service)
    service_id = csid(part.dp, 1)
    reader = DataReader(part.dp, Topic(part.dp, rq_name, kind.request), qos=service_qos(
        user_data(("serviceid", service_id), ("typehash", args.request_typehash))))
    writer = DataWriter(part.dp, Topic(part.dp, rr_name, kind.response), qos=service_qos(
        user_data(("serviceid", service_id), ("typehash", args.response_typehash))))
    waitset = WaitSet(part.dp)
    waitset.attach(ReadCondition(reader, ANY_STATE))
    Stop.install()

    served = 0
    deadline = time.monotonic() + args.duration
    while not Stop.requested and (not args.count or served < args.count):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        waitset.wait(int(min(remaining, 0.1) * 1e9))
        for data, info in take_raw(reader):
            if not info.valid_data:
                continue
            request = kind.request.deserialize(data)
            client_id = endpoint_user_data(
                reader.get_matched_publication_data(info.publication_handle)).get("clientid")
            # rmw_cyclonedds waits 100 ms for the client's reply reader; a
            # test double on a loaded machine waits longer.
            if client_id and not wait_until(lambda: client_reader_matched(writer, client_id),
                                            args.match_wait):
                raise PeerTimeout(f"client {client_id}'s reply reader did not match "
                                  f"within {args.match_wait} s")
            reply = _build(kind.response, response_fields, "--response")
            reply.header_guid, reply.header_seq = request.header_guid, request.header_seq
            write_raw(writer, wire_bytes(reply), time.time_ns())
            served += 1
            emit({"served": served, "service": args.service, "client_id": client_id,
                  "header_guid": request.header_guid, "header_seq": request.header_seq,
                  "request": body_of(request), "response": body_of(reply)})
    if args.count and served < args.count:
        raise PeerTimeout(f"served {served} of {args.count} requests within {args.duration} s")
    wait_for_acks(writer, 1.0)
    return 0


# ---------------------------------------------------------------------------
# CLI

def at_least(kind: type, low: float, strict: bool) -> Callable[[str], float]:
    """An argparse type: a `kind` number >= low (> low if strict)."""
    def parse(text: str):
        value = kind(text)
        if value < low or (strict and value == low):
            raise argparse.ArgumentTypeError(f"must be {'>' if strict else '>='} {low}")
        return value
    parse.__name__ = kind.__name__  # argparse names it in "invalid int value"
    return parse


positive_float = at_least(float, 0, strict=True)
nonneg_float = at_least(float, 0, strict=False)
positive_int = at_least(int, 0, strict=True)
nonneg_int = at_least(int, 0, strict=False)


def parser() -> argparse.ArgumentParser:
    dds = argparse.ArgumentParser(add_help=False)
    dds.add_argument("--domain", type=nonneg_int, default=int(os.environ.get("ROS_DOMAIN_ID", 0)),
                     help="DDS domain id (default: $ROS_DOMAIN_ID, else 0)")
    dds.add_argument("--allow-real-network", action="store_true",
                     help="join DDS even if this network namespace has interfaces besides lo "
                          "(tests must not: they run in a namespace of their own)")
    dds.add_argument("--rcvbuf", type=nonneg_int, default=0, metavar="BYTES",
                     help="ask for this socket receive buffer (Cyclone SocketReceiveBufferSize "
                          "max; capped by net.core.rmem_max) for multi-MB samples; 0 keeps "
                          "Cyclone's default")

    qos = argparse.ArgumentParser(add_help=False)  # a topic's endpoint: name, type, QoS
    qos.add_argument("--topic", required=True, help="ROS 2 topic name, e.g. /imu")
    qos.add_argument("--type", required=True, metavar="TYPE",
                     help="ROS 2 message type, e.g. sensor_msgs/msg/Imu (list: --help)")
    qos.add_argument("--reliability", choices=["reliable", "best_effort"], default="reliable",
                     help="QoS reliability (default reliable, as ROS 2's default profile)")
    qos.add_argument("--durability", choices=["volatile", "transient_local"], default="volatile",
                     help="QoS durability (transient_local for latched topics like /tf_static)")
    qos.add_argument("--typehash", type=typehash_arg, metavar="RIHS01_HEX",
                     help="put typehash=RIHS01_...; in USER_DATA, as Jazzy's rmw does")

    top = argparse.ArgumentParser(
        description="ROS 2 test peers over Cyclone DDS in rmw_cyclonedds' wire format. "
                    "Run them only inside a test's network namespace.",
        epilog="message types: " + ", ".join(MESSAGES) + "; service types: " + ", ".join(SERVICES))
    sub = top.add_subparsers(dest="command", required=True)

    p = sub.add_parser("publish", parents=[dds, qos],
                       help="publish N samples with sequence numbers at a rate",
                       description="Publishes --count samples; sample n carries n (frame_id "
                                   "'seq:n' or a seq field) and, where the type has one, a stamp "
                                   "equal to its source timestamp (the time it is written). "
                                   "Prints a JSON summary after the last write and before "
                                   "--linger: sent, achieved_rate_hz, rate_reached (achieved "
                                   ">= 98% of --rate), max_late_ms, acked (reliable).")
    p.add_argument("--rate", type=nonneg_float, default=10.0, metavar="HZ",
                   help="samples per second on a fixed schedule; late samples go out at once "
                        "(max_late_ms says by how much); 0: as fast as possible (default 10)")
    p.add_argument("--count", type=nonneg_int, default=10, metavar="N",
                   help="samples to publish (default 10)")
    p.add_argument("--depth", type=nonneg_int, default=10, metavar="N",
                   help="KEEP_LAST history depth (default 10, as ROS 2's default profile); a "
                        "reliable writer faster than its reader overwrites unacknowledged "
                        "samples beyond it (acked cannot tell). 0: KEEP_ALL, where a write "
                        "waits for the reader instead, up to --max-blocking-ms")
    p.add_argument("--payload-bytes", type=nonneg_int, metavar="N",
                   help="size of the byte array of Image/CompressedImage "
                        f"(default {DEFAULT_PAYLOAD_BYTES}); 1048576 with --rate 100 is the "
                        "1 MiB x 100 Hz benchmark load")
    p.add_argument("--hostile", type=lambda t: [int(x) for x in t.split(",") if x],
                   default=[], metavar="SEQ,SEQ",
                   help="with --rgb8: these samples are a hostile image instead (200000x200000 "
                        "rgb8 with 16 bytes of data)")
    p.add_argument("--rgb8", type=image_size, metavar="WxH",
                   help="sensor_msgs/msg/Image only: rgb8 pictures of WxH, frame n being "
                        "tests/py/pictures.py rgb8(n) (the reference verify_video.py renders)")
    p.add_argument("--voltage", type=voltage_profile, metavar="PROFILE",
                   help="sensor_msgs/msg/BatteryState only: volts from the first sample's "
                        "stamp, piecewise constant, e.g. \"12.6, 11.8@1.5s, 12.6@3.5s\" "
                        "(default 12.6 throughout)")
    p.add_argument("--record", metavar="FILE",
                   help="JSON lines, one per sample written: seq, source_timestamp_ns, size, "
                        "cdr_hex (the bytes a reader receives, padded to 4). Hex costs time: "
                        "do not record a benchmark run")
    p.add_argument("--wait-readers", type=nonneg_int, default=0, metavar="N",
                   help="before publishing, wait until N readers matched (exit 3 if not)")
    p.add_argument("--wait-timeout", type=positive_float, default=10.0, metavar="S",
                   help="how long --wait-readers waits (default 10)")
    p.add_argument("--start-delay", type=nonneg_float, default=0.0, metavar="S",
                   help="sleep S seconds after --wait-readers, before the first sample "
                        "(a best-effort reader drops samples from a writer it has not yet "
                        "matched itself)")
    p.add_argument("--linger", type=nonneg_float, default=0.0, metavar="S",
                   help="stay S seconds after the summary (a transient_local writer serves "
                        "late joiners only while it lives); SIGTERM ends it early")
    p.add_argument("--ack-timeout", type=nonneg_float, default=5.0, metavar="S",
                   help="reliable: wait up to S seconds for readers to acknowledge every "
                        "sample; exit 3 if they do not (default 5)")
    p.add_argument("--max-blocking-ms", type=positive_int, default=100, metavar="MS",
                   help="reliable: how long a write may block on a full writer history "
                        "before it fails (an error here) (default 100, Cyclone's default)")
    p.set_defaults(func=cmd_publish)

    b = sub.add_parser("burst", parents=[dds, qos],
                       help="a burst of discoveries: N writers on N topics at once",
                       description="Makes --topics writers on TOPIC_0 .. TOPIC_{N-1} as fast "
                                   "as it can, writes one sample on each, prints "
                                   "{topics, created_s, written_s} and lingers.")
    b.add_argument("--topics", type=positive_int, required=True, metavar="N",
                   help="how many topics (and writers)")
    b.add_argument("--linger", type=nonneg_float, default=0.0, metavar="S",
                   help="stay on the graph this long afterwards (SIGINT/SIGTERM end it)")
    b.set_defaults(func=cmd_burst)

    s = sub.add_parser("subscribe", parents=[dds, qos],
                       help="write every sample received as a JSON line",
                       description="Writes one JSON line per sample to --out: seq (as publish "
                                   "puts it, or null), recv_ns, source_timestamp_ns, "
                                   "publication_handle, size, cdr_hex (the raw payload with "
                                   "its encapsulation header) and decoded (the fields; byte "
                                   "arrays as len and sha256). Prints a JSON summary at the end.")
    s.add_argument("--depth", type=nonneg_int, default=1000, metavar="N",
                   help="KEEP_LAST history depth (default 1000: a slow Python reader must not "
                        "lose samples to a small history); 0: KEEP_ALL")
    s.add_argument("--duration", type=positive_float, required=True, metavar="S",
                   help="stop after S seconds")
    s.add_argument("--count", type=nonneg_int, default=0, metavar="N",
                   help="stop after N samples; fewer by --duration is exit 3 (default 0: "
                        "no count)")
    s.add_argument("--out", metavar="FILE",
                   help="JSON lines output; without it only the summary (counts, rate), "
                        "for load runs where hex and decoding would slow the reader")
    s.set_defaults(func=cmd_subscribe)

    svc = argparse.ArgumentParser(add_help=False)
    svc.add_argument("--service", required=True, help="ROS 2 service name, e.g. /edgerec/pause")
    svc.add_argument("--type", required=True, help="ROS 2 service type, e.g. "
                     "rosbag2_interfaces/srv/Pause")
    svc.add_argument("--request-typehash", type=typehash_arg, metavar="RIHS01_HEX",
                     help="typehash for the request endpoint's USER_DATA (Jazzy)")
    svc.add_argument("--response-typehash", type=typehash_arg, metavar="RIHS01_HEX",
                     help="typehash for the reply endpoint's USER_DATA (Jazzy)")

    c = sub.add_parser("call", parents=[dds, svc],
                       help="call a service as an rmw_cyclonedds client",
                       description="Waits for the service's request reader and reply writer, "
                                   "sends one request (16-byte rmw_cyclonedds header: the "
                                   "request writer's instance handle and sequence 1) and "
                                   "prints the reply with the same header as JSON. Exit 3 "
                                   "when the service or its reply does not come in --timeout.")
    c.add_argument("--timeout", type=positive_float, default=5.0, metavar="S",
                   help="for discovery and the reply together (default 5)")
    c.add_argument("--args", default="{}", metavar="JSON",
                   help="request fields as a JSON object (default {})")
    c.set_defaults(func=cmd_call)

    v = sub.add_parser("serve", parents=[dds, svc],
                       help="a service server: only a test double for the self-test of call",
                       description="A service server in rmw_cyclonedds' framing, only for "
                                   "tests/py/ros2peer_selftest.py to test call against; "
                                   "edgerec's tests call edgerec itself. Answers requests with "
                                   "--response, echoing their header; prints a JSON line per "
                                   "request served.")
    v.add_argument("--response", default="{}", metavar="JSON",
                   help="response fields as a JSON object (default {}: zero values)")
    v.add_argument("--count", type=nonneg_int, default=0, metavar="N",
                   help="exit after N requests; fewer by --duration is exit 3 (default 0)")
    v.add_argument("--duration", type=positive_float, default=30.0, metavar="S",
                   help="serve at most S seconds (default 30)")
    v.add_argument("--match-wait", type=positive_float, default=2.0, metavar="S",
                   help="wait up to S seconds for the client's reply reader before replying "
                        "(rmw_cyclonedds waits 100 ms) (default 2)")
    v.set_defaults(func=cmd_serve)

    return top


def main(argv: Optional[list[str]] = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except PeerTimeout as e:
        print(f"ros2peer {args.command}: timeout: {e}", file=sys.stderr)
        return EXIT_TIMEOUT
    except (PeerError, DDSException) as e:
        print(f"ros2peer {args.command}: error: {e}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
