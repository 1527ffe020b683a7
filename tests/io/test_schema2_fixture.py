"""Stores written before the sparse layout (manifest schema 2, dpipe at de5fe4e, checked in under tests/fixtures)
still open, verify and train as they did: the model recorded then is the model trained now."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import dpipe

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_schema2_store_reads_verifies_and_trains_as_before(tmp_path, fmt):
    store = shutil.copytree(FIXTURES / f"schema2.{fmt}", tmp_path / f"s.{fmt}")  # the checked-in copy stays untouched
    st = dpipe.open_store(store, verify=True)
    m = st.manifest
    assert (m.schema_version, m.layout, m.shard_nnz, m.n_rows, m.n_features) == (2, "dense", None, 240, 5)
    data = st.read_all()
    assert isinstance(data.X, np.ndarray) and data.X.shape == (240, 5) and data.weight is not None
    before = dpipe.LinearModel.load(FIXTURES / f"schema2.{fmt}.model.json")
    now = dpipe.train(store, "auc-smooth", engine="local", lam=1e-2, tol=1e-9, max_iter=2000)
    # the fit is determined to L-BFGS's stop (tests/fit/test_sample_weights.py: 1e-6 on coef, 1e-10 on J), not to one BLAS's rounding
    np.testing.assert_allclose(now.coef, before.coef, rtol=1e-6, atol=1e-9)
    assert now.fit["fun"] == pytest.approx(before.fit["fun"], rel=1e-10)
    assert now.training["manifest_sha256"] == before.training["manifest_sha256"]  # the digest of a schema-2 manifest is unchanged
