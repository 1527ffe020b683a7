"""The JSON model artifact."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from dpipe.model import MODEL_FORMAT_VERSION, LinearModel


def test_save_load_round_trip(tmp_path):
    m = LinearModel([1.5, -2.0, 0.25], 0.5, feature_names=["a", "b", "c"], objective="auc-moment", params={"lam": 1e-3})
    path = m.save(tmp_path / "m.json")
    with open(path) as f:
        doc = json.load(f)
    assert doc["format"] == "dpipe-linear-model" and doc["format_version"] == MODEL_FORMAT_VERSION
    back = LinearModel.load(path)
    np.testing.assert_array_equal(back.coef, m.coef)
    assert back.intercept == 0.5 and back.params == {"lam": 1e-3} and back.digest() == m.digest()
    X = np.array([[1.0, 1.0, 4.0], [0.0, 1.0, 0.0]])
    np.testing.assert_allclose(back.decision_function(X), [1.5 - 2 + 1 + 0.5, -1.5])
    np.testing.assert_array_equal(back.predict(X), [1, -1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_load_rejects_other_files(tmp_path):
    (tmp_path / "x.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="not a dpipe model file"):
        LinearModel.load(tmp_path / "x.json")
    (tmp_path / "y.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        LinearModel.load(tmp_path / "y.json")
    doc = LinearModel([1.0], 0.0).to_dict()
    doc["format_version"] = 99
    with pytest.raises(ValueError, match="unsupported model format_version 99"):
        LinearModel.from_dict(doc)


def test_shape_errors():
    m = LinearModel([1.0, 2.0])
    with pytest.raises(ValueError, match=r"expected \(n, 2\)"):
        m.decision_function(np.ones((3, 3)))
    with pytest.raises(ValueError, match="finite"):
        LinearModel([np.nan])


def test_loading_and_scoring_needs_only_numpy(tmp_path):
    path = LinearModel([1.0, -1.0], 0.25).save(tmp_path / "m.json")
    code = (
        "import sys\n"
        "from dpipe.model import LinearModel\n"
        f"m = LinearModel.load({str(path)!r})\n"
        "print(m.decision_function([[1.0, 2.0]])[0])\n"
        "heavy = [k for k in ('dask', 'distributed', 'zarr', 'pyarrow', 'scipy', 'numba') if k in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert float(out[0]) == -0.75
    assert out[1] == "[]"


def test_encode_records_one_hot_with_vocabulary():
    enc = {
        "kind": "tabular",
        "columns": [
            {"name": "age", "role": "feature", "type": "numeric"},
            {"name": "color", "role": "feature", "type": "categorical", "categories": ["blue", "red"]},
            {"name": "y", "role": "label", "type": "categorical"},
        ],
    }
    m = LinearModel([1.0, 10.0, 100.0], 0.0, feature_names=["age", "color=blue", "color=red"], encoding=enc)
    X = m.encode_records([{"age": "3", "color": "red"}, ["4", " blue", "yes"], {"age": 1, "color": "green"}])
    np.testing.assert_array_equal(X, [[3, 0, 1], [4, 1, 0], [1, 0, 0]])
    np.testing.assert_array_equal(m.score_records([{"age": 2, "color": "blue"}]), [12.0])
