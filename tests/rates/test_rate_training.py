"""Rate constraints from the command line, the Python API and the estimator (issue 15, every form)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from rate_helpers import grouped_data

import dpipe
from dpipe import rates
from dpipe.cli.main import main
from dpipe.exceptions import ParameterError
from dpipe.testing import write_store


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("rate-train")
    X, y, g = grouped_data(3000, 1)
    train = write_store(d / "train.zarr", X, y, [1000, 2000], group=g, groups=["M", "F"])
    Xp, yp, gp = grouped_data(2000, 2)
    pool = write_store(d / "pool.zarr", Xp, yp, [2000], group=gp, groups=["M", "F"])
    deployed = str(d / "deployed.json")
    dpipe.train(pool, "auc-moment", engine="local", out=deployed)
    return {"dir": d, "train": train, "pool": pool, "deployed": deployed, "X": X, "y": y, "g": g, "Xp": Xp}


def _selection(model, X, g):
    pred = model.decision_function(X.astype(np.float64)) > 0
    return pred, pred[g == 1].mean(), pred[g == 0].mean()


def test_cli_fairness_constraint_holds_and_is_reported(data, tmp_path, capsys):
    out = tmp_path / "m.json"
    c = "positive_rate(group=M) >= 0.8 * positive_rate(group=F)"  # the model left alone selects F far more often
    assert main(["-q", "train", data["train"], "--objective", "error-rate", "--constraint", c, "--out", str(out), "--engine", "local"]) == 0
    printed = capsys.readouterr().out
    assert f"constraint {c}: holds on the training data" in printed
    model = dpipe.LinearModel.load(out)
    _, f, m = _selection(model, data["X"], data["g"])
    assert m >= 0.8 * f
    (report,) = model.fit["info"]["constraints"]
    assert report["text"] == c and report["satisfied"] and report["value"] == pytest.approx(0.8 * f - m, abs=1e-12)
    assert model.params["constraints"] == [c] and model.fit["success"]
    assert model.fit["info"]["lam"] == pytest.approx(1.0 / len(data["X"]), rel=1e-12)  # the ridge it used, 1 / n by default, recorded
    # without the constraint the ratio is lower: the constraint did bind
    free = dpipe.train(data["train"], "error-rate", engine="local", train_metrics=False, constraints=["positive_rate(group=F) >= 0"])
    _, f0, m0 = _selection(free, data["X"], data["g"])
    assert m0 < 0.8 * f0


def test_cli_churn_on_an_unlabelled_pool_and_a_constraints_file(data, tmp_path, capsys):
    spec = tmp_path / "constraints.yaml"
    spec.write_text(f'- churn("{data["deployed"]}", on=pool) <= 0.05\n')
    out = tmp_path / "m.json"
    argv = ["-q", "train", data["train"], "--objective", "error-rate", "--constraint", "recall >= 0.6", "--constraints-file", str(spec),
            "--dataset", f"pool={data['pool']}", "--out", str(out), "--engine", "local"]
    assert main(argv) == 0
    model = dpipe.LinearModel.load(out)
    deployed = dpipe.LinearModel.load(data["deployed"])
    churn = np.mean(model.predict(data["Xp"].astype(np.float64)) != deployed.predict(data["Xp"].astype(np.float64)))
    assert churn <= 0.05
    recall = np.mean(model.predict(data["X"].astype(np.float64))[data["y"] == 1] == 1)
    assert recall >= 0.6
    assert [r["satisfied"] for r in model.fit["info"]["constraints"]] == [True, True]
    assert model.fit["info"]["datasets"]["pool"] == data["pool"]


@pytest.mark.parametrize("argv, message", [
    (["--objective", "auc-smooth", "--constraint", "recall >= 0.9"], "--constraint does not apply to objective 'auc-smooth'"),
    (["--objective", "error-rate", "--constraint", "recall >= 0.9", "--dataset", "pool"], "--dataset 'pool': expected ALIAS=STORE"),
    (["--objective", "error-rate", "--constraint", "coverage(on=pool) <= 0.1"], "no dataset 'pool'"),
    (["--objective", "error-rate", "--constraint", "positive_rate(group=X) <= 0.5"], "unknown group 'X'"),
    (["--objective", "error-rate", "--constraint", "recall > 0.9"], "use <= or >="),
    (["--objective", "error-rate", "--calibrate"], "--calibrate does not apply to objective 'error-rate'"),
    (["--objective", "error-rate", "--validation", "VALIDATION"], "--validation applies to the smoothed and structural"),
    (["--objective", "error-rate", "--constraint", "coverage(on=wide) <= 0.5", "--dataset", "wide=WIDE"], "has 5 features, the training store 4"),
])
def test_bad_specifications_are_one_line(data, tmp_path, capsys, argv, message):
    out = tmp_path / "m.json"
    wide = write_store(tmp_path / "wide.zarr", np.zeros((10, 5), np.float32), np.array([1, -1] * 5, np.int8), [10])
    argv = [a.replace("VALIDATION", data["pool"]).replace("WIDE", wide) for a in argv]
    assert main(["-q", "train", data["train"], *argv, "--out", str(out), "--engine", "local"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_python_api_takes_constraint_objects(data):
    model = dpipe.train(data["train"], "false-negative-rate", engine="local", train_metrics=False,
                        constraints=[rates.false_positive_rate() <= 0.05])
    pred = model.predict(data["X"].astype(np.float64)) == 1
    assert pred[data["y"] == -1].mean() <= 0.05
    assert model.fit["info"]["constraints"][0]["satisfied"]


def test_estimator_with_groups(data):
    X, y, g = data["X"], data["y"], np.where(data["g"] == 1, "F", "M")
    c = "positive_rate(group=M) >= 0.8 * positive_rate(group=F)"
    clf = dpipe.DPipeClassifier(objective="error-rate", constraints=[c])
    clf.fit(X, y, groups=g)
    pred = clf.predict(X) == 1
    assert pred[g == "M"].mean() >= 0.8 * pred[g == "F"].mean()
    assert clf.fit_result_.success and clf.fit_params_["constraints"] == [c]
    with pytest.raises(ParameterError, match="'groups' argument of DPipeClassifier.fit applies to the rate objectives"):
        dpipe.DPipeClassifier(objective="auc-moment").fit(X, y, groups=g)
    with pytest.raises(ParameterError, match="has no group column"):
        dpipe.DPipeClassifier(objective="error-rate", constraints=["positive_rate(group=F) >= 0.5"]).fit(X, y)


def test_an_unsatisfiable_constraint_warns_and_reports(data):
    with pytest.warns(dpipe.ConvergenceWarning, match="not satisfied on the training data"):
        model = dpipe.train(data["train"], "error-rate", engine="local", train_metrics=False,
                            constraints=["recall >= 0.999", "false_positive_rate <= 0.001"])
    assert not model.fit["success"] and "NOT satisfied" in model.fit["message"]
    assert not all(r["satisfied"] for r in model.fit["info"]["constraints"])
    json.dumps(model.fit)  # the report is plain JSON


def test_the_command_line_exits_4_when_a_constraint_is_not_met_and_writes_the_model(data, tmp_path, capsys):
    out = tmp_path / "m.json"
    argv = ["-q", "train", data["train"], "--objective", "error-rate", "--constraint", "recall >= 0.999", "--constraint",
            "false_positive_rate <= 0.001", "--out", str(out), "--engine", "local"]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpipe.ConvergenceWarning)
        assert main(argv) == 4
    assert "NOT satisfied on the training data" in capsys.readouterr().err and out.exists()
    assert not dpipe.LinearModel.load(out).fit["success"]


def test_evaluate_by_group_and_constraints_count_what_they_say(data, tmp_path, capsys):
    model_path = tmp_path / "m.json"
    model = dpipe.train(data["train"], "auc-moment", engine="local", out=model_path)
    c = [f'churn("{data["deployed"]}", on=pool) <= 0.05', "positive_rate(group=M) >= 0.8 * positive_rate(group=F)", "recall >= 0.5"]
    got = dpipe.evaluate(model_path, data["train"], engine="local", by_group=True, constraints=c, datasets={"pool": data["pool"]})
    X, y, g = data["X"].astype(np.float64), data["y"], data["g"]
    pred = model.decision_function(X) > 0
    for code, name in ((0, "M"), (1, "F")):
        r = got["by_group"]["groups"][name]
        m = g == code
        assert r["n"] == m.sum() and r["positive_rate"] == pytest.approx(pred[m].mean(), abs=1e-12)
        assert r["true_positive_rate"] == pytest.approx(pred[m & (y == 1)].mean(), abs=1e-12)
        assert r["false_positive_rate"] == pytest.approx(pred[m & (y == -1)].mean(), abs=1e-12)
        assert r["error_rate"] == pytest.approx(np.mean(pred[m] != (y[m] == 1)), abs=1e-12)
    rates_by_group = [pred[g == 0].mean(), pred[g == 1].mean()]
    assert got["by_group"]["selection_rate_ratio"] == pytest.approx(min(rates_by_group) / max(rates_by_group), abs=1e-12)
    deployed = dpipe.LinearModel.load(data["deployed"])
    Xp = data["Xp"].astype(np.float64)
    churn = np.mean(model.predict(Xp) != deployed.predict(Xp))
    want = [churn - 0.05, 0.8 * pred[g == 1].mean() - pred[g == 0].mean(), 0.5 - pred[y == 1].mean()]
    assert [r["text"] for r in got["constraints"]] == c
    for r, v in zip(got["constraints"], want):
        assert r["value"] == pytest.approx(v, abs=1e-12) and r["holds"] == (v <= 0)
    # the command line prints the same, one line per constraint
    assert main(["-q", "evaluate", str(model_path), data["train"], "--by-group", "--constraint", c[2], "--engine", "local"]) == 0
    out = capsys.readouterr().out
    assert "selection-rate ratio" in out and f"constraint {c[2]}: " in out


def test_evaluate_by_group_needs_a_group_column(tmp_path, capsys):
    X, y, _ = grouped_data(200, 3)
    store = write_store(tmp_path / "plain.zarr", X, y, [200])
    model = tmp_path / "m.json"
    dpipe.train(store, engine="local", out=model)
    assert main(["-q", "evaluate", str(model), store, "--by-group", "--engine", "local"]) == 1
    assert "--by-group needs a group column" in capsys.readouterr().err


@pytest.mark.parametrize("v_star", [0.03, 2.0, 30.0, 100.0])
def test_the_trust_region_cutting_plane_finds_a_far_multiplier(v_star):
    """On a known concave piecewise-linear dual (kink at v_star), the trust region grows until it reaches v_star,
    and the bound it reports is never below the true maximum (the stopping test relies on it)."""
    from dpipe.solvers._rate_multipliers import TRUST_RADIUS
    from dpipe.solvers._rate_multipliers import Cut as _Cut
    from dpipe.solvers._rate_multipliers import TrustRegion as _TrustRegion

    def dual(v):  # F(v) = min(1 + 0.5 (v - v*), 1 - 2 (v - v*)) on [0, 100]
        a, b = 1.0 + 0.5 * (v - v_star), 1.0 - 2.0 * (v - v_star)
        return (a, 0.5) if a <= b else (b, -2.0)

    region, v, cuts = _TrustRegion(np.zeros(1), 100.0, TRUST_RADIUS), np.zeros(1), []
    for _ in range(20):
        value, slope = dual(float(v[0]))
        cuts.append(_Cut(v.copy(), value, np.array([slope]), 0.0, np.zeros(1), 0.0))
        v, upper = region.step(cuts)
        assert upper >= 1.0 - 1e-9
        if upper - max(c.value for c in cuts) <= 1e-9:
            break
    assert max(c.value for c in cuts) == pytest.approx(1.0, abs=1e-9)
    assert v[0] == pytest.approx(v_star, rel=1e-6)


def test_the_randomized_rule_holds_in_expectation_and_draws_reproducibly(data, tmp_path, capsys):
    """threshold_rule='randomized': the constraint holds for the expected (ramp) rates, counted directly; predict draws
    each row with probability clip(1/2 + score, 0, 1) from its seed; evaluate reports expectations."""
    import pyarrow.parquet as pq

    c = "positive_rate(group=M) >= 0.8 * positive_rate(group=F)"
    out = tmp_path / "random.json"
    assert main(["-q", "train", data["train"], "--objective", "error-rate", "--constraint", c, "--threshold-rule", "randomized",
                 "--out", str(out), "--engine", "local"]) == 0
    model = dpipe.LinearModel.load(out)
    X, y, g = data["X"].astype(np.float64), data["y"], data["g"]
    p = np.clip(0.5 + model.decision_function(X), 0.0, 1.0)
    assert model.randomized and np.array_equal(model.positive_probability(X), p)
    (report,) = model.fit["info"]["constraints"]
    assert report["value"] == pytest.approx(0.8 * p[g == 1].mean() - p[g == 0].mean(), abs=1e-12) and report["satisfied"]
    assert model.metrics["train"]["accuracy"] == pytest.approx(np.mean(np.where(y == 1, p, 1 - p)), abs=1e-12)
    # draws: reproducible by seed, and with the right frequencies (40 draws of 3000 rows: 4 sigma is about 0.006)
    a, b = model.predict(X, random_state=7), model.predict(X, random_state=7)
    assert np.array_equal(a, b) and not np.array_equal(a, model.predict(X, random_state=8))
    mean = np.mean([model.predict(X, random_state=s) == 1 for s in range(40)], axis=0)
    assert abs(mean.mean() - p.mean()) < 0.006
    # evaluate: expected accuracy, group rates and constraint value
    got = dpipe.evaluate(out, data["train"], engine="local", by_group=True, constraints=[c])
    assert got["randomized"] and got["accuracy"] == pytest.approx(np.mean(np.where(y == 1, p, 1 - p)), abs=1e-12)
    assert got["recall"] == pytest.approx(p[y == 1].mean(), abs=1e-12)
    assert got["by_group"]["groups"]["M"]["positive_rate"] == pytest.approx(p[g == 0].mean(), abs=1e-12)
    assert got["constraints"][0]["value"] == pytest.approx(report["value"], abs=1e-12)
    # predict: the labels drawn from --seed, the same twice; a seed is refused for a deterministic model
    for name in ("a.parquet", "b.parquet"):
        assert main(["-q", "predict", str(out), data["train"], "--out", str(tmp_path / name), "--seed", "3", "--engine", "local"]) == 0
    la, lb = (pq.read_table(tmp_path / n).column("label").to_numpy() for n in ("a.parquet", "b.parquet"))
    assert np.array_equal(la, lb) and abs(np.mean(la == 1) - p.mean()) < 0.03
    deterministic = tmp_path / "det.json"
    dpipe.train(data["train"], "error-rate", engine="local", train_metrics=False, constraints=[c], out=deterministic)
    capsys.readouterr()
    assert main(["-q", "predict", str(deterministic), data["train"], "--out", str(tmp_path / "c.parquet"), "--seed", "3", "--engine", "local"]) == 1
    assert "deterministic" in capsys.readouterr().err
    with pytest.raises(ValueError, match="deterministic"):
        dpipe.LinearModel.load(deterministic).predict(X, random_state=0)


def test_the_estimator_draws_a_randomized_model_s_labels(data):
    clf = dpipe.DPipeClassifier(objective="error-rate", constraints=["recall >= 0.7"], threshold_rule="randomized")
    X, y = data["X"], data["y"]
    clf.fit(X, y)
    a = clf.predict(X, random_state=1)
    assert np.array_equal(a, clf.predict(X, random_state=1)) and set(np.unique(a)) <= set(clf.classes_)
    p = np.clip(0.5 + clf.decision_function(X), 0.0, 1.0)
    assert abs(np.mean(a == clf.classes_[1]) - p.mean()) < 0.03
    with pytest.raises(ValueError, match="deterministic"):
        dpipe.DPipeClassifier(objective="error-rate", constraints=["recall >= 0.7"]).fit(X, y).predict(X, random_state=1)


def test_standardize_makes_the_rate_fit_invariant_to_column_scales(tmp_path):
    """standardize=True fits in u = w * scale: rescaling columns by powers of two (exact in float32) gives the same
    model up to that rescaling, to rounding; without it the fit changes (the penalty and the ramp see other weights)."""
    X, y, g = grouped_data(1500, 5)
    D = np.array([2.0**-6, 2.0**5, 1.0, 2.0**9], dtype=np.float32)
    a = write_store(tmp_path / "a.zarr", X, y, [700, 800], group=g, groups=["M", "F"])
    b = write_store(tmp_path / "b.zarr", X * D, y, [700, 800], group=g, groups=["M", "F"])
    c = ["positive_rate(group=M) >= 0.8 * positive_rate(group=F)"]
    ma = dpipe.train(a, "error-rate", engine="local", train_metrics=False, constraints=c, standardize=True)
    mb = dpipe.train(b, "error-rate", engine="local", train_metrics=False, constraints=c, standardize=True)
    np.testing.assert_allclose(np.asarray(mb.coef) * D, ma.coef, rtol=1e-9, atol=1e-12)
    assert mb.intercept == pytest.approx(ma.intercept, rel=1e-9, abs=1e-12) and ma.fit["info"]["standardized"]
    raw_a = dpipe.train(a, "error-rate", engine="local", train_metrics=False, constraints=c)
    raw_b = dpipe.train(b, "error-rate", engine="local", train_metrics=False, constraints=c)
    assert not np.allclose(np.asarray(raw_b.coef) * D, raw_a.coef, rtol=1e-3)
