"""Split a store into train and test stores, streaming shard by shard."""

from __future__ import annotations

import os

import numpy as np

from .._validation import check_number
from ._manifest import Manifest
from ._store import Store, open_store
from ._writer import ShardWriter

__all__ = ["split_store"]


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
    (independently, from a generator seeded by ``seed`` and the shard number), so
    the split is reproducible and needs one shard in memory at a time. Row order
    is kept within each part; manifests keep the source's encoding, so models
    trained on one part score the other.

    Returns
    -------
    (train manifest, test manifest)
    """
    test_fraction = check_number(test_fraction, "test_fraction", "split_store", 0.0, 1.0)
    st = store if isinstance(store, Store) else open_store(store)
    m = st.manifest
    kw = dict(n_features=m.n_features, feature_names=m.feature_names, shard_rows=max(1, max((b - a for a, b in m.shard_bounds), default=1)),
              format=m.format, with_group=m.groups is not None, with_weight=m.has_weight, overwrite=overwrite)
    with ShardWriter(train_dest, **kw) as tr, ShardWriter(test_dest, **kw) as te:
        for shard in st.iter_shards():
            rng = np.random.default_rng([seed, shard.index])
            to_test = rng.random(shard.n_rows) < test_fraction
            for writer, mask in ((tr, ~to_test), (te, to_test)):
                writer.append(
                    shard.X[mask], shard.y[mask],
                    group=None if shard.group is None else shard.group[mask],
                    weight=None if shard.weight is None else shard.weight[mask],
                )
        fields = dict(groups=m.groups, group_column=m.group_column, encoding=m.encoding)
        src = dict(m.source, split={"of": st.path, "test_fraction": test_fraction, "seed": seed})
        return (tr.commit(source=dict(src, part="train"), **fields), te.commit(source=dict(src, part="test"), **fields))
