# shellcheck shell=sh
# Shared by the scenarios (sourced). Lines starting with "@@ " go to the
# harness (tests/qemu/run.py) over the serial console.
CFG=/data/edgerec/edgerec.toml
export EDGEREC_LOG=info NO_COLOR=1

say() { echo "@@ $*"; }

# arg KEY DEFAULT: the value of KEY=... on the kernel command line.
arg() {
    # shellcheck disable=SC2013 # the command line is words, not lines
    for w in $(cat /proc/cmdline); do
        case "$w" in "$1="*) echo "${w#*=}"; return ;; esac
    done
    echo "$2"
}
uptime_s() { read -r up _ </proc/uptime; echo "$up"; }

# CLOCK_REALTIME in microseconds.
now_us() {
    # shellcheck disable=SC2046 # split into the fields on purpose
    set -- $(adjtimex | grep -E '^ *time\.tv_(sec|usec):')
    echo $(($2 * 1000000 + $4))
}

# Every ~100 ms: "@@ hb SEC USEC UPTIME", CLOCK_REALTIME (adjtimex(2): the
# recorder's clock.source = realtime) and CLOCK_BOOTTIME. Busybox's date has
# no %N. The harness takes the last one it read before it killed the board
# as a lower bound of the moment of the cut.
heartbeat() {
    while :; do
        # shellcheck disable=SC2046 # split into the fields on purpose
    set -- $(adjtimex | grep -E '^ *time\.tv_(sec|usec):')
        read -r up _ </proc/uptime
        echo "@@ hb $2 $4 $up"
        sleep 0.05
    done
}

# Every ~200 ms: "@@ df UPTIME BAVAIL BSIZE" of /data (statvfs f_bavail,
# the figure retention keeps above its floor).
df_sampler() {
    while :; do
        read -r up _ </proc/uptime
        echo "@@ df $up $(stat -f -c '%a %S' /data)"
        sleep 0.2
    done
}

# "@@ status JSON": the running recorder's snapshot on one line.
status() {
    s=$(edgerec status --config "$CFG" --json 2>/dev/null | tr -d '\n')
    [ -n "$s" ] && echo "@@ status $s"
}

# "@@ sched COMM POLICY RTPRIO" for every thread of the process $1
# (/proc/PID/task/TID/stat fields 2, 41 and 40; policy 1 is SCHED_FIFO).
sched() {
    for t in /proc/"$1"/task/*; do
        # shellcheck disable=SC2046 # split into the fields on purpose
        set -- $(cat "$t/stat" 2>/dev/null)
        [ $# -ge 41 ] || continue
        comm=$2
        shift 39
        say "sched $comm $2 $1"
    done
}

# Every second, the status, while $1 (a pid) lives.
status_loop() {
    while kill -0 "$1" 2>/dev/null; do
        status
        sleep 1
    done
}

# Waits (up to $2 s) until the recorder $1 answers recording: state
# recording, or degraded (the emulated board has no PTP, so its clock is
# always "unlocked").
wait_recording() {
    i=0
    while [ $i -lt $(($2 * 5)) ]; do
        kill -0 "$1" 2>/dev/null || return 1
        if edgerec status --config "$CFG" --json 2>/dev/null | grep -Eq '"state": *"(recording|degraded)"'; then
            say "recording pid=$1 uptime=$(uptime_s)"
            return 0
        fi
        sleep 0.2
        i=$((i + 1))
    done
    return 1
}

# Starts `edgerec run` in the background with the given arguments; sets $pid.
start_edgerec() {
    edgerec run --config "$CFG" --quiet "$@" &
    pid=$!
    say "edgerec-started pid=$pid uptime=$(uptime_s)"
}

# Waits for $pid and reports its exit status.
wait_edgerec() {
    wait "$pid"
    rc=$?
    say "edgerec-exit rc=$rc uptime=$(uptime_s)"
    return $rc
}
