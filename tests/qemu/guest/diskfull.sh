# shellcheck shell=sh
# Scenario diskfull: a small disk recorded past its capacity with retention
# on. First a ballast file (outside the recordings root, so retention cannot
# delete it) leaves less than one segment above the floor: recording must
# pause softly (state disk-full, drops counted). The ballast then goes and
# recording resumes, retention deleting the oldest segments as the disk
# fills again and again, until edgerec.after_mib more MiB are written (the
# recorder is then stopped with SIGINT; edgerec.seconds only caps a run that
# never gets there). Stopping on bytes, not time, keeps the check "written
# past the disk's capacity" true on a host slowed by other work. /data's
# free space is sampled every 200 ms.
# shellcheck source=tests/qemu/guest/common.sh
. /scenarios/common.sh
secs=$(arg edgerec.seconds 150)
after_mib=$(arg edgerec.after_mib 576)
floor_mib=$(arg edgerec.floor_mib 32)
above_mib=$(arg edgerec.ballast_leaves_mib 12)
# shellcheck disable=SC2046 # two fields
set -- $(stat -f -c '%a %S' /data)
avail_kib=$(($1 * $2 / 1024))
ballast_kib=$((avail_kib - (floor_mib + above_mib) * 1024))
dd if=/dev/zero of=/data/ballast bs=1024k count=$((ballast_kib / 1024)) conv=fsync 2>/dev/null
sync
say "ballast mib=$((ballast_kib / 1024)) uptime=$(uptime_s)"
df_sampler &
start_edgerec --duration "${secs}s" --report-json /data/edgerec/report.json
wait_recording "$pid" 30 || say "not-recording"
status_loop "$pid" &
# Wait for the pause, hold it 3 s, then give the space back.
i=0
paused=no
while [ $i -lt 100 ] && kill -0 "$pid" 2>/dev/null; do
    if edgerec status --config "$CFG" --json 2>/dev/null | grep -q '"state": *"disk-full"'; then
        paused=yes
        break
    fi
    sleep 0.2
    i=$((i + 1))
done
say "paused $paused uptime=$(uptime_s)"
sleep 3
rm /data/ballast
sync
say "ballast-removed uptime=$(uptime_s)"
written() {
    edgerec status --config "$CFG" --json 2>/dev/null | grep -o '"bytes_written": *[0-9]*' | grep -o '[0-9]*$'
}
base=$(written)
target=$((${base:-0} + after_mib * 1024 * 1024))
while kill -0 "$pid" 2>/dev/null; do
    w=$(written)
    if [ -n "$w" ] && [ "$w" -ge "$target" ]; then
        # The status loop's last line then shows the target reached.
        sleep 1.5
        status
        say "target-reached written=$w uptime=$(uptime_s)"
        kill -INT "$pid"
        break
    fi
    sleep 0.5
done
wait_edgerec
