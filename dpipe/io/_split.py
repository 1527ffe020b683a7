"""Split a store into train and test stores, streaming shard by shard (with a transform fitted on the train part)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._transform import SCALES
from .._validation import check_choice, check_int, check_number
from ..exceptions import InputError, ParameterError
from ..reduce._block import LAYOUTS, take_rows
from ._fit_transform import fit_on_store
from ._manifest import Manifest
from ._store import Store, open_store
from ._stored_transform import check_log1p, stored_transform
from ._writer import ShardWriter, prepare_destination, shard_rows_for, store_lock

__all__ = ["split_store", "SPLIT_METHODS"]

OWNER = "split_store"
#: ``method=`` values of :func:`split_store`
SPLIT_METHODS = ("permutation", "bernoulli")
#: rows per random-number block of the ``bernoulli`` method (row r uses block r // SPLIT_BLOCK)
SPLIT_BLOCK = 65536


def _uniforms(seed: int, start: int, n: int) -> np.ndarray:
    """Uniform draws for global rows ``start .. start + n``, whatever the shard boundaries."""
    if n == 0:
        return np.zeros(0)
    first, last = start // SPLIT_BLOCK, (start + n - 1) // SPLIT_BLOCK
    draws = np.concatenate([np.random.default_rng([seed, b]).random(SPLIT_BLOCK) for b in range(first, last + 1)])
    offset = start - first * SPLIT_BLOCK
    return draws[offset:offset + n]


def train_rows(n: int, train_fraction: float, seed: int) -> np.ndarray:
    """The ``permutation`` method's training rows, sorted: ``RandomState(seed).permutation(n)[:int(train_fraction * n)]``."""
    k = int(train_fraction * n)
    return np.sort(np.random.RandomState(seed).permutation(n)[:k])


def split_store(
    store: str | os.PathLike | Store,
    train_dest: str | os.PathLike,
    test_dest: str | os.PathLike,
    *,
    train_fraction: float = 0.75,
    seed: int = 0,
    method: str = "permutation",
    log1p: str | Sequence[str | int] | None = None,
    scale: str = "none",
    overwrite: bool = False,
) -> tuple[Manifest, Manifest]:
    """Split the rows of ``store`` into a training and a test store of the same format.

    Parameters
    ----------
    store : path or Store
    train_dest, test_dest : path
        The two new stores.
    train_fraction : float
        Share of the rows that go to ``train_dest``.
    seed : int
    method : {"permutation", "bernoulli"}
        ``permutation``: the rows ``np.random.RandomState(seed).permutation(n)[:k]``,
        ``k = int(train_fraction * n)``, are the training part, the rest the test part (the
        protocol of SVM-perf's kdd99 tasks: ``train_fraction=0.8, seed=0``); the driver holds
        the permutation (9 bytes a row). ``bernoulli``: every row goes to the training part
        with probability ``train_fraction``, independently (generators seeded by ``seed`` and
        fixed blocks of ``SPLIT_BLOCK`` rows), in O(shard) memory. Either way the split does not
        depend on how the store is sharded, and rows keep the source's order within each part.
    log1p, scale
        A feature transform (see :func:`dpipe.ingest`) fitted on the training part only and
        applied to both parts; kept in both manifests. Costs one more read of ``store``.
    overwrite : bool
        Replace existing destinations (only dpipe stores). Both destinations are checked and
        locked (:func:`dpipe._locks.destination_lock`) before the first pass over ``store``.

    Returns
    -------
    (train manifest, test manifest)
    """
    train_fraction = check_number(train_fraction, "train_fraction", OWNER, 0.0, 1.0)
    seed = check_int(seed, "seed", OWNER, 0, 2**32 - 1)
    check_choice(method, "method", OWNER, SPLIT_METHODS)
    log1p = check_log1p(log1p, OWNER)
    check_choice(scale, "scale", OWNER, SCALES)
    st = store if isinstance(store, Store) else open_store(store)
    m = st.manifest
    paths = [os.path.realpath(p) for p in (st.path, os.fspath(train_dest), os.fspath(test_dest))]
    if len(set(paths)) < 3:
        what = "the training and test stores are one path" if paths[1] == paths[2] else "a destination is the source store itself"
        raise ParameterError(f"{OWNER}: {what} ({paths[1] if paths[1] == paths[2] else st.path}); give three different paths")
    with contextlib.ExitStack() as held:  # one writer of each destination, from the checks before the first pass to the renames
        for dest in (train_dest, test_dest):
            held.enter_context(store_lock(dest))
            prepare_destination(os.fspath(dest), overwrite)
        if method == "permutation":
            in_train = np.zeros(m.n_rows, dtype=bool)
            in_train[train_rows(m.n_rows, train_fraction, seed)] = True

            def train_mask(start: int, n: int) -> np.ndarray:
                return in_train[start:start + n]
            n_train = int(in_train.sum())
            sizes = (n_train, m.n_rows - n_train)
        else:
            def train_mask(start: int, n: int) -> np.ndarray:
                return _uniforms(seed, start, n) < train_fraction
            # shard sizes from the expected part sizes plus six standard deviations (no stray tail shard)
            slack = 6.0 * (m.n_rows * train_fraction * (1.0 - train_fraction)) ** 0.5 + 1.0
            sizes = (int(train_fraction * m.n_rows + slack), int((1.0 - train_fraction) * m.n_rows + slack))

        transform, encoding = None, m.encoding
        if log1p is not None or scale != "none":
            if stored_transform(m, st.path) is not None:
                raise ParameterError(f"{st.path}: already transformed (its manifest has encoding['transform']); split the raw store")
            transform, record = fit_on_store(st, log1p=log1p, scale=scale, owner=OWNER, rows=train_mask, where=f"{st.path} (training part)",
                                             fitted_on={"path": os.path.abspath(os.fspath(train_dest)), "split_of": st.path})
            encoding = {**m.encoding, "transform": record}

        kw: dict[str, Any] = dict(n_features=m.n_features, feature_names=m.feature_names, format=m.format, with_group=m.groups is not None,
                  with_weight=m.has_weight, overwrite=overwrite, labelled=m.labelled, layout=m.layout)
        balance = method == "permutation"  # exact part sizes: equal shards
        per_row = m.nnz / max(1, m.n_rows) if LAYOUTS[m.layout].block.sparse else None
        rows = [shard_rows_for(max(1, min(m.n_rows, s)), m.n_features, balance=balance, nnz_per_row=per_row) for s in sizes]
        with ShardWriter(os.fspath(train_dest), shard_rows=rows[0], **kw) as tr, ShardWriter(os.fspath(test_dest), shard_rows=rows[1], **kw) as te:
            start = 0
            for i, shard in enumerate(st.iter_shards()):
                to_train = train_mask(start, shard.n_rows)
                X = shard.X
                if transform is not None:
                    try:
                        X = transform.apply(X, first_row=start, where=f"{st.path}, shard {i}")
                    except ValueError as exc:
                        raise InputError(f"{exc} (a row of the store, counted from 0; the transform was fitted on the training part)") from None
                for writer, mask in ((tr, to_train), (te, ~to_train)):
                    writer.append(take_rows(X, mask), shard.y[mask], group=None if shard.group is None else shard.group[mask],
                                  weight=None if shard.weight is None else shard.weight[mask])
                start += shard.n_rows
            fields = dict(groups=m.groups, group_column=m.group_column, encoding=encoding)
            src = dict(m.source, split={"of": st.path, "train_fraction": train_fraction, "seed": seed, "method": method, "log1p": log1p, "scale": scale})
            return (tr.commit(source=dict(src, part="train"), **fields), te.commit(source=dict(src, part="test"), **fields))
