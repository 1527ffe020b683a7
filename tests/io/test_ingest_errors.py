"""Bad input: every error names the file and line (or column), and leaves nothing behind."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpipe.exceptions import DataWarning, InputError, ParameterError, StoreError
from dpipe.io import _tabular, ingest, open_store


def _fails(src, dest, exc_type=InputError, match=None, **kw) -> str:
    with pytest.raises(exc_type) as info:
        ingest(src, str(dest), **kw)
    msg = str(info.value)
    if match is not None:
        assert re.search(match, msg), msg
    return msg


def test_malformed_svmlight_token(write_source, tmp_path, assert_clean):
    src = write_source("bad.svm", "1 1:1\n-1 2:1 x\n")
    msg = _fails(src, tmp_path / "s", match=r"malformed token 'x'")
    assert src in msg and "line 2" in msg
    assert_clean(tmp_path / "s")


def test_malformed_value_in_a_later_piece(write_source, tmp_path, assert_clean):
    lines = ["1 1:1"] * 6 + ["# comment", "", "-1 1:1 2:abc"]
    src = write_source("bad.svm", "\n".join(lines) + "\n", "gz")
    msg = _fails(src, tmp_path / "s", match=r"malformed value in token '2:abc'", read_rows=2)
    assert src in msg and "line 9" in msg
    assert_clean(tmp_path / "s")


def test_qid_is_refused(write_source, tmp_path, assert_clean):
    src = write_source("rank.svm", "3 qid:1 1:0.5\n")
    msg = _fails(src, tmp_path / "s", match="qid is not supported")
    assert src in msg and "line 1" in msg
    assert_clean(tmp_path / "s")


def test_feature_index_beyond_n_features(write_source, tmp_path, assert_clean):
    src = write_source("a.svm", "1 1:1\n-1 3:1 7:1\n")
    msg = _fails(src, tmp_path / "s", match=r"feature index 7 is beyond n_features=5", n_features=5)
    assert src in msg and "line 2" in msg
    assert_clean(tmp_path / "s")
    # zero-based: index 5 is the sixth feature
    src0 = write_source("z.svm", "1 0:1\n-1 5:1\n")
    msg = _fails(src0, tmp_path / "s", match="beyond n_features=5", n_features=5)
    assert "line 2" in msg
    assert_clean(tmp_path / "s")


def test_index_zero_with_one_based(write_source, tmp_path, assert_clean):
    src = write_source("z.svm", "1 1:1\n-1 0:1\n")
    msg = _fails(src, tmp_path / "s", match="zero_based=False", zero_based=False)
    assert src in msg and "line 2" in msg
    assert_clean(tmp_path / "s")


def test_non_numeric_value_in_numeric_column(write_source, tmp_path, assert_clean):
    rows = ["age,color,y"] + [f"{20 + i},red,1" for i in range(5)] + ["", "30,blue,0", "3O,blue,0"]
    src = write_source("typo.csv", "\n".join(rows) + "\n")
    msg = _fails(src, tmp_path / "s", match=r"non-numeric value '3O' in numeric column 'age'", read_rows=3)
    assert src in msg and "line 9" in msg
    assert_clean(tmp_path / "s")


def test_missing_value_in_numeric_column(write_source, tmp_path, assert_clean):
    src = write_source("miss.data", "1, a, 1\n ?, b, 0\n")
    msg = _fails(src, tmp_path / "s", match=r"missing value '\?' in numeric column '0'")
    assert src in msg and "line 2" in msg
    assert_clean(tmp_path / "s")
    # a missing value before the first number of the column
    src2 = write_source("miss2.data", ",a,1\n2,b,0\n")
    msg = _fails(src2, tmp_path / "s", match=r"missing value '' in numeric column '0'")
    assert "line 1" in msg
    assert_clean(tmp_path / "s")


def test_wrong_column_count(write_source, tmp_path, assert_clean):
    src = write_source("cols.csv", "1,a,1\n2,b,0\n\n3,c\n4,d,1\n", "bz2")
    msg = _fails(src, tmp_path / "s", match=r"wrong number of columns: expected 3, got 2")
    assert src in msg and "line 4" in msg
    assert_clean(tmp_path / "s")


def test_preamble_line_hint(write_source, tmp_path, assert_clean):
    src = write_source("adult.test", "|1x3 Cross validator\n25, Private, <=50K.\n38, Private, >50K.\n")
    msg = _fails(src, tmp_path / "s", match=r"wrong number of columns.*skip_rows=", positive=">50K.")
    assert src in msg and "line 2" in msg
    assert_clean(tmp_path / "s")
    assert ingest(src, str(tmp_path / "s"), positive=">50K.", skip_rows=1).n_rows == 2


def test_parquet_errors_name_row_and_column(tmp_path, assert_clean):
    pq.write_table(pa.table({"x": pa.array([1.0, 2.0, None]), "y": pa.array([1, 0, 1])}), tmp_path / "n.parquet")
    msg = _fails(str(tmp_path / "n.parquet"), tmp_path / "s", match=r"row 3: missing value \(null\) in numeric column 'x'")
    assert str(tmp_path / "n.parquet") in msg
    pq.write_table(pa.table({"x": pa.array([[1], [2]]), "y": pa.array([1, 0])}), tmp_path / "l.parquet")
    _fails(str(tmp_path / "l.parquet"), tmp_path / "s", match=r"column 'x' has a type that cannot be ingested")
    assert_clean(tmp_path / "s")


@pytest.mark.parametrize(
    "name, text, kw, line, value",
    [
        ("adult.data", "39, State-gov, <=50K\n50, Private, >50K\n", {}, 1, "<=50K"),
        ("multi.svm", "1 1:1\n-1 1:2\n2 1:3\n", {}, 3, "2"),
        ("mixed.csv", "1,-1\n2,1\n3,0\n", {}, 3, "0"),
    ],
)
def test_label_not_mappable(write_source, tmp_path, assert_clean, name, text, kw, line, value):
    src = write_source(name, text)
    msg = _fails(src, tmp_path / "s", match=rf"label '{re.escape(value)}' cannot be mapped to -1/\+1.*pass positive= or negative=", **kw)
    assert src in msg and f"line {line}" in msg
    assert_clean(tmp_path / "s")


def test_missing_label(write_source, tmp_path, assert_clean):
    src = write_source("nolab.csv", "1,yes\n2,?\n")
    msg = _fails(src, tmp_path / "s", match=r"missing label '\?'", positive="yes")
    assert "line 2" in msg
    assert_clean(tmp_path / "s")


def test_unseen_category_with_like(write_source, tmp_path, assert_clean):
    train = write_source("train.csv", "a,b,y\nx,1,1\nz,2,0\n")
    test = write_source("test.csv", "a,b,y\nx,1,1\nz,2,0\nnew,3,1\n")
    ingest(train, str(tmp_path / "train"))
    msg = _fails(test, tmp_path / "test", match=r"unseen category 'new' in column 'a'.*unseen='ignore'", like=str(tmp_path / "train"))
    assert test in msg and "line 4" in msg
    assert_clean(tmp_path / "test")


def test_unseen_group_with_like(write_source, tmp_path, assert_clean):
    train = write_source("train.csv", "v,sex,y\n1,M,1\n2,F,0\n")
    test = write_source("test.csv", "v,sex,y\n1,X,1\n")
    ingest(train, str(tmp_path / "train"), group_col="sex")
    msg = _fails(test, tmp_path / "test", match=r"unseen group 'X' in column 'sex'", like=str(tmp_path / "train"), unseen="ignore")
    assert "line 2" in msg
    assert_clean(tmp_path / "test")


def test_like_with_a_different_column_count(write_source, tmp_path, assert_clean):
    train = write_source("train.data", "1,a,1\n2,b,0\n")
    test = write_source("test.data", "1,a,7,1\n")
    ingest(train, str(tmp_path / "train"))
    msg = _fails(test, tmp_path / "test", match="4 columns, but the like= store was ingested from 3", like=str(tmp_path / "train"))
    assert "line 1" in msg
    assert_clean(tmp_path / "test")


@pytest.mark.parametrize(
    "name, text, kw",
    [
        ("empty.svm", "", {}),
        ("comments.svm", "# nothing here\n\n", {}),
        ("empty.csv", "", {}),
        ("header_only.csv", "a,b,label\n", {"header": True}),
        ("blank.csv", "\n\n  \n", {}),
    ],
)
def test_empty_input(write_source, tmp_path, assert_clean, name, text, kw):
    src = write_source(name, text, "gz")
    msg = _fails(src, tmp_path / "s", match="empty input", source_format="csv" if name.endswith("csv") else "svmlight", **kw)
    assert src in msg
    assert_clean(tmp_path / "s")


def test_existing_dest_needs_overwrite(write_source, tmp_path):
    src = write_source("ok.svm", "1 1:1\n-1 2:1\n")
    dest = tmp_path / "s"
    dest.mkdir()
    (dest / "keep.txt").write_text("old")
    bad = write_source("bad.svm", "1 1:x\n")
    # the destination is checked before the (slow) first pass: the store error comes first
    msg = _fails(bad, dest, StoreError, match="overwrite")
    assert str(dest) in msg
    _fails(src, dest, StoreError, match="destination exists")
    assert (dest / "keep.txt").read_text() == "old"
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    # a directory that is not a dpipe store is never replaced, even with overwrite=True
    _fails(src, dest, StoreError, match="not a dpipe store", overwrite=True)
    assert (dest / "keep.txt").read_text() == "old"
    # a failing ingest with overwrite=True keeps the old (dpipe) store
    store = tmp_path / "store"
    ingest(write_source("one.svm", "1 1:5\n-1 2:5\n"), str(store))
    _fails(bad, store, InputError, overwrite=True)
    assert open_store(store).manifest.n_rows == 2 and open_store(store).read_all().X[0, 0] == 5
    m = ingest(src, str(store), overwrite=True)
    assert m.n_rows == 2
    np.testing.assert_array_equal(open_store(store).read_all().X, [[1, 0], [0, 1]])
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


def test_negative_or_bad_weight(write_source, tmp_path, assert_clean):
    src = write_source("w.csv", "x,w,y\n1,1,1\n2,-0.5,0\n")
    msg = _fails(src, tmp_path / "s", match=r"negative weight '-0.5' in column 'w'", weight_col="w")
    assert "line 3" in msg
    src2 = write_source("w2.csv", "x,w,y\n1,1,1\n2,inf,0\n")
    msg = _fails(src2, tmp_path / "s", match=r"non-finite value 'inf' in numeric column 'w'", weight_col="w")
    assert "line 3" in msg
    assert_clean(tmp_path / "s")


def test_not_utf8(write_source, tmp_path, assert_clean):
    src = write_source("latin.csv", b"1,abc,1\n2,caf\xe9,0\n")
    msg = _fails(src, tmp_path / "s", match="not valid UTF-8")
    assert src in msg and "line 2" in msg
    assert_clean(tmp_path / "s")


def test_error_while_writing_removes_the_temporary_store(write_source, tmp_path, assert_clean, monkeypatch):
    src = write_source("fine.csv", "".join(f"{i},{'ab'[i % 2]},{i % 2}\n" for i in range(40)))
    calls = []
    real = _tabular.TabularEncoder.encode

    def flaky(self, arrays, rows, out=None):
        calls.append(rows.n)
        if len(calls) == 3:
            raise InputError("disk on fire", path=rows.path, line=int(rows.lines[0]))
        return real(self, arrays, rows, out)

    monkeypatch.setattr(_tabular.TabularEncoder, "encode", flaky)
    _fails(src, tmp_path / "s", match="disk on fire", read_rows=5, shard_rows=4)
    assert len(calls) == 3
    assert_clean(tmp_path / "s")


def test_source_missing_or_undetectable(write_source, tmp_path, assert_clean):
    _fails(str(tmp_path / "nope.csv"), tmp_path / "s", match="no such file")
    src = write_source("blob.bin", "hello world\nsecond line\n")
    msg = _fails(src, tmp_path / "s", match="source_format=")
    assert src in msg
    assert_clean(tmp_path / "s")


def test_like_must_be_an_ingested_store(write_source, tmp_path, assert_clean):
    src = write_source("a.csv", "1,1\n2,0\n")
    _fails(src, tmp_path / "s", StoreError, like=str(tmp_path / "missing"))
    svm = write_source("a.svm", "1 1:1\n-1 2:1\n")
    ingest(svm, str(tmp_path / "svm_store"))
    _fails(src, tmp_path / "s", ParameterError, match="svmlight", like=str(tmp_path / "svm_store"))
    assert_clean(tmp_path / "s")


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"unseen": "skip"}, "'unseen' parameter"),
        ({"format": "hdf5"}, "'format' parameter"),
        ({"source_format": "json"}, "'source_format' parameter"),
        ({"positive": "a", "negative": "b"}, "exclusive"),
        ({"positive": []}, "'positive' parameter"),
        ({"zero_based": "yes"}, "'zero_based' parameter"),
        ({"header": 1}, "'header' parameter"),
        ({"skip_rows": -1}, "'skip_rows' parameter"),
        ({"read_rows": 0}, "'read_rows' parameter"),
        ({"shard_rows": 0}, "'shard_rows' parameter"),
        ({"n_features": 0}, "'n_features' parameter"),
        ({"overwrite": "yes"}, "'overwrite' parameter"),
        ({"label": 1.5}, "'label' parameter"),
        ({"n_features": 3}, "svmlight sources"),
        ({"zero_based": True}, "svmlight sources only"),
        ({"label": "nope"}, "names no column"),
        ({"label": 0, "group_col": 0}, "different columns"),
    ],
)
def test_parameter_errors(write_source, tmp_path, assert_clean, kw, match):
    src = write_source("p.csv", "a,b,y\n1,x,1\n2,z,0\n")
    _fails(src, tmp_path / "s", ParameterError, match=match, **kw)
    assert_clean(tmp_path / "s")


def test_svmlight_rejects_tabular_options(write_source, tmp_path, assert_clean):
    src = write_source("a.svm", "1 1:1\n-1 2:1\n")
    _fails(src, tmp_path / "s", ParameterError, match="'label' parameter", label=0)
    _fails(src, tmp_path / "s", ParameterError, match="must list numbers", positive="yes")
    assert_clean(tmp_path / "s")


def test_class_absent_is_a_warning(write_source, tmp_path):
    src = write_source("pos.svm", "1 1:1\n+1 2:1\n1.0 1:2\n")
    with pytest.warns(DataWarning, match="no row has label -1"):
        m = ingest(src, str(tmp_path / "s"))
    assert (m.n_positive, m.n_negative) == (3, 0)
    assert open_store(tmp_path / "s").manifest.n_rows == 3
