"""Write transformed stores: :func:`transform_store` copies a store with its features transformed (fitted on it, or a
``like`` store's transform), and :func:`ingest_transformed` is ingest's way to a transformed store (the raw store in a
temporary sibling, the transform fitted there, the destination written)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from typing import Any

from .._transform import FeatureTransform
from .._wide import same_names
from ..exceptions import InputError, ParameterError, StoreError
from ._fit_transform import fit_on_store
from ._manifest import Manifest
from ._store import Store, open_store
from ._stored_transform import check_log1p, check_scale, check_sparse_transform, stored_transform

__all__ = ["transform_store", "ingest_transformed"]


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
    scale = check_scale(scale, owner)
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
