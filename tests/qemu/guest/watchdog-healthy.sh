# shellcheck shell=sh
# Scenario watchdog-healthy: edgerec.seconds (default 30) of recording with
# the hardware watchdog armed; a healthy recorder keeps feeding it, so the
# board must end with a clean power-off and no reset.
# shellcheck source=tests/qemu/guest/common.sh
. /scenarios/common.sh
secs=$(arg edgerec.seconds 30)
start_edgerec --duration "${secs}s" --report-json /data/edgerec/report.json
wait_recording "$pid" 30 || say "not-recording"
status_loop "$pid" &
wait_edgerec
