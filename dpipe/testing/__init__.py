"""Helpers shared by dpipe's tests and benchmarks: small stores, non-Gaussian data and
plain NumPy references of the numba kernels and oracles (never imported by production code)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from ..io import ShardWriter
from ._references import (
    TABLE_LOSSES,
    auc_gamma_reference,
    contingency_argmax_reference,
    error_rate_argmax_reference,
    f1_argmax_reference,
    huber_hinge_reference,
    matvec_reference,
    moments_reference,
    parse_block_reference,
    prbep_argmax_reference,
    prbep_beta_reference,
    prec_at_k_argmax_reference,
    rec_at_k_argmax_reference,
    rmatvec_reference,
    rocarea_argmax_reference,
    sorted_auc_reference,
    squared_hinge_reference,
)
from ._text import tfidf_text_data

__all__ = [
    "write_store",
    "one_error_line",
    "classification_data",
    "tfidf_text_data",
    "matvec_reference",
    "rmatvec_reference",
    "moments_reference",
    "parse_block_reference",
    "auc_gamma_reference",
    "prbep_beta_reference",
    "sorted_auc_reference",
    "squared_hinge_reference",
    "huber_hinge_reference",
    "rocarea_argmax_reference",
    "error_rate_argmax_reference",
    "prbep_argmax_reference",
    "prec_at_k_argmax_reference",
    "rec_at_k_argmax_reference",
    "f1_argmax_reference",
    "contingency_argmax_reference",
    "TABLE_LOSSES",
]


def write_store(
    path: str | os.PathLike,
    X: np.ndarray,
    y: np.ndarray | None,
    shard_sizes: Sequence[int] | None = None,
    *,
    format: str = "zarr",
    group: np.ndarray | None = None,
    weight: np.ndarray | None = None,
    groups: list[str] | None = None,
    layout: str = "dense",
) -> str:
    """Write ``X, y`` as a store with the given shard sizes (a 0 makes an empty shard); ``y=None``: an unlabelled store;
    ``layout="csr"``: its features sparse (``X`` dense or CSR either way).

    Returns
    -------
    str
        The store's path.
    """
    n, d = X.shape
    sizes = list(shard_sizes) if shard_sizes is not None else [n]
    if sum(sizes) != n:
        raise ValueError(f"write_store: shard sizes add up to {sum(sizes)}, not {n}")
    labelled = y is not None
    y = np.asarray(y) if labelled else np.zeros(n, dtype=np.int8)
    with ShardWriter(str(path), d, [f"x{i}" for i in range(d)], max(1, max(sizes)), format=format, with_group=group is not None,
                     with_weight=weight is not None, labelled=labelled, layout=layout) as w:
        start = 0
        for size in sizes:
            sl = slice(start, start + size)
            w.write_shard(X[sl], y[sl], None if group is None else group[sl], None if weight is None else weight[sl])
            start += size
        w.commit(groups=groups if group is not None else None)
    return str(path)


def classification_data(n: int = 3000, d: int = 8, seed: int = 0, positive_shift: float = 0.8, scales: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Non-Gaussian two-class data: a binary, a heavy-tailed and shifted Gaussian columns.

    With ``scales`` the columns span six orders of magnitude and one has a mean of
    1e5 (naive sums of squares would lose its variance). Needs ``d >= 4``.

    Returns
    -------
    X : ndarray of shape (n, d), float32
    y : ndarray of shape (n,), int8 in {-1, +1} (about 30 % positive)
    """
    if d < 4:
        raise ValueError("classification_data: d must be at least 4")
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n) < 0.3, 1, -1).astype(np.int8)
    X = rng.standard_normal((n, d))
    X[:, 0] = rng.random(n) < np.where(y > 0, 0.6, 0.3)
    X[:, 1] = rng.standard_t(3, n)
    X[:, 2:] += positive_shift * (y[:, None] > 0) * rng.standard_normal(d - 2)
    if scales:
        X *= np.logspace(-2, 4, d)
        X[:, 3] += 1e5
    return X.astype(np.float32), y


def one_error_line(stderr: str, command: str) -> str:
    """The single stderr line ``dpipe COMMAND: error: ...`` of a failed command run with ``-q``; asserts there is no traceback."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"dpipe {command}: error: "), stderr
    return lines[0]
