"""DPipeClassifier on tables: pandas DataFrames with string / categorical columns and pyarrow Tables,
encoded by ingest's own classes, so the estimator and a store ingested from the same rows give one model.

References: the store ingested from a real file (CSV, Parquet) and trained by ``dpipe.train``.
"""

from __future__ import annotations

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.base import clone

import dpipe
from dpipe import DPipeClassifier
from dpipe.exceptions import DataWarning, InputError, ParameterError
from dpipe.io import ingest

LABELS = np.array(["no", "yes"])


def _assert_same_model(est: DPipeClassifier, model, rtol: float = 1e-10) -> None:
    scale = np.abs(model.coef).max()
    assert est.feature_names_ == list(model.feature_names)
    assert np.abs(est.coef_[0] - model.coef).max() <= rtol * scale
    assert abs(est.intercept_[0] - model.intercept) <= rtol * scale


@pytest.fixture(scope="module")
def frame():
    """Mixed columns: numbers, padded strings with a missing one, a pandas category, a boolean."""
    rng = np.random.default_rng(5)
    n = 3000
    colour = rng.choice(["red", " green", "blue "], n).astype(object)
    colour[7] = None  # a missing string: the category "?"
    df = pd.DataFrame({
        "age": rng.integers(18, 90, n),
        "income": rng.normal(50, 15, n),
        "colour": colour,
        "size": pd.Categorical(rng.choice(["S", "M", "L"], n)),
        "member": rng.random(n) < 0.3,
    })
    score = 0.04 * (df["age"] - 50) + 0.05 * (df["income"] - 50) + (df["size"] == "L") - (colour == "red") + rng.normal(0, 1, n)
    return df, LABELS[(score > 0).astype(int)]


@pytest.fixture(scope="module")
def parquet_store(frame, tmp_path_factory):
    """The same rows written to Parquet (label column included) and ingested by ``dpipe ingest``."""
    df, y = frame
    d = tmp_path_factory.mktemp("tables")
    pq.write_table(pa.Table.from_pandas(df.assign(label=y), preserve_index=False), d / "rows.parquet")
    ingest(str(d / "rows.parquet"), str(d / "rows.zarr"), label="label", positive="yes", shard_rows=65536)
    return str(d / "rows.zarr")


@pytest.mark.parametrize("objective", ["auc", "auc-moment", "error-moment"])
def test_a_dataframe_with_string_columns_gives_the_ingested_store_s_model(frame, parquet_store, objective):
    df, y = frame
    est = DPipeClassifier(objective).fit(df, y)
    model = dpipe.train(parquet_store, objective, engine="local")
    _assert_same_model(est, model)
    assert est.feature_names_[:4] == ["age", "income", "colour=?", "colour=blue"]  # stripped, sorted, a missing string "?"
    assert list(est.feature_names_in_) == list(df.columns) and est.n_features_in_ == 5
    assert set(est.predict(df)) == set(LABELS)  # the user's labels


def test_a_pyarrow_table_and_a_dask_dataframe_fit_and_score_as_the_dataframe(frame):
    df, y = frame
    est = DPipeClassifier().fit(df, y)
    table = pa.Table.from_pandas(df, preserve_index=False)
    np.testing.assert_array_equal(DPipeClassifier().fit(table, y).coef_, est.coef_)
    np.testing.assert_array_equal(est.decision_function(table), est.decision_function(df))
    lazy = dd.from_pandas(df, npartitions=3)
    np.testing.assert_array_equal(DPipeClassifier().fit(lazy, dd.from_array(y, chunksize=1000)).coef_, est.coef_)
    scores = est.decision_function(lazy)
    assert hasattr(scores, "compute")  # scored partition by partition, computed on demand
    np.testing.assert_array_equal(scores.compute(), est.decision_function(df))
    np.testing.assert_array_equal(est.predict(lazy).compute(), est.predict(df))


def test_the_model_scores_raw_records_and_tables_as_the_estimator(frame, tmp_path):
    df, y = frame
    est = DPipeClassifier().fit(df, y)
    path = est.to_model().save(tmp_path / "m.json")
    model = dpipe.LinearModel.load(path)
    head = df.iloc[:50]
    expected = est.decision_function(head)
    np.testing.assert_array_equal(model.score_records(head), expected)
    np.testing.assert_array_equal(model.score_records(head.to_dict("records")), expected)
    raw = [{k: (str(v) if k == "age" else v) for k, v in r.items()} for r in head.to_dict("records")]  # numbers as text, as a CSV reader gives them
    np.testing.assert_array_equal(model.score_records(raw), expected)
    assert model.encoding["label"] == {"classes": ["no", "yes"]} and model.encoding["source_format"] == "table"


def test_an_unseen_category_is_an_error_or_zeros_as_unseen_says(frame):
    df, y = frame
    new = df.iloc[:4].copy()
    new["colour"] = ["red", "purple", "blue", "red"]
    with pytest.raises(InputError, match=r"^X: row 1: unseen category 'purple' in column 'colour'.*unseen='ignore'"):
        DPipeClassifier(unseen="error").fit(df, y).predict(new)
    warned = DPipeClassifier().fit(df, y)  # the default: scored as no category, said once
    with pytest.warns(DataWarning, match=r"^X: 1 value in 4 rows is a category fit did not see, scored as no category .*'colour': 'purple' \(1 row\)"):
        by_default = warned.decision_function(new)
    est = DPipeClassifier(unseen="ignore").fit(df, y)
    purple = est.decision_function(new)[1]
    dropped = est.intercept_[0] + sum(est.coef_[0][est.feature_names_.index(f)] * v for f, v in
                                      [("age", new["age"].iloc[1]), ("income", float(np.float32(new["income"].iloc[1]))), (f"size={new['size'].iloc[1]}", 1),
                                       ("member", float(new["member"].iloc[1]))])
    assert purple == pytest.approx(dropped, rel=1e-12)  # all-zero one-hot: no colour weight (features are float32, as stored)
    np.testing.assert_array_equal(by_default, est.decision_function(new))
    assert clone(est).get_params()["unseen"] == "ignore"


def test_table_errors_name_the_column_and_row(frame):
    df, y = frame
    est = DPipeClassifier().fit(df, y)
    missing = df.iloc[:3].copy()
    missing.loc[2, "income"] = np.nan
    with pytest.raises(InputError, match=r"^X: row 2: missing value \(null\) in numeric column 'income'"):
        est.predict(missing)
    with pytest.raises(ValueError, match=r"^X: lacks the column\(s\) \['member'\]"):
        est.predict(df.drop(columns="member"))
    with pytest.raises(ValueError, match=r"fitted on a table with the columns .*; pass a pandas DataFrame or pyarrow Table"):
        est.predict(np.zeros((2, 5)))
    with pytest.raises(ValueError, match=r"^X: a column cannot be read as one type"):
        DPipeClassifier().fit(pd.DataFrame({"a": [1, "x", 2.5], "b": ["u", "v", "w"]}), ["p", "q", "p"])
    with pytest.raises(ParameterError, match=r"The 'unseen' parameter of DPipeClassifier must be one of 'warn', 'error', 'ignore'. Got 'skip'"):
        DPipeClassifier(unseen="skip").fit(df, y)
    model = est.to_model()
    with pytest.raises(ValueError, match=r"^LinearModel: records: record 1 lacks the column\(s\) \['member'\]"):
        model.score_records([df.iloc[0].to_dict(), df.iloc[1].drop("member").to_dict()])
    with pytest.raises(ValueError, match=r"^LinearModel: records: record 0, column 'income': 'n/a' is not a number"):
        model.score_records([{**df.iloc[0].to_dict(), "income": "n/a"}])


def test_eval_set_and_early_stopping_take_tables(frame):
    df, y = frame
    est = DPipeClassifier("auc-smooth", solver="lbfgs", early_stopping_rounds=3).fit(df.iloc[:2000], y[:2000], eval_set=[(df.iloc[2000:], y[2000:])])
    assert 1 <= est.best_iteration_ <= est.fit_result_.nit


def test_adult_as_a_pandas_dataframe_gives_the_ingested_store_s_model(shared_data, tmp_path):
    df = pd.read_csv(shared_data / "adult.data.gz", header=None)  # as a user reads it: strings keep their leading blanks
    X, y = df.iloc[:, :14], df.iloc[:, 14]
    ingest(str(shared_data / "adult.data.gz"), str(tmp_path / "adult.zarr"), header=False, label=14, positive=">50K", shard_rows=65536)
    model = dpipe.train(str(tmp_path / "adult.zarr"), engine="local")
    est = DPipeClassifier().fit(X, y)
    _assert_same_model(est, model)
    assert list(est.classes_) == [" <=50K", " >50K"]
    assert set(est.predict(X.iloc[:200])) == {" <=50K", " >50K"}  # the label strings as given
    np.testing.assert_array_equal(est.to_model().score_records(X.iloc[:100].to_dict("records")), est.decision_function(X.iloc[:100]))


def test_unseen_set_for_numbers_only_is_refused():
    X = np.random.default_rng(0).normal(size=(50, 3))
    y = LABELS[(X[:, 0] > 0).astype(int)]
    with pytest.raises(ParameterError, match=r"^The 'unseen' parameter of DPipeClassifier applies to tables .* unseen='ignore' would do nothing"):
        DPipeClassifier(unseen="ignore").fit(X, y)
    with pytest.raises(ParameterError, match=r"'unseen' parameter of DPipeClassifier applies to tables"):
        DPipeClassifier(unseen="ignore").fit(pd.DataFrame(X, columns=["a", "b", "c"]), y)  # all numeric: a matrix, not a table
    assert DPipeClassifier().fit(X, y).coef_.shape == (1, 3)
