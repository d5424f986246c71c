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
}

# The Python readers used by the tests, in $REPO/.venv, pinned.
PY_PACKAGES=("mcap==1.6.0" "mcap-ros2-support==0.6.0" "rosbags==0.11.9")
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
want = {"mcap": "1.6.0", "mcap-ros2-support": "0.6.0", "rosbags": "0.11.9"}
sys.exit(0 if all(m.version(k) == v for k, v in want.items()) else 1)
PY
    then
        log "installing ${PY_PACKAGES[*]} into .venv"
        "$py" -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
    fi
    export EDGEREC_PYTHON="$py"
}
