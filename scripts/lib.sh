# shellcheck shell=bash
# Shared set-up for scripts/demo, scripts/test and scripts/bench: each step
# is idempotent (checks first, installs only what is missing).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export REPO

log() { printf '==> %s\n' "$*" >&2; }

# Debian packages, installed only when a command is missing.
ensure_apt() { # ensure_apt COMMAND PACKAGE [PACKAGE...]
    local cmd="$1"; shift
    command -v "$cmd" >/dev/null 2>&1 && return 0
    log "installing $* (for $cmd)"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -q "$@" >/dev/null 2>&1 || {
        $sudo apt-get update -q >/dev/null
        $sudo apt-get install -y -q "$@" >/dev/null
    }
}

ensure_rust() {
    if ! command -v cargo >/dev/null 2>&1; then
        # shellcheck source=/dev/null
        [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
    fi
    command -v cargo >/dev/null 2>&1 || {
        echo "cargo not found: install Rust with rustup (https://rustup.rs)" >&2
        exit 1
    }
    if command -v rustup >/dev/null 2>&1; then
        for c in rustfmt clippy; do
            rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
        done
    fi
    ensure_apt cc gcc
    # cyclors (edgerec-ros's dds backend) builds Cyclone DDS with cmake
    # and generates its bindings with bindgen, which needs libclang.
    ensure_apt cmake cmake
    ensure_deb libclang-dev
    ensure_gstreamer
}

# The host's release binaries, built once for the demo, the benchmarks,
# the bag tools benchmark and the QEMU board's host side: one cargo
# invocation with one package set, so every later call finds them fresh
# (a different -p set can unify features differently and rebuild).
RELEASE_PACKAGES=(-p edgerec -p edgerec-bench -p edgerec-tools)
build_release() {
    log "cargo build --release ${RELEASE_PACKAGES[*]}"
    cargo build --release --locked "${RELEASE_PACKAGES[@]}" >&2
}

# sccache as cargo's RUSTC_WRAPPER, for scripts/test: each crate built
# once is kept in sccache's cache outside the clone (~/.cache/sccache, or
# SCCACHE_DIR), so a fresh clone rebuilds only what changed. Registry
# crates (the bulk of every build: seven builds a run, for clippy, the
# tests, fuzzing, Windows, aarch64 and two release builds) hit across
# clones; sccache keys on the compiler, its arguments, the sources and the
# CARGO_* environment, and passes lints and warnings back as they were.
# EDGEREC_SCCACHE=0 turns it off; a RUSTC_WRAPPER already set is kept.
# The server is started here with its output to a log, not by the first
# rustc (which would start it inside a stage's process group).
sccache_on() { # sccache_on LOGFILE
    [ "${EDGEREC_SCCACHE:-1}" != 0 ] || return 0
    case "${RUSTC_WRAPPER:-}" in
    "") ;;
    sccache | */sccache)
        # Started by this run already (a stage run as `scripts/test --stage`
        # by scripts/test): keep it, and its statistics.
        [ "${EDGEREC_SCCACHE_OURS:-}" != 1 ] || return 0
        # The caller's own server (started on demand by a build) keeps
        # sccache's default 10-minute idle timeout, which runs out during
        # stages that build nothing: restart it with the timeout below.
        sccache --stop-server >/dev/null 2>&1 || true
        unset RUSTC_WRAPPER
        ;;
    *) return 0 ;; # another wrapper: the caller's choice
    esac
    command -v sccache >/dev/null 2>&1 || return 0
    # Seven builds' worth of crates; sccache evicts the oldest past it.
    export SCCACHE_CACHE_SIZE="${SCCACHE_CACHE_SIZE:-20G}"
    # The server stays up between stages that build nothing for longer
    # than its default 10 minutes (the QEMU board); sccache_off stops it.
    export SCCACHE_IDLE_TIMEOUT="${SCCACHE_IDLE_TIMEOUT:-3600}"
    if sccache --start-server </dev/null >"$1" 2>&1 || sccache --show-stats >/dev/null 2>&1; then
        export RUSTC_WRAPPER=sccache EDGEREC_SCCACHE_OURS=1
        sccache --zero-stats >/dev/null 2>&1 || true
    else
        log "warning: sccache would not start (see $1): building without it"
    fi
}

# One line of what sccache saved, then its server stopped (scripts/test's
# end).
sccache_off() {
    [ "${RUSTC_WRAPPER:-}" = sccache ] || return 0
    local hits misses
    read -r hits misses < <(sccache --show-stats 2>/dev/null \
        | awk '/^Cache hits  /{h=$3} /^Cache misses  /{m=$3} END{print h, m}')
    printf 'sccache: %s hits, %s misses (compiled)\n' "${hits:-?}" "${misses:-?}"
    sccache --stop-server >/dev/null 2>&1 || true
}

# GStreamer for edgerec-camera: the development files gstreamer-rs links
# against, and the plugins the cameras run on here (videotestsrc,
# videoconvert, appsrc/appsink: base; v4l2src, mp4mux: good; x265enc,
# h265parse: bad; avdec_h265: libav), gst-launch-1.0 and ffmpeg (the
# tests' independent decoder).
ensure_gstreamer() {
    ensure_deb libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev \
        gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad \
        gstreamer1.0-libav gstreamer1.0-tools ffmpeg
}

# The Python readers and ROS 2 test peers (tests/py/ros2peer.py) used by the
# tests, in $REPO/.venv, pinned. mcap-ros1-support 0.9.0 (the newest; it
# wants mcap>=1.6.0) decodes the ros1-profile MCAP of `edgerec-tools
# convert` (tests/py/read_converted.py). cyclonedds 11.0.1 has wheels (with
# libddsc) for Linux x86_64 but none for Linux aarch64, where pip would
# build it from source, which needs a Cyclone DDS C install
# (CYCLONEDDS_HOME).
PY_PACKAGES=("mcap==1.6.0" "mcap-ros2-support==0.6.0" "mcap-ros1-support==0.9.0" "rosbags==0.11.9"
    "cyclonedds==11.0.1" "moto[server]==5.2.6" "boto3==1.44.18" "paho-mqtt==2.2.0")
ensure_venv() {
    local py="$REPO/.venv/bin/python"
    if [ ! -x "$py" ]; then
        log "creating $REPO/.venv"
        python3 -m venv "$REPO/.venv" 2>/dev/null || {
            ensure_apt false python3-venv
            python3 -m venv "$REPO/.venv"
        }
    fi
    if ! "$py" - <<'PY' 2>/dev/null
import importlib.metadata as m, sys
want = {"mcap": "1.6.0", "mcap-ros2-support": "0.6.0", "mcap-ros1-support": "0.9.0",
        "rosbags": "0.11.9", "cyclonedds": "11.0.1", "moto": "5.2.6", "boto3": "1.44.18",
        "paho-mqtt": "2.2.0", "flask": None}
sys.exit(0 if all(v is None and m.version(k) or m.version(k) == v for k, v in want.items()) else 1)
PY
    then
        log "installing ${PY_PACKAGES[*]} into .venv"
        "$py" -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
    fi
    export EDGEREC_PYTHON="$py"
}

# Foxglove's own readers for tests/js/verify_foxglove.mjs (@mcap/core and
# the ROS 2 CDR deserializer), pinned by tests/js/package-lock.json. npm ci
# runs only when node_modules is missing or older than the lock file.
# @foxglove/rosmsg2-serialization 3.x wants Node >= 20 (Debian 12's nodejs
# is 18: the check then prints SKIP and exits 77).
ensure_node_tools() {
    ensure_apt node nodejs
    ensure_apt npm npm
    local js="$REPO/tests/js"
    if [ ! -d "$js/node_modules" ] || [ "$js/package-lock.json" -nt "$js/node_modules" ]; then
        log "npm ci in tests/js"
        npm ci --prefix "$js" --no-audit --no-fund --loglevel=error >/dev/null
        # npm ci leaves node_modules' mtime at its creation: mark it now.
        touch "$js/node_modules"
    fi
}

# ---------------------------------------------------------------------------
# aarch64 (Jetson AGX Orin) builds and user-mode QEMU tests: used by
# scripts/cross-build and scripts/test-aarch64.

AARCH64_TARGET=aarch64-unknown-linux-gnu
# Where Debian's libc6-dev-arm64-cross puts the aarch64 glibc headers
# (bindgen's sysroot for cyclors).
AARCH64_SYSROOT=/usr/aarch64-linux-gnu
# Debian's arm64 multiarch libraries (GStreamer and everything it needs,
# glibc included) and their pkg-config files.
AARCH64_MULTIARCH_LIBDIR=/usr/lib/aarch64-linux-gnu
# What user-mode QEMU runs aarch64 binaries against: the host's root,
# where libc6:arm64 (pulled by the arm64 GStreamer) puts the aarch64
# loader (/lib/ld-linux-aarch64.so.1) and glibc, libstdc++6:arm64
# libstdc++ (cyclors' C++), all in /usr/lib/aarch64-linux-gnu. Not the
# cross sysroot above: its loader (glibc 2.36-8cross1) would find the
# multiarch libc.so.6 (2.36-9+deb12u*) through /etc/ld.so.cache, and a
# loader must run with its own glibc.
# shellcheck disable=SC2034 # used by the scripts that source this file
AARCH64_RUN_ROOT=/
# gstreamer-app-1.0.pc and libgstapp-1.0.so for aarch64 (see
# ensure_aarch64_gst_dev).
AARCH64_GST_DEV="${CARGO_TARGET_DIR:-$REPO/target}/$AARCH64_TARGET/gst-plugins-base-dev"

# apt-get with a retry while another apt/dpkg holds the lock.
apt_get() { # apt_get ARGS...
    local sudo="" try out
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    for try in 1 2 3 4 5 6 7 8 9 10; do
        if out="$(DEBIAN_FRONTEND=noninteractive $sudo apt-get "$@" 2>&1)"; then
            return 0
        fi
        case "$out" in
            *"Could not get lock"* | *"Unable to lock"* | *"is another process using it"*)
                log "apt is locked by another process; retrying in 15 s ($try/10)"
                sleep 15 ;;
            *) printf '%s\n' "$out" >&2; return 1 ;;
        esac
    done
    printf '%s\n' "$out" >&2
    return 1
}

# Debian packages by name, installed only when dpkg does not list them
# (for packages that bring no command of their own, unlike ensure_apt).
ensure_deb() { # ensure_deb PACKAGE [PACKAGE...]
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$p")
    done
    [ "${#missing[@]}" -eq 0 ] && return 0
    log "installing ${missing[*]}"
    apt_get install -y -q "${missing[@]}" || {
        apt_get update -q
        apt_get install -y -q "${missing[@]}"
    }
}

# tshark reads the pcap export in the UDP tests (crates/edgerec/tests/
# bus_udp.rs). Its package asks whether non-root users may capture
# (wireshark-common/install-setuid): answered "no" beforehand, so the
# install never waits for a terminal.
ensure_tshark() {
    command -v tshark >/dev/null 2>&1 && return 0
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "wireshark-common wireshark-common/install-setuid boolean false" | $sudo debconf-set-selections
    ensure_deb tshark
}

# Debian's ROS 1 Python tools (bookworm: rosbag 1.15), which write the real
# ROS 1 bags the edgerec-rosbag1 tests read (tests/py/make_ros1_bags.py) and
# are their oracle (read_messages, rosbag reindex). They run with Debian's
# /usr/bin/python3, not the venv.
ensure_ros1_python() {
    ensure_deb python3-rosbag python3-std-msgs python3-sensor-msgs \
        python3-geometry-msgs python3-tf2-msgs
}

# A rustup target's standard library.
# Nightly Rust and cargo-fuzz (pinned), for scripts/fuzz.
ensure_cargo_fuzz() {
    command -v rustup >/dev/null 2>&1 || { echo "fuzzing needs rustup (nightly Rust)" >&2; exit 1; }
    rustup toolchain list | grep -q '^nightly' || {
        log "rustup toolchain install nightly"
        rustup toolchain install nightly --profile minimal
    }
    local version=0.13.2
    if ! cargo fuzz --version 2>/dev/null | grep -q "$version"; then
        log "cargo install cargo-fuzz $version"
        cargo install cargo-fuzz --version "$version" --locked
    fi
}

ensure_rust_target() { # ensure_rust_target TRIPLE
    rustup target list --installed 2>/dev/null | grep -qx "$1" && return 0
    command -v rustup >/dev/null 2>&1 || {
        echo "rustup not found: the $1 standard library comes from rustup target add" >&2
        exit 1
    }
    log "rustup target add $1"
    rustup target add "$1"
}

# Prints the container engine that answers (docker, then podman, the order
# cross tries them) and succeeds; fails when none does. A client whose
# daemon is not running does not count.
container_engine() {
    local e
    for e in docker podman; do
        command -v "$e" >/dev/null 2>&1 || continue
        if timeout 20 "$e" info >/dev/null 2>&1; then
            echo "$e"
            return 0
        fi
    done
    return 1
}

# cross (cross-rs), for builds in its container images (Cross.toml).
ensure_cross() {
    command -v cross >/dev/null 2>&1 && return 0
    log "cargo install cross --locked"
    cargo install cross --locked
}

# Debian's aarch64 cross toolchain: rustup's target plus gcc and glibc for
# aarch64 (the linker, and the C compiler the -sys crates' build scripts
# use: zstd-sys and lz4-sys build their C with the cc crate).
ensure_aarch64_toolchain() {
    ensure_rust
    ensure_rust_target "$AARCH64_TARGET"
    # g++ too: cyclors' cmake build probes a C++ compiler for the target.
    ensure_deb gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross
    # edgerec-camera links GStreamer (gstreamer-sys, gstreamer-base-sys,
    # gstreamer-app-sys, glib-sys, gobject-sys find it with pkg-config):
    # Debian's arm64 build of it, installed beside the host's (multiarch).
    ensure_arm64_arch
    ensure_deb libgstreamer1.0-dev:arm64 libgstreamer-plugins-base1.0-0:arm64
    ensure_aarch64_gst_dev
}

# dpkg knows arm64 as a foreign architecture, and apt has its package
# lists.
ensure_arm64_arch() {
    dpkg --print-foreign-architectures | grep -qx arm64 && return 0
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    log "dpkg --add-architecture arm64"
    $sudo dpkg --add-architecture arm64
    apt_get update -q
}

# Debian 12's libgstreamer-plugins-base1.0-dev is not Multi-Arch: same
# (its GObject introspection .gir files differ per architecture), so apt
# installs its arm64 build only by removing the host's, which the host
# build needs. Of that package the cross build needs only
# gstreamer-app-1.0.pc and the libgstapp-1.0.so link: the arm64 .deb of
# the version libgstreamer-plugins-base1.0-0:arm64 has is unpacked into
# $AARCH64_GST_DEV (no root, nothing outside cargo's target directory),
# its .pc files' prefix pointed there and its .so links at the arm64
# libraries in $AARCH64_MULTIARCH_LIBDIR. Where the arm64 package is
# installed (a machine without the host's, or cross's image), it is used
# instead.
ensure_aarch64_gst_dev() {
    local pkg=libgstreamer-plugins-base1.0-dev
    if dpkg-query -W -f='${Status}' "$pkg:arm64" 2>/dev/null | grep -q "install ok installed"; then
        return 0
    fi
    local ver stamp="$AARCH64_GST_DEV/.version"
    ver="$(dpkg-query -W -f='${Version}' libgstreamer-plugins-base1.0-0:arm64)"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$ver" ]; then
        return 0
    fi
    log "unpacking $pkg:arm64 $ver into $AARCH64_GST_DEV"
    rm -rf "$AARCH64_GST_DEV"
    mkdir -p "$AARCH64_GST_DEV/deb"
    # apt-get download needs no root; as root it warns that _apt cannot
    # write there and downloads anyway.
    (cd "$AARCH64_GST_DEV/deb" && apt-get download -q "$pkg:arm64=$ver" >/dev/null 2>&1) || {
        apt_get update -q
        (cd "$AARCH64_GST_DEV/deb" && apt-get download -q "$pkg:arm64=$ver" >/dev/null)
    }
    local root="$AARCH64_GST_DEV/root" lib l
    dpkg-deb -x "$AARCH64_GST_DEV"/deb/*.deb "$root"
    lib="$root$AARCH64_MULTIARCH_LIBDIR"
    sed -i "s|^prefix=.*|prefix=$root/usr|" "$lib"/pkgconfig/*.pc
    for l in "$lib"/*.so; do
        ln -sfn "$AARCH64_MULTIARCH_LIBDIR/$(readlink "$l")" "$l"
    done
    echo "$ver" >"$stamp"
}

# The arm64 GStreamer plugins the camera tests use under user-mode QEMU:
# videotestsrc, videoconvert, videoscale, videorate, appsrc, appsink
# (base), mp4mux (good), h265parse, x265enc (bad), avdec_h265 (libav).
# All Multi-Arch: same, so they install beside the host's. A camera test
# whose element is missing prints why it skips.
ensure_aarch64_gst_plugins() {
    ensure_arm64_arch
    ensure_deb libstdc++6:arm64 gstreamer1.0-plugins-base:arm64 \
        gstreamer1.0-plugins-good:arm64 gstreamer1.0-plugins-bad:arm64 \
        gstreamer1.0-libav:arm64
}

# Environment for `cargo ... --target aarch64-unknown-linux-gnu` with the
# Debian toolchain (not for cross, whose images set their own).
aarch64_cargo_env() {
    export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
    export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
    export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar
    export CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++
    # bindgen (cyclors) parses Cyclone's headers for aarch64 against
    # Debian's aarch64 glibc headers.
    export BINDGEN_EXTRA_CLANG_ARGS_aarch64_unknown_linux_gnu="--sysroot=$AARCH64_SYSROOT"
    # pkg-config for the aarch64 target only (the pkg-config crate reads
    # VAR_<target> before VAR, so host builds keep the host's .pc files):
    # LIBDIR replaces pkg-config's default search path, so a module
    # missing for arm64 fails instead of linking the x86-64 library. The
    # .pc files name absolute multiarch paths, so no PKG_CONFIG_SYSROOT_DIR.
    export PKG_CONFIG_ALLOW_CROSS_aarch64_unknown_linux_gnu=1
    export PKG_CONFIG_LIBDIR_aarch64_unknown_linux_gnu="$AARCH64_GST_DEV/root$AARCH64_MULTIARCH_LIBDIR/pkgconfig:$AARCH64_MULTIARCH_LIBDIR/pkgconfig:/usr/share/pkgconfig"
}

# Static glibc executables for the aarch64 target only (build scripts and
# proc macros stay host binaries): what runs in a bare initramfs. Cargo
# ignores target.<triple>.rustflags when RUSTFLAGS is set, and applies
# RUSTFLAGS to the target only when --target is given, so the flag goes
# where cargo will read it.
aarch64_static_rustflags() {
    local flag="-C target-feature=+crt-static"
    if [ -n "${RUSTFLAGS:-}" ]; then
        export RUSTFLAGS="$RUSTFLAGS $flag"
    else
        export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="${CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS:+$CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS }$flag"
    fi
}

# User-mode QEMU for aarch64 (Debian qemu-user-static: static, so it also
# works as a binfmt_misc interpreter in any mount namespace), and its
# binfmt_misc entry so that aarch64 binaries a test spawns (the edgerec
# binary) run too. Sets QEMU_AARCH64 to the emulator. The entry needs
# root: without it this only warns, and the tests that spawn aarch64
# binaries print why they skip.
ensure_qemu_aarch64() {
    ensure_deb qemu-user-static binfmt-support
    QEMU_AARCH64="$(command -v qemu-aarch64-static || command -v qemu-aarch64)"
    export QEMU_AARCH64
    local misc=/proc/sys/fs/binfmt_misc sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    if grep -qs '^enabled' "$misc/qemu-aarch64"; then
        return 0
    fi
    # systemd-binfmt (or binfmt-support's service) registers the entry at
    # boot; where neither ran (containers, this CI machine), do it here.
    if [ ! -e "$misc/status" ]; then
        $sudo mount -t binfmt_misc binfmt_misc "$misc" 2>/dev/null \
            || log "warning: cannot mount binfmt_misc on $misc"
    fi
    if [ -e "$misc/qemu-aarch64" ]; then
        log "enabling the disabled binfmt_misc entry qemu-aarch64"
        echo 1 | $sudo tee "$misc/qemu-aarch64" >/dev/null 2>&1 || true
    elif [ -e "$misc/status" ]; then
        log "registering qemu-aarch64 with binfmt_misc"
        # binfmt-support's registration, else the systemd-binfmt line
        # (the kernel decodes its \x escapes itself).
        $sudo update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 \
            || $sudo tee "$misc/register" </usr/lib/binfmt.d/qemu-aarch64.conf >/dev/null 2>&1 \
            || true
    fi
    grep -qs '^enabled' "$misc/qemu-aarch64" \
        || log "warning: no binfmt_misc entry for aarch64: tests that spawn aarch64 binaries will skip"
}
