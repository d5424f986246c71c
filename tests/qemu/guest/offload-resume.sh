# shellcheck shell=sh
# Scenario offload-resume: the boot after offload-cut's power cut. edgerec
# (resume.toml: no rate cap, a long drain) recovers the cut segment, finds
# the earlier session's unsent files and the journal of the upload that
# was cut, records edgerec.seconds (default 4) more and, once stopped,
# sends what is queued before it exits.
# shellcheck source=tests/qemu/guest/common.sh
. /scenarios/common.sh
CFG=/data/edgerec/resume.toml
net_up || exit 1
secs=$(arg edgerec.seconds 4)
start_edgerec --duration "${secs}s"
wait_recording "$pid" 60 || say "not-recording"
status_loop "$pid"
wait_edgerec
