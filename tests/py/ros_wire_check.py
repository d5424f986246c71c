#!/usr/bin/env python3
"""Cross-check edgerec-ros' wire encodings against rosbags' CDR codec.

Run by crates/ros/tests/wire_rosbags.rs, which writes DIR:

  DIR/samples.tsv   id <TAB> store <TAB> type <TAB> .msg file or - <TAB> .cdr file <TAB> .json file

store is a rosbags type store (humble, jazzy). A .msg file is registered in
that store under the sample's type first: rosbags' stores hold no service
types (std_srvs, rosbag2_interfaces/srv), so their request and response parts
are registered from their .srv text under msg names, and the rmw_cyclonedds
request header is checked as a struct that starts with `uint64 guid` and
`int64 seq`. In the .json, every string value is its UTF-8 bytes in hex, so
nothing needs escaping.

Checks, one output line each:

  bytes  serialize_cdr of the message built from the .json values equals the
         .cdr bytes exactly (padding included)
  values deserialize_cdr of the .cdr bytes gives back the .json values

Usage: ros_wire_check.py DIR. Exit 0 when every check passes, 1 on any
mismatch, 77 when rosbags cannot be imported (a skip).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

try:
    import numpy as np
    from rosbags.interfaces import Nodetype
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore
except ImportError as err:  # pragma: no cover - environment probe
    print(f"SKIP: cannot import rosbags: {err}")
    sys.exit(77)

STORES = {"humble": Stores.ROS2_HUMBLE, "jazzy": Stores.ROS2_JAZZY}

# Base types rosbags holds as numpy arrays inside arrays and sequences.
NUMPY = {
    "bool": np.bool_,
    "byte": np.uint8,
    "char": np.uint8,
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
    "uint16": np.uint16,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
    "float32": np.float32,
    "float64": np.float64,
}


def build_field(ts: Any, node: Any, desc: Any, value: Any) -> Any:
    if node == Nodetype.BASE:
        return bytes.fromhex(value).decode() if desc[0] == "string" else value
    if node == Nodetype.NAME:
        return build(ts, desc, value)
    (inner_node, inner_desc), _ = desc
    if inner_node == Nodetype.BASE and inner_desc[0] in NUMPY:
        return np.array(value, dtype=NUMPY[inner_desc[0]])
    return [build_field(ts, inner_node, inner_desc, v) for v in value]


def build(ts: Any, typename: str, value: dict[str, Any]) -> Any:
    fields = ts.fielddefs[typename][1]
    args = {name: build_field(ts, node, desc, value[name]) for name, (node, desc) in fields}
    return ts.types[typename](**args)


def plain_field(ts: Any, node: Any, desc: Any, value: Any) -> Any:
    if node == Nodetype.BASE:
        return value.encode().hex() if desc[0] == "string" else value
    if node == Nodetype.NAME:
        return plain(ts, desc, value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    (inner_node, inner_desc), _ = desc
    return [plain_field(ts, inner_node, inner_desc, v) for v in value]


def plain(ts: Any, typename: str, msg: Any) -> dict[str, Any]:
    fields = ts.fielddefs[typename][1]
    return {
        name: plain_field(ts, node, desc, getattr(msg, name)) for name, (node, desc) in fields
    }


def main(root: Path) -> int:
    stores: dict[str, Any] = {}
    failures = 0
    for line in (root / "samples.tsv").read_text().splitlines():
        sample, store, typename, msgdef, cdr_file, json_file = line.split("\t")
        if store not in stores:
            stores[store] = get_typestore(STORES[store])
        ts = stores[store]
        if msgdef != "-" and typename not in ts.types:
            ts.register(get_types_from_msg((root / msgdef).read_text(), typename))
        cdr = (root / cdr_file).read_bytes()
        expected = json.loads((root / json_file).read_text())

        ours = bytes(ts.serialize_cdr(build(ts, typename, expected), typename))
        if ours == cdr:
            print(f"ok     bytes  {sample} ({typename}, {store}, {len(cdr)} bytes)")
        else:
            failures += 1
            print(f"FAIL   bytes  {sample}: rosbags {ours.hex()}\n              edgerec {cdr.hex()}")

        got = plain(ts, typename, ts.deserialize_cdr(cdr, typename))
        if got == expected:
            print(f"ok     values {sample}")
        else:
            failures += 1
            print(f"FAIL   values {sample}: rosbags read {got}\n              expected {expected}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
