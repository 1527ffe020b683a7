"""Synthetic binary classification stores with realistic, non-Gaussian features.

:func:`make_data` writes a dataset store (Zarr or Parquet, through
:class:`~dpipe.io.ShardWriter`) whose rows come from a fixed random *model*:

Features
    Each column is one of four kinds (column order shuffled by the model):

    * ``binary`` (~25 %): Bernoulli with rates between 1 % and 50 %, obtained by
      thresholding a latent normal (so a binary column can correlate with others);
    * ``student_t`` (~15 %): Student-t with 3 degrees of freedom (infinite
      kurtosis), scaled, some with a shared latent factor added;
    * ``lognormal`` (~10 %): ``exp(mu + sigma * u)`` with ``u`` a latent normal;
    * ``gaussian`` (the rest): ``mu + scale * u``.

    The latent normal ``u`` of a column is ``c * Z[f] + sqrt(1 - c^2) * e``: a
    loading ``c`` (zero for about half of the columns) on one of a few shared
    factors ``Z``, so columns that load on the same factor are correlated (a
    Student-t column is ``scale * (c * Z[f] + t)``).
Groups
    ``n_groups`` groups of unequal sizes (Zipf-like probabilities).  A group
    shifts the latent value of two columns and the log-odds of the label, so the
    group correlates with those features and with the label.
Labels
    ``P(y = +1) = expit(b0 + sum_j w_j phi_j + interactions + gamma_group)``
    where ``phi_j`` is a nonlinear-ish transform of feature ``j`` (the binary
    value; ``sign(t) log1p(|t|)`` of a Student-t column, ``t`` unscaled; the log of a log-normal
    column; the value, or for some columns a mix of the value and its square, of
    a Gaussian column), standardised; about 60 % of the columns have a nonzero
    weight, and up to two products of columns are added.  The signal is scaled
    to a fixed standard deviation and the intercept ``b0`` is calibrated by
    bisection on a pilot sample so that, after flipping every label with
    probability ``label_noise``, the positive rate is ``positive_rate``.

Reproducibility
    ``model_seed`` fixes the model (column kinds, distributions, weights,
    intercept), ``seed`` the sampled rows: a train and a test store share their
    model when they share ``model_seed`` and differ in ``seed``.  Rows are drawn
    in fixed blocks of ``8192`` rows, block ``b`` from the generator seeded by
    ``np.random.SeedSequence(seed, spawn_key=(b,))`` (the ``b``-th child of
    ``SeedSequence(seed).spawn``), so the output depends neither on
    ``chunk_rows`` nor on ``shard_rows``, and a store of ``n`` rows is the prefix
    of a larger store with the same parameters.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from typing import Any

import numpy as np
from scipy.special import expit, ndtri

from .._progress import Progress
from .._validation import check_choice, check_int, check_number
from ..exceptions import ParameterError
from ._manifest import Manifest
from ._writer import STORE_FORMATS, ShardWriter, prepare_destination, shard_rows_for, store_lock

__all__ = ["make_data"]

_OWNER = "make_data"
_BLOCK = 8192  # rows per random-number block; fixes the output independently of chunk_rows
_PILOT_BLOCKS = 8  # pilot sample used to standardise the signal and calibrate the intercept
_SIGNAL_STD = 1.5  # standard deviation of the feature part of the log-odds
_MODEL_TAG = 0x6D6F64656C  # keeps the model's random stream apart from the rows' one

_KIND_BINARY, _KIND_T, _KIND_LOGNORMAL, _KIND_GAUSSIAN = 0, 1, 2, 3
_KIND_NAMES = ("binary", "student_t", "lognormal", "gaussian")


@dataclasses.dataclass
class _Model:
    """The fixed random model of a synthetic store (a function of model_seed)."""

    d: int
    n_factors: int
    kind: np.ndarray  # (d,) int: _KIND_*
    factor: np.ndarray  # (d,) int: latent factor of the column
    loading: np.ndarray  # (d,) float: loading on that factor
    mu: np.ndarray  # (d,) location (gaussian, lognormal)
    scale: np.ndarray  # (d,) scale (gaussian, student_t) or sigma (lognormal)
    threshold: np.ndarray  # (d,) binary: 1 iff latent > threshold
    square: np.ndarray  # (d,) weight of the (u^2 - 1)/sqrt(2) term of a gaussian column's phi
    group_prob: np.ndarray  # (n_groups,)
    group_cols: np.ndarray  # columns whose latent value the group shifts
    group_shift: np.ndarray  # (n_groups, len(group_cols))
    group_logit: np.ndarray  # (n_groups,)
    weight: np.ndarray  # (d,) weights of the standardised phi
    pairs: np.ndarray  # (p, 2) column pairs of the interaction terms
    pair_weight: np.ndarray  # (p,)
    phi_mean: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    phi_std: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    pair_mean: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    pair_std: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    signal_scale: float = 1.0
    intercept: float = 0.0
    label_noise: float = 0.0

    @property
    def n_groups(self) -> int:
        return int(self.group_prob.shape[0])

    @property
    def kind_names(self) -> list[str]:
        return [_KIND_NAMES[k] for k in self.kind]


# ---------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------
def _kind_counts(d: int) -> tuple[int, int, int, int]:
    n_bin = int(round(0.25 * d))
    n_t = int(round(0.15 * d))
    n_ln = int(round(0.10 * d))
    return n_bin, n_t, n_ln, d - n_bin - n_t - n_ln


def _build_model(d: int, n_groups: int, positive_rate: float, label_noise: float, model_seed: int) -> _Model:
    rng = np.random.default_rng(np.random.SeedSequence([_MODEL_TAG, model_seed], spawn_key=(0,)))
    n_bin, n_t, n_ln, n_gauss = _kind_counts(d)
    kind = rng.permutation(np.repeat([_KIND_BINARY, _KIND_T, _KIND_LOGNORMAL, _KIND_GAUSSIAN], [n_bin, n_t, n_ln, n_gauss]))
    n_factors = max(1, min(6, d // 8))
    factor = rng.integers(0, n_factors, d)
    # loadings: about half of the columns load on a shared factor
    loaded = rng.random(d) < np.select([kind == _KIND_GAUSSIAN, kind == _KIND_T], [0.6, 0.4], 0.5)
    loading = np.where(loaded, rng.uniform(0.35, 0.9, d) * rng.choice([-1.0, 1.0], d), 0.0)
    mu = np.where(kind == _KIND_LOGNORMAL, rng.uniform(-1.0, 1.5, d), rng.normal(0.0, 2.0, d))
    scale = np.select(
        [kind == _KIND_LOGNORMAL, kind == _KIND_T],
        [rng.uniform(0.5, 1.0, d), rng.uniform(0.5, 3.0, d)],
        np.exp(rng.normal(0.0, 0.7, d)),
    )
    rate = np.exp(rng.uniform(math.log(0.01), math.log(0.5), d))
    threshold = np.where(kind == _KIND_BINARY, ndtri(1.0 - rate), 0.0)
    square = np.where((kind == _KIND_GAUSSIAN) & (rng.random(d) < 0.25), rng.uniform(0.5, 1.0, d), 0.0)

    if n_groups:
        group_prob = (1.0 / np.arange(1, n_groups + 1)) ** 0.8 * rng.lognormal(0.0, 0.25, n_groups)
        group_prob /= group_prob.sum()
    else:
        group_prob = np.zeros(0)
    # the group shifts two columns, Gaussian ones when there are
    preferred = np.concatenate([rng.permutation(np.flatnonzero(kind == _KIND_GAUSSIAN)), rng.permutation(np.flatnonzero(kind != _KIND_GAUSSIAN))])
    group_cols = np.sort(preferred[: min(2, d)]) if n_groups else np.zeros(0, dtype=np.int64)
    group_shift = rng.normal(0.0, 0.8, (n_groups, group_cols.shape[0]))
    group_logit = rng.normal(0.0, 0.6, n_groups)

    weight = np.where(rng.random(d) < 0.6, rng.normal(0.0, 1.0, d), 0.0)
    if not weight.any():
        weight[rng.integers(0, d)] = 1.0
    continuous = np.flatnonzero(kind != _KIND_BINARY)
    n_pairs = min(2, continuous.shape[0] // 2)
    pairs = rng.permutation(continuous)[: 2 * n_pairs].reshape(n_pairs, 2)
    pair_weight = rng.normal(0.0, 0.7, n_pairs)

    model = _Model(
        d=d, n_factors=n_factors, kind=kind, factor=factor, loading=loading, mu=mu, scale=scale,
        threshold=threshold, square=square, group_prob=group_prob, group_cols=group_cols,
        group_shift=group_shift, group_logit=group_logit, weight=weight, pairs=pairs,
        pair_weight=pair_weight, label_noise=label_noise,
    )
    _calibrate(model, positive_rate, np.random.default_rng(np.random.SeedSequence([_MODEL_TAG, model_seed], spawn_key=(1,))))
    return model


@functools.lru_cache(maxsize=4)
def _cached_model(d: int, n_groups: int, positive_rate: float, label_noise: float, model_seed: int) -> _Model:
    """:func:`_build_model`, memoised: a train and a test store share the model (never mutated)."""
    return _build_model(d, n_groups, positive_rate, label_noise, model_seed)


def _calibrate(model: _Model, positive_rate: float, rng: np.random.Generator) -> None:
    """Standardise phi, scale the signal and find the intercept on a pilot sample."""
    draws = _draw(model, rng, _PILOT_BLOCKS * _BLOCK)
    latent, group = _latent(model, draws)
    phi, pair = _phi(model, latent)
    model.phi_mean, model.phi_std = phi.mean(axis=1), phi.std(axis=1)
    model.phi_std[model.phi_std == 0] = 1.0
    if pair.shape[0]:
        model.pair_mean, model.pair_std = pair.mean(axis=1), pair.std(axis=1)
        model.pair_std[model.pair_std == 0] = 1.0
    else:
        model.pair_mean, model.pair_std = np.zeros(0), np.ones(0)
    raw = _feature_signal(model, phi, pair)
    sd = float(raw.std())
    model.signal_scale = _SIGNAL_STD / sd if sd > 0 else 1.0
    logit = model.signal_scale * raw
    if model.n_groups:
        logit = logit + model.group_logit[group]
    # labels are flipped with probability eta afterwards: aim the clean rate at r0
    eta = model.label_noise
    target = (positive_rate - eta) / (1.0 - 2.0 * eta)
    lo, hi = -50.0, 50.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if expit(mid + logit).mean() < target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    model.intercept = 0.5 * (lo + hi)


# ---------------------------------------------------------------------------
# rows
# ---------------------------------------------------------------------------
def _n_normal(model: _Model) -> int:
    return int(np.count_nonzero(model.kind != _KIND_T))


def _draw(model: _Model, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """All random numbers of ``n`` rows, in a fixed order; per-column arrays are (columns, n)."""
    return {
        "group": rng.random(n),
        "factors": rng.standard_normal((model.n_factors, n)),
        "normal": rng.standard_normal((_n_normal(model), n)),
        "t": rng.standard_t(3.0, (model.d - _n_normal(model), n)),
        "label": rng.random(n),
        "flip": rng.random(n),
    }


def _latent(model: _Model, draws: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-column latent values (d, n) (column-major, rows of it contiguous) and group codes (n,)."""
    n = draws["group"].shape[0]
    is_t = model.kind == _KIND_T
    c = model.loading
    latent = np.empty((model.d, n))
    latent[~is_t] = draws["normal"] * np.sqrt(1.0 - c[~is_t] ** 2)[:, None]
    latent[is_t] = draws["t"]
    latent += draws["factors"][model.factor] * c[:, None]
    if model.n_groups:
        cdf = np.cumsum(model.group_prob)
        group = np.minimum(np.searchsorted(cdf, draws["group"], side="right"), model.n_groups - 1)
        latent[model.group_cols] += model.group_shift[group].T
    else:
        group = np.zeros(n, dtype=np.int64)
    return latent, group


def _features(model: _Model, latent: np.ndarray) -> np.ndarray:
    """Observed features (n, d) float32, C-ordered, from the latent values (d, n)."""
    k = model.kind
    Xt = np.empty(latent.shape, dtype=np.float32)
    for kind in (_KIND_BINARY, _KIND_T, _KIND_LOGNORMAL, _KIND_GAUSSIAN):
        cols = np.flatnonzero(k == kind)
        if not cols.size:
            continue
        u = latent[cols]
        if kind == _KIND_BINARY:
            Xt[cols] = u > model.threshold[cols, None]
        elif kind == _KIND_T:
            Xt[cols] = u * model.scale[cols, None]
        elif kind == _KIND_LOGNORMAL:
            Xt[cols] = np.exp(model.mu[cols, None] + model.scale[cols, None] * u)
        else:
            Xt[cols] = model.mu[cols, None] + model.scale[cols, None] * u
    return np.ascontiguousarray(Xt.T)


def _phi(model: _Model, latent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Transformed features (d, n) and interaction terms (p, n) entering the log-odds."""
    k = model.kind
    phi = latent.copy()  # gaussian and lognormal: the latent value (log of a lognormal)
    b = k == _KIND_BINARY
    phi[b] = latent[b] > model.threshold[b, None]
    t = k == _KIND_T
    phi[t] = np.sign(latent[t]) * np.log1p(np.abs(latent[t]))
    sq = np.flatnonzero(model.square)
    if sq.size:
        u = latent[sq]
        phi[sq] = u + model.square[sq, None] * (u * u - 1.0) / math.sqrt(2.0)
    if model.pairs.shape[0]:
        pair = phi[model.pairs[:, 0]] * phi[model.pairs[:, 1]]
    else:
        pair = np.zeros((0, latent.shape[1]))
    return phi, pair


def _feature_signal(model: _Model, phi: np.ndarray, pair: np.ndarray) -> np.ndarray:
    # sum_j w_j (phi_j - m_j) / s_j, without a standardised copy of phi
    w = model.weight / model.phi_std
    s = w @ phi - float(model.phi_mean @ w)
    if pair.shape[0]:
        v = model.pair_weight / model.pair_std
        s += v @ pair - float(model.pair_mean @ v)
    return s


def _rows(model: _Model, seed: int, first_block: int, n_blocks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features, labels and groups of blocks ``first_block .. first_block + n_blocks``."""
    parts = [_draw(model, np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(b,))), _BLOCK) for b in range(first_block, first_block + n_blocks)]
    draws = {key: np.concatenate([p[key] for p in parts], axis=-1) for key in parts[0]}
    del parts
    latent, group = _latent(model, draws)
    for key in ("normal", "t", "factors"):
        del draws[key]
    X = _features(model, latent)
    phi, pair = _phi(model, latent)
    del latent
    logit = model.intercept + model.signal_scale * _feature_signal(model, phi, pair)
    del phi, pair
    if model.n_groups:
        logit += model.group_logit[group]
    positive = draws["label"] < expit(logit)
    positive ^= draws["flip"] < model.label_noise
    y = np.where(positive, 1, -1).astype(np.int8)
    return X, y, group.astype(np.int16)


# ---------------------------------------------------------------------------
# public entry
# ---------------------------------------------------------------------------
def make_data(
    dest: str | os.PathLike,
    *,
    rows: int,
    features: int = 40,
    positive_rate: float = 0.2,
    seed: int = 0,
    model_seed: int = 0,
    label_noise: float = 0.02,
    n_groups: int = 2,
    shard_rows: int | None = None,
    format: str = "zarr",
    overwrite: bool = False,
    chunk_rows: int = 65536,
) -> Manifest:
    """Write a synthetic binary classification store.

    See the module documentation for the generative model.

    Parameters
    ----------
    dest : str or path-like
        Directory of the store to create.
    rows : int
        Number of rows, at least 1.
    features : int, default=40
        Number of feature columns ``x0 .. x{features-1}``.
    positive_rate : float, default=0.2
        Expected fraction of +1 labels, after label noise.  Must lie strictly
        between ``label_noise`` and ``1 - label_noise``.
    seed : int, default=0
        Seed of the sampled rows.
    model_seed : int, default=0
        Seed of the model (feature distributions, weights, intercept); stores
        with the same ``model_seed`` (and ``features``, ``positive_rate``,
        ``label_noise``, ``n_groups``) share one model.
    label_noise : float, default=0.02
        Probability that a label is flipped, in ``[0, 0.5)``.
    n_groups : int, default=2
        Number of groups ``g0 ..`` in the ``group`` column (0: no group column).
    shard_rows : int, optional
        Rows per shard; default from the ``dpipe.shard-bytes`` and ``dpipe.min-shards``
        settings.
    format : {"zarr", "parquet"}, default="zarr"
        Storage format.
    overwrite : bool, default=False
        Replace an existing store at ``dest``.
    chunk_rows : int, default=65536
        Rows generated per step (rounded up to whole blocks of 8192 rows); bounds
        the memory used, about ``40 * features`` bytes per row.  The output does
        not depend on it.

    Returns
    -------
    Manifest
        The manifest of the new store; ``source`` is ``{"format": "synthetic",
        "options": {...}}`` with every parameter but ``dest`` and ``overwrite``.

    Raises
    ------
    ParameterError
        A parameter is invalid.
    StoreError
        ``dest`` exists and ``overwrite`` is false, or its parent is missing; or an OS
        error while writing (a full disk), naming ``dest``.
    OutputError
        ``dest`` lies inside a dpipe store or a dpipe model registry.
    DestinationBusyError
        Another process is writing ``dest`` (the lock is held from the check to the rename).
    """
    dest = os.fspath(dest)
    rows = check_int(rows, "rows", _OWNER, low=1)
    features = check_int(features, "features", _OWNER, low=1)
    positive_rate = check_number(positive_rate, "positive_rate", _OWNER, 0.0, 1.0, closed="neither")
    label_noise = check_number(label_noise, "label_noise", _OWNER, 0.0, 0.5, closed="left")
    if not label_noise < positive_rate < 1.0 - label_noise:
        raise ParameterError(
            f"The 'positive_rate' parameter of {_OWNER} must lie strictly between label_noise and "
            f"1 - label_noise ({label_noise!r}, {1.0 - label_noise!r}), since flipped labels alone give "
            f"that rate. Got {positive_rate!r} instead."
        )
    seed = check_int(seed, "seed", _OWNER, low=0)
    model_seed = check_int(model_seed, "model_seed", _OWNER, low=0)
    n_groups = check_int(n_groups, "n_groups", _OWNER, low=0, high=32767)
    if shard_rows is None:
        shard_rows = shard_rows_for(rows, features)
    shard_rows = check_int(shard_rows, "shard_rows", _OWNER, low=1)
    format = check_choice(format, "format", _OWNER, STORE_FORMATS)
    chunk_rows = check_int(chunk_rows, "chunk_rows", _OWNER, low=1)
    if not isinstance(overwrite, (bool, np.bool_)):
        raise ParameterError(f"The 'overwrite' parameter of {_OWNER} must be a bool. Got {overwrite!r} instead.")
    with store_lock(dest):  # one writer of dest, from the check to the rename (ShardWriter re-enters it)
        prepare_destination(dest, bool(overwrite))

        model = _cached_model(features, n_groups, positive_rate, label_noise, model_seed)
        options: dict[str, Any] = {
            "rows": rows,
            "features": features,
            "positive_rate": positive_rate,
            "seed": seed,
            "model_seed": model_seed,
            "label_noise": label_noise,
            "n_groups": n_groups,
            "shard_rows": shard_rows,
            "format": format,
            "chunk_rows": chunk_rows,
        }
        names = [f"x{j}" for j in range(features)]
        step = max(1, -(-chunk_rows // _BLOCK))
        n_blocks = -(-rows // _BLOCK)
        with ShardWriter(dest, features, names, shard_rows, format=format, with_group=n_groups > 0, overwrite=bool(overwrite)) as writer, \
                Progress(f"make-data {dest}", total_rows=rows, bytes_label="of features") as progress:
            for b in range(0, n_blocks, step):
                nb = min(step, n_blocks - b)
                X, y, group = _rows(model, seed, b, nb)
                keep = min(X.shape[0], rows - b * _BLOCK)
                writer.append(X[:keep], y[:keep], group[:keep] if n_groups else None)
                del X, y, group
                progress.advance(rows=keep, nbytes=4 * keep * features)
            return writer.commit(
                groups=[f"g{i}" for i in range(n_groups)] if n_groups else None,
                group_column="group" if n_groups else None,
                source={"format": "synthetic", "options": options},
                encoding={"kind": "synthetic"},
            )
