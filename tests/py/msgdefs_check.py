#!/usr/bin/env python3
"""Cross-check edgerec's embedded message definitions and CDR encoder.

Run by crates/format/tests/msgdefs_rosbags.rs, which writes DIR:

  DIR/defs.tsv       name <TAB> encoding <TAB> file (concatenated ros2msg text)
  DIR/dirdefs.tsv    name <TAB> encoding <TAB> file <TAB> fields (name:type,...)
  DIR/samples.tsv    id <TAB> type name <TAB> .cdr file <TAB> .json file

Checks, one output line each, against two implementations that share no code
with edgerec (or with each other):

  defs    each definition, parsed section by section with rosbags'
          get_types_from_msg and rendered again by generate_msgdef, equals
          rosbags' Stores.ROS2_HUMBLE rendering (comments and whitespace
          normalised away by rosbags itself), md5 included, and its MSG:
          sections come in rosbags' order. foxglove_msgs, can_msgs,
          ros2_socketcan_msgs and edgerec_msgs are not in that store: their
          top-level text is registered from edgerec's .msg (its fields
          checked against the upstream file's) and the rest (their
          dependencies) compared.
  set     the embedded types of the packages edgerec embeds (HUMBLE_PACKAGES,
          rcl_interfaces/msg/Log) are exactly those of Stores.ROS2_HUMBLE:
          none missing, none from a later distro.
  dirdefs each definition DefinitionResolver built from a msg_paths
          directory (a workspace package using embedded types) parses
          section by section, its top-level fields are the ones its .msg
          declares, and with the workspace types registered from their own
          sections it equals the rendering by rosbags' Humble store (so the
          embedded sections it pulled in are Humble's), md5 and order too.
  rosbags each sample decodes with rosbags' deserialize_cdr to exactly the
          expected field values, and serialize_cdr of the decoded message
          gives back the same bytes (padding included).
  mcap    each sample decodes with mcap_ros2's DecoderFactory, built from
          edgerec's schema text, to exactly the expected field values.

Usage: msgdefs_check.py DIR. Exit 0 when every check passes, 1 on any
mismatch, 77 when rosbags or mcap_ros2 cannot be imported (a skip).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

try:
    import numpy as np
    from mcap.records import Schema
    from mcap_ros2.decoder import DecoderFactory
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore
except ImportError as err:  # pragma: no cover - environment probe
    print(f"SKIP: cannot import the reference implementations: {err}")
    sys.exit(77)

SEPARATOR = "=" * 80
FOXGLOVE_VIDEO = "foxglove_msgs/msg/CompressedVideo"
# The schema platform-facts.md gives for CompressedVideo, as rosbags renders it.
FOXGLOVE_VIDEO_FIELDS = (
    "builtin_interfaces/Time timestamp\nstring frame_id\nuint8[] data\nstring format\n"
)

# edgerec's own type: not in any store either; registered from its text, its
# field names and types checked against what the CDR builder writes.
CLOCK_QUALITY = "edgerec_msgs/msg/ClockQuality"
CLOCK_QUALITY_FIELDS = [
    ("stamp", "builtin_interfaces/msg/Time"), ("state", "uint8"), ("offset_ns", "int64"),
    ("offset_valid", "bool"), ("offset_origin", "string"), ("mean_path_delay_ns", "int64"),
    ("port_state", "string"), ("grandmaster", "string"), ("gm_present", "bool"),
    ("source", "string"),
]
PACKET = "edgerec_msgs/msg/Packet"
PACKET_FIELDS = [("stamp", "builtin_interfaces/msg/Time"), ("source", "string"), ("data", "uint8")]
# Not in rosbags' stores: the CAN types ROS users decode, from their upstream
# .msg files (crates/format/msg/README.md), registered from edgerec's text
# and their fields checked against what the upstream files declare.
CAN_FRAME = "can_msgs/msg/Frame"
CAN_FRAME_FIELDS = [
    ("header", "std_msgs/msg/Header"), ("id", "uint32"), ("is_rtr", "bool"),
    ("is_extended", "bool"), ("is_error", "bool"), ("dlc", "uint8"), ("data", "uint8"),
]
FD_FRAME = "ros2_socketcan_msgs/msg/FdFrame"
FD_FRAME_FIELDS = [
    ("header", "std_msgs/msg/Header"), ("id", "uint32"), ("is_extended", "bool"),
    ("is_error", "bool"), ("len", "uint8"), ("data", "uint8"),
]
REGISTERED = {
    CLOCK_QUALITY: CLOCK_QUALITY_FIELDS, PACKET: PACKET_FIELDS,
    CAN_FRAME: CAN_FRAME_FIELDS, FD_FRAME: FD_FRAME_FIELDS,
}
OWN_TYPES = (FOXGLOVE_VIDEO, CLOCK_QUALITY, PACKET, CAN_FRAME, FD_FRAME)

# Every message type of these Humble packages is embedded (crates/format/msg/
# README.md), plus one type of a package embedded only in part.
HUMBLE_PACKAGES = (
    "std_msgs", "builtin_interfaces", "geometry_msgs", "sensor_msgs", "nav_msgs", "tf2_msgs",
    "diagnostic_msgs", "visualization_msgs", "shape_msgs", "trajectory_msgs", "stereo_msgs",
    "actionlib_msgs", "unique_identifier_msgs", "rosgraph_msgs",
)
HUMBLE_SINGLE_TYPES = ("rcl_interfaces/msg/Log",)

failures = 0


def report(ok: bool, kind: str, what: str, detail: str = "") -> None:
    global failures
    if not ok:
        failures += 1
    line = f"{'ok  ' if ok else 'FAIL'} {kind:7} {what}"
    print(f"{line}: {detail}" if detail else line, flush=True)


def full_name(name: str) -> str:
    """pkg/Type -> pkg/msg/Type."""
    pkg, _, ty = name.rpartition("/")
    return name if pkg.endswith("/msg") else f"{pkg}/msg/{ty}"


def split_sections(name: str, text: str) -> list[tuple[str, str]]:
    """rosbag2 ros2msg text -> [(pkg/msg/Type, .msg text)], top level first."""
    parts = text.split("\n" + SEPARATOR + "\n")
    out = [(name, parts[0])]
    for part in parts[1:]:
        head, _, body = part.partition("\n")
        if not head.startswith("MSG: "):
            raise ValueError(f"section does not start with 'MSG: ': {head!r}")
        out.append((full_name(head[len("MSG: "):]), body))
    return out


def msg_order(text: str) -> list[str]:
    return [line[5:] for line in text.splitlines() if line.startswith("MSG: ")]


def parse_sections(kind: str, name: str, encoding: str, text: str) -> Any:
    """Reports the encoding and the sections; (sections, a store holding them
    all) or None when the text does not split into sections."""
    report(encoding == "ros2msg", kind, f"{name} encoding", encoding)
    try:
        sections = split_sections(name, text)
    except ValueError as err:
        report(False, kind, f"{name} sections", str(err))
        return None
    names = [n for n, _ in sections]
    report(len(names) == len(set(names)), kind, f"{name} each section once", ", ".join(names))
    store = get_typestore(Stores.EMPTY)
    for sec_name, sec_text in sections:
        store.register(get_types_from_msg(sec_text, sec_name))
    return sections, store


def compare_rendering(kind: str, name: str, sections: list[tuple[str, str]], mine_store: Any,
                      ref_store: Any, label: str) -> None:
    """edgerec's sections rendered by rosbags equal ref_store's rendering, md5
    and MSG: order included."""
    mine, mine_md5 = mine_store.generate_msgdef(name, ros_version=2)
    ref, ref_md5 = ref_store.generate_msgdef(name, ros_version=2)
    report(
        mine == ref and mine_md5 == ref_md5,
        kind,
        f"{name} equals rosbags {label}",
        f"md5 {mine_md5}" if mine == ref else f"\n--- edgerec\n{mine}--- rosbags\n{ref}",
    )
    order = [n.replace("/msg/", "/") for n, _ in sections[1:]]
    report(order == msg_order(ref), kind, f"{name} section order",
           f"edgerec {order} rosbags {msg_order(ref)}")


def field_list(store: Any, name: str) -> list[tuple[str, str]]:
    """(field, type) of a registered type; arrays and sequences as their
    element type, strings without their bound."""
    out = []
    for fname, (_kind, detail) in store.fielddefs[name][1]:
        # rosbags: (Nodetype.BASE, (type, bound)), (Nodetype.NAME, typename),
        # or an array/sequence of either: ((kind, detail), size)
        if isinstance(detail, tuple) and isinstance(detail[0], tuple):
            detail = detail[0][1]
        out.append((fname, detail[0] if isinstance(detail, tuple) else detail))
    return out


def check_definition(name: str, encoding: str, text: str) -> None:
    parsed = parse_sections("defs", name, encoding, text)
    if parsed is None:
        return
    sections, mine_store = parsed

    ref_store = get_typestore(Stores.ROS2_HUMBLE)
    if name == FOXGLOVE_VIDEO:
        ref_store.register(get_types_from_msg(sections[0][1], name))
        top = mine_store.generate_msgdef(name, ros_version=2)[0].split(SEPARATOR)[0]
        report(top == FOXGLOVE_VIDEO_FIELDS, "defs", f"{name} fields", repr(top))
    elif name in REGISTERED:
        ref_store.register(get_types_from_msg(sections[0][1], name))
        fields = field_list(ref_store, name)
        report(fields == REGISTERED[name], "defs", f"{name} fields", repr(fields))
    elif name not in ref_store.types:
        report(False, "defs", f"{name} known to rosbags ROS2_HUMBLE", "missing")
        return
    label = "ROS2_HUMBLE" + (" + its own top level" if name in OWN_TYPES else "")
    compare_rendering("defs", name, sections, mine_store, ref_store, label)


def check_embedded_set(names: set[str]) -> None:
    humble = get_typestore(Stores.ROS2_HUMBLE)
    want = {
        t for t in humble.types
        if t.split("/")[0] in HUMBLE_PACKAGES and t.split("/")[1] == "msg"
    } | set(HUMBLE_SINGLE_TYPES) | set(OWN_TYPES)
    missing, extra = sorted(want - names), sorted(names - want)
    report(
        not missing and not extra,
        "set",
        f"{len(names)} embedded types are Humble's {len(want) - len(OWN_TYPES)} + edgerec's own",
        f"missing {missing} not in Humble {extra}" if missing or extra else "",
    )


def check_dir_definition(name: str, encoding: str, text: str, fields: str) -> None:
    parsed = parse_sections("dirdefs", name, encoding, text)
    if parsed is None:
        return
    sections, mine_store = parsed
    got = ",".join(f"{f}:{t}" for f, t in field_list(mine_store, name))
    report(got == fields, "dirdefs", f"{name} fields", f"edgerec {got} .msg {fields}")

    ref_store = get_typestore(Stores.ROS2_HUMBLE)
    own = [(n, t) for n, t in sections if n not in ref_store.types]
    for sec_name, sec_text in own:
        ref_store.register(get_types_from_msg(sec_text, sec_name))
    label = f"ROS2_HUMBLE + {', '.join(n for n, _ in own)}"
    compare_rendering("dirdefs", name, sections, mine_store, ref_store, label)


def plain(value: Any, typestore: Any = None) -> Any:
    """A decoded message as JSON-like data: a rosbags dataclass (its fields from
    the typestore's field definitions, so constants and __msgtype__ stay out)
    or an mcap_ros2 object (its __slots__)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return list(bytes(value))
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [plain(v, typestore) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    msgtype = getattr(value, "__msgtype__", None)
    if typestore is not None and msgtype is not None:
        fields = [name for name, _ in typestore.fielddefs[msgtype][1]]
    else:
        fields = getattr(value, "__slots__", None)
    if fields is None:
        raise TypeError(f"cannot flatten {type(value).__name__}")
    return {f: plain(getattr(value, f), typestore) for f in fields}


def diff(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Differences between expected and actual, exact for numbers and types."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected a message, got {actual!r}"]
        out = []
        if set(expected) != set(actual):
            out.append(f"{path}: fields {sorted(actual)} != expected {sorted(expected)}")
        for key in expected:
            if key in actual:
                out += diff(expected[key], actual[key], f"{path}.{key}")
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: {actual!r} != expected {expected!r}"]
        out = []
        for i, (e, a) in enumerate(zip(expected, actual)):
            out += diff(e, a, f"{path}[{i}]")
        return out
    # bool is an int in Python: compare types too, so True never equals 1.
    same_type = type(expected) is type(actual) or (
        isinstance(expected, float) and isinstance(actual, float)
    )
    if not same_type or expected != actual:
        return [f"{path}: {actual!r} ({type(actual).__name__}) != expected {expected!r}"]
    return []


def check_sample(sid: str, typename: str, data: bytes, expected: Any,
                 typestore: Any, schema_text: str, schema_id: int) -> None:
    what = f"{sid} ({typename}, {len(data)} bytes)"
    try:
        msg = typestore.deserialize_cdr(data, typename)
        problems = diff(expected, plain(msg, typestore))
        report(not problems, "rosbags", f"{what} decodes", "; ".join(problems[:5]))
        again = bytes(typestore.serialize_cdr(msg, typename))
        report(again == data, "rosbags", f"{what} re-encodes to the same bytes",
               "" if again == data else f"rosbags {again.hex()} edgerec {data.hex()}")
    except Exception as err:  # noqa: BLE001 - any decoder error is a failed check
        report(False, "rosbags", f"{what} decodes", f"{type(err).__name__}: {err}")

    try:
        schema = Schema(id=schema_id, name=typename, encoding="ros2msg",
                        data=schema_text.encode())
        decoder = DecoderFactory().decoder_for("cdr", schema)
        if decoder is None:
            raise ValueError("DecoderFactory has no decoder for this schema")
        problems = diff(expected, plain(decoder(data)))
        report(not problems, "mcap", f"{what} decodes", "; ".join(problems[:5]))
    except Exception as err:  # noqa: BLE001
        report(False, "mcap", f"{what} decodes", f"{type(err).__name__}: {err}")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    root = Path(sys.argv[1])

    texts: dict[str, str] = {}
    for line in (root / "defs.tsv").read_text().splitlines():
        name, encoding, file = line.split("\t")
        texts[name] = (root / file).read_text()
        check_definition(name, encoding, texts[name])
    check_embedded_set(set(texts))

    dirdefs = root / "dirdefs.tsv"
    lines = dirdefs.read_text().splitlines() if dirdefs.exists() else []
    report(bool(lines), "dirdefs", "definitions from a msg_paths directory were written")
    for line in lines:
        name, encoding, file, fields = line.split("\t")
        check_dir_definition(name, encoding, (root / file).read_text(), fields)

    # Decode with the Humble store plus the types it lacks, from edgerec's .msg.
    typestore = get_typestore(Stores.ROS2_HUMBLE)
    for own in OWN_TYPES:
        if own in texts:
            typestore.register(
                get_types_from_msg(split_sections(own, texts[own])[0][1], own))

    samples = (root / "samples.tsv").read_text().splitlines()
    for i, line in enumerate(samples, start=1):
        sid, typename, cdr_file, json_file = line.split("\t")
        if typename not in texts:
            report(False, "rosbags", f"{sid} ({typename})", "no embedded definition written")
            continue
        check_sample(sid, typename, (root / cdr_file).read_bytes(),
                     json.loads((root / json_file).read_text()),
                     typestore, texts[typename], i)

    total_defs = len(texts)
    print(f"{total_defs} definitions, {len(lines)} from a directory, {len(samples)} samples, "
          f"{failures} failed checks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
