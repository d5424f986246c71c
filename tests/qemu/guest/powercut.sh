# shellcheck shell=sh
# Scenario powercut: records with no end; the harness kills QEMU at a
# random moment. The heartbeat gives the harness the guest's clock at the
# cut; the status every second gives the drops counted so far.
# shellcheck source=tests/qemu/guest/common.sh
. /scenarios/common.sh
fsync_trace
heartbeat &
# shellcheck disable=SC2119 # no arguments: record until the end
start_edgerec
wait_recording "$pid" 30 || say "not-recording"
status_loop "$pid"
wait_edgerec
