#!/usr/bin/env python3
"""The fleet link's cost: what the link's threads of a running recorder
spend, as a share of one core, at the default status interval, first with
only the status, alerts and keepalive going, then with the fleet sending
commands.

`edgerec run` (release build) records eight synthetic channels (the
status snapshot of a small vehicle: IMU, GNSS, odometry, TF, a lidar point
cloud, two camera images, a battery, diagnostics, chatter; the kinds
the synthetic source makes) with `[remote]` pointed at a
Mosquitto on loopback (TLS with a client certificate, certificates made
for the run by tests/py/mqttpeer.py, the ACL the tests use), defaults for
keepalive (30 s) and status_interval (10 s). The fleet's side is PyPI
paho-mqtt (mqttpeer.py load).

Measured over a window of W seconds (60; 20 with --short), from
/proc/PID/task/TID/stat: the CPU time (user + system) of the link's
threads (names starting `edgerec-remote`: the publisher, rumqttc's event
loop and the command thread) and of the whole process. Two windows:

  idle      the link connected, publishing its status and looking for
            alerts each second, nothing else asked of it
  commands  the fleet sends `status` commands (each answered `accepted`,
            then `done` with the whole snapshot) at R a second (2)

Reported: each window's link CPU as % of one core, the process's, and the
link's CPU per command. The bar: under 1 % of a core at the default
interval, commands included.

usage: bench_remote.py [--short] [--seconds W] [--rate R] [--json FILE]
                       [--dir DIR] [--bin PATH]
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HZ = os.sysconf("SC_CLK_TCK")
VEHICLE = "robot-7"


def python() -> str:
    return os.environ.get("EDGEREC_PYTHON") or os.path.join(REPO, ".venv/bin/python")


def mosquitto() -> str:
    for p in ("/usr/sbin/mosquitto", "/usr/bin/mosquitto"):
        if os.path.exists(p):
            return p
    sys.exit("bench_remote: mosquitto is not installed (scripts/test installs it: apt-get install mosquitto)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_ticks(pid: int, prefix: str = "") -> int:
    """utime + stime of the threads of `pid` whose name starts with
    `prefix` (all with "")."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        if comm.startswith(prefix):
            total += int(fields[11]) + int(fields[12])
    return total


def config(d: str, port: int, tls: str) -> str:
    channels = [
        ("/imu/data", "sensor_msgs/msg/Imu", 400),
        ("/imu/chassis", "sensor_msgs/msg/Imu", 100),
        ("/lidar/points", "sensor_msgs/msg/PointCloud2", 10),
        ("/camera/front/image_raw", "sensor_msgs/msg/Image", 10),
        ("/camera/rear/image_raw", "sensor_msgs/msg/Image", 10),
        ("/battery", "sensor_msgs/msg/BatteryState", 1),
        ("/diagnostics", "std_msgs/msg/String", 1),
        ("/chatter", "std_msgs/msg/String", 20),
    ]
    text = f"""
[recording]
root = "{d}/rec"
session_prefix = "bench"

[retention]
min_free_bytes = 0
min_free_percent = 0

[clock]
ptp4l_socket = "{d}/no-ptp4l"

[health]
watchdog = ""
fault_file = "{d}/last-fault.json"
status_socket = "{d}/status.sock"

[remote]
broker = "mqtts://127.0.0.1:{port}"
ca_file = "{tls}/ca.pem"
cert_file = "{tls}/vehicle.pem"
key_file = "{tls}/vehicle.key"
vehicle_id = "{VEHICLE}"
allow = ["status", "list"]
journal = "{d}/remote-commands.jsonl"
"""
    for topic, kind, rate in channels:
        text += f'\n[[sources.synthetic]]\ntopic = "{topic}"\ntype = "{kind}"\nrate = {rate}\n'
        if kind.endswith("PointCloud2"):
            text += "payload_size = 1200000\n"
        if kind.endswith("Image"):
            text += "payload_size = 921600\n"
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--seconds", type=float)
    ap.add_argument("--rate", type=float, default=2.0)
    ap.add_argument("--json")
    ap.add_argument("--dir", default=os.path.join(REPO, "data/bench"))
    ap.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release/edgerec"))
    args = ap.parse_args()
    window = args.seconds or (20.0 if args.short else 60.0)
    os.makedirs(args.dir, exist_ok=True)
    d = tempfile.mkdtemp(prefix="remote-", dir=args.dir)
    tls = os.path.join(d, "tls")
    subprocess.run([python(), os.path.join(REPO, "tests/py/mqttpeer.py"), "certs", "--vehicle", VEHICLE, tls],
                   check=True)
    port = free_port()
    sys.path.insert(0, os.path.join(REPO, "tests/py"))
    from mqttpeer import write_broker_config  # the tests' broker, as they run it
    write_broker_config(d, port, tls, persist=False)
    broker = subprocess.Popen([mosquitto(), "-c", os.path.join(d, "mosquitto.conf")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cfg = os.path.join(d, "edgerec.toml")
    with open(cfg, "w") as f:
        f.write(config(d, port, tls))
    rec = None
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        log = open(os.path.join(d, "edgerec.log"), "w")
        rec = subprocess.Popen([args.bin, "run", "--config", cfg, "--duration", f"{int(window * 2 + 60)}s"],
                               stdout=subprocess.DEVNULL, stderr=log, env=dict(os.environ, EDGEREC_LOG="warn"))
        # Connected, and past the first status.
        deadline = time.time() + 30
        while time.time() < deadline:
            if rec.poll() is not None:
                with open(os.path.join(d, "edgerec.log")) as f:
                    sys.exit(f"bench_remote: edgerec ended ({rec.returncode}): {f.read()[-2000:]}")
            try:
                out = subprocess.run([args.bin, "status", "--socket", os.path.join(d, "status.sock"), "--json"],
                                     capture_output=True, text=True, timeout=5).stdout
                if json.loads(out or "{}").get("remote", {}).get("connected"):
                    break
            except (ValueError, subprocess.TimeoutExpired):
                pass
            time.sleep(0.5)
        else:
            sys.exit(f"bench_remote: the link never connected; see {d}/edgerec.log")
        time.sleep(3)

        def measure(load) -> dict:
            t0, link0, all0 = time.monotonic(), cpu_ticks(rec.pid, "edgerec-remote"), cpu_ticks(rec.pid)
            answered = load() if load else 0
            if not load:
                time.sleep(window)
            dt = time.monotonic() - t0
            link = (cpu_ticks(rec.pid, "edgerec-remote") - link0) / HZ
            whole = (cpu_ticks(rec.pid) - all0) / HZ
            return {"seconds": round(dt, 2), "link_cpu_s": link, "link_core_percent": round(100 * link / dt, 3),
                    "process_core_percent": round(100 * whole / dt, 1), "commands": answered,
                    "link_ms_per_command": round(1000 * link / answered, 3) if answered else None}

        idle = measure(None)

        def commands() -> int:
            out = subprocess.run(
                [python(), os.path.join(REPO, "tests/py/mqttpeer.py"), "load", "--port", str(port), "--tls", tls,
                 "--rate", str(args.rate), "--seconds", str(window), f"edgerec/{VEHICLE}"],
                capture_output=True, text=True, timeout=window + 60)
            res = json.loads(out.stdout.strip().splitlines()[-1])
            if res["done"] < res["sent"] * 0.9:
                sys.exit(f"bench_remote: only {res['done']} of {res['sent']} commands answered done: {res}")
            return res["done"]

        busy = measure(commands)
    finally:
        if rec:
            rec.send_signal(signal.SIGINT)
            try:
                rec.wait(timeout=60)
            except subprocess.TimeoutExpired:
                rec.kill()
        broker.terminate()
        broker.wait()
    result = {"window_s": window, "rate_per_s": args.rate, "idle": idle, "commands": busy,
              "bar_core_percent": 1.0,
              "under_bar": idle["link_core_percent"] < 1.0 and busy["link_core_percent"] < 1.0}
    print(f"fleet link, {window:.0f} s windows, status_interval 10 s (release build, this machine, {time.strftime('%Y-%m-%d')})")
    print(f"  idle:      link threads {idle['link_core_percent']:.3f} % of a core "
          f"(the recorder process {idle['process_core_percent']:.1f} %)")
    print(f"  commands:  link threads {busy['link_core_percent']:.3f} % of a core at {args.rate:g} status "
          f"commands/s ({busy['commands']} answered, {busy['link_ms_per_command']} ms each; "
          f"process {busy['process_core_percent']:.1f} %)")
    print(f"  bar: under 1 % of a core: {'yes' if result['under_bar'] else 'NO'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    shutil.rmtree(d, ignore_errors=True)
    # --short (CI) keeps the benchmark working; its few seconds on a shared
    # machine are not the measurement the bar is judged on.
    return 0 if result["under_bar"] or args.short else 1


if __name__ == "__main__":
    sys.exit(main())
