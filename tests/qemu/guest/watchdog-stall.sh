# shellcheck shell=sh
# Scenario watchdog-stall: records with the hardware watchdog armed, then
# sends SIGUSR2 (fault-injection build: the storage stage hangs). The
# supervisor must stop feeding /dev/watchdog0, write the fault file, and the
# i6300esb must reset the board: this scenario never ends by itself.
# shellcheck source=tests/qemu/guest/common.sh
. /scenarios/common.sh
after=$(arg edgerec.stall_after 4)
heartbeat &
# shellcheck disable=SC2119 # no arguments: record until the end
start_edgerec
wait_recording "$pid" 30 || say "not-recording"
status
sleep "$after"
status
say "stall pid=$pid uptime=$(uptime_s) realtime_us=$(now_us)"
kill -USR2 "$pid"
status_loop "$pid" &
sleep 120
say "no-reset uptime=$(uptime_s)"
