"""The exact threshold of a rate fit: along a direction ``w``, the bias with the best exact objective subject to the exact
constraints on the training datasets (one pass: every store's sorted scores with their cells and weights, 20 bytes a row
to the driver; O(n log n) there)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .._runs import merge_runs
from ..reduce._rates import sorted_scores_cells

if TYPE_CHECKING:
    from ..engine._protocols import Dataset

__all__ = ["exact_bias"]


def exact_bias(datasets: Mapping[str, Dataset], plans: Mapping[str, Any], rows: Any, w: np.ndarray, bias: float, feasibility_tol: float,
               margin: float = 0.0, z: float = 0.0) -> tuple[float, bool]:
    """The bias along ``w`` with the best exact objective among those meeting every exact constraint with ``margin`` to
    spare (``value <= -margin``), and with ``z`` standard errors to spare (``value + z se <= -margin``), on ``datasets``
    (alias -> opened dataset, with its ``plans[alias]`` and the compiled ``rows``), and whether one met them all.

    Predicted positive iff ``w.x > b``. Walking the merged scores from the top, each row
    switched to positive adds its weight times its cell's coefficient to every row of the
    problem; candidate biases sit between distinct scores. When no bias meets every
    constraint: the one with the smallest largest violation. Among biases of equal exact
    objective (always, for the ranking risk, which no bias changes): the one nearest ``bias``.

    ``se`` is a constraint's standard error at each candidate, by the delta method over the
    disjoint cells (:mod:`dpipe.rates._intervals`): ``se^2 = sum_cells C_c^2 p_c (1 - p_c)
    sum_{rows in c} v^2``, ``p_c`` the cell's share of weight predicted positive there.
    """
    runs: list[np.ndarray] = []
    weights: list[np.ndarray] = []
    gain_parts: list[np.ndarray] = []
    cell_ids: list[np.ndarray] = []
    offset = 0
    for alias, ds in datasets.items():
        n_cells = plans[alias].layout.n_cells
        for s_run, cells, v in ds.map_gather(sorted_scores_cells, w, plans[alias].layout):
            runs.append(s_run)
            weights.append(v)
            gain_parts.append(rows.coef[alias][:, cells] * v)  # (rows, n): what each row adds when predicted positive
            cell_ids.append(cells.astype(np.int64) + offset)
        offset += n_cells
    s, order, _ = merge_runs(runs)  # one merge of every shard's sorted run, over all datasets
    gains = np.concatenate(gain_parts, axis=1)[:, order] if gain_parts else np.zeros((rows.constant.size, 0))
    v_all = np.concatenate(weights)[order] if weights else np.zeros(0)
    keep = v_all > 0  # a row of weight 0 must not place the threshold
    s, gains = s[keep][::-1], gains[:, keep][:, ::-1]  # descending: lowering b switches rows on in this order
    values = rows.constant[:, None] + np.concatenate([np.zeros((gains.shape[0], 1)), np.cumsum(gains, axis=1)], axis=1)
    # values[:, k]: the top k rows positive; valid only where the k-th and (k+1)-th scores differ
    ends = np.concatenate([[True], s[:-1] > s[1:], [True]]) if s.size else np.array([True])
    candidates = np.flatnonzero(ends)
    vals = values[:, candidates]
    if z > 0 and vals.shape[0] > 1 and s.size:
        cells = np.concatenate(cell_ids)[order][keep][::-1]
        vals = vals.copy()
        vals[1:] += z * _standard_errors(datasets, plans, rows, cells, v_all[keep][::-1], candidates, offset)
    violation = vals[1:].max(axis=0) if vals.shape[0] > 1 else np.zeros(candidates.size)
    violation = violation + margin
    ok = violation <= feasibility_tol
    if s.size == 0:
        return bias, bool(ok.all())
    # the bias each candidate stands for: between the last row switched on and the next (beyond the ends: 1 further)
    upper, lower = np.r_[s[0] + 2.0, s], np.r_[s, s[-1] - 2.0]
    at = 0.5 * (upper[candidates] + lower[candidates])
    if ok.any():
        objective = np.where(ok, vals[0], np.inf)
        best = objective.min()
        ties = np.flatnonzero(objective <= best + 1e-12 * max(1.0, abs(best)))
        return float(at[ties[np.argmin(np.abs(at[ties] - bias))]]), True
    return float(at[np.argmin(violation)]), False


def _standard_errors(datasets: Mapping[str, Dataset], plans: Mapping[str, Any], rows: Any, cells: np.ndarray, v: np.ndarray,
                     candidates: np.ndarray, n_cells: int) -> np.ndarray:
    """Every constraint's standard error at every candidate: shape ``(m, candidates)`` (rows in the walk's order)."""
    coef = np.concatenate([rows.coef[a] for a in datasets], axis=1)[1:]  # (m, all cells), in the cell ids' order
    total = np.bincount(cells, weights=v, minlength=n_cells)
    square = np.bincount(cells, weights=v * v, minlength=n_cells)
    var = np.zeros((coef.shape[0], candidates.size))
    for c in np.flatnonzero(total > 0):
        on = np.concatenate([[0.0], np.cumsum(np.where(cells == c, v, 0.0))])[candidates]  # the cell's weight predicted positive
        p = on / total[c]
        var += (coef[:, c] ** 2)[:, None] * (p * (1 - p) * square[c])[None, :]
    return np.sqrt(var)
