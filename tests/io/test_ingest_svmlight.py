"""Ingest of svmlight / LIBSVM sources and the numba parser."""

from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpipe.exceptions import InputError
from dpipe.io import ingest, open_store
from dpipe.io._svmlight import parse_block
from dpipe.testing import parse_block_reference

DOC = """# a comment line
+1 1:0.5 3:2 # trailing comment
-1 2:1.5e1

-1
1 1:-1 2:.25 4:7.
  \t
-1.0 4:1e-3
"""
# rows: label, {one-based index: value}
ROWS = [(1, {1: 0.5, 3: 2.0}), (-1, {2: 15.0}), (-1, {}), (1, {1: -1.0, 2: 0.25, 4: 7.0}), (-1, {4: 1e-3})]


def dense(rows, d, base):
    X = np.zeros((len(rows), d), np.float32)
    for i, (_, feats) in enumerate(rows):
        for j, v in feats.items():
            X[i, j - base] = v
    return X, np.array([r[0] for r in rows], np.int8)


@pytest.mark.parametrize("compression", [None, "gz", "bz2"])
@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_one_based_auto_roundtrip(write_source, tmp_path, compression, fmt):
    src = write_source("train.svm", DOC, compression)
    dest = tmp_path / "store"
    m = ingest(src, str(dest), format=fmt)
    X, y = dense(ROWS, 4, 1)
    got = open_store(dest).read_all()
    np.testing.assert_array_equal(got.X, X)
    np.testing.assert_array_equal(got.y, y)
    assert m.format == fmt
    assert m.feature_names == ["f1", "f2", "f3", "f4"]
    assert m.encoding["kind"] == "svmlight"
    assert m.encoding["zero_based"] is False and m.encoding["n_features"] == 4
    assert m.encoding["label"]["kind"] == "binary"
    raw = Path(src).read_bytes()
    assert m.source["sha256"] == hashlib.sha256(raw).hexdigest()
    assert m.source["bytes"] == len(raw)
    assert m.source["format"] == "svmlight"
    assert m.source["path"] == os.path.abspath(src)
    assert m.source["options"]["zero_based"] == "auto"
    assert (m.n_positive, m.n_negative) == (2, 3)


def test_zero_based_auto(write_source, tmp_path):
    src = write_source("z.svm", "1 0:1 2:3\n-1 1:2\n")
    m = ingest(src, str(tmp_path / "s"))
    assert m.encoding["zero_based"] is True
    assert m.feature_names == ["f0", "f1", "f2"]
    np.testing.assert_array_equal(open_store(tmp_path / "s").read_all().X, [[1, 0, 3], [0, 2, 0]])


def test_zero_based_forced(write_source, tmp_path):
    src = write_source("z.svm", "1 1:1 3:3\n-1 2:2\n")
    m = ingest(src, str(tmp_path / "s"), zero_based=True)
    assert m.n_features == 4 and m.feature_names == ["f0", "f1", "f2", "f3"]
    np.testing.assert_array_equal(open_store(tmp_path / "s").read_all().X, [[0, 1, 0, 3], [0, 0, 2, 0]])
    m = ingest(src, str(tmp_path / "t"), zero_based=False)
    assert m.n_features == 3
    np.testing.assert_array_equal(open_store(tmp_path / "t").read_all().X, [[1, 0, 3], [0, 2, 0]])


def test_n_features_pads_with_zero_columns(write_source, tmp_path):
    src = write_source("a.svm", "1 1:1\n-1 2:1\n")
    m = ingest(src, str(tmp_path / "s"), n_features=5)
    assert m.n_features == 5 and m.feature_names[-1] == "f5"
    X = open_store(tmp_path / "s").read_all().X
    assert X.shape == (2, 5) and X[:, 2:].sum() == 0


@pytest.mark.parametrize("layout", ["dense", "sparse"])
def test_small_pieces_and_shards_give_the_same_store(write_source, tmp_path, layout):
    rng = np.random.default_rng(0)
    lines, rows = [], []
    for i in range(101):
        idx = np.sort(rng.choice(np.arange(1, 21), size=rng.integers(0, 6), replace=False))
        vals = np.round(rng.standard_normal(idx.size), 3)
        lab = 1 if i % 3 == 0 else -1
        lines.append(" ".join([f"{lab:+d}"] + [f"{j}:{float(v)!r}" for j, v in zip(idx, vals)]))
        rows.append((lab, {int(j): float(v) for j, v in zip(idx, vals)}))
    src = write_source("r.svm", "\n".join(lines))  # no final newline
    m = ingest(src, str(tmp_path / "s"), n_features=20, read_rows=7, shard_rows=10, layout=layout)
    assert m.n_shards == 11 and m.n_rows == 101 and m.layout == ("csr" if layout == "sparse" else "dense")
    X, y = dense(rows, 20, 1)
    got = open_store(tmp_path / "s").read_all()
    np.testing.assert_array_equal(got.X.toarray() if layout == "sparse" else got.X, X)
    np.testing.assert_array_equal(got.y, y)


def test_label_rules_compare_numerically(write_source, tmp_path):
    src = write_source("m.svm", "1 1:1\n2 1:2\n3 1:3\n2.0 1:4\n")
    m = ingest(src, str(tmp_path / "pos"), positive="2")
    np.testing.assert_array_equal(open_store(tmp_path / "pos").read_all().y, [-1, 1, -1, 1])
    assert m.encoding["label"]["kind"] == "positive" and m.encoding["label"]["values"] == ["2"]
    ingest(src, str(tmp_path / "neg"), negative=["1", "3"])
    np.testing.assert_array_equal(open_store(tmp_path / "neg").read_all().y, [-1, 1, -1, 1])
    src01 = write_source("b.svm", "0 1:1\n1 1:2\n1.0 1:3\n")
    ingest(src01, str(tmp_path / "b01"))
    np.testing.assert_array_equal(open_store(tmp_path / "b01").read_all().y, [-1, 1, 1])


def test_like_reuses_feature_count_and_base(write_source, tmp_path):
    train = write_source("train.svm", "1 1:1 5:2\n-1 3:1\n")
    test = write_source("test.t", "1 2:1\n-1 1:1\n")
    ingest(train, str(tmp_path / "train"))
    m = ingest(test, str(tmp_path / "test"), like=str(tmp_path / "train"))
    assert m.n_features == 5 and m.encoding["zero_based"] is False
    assert m.feature_names == open_store(tmp_path / "train").manifest.feature_names
    np.testing.assert_array_equal(open_store(tmp_path / "test").read_all().X, [[0, 1, 0, 0, 0], [1, 0, 0, 0, 0]])


def test_list_of_sources_is_concatenated(write_source, tmp_path):
    a = write_source("a.svm", "1 1:1\n")
    b = write_source("b.svm", "-1 2:1\n-1 3:1\n", "gz")
    m = ingest([a, b], str(tmp_path / "s"))
    assert m.n_rows == 3 and m.n_features == 3
    assert isinstance(m.source["path"], list) and len(m.source["sha256"]) == 2
    np.testing.assert_array_equal(open_store(tmp_path / "s").read_all().X, np.eye(3))


def test_format_sniffed_without_suffix(write_source, tmp_path):
    src = write_source("noext", "# header comment\n+1\n-1 3:1 7:2\n")
    m = ingest(src, str(tmp_path / "s"))
    assert m.source["format"] == "svmlight" and m.n_features == 7


# ---------------------------------------------------------------------------------
# numba parser == plain-Python reference parser
# ---------------------------------------------------------------------------------
_numbers = st.one_of(
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=False, allow_infinity=False, width=64).map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda v: f"{v:.3e}"),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6).map(lambda v: f"{v:.6f}"),
    st.sampled_from(["+1", "-1", "1.", ".5", "-.5e-3", "0", "-0", "0.000000000000000000000001", "123456789012345678901234", "00012"]),
)
_bad = st.sampled_from(["1e400", "x", "1..2", "--1", "1e", ".", "+", "nan", "inf", "1,5", "0x1"])
_ws = st.sampled_from([" ", "  ", "\t", " \r"])


@st.composite
def _svm_line(draw):
    kind = draw(st.sampled_from(["row"] * 12 + ["blank", "comment", "bad"]))
    if kind == "blank":
        return draw(st.sampled_from(["", "   ", "\t", "\r"]))
    if kind == "comment":
        return "# " + draw(st.text(alphabet="ab 1:#,", max_size=10))
    label = draw(_numbers)
    n = draw(st.integers(0, 5))
    idx = sorted(draw(st.sets(st.integers(0, 50), min_size=n, max_size=n)))
    toks = [f"{i}:{draw(_numbers)}" for i in idx]
    if kind == "bad":
        where = draw(st.integers(0, len(toks)))
        bad = draw(st.one_of(_bad, _bad.map(lambda b: f"3:{b}"), st.sampled_from(["qid:1", "a:1", ":1", "1:", "99999999999:1", "7", "1:2:3"])))
        if where == 0 and draw(st.booleans()):
            label = draw(_bad)
        else:
            toks.insert(where, bad)
    if len(toks) >= 2 and draw(st.integers(0, 29)) == 0:
        toks[0], toks[1] = toks[1], toks[0]  # not increasing
    sep = draw(_ws)
    line = sep.join([label] + toks)
    if draw(st.booleans()):
        line = draw(_ws) + line + draw(_ws)
    if draw(st.integers(0, 5)) == 0:
        line += " #c 1:2"
    return line


def _same(a, b):
    for k in ("labels", "indptr", "indices", "values", "lines"):
        x, y = getattr(a, k), getattr(b, k)
        assert x.dtype == y.dtype, k
        np.testing.assert_array_equal(x, y, err_msg=k)
        if k in ("labels", "values"):
            assert np.array_equal(np.signbit(x), np.signbit(y)) and x.tobytes() == y.tobytes(), k


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(_svm_line(), min_size=0, max_size=12), first=st.integers(1, 1000), trailing=st.booleans())
def test_numba_parser_equals_reference(lines, first, trailing):
    data = ("\n".join(lines) + ("\n" if trailing else "")).encode()
    try:
        ref = parse_block_reference(data, first, "doc.svm")
    except InputError as exc:
        with pytest.raises(InputError) as got:
            parse_block(data, first, "doc.svm")
        assert str(got.value) == str(exc)
        assert got.value.line == exc.line
        return
    _same(parse_block(data, first, "doc.svm"), ref)


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=50))
def test_numba_parser_converts_floats_exactly(values):
    data = ("1 " + " ".join(f"{i + 1}:{v!r}" for i, v in enumerate(values)) + "\n").encode()
    blk = parse_block(data)
    assert blk.values.tobytes() == np.array(values, np.float64).tobytes()


def test_parser_many_slow_tokens_resume():
    # more tokens needing Python's float() than the kernel's slow buffer holds
    vals = [f"{i}.{'1' * 20}" for i in range(5000)]
    data = ("\n".join(f"1 1:{v} 2:{v}" for v in vals) + "\n").encode()
    _same(parse_block(data, 1, "x"), parse_block_reference(data, 1, "x"))
    one_line = ("1 " + " ".join(f"{i + 1}:{v}" for i, v in enumerate(vals)) + "\n").encode()
    _same(parse_block(one_line, 1, "x"), parse_block_reference(one_line, 1, "x"))


def test_matches_sklearn_on_a9a_t(shared_data, tmp_path):
    sk = pytest.importorskip("sklearn.datasets")
    path = shared_data / "a9a.t.gz"
    if not path.exists():
        pytest.skip("a9a.t.gz not bundled")
    X_sk, y_sk = sk.load_svmlight_file(gzip.open(path), n_features=123)
    with gzip.open(path) as f:
        blk = parse_block(f.read(), 1, str(path))
    assert blk.n_rows == X_sk.shape[0] == 16281
    np.testing.assert_array_equal(blk.labels, y_sk)
    np.testing.assert_array_equal(blk.indptr, X_sk.indptr)
    np.testing.assert_array_equal(blk.indices - 1, X_sk.indices)
    np.testing.assert_array_equal(blk.values, X_sk.data)
    m = ingest(str(path), str(tmp_path / "a9at"), n_features=123)
    assert (m.n_rows, m.n_features, m.n_positive, m.n_negative, m.layout) == (16281, 123, 3846, 12435, "csr")  # 11.3 % non-zero
    got = open_store(tmp_path / "a9at").read_all()
    np.testing.assert_array_equal(got.X.toarray(), X_sk.toarray().astype(np.float32))
    np.testing.assert_array_equal(got.y, y_sk.astype(np.int8))
