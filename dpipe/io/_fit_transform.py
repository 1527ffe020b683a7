"""Fit feature transforms (``log1p`` and ``scale``) on a store (the transformed store is written by
:mod:`dpipe.io._transform_store`; the transform a store carries is :mod:`dpipe.io._stored_transform`'s).

One pass over the fitting rows gathers, per feature, the minimum, maximum, mean and
variance of ``x`` and of ``log1p(x)`` (merged shard by shard, Chan et al.) and a histogram
of ``floor(log2(1 + x))`` for the automatic ``log1p`` rule; the transform is then fixed and
applied shard by shard as the new store is written (:class:`dpipe._transform.FeatureTransform`).

The ``log1p="auto"`` rule
-------------------------
A feature is log-transformed when it is numeric (not a one-hot indicator), never negative,
and heavy-tailed: ``floor(log2(1 + max)) - floor(log2(1 + median)) >= AUTO_LOG1P_OCTAVES``
(7), i.e. its maximum exceeds its median by a factor of about 2^7 = 128 or more, compared on
``1 + x``. The median is the lower median (the value of rank ceil(n / 2)), located in the
feature's exact power-of-two histogram, so the rule needs one pass and O(d) memory. Every
feature's figures and the decision are kept in the manifest (``encoding["transform"]["auto"]``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._transform import FeatureTransform
from ..exceptions import InputError, ParameterError
from ..reduce._block import is_csr, take_rows
from ._manifest import Manifest
from ._store import Store
from ._stored_transform import check_finite, check_sparse_scale, check_sparse_transform, indicator_features

__all__ = ["FeatureStats", "fit_transform", "fit_on_store", "resolve_log1p_names", "AUTO_LOG1P_OCTAVES", "AUTO_MAX_FEATURES"]

#: ``log1p="auto"``: the octaves (powers of two) between the median and the maximum of ``1 + x``
AUTO_LOG1P_OCTAVES = 7
#: histogram bins of floor(log2(1 + x)) for x >= 0 in float32 (1 + x < 2^129)
_BINS = 130
#: ``log1p="auto"`` keeps one histogram per feature: refused beyond this many features
AUTO_MAX_FEATURES = 1 << 16

class FeatureStats:
    """Per-feature moments of ``x`` and ``log1p(x)`` and power-of-two histograms, merged over row blocks.

    With sample weights a row of weight ``v`` counts as ``v`` repeated rows (a row of weight 0
    is left out, also of the minimum and maximum), so integer weights give the statistics of
    the repeated rows. ``n`` is the total weight, ``rows`` the rows that count.
    """

    def __init__(self, n_features: int, histograms: bool) -> None:
        d = n_features
        self.n = 0.0
        self.rows = 0
        self.min = np.full(d, np.inf)
        self.max = np.full(d, -np.inf)
        self.mean = np.zeros(d)
        self.m2 = np.zeros(d)
        self.log_min = np.full(d, np.inf)
        self.log_max = np.full(d, -np.inf)
        self.log_mean = np.zeros(d)
        self.log_m2 = np.zeros(d)
        self.hist = np.zeros((d, _BINS)) if histograms else None

    @staticmethod
    def _merge(n_a: float, mean_a: np.ndarray, m2_a: np.ndarray, X: np.ndarray, v: np.ndarray, n_b: float) -> tuple[np.ndarray, np.ndarray]:
        mean_b = (v @ X) / n_b
        m2_b = v @ (X - mean_b) ** 2
        n = n_a + n_b
        delta = mean_b - mean_a
        return mean_a + delta * (n_b / n), m2_a + m2_b + delta**2 * (n_a * n_b / n)

    def _add_csr(self, X: Any, v: np.ndarray, n_b: float) -> None:
        """:meth:`add` of a CSR block in O(nnz): minimum, maximum and histograms (every column's unstored entries are zeros
        of the rows' remaining weight), what log1p and maxabs need."""
        d = X.shape[1]
        rv = np.repeat(v, np.diff(X.indptr))
        cols = np.asarray(X.indices, dtype=np.int64)
        x = X.data.astype(np.float64)
        covered = np.bincount(cols, weights=rv, minlength=d)
        stored = np.bincount(cols, minlength=d)
        has_zero = stored < X.shape[0]
        for values, lo, hi in ((x, "min", "max"), (np.log1p(np.maximum(x, 0.0)), "log_min", "log_max")):  # log1p is monotone
            col_min, col_max = np.full(d, np.inf), np.full(d, -np.inf)
            np.minimum.at(col_min, cols, values)
            np.maximum.at(col_max, cols, values)
            col_min[has_zero] = np.minimum(col_min[has_zero], 0.0)
            col_max[has_zero] = np.maximum(col_max[has_zero], 0.0)
            setattr(self, lo, np.minimum(getattr(self, lo), col_min))
            setattr(self, hi, np.maximum(getattr(self, hi), col_max))
        # no means or variances: they serve scale="standard" only, which a sparse store refuses (check_sparse_scale);
        # NaN makes any use of them fail loudly (fit_transform refuses a scale that is not finite)
        for name in ("mean", "m2", "log_mean", "log_m2"):
            setattr(self, name, np.full(d, np.nan))
        if self.hist is not None:
            self.hist += np.bincount(cols * _BINS + _octaves(x), weights=rv, minlength=d * _BINS).reshape(d, _BINS)
            self.hist[:, 0] += n_b - covered  # the zeros: octave 0
        self.n += n_b
        self.rows += X.shape[0]

    def add(self, X: Any, weight: np.ndarray | None = None) -> None:
        """Add a block of rows (float32 features as stored, dense or CSR) with their sample weights (None: 1 each)."""
        v = np.ones(X.shape[0]) if weight is None else np.asarray(weight, dtype=np.float64)
        if weight is not None:
            keep = v > 0
            X, v = take_rows(X, keep), v[keep]
        if X.shape[0] == 0:
            return
        n_b = float(v.sum())
        if is_csr(X):
            self._add_csr(X, v, n_b)
            return
        X64 = X.astype(np.float64)
        self.min = np.minimum(self.min, X64.min(axis=0))
        self.max = np.maximum(self.max, X64.max(axis=0))
        self.mean, self.m2 = self._merge(self.n, self.mean, self.m2, X64, v, n_b)
        L = np.log1p(np.maximum(X64, 0.0))  # a feature with negative values is never logged: its log figures go unused
        self.log_min = np.minimum(self.log_min, L.min(axis=0))
        self.log_max = np.maximum(self.log_max, L.max(axis=0))
        self.log_mean, self.log_m2 = self._merge(self.n, self.log_mean, self.log_m2, L, v, n_b)
        if self.hist is not None:
            d = X.shape[1]
            flat = _octaves(X64) + np.arange(d, dtype=np.int64) * _BINS
            self.hist += np.bincount(flat.ravel(), weights=np.repeat(v, d), minlength=d * _BINS).reshape(d, _BINS)
        self.n += n_b
        self.rows += X.shape[0]

    def median_octave(self) -> np.ndarray:
        """Per feature, floor(log2(1 + lower median)): the first octave holding half the weight (rank ceil(n / 2) for counts)."""
        if self.hist is None:
            raise RuntimeError("median_octave needs the histograms (FeatureStats(..., histograms=True))")
        return np.argmax(np.cumsum(self.hist, axis=1) >= 0.5 * self.n, axis=1)

    def max_octave(self) -> np.ndarray:
        """Per feature, floor(log2(1 + max))."""
        return _octaves(np.maximum(self.max, 0.0)[None, :])[0]


def _octaves(X: np.ndarray) -> np.ndarray:
    """``floor(log2(1 + max(x, 0)))``, exactly: ``1 + x = m 2^e`` with m in [0.5, 1) gives ``e - 1``."""
    _, e = np.frexp(1.0 + np.maximum(X, 0.0))
    return (e - 1).astype(np.int64)


def _resolve_features(spec: Sequence[str | int], names: Sequence[str], owner: str) -> list[int]:
    index = {n: j for j, n in enumerate(names)}
    out = []
    for v in spec:
        if isinstance(v, str) and v in index:
            out.append(index[v])
        elif isinstance(v, int) or (isinstance(v, str) and v.lstrip("-").isdigit()):
            j = int(v)
            if not -len(names) <= j < len(names):
                raise ParameterError(f"The 'log1p' parameter of {owner} names feature {j}, but there are {len(names)} features.")
            out.append(j % len(names))
        else:
            close = [n for n in names if n.split("=")[0] == v]
            hint = f" ({v!r} is categorical: its one-hot features are never logged)" if close else ""
            raise ParameterError(f"The 'log1p' parameter of {owner} names {v!r}, which is not a feature{hint}.")
    return sorted(set(out))


def resolve_log1p_names(log1p: str | Sequence[str | int] | None, m: Manifest, owner: str) -> None:
    """Check ``log1p`` against a store before its statistics pass: named features exist and are not one-hot indicators,
    and ``auto`` keeps at most :data:`AUTO_MAX_FEATURES` histograms."""
    if log1p == "auto" and m.n_features > AUTO_MAX_FEATURES:
        raise ParameterError(f"The 'log1p' parameter of {owner} is 'auto', but the store has {m.n_features} features (at most {AUTO_MAX_FEATURES}); "
                             "name the features")
    if isinstance(log1p, list):
        indicators = indicator_features(m)
        for j in _resolve_features(log1p, m.feature_names, owner):
            if indicators[j]:
                raise ParameterError(f"The 'log1p' parameter of {owner} names {m.feature_names[j]!r}, a one-hot indicator; indicators are never logged.")


def fit_transform(
    stats: FeatureStats,
    feature_names: Sequence[str],
    indicators: np.ndarray,
    *,
    log1p: str | Sequence[str | int] | None,
    scale: str,
    owner: str,
    where: str,
) -> tuple[FeatureTransform, dict[str, Any]]:
    """Fix the transform from the statistics of the fitting rows.

    Returns
    -------
    (transform, report)
        ``report``: for ``log1p="auto"``, one entry per numeric feature with its minimum,
        maximum, median octave, maximum octave and the decision (``encoding["transform"]["auto"]``).
    """
    names = list(feature_names)
    d = len(names)
    numeric = ~indicators
    if stats.n <= 0:
        raise ParameterError(f"{where}: no rows (of positive weight) to fit the transform on")
    logged, report = _logged_features(stats, names, indicators, log1p, owner, where)
    is_log = np.zeros(d, dtype=bool)
    is_log[logged] = True
    feats, offset, factor = _scale_of(stats, numeric, is_log, scale)
    if not (np.all(np.isfinite(offset)) and np.all(np.isfinite(factor))):  # e.g. a variance beyond float64: nothing unreadable is written
        j = feats[int(np.flatnonzero(~(np.isfinite(offset) & np.isfinite(factor)))[0])]
        raise InputError(f"feature {names[j]!r}: its {scale} scale is not finite (values too large to scale)", path=where)
    t = FeatureTransform(d, tuple(logged), scale, tuple(feats), tuple(float(v) for v in offset), tuple(float(v) for v in factor), tuple(names))
    return t, report


def _logged_features(stats: FeatureStats, names: list[str], indicators: np.ndarray, log1p: str | Sequence[str | int] | None, owner: str,
                     where: str) -> tuple[list[int], dict[str, Any]]:
    """The features ``log1p`` takes (sorted indices) and, for ``"auto"``, its report; a named indicator or a feature with
    negative values is refused."""
    if log1p is None:
        return [], {}
    if log1p == "auto":
        return _auto_log1p(stats, names, ~indicators)
    logged = list(np.flatnonzero(~indicators)) if log1p == "all" else _resolve_features(log1p, names, owner)
    for j in logged:
        if indicators[j]:
            raise ParameterError(f"The 'log1p' parameter of {owner} names {names[j]!r}, a one-hot indicator; indicators are never logged.")
        if stats.min[j] < 0:
            raise InputError(f"feature {names[j]!r} has negative values (minimum {stats.min[j]:.6g}); log1p applies to non-negative features "
                             "(leave it out of log1p=)", path=where)
    return [int(j) for j in logged], {}


def _auto_log1p(stats: FeatureStats, names: list[str], numeric: np.ndarray) -> tuple[list[int], dict[str, Any]]:
    """``log1p="auto"``: the heavy-tailed numeric features (module docstring), and every numeric feature's figures."""
    med, top = stats.median_octave(), stats.max_octave()
    logged = []
    features = {}
    for j in np.flatnonzero(numeric).tolist():
        nonneg = stats.min[j] >= 0
        take = bool(nonneg and top[j] - med[j] >= AUTO_LOG1P_OCTAVES)
        features[names[j]] = {"min": float(stats.min[j]), "max": float(stats.max[j]), "median_octave": int(med[j]),
                              "max_octave": int(top[j]), "log1p": take,
                              "why": "negative values" if not nonneg else (f"max / median >= 2^{AUTO_LOG1P_OCTAVES} (on 1 + x)" if take
                                                                           else f"max / median < 2^{AUTO_LOG1P_OCTAVES} (on 1 + x)")}
        if take:
            logged.append(int(j))
    report = {"rule": f"floor(log2(1 + max)) - floor(log2(1 + median)) >= {AUTO_LOG1P_OCTAVES}, never negative, not one-hot",
              "features": features}
    return logged, report


def _scale_of(stats: FeatureStats, numeric: np.ndarray, is_log: np.ndarray, scale: str) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The scaled features and their offsets and factors (``x -> (x - offset) * factor``, after ``log1p``)."""
    if scale == "none":
        return [], np.zeros(0), np.zeros(0)
    feats = [int(j) for j in np.flatnonzero(numeric)]
    lo = np.where(is_log, stats.log_min, stats.min)[feats]
    hi = np.where(is_log, stats.log_max, stats.max)[feats]
    if scale == "minmax":
        offset, span = lo, hi - lo
    elif scale == "maxabs":  # zeros stay zeros: the one scale of a sparse store
        offset, span = np.zeros(len(feats)), np.maximum(np.abs(lo), np.abs(hi))
    else:
        offset = np.where(is_log, stats.log_mean, stats.mean)[feats]
        span = np.sqrt(np.where(is_log, stats.log_m2, stats.m2)[feats] / stats.n)
    factor = np.where(span > 0, 1.0 / np.where(span > 0, span, 1.0), 1.0)  # a constant feature: shifted to 0, not scaled (as scikit-learn)
    return feats, offset, factor


def fit_on_store(st: Store, *, log1p: str | Sequence[str | int] | None, scale: str, owner: str, fitted_on: dict[str, Any],
                 rows: Callable[[int, int], np.ndarray] | None = None, where: str | None = None) -> tuple[FeatureTransform, dict[str, Any]]:
    """Fit a transform on a store's rows (``rows(start, n)``: the mask of a shard's rows that count; default all),
    in one pass, each row weighted by its sample weight. Returns the transform and its manifest record
    (``encoding["transform"]``: the transform, ``fitted_on`` with the rows that counted, and ``auto``'s report)."""
    m = st.manifest
    check_sparse_scale(scale, m.layout, owner, st.path)
    resolve_log1p_names(log1p, m, owner)  # a bad name or an auto beyond AUTO_MAX_FEATURES before the pass, not after it
    stats = FeatureStats(m.n_features, histograms=log1p == "auto")
    for i, shard in enumerate(st.iter_shards()):
        start = m.shard_bounds[i][0]
        check_finite(shard.X, start, f"{st.path}, shard {i}", m.feature_names)
        keep = slice(None) if rows is None else rows(start, shard.n_rows)
        stats.add(shard.X[keep], None if shard.weight is None else shard.weight[keep])
    t, report = fit_transform(stats, m.feature_names, indicator_features(m), log1p=log1p, scale=scale, owner=owner, where=where or st.path)
    check_sparse_transform(t, m.layout, owner, where or st.path)
    record = {**t.to_dict(), "fitted_on": {**fitted_on, "rows": stats.rows}}
    if report:
        record["auto"] = report
    return t, record
