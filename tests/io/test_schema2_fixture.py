"""Stores written before the sparse layout (manifest schema 2, dpipe at de5fe4e, checked in under tests/fixtures)
still open, verify and train as they did: the model trained now is the one a fresh store of the same rows gives, and the
model recorded then to what the fit's stop determines."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import dpipe
from dpipe.testing import write_store

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
    lam = 1e-2
    now = dpipe.train(store, "auc-smooth", engine="local", lam=lam, tol=1e-9, max_iter=2000)
    sizes = [b - a for a, b in m.shard_bounds]
    fresh = dpipe.train(write_store(tmp_path / "fresh.zarr", data.X, data.y, sizes, weight=data.weight), "auc-smooth", engine="local", lam=lam,
                        tol=1e-9, max_iter=2000)
    np.testing.assert_array_equal(now.coef, fresh.coef)  # the old store reads as the same rows, weights and shards
    # against the model recorded then (other kernels: other rounding): J to 1e-10, and coef as far as that J determines it.
    # Both fits end at L-BFGS's rounding floor; with the ridge lam, a J within dJ of the minimum is a w within
    # sqrt(2 dJ / lam) of the minimizer, so two such fits are within twice that
    assert now.fit["fun"] == pytest.approx(before.fit["fun"], rel=1e-10)
    dJ = 1e-10 * abs(before.fit["fun"])
    assert np.linalg.norm(now.coef - before.coef) <= 2 * np.sqrt(2 * dJ / lam)
    assert now.training["manifest_sha256"] == before.training["manifest_sha256"]  # the digest of a schema-2 manifest is unchanged
