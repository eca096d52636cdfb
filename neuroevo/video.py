"""Frames to a video file: GIF through Pillow, MP4 (H.264) through imageio-ffmpeg.

Written under a temporary name and renamed, like every file neuroevo writes, so an
interrupted recording never leaves a truncated video under the final name.
"""

from __future__ import annotations

import io
import os

import numpy as np

from neuroevo.errors import ConfigError, DependencyNotInstalled
from neuroevo.files import atomic_write

FORMATS = (".gif", ".mp4")


def check_path(path: str) -> str:
    if not path.lower().endswith(FORMATS):
        raise ConfigError(f"--video must name a .gif or .mp4 file, got {path!r}")
    if path.lower().endswith(".mp4"):
        _ffmpeg_writer()
    return path


def default_format() -> str:
    """``.mp4`` where imageio-ffmpeg is installed (the video extra), else ``.gif``."""
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        return ".gif"
    return ".mp4"


def _ffmpeg_writer():
    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg  # noqa: F401 - the ffmpeg binary imageio writes MP4 with
    except ImportError:
        raise DependencyNotInstalled("writing .mp4 needs imageio-ffmpeg: pip install "
                                     "'neuroevo[video]', or record a .gif") from None
    return imageio


def write(path: str, frames: list[np.ndarray], fps: int) -> None:
    """``frames``: ``[H, W]`` (grayscale) or ``[H, W, 3]`` uint8 arrays of one size."""
    if path.lower().endswith(".gif"):
        from PIL import Image

        images = [Image.fromarray(f) for f in frames]
        gif = io.BytesIO()
        images[0].save(gif, format="GIF", save_all=True, append_images=images[1:],
                       duration=1000 // fps, loop=0)
        atomic_write(path, gif.getvalue())
        return
    imageio = _ffmpeg_writer()
    tmp = f"{path}.tmp.mp4"
    try:
        with imageio.get_writer(tmp, fps=fps, codec="libx264", quality=7, macro_block_size=2,
                                ffmpeg_log_level="error") as writer:
            for f in frames:
                writer.append_data(np.repeat(f[..., None], 3, axis=2) if f.ndim == 2 else f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
