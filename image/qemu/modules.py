#!/usr/bin/env python3
"""Resolves kernel modules to a load order from the modules themselves.

usage: modules.py MODULES_DIR NAME [NAME...]

MODULES_DIR is an unpacked /lib/modules/<version> (from the kernel deb,
which ships no modules.dep: depmod runs in its postinst). Each module's
`.modinfo` ELF section holds its `depends=` (hard dependencies by module
name), `softdep=` (`pre: a b post: c`, by module name or alias) and
`alias=` strings; they are read from the files, so nothing here is a hand
list. Prints one path per line, relative to MODULES_DIR, dependencies
before their users (the order `insmod` needs). Exits 1 naming a module or
alias it cannot find. Handles .ko, .ko.xz and .ko.zst (through xz/zstd).
"""
import struct
import subprocess
import sys
from pathlib import Path

SUFFIXES = (".ko", ".ko.xz", ".ko.zst", ".ko.gz")


def ko_bytes(path):
    name = path.name
    if name.endswith(".ko.xz"):
        return subprocess.run(["xz", "-dc", str(path)], check=True, capture_output=True).stdout
    if name.endswith(".ko.zst"):
        return subprocess.run(["zstd", "-dc", str(path)], check=True, capture_output=True).stdout
    if name.endswith(".ko.gz"):
        import gzip
        return gzip.decompress(path.read_bytes())
    return path.read_bytes()


def modinfo(path):
    """The key=value strings of the `.modinfo` section, as (key, value) pairs."""
    data = ko_bytes(path)
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError(f"{path}: not a 64-bit ELF module")
    end = "<" if data[5] == 1 else ">"
    shoff, = struct.unpack_from(end + "Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)

    def section(i):
        # sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size
        name, _t, _f, _a, off, size = struct.unpack_from(end + "IIQQQQ", data, shoff + i * shentsize)
        return name, off, size

    _, stroff, _ = section(shstrndx)
    for i in range(shnum):
        name, off, size = section(i)
        sname = data[stroff + name:data.index(b"\0", stroff + name)]
        if sname == b".modinfo":
            out = []
            for entry in data[off:off + size].split(b"\0"):
                if b"=" in entry:
                    k, v = entry.decode(errors="replace").split("=", 1)
                    out.append((k, v))
            return out
    return []


def module_name(path):
    n = path.name
    for s in SUFFIXES:
        if n.endswith(s):
            n = n[: -len(s)]
    # The kernel treats - and _ in module names alike.
    return n.replace("-", "_")


def main():
    root = Path(sys.argv[1])
    wanted = sys.argv[2:]
    files = {}
    for s in SUFFIXES:
        for p in (root / "kernel").rglob("*" + s):
            files[module_name(p)] = p
    info = {}

    def get(name):
        if name not in info:
            info[name] = modinfo(files[name])
        return info[name]

    aliases = None

    def resolve_alias(alias):
        """Module names whose alias= matches exactly (softdeps name aliases
        like crypto-crc32c)."""
        nonlocal aliases
        if aliases is None:
            aliases = {}
            for n in files:
                for k, v in get(n):
                    if k == "alias":
                        aliases.setdefault(v, []).append(n)
        return sorted(aliases.get(alias, []))

    order = []
    state = {}

    def visit(ref, via):
        name = ref.replace("-", "_")
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            sys.exit(f"modules.py: dependency cycle through {name} ({' <- '.join(via)})")
        if name not in files:
            found = resolve_alias(ref)
            if not found:
                builtin = (root / "modules.builtin").read_text() if (root / "modules.builtin").exists() else ""
                if any(module_name(Path(l)) == name for l in builtin.split()):
                    return  # built into the kernel
                sys.exit(f"modules.py: no module or alias {ref!r} (needed by {' <- '.join(via) or 'the command line'})")
            for f in found:
                visit(f, via)
            return
        state[name] = "visiting"
        mi = get(name)
        deps = [d for k, v in mi if k == "depends" for d in v.split(",") if d]
        pre = []
        for k, v in mi:
            if k == "softdep":
                words = v.split()
                cur = None
                for w in words:
                    if w in ("pre:", "post:"):
                        cur = w
                    elif cur == "pre:":
                        pre.append(w)
        for d in pre + deps:
            visit(d, [name] + via)
        state[name] = "done"
        order.append(name)

    for w in wanted:
        visit(w, [])
    for n in order:
        print(files[n].relative_to(root))


if __name__ == "__main__":
    main()
