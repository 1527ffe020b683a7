"""Model files validated on load (one-line errors naming the path and field) and outputs created with the user's umask."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

import dpipe
from dpipe.cli.main import main
from dpipe.exceptions import DPipeError, ParameterError
from dpipe.model import LinearModel
from dpipe.testing import write_store

FEATURES = ["x0", "x1"]


def _doc(**changes):
    d = LinearModel([0.5, -0.25], 0.125, feature_names=FEATURES).to_dict()
    for k, v in changes.items():
        if v is _DROP:
            d.pop(k)
        else:
            d[k] = v
    return d


_DROP = object()

MALFORMED = {
    "missing-coef": (_doc(coef=_DROP), "'coef': missing"),
    "missing-intercept": (_doc(intercept=_DROP), "'intercept': missing"),
    "json-list": ([0.5, -0.25], "a JSON object is expected"),
    "coef-strings": (_doc(coef=["0.5", "-0.25"]), "'coef[0]': expected a number"),
    "coef-nested": (_doc(coef=[[0.5], [-0.25]]), "'coef[0]': expected a number"),
    "coef-length": (_doc(coef=[0.5, -0.25, 1.0]), "'feature_names': 2 names for 3 weights"),
    "coef-not-list": (_doc(coef=0.5), "'coef': expected a list"),
    "intercept-string": (_doc(intercept="0.1"), "'intercept': expected a number"),
    "intercept-list": (_doc(intercept=[0.1]), "'intercept': expected a number"),
    "intercept-nan": (_doc(intercept=float("nan")), "'intercept': expected a finite number"),
    "intercept-inf": (_doc(intercept=float("inf")), "'intercept': expected a finite number"),
    "wrong-format": (_doc(format="something-else"), "not a dpipe model file"),
    "bad-version": (_doc(format_version=2), "unsupported model format_version 2"),
    "version-string": (_doc(format_version="1"), "unsupported model format_version '1'"),
    "feature-names-not-strings": (_doc(feature_names=[1, 2]), "'feature_names[0]': expected a string"),
    "params-not-object": (_doc(params=[1]), "'params': expected an object"),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 2)).astype(np.float32)
    y = np.where(X[:, 0] > 0, 1, -1).astype(np.int8)
    y[:2] = [1, -1]
    return write_store(tmp_path_factory.mktemp("s") / "s.zarr", X, y, [32, 32])


def _write_model(path, doc) -> str:
    with open(path, "w") as f:
        if isinstance(doc, str):
            f.write(doc)
        else:
            json.dump(doc, f)  # NaN / Infinity as Python's json writes them
    return str(path)


def _cli_error(capsys, model: str, store: str) -> str:
    capsys.readouterr()
    assert main(["evaluate", model, store]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_model_one_error(tmp_path, capsys, store, case):
    doc, fragment = MALFORMED[case]
    path = _write_model(tmp_path / f"{case}.json", doc)
    with pytest.raises(ParameterError) as info:
        LinearModel.load(path)
    assert isinstance(info.value, (DPipeError, ValueError))
    msg = str(info.value)
    assert msg.startswith(path + ": ") and fragment in msg and "\n" not in msg
    line = _cli_error(capsys, path, store)
    assert line.startswith("dpipe evaluate: error: " + path) and fragment in line


def test_model_path_is_directory(tmp_path, capsys, store):
    path = str(tmp_path / "adir")
    os.mkdir(path)
    with pytest.raises(ParameterError, match="is a directory"):
        LinearModel.load(path)
    line = _cli_error(capsys, path, store)
    assert line.startswith("dpipe evaluate: error: " + path) and "is a directory" in line


@pytest.mark.parametrize("text", ["{not json", "", "\xff\xfe garbage", "[" * 100000])
def test_model_invalid_json(tmp_path, capsys, store, text):
    path = str(tmp_path / "bad.json")
    with open(path, "w", encoding="latin-1") as f:
        f.write(text)
    with pytest.raises(ParameterError, match="not valid JSON"):
        LinearModel.load(path)
    line = _cli_error(capsys, path, store)
    assert line.startswith("dpipe evaluate: error: " + path) and "not valid JSON" in line


def test_valid_model_round_trips(tmp_path, capsys, store):
    m = LinearModel([0.5, -0.25], 0.125, feature_names=FEATURES, objective="auc-moment", params={"C": 1.0},
                    training={"rows": 64}, metrics={"train": {"auc": 0.9}})
    path = m.save(tmp_path / "m.json")
    back = LinearModel.load(path)
    assert back.to_dict() == m.to_dict()
    assert np.array_equal(back.coef, m.coef) and back.intercept == m.intercept and back.digest() == m.digest()
    # integers are numbers too, and optional fields may be absent
    minimal = {"format": "dpipe-linear-model", "format_version": 1, "coef": [1, 0], "intercept": 0}
    back = LinearModel.load(_write_model(tmp_path / "min.json", minimal))
    assert back.coef.tolist() == [1.0, 0.0] and back.feature_names == FEATURES
    capsys.readouterr()
    assert main(["evaluate", str(path), store]) == 0


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_outputs_follow_umask(tmp_path, umask_022):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 2)).astype(np.float32)
    y = np.where(X[:, 1] > 0, 1, -1).astype(np.int8)
    y[:2] = [1, -1]
    model = LinearModel([0.5, -0.25], 0.0, feature_names=FEATURES).save(tmp_path / "m.json")
    assert _mode(model) == 0o644
    for fmt in ("zarr", "parquet"):
        st = write_store(tmp_path / f"s.{fmt}", X, y, [20, 20], format=fmt)
        assert _mode(st) == 0o755, fmt
        for root, dirs, files in os.walk(st):
            for name in dirs:
                assert _mode(os.path.join(root, name)) == 0o755, (fmt, name)
            for name in files:
                assert _mode(os.path.join(root, name)) == 0o644, (fmt, name)
        out = dpipe.predict(model, st, tmp_path / f"p-{fmt}.parquet")
        assert _mode(out) == 0o644, fmt


def test_outputs_follow_a_stricter_umask(tmp_path):
    old = os.umask(0o077)
    try:
        model = LinearModel([0.5, -0.25], 0.0).save(tmp_path / "m.json")
        assert _mode(model) == 0o600
    finally:
        os.umask(old)
