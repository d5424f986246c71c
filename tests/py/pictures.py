"""Deterministic test pictures, shared by the ROS 2 test peer (which
publishes them as sensor_msgs/msg/Image) and verify_video.py (which renders
the same frames as the reference a recorded video must decode to).

rgb8(seq, w, h): smooth gradients that move with the frame number, so
each frame differs from its neighbours (a decoder that returned the wrong
frame, or a frozen picture, scores a low PSNR against the right one), and
H.265 at a modest bitrate keeps them well above 30 dB.
"""
import numpy as np


def rgb8(seq: int, w: int, h: int) -> bytes:
    x = np.arange(w, dtype=np.int32)[None, :]
    y = np.arange(h, dtype=np.int32)[:, None]
    r = (2 * x + 6 * seq) % 256
    g = (2 * y + 4 * seq) % 256
    b = (x + y + 10 * seq) % 256
    img = np.stack(np.broadcast_arrays(r, g, b), axis=-1).astype(np.uint8)
    return img.tobytes()
