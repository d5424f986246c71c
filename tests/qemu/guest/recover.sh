# shellcheck shell=sh
# Scenario recover: the boot after a power cut. `edgerec run` recovers every
# .mcap.active under the recordings root at start (the appliance's path),
# records edgerec.seconds (default 3) more and stops cleanly.
# shellcheck source=tests/qemu/guest/common.sh
. /scenarios/common.sh
secs=$(arg edgerec.seconds 3)
find /data/edgerec/recordings -name '*.mcap*' | sed 's/^/@@ before /'
start_edgerec --duration "${secs}s" --report-json /data/edgerec/recover-report.json
wait_edgerec
find /data/edgerec/recordings -name '*.mcap*' | sed 's/^/@@ after /'
