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

# Every 100-300 ms (a 50 ms sleep plus the shell and two processes, slow
# under TCG): "@@ hb SEC USEC UPTIME", CLOCK_REALTIME (adjtimex(2): the
# recorder's clock.source = realtime) and CLOCK_BOOTTIME. Busybox's date has
# no %N. The harness puts the guest's clock at the moment it killed the
# board from these: arrival time minus guest time, at its smallest, is the
# offset between the two clocks (tests/qemu/run.py, CutTiming).
heartbeat() {
    while :; do
        # shellcheck disable=SC2046 # split into the fields on purpose
    set -- $(adjtimex | grep -E '^ *time\.tv_(sec|usec):')
        read -r up _ </proc/uptime
        echo "@@ hb $2 $4 $up"
        sleep 0.05
    done
}

# Every fsync(2)/fdatasync(2) on /data as the kernel sees it (ext4's
# sync_file tracepoints, io_uring's included): "@@ fsync enter TAI INO
# datasync N" and "@@ fsync exit TAI INO ret N", stamped by the trace clock
# `tai`, which is CLOCK_REALTIME here (nothing sets the TAI offset on this
# board; "@@ fsync-clock" shows a marker written with the realtime just
# read). The stamps are taken in the kernel, so the console's delay does
# not move them. "@@ fsync-trace unavailable" when tracefs is missing.
fsync_trace() {
    t=/sys/kernel/tracing
    if ! { mount -t tracefs tracefs "$t" 2>/dev/null || [ -e "$t/trace_marker" ]; } \
        || ! echo tai >"$t/trace_clock" 2>/dev/null; then
        say "fsync-trace unavailable"
        return
    fi
    echo 1 >"$t/events/ext4/ext4_sync_file_enter/enable"
    echo 1 >"$t/events/ext4/ext4_sync_file_exit/enable"
    sed -nE -e 's/.* ([0-9]+\.[0-9]+): ext4_sync_file_(enter|exit): dev [0-9,]+ ino ([0-9]+).* (datasync|ret) (-?[0-9]+) *$/@@ fsync \2 \1 \3 \4 \5/p' \
        -e 's/.* ([0-9]+\.[0-9]+): tracing_mark_write: realtime ([0-9]+) ([0-9]+).*/@@ fsync-clock \1 \2 \3/p' \
        "$t/trace_pipe" &
    # shellcheck disable=SC2046 # split into the fields on purpose
    set -- $(adjtimex | grep -E '^ *time\.tv_(sec|usec):')
    echo "realtime $2 $4" >"$t/trace_marker"
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
# The comm lies between the first "(" and the last ")" and may hold
# spaces or parentheses itself, so it is cut out before the split; a
# space in it is reported as "_" so the line keeps three fields.
sched() {
    for t in /proc/"$1"/task/*; do
        line=$(cat "$t/stat" 2>/dev/null) || continue
        comm=${line#*(}
        comm=${comm%)*}
        rest=${line##*) }
        # shellcheck disable=SC2086 # split into the fields on purpose
        set -- $rest
        # $1 is field 3; fields 40 and 41 are $38 and $39.
        [ $# -ge 39 ] || continue
        shift 37
        say "sched ($(echo "$comm" | tr ' ' _)) $2 $1"
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

# The recorder's user and group (/etc/passwd and /etc/group of the
# board's initramfs, as sysusers.d/edgerec.conf makes them on the
# appliance), and its capabilities as edgerec.service gives them:
# CAP_IPC_LOCK (14) and CAP_SYS_NICE (23), ambient, nothing else.
EDGEREC_UID=990
EDGEREC_GID=990
EDGEREC_CAPS=14,23
# What the appliance's udev rules (61-edgerec-devices.rules), its seed
# unit and RuntimeDirectory= do, by hand: this board has no systemd and
# no udev. "@@ as-user UID GID CAPS".
as_recorder_setup() {
    mkdir -p /run/edgerec
    chown "$EDGEREC_UID:$EDGEREC_GID" /run/edgerec
    chmod 0755 /run/edgerec
    for d in /dev/watchdog[0-9]* /dev/gpiochip[0-9]* /dev/ptp[0-9]*; do
        [ -e "$d" ] || continue
        chgrp "$EDGEREC_GID" "$d"
        case "$d" in /dev/ptp*) chmod 0640 "$d" ;; *) chmod 0660 "$d" ;; esac
    done
    # The scenario's files (root's, written before the start) become the
    # recorder's, as the seed unit gives /data/edgerec away; -h changes
    # a link itself, never what it points at.
    [ -d /data/edgerec ] && chown -R -h "$EDGEREC_UID:$EDGEREC_GID" /data/edgerec
    say "as-user $EDGEREC_UID $EDGEREC_GID $EDGEREC_CAPS"
}

# `edgerec run` as the unit runs it: user edgerec with the two ambient
# capabilities (edgerec-as, image/qemu/as-user.c, which execs edgerec in
# its own process), its rooms and runtime directory in the environment.
run_edgerec() {
    as_recorder_setup
    EDGEREC_DATA_DIR=/data EDGEREC_RUNTIME_DIR=/run/edgerec RUNTIME_DIRECTORY=/run/edgerec \
        edgerec-as "$EDGEREC_UID" "$EDGEREC_GID" "$EDGEREC_CAPS" edgerec run "$@"
}

# Starts `edgerec run` (as run_edgerec does) in the background with the
# given arguments; sets $pid, the recorder's own.
start_edgerec() {
    as_recorder_setup
    EDGEREC_DATA_DIR=/data EDGEREC_RUNTIME_DIR=/run/edgerec RUNTIME_DIRECTORY=/run/edgerec \
        edgerec-as "$EDGEREC_UID" "$EDGEREC_GID" "$EDGEREC_CAPS" edgerec run --config "$CFG" --quiet "$@" &
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

# QEMU's user-mode network on eth0 (virtio-net): the guest is 10.0.2.15,
# the host's loopback is 10.0.2.2. No default route: the guest reaches
# that subnet (the host's loopback) and nothing beyond it.
# "@@ net up ..." or "@@ net no-eth0".
net_up() {
    ip link set lo up
    i=0
    while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    if ! ip link set eth0 up 2>/dev/null; then
        say "net no-eth0"
        return 1
    fi
    ip addr add 10.0.2.15/24 dev eth0
    if ! ip addr show eth0 | grep -q 'inet 10.0.2.15/'; then
        say "net no-address"
        return 1
    fi
    say "net up 10.0.2.15, the host at 10.0.2.2"
}
