"""Fits are bitwise what they were: default fits on the race's a9a and kdd99 stores against coefficients recorded from main.

The stores are the race's (``bench/datasets.py``'s recipes, ingested from the bundled files); the expected coefficients and
intercepts are ``tests/fit/data/bitwise_fits.npz``, recorded on main before the fit layer's refactor (issue 44) by
``python -m tests.fit.test_bitwise_fits``. A refactor of the fit layer (the registry, the records, the dispatch) must not
change a bit of any of them; a change of a solver or a default that is meant to change fits records them again, and says so.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import dpipe
from bench.datasets import DATASETS

pytestmark = pytest.mark.slow

EXPECTED = Path(__file__).with_name("data") / "bitwise_fits.npz"

#: (store, objective, options): the default objective, the smoothed family's L-BFGS route, the moment family, an SVM-perf
#: loss, and a rate objective under a constraint
CASES = [
    ("a9a", "auc", {}),
    ("a9a", "auc-smooth", {}),
    ("a9a", "auc-moment", {}),
    ("a9a", "error", {"eps": 0.05}),
    ("a9a", "error-rate", {"constraints": ["recall >= 0.8"]}),
    ("kdd99", "auc", {}),
    ("kdd99", "auc-smooth", {}),
    ("kdd99", "false-positive-rate", {"constraints": ["recall >= 0.99"]}),
]


def _key(store: str, objective: str) -> str:
    return f"{store}/{objective}"


def _ingest(name: str, data: Path, work: Path) -> str:
    train_file, _, opts, _ = DATASETS[name]
    path = work / f"{name}.zarr"
    dpipe.ingest(str(data / train_file), str(path), **opts)
    return str(path)


def _fit(path: str, objective: str, options: dict) -> tuple[np.ndarray, float]:
    model = dpipe.train(path, objective, engine="local", train_metrics=False, **options)
    return np.asarray(model.coef, dtype=np.float64), float(model.intercept)


@pytest.fixture(scope="module")
def race_stores(tmp_path_factory) -> dict[str, str]:
    from tests.conftest import SHARED_DATA

    if not SHARED_DATA.is_dir():
        pytest.skip(f"bundled data not found at {SHARED_DATA}")
    work = tmp_path_factory.mktemp("race-stores")
    return {name: _ingest(name, SHARED_DATA, work) for name in ("a9a", "kdd99")}


@pytest.mark.parametrize(("store", "objective", "options"), CASES, ids=[_key(s, o) for s, o, _ in CASES])
def test_fit_is_bitwise_unchanged(race_stores, store, objective, options):
    expected = np.load(EXPECTED)
    coef, intercept = _fit(race_stores[store], objective, options)
    key = _key(store, objective)
    np.testing.assert_array_equal(coef, expected[key + "/coef"], err_msg=f"{key}: the coefficients changed")
    assert intercept == float(expected[key + "/intercept"]), (key, intercept, float(expected[key + "/intercept"]))


def main(data: Path, work: Path) -> int:
    """Record :data:`EXPECTED` (every case of :data:`CASES`) from the stores ingested into ``work``."""
    stores = {name: _ingest(name, data, work) for name in ("a9a", "kdd99")}
    out: dict[str, np.ndarray] = {}
    for store, objective, options in CASES:
        coef, intercept = _fit(stores[store], objective, options)
        out[_key(store, objective) + "/coef"] = coef
        out[_key(store, objective) + "/intercept"] = np.array(intercept)
        print(f"{_key(store, objective)}: |coef| {np.linalg.norm(coef):.10g}, intercept {intercept:.10g}")
    EXPECTED.parent.mkdir(exist_ok=True)
    np.savez_compressed(EXPECTED, **out)
    print(f"written {EXPECTED}")
    return 0


if __name__ == "__main__":
    import tempfile

    from tests.conftest import SHARED_DATA

    with tempfile.TemporaryDirectory() as tmp:
        sys.exit(main(SHARED_DATA, Path(tmp)))
