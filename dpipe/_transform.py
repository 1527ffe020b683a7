"""A fitted feature transform: ``log1p`` on some columns, then an affine scale on some columns.

A store ingested with ``log1p=`` / ``scale=`` (or split with them) holds transformed
features; the manifest's ``encoding["transform"]`` records the fitted transform, a
``like=`` ingest re-applies it, and a model trained on the store carries it in its own
``encoding`` so that raw rows are scored as the store's rows are. NumPy only: the model
imports it.

Every feature ``j`` becomes::

    t_j(x) = (log1p(x) if j in log1p else x)          # t in float64 from the float32 value
    z_j    = (t_j(x) - offset_j) * factor_j           # features listed in ``features``
    stored = float32(z_j)

One rounding (to float32, as the store keeps it) at the end, the same arithmetic for a
shard, a row or a record, so every path gives bit-identical features.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["FeatureTransform", "SCALES"]

#: ``scale=`` values: min-max to [0, 1] on the fitting data, zero mean / unit variance, division by the largest |value|
#: (keeps zeros: the scale of sparse stores), or none
SCALES = ("minmax", "standard", "maxabs", "none")


@dataclass(frozen=True)
class FeatureTransform:
    """``log1p`` on the features ``log1p``, then ``(t - offset) * factor`` on the features ``features``.

    Attributes
    ----------
    n_features : int
    log1p : tuple of int
        Features replaced by ``log1p(x)`` (their values must be >= 0).
    scale : {"minmax", "standard", "maxabs", "none"}
        How ``offset`` and ``factor`` were fitted.
    features : tuple of int
        Features the affine map applies to (one-hot indicators are left out).
    offset, factor : tuple of float
        One per entry of ``features``.
    feature_names : tuple of str
        Names for messages.
    """

    n_features: int
    log1p: tuple[int, ...]
    scale: str
    features: tuple[int, ...]
    offset: tuple[float, ...]
    factor: tuple[float, ...]
    feature_names: tuple[str, ...]

    @property
    def touched(self) -> np.ndarray:
        """Sorted features the transform changes (log1p or scaled)."""
        return np.union1d(np.asarray(self.log1p, dtype=np.int64), np.asarray(self.features, dtype=np.int64))

    def apply(self, X: np.ndarray, *, out: np.ndarray | None = None, first_row: int = 0, where: str = "") -> np.ndarray:
        """Transformed features, float32 of shape (n, n_features).

        Parameters
        ----------
        X : array of shape (n, n_features)
            Raw features; rounded to float32 first, as a store keeps them.
        out : float32 array, optional
            Written in place (may be ``X`` itself when it is float32).
        first_row, where : int, str
            Name the row of a negative ``log1p`` value in the error: ``where`` (a store, a
            shard), row ``first_row + i``.

        Raises
        ------
        ValueError
            A ``log1p`` feature is negative (or not finite), naming the feature and the row.
        """
        if not isinstance(X, np.ndarray) and getattr(X, "format", None) == "csr":
            return self._apply_csr(X, first_row, where)
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"{where or 'transform'}: X has shape {X.shape}; the transform expects (n, {self.n_features})")
        if out is None:
            out = np.array(X, dtype=np.float32, order="C")
        elif out is not X:
            out[...] = X
        cols = self.touched
        if cols.size == 0 or out.shape[0] == 0:
            return out
        T = out[:, cols].astype(np.float64)
        if self.log1p:
            pos = np.searchsorted(cols, np.asarray(self.log1p, dtype=np.int64))
            L = T[:, pos]
            bad = ~(L >= 0)
            if bad.any():
                i, k = np.argwhere(bad)[0]
                j = int(cols[pos[k]])
                raise ValueError(f"{where + ': ' if where else ''}feature {self.feature_names[j]!r} is {float(L[i, k])!r} in row {first_row + int(i)}; "
                                 "its transform takes log1p, which needs values >= 0")
            T[:, pos] = np.log1p(L)
        if self.features:
            pos = np.searchsorted(cols, np.asarray(self.features, dtype=np.int64))
            T[:, pos] -= np.asarray(self.offset)
            T[:, pos] *= np.asarray(self.factor)
        out[:, cols] = T  # the one rounding to float32
        return out

    @property
    def keeps_zeros(self) -> bool:
        """Whether a zero stays zero (``log1p`` and a scale without offset): the transform of a sparse row stays sparse."""
        return not any(self.offset)

    def _apply_csr(self, X: Any, first_row: int, where: str) -> Any:
        """:meth:`apply` of a CSR block (a scipy.sparse CSR array, float32): the stored values, the same arithmetic as a dense row's."""
        if X.shape[1] != self.n_features:
            raise ValueError(f"{where or 'transform'}: X has shape {X.shape}; the transform expects (n, {self.n_features})")
        if not self.keeps_zeros:
            raise ValueError(f"{where or 'transform'}: a {self.scale} transform shifts zeros; it cannot keep sparse rows sparse")
        out = X.astype(np.float32, copy=True)
        cols = np.asarray(out.indices, dtype=np.int64)
        t = out.data.astype(np.float64)
        if self.log1p:
            logged = np.zeros(self.n_features, dtype=bool)
            logged[list(self.log1p)] = True
            hit = logged[cols]
            bad = hit & ~(t >= 0)
            if bad.any():
                p = int(np.argmax(bad))
                row = int(np.searchsorted(out.indptr, p, side="right") - 1)
                raise ValueError(f"{where + ': ' if where else ''}feature {self.feature_names[cols[p]]!r} is {float(t[p])!r} in row {first_row + row}; "
                                 "its transform takes log1p, which needs values >= 0")
            t[hit] = np.log1p(t[hit])
        if self.features:
            factor = np.ones(self.n_features)
            factor[list(self.features)] = self.factor
            t *= factor[cols]
        out.data = t.astype(np.float32)  # the one rounding to float32
        return out

    def to_dict(self) -> dict[str, Any]:
        """The manifest / model form (``encoding["transform"]``), feature names beside the indices."""
        return {
            "n_features": self.n_features,
            "log1p": [self.feature_names[j] for j in self.log1p],
            "scale": self.scale,
            "features": [self.feature_names[j] for j in self.features],
            "offset": list(self.offset),
            "factor": list(self.factor),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], feature_names: Sequence[str], where: str = "transform") -> FeatureTransform:
        """Inverse of :meth:`to_dict` for a store or model with ``feature_names``.

        Raises
        ------
        ValueError
            One line naming ``where`` and the field that does not fit the features.
        """
        names = tuple(str(n) for n in feature_names)
        index = {n: j for j, n in enumerate(names)}
        try:
            if int(d["n_features"]) != len(names):
                raise ValueError(f"{where}: transform is for {d['n_features']} features, there are {len(names)}")
            missing = [n for n in [*d["log1p"], *d["features"]] if n not in index]
            if missing:
                raise ValueError(f"{where}: transform names feature(s) {missing[:5]} that do not exist")
            if not (len(d["features"]) == len(d["offset"]) == len(d["factor"])):
                raise ValueError(f"{where}: transform has {len(d['features'])} features, {len(d['offset'])} offsets and {len(d['factor'])} factors")
            scale = str(d["scale"])
            if scale not in SCALES:
                raise ValueError(f"{where}: transform scale {scale!r} is not one of {SCALES}")
            offset = tuple(float(v) for v in d["offset"])
            factor = tuple(float(v) for v in d["factor"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{where}: malformed transform ({type(exc).__name__}: {exc})") from None
        if not (np.all(np.isfinite(offset)) and np.all(np.isfinite(factor))):
            raise ValueError(f"{where}: transform offsets and factors must be finite")
        return cls(len(names), tuple(sorted(index[n] for n in d["log1p"])), scale, tuple(index[n] for n in d["features"]), offset, factor, names)
