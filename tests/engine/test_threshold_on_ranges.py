"""The best threshold from range counts equals RankSummary.best_threshold over every merged score (the reference),
with ties, weights (zero weights too) and every level of intervals forced by tiny limits."""

from __future__ import annotations

import numpy as np
import pytest

import dpipe.engine._threshold as threshold
from dpipe.engine import LocalDataset
from dpipe.engine._passes import rank_summary
from dpipe.io import Shard


@pytest.mark.parametrize("seed", range(12))
def test_the_threshold_and_errors_equal_rank_summary_s(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    for trial in range(40):
        n = int(rng.integers(3, 3000))
        X = rng.normal(size=(n, 3)).astype(np.float32)
        if trial % 3 == 0:
            X = np.round(X, 1)  # many tied scores
        y = np.where(rng.random(n) < rng.uniform(0.02, 0.98), 1, -1).astype(np.int8)
        w = None if trial % 2 else rng.integers(0, 4, n).astype(np.float64)  # whole weights: sums exact in any order
        if len(set(y)) < 2 or (w is not None and (w[y > 0].sum() == 0 or w[y < 0].sum() == 0)):
            continue
        edges = [0, *sorted(rng.choice(np.arange(1, n), size=min(4, n - 1), replace=False)), n]
        ds = LocalDataset([Shard(X=X[a:b], y=y[a:b], weight=None if w is None else w[a:b], index=i) for i, (a, b) in enumerate(zip(edges, edges[1:]))])
        monkeypatch.setattr(threshold, "SAMPLE_SIZE", int(rng.integers(2, 300)))
        monkeypatch.setattr(threshold, "MAX_RANGES", int(rng.integers(2, 60)))
        monkeypatch.setattr(threshold, "MAX_SAMPLE", int(rng.integers(2, 100)))
        monkeypatch.setattr(threshold, "MAX_GATHER", int(rng.integers(1, 500)))
        monkeypatch.setattr(threshold, "MAX_LEVELS", int(rng.integers(1, 8)))
        coef, b = rng.normal(size=3), float(rng.normal())
        summary = rank_summary(ds, coef, b)
        found = threshold.best_threshold_on_ranges(ds, coef, b)
        assert found.best_threshold() == summary.best_threshold()
        assert found.class_masses() == summary.class_masses()
        assert found.rows_gathered <= n


def test_the_driver_gathers_a_bounded_share_of_the_rows():
    rng = np.random.default_rng(0)
    n = 200_000
    X = rng.normal(size=(n, 4)).astype(np.float32)
    y = np.where(X[:, 0] + rng.normal(size=n) > 0, 1, -1).astype(np.int8)
    ds = LocalDataset([Shard(X=X[i : i + 50_000], y=y[i : i + 50_000], index=i // 50_000) for i in range(0, n, 50_000)])
    found = threshold.best_threshold_on_ranges(ds, np.array([1.0, 0.0, 0.0, 0.0]), 0.0)
    assert found.best_threshold() == rank_summary(ds, np.array([1.0, 0.0, 0.0, 0.0]), 0.0).best_threshold()
    assert found.rows_gathered <= threshold.MAX_GATHER and found.levels >= 1
