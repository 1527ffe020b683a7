"""Split a store into train and test stores, streaming shard by shard."""

from __future__ import annotations

import os

import numpy as np

from .._validation import check_number
from ._manifest import Manifest
from ._store import Store, open_store
from ._writer import ShardWriter, shard_rows_for

__all__ = ["split_store"]


#: rows per random-number block of :func:`split_store` (row r uses block r // SPLIT_BLOCK)
SPLIT_BLOCK = 65536


def _uniforms(seed: int, start: int, n: int) -> np.ndarray:
    """Uniform draws for global rows ``start .. start + n``, whatever the shard boundaries."""
    if n == 0:
        return np.zeros(0)
    first, last = start // SPLIT_BLOCK, (start + n - 1) // SPLIT_BLOCK
    draws = np.concatenate([np.random.default_rng([seed, b]).random(SPLIT_BLOCK) for b in range(first, last + 1)])
    offset = start - first * SPLIT_BLOCK
    return draws[offset:offset + n]


def split_store(
    store: str | os.PathLike | Store,
    train_dest: str,
    test_dest: str,
    *,
    test_fraction: float = 0.25,
    seed: int = 0,
    overwrite: bool = False,
) -> tuple[Manifest, Manifest]:
    """Randomly split the rows of ``store`` into two new stores of the same format.

    Every row goes to the test store with probability ``test_fraction``
    (independently, from generators seeded by ``seed`` and fixed blocks of
    ``SPLIT_BLOCK`` global row numbers), so the split is reproducible, does not
    depend on how the store is sharded, and needs one shard in memory at a time.
    Row order is kept within each part; manifests keep the source's encoding, so models
    trained on one part score the other.

    Returns
    -------
    (train manifest, test manifest)
    """
    test_fraction = check_number(test_fraction, "test_fraction", "split_store", 0.0, 1.0)
    st = store if isinstance(store, Store) else open_store(store)
    m = st.manifest
    kw = dict(n_features=m.n_features, feature_names=m.feature_names, format=m.format, with_group=m.groups is not None,
              with_weight=m.has_weight, overwrite=overwrite)
    # shard sizes from the expected part sizes plus six standard deviations (no stray tail shard);
    # these are bounds, not exact counts, so the shards are not balanced on them
    slack = 6.0 * (m.n_rows * test_fraction * (1.0 - test_fraction)) ** 0.5 + 1.0
    n_test, n_train = test_fraction * m.n_rows + slack, (1.0 - test_fraction) * m.n_rows + slack
    with ShardWriter(train_dest, shard_rows=shard_rows_for(min(m.n_rows, int(n_train)), m.n_features, balance=False), **kw) as tr, \
            ShardWriter(test_dest, shard_rows=shard_rows_for(min(m.n_rows, int(n_test)), m.n_features, balance=False), **kw) as te:
        start = 0
        for shard in st.iter_shards():
            to_test = _uniforms(seed, start, shard.n_rows) < test_fraction
            start += shard.n_rows
            for writer, mask in ((tr, ~to_test), (te, to_test)):
                writer.append(
                    shard.X[mask], shard.y[mask],
                    group=None if shard.group is None else shard.group[mask],
                    weight=None if shard.weight is None else shard.weight[mask],
                )
        fields = dict(groups=m.groups, group_column=m.group_column, encoding=m.encoding)
        src = dict(m.source, split={"of": st.path, "test_fraction": test_fraction, "seed": seed})
        return (tr.commit(source=dict(src, part="train"), **fields), te.commit(source=dict(src, part="test"), **fields))
