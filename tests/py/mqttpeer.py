#!/usr/bin/env python3
"""The fleet's side of edgerec's fleet-link tests: certificates for a
Mosquitto broker the test starts, and the fleet's MQTT client (PyPI
paho-mqtt) that watches what a vehicle publishes.

Subcommands (`mqttpeer.py SUBCOMMAND --help` for every option):
  certs   writes into DIR a CA for the run (ca.pem), the broker's
          certificate for 127.0.0.1 (server.pem, server.key), client
          certificates signed by it for the vehicle (vehicle.pem/.key, CN
          from --vehicle), for the fleet (fleet.pem/.key, CN "fleet") and
          for another vehicle (other.pem/.key, CN "robot-other"), and a
          client certificate signed by a CA the broker does not know
          (stranger/client.pem, stranger/client.key).
  broker-config
          writes DIR/mosquitto.conf and DIR/acl for a broker on
          127.0.0.1:PORT with the certificates of --tls: TLS only, client
          certificates required, each certificate's CN its user name, the
          fleet (CN "fleet") on every edgerec/ topic, each vehicle on
          edgerec/<CN>/# only; --persist keeps sessions and retained
          messages in DIR/persist across restarts. The log goes to
          DIR/mosquitto.log.
  watch   connects to 127.0.0.1:PORT over TLS as the fleet (or --as NAME),
          subscribes to TOPIC (wildcards allowed) and prints one JSON line
          per message: {"topic", "payload" (text), "retain"}; first a line
          {"subscribed": true} once the broker granted the subscription
          (or {"refused": ...}); exits after --count messages or
          --timeout seconds.
  publish sends one message (QoS 1) and exits once the broker has it.
  load    as the fleet, sends `status` commands to PREFIX/cmd at --rate a
          second for --seconds (ids load-N), counts the answers on
          PREFIX/reply, waits up to 10 s for the last, and prints
          {"sent", "done", "rejected", "other"} (the benchmark's load).

Every client names the broker (127.0.0.1 and the port the test gave) and
its certificate explicitly.

Exit status: 0 success, 1 error (connection refused, timeout), 2 usage.
"""

import argparse
import json
import os
import ssl
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from s3peer import make_tls  # noqa: E402


def cmd_certs(args: argparse.Namespace) -> int:
    os.makedirs(args.dir, exist_ok=True)
    make_tls(args.dir, clients=(("vehicle", args.vehicle), ("fleet", "fleet"),
                                ("other", "robot-other")))
    stranger = os.path.join(args.dir, "stranger")
    os.makedirs(stranger, exist_ok=True)
    make_tls(stranger)
    return 0


ACL = ("# the fleet\nuser fleet\ntopic readwrite edgerec/#\n\n"
       "# every vehicle: its own topics only\npattern readwrite edgerec/%u/#\n")


def write_broker_config(d: str, port: int, tls: str, persist: bool) -> None:
    with open(os.path.join(d, "acl"), "w") as f:
        f.write(ACL)
    conf = (f"per_listener_settings false\nlistener {port} 127.0.0.1\n"
            f"cafile {tls}/ca.pem\ncertfile {tls}/server.pem\nkeyfile {tls}/server.key\n"
            "require_certificate true\nuse_identity_as_username true\n"
            f"allow_anonymous false\nacl_file {d}/acl\n"
            f"log_dest file {d}/mosquitto.log\nlog_type all\nconnection_messages true\n")
    if persist:
        os.makedirs(os.path.join(d, "persist"), exist_ok=True)
        conf += f"persistence true\npersistence_location {d}/persist/\nautosave_interval 1\n"
    if os.geteuid() == 0:
        # Started as root, Mosquitto drops to user mosquitto otherwise.
        conf += "user root\n"
    with open(os.path.join(d, "mosquitto.conf"), "w") as f:
        f.write(conf)


def cmd_broker_config(args: argparse.Namespace) -> int:
    write_broker_config(args.dir, args.port, args.tls, args.persist)
    return 0


def connect(args: argparse.Namespace, on_connect, on_message=None):
    import paho.mqtt.client as mqtt
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=args.client_id or "",
                    protocol=mqtt.MQTTv311)
    c.tls_set(ca_certs=os.path.join(args.tls, "ca.pem"),
              certfile=os.path.join(args.tls, f"{args.as_}.pem"),
              keyfile=os.path.join(args.tls, f"{args.as_}.key"),
              cert_reqs=ssl.CERT_REQUIRED)
    c.on_connect = on_connect
    if on_message:
        c.on_message = on_message
    c.connect("127.0.0.1", args.port, keepalive=30)
    return c


def out(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def cmd_watch(args: argparse.Namespace) -> int:
    seen = [0]
    done = threading.Event()

    def on_connect(c, _u, _f, reason, _p):
        if reason.is_failure:
            out({"refused": str(reason)})
            done.set()
            return
        c.subscribe(args.topic, qos=1)

    def on_subscribe(_c, _u, _mid, reasons, _p):
        if any(r.is_failure for r in reasons):
            out({"refused": [str(r) for r in reasons]})
            done.set()
        else:
            out({"subscribed": True})

    def on_message(_c, _u, msg):
        out({"topic": msg.topic, "payload": msg.payload.decode("utf-8", "replace"),
             "retain": bool(msg.retain)})
        seen[0] += 1
        if args.count and seen[0] >= args.count:
            done.set()

    c = connect(args, on_connect, on_message)
    c.on_subscribe = on_subscribe
    c.loop_start()
    ok = done.wait(args.timeout)
    c.disconnect()
    c.loop_stop()
    return 0 if ok or not args.count else 1


def cmd_publish(args: argparse.Namespace) -> int:
    sent = threading.Event()
    result = [1]

    def on_connect(c, _u, _f, reason, _p):
        if reason.is_failure:
            out({"refused": str(reason)})
            sent.set()
            return
        info = c.publish(args.topic, args.payload.encode(), qos=1, retain=args.retain)

        def wait():
            info.wait_for_publish(args.timeout)
            result[0] = 0 if info.is_published() else 1
            sent.set()
        threading.Thread(target=wait, daemon=True).start()

    c = connect(args, on_connect)
    c.loop_start()
    sent.wait(args.timeout)
    c.disconnect()
    c.loop_stop()
    return result[0]


def cmd_load(args: argparse.Namespace) -> int:
    counts = {"sent": 0, "done": 0, "rejected": 0, "other": 0}
    ready = threading.Event()
    lock = threading.Lock()

    def on_connect(c, _u, _f, reason, _p):
        if reason.is_failure:
            out({"refused": str(reason)})
            return
        c.subscribe(f"{args.topic}/reply", qos=1)

    def on_subscribe(*_a):
        ready.set()

    def on_message(_c, _u, msg):
        status = json.loads(msg.payload).get("status")
        with lock:
            if status in ("done", "rejected"):
                counts[status] += 1
            elif status != "accepted":
                counts["other"] += 1

    c = connect(args, on_connect, on_message)
    c.on_subscribe = on_subscribe
    c.loop_start()
    if not ready.wait(20):
        out({"error": "no subscription"})
        return 1
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < args.seconds:
        c.publish(f"{args.topic}/cmd", json.dumps({"id": f"load-{os.getpid()}-{n}", "command": "status"}), qos=1)
        n += 1
        time.sleep(max(0.0, start + n / args.rate - time.monotonic()))
    counts["sent"] = n
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with lock:
            if counts["done"] + counts["rejected"] >= n:
                break
        time.sleep(0.05)
    c.disconnect()
    c.loop_stop()
    out(counts)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("certs")
    c.add_argument("dir")
    c.add_argument("--vehicle", default="robot-7")
    bc = sub.add_parser("broker-config")
    bc.add_argument("dir")
    bc.add_argument("--port", type=int, required=True)
    bc.add_argument("--tls", required=True)
    bc.add_argument("--persist", action="store_true")
    ld = sub.add_parser("load")
    ld.add_argument("--port", type=int, required=True)
    ld.add_argument("--tls", required=True)
    ld.add_argument("--as", dest="as_", default="fleet")
    ld.add_argument("--client-id", default="")
    ld.add_argument("--rate", type=float, default=2.0)
    ld.add_argument("--seconds", type=float, default=20.0)
    ld.add_argument("topic", help="the vehicle's prefix, e.g. edgerec/robot-7")
    for name in ("watch", "publish"):
        s = sub.add_parser(name)
        s.add_argument("--port", type=int, required=True)
        s.add_argument("--tls", required=True, help="the directory `certs` wrote")
        s.add_argument("--as", dest="as_", default="fleet",
                       help="whose certificate: fleet, vehicle, other")
        s.add_argument("--client-id", default="")
        s.add_argument("--timeout", type=float, default=30.0)
        s.add_argument("topic")
        if name == "watch":
            s.add_argument("--count", type=int, default=0)
        else:
            s.add_argument("payload")
            s.add_argument("--retain", action="store_true")
    args = p.parse_args()
    try:
        return {"certs": cmd_certs, "broker-config": cmd_broker_config, "watch": cmd_watch,
                "publish": cmd_publish, "load": cmd_load}[args.cmd](args)
    except (OSError, ssl.SSLError) as e:
        out({"error": str(e)})
        return 1


if __name__ == "__main__":
    sys.exit(main())
