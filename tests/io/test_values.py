"""Exact values at ingest: what float32 cannot hold is an error naming file and line (or row), never a warning."""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpipe.cli.main import main
from dpipe.exceptions import InputError
from dpipe.io import ingest
from dpipe.io._values import float32_problem

BAD = {
    "1e39": r"1e\+?39.* is too large for float32",
    "-1e39": r"-1e\+?39.* is too large for float32",
    "1e-50": r"1e-50.* is too small for float32",
    "-1e-50": r"-1e-50.* is too small for float32",
}


def _ingest_fails(src, dest, match, **kw) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy cast warning on the way
        with pytest.raises(InputError, match=match) as info:
            ingest(src, str(dest), **kw)
    return str(info.value)


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
@pytest.mark.parametrize("value", list(BAD))
def test_svmlight_value_beyond_float32(write_source, tmp_path, assert_clean, value, fmt):
    src = write_source("a.svm", f"1 1:0.5 2:1\n# a comment\n-1 1:2 2:{value}\n1 1:1\n")
    msg = _ingest_fails(src, tmp_path / "s", BAD[value], format=fmt)
    assert msg.startswith(f"{src}, line 3: ") and "feature 2" in msg
    assert_clean(tmp_path / "s")


@pytest.mark.parametrize("value", list(BAD))
def test_csv_value_beyond_float32(write_source, tmp_path, assert_clean, value):
    src = write_source("a.csv", f"x,z,y\n1,2,1\n3,{value},0\n4,5,1\n")
    msg = _ingest_fails(src, tmp_path / "s", BAD[value], label="y")
    assert msg.startswith(f"{src}, line 3: ") and "column 'z'" in msg
    assert_clean(tmp_path / "s")


def test_csv_weight_beyond_float32(write_source, tmp_path, assert_clean):
    src = write_source("w.csv", "x,w,y\n1,1,1\n2,1e39,0\n")
    msg = _ingest_fails(src, tmp_path / "s", r"too large for float32", label="y", weight_col="w")
    assert msg.startswith(f"{src}, line 3: ") and "column 'w'" in msg
    assert_clean(tmp_path / "s")


@pytest.mark.parametrize("value", [1e39, -1e39, 1e-50, -1e-50])
def test_parquet_value_beyond_float32(tmp_path, assert_clean, value):
    src = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": [1.0, 2.0, 3.0], "z": [0.0, 1.0, value], "y": ["a", "b", "a"]}), src)
    msg = _ingest_fails(str(src), tmp_path / "s", r"float32", label="y", positive="a")
    assert msg.startswith(f"{src}: row 3: ") and "column 'z'" in msg
    assert_clean(tmp_path / "s")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_source_values_refused(write_source, tmp_path, assert_clean, value):
    svm = write_source("a.svm", f"1 1:0.5\n-1 1:{value}\n")
    msg = _ingest_fails(svm, tmp_path / "s1", r"malformed value")
    assert msg.startswith(f"{svm}, line 2: ")
    csv = write_source("a.csv", f"x,z,y\n1,2,1\n3,{value},0\n4,5,1\n5,6,0\n")
    msg = _ingest_fails(csv, tmp_path / "s2", r"non-finite value", label="y")
    assert msg.startswith(f"{csv}, line 3: ") and "column 'z'" in msg
    par = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": [1.0, 2.0], "z": [float(value), 1.0], "y": ["a", "b"]}), par)
    msg = _ingest_fails(str(par), tmp_path / "s3", r"non-finite value", label="y", positive="a")
    assert msg.startswith(f"{par}: row 1: ") and "column 'z'" in msg
    for d in ("s1", "s2", "s3"):
        assert_clean(tmp_path / d)


def test_values_that_fit_float32_are_kept(write_source, tmp_path):
    # the largest float32, a subnormal, and zero are not errors
    src = write_source("ok.csv", "x,y\n3.4028234e38,1\n1e-40,0\n0,1\n-0.0,0\n")
    m = ingest(src, str(tmp_path / "s"), label="y")
    assert m.n_rows == 4


def test_cli_one_line(write_source, tmp_path, capsys):
    src = write_source("a.svm", "1 1:1\n-1 1:1e39\n")
    assert main(["ingest", src, str(tmp_path / "s")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"dpipe ingest: error: {src}, line 2: the value 1e+39 of feature 1 is too large for float32 (beyond 3.4028235e+38: it would be stored as infinite)"]
    assert not (tmp_path / "s").exists()


def test_float32_problem():
    assert float32_problem(np.array([0.0, 1.0, -3.4028234e38, 1e-45])) is None
    assert float32_problem(np.array([1.0, 1e39]))[0] == 1
    assert float32_problem(np.array([1e-50, 1e39]))[0] == 0
    assert float32_problem(np.zeros(0)) is None
