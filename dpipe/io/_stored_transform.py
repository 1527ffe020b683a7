"""The transform a store carries, and the checks a store's features pass against it.

:func:`stored_transform` reads the fitted transform of a manifest (``encoding["transform"]``);
:func:`check_same_features` refuses a store whose features are not a training store's (or a
model's): other names, or another transform; the sparse checks keep a CSR store's zeros;
:func:`check_finite` refuses a non-finite value before a transform is fitted on it. Fitting is
:mod:`dpipe.io._fit_transform`'s, writing a transformed store :mod:`dpipe.io._transform_store`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._transform import SCALES, FeatureTransform
from .._wide import same_names
from ..exceptions import InputError, ParameterError, StoreError
from ..reduce._block import first_nonfinite, value_at
from ._manifest import Manifest
from ._store import Store

__all__ = ["check_log1p", "check_scale", "stored_transform", "check_same_features", "indicator_features", "check_sparse_scale",
           "check_sparse_transform", "check_finite", "describe"]


def check_log1p(value: Any, owner: str) -> str | list[str | int] | None:
    """``None``, ``"auto"``, ``"all"`` or a list of feature names / indices (a comma-separated string is split)."""
    if value is None or value in ("auto", "all"):
        return value
    if isinstance(value, str):
        value = [v for v in value.split(",") if v != ""]
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        return list(value)
    raise ParameterError(f"The 'log1p' parameter of {owner} must be 'auto', 'all' or a non-empty list of feature names or indices. Got {value!r} instead.")


def check_scale(scale: Any, owner: str) -> str:
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


def describe(t: FeatureTransform) -> str:
    """One line: which features are logged and how they are scaled."""
    names = [t.feature_names[j] for j in t.log1p]
    shown = ", ".join(names[:8]) + (f", ... ({len(names)} in all)" if len(names) > 8 else "")
    return f"log1p on {len(names)} feature(s){': ' + shown if names else ''}; scale {t.scale} on {len(t.features)} feature(s)"
