#!/usr/bin/env python3
"""Checks yocto/ against itself and against the rest of the repository.

No bitbake runs here (no Yocto sources on CI); instead every fact the
layer states about the workspace, the board directory or an upstream layer
that can be checked offline is checked:

  kas         every yocto/kas/*.yml, with its includes merged the way kas
              merges them, validates against kas's own JSON schema (the
              pinned kas package), and every upstream repository is pinned
              to a full commit (or, noted, a release branch only)
  oelint      oelint-adv --release scarthgap over every .bb, .bbappend,
              .bbclass and .inc under yocto/, zero findings, with the
              suppressions in yocto/oelint-suppressions.txt
  layer       LAYERSERIES_COMPAT names scarthgap
  kernel      KERNEL_ARGS:append:tegra equals the kernel-cmdline of the board
              EDGEREC_BOARD selects on Jetson (board/jetson-agx-orin/)
  board       every board file the recipe installs exists, for each board
              EDGEREC_BOARD can select (skipped, saying so, while board/ is
              still being written)
  features    every cargo feature the layer can enable exists in
              crates/edgerec/Cargo.toml
  version     the recipe's PV is the workspace version, its LICENSE the
              workspace license, EDGEREC_GIT_URI the workspace repository;
              each file LIC_FILES_CHKSUM names (LICENSE) exists with its md5
  rust        RUSTVERSION >= the workspace rust-version
  partitions  the NVMe layout has DATA last before secondary_gpt, the only
              growing partition, with APP still id 1 and fixed
  qemu        the qemuarm64 image gives board/qemuarm64/ what it expects:
              runqemu's QB_OPT_APPEND attaches an NVMe drive backed by the
              image scripts/yocto-qemu-data makes, and an i6300esb when
              the board's edgerec.toml names a watchdog; the linux-yocto
              fragment builds in the NVMe and i6300esb drivers
  shell       shellcheck finds nothing in any shell script of the
              repository (by .sh or by a sh/bash/dash #! line) nor in the
              `sh -c '...'` programs of board/*/systemd/ units (as the
              shell will see them: systemd's `$$` and `%%` undone)

Each problem is printed as `FAIL <file>: <what>` with a `fix:` line.
scripts/yocto-check runs this after scripts/yocto-crates --check.
"""

import argparse
import fnmatch
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

LAYER = "yocto/meta-edgerec"
RECIPE_DIR = f"{LAYER}/recipes-edgerec/edgerec"
DISTRO_CONF = f"{LAYER}/conf/distro/edgerec.conf"
LAYER_CONF = f"{LAYER}/conf/layer.conf"
PARTITION_XML = (f"{LAYER}/dynamic-layers/meta-tegra/recipes-bsp/tegra-binaries/"
                 "tegra-storage-layout-base/edgerec-flash_l4t_t234_nvme.xml")
SUPPRESSIONS = "yocto/oelint-suppressions.txt"
CONSTANTS = "yocto/oelint-constants.json"
RELEASE = "scarthgap"
FULL_SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass
class Report:
    """Problems (each fails the check), skips and notes, in order."""
    problems: list = field(default_factory=list)
    skips: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def fail(self, path, what, fix):
        self.problems.append((path, what, fix))

    def skip(self, what):
        self.skips.append(what)

    def note(self, what):
        self.notes.append(what)


# --------------------------------------------------------------------------
# A small reader for the bitbake assignments this layer uses: one
# `VAR[:override...] OP "value"` per logical line (backslash continuations
# joined), comments and everything else ignored.

ASSIGN = re.compile(
    r'^(?:export\s+)?(?P<var>[A-Za-z_][A-Za-z0-9_${}.\-]*)(?P<ovr>(?::[A-Za-z0-9_${}.\-]+)*)'
    r'\s*(?P<op>\?\?=|\?=|:=|\+=|=\+|\.=|=\.|=)\s*"(?P<val>.*)"\s*$')


@dataclass
class Assignment:
    var: str
    overrides: tuple
    op: str
    value: str
    path: str
    line: int


def read_assignments(path, root):
    out = []
    rel = os.path.relpath(path, root)
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        start = i
        text = lines[i]
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1] + " " + lines[i].strip()
        i += 1
        m = ASSIGN.match(text.strip())
        if m:
            ovr = tuple(o for o in m.group("ovr").split(":") if o)
            out.append(Assignment(m.group("var"), ovr, m.group("op"),
                                  " ".join(m.group("val").split()), rel, start + 1))
    return out


def layer_files(root, patterns):
    files = []
    for pat in patterns:
        files += glob.glob(os.path.join(root, LAYER, "**", pat), recursive=True)
    return sorted(set(files))


def assignments_of(root, var, patterns=("*.bb", "*.bbappend", "*.inc", "*.conf")):
    res = []
    for f in layer_files(root, patterns):
        res += [a for a in read_assignments(f, root) if a.var == var]
    return res


def recipe_path(root):
    found = sorted(glob.glob(os.path.join(root, RECIPE_DIR, "edgerec_*.bb")))
    return found[0] if len(found) == 1 else None


def workspace(root):
    with open(os.path.join(root, "Cargo.toml"), "rb") as f:
        return tomllib.load(f)["workspace"]["package"]


def version_tuple(text):
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


# --------------------------------------------------------------------------
# kas

def load_kas(path, root):
    """The merged configuration of one top-level kas file, as kas builds it.

    Uses kas's own include handler, which validates every file (the top one
    and each include) against kas's JSON schema while loading it. The
    repository root is given instead of asked from git, so temporary copies
    (the self-tests) work too.
    """
    from kas.includehandler import IncludeHandler
    handler = IncludeHandler([path], use_lock=False)
    handler.top_repo_path = root
    handler.ensure_from_same_repo = lambda: None
    config, missing = handler.get_config()
    return config, missing


def check_kas(root, report):
    import logging
    from kas.kasusererror import KasUserError
    from kas import __version__ as kas_version
    top = sorted(glob.glob(os.path.join(root, "yocto", "kas", "*.yml")))
    if not top:
        report.fail("yocto/kas", "no kas files", "add yocto/kas/<machine>.yml")
        return
    # kas logs each schema error before raising; collect them for the report.
    records = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    collector = Collect(level=logging.ERROR)
    kas_logger = logging.getLogger()
    kas_logger.addHandler(collector)
    try:
        for path in top:
            rel = os.path.relpath(path, root)
            records.clear()
            try:
                config, missing = load_kas(path, root)
            except (KasUserError, OSError) as e:
                details = "; ".join(" ".join(r.split()) for r in records
                                    if "validation Error" in r)
                details = f"{details} ({e})" if details else str(e)
                report.fail(rel, f"kas {kas_version} rejects it: {details}",
                            "make the file match kas's schema "
                            "(https://kas.readthedocs.io/en/latest/userguide/project-configuration.html)")
                continue
            if missing:
                report.fail(rel, f"includes from repositories kas has not fetched: {missing}",
                            "include files of this repository only (repo-relative paths)")
            check_kas_pins(rel, config, report)
            check_local_layers(rel, config, root, report)
            if not config.get("machine"):
                report.fail(rel, "no machine", "set machine: (or include a file that does)")
            if config.get("distro") != "edgerec":
                report.fail(rel, f"distro is {config.get('distro')!r}, not 'edgerec'",
                            "include yocto/kas/include/common.yml")
    finally:
        kas_logger.removeHandler(collector)


def check_local_layers(rel, config, root, report):
    """Layers of this checkout (repos without a url) must exist."""
    for name, repo in sorted((config.get("repos") or {}).items()):
        repo = repo or {}
        if repo.get("url"):
            continue
        for layer in (repo.get("layers") or {"."}):
            conf = os.path.join(root, repo.get("path") or "", layer, "conf", "layer.conf")
            if not os.path.isfile(conf):
                report.fail(rel, f"repos.{name}.layers.{layer}: no {os.path.relpath(conf, root)}",
                            "list the layer directory relative to the repository root")


def check_kas_pins(rel, config, report):
    for name, repo in sorted((config.get("repos") or {}).items()):
        repo = repo or {}
        if not repo.get("url"):
            continue  # this checkout
        commit, branch = repo.get("commit"), repo.get("branch")
        if commit is not None:
            if not FULL_SHA.match(str(commit)):
                report.fail(rel, f"repos.{name}.commit {commit!r} is not a full lower-case commit id",
                            "use the 40-hex-digit commit")
            if not branch:
                report.fail(rel, f"repos.{name} has a commit but no branch",
                            f"add branch: {RELEASE} (kas then checks the branch contains the commit)")
        elif branch and RELEASE in str(branch):
            note = f"{rel}: repos.{name} is pinned to release branch {branch!r} only (no commit)"
            if note not in report.notes:
                report.note(note)
        else:
            report.fail(rel, f"repos.{name} is not pinned (commit {commit!r}, branch {branch!r})",
                        "add commit: <40-hex id> on its scarthgap branch")


# --------------------------------------------------------------------------
# oelint-adv

def read_suppressions(root, report):
    """[(rule, [globs relative to yocto/])]; every entry needs a reason."""
    path = os.path.join(root, SUPPRESSIONS)
    entries = []
    if not os.path.exists(path):
        return entries
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            head, sep, reason = line.partition(" -- ")
            parts = head.split()
            if not sep or not reason.strip() or not parts:
                report.fail(f"{SUPPRESSIONS}:{n}", "suppression without a reason",
                            "write `RULE [PATH-GLOB...] -- why the rule does not apply`")
                continue
            entries.append((parts[0], parts[1:]))
    return entries


def oelint_command():
    """oelint-adv of this interpreter's environment (the pinned venv)."""
    beside = os.path.join(os.path.dirname(sys.executable), "oelint-adv")
    return beside if os.path.exists(beside) else "oelint-adv"


def check_oelint(root, report):
    """One oelint-adv run over every file; findings are then matched
    against the suppressions by rule and by the file oelint names (a .bb
    also reports what its includes say, under the include's path)."""
    files = sorted(f for f in glob.glob(os.path.join(root, "yocto", "**", "*"), recursive=True)
                   if f.endswith((".bb", ".bbappend", ".bbclass", ".inc")))
    if not files:
        report.fail("yocto", "no recipes to lint", "")
        return
    suppressions = read_suppressions(root, report)

    def suppressed(rule, path):
        rel = os.path.relpath(path, os.path.join(root, "yocto"))
        return any((rule == r or rule.startswith(r + "."))
                   and (not globs or any(fnmatch.fnmatch(rel, g) for g in globs))
                   for r, globs in suppressions)

    cmd = [oelint_command(), "--release", RELEASE, "--quiet", "--mode", "all", "--jobs", "1",
           f"--constantmods=+{os.path.join(root, CONSTANTS)}"] + files
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    out = (proc.stdout + proc.stderr).strip()
    finding = re.compile(r"^(?P<file>/[^:]+):(?P<line>\d+):(?P<sev>error|warning|info):"
                         r"(?P<rule>[^:]+):(?P<msg>.*)$")
    hits = [m for m in (finding.match(line) for line in out.splitlines()) if m]
    for m in hits:
        if suppressed(m.group("rule"), m.group("file")):
            continue
        report.fail(f"{os.path.relpath(m.group('file'), root)}:{m.group('line')}",
                    f"oelint {m.group('sev')} {m.group('rule')}: {m.group('msg').strip()}",
                    "change the recipe, or add the rule with its reason to "
                    f"{SUPPRESSIONS} if it cannot apply")
    if not hits and proc.returncode != 0:
        report.fail("yocto", f"oelint-adv failed ({proc.returncode}): {out[-500:]}",
                    "run it by hand: " + " ".join(cmd[:8]) + " <files>")


# --------------------------------------------------------------------------
# Consistency with the workspace and board/

def check_layer(root, report):
    compat = [a for a in read_assignments(os.path.join(root, LAYER_CONF), root)
              if a.var.startswith("LAYERSERIES_COMPAT_")]
    if not compat or not any(RELEASE in a.value.split() for a in compat):
        report.fail(LAYER_CONF, f"LAYERSERIES_COMPAT does not name {RELEASE}",
                    f'LAYERSERIES_COMPAT_edgerec = "{RELEASE}"')


def kernel_args(root):
    args = [a for a in assignments_of(root, "KERNEL_ARGS", ("*.conf", "*.inc"))
            if a.overrides == ("append", "tegra")]
    return args


def check_kernel_cmdline(root, report):
    args = kernel_args(root)
    if len(args) != 1:
        report.fail(DISTRO_CONF, f"expected one KERNEL_ARGS:append:tegra, found {len(args)}",
                    "set it once, in conf/distro/include/edgerec-tegra.inc")
        return
    a = args[0]
    tegra_boards = sorted(b for b, (_, active) in boards(root).items() if "tegra" in active)
    if not tegra_boards:
        report.fail(RECIPE_DIR, "no EDGEREC_BOARD for Jetson (tegra) machines",
                    'EDGEREC_BOARD:tegra234 = "jetson-agx-orin"')
    for board in tegra_boards:
        board_file = f"board/{board}/kernel-cmdline"
        if not os.path.isdir(os.path.join(root, "board", board)):
            report.skip(f"kernel command line: board/{board}/ does not exist yet, "
                        f"so {a.path}:{a.line} ({a.value!r}) was not compared")
            continue
        path = os.path.join(root, board_file)
        if not os.path.exists(path):
            report.fail(board_file, "missing (the KERNEL_ARGS the image sets must equal it)",
                        f"write {board_file} (one line)")
            continue
        with open(path, encoding="utf-8") as f:
            want = " ".join(f.read().split())
        if a.value != want:
            report.fail(f"{a.path}:{a.line}",
                        f"KERNEL_ARGS:append:tegra is {a.value!r} but {board_file} says {want!r}",
                        f'set KERNEL_ARGS:append:tegra = " {want}" (or change {board_file} '
                        "and its TUNING.md together)")


# What each machine override EDGEREC_BOARD is selected by implies: meta-tegra
# puts tegra (tegra-common.inc) and the SOC_FAMILY tegra234 (tegra234.inc)
# into MACHINEOVERRIDES of every Orin machine.
IMPLIED_OVERRIDES = {
    "tegra": {"tegra"},
    "tegra234": {"tegra", "tegra234"},
    "jetson-agx-orin-devkit": {"tegra", "tegra234", "jetson-agx-orin-devkit"},
}


def boards(root):
    """{board: (where it is selected, the machine overrides active then)}."""
    out = {}
    for a in assignments_of(root, "EDGEREC_BOARD"):
        active = set()
        for o in a.overrides:
            active |= IMPLIED_OVERRIDES.get(o, {o})
        out[a.value] = (f"{a.path}:{a.line}", active)
    return out


def systemd_units(root, active=None):
    """{package: [units]} the recipe enables through systemd.bbclass for a
    machine with the given overrides (None: every package, any machine)."""
    recipe = assignments_of(root, "SYSTEMD_PACKAGES", ("*.bb", "*.bbappend"))
    packages = []
    for a in recipe:
        conds = set(a.overrides) - {"append", "prepend", "remove"}
        if active is None or conds <= active:
            packages += a.value.replace("${PN}", "edgerec").split()
    units = {}
    for a in assignments_of(root, "SYSTEMD_SERVICE", ("*.bb", "*.bbappend")):
        pkg = ":".join(a.overrides).replace("${PN}", "edgerec")
        if pkg in packages:
            units.setdefault(pkg, []).extend(a.value.split())
    return units


# The board contract (board/README.md): why each file must exist.
BOARD_FILES = {
    "edgerec.toml": "installed as /usr/share/edgerec/edgerec.toml",
    "linuxptp/ptp4l.conf": "installed as /etc/linuxptp/edgerec-ptp4l.conf",
    "kernel-cmdline": "board contract: the kernel command line the image must set",
    "TUNING.md": "board contract: the reason and the measurement for every value",
}


def check_boards(root, report):
    selectable = boards(root)
    if not selectable:
        report.fail(RECIPE_DIR, "EDGEREC_BOARD is never set", 'EDGEREC_BOARD ?= "qemuarm64"')
        return
    all_units = {u for us in systemd_units(root).values() for u in us}
    for board, (where, active) in sorted(selectable.items()):
        bdir = os.path.join(root, "board", board)
        if not os.path.isdir(bdir):
            report.skip(f"board files: board/{board}/ (EDGEREC_BOARD at {where}) does not exist "
                        "yet; its files were not checked")
            continue
        required = dict(BOARD_FILES)
        for pkg, units in systemd_units(root, active).items():
            for u in units:
                required[f"systemd/{u}"] = (f"SYSTEMD_SERVICE:{pkg} names it for this board "
                                            "(bitbake stops without it)")
        for rel, why in sorted(required.items()):
            path = os.path.join(bdir, rel)
            if os.path.islink(path) and not os.path.exists(path):
                report.fail(f"board/{board}/{rel}", f"broken symlink to {os.readlink(path)}",
                            "point it at an existing file")
            elif not os.path.isfile(path):
                report.fail(f"board/{board}/{rel}", f"missing ({why})",
                            f"add it to board/{board}/ (board/README.md has the contract)")
        if not glob.glob(os.path.join(bdir, "udev", "*.rules")):
            report.fail(f"board/{board}/udev", "no *.rules (installed to /usr/lib/udev/rules.d)",
                        "add the board's udev rules")
        # Units another unit starts through OnFailure= need no enabling.
        on_failure = set()
        for unit in glob.glob(os.path.join(bdir, "systemd", "*")):
            with open(unit, encoding="utf-8") as f:
                for line in f:
                    if line.startswith("OnFailure="):
                        on_failure |= set(line.split("=", 1)[1].split())
        for extra in sorted(glob.glob(os.path.join(bdir, "systemd", "*"))):
            name = os.path.basename(extra)
            if name in on_failure:
                continue
            if name.endswith((".mount", ".timer")) and name not in all_units:
                report.note(f"board/{board}/systemd/{name} is installed but in no "
                            "SYSTEMD_SERVICE list, so it is not enabled")
            elif (name.endswith(".service") and name not in all_units
                  and name[:-len(".service")] + ".timer" not in all_units):
                report.note(f"board/{board}/systemd/{name} is installed but in no "
                            "SYSTEMD_SERVICE list, so it is not enabled")


def cargo_features(root):
    with open(os.path.join(root, "crates", "edgerec", "Cargo.toml"), "rb") as f:
        return set(tomllib.load(f).get("features", {}))


def check_features(root, report):
    have = cargo_features(root)
    for a in assignments_of(root, "EDGEREC_CARGO_FEATURES"):
        for feat in a.value.split():
            if feat not in have:
                report.fail(f"{a.path}:{a.line}",
                            f"cargo feature {feat!r} does not exist in crates/edgerec/Cargo.toml "
                            f"(it has: {', '.join(sorted(have)) or 'none'})",
                            f"add `{feat} = [...]` to [features] there, or stop enabling it")


def check_recipe(root, report):
    path = recipe_path(root)
    if path is None:
        report.fail(RECIPE_DIR, "expected exactly one edgerec_<version>.bb", "rename the recipe")
        return
    rel = os.path.relpath(path, root)
    ws = workspace(root)
    pv = os.path.basename(path)[len("edgerec_"):-len(".bb")]
    explicit = [a for a in read_assignments(path, root) if a.var == "PV"]
    if explicit:
        pv = explicit[-1].value
    if pv != ws["version"]:
        report.fail(rel, f"recipe PV {pv} is not the workspace version {ws['version']}",
                    f"git mv {rel} {RECIPE_DIR}/edgerec_{ws['version']}.bb")
    values = {a.var: a for a in read_assignments(path, root) if not a.overrides}
    lic = values.get("LICENSE")
    if lic is None or lic.value != ws["license"]:
        report.fail(rel, f"LICENSE {lic.value if lic else None!r} is not the workspace license "
                    f"{ws['license']!r}", f'LICENSE = "{ws["license"]}"')
    check_license_files(root, rel, values.get("LIC_FILES_CHKSUM"), report)
    uri = values.get("EDGEREC_GIT_URI")
    repo = re.sub(r"^[a-z+]+://", "", ws["repository"]).removesuffix(".git").rstrip("/")
    got = re.sub(r"^[a-z+]+://", "", uri.value.split(";")[0]).removesuffix(".git") if uri else None
    if got != repo:
        report.fail(rel, f"EDGEREC_GIT_URI points at {got!r}, the workspace repository is {repo!r}",
                    f'EDGEREC_GIT_URI ?= "git://{repo};protocol=https;branch=main"')


CLI_SHARE = "crates/edgerec/share"
# Each shell completion file of CLI_SHARE, where the image puts it (where
# bash-completion, zsh and fish look) and the directory FILES:${PN} must
# hold for it.
COMPLETIONS = {
    "completions/edgerec.bash": ("${datadir}/bash-completion/completions/edgerec", "${datadir}/bash-completion"),
    "completions/_edgerec": ("${datadir}/zsh/site-functions/_edgerec", "${datadir}/zsh"),
    "completions/edgerec.fish": ("${datadir}/fish/vendor_completions.d/edgerec.fish", "${datadir}/fish"),
}
REGENERATE = "EDGEREC_UPDATE_SHARE=1 cargo test -p edgerec --test cli_docs, and commit crates/edgerec/share"


def do_install_lines(path):
    """The lines of a recipe's do_install() body, with their numbers."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, inside = [], False
    for n, line in enumerate(lines, 1):
        if line.startswith("do_install()"):
            inside = True
        elif inside and line.startswith("}"):
            break
        elif inside:
            out.append((n, line.strip()))
    return out


def check_cli_share(root, report):
    """The shell completions and man pages generated from the binary's
    command line (CLI_SHARE; crates/edgerec/tests/cli_docs.rs keeps them
    equal to `edgerec completions` and `edgerec man --dir`) exist, and the
    recipe installs and packages each."""
    path = recipe_path(root)
    if path is None:
        return  # check_recipe names that
    rel = os.path.relpath(path, root)
    install = do_install_lines(path)
    packaged = " ".join(a.value for a in read_assignments(path, root)
                        if a.var == "FILES" and a.overrides == ("${PN}",))
    for src, (dest, pkgdir) in COMPLETIONS.items():
        if not os.path.isfile(os.path.join(root, CLI_SHARE, src)):
            report.fail(f"{CLI_SHARE}/{src}", "missing (the image installs it)", REGENERATE)
        if not any(f"/{src}" in line and "${D}" + dest in line for _, line in install):
            report.fail(rel, f"do_install does not install {CLI_SHARE}/{src} to {dest}",
                        f'install -D -m 0644 "$share/{src}" ${{D}}{dest}')
        if pkgdir not in packaged.split():
            report.fail(rel, f"FILES:${{PN}} does not hold {pkgdir} (bitbake stops: installed but "
                        "not shipped)", f'FILES:${{PN}} += "{pkgdir}"')
    if not os.path.isfile(os.path.join(root, CLI_SHARE, "man", "edgerec.1")):
        report.fail(f"{CLI_SHARE}/man/edgerec.1", "missing (the image installs the man pages)", REGENERATE)
    if not any("/man/*.1" in line and "${D}${mandir}/man1" in line for _, line in install):
        report.fail(rel, f"do_install does not install {CLI_SHARE}/man/*.1 to ${{mandir}}/man1",
                    'install -m 0644 "$share"/man/*.1 ${D}${mandir}/man1/')


def check_license_files(root, rel, chksum, report):
    """Every LIC_FILES_CHKSUM entry naming a file of the source (S is this
    repository's checkout) exists and has the md5 given: bitbake's
    do_populate_lic would stop on either. Entries under
    ${COMMON_LICENSE_DIR} are oe-core's and not checked here."""
    if chksum is None:
        report.fail(rel, "LIC_FILES_CHKSUM is not set", 'LIC_FILES_CHKSUM = "file://LICENSE;md5=..."')
        return
    for entry in chksum.value.split():
        url, *params = entry.split(";")
        path = url.removeprefix("file://")
        if "${" in path:
            continue
        opts = dict(p.split("=", 1) for p in params if "=" in p)
        try:
            with open(os.path.join(root, path), "rb") as f:
                lines = f.read().splitlines(keepends=True)
        except OSError as e:
            report.fail(rel, f"LIC_FILES_CHKSUM names {path}, which the repository does not have "
                        f"({e.strerror})", f"add {path} or point LIC_FILES_CHKSUM at the license file")
            continue
        # bitbake's beginline/endline: 1-based, both included.
        lines = lines[int(opts.get("beginline", 1)) - 1:int(opts["endline"]) if "endline" in opts else None]
        md5 = hashlib.md5(b"".join(lines)).hexdigest()
        if opts.get("md5") != md5:
            report.fail(rel, f"LIC_FILES_CHKSUM gives {path} md5 {opts.get('md5')}, the file's is {md5}",
                        f'"file://{path};md5={md5}" (after checking the license text is still the one '
                        "LICENSE names)")


def check_rust(root, report):
    pins = [a for a in assignments_of(root, "RUSTVERSION", ("*.conf", "*.inc")) if not a.overrides]
    need = workspace(root)["rust-version"]
    if not pins:
        report.fail(DISTRO_CONF, "RUSTVERSION is not pinned",
                    'RUSTVERSION = "<version the meta-lts-mixins commit ships>%"')
        return
    for a in pins:
        if version_tuple(a.value) < version_tuple(need):
            report.fail(f"{a.path}:{a.line}",
                        f"RUSTVERSION {a.value} is older than the workspace rust-version {need}",
                        "pin a newer meta-lts-mixins scarthgap/rust commit and its RUSTVERSION")


def check_partitions(root, report):
    path = os.path.join(root, PARTITION_XML)
    try:
        tree = ET.parse(path)
    except (OSError, ET.ParseError) as e:
        report.fail(PARTITION_XML, f"cannot be read as XML: {e}", "fix the file")
        return
    parts = tree.getroot().findall("./device/partition")
    names = [p.get("name") for p in parts]

    def attr(p):
        return int((p.findtext("allocation_attribute") or "0").strip(), 0)

    fix = "DATA must be the last partition before secondary_gpt, with allocation_attribute 0x808"
    if "DATA" not in names:
        report.fail(PARTITION_XML, "no DATA partition", fix)
        return
    data = parts[names.index("DATA")]
    if names[-1] != "secondary_gpt" or names[-2] != "DATA":
        report.fail(PARTITION_XML, f"partition order ends with {names[-3:]}", fix)
    if attr(data) != 0x808:
        report.fail(PARTITION_XML, f"DATA allocation_attribute is {hex(attr(data))}", fix)
    growing = [p.get("name") for p in parts if attr(p) & 0x800]
    if growing != ["DATA"]:
        report.fail(PARTITION_XML, f"partitions that grow (bit 0x800): {growing}",
                    "only DATA may grow; give the others allocation_attribute 8")
    app = parts[names.index("APP")] if "APP" in names else None
    if app is None or app.get("id") != "1":
        report.fail(PARTITION_XML, "APP must stay id 1 (TNSPEC_BOOTDEV nvme0n1p1)",
                    'keep <partition name="APP" id="1" ...>')


# --------------------------------------------------------------------------
# The emulated board's devices: QEMU's options, the disk script, the kernel

QEMU_INC = f"{LAYER}/conf/distro/include/edgerec-qemu.inc"
KERNEL_APPEND = f"{LAYER}/recipes-kernel/linux/linux-yocto_%.bbappend"
QEMU_DATA_SCRIPT = "scripts/yocto-qemu-data"


def qemu_options(words, flag):
    """Each `flag VALUE` of a QEMU command line as {key: value} of VALUE's
    comma-separated options (the first bare word under "")."""
    out = []
    for i, w in enumerate(words[:-1]):
        if w == flag:
            opts = {}
            for part in words[i + 1].split(","):
                k, eq, v = part.partition("=")
                opts[k if eq else ""] = v if eq else k
            out.append(opts)
    return out


def check_qemu(root, report):
    board_toml = os.path.join(root, "board", "qemuarm64", "edgerec.toml")
    if not os.path.isfile(board_toml):
        report.skip("qemu: board/qemuarm64/edgerec.toml does not exist; QEMU devices not checked")
        return
    qb = [a for a in assignments_of(root, "QB_OPT_APPEND", ("*.conf", "*.inc"))
          if "qemuarm64" in a.overrides]
    if not qb:
        report.fail(QEMU_INC, "no QB_OPT_APPEND:append:qemuarm64: runqemu gives the image no data disk "
                    "and no watchdog", "add the NVMe drive and -device i6300esb (see board/qemuarm64/TUNING.md)")
        return
    where = f"{qb[0].path}:{qb[0].line}"
    text = " ".join(a.value for a in qb)
    for a in assignments_of(root, "EDGEREC_QEMU_DATA", ("*.conf", "*.inc")):
        text = text.replace("${EDGEREC_QEMU_DATA}", a.value)
    words = text.split()
    drives = {d.get("id"): d for d in qemu_options(words, "-drive")}
    devices = qemu_options(words, "-device")
    nvme = [d for d in devices if d.get("") == "nvme"]
    if not nvme or nvme[0].get("drive") not in drives:
        report.fail(where, "QB_OPT_APPEND has no -device nvme backed by one of its -drive ids "
                    f"({sorted(k for k in drives if k)})",
                    "-drive file=...,if=none,id=X,format=raw -device nvme,serial=...,drive=X")
    else:
        file = drives[nvme[0]["drive"]].get("file", "")
        try:
            with open(os.path.join(root, QEMU_DATA_SCRIPT), encoding="utf-8") as f:
                m = re.search(r'^IMAGE="[^"]*/([^"/]+)"', f.read(), re.M)
        except OSError as e:
            m = None
            report.fail(QEMU_DATA_SCRIPT, f"cannot be read ({e.strerror})", "restore the script")
        made = m.group(1) if m else None
        if not file.startswith("@DEPLOY_DIR_IMAGE@/") or os.path.basename(file) != made:
            report.fail(where, f"the NVMe drive's file is {file!r}, not @DEPLOY_DIR_IMAGE@/{made} "
                        f"(what {QEMU_DATA_SCRIPT} makes)",
                        f"point it at @DEPLOY_DIR_IMAGE@/{made}, or change the script's IMAGE")
    with open(board_toml, "rb") as f:
        watchdog = tomllib.load(f).get("health", {}).get("watchdog", "")
    if watchdog and not any(d.get("") == "i6300esb" for d in devices):
        report.fail(where, f"board/qemuarm64/edgerec.toml watches {watchdog}, but QEMU gets no "
                    "-device i6300esb", "append -device i6300esb")
    # The kernel: a fragment for qemuarm64 with the drivers built in.
    srcs = [a for a in assignments_of(root, "SRC_URI", ("*.bbappend",))
            if a.path.endswith("linux-yocto_%.bbappend")]
    frag_vars = [a for a in assignments_of(root, "EDGEREC_KERNEL_FRAGMENTS", ("*.conf", "*.inc"))
                 if "qemuarm64" in a.overrides]
    frags = [w[len("file://"):] for a in frag_vars for w in a.value.split() if w.endswith(".cfg")]
    if not any("${EDGEREC_KERNEL_FRAGMENTS}" in a.value for a in srcs) or not frags:
        report.fail(KERNEL_APPEND, "no kernel configuration fragment reaches linux-yocto for qemuarm64",
                    'SRC_URI:append:edgerec = " ${EDGEREC_KERNEL_FRAGMENTS}" here, and '
                    f'EDGEREC_KERNEL_FRAGMENTS:qemuarm64 = "file://edgerec-qemu.cfg" in {QEMU_INC}')
        return
    config = {}
    for frag in frags:
        path = os.path.join(root, os.path.dirname(KERNEL_APPEND), "files", frag)
        if not os.path.isfile(path):
            report.fail(KERNEL_APPEND, f"{frag} is not in files/", f"add {os.path.relpath(path, root)}")
            continue
        with open(path, encoding="utf-8") as f:
            for line in f:
                k, eq, v = line.strip().partition("=")
                if eq and k.startswith("CONFIG_"):
                    config[k] = v
    need = ["CONFIG_BLK_DEV_NVME"] + (["CONFIG_WATCHDOG", "CONFIG_I6300ESB_WDT"] if watchdog else [])
    for opt in need:
        if config.get(opt) != "y":
            report.fail(os.path.join(os.path.dirname(KERNEL_APPEND), "files", frags[0]),
                        f"{opt} is {config.get(opt, 'not set')}, not y (built in)", f"{opt}=y")


# --------------------------------------------------------------------------
# Shell scripts: the repository's and those inside systemd units

SHEBANG = re.compile(rb"^#!\s*(?:/usr)?/bin/(?:env\s+|busybox\s+)?(?:ba|da)?sh(?:\s|$)")
SKIP_DIRS = {".git", "target", ".venv", ".venv-yocto", ".cache", "node_modules", "__pycache__"}
UNIT_SH = re.compile(r"^(?P<key>Exec[A-Za-z]*)=[-@:+!]*(?:/usr)?/bin/(?:ba|da)?sh\s+(?:-[a-z]+\s+)*"
                     r"-c\s+'(?P<prog>.*)'\s*$")


def repo_files(root):
    """Every file git would commit (tracked, or new and not ignored); in a
    tree that is not a git checkout (the negative tests' copies), every file
    outside build and cache directories."""
    proc = subprocess.run(["git", "-C", root, "ls-files", "-z", "-co", "--exclude-standard"],
                          capture_output=True, check=False)
    if proc.returncode == 0 and proc.stdout:
        return sorted(f for f in proc.stdout.decode().split("\0")
                      if f and os.path.isfile(os.path.join(root, f)))
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("out")]
        out += [os.path.relpath(os.path.join(d, f), root) for f in files]
    return sorted(out)


def shell_scripts(root):
    out = []
    for rel in repo_files(root):
        if rel.endswith(".sh"):
            out.append(rel)
            continue
        try:
            with open(os.path.join(root, rel), "rb") as f:
                first = f.readline(200)
        except OSError:
            continue
        if SHEBANG.match(first):
            out.append(rel)
    return out


def unit_programs(path):
    """[(line, key, program)] of the `sh -c '...'` commands of a systemd
    unit: continuation lines joined (systemd puts a space for each
    backslash-newline), `$$` and `%%` undone."""
    out = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        start, text = i + 1, lines[i]
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1] + " " + lines[i]
        i += 1
        m = UNIT_SH.match(text.strip())
        if m:
            out.append((start, m.group("key"), m.group("prog").replace("$$", "$").replace("%%", "%")))
    return out


def check_shell(root, report):
    exe = shutil.which("shellcheck")
    if exe is None:
        report.fail("shell", "shellcheck is not installed",
                    "apt-get install shellcheck (scripts/yocto-check installs it)")
        return
    scripts = shell_scripts(root)
    if scripts:
        # From the root, so that `# shellcheck source=scripts/lib.sh` resolves.
        proc = subprocess.run([exe, "-x", "-f", "gcc"] + scripts, cwd=root, capture_output=True,
                              text=True, check=False)
        for line in proc.stdout.splitlines():
            m = re.match(r"^(?P<file>[^:]+):(?P<line>\d+):\d+: (?P<msg>.*)$", line)
            if m:
                report.fail(f"{m.group('file')}:{m.group('line')}", f"shellcheck: {m.group('msg')}",
                            "fix the script, or disable the code on that line with a "
                            "`# shellcheck disable=SCnnnn # why` comment")
        if proc.returncode not in (0, 1) or (proc.returncode == 1 and not proc.stdout.strip()):
            report.fail("shell", f"shellcheck failed ({proc.returncode}): {proc.stderr.strip()[-300:]}",
                        f"run it by hand from the repository root: shellcheck -x {scripts[0]}")
    units = sorted(glob.glob(os.path.join(root, "board", "*", "systemd", "*")))
    seen = set()
    n_programs = 0
    for unit in units:
        real = os.path.realpath(unit)
        if real in seen or not os.path.isfile(real):
            continue  # a board's symlink to another board's unit: checked once
        seen.add(real)
        rel = os.path.relpath(unit, root)
        for line, key, prog in unit_programs(unit):
            n_programs += 1
            proc = subprocess.run([exe, "-s", "sh", "-f", "gcc", "-"], input=prog + "\n",
                                  capture_output=True, text=True, check=False)
            for finding in proc.stdout.splitlines():
                m = re.match(r"^-:\d+:(?P<col>\d+): (?P<msg>.*)$", finding)
                if m:
                    report.fail(f"{rel}:{line}", f"shellcheck on {key}'s sh -c program, column "
                                f"{m.group('col')}: {m.group('msg')}",
                                "fix the program (as the shell sees it: $$ is $)")
    report.note(f"shellcheck: {len(scripts)} scripts, {n_programs} sh -c programs in "
                f"{len(seen)} unit files")


CHECKS = [
    ("kas", check_kas),
    ("layer", check_layer),
    ("kernel", check_kernel_cmdline),
    ("board", check_boards),
    ("features", check_features),
    ("version", check_recipe),
    ("cli-share", check_cli_share),
    ("rust", check_rust),
    ("partitions", check_partitions),
    ("oelint", check_oelint),
    ("qemu", check_qemu),
    ("shell", check_shell),
]


def run(root, only=None, skip=()):
    report = Report()
    for name, check in CHECKS:
        if (only and name not in only) or name in skip:
            continue
        check(root, report)
    return report


def print_report(report, out=sys.stdout):
    for what in report.skips:
        print(f"SKIP {what}", file=out)
    for what in report.notes:
        print(f"NOTE {what}", file=out)
    for path, what, fix in report.problems:
        print(f"FAIL {path}: {what}", file=out)
        if fix:
            print(f"  fix: {fix}", file=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..")))
    ap.add_argument("--only", nargs="*", choices=[n for n, _ in CHECKS])
    ap.add_argument("--skip", nargs="*", default=[], choices=[n for n, _ in CHECKS])
    args = ap.parse_args()
    report = run(os.path.abspath(args.root), args.only, args.skip)
    print_report(report)
    names = [n for n, _ in CHECKS if (not args.only or n in args.only) and n not in args.skip]
    if report.problems:
        print(f"yocto checks: {len(report.problems)} problem(s) ({', '.join(names)})")
        return 1
    print(f"yocto checks: ok ({', '.join(names)}; {len(report.skips)} skipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
