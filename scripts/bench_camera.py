#!/usr/bin/env python3
"""The camera benchmark: H.265 encoding speed, bytes per camera-minute and
glass-to-disk latency, in one run (medians of the rounds reported).

  encode   gst-launch-1.0 videotestsrc pattern=ball num-buffers=N !
           video/x-raw,format=I420,WxH ! x265enc speed-preset=ultrafast
           tune=zerolatency bitrate=8000 key-int-max=30 ! fakesink, timed;
           frames/s = (N - 1) / (t(N) - t(1)): the process start and the
           encoder's set-up (the num-buffers=1 run) subtracted. Where
           GStreamer has nvv4l2h265enc (Jetson) or nvh265enc, the same
           pipeline through it too (NVENC: not on this build machine);
  edgerec  the same test picture through edgerec's camera source
           (encoder = "auto": the script reports which encoder ran): at
           640x480 live at fps = 240, so the figure is what the encoder
           keeps up with inside the recorder, capped at 240; the leaky
           queue in front of the encoder drops the rest, counted as lost
           before the encoder. A live 240 fps source also draws the frames
           that are dropped, so this is below the gst-launch figure on a
           small machine. At 1920x1080 at fps = 30 (capped at 30): at 240
           or 60 fps, x265enc behind the leaky queue stops giving frames
           after about a second on 2 cores, in gst-launch-1.0 alone too;
  bytes    per camera-minute: raw rgb8 sensor_msgs/msg/Image (the pixel
           bytes, plus the per-message overhead measured from an edgerec
           recording of synthetic 640x480 rgb8 Images at 30 Hz: file bytes
           minus pixel bytes, over messages) against H.265 measured from
           edgerec recordings of a 640x480 30 fps test camera at 8 Mbit/s
           (the default) and 2 Mbit/s, and of 1920x1080 at 30 fps, 8 Mbit/s
           (lost and dropped frames reported). The 1080p raw figure is
           computed: its pixel bytes plus the measured overhead;
  latency  glass to disk per camera, p50/p99: from each frame's capture
           instant (its log time on the recording clock) to the chunk that
           holds it handed to storage ("written") and to it being durable
           (fdatasync), by crates/bench/src/camera_bench.rs, which runs the
           recorder in process and samples its status every millisecond
           (the method and its resolution are in that file and printed
           below); with the default chunk_max_age (500 ms) and
           sync_interval (1 s), and with both at 50 ms.

usage: scripts/bench_camera.py [--short] [--rounds N] [--json FILE] [--dir DIR]
Needs the release binaries (scripts/bench builds them), gst-launch-1.0 and
x265enc (gstreamer1.0-plugins-bad).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release"
CAMERA_BENCH = TARGET / "edgerec-camera-bench"
RAW_640 = 640 * 480 * 3
RAW_1080 = 1920 * 1080 * 3
KBITS = 8000  # edgerec's default camera bitrate, 8 Mbit/s


def has_element(name):
    return subprocess.run(["gst-inspect-1.0", "--exists", name]).returncode == 0


def encode_pipeline(encoder, w, h, n):
    src = f"videotestsrc num-buffers={n} pattern=ball ! video/x-raw,format=I420,width={w},height={h},framerate=30/1"
    enc = {
        "x265enc": f"x265enc speed-preset=ultrafast tune=zerolatency bitrate={KBITS} key-int-max=30",
        # The properties edgerec's crates/camera/src/encoder.rs sets.
        "nvv4l2h265enc": f"nvvidconv ! video/x-raw(memory:NVMM),format=NV12 ! nvv4l2h265enc "
                         f"bitrate={KBITS * 1000} iframeinterval=30 idrinterval=30 insert-sps-pps=true maxperf-enable=true",
        "nvh265enc": f"videoconvert ! video/x-raw,format=NV12 ! nvh265enc bitrate={KBITS} gop-size=30 zerolatency=true",
    }[encoder]
    return f"{src} ! {enc} ! fakesink"


def gst_time(desc):
    t = time.monotonic()
    p = subprocess.run(["gst-launch-1.0", "-q", *desc.split()], capture_output=True, text=True)
    dt = time.monotonic() - t
    if p.returncode != 0:
        raise RuntimeError((p.stderr or p.stdout).strip().splitlines()[-1] if (p.stderr or p.stdout).strip() else f"exit {p.returncode}")
    return dt


def encode_fps(encoder, w, h, n):
    t1 = gst_time(encode_pipeline(encoder, w, h, 1))
    tn = gst_time(encode_pipeline(encoder, w, h, n))
    return (n - 1) / max(tn - t1, 1e-6)


def camera_toml(d, name, w, h, fps, bitrate, extra=""):
    return f"""
[recording]
root = "{d}/rec"
session_prefix = "cam"
[health]
watchdog = ""
status_socket = "{d}/rec.sock"
fault_file = "{d}/rec.fault.json"
{extra}
[[camera]]
name = "{name}"
source = "test"
pattern = "ball"
width = {w}
height = {h}
fps = {fps}
encoder = "auto"
bitrate = "{bitrate}"
"""


RAW_TOML = """
[recording]
root = "{d}/rec"
session_prefix = "raw"
[health]
watchdog = ""
status_socket = "{d}/rec.sock"
fault_file = "{d}/rec.fault.json"
[[sources.synthetic]]
topic = "/camera/raw/image_raw"
type = "sensor_msgs/msg/Image"
rate = 30
payload_size = 921600
"""

TIGHT = '[mcap]\nchunk_max_age = "50ms"\n[storage]\nsync_interval = "50ms"'


def camera_bench(d, toml, seconds, warm_up=1.0):
    """One in-process recording (crates/bench/src/camera_bench.rs); the
    session is removed afterwards."""
    with tempfile.TemporaryDirectory() as t:
        cfg = Path(t) / "cam.toml"
        cfg.write_text(toml)
        p = subprocess.run([CAMERA_BENCH, cfg, str(seconds), str(warm_up)], capture_output=True, text=True,
                           env={**os.environ, "GST_DEBUG": "0"})
    shutil.rmtree(Path(d) / "rec", ignore_errors=True)
    if p.returncode != 0:
        sys.exit(f"bench_camera: {CAMERA_BENCH} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def video(run):
    """The camera's figures from one camera_bench run."""
    cam = run["cameras"][0]
    t = run["topics"][cam["topic"]]
    fps = int(t["metadata"]["video.fps"])
    frames = t["messages"]
    span_s = (t["last_log_time"] - t["first_log_time"]) / 1e9 + 1 / fps
    return {
        "encoder": cam["encoder"],
        "encoder_reason": cam["encoder_reason"],
        "frames": frames,
        # Frames captured after the warm-up and recorded, per second.
        "recorded_fps": t["steady_rate_hz"],
        "lost_before_encoder": cam["lost_before_encoder"],
        "dropped": (t["dropped"] or 0) + (t["lost"] or 0),
        # The file bytes (all of them, fixed records included) per minute
        # of capture: first to last frame plus one frame time (frames lost
        # before the encoder take no room).
        "bytes_per_min": run["file_bytes"] * 60 / span_s if span_s > 0 else 0.0,
        "written_p50": t["written_ms"]["p50"], "written_p99": t["written_ms"]["p99"],
        "durable_p50": t["durable_ms"]["p50"], "durable_p99": t["durable_ms"]["p99"],
        "latency_n": t["durable_ms"]["n"],
        "durable_at_close": t["durable_at_close"],
        "unresolved": t["unresolved"],
        "sample_p99_ms": run["sample_period_ms"]["p99"],
        "backend": run["backend"],
    }


def raw_overhead(run):
    t = run["topics"]["/camera/raw/image_raw"]
    n = t["messages"]
    return {
        "messages": n,
        "file_bytes": run["file_bytes"],
        # Everything on disk that is not pixels, per message: the CDR
        # fields, the message record, chunk and index records, and the
        # file's fixed records spread over the messages.
        "overhead_per_msg": (run["file_bytes"] - n * RAW_640) / n,
        "dropped": (t["dropped"] or 0) + (t["lost"] or 0),
    }


def med(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--short", action="store_true", help="seconds, not minutes: keeps the benchmark working in CI")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--dir", default=str(ROOT / "data/bench/camera"))
    a = ap.parse_args()
    if shutil.which("gst-launch-1.0") is None or not has_element("x265enc"):
        print("SKIP camera bench: needs gst-launch-1.0 (gstreamer1.0-tools) and x265enc (gstreamer1.0-plugins-bad)")
        return 0
    d = Path(a.dir).resolve()
    d.mkdir(parents=True, exist_ok=True)
    rounds = a.rounds or (1 if a.short else 3)
    secs = 5 if a.short else 12
    # A 1080p x265 encoder can take over a second to start on 2 loaded
    # cores: the rate is counted from 2 s on.
    fast_secs, fast_warm = (5, 2.0) if a.short else (10, 2.0)
    n_small, n_large = (60, 20) if a.short else (600, 150)
    encoders = [e for e in ("nvv4l2h265enc", "nvh265enc", "x265enc") if has_element(e)]

    res = {"encode": [], "edgerec_240": [], "cam": {}, "raw": []}
    load_before = os.getloadavg()
    runs = {
        "640x480@30 8M": camera_toml(d, "front", 640, 480, 30, "8M"),
        "640x480@30 2M": camera_toml(d, "front", 640, 480, 30, "2M"),
        "1920x1080@30 8M": camera_toml(d, "front", 1920, 1080, 30, "8M"),
        "640x480@30 8M, 50 ms": camera_toml(d, "front", 640, 480, 30, "8M", TIGHT),
    }
    if a.short:
        runs = {k: v for k, v in runs.items() if k in ("640x480@30 8M", "1920x1080@30 8M", "640x480@30 8M, 50 ms")}
    for i in range(rounds):
        print(f"camera round {i + 1}/{rounds} ...", file=sys.stderr)
        for enc in encoders:
            for (w, h, n) in ((640, 480, n_small), (1920, 1080, n_large)):
                row = {"encoder": enc, "size": f"{w}x{h}", "frames": n}
                try:
                    row["fps"] = encode_fps(enc, w, h, n)
                except RuntimeError as e:
                    row["error"] = str(e)
                res["encode"].append(row)
        # 640x480 only: at 1920x1080 and fps = 240 (60 too) x265enc behind
        # the leaky queue stops giving frames after about a second on 2
        # cores (gst-launch alone does it too); 1080p is measured at 30 fps.
        r = video(camera_bench(d, camera_toml(d, "front", 640, 480, 240, "8M"), fast_secs, fast_warm))
        r["size"] = "640x480"
        res["edgerec_240"].append(r)
        for name, toml in runs.items():
            warm = 2.0 if name.startswith("1920") else 1.0
            res["cam"].setdefault(name, []).append(video(camera_bench(d, toml, secs, warm)))
        res["raw"].append(raw_overhead(camera_bench(d, RAW_TOML.format(d=d), secs)))

    if a.json:
        Path(a.json).write_text(json.dumps({"rounds_raw": res}, indent=2))

    ovh = med(res["raw"], "overhead_per_msg")
    raw_min_640 = (RAW_640 + ovh) * 30 * 60
    raw_min_1080 = (RAW_1080 + ovh) * 30 * 60
    cam = {k: {key: med(v, key) for key in v[0] if isinstance(v[0][key], (int, float))} | {
        "encoder": v[0]["encoder"], "lost_max": max(x["lost_before_encoder"] for x in v),
        "dropped_max": max(x["dropped"] for x in v)} for k, v in res["cam"].items()}
    enc_rows = {}
    for r in res["encode"]:
        enc_rows.setdefault((r["encoder"], r["size"]), []).append(r)
    e240 = {}
    for r in res["edgerec_240"]:
        e240.setdefault(r["size"], []).append(r)

    mode = "short" if a.short else "full"
    load_after = os.getloadavg()
    print()
    print(f"camera benchmark ({mode}, {rounds} round(s), medians; {os.cpu_count()} CPUs, "
          f"1-min load average {load_before[0]:.1f} before, {load_after[0]:.1f} after)")
    print("NVENC is not measured here: this machine has no nvv4l2h265enc; on a Jetson Orin")
    print("the same script times nvv4l2h265enc too, and edgerec's encoder = \"auto\" picks it.")
    print(f"encoders GStreamer has: {', '.join(encoders)}")
    W = 52
    print(f"\n{'measure':{W}} {'value':>14}  command")
    rows = []
    for (enc, size), rs in enc_rows.items():
        ok = [r["fps"] for r in rs if "fps" in r]
        val = f"{statistics.median(ok):.0f}" if ok else "failed"
        n = rs[0]["frames"]
        w, h = size.split("x")
        rows.append((f"{enc} {size} gst-launch (frames/s)", val,
                     f"gst-launch-1.0 {encode_pipeline(enc, w, h, n)}  [(N-1)/(t(N)-t(1)), N={n}]"))
        errs = {r["error"] for r in rs if "error" in r}
        for e in errs:
            rows.append((f"  {enc} {size} error", "", e))
    for size, rs in e240.items():
        rows.append((f"edgerec {size}, fps=240 live: recorded frames/s", f"{med(rs, 'recorded_fps'):.0f}",
                     f"edgerec-camera-bench (test camera {size} fps=240 encoder=auto: {rs[0]['encoder']})"))
        rows.append((f"  frames recorded / lost before the encoder", f"{med(rs, 'frames'):.0f} / {med(rs, 'lost_before_encoder'):.0f}",
                     f"whole {fast_secs} s run; the rate counts from {fast_warm:.0f} s to the stop"))
    if "1920x1080@30 8M" in cam:
        c = cam["1920x1080@30 8M"]
        rows.append(("edgerec 1920x1080, fps=30 live: recorded frames/s", f"{c['recorded_fps']:.1f}",
                     f"edgerec-camera-bench (test camera 1920x1080@30 8M, encoder=auto: {c['encoder']}); capped at 30"))
    rows.append(("raw per-message overhead, 640x480 rgb8 (bytes)", f"{ovh:.0f}",
                 "edgerec-camera-bench, synthetic sensor_msgs/msg/Image 921600 B at 30 Hz (measured)"))
    rows.append(("raw 640x480 rgb8 30 fps (MB per camera-minute)", f"{raw_min_640 / 1e6:.0f}",
                 "(640*480*3 + overhead) * 30 * 60"))
    rows.append(("raw 1920x1080 rgb8 30 fps (MB per camera-minute)", f"{raw_min_1080 / 1e6:.0f}",
                 "computed: (1920*1080*3 + measured overhead) * 30 * 60"))
    for name, c in cam.items():
        cmd = f"edgerec-camera-bench (test camera {name}, encoder=auto: {c['encoder']})"
        if "50 ms" not in name:
            raw = raw_min_1080 if name.startswith("1920") else raw_min_640
            rows.append((f"H.265 {name} (MB per camera-minute)", f"{c['bytes_per_min'] / 1e6:.1f}", cmd))
            rows.append((f"  raw / H.265", f"{raw / c['bytes_per_min']:.0f}", ""))
            kbits = 2000 if " 2M" in name else KBITS
            rows.append((f"  ceiling at {kbits // 1000} Mbit/s (MB per camera-minute)", f"{kbits * 1000 / 8 * 60 / 1e6:.0f}",
                         "computed: the configured rate, which the encoder's VBV caps (a busy scene's size)"))
            rows.append((f"  lost before encoder / dropped (worst round)", f"{c['lost_max']} / {c['dropped_max']}",
                         f"{c['frames']:.0f} frames recorded (median)"))
        rows.append((f"glass-to-written {name}: p50 / p99 (ms)",
                     f"{fmt(c['written_p50'], '.0f')} / {fmt(c['written_p99'], '.0f')}", cmd))
        rows.append((f"glass-to-durable {name}: p50 / p99 (ms)",
                     f"{fmt(c['durable_p50'], '.0f')} / {fmt(c['durable_p99'], '.0f')}",
                     f"{c['latency_n']:.0f} frames per round; status sampled every 1 ms (p99 gap "
                     f"{fmt(c['sample_p99_ms'], '.1f')} ms), durable offset refreshed every 20 ms"))
    for k, v, c in rows:
        print(f"{k:{W}} {v:>14}  {c}")
    print()
    print("written: the chunk holding the frame accepted by the storage writer (segment bytes);")
    print("durable: covered by a completed fdatasync (durable bytes), or the segment's rename after")
    print("its closing fdatasync. Both are upper bounds by the sampling period; durable also by the")
    print("20 ms at which the storage stage refreshes the durable offset in the status. Frames of the")
    print("warm-up (1 s; 2 s at 1920x1080) and of the last chunk_max_age + sync_interval before the")
    print("stop are left out.")
    print("Defaults: chunk_max_age 500 ms, sync_interval 1 s; '50 ms' sets both to 50 ms.")
    print("The test picture (a ball moving on black) needs far fewer bits than a camera's scene: its")
    print("H.265 sizes are a lower bound, the configured rate the upper one.")
    summary = {
        "mode": mode, "rounds": rounds, "seconds_per_run": secs, "encoders": encoders,
        "cpus": os.cpu_count(), "loadavg_before": load_before, "loadavg_after": load_after,
        "encode_fps": {f"{e} {s}": statistics.median([r["fps"] for r in rs if "fps" in r] or [0])
                       for (e, s), rs in enc_rows.items()},
        "edgerec_240_fps": {s: med(rs, "recorded_fps") for s, rs in e240.items()},
        "edgerec_encoder": res["edgerec_240"][0]["encoder"],
        "raw_overhead_per_msg": ovh,
        "raw_bytes_per_min": {"640x480": raw_min_640, "1920x1080 (computed)": raw_min_1080},
        "cameras": cam,
        "rounds_raw": res,
    }
    if a.json:
        Path(a.json).write_text(json.dumps(summary, indent=2))
        print(f"\nJSON written to {a.json}")
    bad = [k for k, c in cam.items() if c["dropped_max"] or c["latency_n"] == 0]
    if a.short and bad:
        print(f"FAIL: camera runs with drops or no latency figures: {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
