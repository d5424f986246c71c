#!/usr/bin/env python3
"""Independent check of the video channels edgerec records.

Reads a bag directory with `mcap` + `mcap-ros2-support` (CRCs checked, the
messages decoded from the schema text in the file, sharing no code with
edgerec), and for one topic of foxglove_msgs/msg/CompressedVideo checks:

  * every message: format "h265", an Annex B access unit, timestamp ==
    publish_time, capture times strictly increasing (and, with --fps, each
    gap within --gap-tolerance-ms of 1/fps; with --allow-gaps a gap of
    whole frames is allowed and its frames are reported as missing_frames,
    for the caller to compare with the loss edgerec counted);
  * per segment: the first message is an IRAP picture (NAL types 16..21)
    carrying VPS, SPS and PPS (32, 33, 34); the segment's access units,
    written out alone, decode with ffprobe (an independent decoder:
    libavcodec) to exactly as many frames as there are messages; with
    --per-segment N, each segment between the first and the last holds
    N +/- 3 and none more than N + 3;
  * with --pattern P --width W --height H: the decoded pictures are the
    videotestsrc pattern P frame for frame (luma PSNR >= --psnr against
    the same frame rendered by GStreamer, and clearly below against a frame
    5 further on, so the match is not just "some picture");
  * with --rgb8-record FILE --width W --height H: the same for a
    transcoded image topic, each message's publish_time (the image's
    header.stamp) naming the published frame, rendered by pictures.rgb8;
  * with --expect-frames N: N messages in all;
  * with --keyframe-after-gap-ms G: after every gap longer than G (a
    camera that failed and was restarted) the next frame is an IRAP with
    its parameter sets: the camera resumed on a keyframe.

usage: verify_video.py BAG_DIR --topic T [options]; prints one JSON object
with the figures, exits 1 with FAIL: on the first mismatch.
"""
import atexit
import shutil
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def nal_types(data):
    out, i, n = [], 0, len(data)
    while i + 3 <= n:
        if data[i] == 0 and data[i + 1] == 0 and data[i + 2] == 1:
            if i + 3 < n:
                out.append((data[i + 3] >> 1) & 0x3F)
            i += 3
        else:
            i += 1
    return out


def segment_index(p):
    return int(p.stem.rsplit("_", 1)[1])


def read_segment(path, topic):
    frames = []
    schema_name = None
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()], validate_crcs=True)
        for schema, channel, message, ros in reader.iter_decoded_messages(topics=[topic]):
            schema_name = schema.name
            t = ros.timestamp.sec * 1_000_000_000 + ros.timestamp.nanosec
            frames.append({
                "log_time": message.log_time,
                "publish_time": message.publish_time,
                "stamp": t,
                "format": ros.format,
                "frame_id": ros.frame_id,
                "data": bytes(ros.data),
            })
    return schema_name, frames


def ffprobe_frames(h265):
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
         "-show_entries", "stream=nb_read_frames,width,height", "-of", "json", str(h265)],
        capture_output=True, text=True, check=False)
    if out.returncode != 0:
        fail(f"ffprobe rejects {h265.name}: {out.stderr.strip()}")
    s = json.loads(out.stdout)["streams"][0]
    return int(s["nb_read_frames"]), int(s["width"]), int(s["height"])


def i420_luma(raw, w, h):
    """The Y planes of I420 frames (GStreamer and ffmpeg both lay them out
    unpadded at even widths divisible by 4 and 8)."""
    size = w * h + 2 * ((w + 1) // 2) * ((h + 1) // 2)
    a = np.frombuffer(raw, dtype=np.uint8)
    a = a[: len(a) // size * size].reshape(-1, size)
    return a[:, : w * h].reshape(-1, h, w)


def decode_luma(h265, w, h):
    # Y as coded (no range conversion: a conversion to "gray" would
    # stretch limited range to full and shift every sample).
    out = subprocess.run(
        ["ffmpeg", "-v", "error", "-i", str(h265), "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"],
        capture_output=True, check=False)
    if out.returncode != 0:
        fail(f"ffmpeg cannot decode {h265.name}: {out.stderr.decode(errors='replace').strip()}")
    return i420_luma(out.stdout, w, h)


def reference_luma(pattern, n, w, h, fps, work):
    raw = work / "reference.i420"
    cmd = ["gst-launch-1.0", "-q", "videotestsrc", f"pattern={pattern}", f"num-buffers={n}", "!",
           f"video/x-raw,format=I420,width={w},height={h},framerate={fps}/1", "!",
           "filesink", f"location={raw}"]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        fail(f"gst-launch for the reference failed: {r.stderr.strip()}")
    return i420_luma(raw.read_bytes(), w, h)


def rgb8_reference(record, frames, w, h, work):
    """The published frame of each message (by publish_time), and the luma
    of frames 0..max+5 as GStreamer's videoconvert makes it from rgb8."""
    sys.path.insert(0, str(Path(__file__).parent))
    import pictures
    seq_at = {}
    with open(record) as f:
        for line in f:
            r = json.loads(line)
            seq_at[r["source_timestamp_ns"]] = r["seq"]
    frame_of = []
    for f in frames:
        if f["publish_time"] not in seq_at:
            fail(f"publish_time {f['publish_time']} is no published image's stamp")
        frame_of.append(seq_at[f["publish_time"]])
    if any(b <= a for a, b in zip(frame_of, frame_of[1:])):
        fail("transcoded frames are not in the published order")
    n = max(frame_of) + 6
    raw = work / "reference.rgb"
    with open(raw, "wb") as out:
        for s in range(n):
            out.write(pictures.rgb8(s, w, h))
    i420 = work / "reference_rgb.i420"
    cmd = ["gst-launch-1.0", "-q", "filesrc", f"location={raw}", "!", "rawvideoparse",
           "format=rgb", f"width={w}", f"height={h}", "framerate=30/1", "!", "videoconvert", "!",
           "video/x-raw,format=I420", "!", "filesink", f"location={i420}"]
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        fail(f"gst-launch for the rgb8 reference failed: {r.stderr.strip()}")
    return i420_luma(i420.read_bytes(), w, h), frame_of


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return 99.0 if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bag")
    ap.add_argument("--topic", required=True)
    ap.add_argument("--fps", type=float)
    ap.add_argument("--gap-tolerance-ms", type=float, default=5.0)
    ap.add_argument("--allow-gaps", action="store_true")
    ap.add_argument("--keyframe-after-gap-ms", type=float,
                    help="after a gap longer than this (a camera restarted), the next frame is an IRAP")
    ap.add_argument("--per-segment", type=int)
    ap.add_argument("--expect-frames", type=int)
    ap.add_argument("--pattern")
    ap.add_argument("--width", type=int)
    ap.add_argument("--height", type=int)
    ap.add_argument("--psnr", type=float, default=30.0)
    ap.add_argument("--rgb8-record", metavar="FILE",
                    help="the publisher's record (ros2peer.py publish --rgb8 --record): each "
                         "message's publish_time names its frame, rendered by pictures.rgb8 "
                         "and converted by GStreamer's videoconvert as the reference")
    a = ap.parse_args()

    segs = sorted(Path(a.bag).glob("*.mcap"), key=segment_index)
    if not segs:
        fail(f"no .mcap in {a.bag}")
    report = {"topic": a.topic, "segments": []}
    all_frames = []
    work = Path(tempfile.mkdtemp(prefix="verify_video_"))
    # The extracted streams and decoded frames are ~125 MB a run: gone at
    # exit, on success and on failure alike.
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    lumas = []
    for seg in segs:
        schema, frames = read_segment(seg, a.topic)
        if not frames:
            fail(f"{seg.name}: no message on {a.topic}")
        if schema != "foxglove_msgs/msg/CompressedVideo":
            fail(f"{seg.name}: {a.topic} has schema {schema}")
        first = nal_types(frames[0]["data"])
        irap = any(16 <= t <= 21 for t in first)
        if not (irap and {32, 33, 34} <= set(first)):
            fail(f"{seg.name}: first access unit has NAL types {first}: not an IRAP with VPS/SPS/PPS")
        for f in frames:
            if f["format"] != "h265":
                fail(f"{seg.name}: format {f['format']!r}")
            if f["stamp"] != f["publish_time"]:
                fail(f"{seg.name}: timestamp {f['stamp']} != publish_time {f['publish_time']}")
            if not nal_types(f["data"]):
                fail(f"{seg.name}: a message holds no NAL unit")
        h265 = work / (seg.stem + ".h265")
        h265.write_bytes(b"".join(f["data"] for f in frames))
        decoded, w, h = ffprobe_frames(h265)
        if decoded != len(frames):
            fail(f"{seg.name}: ffprobe decodes {decoded} frames from {len(frames)} messages")
        keyframes = sum(1 for f in frames if any(16 <= t <= 21 for t in nal_types(f["data"])))
        report["segments"].append({"file": seg.name, "messages": len(frames), "decoded": decoded,
                                   "keyframes": keyframes, "width": w, "height": h,
                                   "first_nal_types": first})
        if a.pattern or a.rgb8_record:
            lumas.append(decode_luma(h265, w, h))
        all_frames.extend(frames)
    stamps = [f["publish_time"] for f in all_frames]
    if any(b <= x for x, b in zip(stamps, stamps[1:])):
        fail("capture times do not strictly increase")
    gaps_ms = [(b - x) / 1e6 for x, b in zip(stamps, stamps[1:])]
    report["messages"] = len(all_frames)
    if gaps_ms:
        report["gap_ms"] = {"min": round(min(gaps_ms), 3), "median": round(float(np.median(gaps_ms)), 3),
                            "max": round(max(gaps_ms), 3)}
    if a.fps:
        period = 1000.0 / a.fps
        missing = 0
        for g in gaps_ms:
            k = round(g / period)
            if abs(g - period) <= a.gap_tolerance_ms:
                continue
            if a.allow_gaps and k >= 2 and abs(g - k * period) <= a.gap_tolerance_ms:
                missing += k - 1
                continue
            fail(f"a gap of {g:.2f} ms between captures; expected {period:.2f} +/- {a.gap_tolerance_ms} ms")
        # Frames the gaps say are missing (a live camera's frames dropped
        # before the encoder), for the caller to compare with edgerec's count.
        report["missing_frames"] = missing
    if a.keyframe_after_gap_ms is not None:
        resumed = 0
        for i, g in enumerate(gaps_ms):
            if g > a.keyframe_after_gap_ms:
                t = nal_types(all_frames[i + 1]["data"])
                if not (any(16 <= x <= 21 for x in t) and {32, 33, 34} <= set(t)):
                    fail(f"after a gap of {g:.0f} ms the next frame has NAL types {t}: not a keyframe")
                resumed += 1
        report["resumed_after_gaps"] = resumed
    if a.per_segment:
        # A segment the camera ran through from start to end holds N +/- 3;
        # the first (the camera starts after the recording) and the last
        # (the recording stops) at most N + 3.
        segs = report["segments"]
        for i, s in enumerate(segs):
            whole = 0 < i < len(segs) - 1
            if whole and abs(s["messages"] - a.per_segment) > 3:
                fail(f"{s['file']}: {s['messages']} frames, expected {a.per_segment} +/- 3")
            if s["messages"] > a.per_segment + 3:
                fail(f"{s['file']}: {s['messages']} frames, more than {a.per_segment} + 3")
    if a.expect_frames is not None and len(all_frames) != a.expect_frames:
        fail(f"{len(all_frames)} messages, expected {a.expect_frames}")
    if a.pattern or a.rgb8_record:
        dec = np.concatenate(lumas)
        if a.pattern:
            # Frame i of the video is videotestsrc's frame n_i: counted from
            # the capture times (a frame lost before the encoder leaves a
            # gap), from the first recorded frame, which is the source's
            # first unless that was lost too (found by its best match among
            # the first few).
            period_ns = 1e9 / (a.fps or 30)
            steps = [round((f["publish_time"] - all_frames[0]["publish_time"]) / period_ns)
                     for f in all_frames]
            ref = reference_luma(a.pattern, steps[-1] + 16, a.width, a.height, int(a.fps or 30), work)
            first = max(range(8), key=lambda k: psnr(dec[0], ref[k]))
            frame_of = [first + n for n in steps]
        else:
            ref, frame_of = rgb8_reference(a.rgb8_record, all_frames, a.width, a.height, work)
        match = [psnr(dec[i], ref[frame_of[i]]) for i in range(len(dec))]
        shifted = [psnr(dec[i], ref[frame_of[i] + 5]) for i in range(len(dec))]
        report["psnr_db"] = {"min": round(min(match), 2), "mean": round(float(np.mean(match)), 2),
                             "shifted_by_5_mean": round(float(np.mean(shifted)), 2)}
        if min(match) < a.psnr:
            i = int(np.argmin(match))
            fail(f"decoded frame {i} has PSNR {match[i]:.1f} dB against its reference (< {a.psnr})")
        if np.mean(match) < np.mean(shifted) + 3:
            fail(f"decoded frames match the reference shifted by 5 frames as well as the right one "
                 f"({np.mean(shifted):.1f} vs {np.mean(match):.1f} dB): the check cannot tell frames apart")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
