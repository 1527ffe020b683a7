"""A UTF-8 byte order mark opening a text source is skipped, not read as part of the first label or column (issue 41)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from dpipe.io import ingest, open_store

BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize("compress", [False, True])
def test_an_svmlight_file_with_a_bom_ingests_as_without_it(tmp_path, compress):
    body = b"+1 1:1.5 2:2\n-1 3:1\n"
    for name, data in (("plain.svm", body), ("bom.svm", BOM + body)):
        (tmp_path / name).write_bytes(gzip.compress(data) if compress else data)
    a = ingest(str(tmp_path / "plain.svm"), str(tmp_path / "plain.zarr"))
    b = ingest(str(tmp_path / "bom.svm"), str(tmp_path / "bom.zarr"))
    assert (b.n_rows, b.n_features, b.class_counts) == (a.n_rows, a.n_features, a.class_counts) == (2, 3, [[1, 1]])
    x, y = open_store(str(tmp_path / "bom.zarr")).read_shard(0).X, open_store(str(tmp_path / "bom.zarr")).read_shard(0).y
    assert np.array_equal(np.asarray(x.toarray() if hasattr(x, "toarray") else x), [[1.5, 2, 0], [0, 0, 1]]) and list(y) == [1, -1]


def test_a_csv_file_with_a_bom_keeps_its_first_column_name(tmp_path):
    (tmp_path / "bom.csv").write_bytes(BOM + b"a,b,label\n1,2,1\n3,4,0\n")
    m = ingest(str(tmp_path / "bom.csv"), str(tmp_path / "bom.zarr"))
    assert list(m.feature_names) == ["a", "b"] and m.n_rows == 2
