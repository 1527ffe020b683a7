"""A bad value in one partition of a dask collection: predict's error names the partition and the global row (issue
41, item 5), in one line, on a real LocalCluster (the ``client`` fixture)."""

from __future__ import annotations

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from dpipe import DPipeClassifier
from dpipe.exceptions import InputError

N, PARTS = 40, 4  # partitions of 10 rows: rows 20-29 are partition 2


@pytest.fixture(scope="module")
def data() -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(N, 3)), columns=["a", "b", "c"])
    return X, (X["a"] > 0).to_numpy().astype(int)


def _one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("value, what", [(np.nan, "NaN"), (np.inf, "infinity"), ("oops", "non-numeric value 'oops'")])
def test_a_bad_value_in_a_numeric_dask_dataframe_names_its_partition_and_global_row(client, data, value, what):
    X, y = data
    model = DPipeClassifier().fit(X, y)
    bad = X.astype({"b": object}) if isinstance(value, str) else X.copy()
    bad.loc[25, "b"] = value
    with pytest.raises(ValueError) as exc:
        model.predict(dd.from_pandas(bad, npartitions=PARTS)).compute()
    assert _one_line(exc) == f"X partition 2 of 4 (rows 20-29): row 25, column 'b': {what}; DPipeClassifier needs finite numbers"


def test_good_partitions_score_as_the_whole_frame(client, data):
    X, y = data
    model = DPipeClassifier().fit(X, y)
    np.testing.assert_array_equal(model.predict(dd.from_pandas(X, npartitions=PARTS)).compute(), model.predict(X))
    np.testing.assert_allclose(model.decision_function(da.from_array(X.to_numpy(), chunks=(7, 2))).compute(), model.decision_function(X),
                               rtol=1e-12)


def test_a_dask_array_and_a_sparse_one_name_the_block_and_global_row(client, data):
    X, y = data
    model = DPipeClassifier().fit(X.to_numpy(), y)
    dense = X.to_numpy().copy()
    dense[33, 2] = np.nan
    with pytest.raises(ValueError) as exc:  # row blocks of 15 rows, columns in two chunks
        model.predict(da.from_array(dense, chunks=(15, 2))).compute()
    assert _one_line(exc) == "X partition 2 of 3 (rows 30-39): row 33, column 2: NaN; DPipeClassifier needs finite numbers"
    S = sp.csr_matrix(X.to_numpy())
    S.data[S.indptr[17] + 1] = np.inf  # row 17's second stored value: column 1
    with pytest.raises(ValueError) as exc:
        model.predict(da.from_array(S, chunks=(10, 3), asarray=False)).compute()
    assert _one_line(exc) == "X partition 1 of 4 (rows 10-19): row 17, column 1: infinity; DPipeClassifier needs finite numbers"


def test_a_table_model_names_the_partition_and_global_row_of_a_missing_or_non_numeric_value(client, data):
    X, y = data
    table = X.assign(kind=np.where(y > 0, "x", "y"))
    model = DPipeClassifier(unseen="error").fit(table, y)
    missing = table.copy()
    missing.loc[25, "a"] = np.nan
    with pytest.raises(InputError) as exc:
        model.predict(dd.from_pandas(missing, npartitions=PARTS)).compute()
    assert _one_line(exc) == "X partition 2 of 4 (rows 20-29): row 25: missing value (null) in numeric column 'a'"
    wrong = table.astype({"a": object})
    wrong.loc[38, "a"] = "oops"
    with pytest.raises(InputError) as exc:
        model.predict(dd.from_pandas(wrong, npartitions=PARTS)).compute()
    assert _one_line(exc) == "X partition 3 of 4 (rows 30-39): row 38: non-numeric value 'oops' in numeric column 'a'"
    unseen = table.copy()
    unseen.loc[5, "kind"] = "z"
    with pytest.raises(InputError) as exc:
        model.predict(dd.from_pandas(unseen, npartitions=PARTS)).compute()
    assert _one_line(exc).startswith("X partition 0 of 4 (rows 0-9): row 5: ")


def test_an_unknown_column_is_refused_on_the_driver_before_any_partition_runs(client, data):
    X, y = data
    table = X.assign(kind=np.where(y > 0, "x", "y"))
    model = DPipeClassifier().fit(table, y)
    with pytest.raises(ValueError) as exc:  # raised by predict itself, nothing computed
        model.predict(dd.from_pandas(table.rename(columns={"b": "bb"}), npartitions=PARTS))
    assert _one_line(exc) == ("X: lacks the column(s) ['b'] and has column(s) ['bb'] that fit did not see; "
                              "expected the columns ['a', 'b', 'c', 'kind']")
