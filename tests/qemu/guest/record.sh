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
# "@@ creds UID GID CAPEFF CAPBND CAPAMB": who the recorder runs as.
say "creds $(awk '/^Uid:/ {u=$2} /^Gid:/ {g=$2} /^CapEff:/ {e=$2} /^CapBnd:/ {b=$2} /^CapAmb:/ {a=$2} END {print u, g, e, b, a}' /proc/"$pid"/status)"
wait_edgerec
