"""Fit feature transforms (``log1p`` and ``scale``) on a store, and write transformed stores.

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

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._transform import SCALES, FeatureTransform
from .._wide import same_names
from ..exceptions import InputError, ParameterError, StoreError
from ..reduce._block import first_nonfinite, is_csr, take_rows, value_at
from ._manifest import Manifest
from ._store import Store, open_store

__all__ = ["FeatureStats", "fit_transform", "fit_on_store", "transform_store", "check_log1p", "check_finite", "check_same_features", "AUTO_LOG1P_OCTAVES", "stored_transform"]

log = logging.getLogger("dpipe.io")

#: ``log1p="auto"``: the octaves (powers of two) between the median and the maximum of ``1 + x``
AUTO_LOG1P_OCTAVES = 7
#: histogram bins of floor(log2(1 + x)) for x >= 0 in float32 (1 + x < 2^129)
_BINS = 130
#: ``log1p="auto"`` keeps one histogram per feature: refused beyond this many features
AUTO_MAX_FEATURES = 1 << 16


def check_log1p(value: Any, owner: str) -> str | list[str | int] | None:
    """``None``, ``"auto"``, ``"all"`` or a list of feature names / indices (a comma-separated string is split)."""
    if value is None or value in ("auto", "all"):
        return value
    if isinstance(value, str):
        value = [v for v in value.split(",") if v != ""]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        return list(value)
    raise ParameterError(f"The 'log1p' parameter of {owner} must be 'auto', 'all' or a non-empty list of feature names or indices. Got {value!r} instead.")


def _check_scale(scale: Any, owner: str) -> str:
    if scale not in SCALES:
        raise ParameterError(f"The 'scale' parameter of {owner} must be one of {SCALES}. Got {scale!r} instead.")
    return scale


def stored_transform(m: Manifest, where: str) -> FeatureTransform | None:
    """The transform recorded in a manifest's encoding, or None."""
    d = m.encoding.get("transform") if m.encoding else None
    if d is None:
        return None
    try:
        return FeatureTransform.from_dict(d, m.feature_names, where)
    except ValueError as exc:
        raise StoreError(str(exc)) from None


#: the fields of ``encoding["transform"]`` that decide the stored values (not where or how it was fitted)
_TRANSFORM_FIELDS = ("n_features", "log1p", "scale", "features", "offset", "factor")


def _transform_of(encoding: dict[str, Any] | None) -> dict[str, Any] | None:
    t = (encoding or {}).get("transform")
    return None if t is None else {k: t.get(k) for k in _TRANSFORM_FIELDS}


def check_same_features(feature_names: Sequence[str], encoding: dict[str, Any] | None, st: Store, what: str) -> None:
    """Refuse a store whose features are not those of a training store (or model): the same names, in order, and the
    same fitted transform. A store ingested without ``like=`` from a transformed training store has the names but raw
    values: it would be scored wrongly without a word.

    Raises
    ------
    ValueError
        One line naming the store and what differs, pointing to ``like=``.
    """
    m = st.manifest
    if not same_names(m.feature_names, feature_names):
        if m.n_features != len(feature_names):
            raise ValueError(f"{st.path}: the store has {m.n_features} features, the {what} {len(feature_names)}; ingest it with like= the training store")
        bad = next(i for i, (a, b) in enumerate(zip(m.feature_names, feature_names)) if a != b)
        raise ValueError(f"{st.path}: feature {bad} is {m.feature_names[bad]!r} in the store but {feature_names[bad]!r} in the {what}; "
                         "ingest it with like= the training store")
    mine, theirs = _transform_of(m.encoding), _transform_of(encoding)
    if mine != theirs:
        state = lambda t: "no transform" if t is None else f"log1p on {len(t['log1p'] or [])} feature(s), scale {t['scale']}"  # noqa: E731
        raise ValueError(f"{st.path}: its features are stored with {state(mine)}, the {what}'s with {state(theirs)} "
                         "(the same fitted values are needed); ingest it with like= the training store")


def indicator_features(m: Manifest) -> np.ndarray:
    """Boolean mask of the one-hot indicator features of a tabular store (never logged or scaled)."""
    mask = np.zeros(m.n_features, dtype=bool)
    enc = m.encoding or {}
    if enc.get("kind") != "tabular":
        return mask
    from ._tabular import TabularSchema

    schema = TabularSchema.from_list(enc["columns"])
    for c, off in zip(schema.columns, schema.offsets()):
        if c.is_feature and c.type == "categorical":
            mask[off : off + c.width] = True
    return mask


def check_sparse_scale(scale: str, layout: str, owner: str, where: str) -> None:
    """A sparse store keeps its zeros: ``log1p``, ``scale="maxabs"`` and a ``minmax`` whose every fitted minimum is 0 do
    (:func:`check_sparse_transform` checks the fitted one); ``standard`` centres and is refused up front, as scikit-learn's
    ``StandardScaler(with_mean=True)`` refuses sparse input."""
    if layout == "csr" and scale == "standard":
        raise ParameterError(f"{where}: a sparse store; scale='standard' would shift its zeros and make it dense. Use scale='maxabs' "
                             f"(divides each feature by its largest |value|; with log1p= if wanted), or a dense layout ({owner}).")


def check_sparse_transform(t: FeatureTransform, layout: str, owner: str, where: str) -> None:
    """Refuse a fitted transform that would shift the zeros of a sparse store: a ``minmax`` scale is kept when every scaled
    feature's minimum (stored zeros counted) is 0, so that it only multiplies; else the first shifted feature is named."""
    check_sparse_scale(t.scale, layout, owner, where)
    if layout == "csr" and not t.keeps_zeros:
        k = next(i for i, off in enumerate(t.offset) if off != 0)
        raise ParameterError(f"{where}: a sparse store; scale={t.scale!r} would shift feature {t.feature_names[t.features[k]]!r} by "
                             f"{t.offset[k]:.6g} (its minimum is not 0) and make the store dense. Use scale='maxabs' (divides each "
                             f"feature by its largest |value|), or a dense layout ({owner}).")


def check_finite(X: Any, first_row: int, where: str, feature_names: Sequence[str]) -> None:
    """Refuse a block (dense or CSR) with a NaN or infinite feature, naming the feature and the row (``first_row`` + its index)."""
    found = first_nonfinite(X)
    if found is not None:
        i, j = found
        raise InputError(f"{where}: feature {feature_names[j]!r} is {value_at(X, i, j)!r} in row {first_row + int(i)}; "
                         "a transform is fitted on finite values only")


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
    report: dict[str, Any] = {}
    if stats.n <= 0:
        raise ParameterError(f"{where}: no rows (of positive weight) to fit the transform on")
    if log1p is None:
        logged: list[int] = []
    elif log1p == "auto":
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
    else:
        logged = list(np.flatnonzero(numeric)) if log1p == "all" else _resolve_features(log1p, names, owner)
        for j in logged:
            if indicators[j]:
                raise ParameterError(f"The 'log1p' parameter of {owner} names {names[j]!r}, a one-hot indicator; indicators are never logged.")
            if stats.min[j] < 0:
                raise InputError(f"feature {names[j]!r} has negative values (minimum {stats.min[j]:.6g}); log1p applies to non-negative features "
                                 "(leave it out of log1p=)", path=where)
    logged = [int(j) for j in logged]
    is_log = np.zeros(d, dtype=bool)
    is_log[logged] = True
    if scale == "none":
        feats: list[int] = []
        offset = factor = np.zeros(0)
    else:
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
    if not (np.all(np.isfinite(offset)) and np.all(np.isfinite(factor))):  # e.g. a variance beyond float64: nothing unreadable is written
        j = feats[int(np.flatnonzero(~(np.isfinite(offset) & np.isfinite(factor)))[0])]
        raise InputError(f"feature {names[j]!r}: its {scale} scale is not finite (values too large to scale)", path=where)
    t = FeatureTransform(d, tuple(logged), scale, tuple(feats), tuple(float(v) for v in offset), tuple(float(v) for v in factor), tuple(names))
    return t, report


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


def describe(t: FeatureTransform) -> str:
    """One line: which features are logged and how they are scaled."""
    names = [t.feature_names[j] for j in t.log1p]
    shown = ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")
    return f"log1p on {len(names)} feature(s){': ' + shown if names else ''}; scale {t.scale} on {len(t.features)} feature(s)"


def transform_store(
    src: str | os.PathLike | Store,
    dest: str,
    *,
    log1p: str | Sequence[str | int] | None = None,
    scale: str = "none",
    like: str | os.PathLike | None = None,
    overwrite: bool = False,
    _source: dict[str, Any] | None = None,
    _fitted_on: str | None = None,
    _owner: str = "transform_store",
) -> Manifest:
    """Write a copy of ``src`` with transformed features: fitted on ``src``, or ``like``'s.

    Parameters
    ----------
    src : path or Store
        A store without a transform.
    dest : str
        The new store (same shards, same labels, groups and weights).
    log1p : "auto", "all" or list of feature names / indices, optional
        Features replaced by ``log1p(x)``; "all": every numeric feature; "auto": the
        heavy-tailed ones (module docstring). One-hot indicators are never logged.
    scale : {"minmax", "standard", "maxabs", "none"}
        Affine map of every numeric feature, fitted on ``src``: to [0, 1] by its minimum
        and maximum, or to zero mean and unit variance (after ``log1p``).
    like : path, optional
        A transformed store whose fitted transform is applied instead of fitting one
        (values of ``src`` may fall outside [0, 1]).
    overwrite : bool
        Replace an existing ``dest``.

    Returns
    -------
    Manifest
        The new store's; ``encoding["transform"]`` records the transform.
    """
    owner = _owner
    log1p = check_log1p(log1p, owner)
    scale = _check_scale(scale, owner)
    st = src if isinstance(src, Store) else open_store(src)
    m = st.manifest
    if os.path.realpath(dest) == os.path.realpath(st.path):
        raise ParameterError(f"{st.path}: transform_store writes a new store; dest is the source itself")
    if stored_transform(m, st.path) is not None:
        raise ParameterError(f"{st.path}: already transformed (its manifest has encoding['transform']); transform the raw store")
    from ._writer import prepare_destination, store_lock

    if like is not None:
        if log1p is not None or scale != "none":
            raise ParameterError(f"The 'log1p' and 'scale' parameters of {owner} fit a transform; like= reuses the like= store's, so give one or the other.")
        lm = open_store(like).manifest
        t = stored_transform(lm, os.fspath(like))
        if t is None:
            raise ParameterError(f"The 'like' parameter of {owner} names {os.fspath(like)}, which has no transform.")
        if not same_names(lm.feature_names, m.feature_names):
            raise ParameterError(f"The 'like' parameter of {owner} names {os.fspath(like)}, whose features differ from {st.path}'s.")
    with store_lock(dest):  # one writer of dest, from the check before the fitting pass to the rename
        prepare_destination(dest, overwrite)
        if like is not None:
            assert t is not None  # the like= store's, checked above
            record = dict(lm.encoding["transform"])
        else:
            fitted_on = {"path": st.path, "manifest_sha256": m.digest()} if _fitted_on is None else {"path": _fitted_on}
            t, record = fit_on_store(st, log1p=log1p, scale=scale, owner=owner, fitted_on=fitted_on, where=_fitted_on)
        return _write_transformed(st, dest, t, record, overwrite, _source)


def _write_transformed(st: Store, dest: str, t: FeatureTransform, record: dict[str, Any], overwrite: bool,
                       source: dict[str, Any] | None) -> Manifest:
    from ._writer import ShardWriter

    m = st.manifest
    check_sparse_transform(t, m.layout, "the transform", st.path)
    sizes = [b - a for a, b in m.shard_bounds]
    with ShardWriter(dest, m.n_features, m.feature_names, max(sizes, default=1) or 1, format=m.format,
                     with_group=m.group_counts is not None, with_weight=m.has_weight, overwrite=overwrite, labelled=m.labelled, layout=m.layout) as w:
        for i, shard in enumerate(st.iter_shards()):
            start = m.shard_bounds[i][0]
            try:
                X = t.apply(shard.X, first_row=start, where=f"{st.path}, shard {i}")
            except ValueError as exc:
                raise InputError(str(exc)) from None
            w.write_shard(X, shard.y, shard.group, shard.weight)
        return w.commit(source=source if source is not None else dict(m.source), encoding={**m.encoding, "transform": record},
                        groups=m.groups, group_column=m.group_column)


def ingest_transformed(ingest_raw, dest: str, overwrite: bool, log1p, scale: str, source_of, fitted_on: str) -> Manifest:
    """Ingest into a temporary sibling of ``dest``, fit the transform there and write ``dest``.

    ``ingest_raw(path)`` writes the raw store at ``path`` and returns its manifest;
    ``source_of(manifest)`` gives the new store's ``source`` record; ``fitted_on`` names the
    source in the transform record. The destination's lock is held throughout
    (:func:`dpipe._locks.destination_lock`; re-entered when the caller holds it), so no other
    run removes the temporary; a kill leaves only a ``.DEST.tmp-*`` sibling, which the next
    writer of ``dest`` removes. Costs one more read and write of the store (the statistics
    need every row before the first transformed row can be written).
    """
    from ._writer import store_lock

    parent, name = os.path.split(os.path.abspath(dest))
    with store_lock(dest):
        try:
            tmp = tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=parent)
        except OSError as exc:
            raise StoreError(f"{os.path.abspath(dest)}: cannot write the store: {exc.strerror or exc}") from None
        try:
            raw = ingest_raw(os.path.join(tmp, "raw.zarr"))
            st = open_store(os.path.join(tmp, "raw.zarr"))
            return transform_store(st, dest, log1p=log1p, scale=scale, overwrite=overwrite, _source=source_of(raw), _fitted_on=fitted_on,
                                   _owner="ingest")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
