"""Checks that a PNG written by goffish is a real picture, not an empty or blank file."""
from __future__ import annotations

import numpy as np
from PIL import Image


def assert_picture(path, size: tuple[int, int] | None = None) -> np.ndarray:
    """Open ``path`` as PNG; check its (width, height) and that it is not blank. Returns its pixels."""
    with Image.open(path) as image:
        assert image.format == "PNG", f"{path}: {image.format}, not PNG"
        if size is not None:
            assert image.size == size, f"{path}: {image.size[0]}x{image.size[1]} pixels, expected {size[0]}x{size[1]}"
        pixels = np.asarray(image.convert("RGB"), dtype=np.float64)
    inked = (pixels < 250).any(axis=2).mean()
    assert pixels.std() > 10 and inked > 0.02, f"{path}: looks blank (std {pixels.std():.1f}, {inked:.1%} inked)"
    return pixels
