# shellcheck shell=sh
# Scenario can: two virtual CAN interfaces, vcan0 (classic, MTU 16) and
# vcan1 (CAN FD, MTU 72), recorded by edgerec ([[can]] entries in the
# config the host wrote) while Debian's candump -L logs the same
# interfaces. cangen floods both at once (vcan0: incrementing ids, random
# lengths, incrementing data; vcan1: -m, a mix of extended, remote, FD,
# BRS and ESI frames), cansend adds error and remote frames; then vcan0 is
# taken down (its source must restart, the health degraded), brought up
# again, and 500 more frames are sent once the source records again. The
# host compares the bag with candump's log frame for frame.
# shellcheck source=tests/qemu/guest/common.sh
. /scenarios/common.sh
# can-utils are Debian's dynamic arm64 binaries; their glibc is here.
export LD_LIBRARY_PATH=/lib/aarch64-linux-gnu
n0=$(arg edgerec.can_frames 20000)
n1=$(arg edgerec.can_fd_frames 10000)

# candump asks for a large receive buffer (-r); the kernel caps it here.
echo 33554432 >/proc/sys/net/core/rmem_max
for link in vcan0:16 vcan1:72; do
    name=${link%:*}
    mtu=${link#*:}
    if ! ip link add dev "$name" type vcan || ! ip link set "$name" mtu "$mtu" || ! ip link set "$name" up; then
        say "can-setup failed $name"
        exit 1
    fi
done
say "can-links vcan0 mtu=$(cat /sys/class/net/vcan0/mtu) vcan1 mtu=$(cat /sys/class/net/vcan1/mtu)"

mkdir -p /data/can
# -L log format, -D keep going when vcan0 goes down, -d report drops
# (DROPCOUNT lines), -r a 16 MiB receive buffer; vcan0's error frames too
# (`#<mask>`: every CAN_ERR class; candump 2020.11 refuses -e with -L).
candump -L -D -d -r 16777216 vcan0,#1FFFFFFF vcan1 >/data/can/candump.log 2>/data/can/candump.err &
cd_pid=$!
start_edgerec --report-json /data/edgerec/report.json
wait_recording "$pid" 60 || say "not-recording"
# The status says running once a source's thread starts; give the sockets
# a moment to be bound.
sleep 1

# "can vcan0" in the status with the given state (restarts >= $2 when set).
source_is() {
    s=$(edgerec status --config "$CFG" --json 2>/dev/null | tr -d ' \n')
    case "$s" in
        *"\"name\":\"canvcan0\",\"state\":\"$1\",\"restarts\":"[${2:-0}-9]*) return 0 ;;
    esac
    return 1
}

t0=$(uptime_s)
cangen vcan0 -g 0 -p 10 -n "$n0" -I i -L r -D i &
g0=$!
cangen vcan1 -g 0 -p 10 -n "$n1" -m &
g1=$!
wait "$g0"
wait "$g1"
t1=$(uptime_s)
say "cangen vcan0=$n0 vcan1=$n1 start=$t0 end=$t1"
# Error frames (bus-off, controller problem) and remote requests.
cansend vcan0 20000040#0000000000000000
cansend vcan0 20000004#0004000000000000
cansend vcan0 123#R
cansend vcan0 12345678#R3
sleep 2
status

# The interface goes down: the source fails and is retried with backoff.
ip link set vcan0 down
i=0
while [ $i -lt 50 ] && ! source_is restarting; do sleep 0.2; i=$((i + 1)); done
say "can-down $(source_is restarting && echo restarting || echo not-restarting) uptime=$(uptime_s)"
status
sleep 1
ip link set vcan0 up
i=0
while [ $i -lt 100 ] && ! source_is running 1; do sleep 0.2; i=$((i + 1)); done
say "can-up $(source_is running 1 && echo running || echo not-running) uptime=$(uptime_s)"
sleep 1
cangen vcan0 -g 1 -n 500 -I i -L 8 -D r
sleep 2
status
kill -INT "$pid"
wait_edgerec
kill -INT "$cd_pid"
wait "$cd_pid"
say "candump lines=$(wc -l </data/can/candump.log) drops=$(grep -c DROPCOUNT /data/can/candump.log)"
sync
