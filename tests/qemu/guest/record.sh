# shellcheck shell=sh
# Scenario record: edgerec records the configured synthetic sensors for
# edgerec.seconds (kernel command line, default 20) seconds; the
# status mid-run and the report go to the harness.
# shellcheck source=tests/qemu/guest/common.sh
. /scenarios/common.sh
secs=$(arg edgerec.seconds 20)
start_edgerec --duration "${secs}s" --report-json /data/edgerec/report.json
wait_recording "$pid" 30 || say "not-recording"
sleep $((secs / 2))
status
sched "$pid"
wait_edgerec
