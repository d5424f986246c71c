#!/usr/bin/env bash
# Self-test of the ROS 2 test peers (tests/py/ros2peer.py): runs
# tests/py/ros2peer_selftest.py inside a fresh network namespace that has only
# lo (up, multicast on), so no DDS participant sees the machine's interfaces.
# Needs root, or unprivileged user namespaces (then unshare -rn). Prints a
# PASS or FAIL line per check; exits non-zero if any failed.
#
# EDGEREC_PYTHON picks the Python; without it scripts/lib.sh ensure_venv
# makes .venv (before entering the namespace: it may need PyPI).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [ "${ROS2PEER_SELFTEST_NETNS:-}" != 1 ]; then
    if [ -z "${EDGEREC_PYTHON:-}" ]; then
        # shellcheck source=scripts/lib.sh
        . "$HERE/../../scripts/lib.sh"
        ensure_venv
    fi
    if [ "$(id -u)" -eq 0 ]; then
        netns=(unshare --net)
    else
        netns=(unshare --map-root-user --net)
    fi
    exec env ROS2PEER_SELFTEST_NETNS=1 EDGEREC_PYTHON="$EDGEREC_PYTHON" \
        "${netns[@]}" "$0" "$@"
fi

# In the new namespace now.
ip link set lo up
ip link set lo multicast on
others="$(ip -o link show | awk -F': ' '$2 != "lo" { print $2 }')"
if [ -n "$others" ]; then
    echo "FAIL network namespace: interfaces besides lo: $others" >&2
    exit 1
fi
exec "$EDGEREC_PYTHON" "$HERE/ros2peer_selftest.py"
