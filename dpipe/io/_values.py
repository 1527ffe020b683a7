"""Values that a float32 store can hold exactly enough: the ingest-side check.

Stores keep features (and sample weights) in float32. A source value beyond
float32's range (``|v| > 3.4028235e38``: ``1e39``) would be stored as +-inf, and a
non-zero value below its smallest subnormal (``|v| < 1.4e-45``: ``1e-50``) as 0;
both are refused at ingest, naming the file and line (or row).
"""

from __future__ import annotations

import numpy as np

__all__ = ["float32_problem"]

_F32 = np.finfo(np.float32)


def float32_problem(values: np.ndarray) -> tuple[int, str] | None:
    """(index, reason) of the first float64 value that float32 cannot hold, or None.

    ``reason`` reads after the value: ``"is too large for float32 (...)"``.

    Non-finite values are the caller's to refuse first (NaN / inf in the source).
    """
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return None
    with np.errstate(over="ignore", under="ignore"):
        f = v.astype(np.float32)
    bad = ~np.isfinite(f) & np.isfinite(v)
    bad |= (f == 0) & (v != 0)
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    if np.isfinite(f[i]):
        return i, f"is too small for float32 (non-zero below {float(np.nextafter(np.float32(0), np.float32(1))):.3g}: it would be stored as 0)"
    return i, f"is too large for float32 (beyond {float(_F32.max):.8g}: it would be stored as infinite)"
