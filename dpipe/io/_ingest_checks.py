"""Ingest's first step: its options checked once into an :class:`IngestPlan`.

The choices come from :class:`~dpipe.io.IngestOptions`' declaration (each option's ``choices``),
checked in one loop; what the declaration cannot say (types, ranges, options that exclude
each other, the ``like`` store's transform) is checked here, each once. Which options apply to
which source format is known only once the source is detected: :mod:`dpipe.io._ingest`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

from .._config import get_setting
from .._options import options_of
from .._transform import FeatureTransform
from .._validation import check_choice, check_int
from ..exceptions import InputError, ParameterError
from ._hashing import check_hash_features
from ._ingest_jobs import OWNER
from ._ingest_options import IngestOptions
from ._labels import LabelRule
from ._manifest import Manifest
from ._store import open_store
from ._stored_transform import check_log1p, stored_transform
from ._svmlight import MAX_INDEX

__all__ = ["IngestPlan", "plan_ingest"]


@dataclasses.dataclass(frozen=True)
class IngestPlan:
    """What an ingest does, its options checked.

    Attributes
    ----------
    paths : list of str
        The sources, absolute (each exists).
    single : bool
        ``src`` was one path, not a list (the manifest's ``source`` then holds one path).
    dest : str
        The store to write, absolute.
    options : IngestOptions
        Every option checked and normalized: tristates, counts and columns checked, ``read_rows``
        resolved from ``dpipe.read-rows``, ``log1p`` a list (or None, ``"auto"``, ``"all"``),
        ``hash_features`` an int, and ``layout="auto"`` made ``"dense"`` for a transform that
        moves zeros.
    rule : LabelRule or None
        The label rule of ``positive`` / ``negative`` (None: neither given).
    like : Manifest or None
        The manifest of the ``like`` store.
    transform : FeatureTransform or None
        The ``like`` store's transform, re-applied to this source.
    """

    paths: list[str]
    single: bool
    dest: str
    options: IngestOptions
    rule: LabelRule | None
    like: Manifest | None
    transform: FeatureTransform | None

    @property
    def fits_transform(self) -> bool:
        """Whether a transform is fitted on this source (``log1p`` or ``scale``): the raw store is written first."""
        return self.options.log1p is not None or self.options.scale != "none"

    @property
    def read_rows(self) -> int:
        """``read_rows``, resolved (``dpipe.read-rows`` when not given)."""
        assert isinstance(self.options.read_rows, int)  # plan_ingest resolves it
        return self.options.read_rows

    @property
    def hash_features(self) -> int | None:
        """``hash_features`` as a number of slots (``"2^k"`` resolved)."""
        assert not isinstance(self.options.hash_features, str)  # plan_ingest resolves it
        return self.options.hash_features

    @property
    def where(self) -> str:
        """The sources, for messages."""
        return ", ".join(self.paths)


def plan_ingest(src: Any, dest: Any, options: IngestOptions) -> IngestPlan:
    """Check ``src``, ``dest`` and ``options`` (the keywords of :func:`dpipe.io.ingest`) and open the ``like`` store.

    Raises
    ------
    ParameterError
        An invalid option, or two that exclude each other; one line naming them.
    InputError
        A source does not exist.
    """
    paths = _check_src(src)
    if not isinstance(dest, (str, os.PathLike)):
        raise ParameterError(f"The 'dest' parameter of {OWNER} must be a path. Got {dest!r} instead.")
    _check_declared_choices(options)
    o = options.replace(**_checked_values(options))
    rule = LabelRule.from_args(o.positive, o.negative, OWNER)
    like = _open_like(o.like)
    o = o.replace(log1p=check_log1p(o.log1p, OWNER), hash_features=check_hash_features(o.hash_features, OWNER))
    _check_hashing(o, like)
    transform = _like_transform(o, like)
    shifting = o.scale == "standard" or (transform is not None and not transform.keeps_zeros)
    if o.layout == "sparse" and shifting:  # minmax: fitted first, then refused unless every minimum is 0 (check_sparse_transform)
        raise ParameterError(f"The 'layout' parameter of {OWNER} is 'sparse', but scale={o.scale if transform is None else transform.scale!r} would "
                             "shift every zero; use scale='maxabs' (it keeps zeros, as log1p does) or layout='dense'.")
    if o.layout == "auto" and (shifting or o.scale == "minmax"):
        o = o.replace(layout="dense")
    return IngestPlan(paths, isinstance(src, (str, os.PathLike)), os.path.abspath(os.fspath(dest)), o, rule, like, transform)


def _check_declared_choices(options: IngestOptions) -> None:
    """Every option with declared choices holds one of them (None where None is its default)."""
    for name, (f, opt) in options_of(IngestOptions).items():
        value = getattr(options, name)
        if opt.choices and not (value is None and f.default is None):
            check_choice(value, name, OWNER, opt.choices)


def _checked_values(o: IngestOptions) -> dict[str, Any]:
    """The options whose type or range the declaration does not check, checked (and normalized)."""
    out: dict[str, Any] = {"zero_based": _check_tristate(o.zero_based, "zero_based"), "header": _check_tristate(o.header, "header"),
                           "skip_rows": check_int(o.skip_rows, "skip_rows", OWNER, 0)}
    if o.n_features is not None:
        out["n_features"] = check_int(o.n_features, "n_features", OWNER, 1, MAX_INDEX + 1)
    if o.shard_rows is not None:
        out["shard_rows"] = check_int(o.shard_rows, "shard_rows", OWNER, 1)
    out["read_rows"] = check_int(get_setting("read-rows", o.read_rows), "read_rows", OWNER, 1)
    for name in ("overwrite", "unlabeled"):
        if not isinstance(getattr(o, name), bool):
            raise ParameterError(f"The {name!r} parameter of {OWNER} must be a bool. Got {getattr(o, name)!r} instead.")
    if o.unlabeled:
        for name in ("label", "positive", "negative"):
            if getattr(o, name) is not None:
                raise ParameterError(f"The {name!r} parameter of {OWNER} names labels; unlabeled=True says the source has none.")
    for name in ("label", "group_col", "weight_col"):
        out[name] = _check_column_spec(getattr(o, name), name)
    return out


def _check_tristate(value: Any, name: str) -> bool | str:
    if value is True or value is False or value == "auto":
        return value
    raise ParameterError(f"The {name!r} parameter of {OWNER} must be True, False or 'auto'. Got {value!r} instead.")


def _check_column_spec(value: Any, name: str) -> str | int | None:
    if value is None or (isinstance(value, str) and value != ""):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    raise ParameterError(f"The {name!r} parameter of {OWNER} must be a column name (str), a column index (int) or None. Got {value!r} instead.")


def _check_src(src: Any) -> list[str]:
    items = [src] if isinstance(src, (str, os.PathLike)) else src
    if not isinstance(items, (list, tuple)) or not items or not all(isinstance(p, (str, os.PathLike)) for p in items):
        raise ParameterError(f"The 'src' parameter of {OWNER} must be a path or a non-empty list of paths. Got {src!r} instead.")
    paths = [os.path.abspath(os.fspath(p)) for p in items]
    for p in paths:
        if not os.path.exists(p):
            raise InputError("no such file or directory", path=p)
    return paths


def _open_like(like: Any) -> Manifest | None:
    if like is None:
        return None
    if not isinstance(like, (str, os.PathLike)):
        raise ParameterError(f"The 'like' parameter of {OWNER} must be the path of a store. Got {like!r} instead.")
    m = open_store(like).manifest
    if not m.encoding or m.encoding.get("kind") not in ("svmlight", "tabular"):
        raise ParameterError(f"The 'like' parameter of {OWNER} names {os.fspath(like)}, whose manifest has no ingest encoding (it was not written by ingest).")
    return m


def _check_hashing(o: IngestOptions, like: Manifest | None) -> None:
    """``hash_features`` writes a sparse store of nameless features from a training source."""
    if o.hash_features is None:
        return
    if like is not None:
        raise ParameterError(f"The 'hash_features' parameter of {OWNER} hashes a training source; a like= store reuses its store's hashing "
                             f"({os.fspath(o.like or '')}): drop hash_features.")
    if o.layout == "dense":
        raise ParameterError(f"The 'hash_features' parameter of {OWNER} writes a sparse store (one value a column in {o.hash_features} slots); "
                             "drop layout='dense'.")
    if o.log1p is not None:
        raise ParameterError(f"The 'log1p' parameter of {OWNER} names features, and hashed features have no names of their own: drop log1p "
                             "or hash_features (scale='maxabs' applies to hashed features).")


def _like_transform(o: IngestOptions, like: Manifest | None) -> FeatureTransform | None:
    """The ``like`` store's transform, re-applied to this source; a transform fitted here is refused with a ``like`` store."""
    if like is None:
        return None
    has = like.encoding.get("transform") is not None
    if o.log1p is not None or o.scale != "none":
        raise ParameterError(f"The 'log1p' and 'scale' parameters of {OWNER} fit a transform on this source, but like= stores must share the "
                             f"training store's features: {os.fspath(o.like or '')} {'has a transform, which is re-applied' if has else 'has none'}; "
                             "drop log1p= and scale= (a transform is fitted on the training store and re-applied by like=).")
    return stored_transform(like, os.fspath(o.like or "")) if has else None
