# shellcheck shell=sh
# Scenario gpio-trigger: edgerec records in triggered mode with a
# [[trigger]] on gpiochip0:3, the virt machine's PL061 line that QEMU's
# power button (gpio-key) pulses high for 100 ms on `system_powerdown`
# (the host sends it to the monitor after "@@ recording"; the board has no
# ACPI, and no gpio-keys driver is loaded, so the line is free). The guest
# waits for the status to count one finished clip, then stops edgerec
# with SIGINT; the host pulls events/ out of the image.
# shellcheck source=tests/qemu/guest/common.sh
. /scenarios/common.sh
secs=$(arg edgerec.seconds 90)
chips=""
for c in /dev/gpiochip*; do
    [ -e "$c" ] && chips="$chips$c "
done
labels=$(cat /sys/class/gpio/gpiochip*/label 2>/dev/null | tr '\n' ' ')
say "gpio chips=${chips:-none} labels=${labels:-none}"
[ -n "$chips" ] || exit 0
start_edgerec --duration "${secs}s"
wait_recording "$pid" 30 || say "not-recording"
clips() {
    edgerec status --config "$CFG" --json 2>/dev/null | tr -d '\n' | grep -o '"clips": *[0-9]*' | grep -o '[0-9]*$'
}
n=0
i=0
while [ $i -lt 300 ] && kill -0 "$pid" 2>/dev/null; do
    n=$(clips)
    [ -n "$n" ] && [ "$n" -ge 1 ] && break
    sleep 0.2
    i=$((i + 1))
done
say "clips ${n:-0} uptime=$(uptime_s)"
status
kill -INT "$pid"
wait_edgerec
