"""The benchmark harness: summaries, result files, suite arithmetic and the command line (no timings asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench import SUITES
from bench._harness import Config, fmt_spread, spread, write_results
from bench.suites import convergence, out_of_core, scaling

REPO = Path(__file__).resolve().parents[1]


def test_spread_is_median_min_max_of_the_runs():
    s = spread([3.0, 1.0, 2.0, 10.0])
    assert (s["median"], s["min"], s["max"]) == (2.5, 1.0, 10.0)
    assert s["runs"] == [3.0, 1.0, 2.0, 10.0]
    assert fmt_spread(s) == "2.50 (1.00-10.00)"
    assert fmt_spread(spread([0.1234]), 1e3, 0) == "123"
    assert fmt_spread(None) == "-"


def test_write_results_writes_json_and_markdown_without_leftovers(tmp_path):
    cfg = Config(quick=True, repeats=2, data_dir=tmp_path, work=tmp_path, out_dir=tmp_path / "out")
    paths = write_results(cfg, "demo", {"value": np.float64(1.5)}, "| a |\n|---|\n")
    assert [p.name for p in paths] == ["demo.json", "demo.md"]
    payload = json.loads(paths[0].read_text())
    assert payload["suite"] == "demo" and payload["quick"] is True and payload["value"] == 1.5 and payload["machine"]["cpus"] >= 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["demo.json", "demo.md"]


def test_time_to_j_takes_the_first_iteration_within_tolerance():
    runs = [
        {"time": [1.0, 2.0, 3.0], "J": [2.0, 1.0005, 1.0], "metric": [0.5, 0.8, 0.9], "nit": 3, "wall_seconds": 4.0},
        {"time": [1.5, 2.5, 3.5], "J": [2.0, 1.01, 1.0009], "metric": [0.5, 0.7, 0.85], "nit": 3, "wall_seconds": 5.0},
    ]
    s = convergence._summary(runs, j_best=1.0)
    assert s["per_run_time_to_J"] == [2.0, 3.5]
    assert s["time_to_J"]["median"] == pytest.approx(2.75)
    assert s["metric_best"] == 0.9 and s["J_min"] == 1.0
    runs[1]["J"][-1] = 1.01
    assert convergence._summary(runs, j_best=1.0)["time_to_J"] is None  # one run never got there


def test_ratio_to_cutting_plane_uses_its_lowest_j_per_round():
    cp = [{"time": [1.0, 2.0, 4.0], "J": [3.0, 1.5, 1.2]}, {"time": [1.0, 3.0, 6.0], "J": [3.0, 1.5, 1.2]}]
    fast = [{"time": [0.5, 1.0], "J": [2.0, 1.1]}, {"time": [0.5, 2.0], "J": [2.0, 1.1]}]
    s = convergence.ratios_to_cutting_plane(fast, cp)
    assert s["runs"] == [4.0, 3.0]  # 4 s / 1 s and 6 s / 2 s
    slow = [{"time": [0.5, 1.0], "J": [2.0, 1.3]}, {"time": [0.5, 2.0], "J": [2.0, 1.1]}]
    assert convergence.ratios_to_cutting_plane(slow, cp) is None


def test_scaling_exponent_and_out_of_core_size():
    n = [1e5, 1e6, 1e7]
    assert scaling.exponent(n, [0.01 * (x / 1e5) ** 1.1 for x in n]) == pytest.approx(1.1)
    rows = out_of_core._rows_for(500 * 2**20)
    assert rows * out_of_core.FEATURES * 4 >= 3 * 2 * 500 * 2**20
    assert rows % 1_000_000 == 0


def test_command_line_lists_suites_and_rejects_bad_options():
    help_text = subprocess.run([sys.executable, "-m", "bench", "--help"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    for name in SUITES:
        assert name in help_text
    bad = subprocess.run([sys.executable, "-m", "bench", "scaling", "--repeats", "0"], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2 and "--repeats must be at least 1" in bad.stderr
    unknown = subprocess.run([sys.executable, "-m", "bench", "nosuch"], cwd=REPO, capture_output=True, text=True)
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr


def test_dask_ml_baseline_leaves_the_test_array_alone(client, tmp_path):
    """dask-ml's StandardScaler scales a NumPy array in place; the suite must score a copy."""
    pytest.importorskip("dask_ml")
    import warnings

    import dpipe
    from bench.suites import baselines
    from dpipe.metrics import roc_auc_score
    from dpipe.testing import write_store

    generated = tmp_path / "g.zarr"
    dpipe.make_data(str(generated), rows=3000, features=6, seed=1, shard_rows=1000)
    data = dpipe.open_store(str(generated)).read_all()
    # two constant columns, as kdd99 has: dask-glm refuses them, so the suite drops them
    X = np.hstack([data.X, np.zeros((3000, 1), np.float32), np.full((3000, 1), 2.0, np.float32)]).astype(np.float64)
    store = write_store(tmp_path / "s.zarr", X.astype(np.float32), data.y, [1000, 1000, 1000])
    before = X.copy()
    with warnings.catch_warnings(), client.as_current():  # dask-ml computes on the current client, as in the suite
        warnings.simplefilter("ignore")
        Xd, yd = baselines._dask_arrays(client, str(store))
        score, info = baselines._dask_ml(client, Xd, yd)
        s = score(X)
    np.testing.assert_array_equal(X, before)
    assert info["constant_columns_dropped"] == 2
    reference, _ = baselines._sklearn("sklearn LogisticRegression", X, data.y)  # the same model by scikit-learn
    assert roc_auc_score(data.y, s) == pytest.approx(roc_auc_score(data.y, reference.decision_function(X)), abs=2e-3)


def test_cost_model_recovers_known_constants_and_saturates_at_the_driver():
    """Results made from known constants give those constants back; the driver-merged route stops gaining from workers."""
    from bench.suites import cost_model

    t0, c_round, c_host, c_pass, c_driver, e2, x = 0.01, 20e-9, 150e-9, 90e-9, 70e-9, 0.8, 16.0
    rows = []
    for n in (100_000, 1_000_000, 5_000_000, 10_000_000):
        host = n / 2 * c_host / e2  # what each of 2 hosts spends at efficiency e2
        passes = n / 2 * c_pass / e2
        parts = {"seconds_host_score": 0.6 * passes, "seconds_host_gradient": 0.4 * passes, "seconds_host_exchange": host - passes}
        rows.append({"rows": n, "auc-smooth exchange": "workers", "auc-smooth parts": parts, "auc-smooth bytes exchanged": n * x / 2,
                     "auc-smooth": {"median": t0 + n * c_round / 2 + host}, "auc-smooth, driver-merged": {"median": t0 + n * c_driver + passes}})
    workers = {"rows": 5_000_000, "ceiling": {"products": 2 * e2}}
    c = cost_model.fit({"rows": rows}, workers)
    for key, want in (("t0", t0), ("t0_driver", t0), ("c_round", c_round), ("c_host", c_host), ("c_pass", c_pass), ("c_driver", c_driver), ("e2", e2),
                      ("bytes_exchanged_per_row", x)):
        assert c[key] == pytest.approx(want, rel=1e-6), key
    n = 1e9
    assert cost_model.driver_route(c, n, 256) > 0.9 * n * c_driver  # bounded below by the driver's serial work
    assert cost_model.workers_route(c, n, 256) < cost_model.driver_route(c, n, 256) / 20  # the workers' route keeps falling as 1 / W
