"""The store's feature codec (chosen by the first shard) and the memory-mapped read of uncompressed shards."""

from __future__ import annotations

import numpy as np
import pytest

from dpipe.exceptions import ParameterError
from dpipe.io import open_store


def test_store_codec_is_chosen_by_the_first_shard(tmp_path):
    import dask
    import zarr

    from dpipe.testing import write_store

    rng = np.random.default_rng(0)
    dense = rng.normal(size=(20_000, 16)).astype(np.float32)  # barely compressible
    sparse = (rng.random((20_000, 16)) < 0.05).astype(np.float32)  # one-hot-like
    y = np.where(rng.random(20_000) < 0.3, 1, -1).astype(np.int8)

    def codecs(path):
        return [type(c).__name__ for c in zarr.open_array(str(path / "X"), mode="r").metadata.codecs]

    write_store(tmp_path / "dense.zarr", dense, y, [0, 0, 20_000])  # empty shards first: the first rows decide
    write_store(tmp_path / "sparse.zarr", sparse, y)
    assert "ZstdCodec" not in codecs(tmp_path / "dense.zarr") and "ZstdCodec" in codecs(tmp_path / "sparse.zarr")
    with dask.config.set({"dpipe.store-codec": "zstd"}):
        write_store(tmp_path / "forced.zarr", dense, y)
    assert "ZstdCodec" in codecs(tmp_path / "forced.zarr")
    for name in ("dense", "sparse", "forced"):  # the values do not depend on the codec
        np.testing.assert_array_equal(open_store(tmp_path / f"{name}.zarr", verify=True).read_all().X, sparse if name == "sparse" else dense)
    with dask.config.set({"dpipe.store-codec": "lz5"}), pytest.raises(ParameterError, match="store-codec"):
        write_store(tmp_path / "bad.zarr", dense, y)



@pytest.mark.parametrize("codec", ["none", "zstd"])
@pytest.mark.parametrize(("shards", "some_direct"), [(None, True), ([9000, 9000, 2000], True), ([7000, 0, 11000, 2000], False)])
def test_direct_chunk_reads_equal_zarr_reads(tmp_path, shards, some_direct, codec):
    """Shards that are one chunk are read from the chunk file (raw: memory-mapped in a streamed pass, else copied; zstd:
    decoded straight into the array), the last one too (its chunk file is full-size); others fall back to zarr. Every
    path gives zarr's values and the recorded checksums."""
    import dask
    import zarr

    from dpipe.engine import LocalDataset
    from dpipe.io._zarr_store import _shard_chunk
    from dpipe.reduce import class_scores
    from dpipe.testing import write_store

    rng = np.random.default_rng(1)
    X = rng.normal(size=(20_000, 9)).astype(np.float32)
    y = np.where(rng.random(20_000) < 0.4, 1, -1).astype(np.int8)
    with dask.config.set({"dpipe.store-codec": codec}):
        write_store(tmp_path / "s.zarr", X, y, shards)
    st = open_store(tmp_path / "s.zarr", verify=True)
    arr = zarr.open_array(str(tmp_path / "s.zarr" / "X"), mode="r")
    direct, mapped = [], []
    for i, (a, b) in enumerate(st.manifest.shard_bounds):
        sh = st.read_shard(i, mmap=True)
        np.testing.assert_array_equal(sh.X, X[a:b])
        np.testing.assert_array_equal(st.read_shard(i).X, arr[a:b])
        assert not isinstance(st.read_shard(i).X, np.memmap)  # without mmap: an array in memory
        direct.append(_shard_chunk(str(tmp_path / "s.zarr"), arr, a, b) is not None)
        mapped.append(isinstance(sh.X, np.memmap))
    aligned = [a % arr.chunks[0] == 0 and (b - a == arr.chunks[0] or b == X.shape[0]) and b > a for a, b in st.manifest.shard_bounds]
    assert direct == aligned and any(direct) is some_direct
    assert mapped == (aligned if codec == "none" else [False] * len(aligned))
    w = rng.normal(size=9)
    streamed = LocalDataset(st, cache="stream").map_gather(class_scores, w)
    persisted = LocalDataset(st, cache="memory").map_gather(class_scores, w)
    for a, b in zip(streamed, persisted):
        np.testing.assert_array_equal(a.pos, b.pos)
        np.testing.assert_array_equal(a.neg, b.neg)


def test_a_damaged_zstd_chunk_is_one_error_naming_the_shard(tmp_path):
    import dask

    from dpipe.exceptions import StoreError
    from dpipe.testing import write_store

    X = (np.random.default_rng(2).random((4000, 5)) < 0.1).astype(np.float32)
    with dask.config.set({"dpipe.store-codec": "zstd"}):
        write_store(tmp_path / "s.zarr", X, np.ones(4000, np.int8))
    chunk = tmp_path / "s.zarr" / "X" / "c" / "0" / "0"
    chunk.write_bytes(chunk.read_bytes()[:-7])
    with pytest.raises(StoreError, match=r"shard 0 \(rows 0\.\.4000\): cannot read"):
        open_store(tmp_path / "s.zarr").read_shard(0)


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_a_last_shard_longer_than_a_chunk_is_read_through_zarr(tmp_path, codec):
    """ShardWriter.write_shard takes shards of any size: a last shard spanning several chunks is not one chunk file."""
    import dask

    from dpipe.io import ShardWriter

    X = np.arange(25 * 3, dtype=np.float32).reshape(25, 3)
    with dask.config.set({"dpipe.store-codec": codec}), ShardWriter(str(tmp_path / "s.zarr"), 3, ["a", "b", "c"], shard_rows=10) as w:
        w.write_shard(X, np.ones(25, np.int8))
        w.commit()
    st = open_store(tmp_path / "s.zarr", verify=True)
    for mmap in (False, True):
        np.testing.assert_array_equal(st.read_shard(0, mmap=mmap).X, X)
