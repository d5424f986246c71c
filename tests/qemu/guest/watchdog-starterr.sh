# shellcheck shell=sh
# Scenario watchdog-starterr: a configuration that fails after the hardware
# watchdog is armed (clock.source = "phc" on a PHC that does not exist).
# edgerec must exit 78 and disarm /dev/watchdog0 on its way out, so the
# board powers off cleanly instead of being reset edgerec.wait seconds
# (twice the watchdog timeout) later, on every boot.
# shellcheck source=tests/qemu/guest/common.sh
. /scenarios/common.sh
run_edgerec --config /data/edgerec/bad-clock.toml --quiet
say "edgerec-exit rc=$? uptime=$(uptime_s)"
sleep "$(arg edgerec.wait 8)"
say "no-reset uptime=$(uptime_s)"
