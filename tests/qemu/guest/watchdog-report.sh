# shellcheck shell=sh
# Scenario watchdog-report: the boot after the watchdog reset. edgerec
# reports the previous fault at start (log, status last_fault) and renames
# the fault file *.reported.json; records edgerec.seconds (default 4).
# shellcheck source=tests/qemu/guest/common.sh
. /scenarios/common.sh
secs=$(arg edgerec.seconds 4)
for f in /data/edgerec/*; do say "before ${f##*/}"; done
start_edgerec --duration "${secs}s"
wait_recording "$pid" 30 || say "not-recording"
status
wait_edgerec
for f in /data/edgerec/*; do say "after ${f##*/}"; done
