# shellcheck shell=sh
# Scenario offload-cut: records with [offload] sending every closed
# segment to the host's S3 server (10.0.2.2) at a capped rate, with no
# end; the harness cuts the power once a file's upload is half done.
# shellcheck source=tests/qemu/guest/common.sh
. /scenarios/common.sh
net_up || exit 1
# shellcheck disable=SC2119 # no arguments: record until the end
start_edgerec
wait_recording "$pid" 30 || say "not-recording"
status_loop "$pid"
wait_edgerec
