"""The row order a score pass remembers for its gradient pass: one entry per shard and fit, two fits at most."""

from __future__ import annotations

import numpy as np
import pytest

from dpipe.io import Shard
from dpipe.reduce import _sorted
from dpipe.reduce._sorted import gradient_pass, score_pass
from dpipe.testing import classification_data


@pytest.fixture(autouse=True)
def empty_memo():
    _sorted._MEMO.clear()
    yield
    _sorted._MEMO.clear()


def _shard(index: int, seed: int = 0) -> Shard:
    X, y = classification_data(300, 5, seed=seed + index)
    return Shard(X=X, y=y, index=index)


def _direct_gradient(shard: Shard, w: np.ndarray, g_pos: np.ndarray, g_neg: np.ndarray) -> np.ndarray:
    """X^T g with the weights laid out by a fresh sort of the scores (the memo's answer must equal it)."""
    s = shard.X.astype(np.float64) @ w
    pos, neg = np.flatnonzero(shard.y == 1), np.flatnonzero(shard.y == -1)
    g = np.zeros(shard.n_rows)
    g[pos[np.argsort(s[pos], kind="stable")]] = g_pos
    g[neg[np.argsort(s[neg], kind="stable")]] = g_neg
    return shard.X.astype(np.float64).T @ g


def test_each_fit_keeps_only_its_latest_pass_per_shard():
    shards = [_shard(i) for i in range(3)]
    w = np.linspace(-1, 1, 5)
    for p in range(1, 6):
        for sh in shards:
            score_pass(sh, w * p, f"fitA-{p}")
    assert list(_sorted._MEMO) == ["fitA"]
    assert {i: key for i, (key, _) in _sorted._MEMO["fitA"].items()} == {0: "fitA-5", 1: "fitA-5", 2: "fitA-5"}


def test_only_the_two_latest_fits_are_remembered_and_a_forgotten_order_is_recomputed():
    sh = _shard(0)
    w = np.linspace(-1, 1, 5)
    for fit in ("fitA", "fitB", "fitC"):
        score_pass(sh, w, f"{fit}-1")
    assert list(_sorted._MEMO) == ["fitB", "fitC"]
    n_pos, n_neg = int((sh.y == 1).sum()), int((sh.y == -1).sum())
    rng = np.random.default_rng(1)
    g_pos, g_neg = rng.standard_normal(n_pos), rng.standard_normal(n_neg)
    expected = _direct_gradient(sh, w, g_pos, g_neg)
    for key in ("fitA-1", "fitC-1", "fitC-1", "fitB-0"):  # forgotten, remembered, popped already, a stale pass
        np.testing.assert_allclose(gradient_pass(sh, w, key, g_pos, g_neg), expected, rtol=1e-10, atol=1e-10)
    assert "fitC" in _sorted._MEMO and 0 not in _sorted._MEMO["fitC"]  # the gradient pass took its entry
