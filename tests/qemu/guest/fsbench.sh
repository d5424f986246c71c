# shellcheck shell=sh
# Scenario fsbench (scripts/qemu-fsbench, not part of scripts/test): the
# data disk is ext4 or XFS (edgerec.fstype); fio writes it the way edgerec
# does, then edgerec records on it. Each result goes to the harness as one
# line: "@@ fio JOB JSON" (fio's own JSON) and "@@ report JSON" (edgerec's
# --report-json), then "@@ check rc=N" from `edgerec check` in the guest.
#
# The fio jobs, both sequential 1 MiB O_DIRECT writes through io_uring at
# depth 8 (storage.block_size and queue_depth) with an fdatasync every
# 32 MiB, into 1 GiB files (segment.max_size) each created, written, synced,
# closed and deleted in turn (a split, then retention) for edgerec.fio_seconds:
#   prealloc  each file fallocated first (storage.preallocate)
#   extend    each file grows with its writes (no preallocation)
# shellcheck source=tests/qemu/guest/common.sh
. /scenarios/common.sh
fio_s=$(arg edgerec.fio_seconds 15)
secs=$(arg edgerec.seconds 20)

# The queue settings board/jetson-agx-orin/udev/ gives the Orin's NVMe.
q=/sys/block/nvme0n1/queue
echo mq-deadline >"$q/scheduler"
echo 0 >"$q/wbt_lat_usec"
echo 1024 >"$q/read_ahead_kb"
say "fs $(grep ' /data ' /proc/mounts) sched=$(cat "$q/scheduler") wbt=$(cat "$q/wbt_lat_usec")"
for job in prealloc extend; do
    case "$job" in
        prealloc) fa=native ;;
        *) fa=none ;;
    esac
    if fio --name="$job" --filename="/data/fio-$job" --rw=write --bs=1M --direct=1 \
        --ioengine=io_uring --iodepth=8 --size=1G --loops=100000 --unlink_each_loop=1 \
        --fallocate="$fa" --fdatasync=32 --end_fsync=1 --runtime="$fio_s" \
        --output-format=json --output="/tmp/$job.json" >/dev/null 2>/tmp/fio.err; then
        say "fio $job $(tr -d '\n' <"/tmp/$job.json")"
    else
        say "fio-failed $job $(tr '\n' ' ' </tmp/fio.err)"
    fi
    rm -f "/data/fio-$job"
    sync
done

start_edgerec --duration "${secs}s" --report-json /tmp/report.json
wait_recording "$pid" 30 || say "not-recording"
sleep $((secs / 2))
status
wait_edgerec
if [ -f /tmp/report.json ]; then
    say "report $(tr -d '\n' </tmp/report.json)"
    dir=$(sed -n 's/.*"session_dir": *"\([^"]*\)".*/\1/p' /tmp/report.json)
    edgerec check "$dir" >/tmp/check.out 2>&1
    say "check rc=$? $(grep -c '^OK' /tmp/check.out) $(tail -n 3 /tmp/check.out | tr '\n' ' ')"
fi
