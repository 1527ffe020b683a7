"""Constraints that generalize (issue 28): intervals and verdicts, the seeded row split, the validation rule and slack."""

from __future__ import annotations

import numpy as np
import pytest
from rate_helpers import grouped_data
from scipy.stats import beta, norm

import dpipe
from dpipe.cli.main import main
from dpipe.engine import LocalDataset
from dpipe.engine._split import DatasetPart, RowSplit
from dpipe.exceptions import ParameterError
from dpipe.io import Shard
from dpipe.rates._intervals import clopper_pearson, effective_size
from dpipe.reduce._rates import CellLayout, cell_weights
from dpipe.testing import write_store


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("generalize")
    X, y, g = grouped_data(4000, 1)
    Xv, yv, gv = grouped_data(2000, 5)
    return {"X": X, "y": y, "g": g, "train": write_store(d / "train.zarr", X, y, [1500, 2500], group=g, groups=["M", "F"]),
            "Xv": Xv, "yv": yv, "gv": gv, "valid": write_store(d / "valid.zarr", Xv, yv, [2000], group=gv, groups=["M", "F"])}


def test_clopper_pearson_is_scipys_beta_quantiles():
    for k, n in ((0, 40), (3, 40), (40, 40), (17.5, 123.25)):
        lo, hi = clopper_pearson(k, n)
        assert lo == (0.0 if k == 0 else pytest.approx(beta.ppf(0.025, k, n - k + 1), rel=1e-12))
        assert hi == (1.0 if k == n else pytest.approx(beta.ppf(0.975, k + 1, n - k), rel=1e-12))
    assert effective_size(10.0, 10.0) == 10.0 and effective_size(4.0, 8.0) == 2.0  # weights 2, 2 -> 2 rows


def test_evaluate_intervals_on_a_constructed_store(tmp_path, capsys):
    # 200 negatives of which the model passes exactly 7: FPR 7/200, its interval the beta quantiles of (7, 200)
    n_neg, n_pos = 200, 100
    X = np.zeros((n_neg + n_pos, 1), np.float32)
    X[:7, 0] = 1.0
    X[n_neg:, 0] = 1.0
    y = np.r_[-np.ones(n_neg), np.ones(n_pos)].astype(np.int8)
    store = write_store(tmp_path / "s.zarr", X, y, [150, 150])
    model = dpipe.LinearModel(np.array([1.0]), -0.5)
    (fpr,) = dpipe.evaluate(model, store, engine="local", constraints=["false_positive_rate <= 0.05"])["constraints"]
    lo, hi = beta.ppf(0.025, 7, 194), beta.ppf(0.975, 8, 193)
    assert fpr["value"] == pytest.approx(7 / 200 - 0.05, abs=1e-15) and fpr["method"] == "clopper-pearson"
    assert fpr["interval"] == pytest.approx([lo - 0.05, hi - 0.05], rel=1e-10)
    assert fpr["rates"][0]["effective_rows"] == 200 and fpr["rates"][0]["interval"] == pytest.approx([lo, hi], rel=1e-10)
    assert fpr["verdict"] == ("holds" if hi <= 0.05 else "not significant")
    (tight,) = dpipe.evaluate(model, store, engine="local", constraints=["false_positive_rate <= 0.2"])["constraints"]
    (loose,) = dpipe.evaluate(model, store, engine="local", constraints=["false_positive_rate <= 0.001"])["constraints"]
    assert tight["verdict"] == "holds" and loose["verdict"] == "violated"
    # weights: rows of weight 2 count as half as many effective rows as their total weight says
    w = np.full(y.size, 2.0, np.float32)
    weighted = write_store(tmp_path / "w.zarr", X, y, [300], weight=w)
    (fw,) = dpipe.evaluate(model, weighted, engine="local", constraints=["false_positive_rate <= 0.05"])["constraints"]
    assert fw["rates"][0]["effective_rows"] == pytest.approx(200) and fw["interval"] == pytest.approx(fpr["interval"], rel=1e-10)
    # the command line prints the verdict, the interval and the rate
    path = tmp_path / "m.json"
    model.save(path)
    assert main(["-q", "evaluate", str(path), store, "--constraint", "false_positive_rate <= 0.001", "--engine", "local"]) == 0
    out = capsys.readouterr().out
    assert "VIOLATED at 95 %" in out and "clopper-pearson" in out and "positive(label=-1) = 0.035" in out


def test_a_combined_constraint_gets_the_delta_method_over_cells(data):
    X, y, g = data["X"].astype(np.float64), data["y"], data["g"]
    model = dpipe.train(data["train"], "auc-moment", engine="local", train_metrics=False)
    c = "positive_rate(group=M) >= 0.8 * positive_rate(group=F)"
    (r,) = dpipe.evaluate(model, data["train"], engine="local", constraints=[c])["constraints"]
    pred = model.decision_function(X) > 0
    f, m = pred[g == 1], pred[g == 0]
    value = 0.8 * f.mean() - m.mean()
    # the cells here are (label x group): the brute-force variance sums over them
    var = 0.0
    for label in (-1, 1):
        for code, coef in ((1, 0.8 / f.size), (0, -1.0 / m.size)):
            cell = (y == label) & (g == code)
            p = pred[cell].mean()
            var += coef**2 * p * (1 - p) * cell.sum()
    half = norm.ppf(0.975) * np.sqrt(var)
    assert r["method"] == "normal (delta method)" and r["value"] == pytest.approx(value, abs=1e-12)
    assert r["interval"] == pytest.approx([value - half, value + half], rel=1e-9)
    assert sorted(x["rate"] for x in r["rates"]) == ["positive(group=F)", "positive(group=M)"]


def test_the_row_split_is_seeded_per_shard_and_its_parts_cover_every_row_once():
    rng = np.random.default_rng(0)
    shards = [Shard(X=rng.normal(size=(n, 2)).astype(np.float32), y=np.where(rng.random(n) < 0.5, 1, -1).astype(np.int8), index=i)
              for i, n in enumerate((500, 700))]
    split = RowSplit(0.3, seed=4)
    ds = LocalDataset(shards)
    fit, valid = DatasetPart(ds, split, "fit"), DatasetPart(ds, split, "validation")
    layout = CellLayout(1)
    total = ds.map_reduce(cell_weights, np.add, layout)
    np.testing.assert_array_equal(fit.map_reduce(cell_weights, np.add, layout) + valid.map_reduce(cell_weights, np.add, layout), total)
    share = valid.map_reduce(cell_weights, np.add, layout).sum() / total.sum()
    assert 0.25 < share < 0.35 and fit.weighted and valid.weighted
    again = [RowSplit(0.3, seed=4).validation_rows(s) for s in shards]
    np.testing.assert_array_equal(np.concatenate(again), np.concatenate([split.validation_rows(s) for s in shards]))
    assert not np.array_equal(RowSplit(0.3, seed=5).validation_rows(shards[0]), again[0])
    with pytest.raises(ValueError, match="part must be"):
        DatasetPart(ds, split, "test")


def test_the_validation_store_sets_the_threshold_and_both_rates_are_recorded(data, tmp_path, capsys):
    c = "false_positive_rate <= 0.05"
    plain = dpipe.train(data["train"], "false-negative-rate", engine="local", train_metrics=False, constraints=[c])
    val = dpipe.train(data["train"], "false-negative-rate", engine="local", train_metrics=False, constraints=[c],
                      constraint_validation=data["valid"], confidence=0.5)  # the point value: the threshold on the validation edge
    np.testing.assert_allclose(val.coef, plain.coef, rtol=0, atol=0)  # the direction is the training rows' ...
    Xv, yv = data["Xv"].astype(np.float64), data["yv"]
    fpr_valid = np.mean(val.decision_function(Xv)[yv < 0] > 0)
    (on_valid,) = val.fit["info"]["constraints_validation"]
    assert on_valid["value"] == pytest.approx(fpr_valid - 0.05, abs=1e-12) and fpr_valid <= 0.05  # ... the threshold the validation rows'
    # the largest FPR at most 0.05: one more validation negative over the threshold would break it
    scores = np.sort(val.decision_function(Xv)[yv < 0])[::-1]
    assert np.mean(scores > scores[int(np.floor(0.05 * scores.size))] - 1e-9) > 0.05 or fpr_valid == pytest.approx(0.05, abs=1 / scores.size)
    (on_train,) = val.fit["info"]["constraints"]
    X, y = data["X"].astype(np.float64), data["y"]
    assert on_train["value"] == pytest.approx(np.mean(val.decision_function(X)[y < 0] > 0) - 0.05, abs=1e-12)
    assert on_train["verdict"] in ("holds", "violated", "not significant") and len(on_train["interval"]) == 2
    assert val.fit["info"]["validation"] == {"train": data["valid"]} and val.fit["success"]
    assert "every constraint holds on the validation rows" in val.fit["message"]
    # the command line: --constraint-validation, and both reports printed
    out = tmp_path / "m.json"
    assert main(["-q", "train", data["train"], "--objective", "false-negative-rate", "--constraint", c, "--constraint-validation",
                 data["valid"], "--confidence", "0.5", "--out", str(out), "--engine", "local"]) == 0
    printed = capsys.readouterr().out
    assert f"constraint {c}: holds on the training data" in printed or f"constraint {c}: NOT satisfied on the training data" in printed
    assert f"constraint {c} on the validation rows: " in printed
    np.testing.assert_array_equal(dpipe.LinearModel.load(out).coef, val.coef)


def test_validation_fraction_holds_out_a_seeded_share_and_slack_keeps_a_margin(data):
    c = "positive_rate(group=M) >= 0.8 * positive_rate(group=F)"
    kw = dict(engine="local", train_metrics=False, constraints=[c])
    a = dpipe.train(data["train"], "error-rate", validation_fraction=0.3, validation_seed=2, confidence=0.5, **kw)
    b = dpipe.train(data["train"], "error-rate", validation_fraction=0.3, validation_seed=2, confidence=0.5, **kw)
    np.testing.assert_array_equal(a.coef, b.coef)
    assert a.intercept == b.intercept
    X, g = data["X"].astype(np.float64), data["g"]
    st = dpipe.open_store(data["train"])
    held = np.concatenate([RowSplit(0.3, 2).validation_rows(st.read_shard(i)) for i in range(st.n_shards)])
    pred = a.decision_function(X) > 0
    (v,) = a.fit["info"]["constraints_validation"]
    assert v["value"] == pytest.approx(0.8 * pred[held & (g == 1)].mean() - pred[held & (g == 0)].mean(), abs=1e-12) and v["value"] <= 0
    (t,) = a.fit["info"]["constraints"]  # the training report is on the rows the direction was fitted to
    assert t["value"] == pytest.approx(0.8 * pred[~held & (g == 1)].mean() - pred[~held & (g == 0)].mean(), abs=1e-12)
    assert "0.3 of" in a.fit["info"]["validation"]["train"] and "(seed 2)" in a.fit["info"]["validation"]["train"]
    other = dpipe.train(data["train"], "error-rate", validation_fraction=0.3, validation_seed=3, confidence=0.5, **kw)
    assert not np.array_equal(other.coef, a.coef)
    slack = dpipe.train(data["train"], "error-rate", validation_fraction=0.3, validation_seed=2, slack=0.02, confidence=0.5, **kw)
    (vs,) = slack.fit["info"]["constraints_validation"]
    assert vs["value"] <= -0.02 < v["value"] and slack.fit["info"]["slack"] == 0.02


def test_the_validation_rule_holds_each_constraint_at_95_percent_one_sided_by_default(data):
    c = "positive_rate(group=M) >= 0.8 * positive_rate(group=F)"
    kw = dict(engine="local", train_metrics=False, constraints=[c], constraint_validation=data["valid"])
    sure, point = dpipe.train(data["train"], "error-rate", **kw), dpipe.train(data["train"], "error-rate", confidence=0.5, **kw)
    assert sure.params["confidence"] is None and point.params["confidence"] == 0.5  # None: decided at fit time, 0.95 here
    for model, z in ((sure, norm.ppf(0.95)), (point, 0.0)):
        (v,) = model.fit["info"]["constraints_validation"]
        se = (v["interval"][1] - v["interval"][0]) / (2 * norm.ppf(0.975))  # the delta method's standard error, as recorded
        # brute force: the constraint and its standard error on the validation rows, from the model's predictions
        pred = model.decision_function(data["Xv"].astype(np.float64)) > 0
        gv, yv = data["gv"], data["yv"]
        f, m = pred[gv == 1], pred[gv == 0]
        var = sum((coef**2) * pred[(yv == lab) & (gv == code)].mean() * (1 - pred[(yv == lab) & (gv == code)].mean()) * ((yv == lab) & (gv == code)).sum()
                  for lab in (-1, 1) for code, coef in ((1, 0.8 / f.size), (0, -1.0 / m.size)))
        assert v["value"] == pytest.approx(0.8 * f.mean() - m.mean(), abs=1e-12) and se == pytest.approx(np.sqrt(var), rel=1e-9)
        assert v["value"] + z * se <= 1e-12
    (vs,), (vp,) = sure.fit["info"]["constraints_validation"], point.fit["info"]["constraints_validation"]
    assert vs["value"] < vp["value"]  # the margin costs: the constraint is held further inside


def test_slack_without_validation_holds_the_training_rows_with_a_margin(data):
    c = "recall >= 0.9"  # binds: the least error has recall 0.87 here
    base = dpipe.train(data["train"], "error-rate", engine="local", train_metrics=False, constraints=[c])
    tight = dpipe.train(data["train"], "error-rate", engine="local", train_metrics=False, constraints=[c], slack=0.03)
    X, y = data["X"].astype(np.float64), data["y"]
    recall = lambda m: np.mean(m.decision_function(X)[y > 0] > 0)  # noqa: E731
    assert recall(tight) >= 0.93 > recall(base) >= 0.9
    sure = dpipe.train(data["train"], "error-rate", engine="local", train_metrics=False, constraints=[c], confidence=0.95)
    n_pos = int((y > 0).sum())  # recall's standard error there: sqrt(r (1 - r) / n) over the positives
    assert recall(sure) - norm.ppf(0.95) * np.sqrt(recall(sure) * (1 - recall(sure)) / n_pos) >= 0.9 - 1e-12 > recall(base) - 0.01


def test_the_validation_rule_is_refused_where_it_cannot_apply(data, tmp_path):
    c = ["recall >= 0.8"]
    with pytest.raises(ParameterError, match="threshold_rule='exact'"):
        dpipe.train(data["train"], "error-rate", engine="local", constraints=c, validation_fraction=0.2, threshold_rule="ramp")
    with pytest.raises(ParameterError, match="'constraint_validation' parameter of train names 'pool'"):
        dpipe.train(data["train"], "error-rate", engine="local", constraints=c, constraint_validation={"pool": data["valid"]})
    with pytest.raises(ParameterError, match="takes no constraints"):
        dpipe.train(data["train"], "auc", engine="local", constraint_validation=data["valid"])
    X, y, g = data["Xv"], data["yv"], data["gv"]
    swapped = write_store(tmp_path / "swapped.zarr", X, y, [2000], group=(1 - g).astype(np.int16), groups=["F", "M"])  # same rows, codes reversed
    with pytest.raises(ParameterError, match=r"store .*swapped.zarr \('train'\) has groups \['F', 'M'\], the store it validates \['M', 'F'\]"):
        dpipe.train(data["train"], "error-rate", engine="local", constraints=c, constraint_validation=swapped)
    with pytest.raises(ParameterError, match="'validation_fraction' parameter of train must be a float in the range"):
        dpipe.train(data["train"], "error-rate", engine="local", constraints=c, validation_fraction=1.5)


def test_the_estimator_holds_out_rows_of_in_memory_data(data):
    X, y, g = data["X"], data["y"], data["g"]
    c = "positive_rate(group=0) >= 0.8 * positive_rate(group=1)"
    clf = dpipe.DPipeClassifier(objective="error-rate", constraints=[c], validation_fraction=0.25).fit(X, (y > 0).astype(int), groups=g)
    result = clf.fit_result_
    assert result.info["validation"] == {"train": "0.25 of <in memory> (seed 0)"} and result.constraints_validation[0].value <= 0
    assert result.constraints_validation[0].holds and result.constraints[0].multiplier is not None  # typed reports, in memory ...
    assert result.to_dict()["info"]["constraints_validation"] == [r.to_record() for r in result.constraints_validation]  # ... records in the file


def test_the_held_out_rows_are_the_same_on_a_cluster(data, client):
    c = ["positive_rate(group=M) >= 0.8 * positive_rate(group=F)"]
    kw = dict(train_metrics=False, constraints=c, validation_fraction=0.3, validation_seed=1)
    local = dpipe.train(data["train"], "error-rate", engine="local", **kw)
    dist = dpipe.train(data["train"], "error-rate", engine="dask", client=client, cache="memory", **kw)
    np.testing.assert_allclose(dist.coef, local.coef, rtol=1e-9, atol=1e-12)
    assert dist.intercept == pytest.approx(local.intercept, rel=1e-9, abs=1e-12)
    assert dist.fit["info"]["constraints_validation"][0]["value"] == local.fit["info"]["constraints_validation"][0]["value"]


def test_constraint_reports_are_typed_in_the_model_and_read_back_from_its_file(data, tmp_path):
    from dpipe.rates import ConstraintReport, RateMeasure

    c = "positive_rate(group=M) >= 0.8 * positive_rate(group=F)"
    model = dpipe.train(data["train"], "error-rate", engine="local", train_metrics=False, constraints=[c], validation_fraction=0.25)
    (train,), (valid,) = model.constraint_reports, model.validation_constraint_reports
    for report, record in ((train, model.fit["info"]["constraints"][0]), (valid, model.fit["info"]["constraints_validation"][0])):
        assert isinstance(report, ConstraintReport) and all(isinstance(r, RateMeasure) for r in report.rates)
        assert report.text == c and report.value == record["value"] and list(report.interval) == record["interval"]
        assert report.holds == record["holds"] and report.verdict == record["verdict"] and len(report.rates) == 2
        assert ConstraintReport.from_record(report.to_record()) == report  # the record keeps every field
    assert train.multiplier == model.fit["info"]["constraints"][0]["multiplier"] and train.tolerance == 1e-6
    path = tmp_path / "m.json"
    model.save(path)
    assert dpipe.LinearModel.load(path).constraint_reports == [train]
    # a model file of an earlier dpipe (no intervals yet): read, the verdict unknown rather than invented
    old = ConstraintReport.from_record({"text": c, "value": -0.01, "ramp_value": -0.02, "multiplier": 0.5, "satisfied": True})
    assert old.holds and old.verdict == "not significant" and np.isnan(old.interval).all() and old.rates == ()
    # an objective without constraints has none
    plain = dpipe.train(data["train"], "auc-moment", engine="local", train_metrics=False)
    assert plain.constraint_reports == [] and plain.validation_constraint_reports is None
