"""Ingest of CSV and Parquet sources: typing, one-hot encoding, labels, groups, weights, like=."""

from __future__ import annotations

import gzip
import json
import os
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpipe.exceptions import DataWarning
from dpipe.io import ingest, open_store

CSV = """age, color ,size,label
39, red, 1.5, yes
50,blue,2,no

28, green ,  -3e-1 , yes
41,red,0,no
"""
# feature layout: age, color=blue, color=green, color=red, size
X_CSV = np.array(
    [[39, 0, 0, 1, 1.5], [50, 1, 0, 0, 2], [28, 0, 1, 0, -0.3], [41, 0, 0, 1, 0]],
    dtype=np.float32,
)
Y_CSV = np.array([1, -1, 1, -1], np.int8)


@pytest.mark.parametrize("compression", [None, "gz", "bz2"])
@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_csv_with_header_one_hot(write_source, tmp_path, compression, fmt):
    src = write_source("people.csv", CSV, compression)
    m = ingest(src, str(tmp_path / "s"), positive="yes", format=fmt)
    assert m.feature_names == ["age", "color=blue", "color=green", "color=red", "size"]
    got = open_store(tmp_path / "s").read_all()
    np.testing.assert_array_equal(got.X, X_CSV)
    np.testing.assert_array_equal(got.y, Y_CSV)
    enc = m.encoding
    assert enc["kind"] == "tabular" and enc["header"] is True
    assert enc["columns"] == [
        {"name": "age", "role": "feature", "type": "numeric"},
        {"name": "color", "role": "feature", "type": "categorical", "categories": ["blue", "green", "red"]},
        {"name": "size", "role": "feature", "type": "numeric"},
        {"name": "label", "role": "label", "type": "categorical"},
    ]
    assert enc["label"] == {"kind": "positive", "values": ["yes"], "column": "label", "classes": {"no": -1, "yes": 1}}
    assert m.source["format"] == "csv"
    json.dumps(m.to_dict())  # the whole manifest is JSON


def test_csv_without_header_label_by_index(write_source, tmp_path):
    src = write_source("plain.data", "1,a,0\n2,b,1\n3,a,1\n")
    m = ingest(src, str(tmp_path / "s"), label=2)
    assert m.encoding["header"] is False
    assert m.feature_names == ["0", "1=a", "1=b"]
    np.testing.assert_array_equal(open_store(tmp_path / "s").read_all().y, [-1, 1, 1])
    m2 = ingest(src, str(tmp_path / "t"), label="2")  # headerless columns are named "0", "1", ...
    assert m2.feature_names == m.feature_names
    m3 = ingest(src, str(tmp_path / "u"))  # default: last column
    assert m3.feature_names == m.feature_names


def test_header_forced(write_source, tmp_path):
    src = write_source("h.csv", "a,b,y\nx,1,1\nz,2,-1\n")
    # auto: "a" vs "x" are both text and "b" vs "1" says header
    assert ingest(src, str(tmp_path / "auto")).encoding["header"] is True
    src2 = write_source("h2.csv", "x,q,1\nz,w,-1\nv,w,1\n")
    m = ingest(src2, str(tmp_path / "no"))
    assert m.encoding["header"] is False and m.n_rows == 3
    m = ingest(src2, str(tmp_path / "yes"), header=True, positive="-1")
    assert m.encoding["header"] is True and m.n_rows == 2 and m.feature_names == ["x=v", "x=z", "q=w"]
    np.testing.assert_array_equal(open_store(tmp_path / "yes").read_all().y, [1, -1])


def test_label_column_in_the_middle_and_named(write_source, tmp_path):
    src = write_source("mid.csv", "f1,target,f2\n1,+1,2\n3,-1,4\n5,1.0,6\n")
    m = ingest(src, str(tmp_path / "s"), label="target")
    assert m.feature_names == ["f1", "f2"]
    got = open_store(tmp_path / "s").read_all()
    np.testing.assert_array_equal(got.X, [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(got.y, [1, -1, 1])


@pytest.mark.parametrize(
    "labels, kw, expect",
    [
        (["0", "1", "1", "0.0"], {}, [-1, 1, 1, -1]),
        (["-1", "+1", "1.0", "-1.0"], {}, [-1, 1, 1, -1]),
        (["cat", "dog", "cow", "dog"], {"positive": "dog"}, [-1, 1, -1, 1]),
        (["cat", "dog", "cow", "dog"], {"positive": "dog,cow"}, [-1, 1, 1, 1]),
        (["cat", "dog", "cow", "dog"], {"negative": ["cat", "cow"]}, [-1, 1, -1, 1]),
        (["1", "2", "3", "2"], {"positive": "2.0"}, [-1, 1, -1, 1]),
    ],
)
def test_label_rules(write_source, tmp_path, labels, kw, expect):
    src = write_source("l.csv", "".join(f"{i},{lab}\n" for i, lab in enumerate(labels)))
    ingest(src, str(tmp_path / "s"), **kw)
    np.testing.assert_array_equal(open_store(tmp_path / "s").read_all().y, expect)


def test_whitespace_skip_rows_and_trailing_blank_lines(write_source, tmp_path):
    src = write_source("adultish.test", "|1x3 Cross validator\n25, Private, 226802, >50K.\n38, ?, 89814, <=50K.\n\n\n", "gz")
    m = ingest(src, str(tmp_path / "s"), skip_rows=1, positive=">50K.")
    assert m.feature_names == ["0", "1=?", "1=Private", "2"]
    got = open_store(tmp_path / "s").read_all()
    np.testing.assert_array_equal(got.X, [[25, 0, 1, 226802], [38, 1, 0, 89814]])
    np.testing.assert_array_equal(got.y, [1, -1])


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_group_and_weight_columns(write_source, tmp_path, fmt):
    src = write_source("g.csv", "x,sex,w,y\n1,M,0.5,1\n2,F,1,0\n3,M,2,0\n4,X,0,1\n")
    m = ingest(src, str(tmp_path / "s"), group_col="sex", weight_col="w", format=fmt)
    assert m.groups == ["F", "M", "X"] and m.group_column == "sex"
    assert m.has_weight
    assert m.feature_names == ["x", "sex=F", "sex=M", "sex=X"]  # the group column stays a feature, the weight does not
    assert [c["role"] for c in m.encoding["columns"]] == ["feature", "group", "weight", "label"]
    assert m.group_counts == [[1, 2, 1]]
    got = open_store(tmp_path / "s").read_all()
    np.testing.assert_array_equal(got.group, [1, 0, 1, 2])
    assert got.group.dtype == np.int16
    np.testing.assert_array_equal(got.weight, np.array([0.5, 1, 2, 0], np.float32))
    np.testing.assert_array_equal(got.X[:, 0], [1, 2, 3, 4])


def test_group_and_weight_by_index_without_header(write_source, tmp_path):
    src = write_source("g.data", "1,b,1,1\n2,a,3,-1\n")
    m = ingest(src, str(tmp_path / "s"), group_col=1, weight_col=2)
    assert m.groups == ["a", "b"] and m.group_column == "1"
    np.testing.assert_array_equal(open_store(tmp_path / "s").read_all().group, [1, 0])


def test_many_pieces_and_shards(write_source, tmp_path):
    rng = np.random.default_rng(1)
    n = 257
    cats = rng.choice(["tcp", "udp", "icmp"], n)
    nums = np.round(rng.standard_normal((n, 3)), 4)
    y = np.where(rng.random(n) < 0.4, "attack.", "normal.")
    lines = [f"{a!r},{c},{b!r},{d!r},{lab}" for (a, b, d), c, lab in zip(nums.tolist(), cats, y)]
    src = write_source("many.csv", "\n".join(lines) + "\n", "gz")
    m = ingest(src, str(tmp_path / "s"), negative="normal.", read_rows=10, shard_rows=50)
    assert m.n_rows == n and m.n_shards == 6
    got = open_store(tmp_path / "s").read_all()
    vocab = ["icmp", "tcp", "udp"]
    X = np.column_stack([nums[:, 0], *(cats == v for v in vocab), nums[:, 1], nums[:, 2]]).astype(np.float32)
    np.testing.assert_array_equal(got.X, X)
    np.testing.assert_array_equal(got.y, np.where(y == "attack.", 1, -1))


def _parquet_table():
    return pa.table(
        {
            "age": pa.array([39, 50, 28, 41], pa.int64()),
            "color": pa.array(["red", "blue", " green", None]),
            "size": pa.array([1.5, 2.0, -0.3, 0.0]),
            "flag": pa.array([True, False, True, True]),
            "label": pa.array(["yes", "no", "yes", "no"]),
        }
    )


def test_parquet_file_and_directory(tmp_path):
    t = _parquet_table()
    pq.write_table(t, tmp_path / "one.parquet")
    m = ingest(str(tmp_path / "one.parquet"), str(tmp_path / "s"), positive="yes")
    assert m.source["format"] == "parquet"
    assert m.feature_names == ["age", "color=?", "color=blue", "color=green", "color=red", "size", "flag"]
    X = np.array([[39, 0, 0, 0, 1, 1.5, 1], [50, 0, 1, 0, 0, 2, 0], [28, 0, 0, 1, 0, -0.3, 1], [41, 1, 0, 0, 0, 0, 1]], np.float32)
    got = open_store(tmp_path / "s").read_all()
    np.testing.assert_array_equal(got.X, X)
    np.testing.assert_array_equal(got.y, [1, -1, 1, -1])
    d = tmp_path / "dir"
    d.mkdir()
    pq.write_table(t.slice(0, 2), d / "part-0.parquet")
    pq.write_table(t.slice(2), d / "part-1.parquet")
    m2 = ingest(str(d), str(tmp_path / "s2"), positive="yes", read_rows=1)
    assert m2.feature_names == m.feature_names and len(m2.source["files"]) == 2
    np.testing.assert_array_equal(open_store(tmp_path / "s2").read_all().X, X)


def test_like_lines_columns_up(write_source, tmp_path):
    train = write_source("train.csv", "proto,n,svc,y\ntcp,1,http,normal.\nudp,2,dns,smurf.\nicmp,3,ftp,neptune.\n")
    test = write_source("test.csv", "proto,n,svc,y\nudp,5,ftp,normal.\ntcp,6,http,satan.\n")
    mt = ingest(train, str(tmp_path / "train"), negative="normal.")
    m = ingest(test, str(tmp_path / "test"), like=str(tmp_path / "train"))
    assert m.feature_names == mt.feature_names
    assert m.encoding["columns"] == mt.encoding["columns"]
    assert m.encoding["label"]["kind"] == "negative"
    got = open_store(tmp_path / "test").read_all()
    # features: proto=icmp, proto=tcp, proto=udp, n, svc=dns, svc=ftp, svc=http
    np.testing.assert_array_equal(got.X, [[0, 0, 1, 5, 0, 1, 0], [0, 1, 0, 6, 0, 0, 1]])
    np.testing.assert_array_equal(got.y, [-1, 1])  # "satan." was never seen in training: still +1 by the negative rule


def test_like_unseen_ignore(write_source, tmp_path):
    train = write_source("train.csv", "a,b,y\nx,1,1\nz,2,0\n")
    test = write_source("test.csv", "a,b,y\nx,1,1\nnew,2,0\nnew,3,1\nnewer,4,0\n")
    ingest(train, str(tmp_path / "train"))
    with pytest.warns(DataWarning, match="unseen"):
        m = ingest(test, str(tmp_path / "test"), like=str(tmp_path / "train"), unseen="ignore")
    assert m.encoding["unseen_counts"] == {"a": {"new": 2, "newer": 1}}
    got = open_store(tmp_path / "test").read_all()
    np.testing.assert_array_equal(got.X, [[1, 0, 1], [0, 0, 2], [0, 0, 3], [0, 0, 4]])


def test_like_reuses_groups(write_source, tmp_path):
    train = write_source("train.csv", "v,sex,y\n1,M,1\n2,F,0\n")
    test = write_source("test.csv", "v,sex,y\n1,M,1\n2,M,0\n")
    ingest(train, str(tmp_path / "train"), group_col="sex")
    m = ingest(test, str(tmp_path / "test"), like=str(tmp_path / "train"))
    assert m.groups == ["F", "M"] and m.group_column == "sex"
    np.testing.assert_array_equal(open_store(tmp_path / "test").read_all().group, [1, 1])
    assert m.group_counts == [[0, 2]]


def test_crlf_and_byte_order_mark(write_source, tmp_path):
    src = write_source("bom.csv", "\ufeffa,b,y\r\n1,x,1\r\n\r\n2,z,0\r\n".encode())
    m = ingest(src, str(tmp_path / "s"))
    assert m.feature_names == ["a", "b=x", "b=z"] and m.encoding["header"] is True
    np.testing.assert_array_equal(open_store(tmp_path / "s").read_all().X, [[1, 1, 0], [2, 0, 1]])
    src2 = write_source("bom2.csv", "\ufeff1,x,1\n2,z,0\n".encode())
    m2 = ingest(src2, str(tmp_path / "t"))
    assert m2.encoding["header"] is False and m2.n_rows == 2


def test_list_of_csv_files_each_with_header(write_source, tmp_path):
    a = write_source("part1.csv", "n,c,y\n1,a,1\n2,b,0\n")
    b = write_source("part2.csv", "n,c,y\n3,c,1\n", "gz")
    m = ingest([a, b], str(tmp_path / "s"))
    assert m.n_rows == 3 and m.feature_names == ["n", "c=a", "c=b", "c=c"]
    assert m.source["path"] == [a, b] and [f["path"] for f in m.source["files"]] == [a, b]
    np.testing.assert_array_equal(open_store(tmp_path / "s").read_all().X, [[1, 1, 0, 0], [2, 0, 1, 0], [3, 0, 0, 1]])


def test_txt_with_commas_is_csv(write_source, tmp_path):
    src = write_source("d.txt", "1,2,1\n3,4,-1\n")
    assert ingest(src, str(tmp_path / "s")).source["format"] == "csv"


def test_class_absent_warns(write_source, tmp_path):
    src = write_source("one.csv", "1,a\n2,b\n")
    with pytest.warns(DataWarning, match="no row has label \\+1"):
        m = ingest(src, str(tmp_path / "s"), positive="c")
    assert m.n_positive == 0 and m.n_negative == 2


# ---------------------------------------------------------------------------------
# the bundled real datasets
# ---------------------------------------------------------------------------------
def test_adult_with_group_sex(shared_data, tmp_path):
    train, test = shared_data / "adult.data.gz", shared_data / "adult.test.gz"
    if not (train.exists() and test.exists()):
        pytest.skip("adult not bundled")
    m = ingest(str(train), str(tmp_path / "adult"), positive=">50K", group_col=9)
    assert (m.n_rows, m.n_positive, m.n_negative) == (32561, 7841, 24720)
    assert m.groups == ["Female", "Male"] and [sum(c[i] for c in m.group_counts) for i in (0, 1)] == [10771, 21790]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mt = ingest(str(test), str(tmp_path / "adult_test"), like=str(tmp_path / "adult"), positive=">50K.", skip_rows=1)
    assert (mt.n_rows, mt.n_positive, mt.n_negative) == (16281, 3846, 12435)
    assert mt.feature_names == m.feature_names
    assert [sum(c[i] for c in mt.group_counts) for i in (0, 1)] == [5421, 10860]


@pytest.mark.slow
def test_kdd99_real(shared_data, tmp_path):
    train, test = shared_data / "kddcup.data_10_percent.gz", shared_data / "corrected.gz"
    if not (train.exists() and test.exists()):
        pytest.skip("KDD Cup 99 not bundled")
    m = ingest(str(train), str(tmp_path / "kdd"), negative="normal.")
    assert (m.n_rows, m.n_positive, m.n_negative) == (494021, 396743, 97278)
    assert m.source["sha256"] == "8045aca0d84e70e622d1148d7df782496f6333bf6eb979a1b0837c42a9fd9561"
    cats = {c["name"]: c.get("categories") for c in m.encoding["columns"]}
    assert cats["1"] == ["icmp", "tcp", "udp"] and len(cats["2"]) == 66 and len(cats["3"]) == 11
    assert m.n_features == 38 + 3 + 66 + 11
    # rare-attack task: everything but normal, smurf and neptune is positive
    rare = ingest(str(train), str(tmp_path / "kdd_rare"), negative=["normal.", "smurf.", "neptune."])
    assert rare.n_positive == 494021 - 97278 - 280790 - 107201 == 8752  # 1.77 %
    # corrected.gz has the service "icmp" (2 rows), unseen in the training data
    with pytest.raises(Exception, match="unseen category 'icmp'"):
        ingest(str(test), str(tmp_path / "kdd_test_err"), like=str(tmp_path / "kdd"))
    assert not os.path.exists(tmp_path / "kdd_test_err")
    with pytest.warns(DataWarning, match="'icmp' x2"):
        mt = ingest(str(test), str(tmp_path / "kdd_test"), like=str(tmp_path / "kdd"), unseen="ignore")
    assert (mt.n_rows, mt.n_positive, mt.n_negative) == (311029, 250436, 60593)
    assert mt.encoding["unseen_counts"] == {"2": {"icmp": 2}}
    assert mt.feature_names == m.feature_names
    # spot-check the first source row against the store
    with gzip.open(train, "rt") as f:
        first = f.readline().strip().split(",")
    row = open_store(tmp_path / "kdd").read_shard(0).X[0]
    names = m.feature_names
    assert row[names.index("0")] == float(first[0])
    assert row[names.index(f"2={first[2]}")] == 1 and row[names.index("4")] == float(first[4])
