"""``dpipe predict``'s ``label`` column is in the user's labels: the training data's value of each class (strings stay
strings, numbers numbers), -1 / +1 only where a class came from several values; ``y`` stays the store's -1 / +1."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

import dpipe


def _csv(path, labels):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(len(labels), 2))
    rows = ["a,b,target"] + [f"{u:.6f},{v:.6f},{t}" for (u, v), t in zip(x, labels)]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


@pytest.mark.parametrize(("values", "rule", "expected"), [
    (["no", "yes"], {"positive": "yes"}, ["no", "yes"]),
    (["0", "1"], {}, [0, 1]),  # binary 0/1: the numbers as given
    (["normal.", "smurf.", "neptune."], {"negative": "normal."}, [-1, 1]),  # +1 from two values: no one label
])
def test_predict_writes_the_users_labels(tmp_path, values, rule, expected):
    labels = [values[i % len(values)] for i in range(300)]
    store = str(tmp_path / "s.zarr")
    dpipe.ingest(_csv(tmp_path / "d.csv", labels), store, label="target", **rule)
    model = dpipe.train(store, "auc-moment", engine="local")
    out = dpipe.predict(model, store, tmp_path / "p.parquet", engine="local")
    table = pq.read_table(out).to_pydict()
    positive = np.asarray(table["score"]) > 0
    assert positive.any() and not positive.all()
    assert table["label"] == [expected[int(p)] for p in positive]
    assert set(table["y"]) == {-1, 1}
