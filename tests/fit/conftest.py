"""Fixtures shared by the fit layer's tests."""

import pytest

from dpipe.testing import tfidf_text_data, write_store


@pytest.fixture(scope="session")
def wide_text(tmp_path_factory):
    """A generated wide sparse text store (Zipf term frequencies, TF-IDF rows): 10^4 training rows x 10^5 features (two
    shards, CSR), and 10^4 test rows of the same draw, as ``(path, X_test, y_test)``."""
    X, y = tfidf_text_data(rows=20_000, features=100_000, per_row=30, signal_terms=300, noise=0.3)
    path = write_store(tmp_path_factory.mktemp("text") / "train.zarr", X[:10_000], y[:10_000], [5_000, 5_000], layout="csr")
    return path, X[10_000:], y[10_000:]
