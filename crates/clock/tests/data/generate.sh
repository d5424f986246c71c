#!/usr/bin/env bash
# Makes the management-message fixtures of this folder (needs root, ptp4l,
# pmc, ip and python3):
#   pmc-<version>-requests.txt   the GETs pmc sends (caught on a fake socket)
#   ptp4l-<version>-responses.txt what a slave ptp4l answers to the same GETs
# The slave and its master run in two network namespaces joined by a veth
# pair, layer 2, software timestamps, both with free_running 1 so that
# neither ever adjusts this machine's clock. Values (offsets, identities,
# pids) differ on every run.
set -euo pipefail
cd "$(dirname "$0")"
ver=$(ptp4l -v)
tmp=$(mktemp -d /tmp/pmcfix.XXXXXX)
m=fixm$$ s=fixs$$
cleanup() {
    jobs -p | xargs -r kill 2>/dev/null || true
    ip netns del "$m" 2>/dev/null || true
    ip netns del "$s" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

# 1. What pmc sends: a datagram socket that prints what arrives.
{
    echo "# What \`pmc -u -b 0 -s <sock> 'GET TIME_STATUS_NP' 'GET PORT_DATA_SET'"
    echo "# 'GET DEFAULT_DATA_SET' 'GET CURRENT_DATA_SET' 'GET PARENT_DATA_SET'\` of"
    echo "# linuxptp $ver sent (source portNumber = pmc's pid). Made by"
    echo "# generate.sh; one frame a line: NAME LENGTH HEX."
} > "pmc-$ver-requests.txt"
python3 - "$tmp/fake.sock" >> "pmc-$ver-requests.txt" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1]); s.settimeout(3)
names = ["TIME_STATUS_NP", "PORT_DATA_SET", "DEFAULT_DATA_SET", "CURRENT_DATA_SET", "PARENT_DATA_SET"]
try:
    for name in names:
        d = s.recv(2000)
        print(name, len(d), d.hex())
except socket.timeout:
    pass
PY
sleep 0.5
pmc -u -b 0 -s "$tmp/fake.sock" 'GET TIME_STATUS_NP' 'GET PORT_DATA_SET' \
    'GET DEFAULT_DATA_SET' 'GET CURRENT_DATA_SET' 'GET PARENT_DATA_SET' >/dev/null || true
wait

# 2. What ptp4l answers, once the slave has a grandmaster.
ip netns add "$m"; ip netns add "$s"
ip link add "v$m" type veth peer name "v$s"
ip link set "v$m" netns "$m"; ip link set "v$s" netns "$s"
ip -n "$m" link set "v$m" up; ip -n "$s" link set "v$s" up
printf '[global]\npriority1 1\nfree_running 1\nuds_address %s/master.sock\n' "$tmp" > "$tmp/m.cfg"
printf '[global]\nfree_running 1\nslaveOnly 1\nuds_address %s/slave.sock\n' "$tmp" > "$tmp/s.cfg"
ip netns exec "$m" ptp4l -2 -S -i "v$m" -f "$tmp/m.cfg" > "$tmp/m.log" 2>&1 &
ip netns exec "$s" ptp4l -2 -S -i "v$s" -f "$tmp/s.cfg" > "$tmp/s.log" 2>&1 &
sleep 15
{
    echo "# Responses of a slave ptp4l $ver (free_running, in state UNCALIBRATED)"
    echo "# to GETs sent with sequenceId 0x0100.. and source portNumber 0x2136. The"
    echo "# last one answers an unknown id (0xC00F) with MANAGEMENT_ERROR_STATUS"
    echo "# NO_SUCH_ID. Made by generate.sh; one frame a line: NAME LENGTH HEX."
} > "ptp4l-$ver-responses.txt"
python3 - "$tmp" >> "ptp4l-$ver-responses.txt" <<'PY'
import os, socket, sys
tmp = sys.argv[1]
ids = [("TIME_STATUS_NP", 0xC000, 50), ("PORT_DATA_SET", 0x2004, 26),
       ("DEFAULT_DATA_SET", 0x2000, 20), ("CURRENT_DATA_SET", 0x2001, 18),
       ("PARENT_DATA_SET", 0x2002, 32), ("BOGUS_0xC00F", 0xC00F, 0)]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(tmp + "/client.sock"); s.settimeout(1)
for seq, (name, mid, n) in enumerate(ids, start=0x100):
    tlv = (1).to_bytes(2, "big") + (2 + n).to_bytes(2, "big") + mid.to_bytes(2, "big") + bytes(n)
    hdr = bytearray(48)
    hdr[0] = 0x0D; hdr[1] = 2; hdr[2:4] = (48 + len(tlv)).to_bytes(2, "big")
    hdr[28:30] = (0x2136).to_bytes(2, "big"); hdr[30:32] = seq.to_bytes(2, "big")
    hdr[32] = 4; hdr[33] = 0x7F; hdr[34:44] = b"\xff" * 10
    s.sendto(bytes(hdr) + tlv, tmp + "/slave.sock")
    d = s.recv(2000)
    print(name, len(d), d.hex())
PY
echo "wrote pmc-$ver-requests.txt and ptp4l-$ver-responses.txt; the unit tests in"
echo "src/pmc/wire.rs assert the values of the committed 3.1.1 files (identities,"
echo "offsets, pid): update them if you regenerate those."
