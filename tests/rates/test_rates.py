"""Rate constraints (issue 15, first part): vocabulary, compiled rates against direct counts, the
majorized pass against brute force, and constrained fits against enumeration on 1-d data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpipe import rates
from dpipe.engine import LocalDataset, ShardedDataset
from dpipe.exceptions import ParameterError
from dpipe.fit import resolve
from dpipe.fit._rates import fit_rates
from dpipe.rates._cells import DataInfo, compile_rows, plan_stores
from dpipe.reduce._rates import INDICATOR, RAMP, SMOOTH_POSITIVE, WEIGHT, CellLayout, cell_weights, huber, ramp, rate_pass
from dpipe.testing import write_store


# ---------------------------------------------------------------------------------
# vocabulary
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [
    "positive_rate(group=Female) >= 0.8 * positive_rate(group=Male)",
    "true_positive_rate(group=A) >= true_positive_rate(group=B) - 0.02",
    "false_positive_rate <= 0.01",
    "recall >= 0.9",
    "churn(deployed.json, on=unlabeled) <= 0.05",
    'churn("models/v1.json") <= 0.05',
    "coverage <= 0.1",
    "precision >= 0.8",
    "f1(group=A) >= 0.5",
    "0.9 <= recall(on=eu)",
    "error_rate(group=B) - error_rate(group=A) <= 0.05",
])
def test_the_issue_s_constraint_shapes_parse(text):
    c = rates.parse_constraint(text)
    assert isinstance(c, rates.Constraint) and str(c) == text and c.expression.terms


def test_a_bad_label_in_code_is_a_parameter_error():
    with pytest.raises(ParameterError, match="'label' parameter of a rate must be"):
        rates.positive_rate(label=2)


def test_strings_and_code_build_the_same_constraint():
    parsed = rates.parse_constraint("positive_rate(group=Female) >= 0.8 * positive_rate(group=Male)")
    built = rates.positive_rate(group="Female") >= 0.8 * rates.positive_rate(group="Male")
    assert parsed.expression.terms == built.expression.terms and parsed.expression.constant == built.expression.constant


@pytest.mark.parametrize("text, message", [
    ("foo <= 1", "unknown rate 'foo'"),
    ("positive_rate(grp=A) <= 0.1", "unknown argument 'grp'"),
    ("recall < 0.9", "use <= or >="),
    ("positive_rate * positive_rate <= 1", "multiplied by numbers only"),
    ("positive_rate / positive_rate <= 1", "divided by non-zero numbers only"),
    ("0.1 <= 0.2", "neither side names a rate"),
    ("precision <= 0.8", "bounded below by a number"),
    ("precision >= 1.5", "target must be in (0, 1)"),
    ("churn <= 0.1", "churn takes the deployed model's path first"),
    ("recall >= __import__('os')", "unknown rate '__import__'"),
    ("positive_rate(label=maybe) <= 0.5", "label must be"),
    ("recall >=", "not an expression"),
])
def test_bad_constraints_are_one_clear_error(text, message):
    with pytest.raises(ParameterError, match="constraint") as info:
        rates.parse_constraint(text)
    assert message in str(info.value) and text.strip() in str(info.value)


# ---------------------------------------------------------------------------------
# compiled rates equal direct counts
# ---------------------------------------------------------------------------------
@pytest.fixture
def grouped_store(tmp_path):
    rng = np.random.default_rng(3)
    n = 600
    X = rng.normal(size=(n, 3)).astype(np.float32)
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=n) > 0, 1, -1).astype(np.int8)
    group = (rng.random(n) < 0.4).astype(np.int16)
    weight = rng.uniform(0.5, 2.0, size=n).astype(np.float32)
    path = write_store(tmp_path / "g.zarr", X, y, [200, 250, 150], group=group, groups=["Male", "Female"], weight=weight)
    deployed = tmp_path / "deployed.json"
    coef, intercept = np.array([0.7, -0.2, 0.1]), -0.1
    deployed.write_text(json.dumps({"coef": coef.tolist(), "intercept": intercept}))
    return path, X, y, group, weight.astype(np.float64), str(deployed), (coef, intercept)


def _load(models):
    return lambda path: models[path]


def test_compiled_rows_count_what_they_say(grouped_store):
    path, X, y, group, v, deployed, (bc, bi) = grouped_store
    constraints = [rates.parse_constraint(t) for t in (
        "positive_rate(group=Female) >= 0.8 * positive_rate(group=Male)",
        "recall >= 0.7", "false_positive_rate <= 0.2", "precision >= 0.6", "f1(group=Male) >= 0.5",
        f'churn("{deployed}") <= 0.1', "error_rate(group=Female) <= 0.3",
    )]
    ds = LocalDataset(path)
    plans = plan_stores(rates.error_rate(), constraints, {"train": DataInfo.of(ds)}, _load({deployed: (bc, bi)}))
    layout = plans["train"].layout
    weights = {"train": ds.map_reduce(cell_weights, np.add, layout)}
    rows = compile_rows(rates.error_rate(), constraints, plans, weights)
    w, b = np.array([1.0, 0.3, -0.5]), 0.2
    result = ds.map_reduce(rate_pass, lambda a, c: a + c, w, b, (w, b), layout, np.zeros(layout.n_cells), np.zeros(layout.n_cells), 0.05)
    got = rows.evaluate({"train": result.sums[INDICATOR]})
    pred = X.astype(np.float64) @ w - b > 0
    base = X.astype(np.float64) @ bc + bi > 0
    F, M, P, N = group == 1, group == 0, y == 1, y == -1

    def rate(mask, on):
        return float(v[mask & on].sum() / v[mask].sum())

    tp, fp = (v * (pred & P)).sum(), (v * (pred & N)).sum()
    tpm, fpm, fnm = (v * (pred & P & M)).sum(), (v * (pred & N & M)).sum(), (v * (~pred & P & M)).sum()
    want = [
        float(v[pred != (y == 1)].sum() / v.sum()),  # error rate
        0.8 * rate(M, pred) - rate(F, pred),
        0.7 - rate(P, pred),
        rate(N, pred) - 0.2,
        -((1 - 0.6) * tp - 0.6 * fp) / v.sum(),
        -(2 * (1 - 0.5) * tpm - 0.5 * (fpm + fnm)) / v.sum(),
        float(v[pred != base].sum() / v.sum()) - 0.1,
        rate(F, pred != (y == 1)) - 0.3,
    ]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # the ramp rows: the same with sigma(z) for the indicator
    r = ramp(X.astype(np.float64) @ w - b)
    np.testing.assert_allclose(rows.evaluate({"train": result.sums[RAMP]})[2], 0.7 - float((v * r)[P].sum() / v[P].sum()), rtol=1e-10)


def test_unknown_group_and_dataset_are_named(grouped_store):
    path, *_ = grouped_store
    store = DataInfo.of(LocalDataset(path))
    with pytest.raises(ParameterError, match="unknown group 'Other'.*Male, Female"):
        plans = plan_stores(None, [rates.parse_constraint("positive_rate(group=Other) <= 0.5")], {"train": store}, None)
        compile_rows(None, [rates.parse_constraint("positive_rate(group=Other) <= 0.5")], plans, {"train": np.ones(plans["train"].layout.n_cells)})
    with pytest.raises(ParameterError, match="no dataset 'pool'"):
        plan_stores(None, [rates.parse_constraint("coverage(on=pool) <= 0.5")], {"train": store}, None)


# ---------------------------------------------------------------------------------
# the majorized pass
# ---------------------------------------------------------------------------------
def test_pass_gradient_matches_finite_differences_and_bounds_touch_at_the_anchor(grouped_store):
    path, X, y, group, v, *_ = grouped_store
    ds = LocalDataset(path)
    layout = CellLayout(2)
    rng = np.random.default_rng(5)
    P, N = rng.uniform(0, 1, layout.n_cells), rng.uniform(0, 1, layout.n_cells)
    anchor = (np.array([0.4, -0.1, 0.2]), 0.1)
    theta = np.array([0.5, 0.2, -0.3, 0.05])

    def f(t):
        r = ds.map_reduce(rate_pass, lambda a, c: a + c, t[:3], float(t[3]), anchor, layout, P, N, 0.05)
        return r.value, r.grad, r

    value, grad, _ = f(theta)
    eps = 1e-6
    fd = np.array([(f(theta + eps * e)[0] - f(theta - eps * e)[0]) / (2 * eps) for e in np.eye(4)])
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-7)
    # at the anchor the exact bounds equal the ramp: sigma on the positive side, 1 - sigma on the negative side
    _, _, at = f(np.concatenate([anchor[0], [anchor[1]]]))
    np.testing.assert_allclose(at.sums[0], at.sums[RAMP], rtol=1e-12)
    np.testing.assert_allclose(at.sums[1], at.sums[WEIGHT] - at.sums[RAMP], rtol=1e-12)
    # away from it they are above; the smoothed bounds are below the exact ones by at most t/2 per unit weight
    _, _, away = f(theta)
    assert np.all(away.sums[0] >= away.sums[RAMP] - 1e-12) and np.all(away.sums[1] >= away.sums[WEIGHT] - away.sums[RAMP] - 1e-12)
    assert np.all(away.sums[SMOOTH_POSITIVE] <= away.sums[0] + 1e-12)
    assert np.all(away.sums[0] - away.sums[SMOOTH_POSITIVE] <= 0.025 * away.sums[WEIGHT] + 1e-12)


def test_the_per_fit_memo_gives_the_passes_without_it(grouped_store):
    """rate_pass keeps each shard's cells (a deployed model's predictions included) and its anchor margins under the
    layout's memo key: later calls at the same anchor, at another model or with other multipliers, equal fresh ones."""
    import dataclasses

    path, X, y, group, v, deployed, baseline = grouped_store
    ds = LocalDataset(path)
    plain = CellLayout(2, (baseline,))
    remembered = dataclasses.replace(plain, memo=("test-fit", "train"))
    rng = np.random.default_rng(2)
    anchor = (np.array([0.4, -0.1, 0.2]), 0.1)
    for step in range(4):  # the anchor changes after two calls
        if step == 2:
            anchor = (np.array([-0.3, 0.5, 0.1]), -0.2)
        P, N = rng.uniform(0, 1, plain.n_cells), rng.uniform(0, 1, plain.n_cells)
        coef, b = rng.normal(size=3), float(rng.normal())
        fresh = ds.map_reduce(rate_pass, lambda a, c: a + c, coef, b, anchor, plain, P, N, 0.05)
        kept = ds.map_reduce(rate_pass, lambda a, c: a + c, coef, b, anchor, remembered, P, N, 0.05)
        assert kept.value == pytest.approx(fresh.value, rel=1e-12)
        np.testing.assert_allclose(kept.grad, fresh.grad, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(kept.sums, fresh.sums, rtol=1e-12, atol=1e-12)
    from dpipe.reduce import _rates as reduce_rates

    assert {k[0] for k in reduce_rates._MEMO["test-fit"]} == {"train"} and len(reduce_rates._MEMO["test-fit"]) == 3  # one per shard


def test_the_per_row_kernel_equals_its_numpy_reference():
    from dpipe.reduce._rates import _rate_rows
    from dpipe.testing._references import rate_rows_reference

    rng = np.random.default_rng(8)
    n, n_cells = 5000, 6
    z = rng.normal(scale=0.8, size=n)
    z[:50] = rng.choice([-0.5, 0.5, 0.0, 0.05, -0.45], size=50)  # the kinks: hinge corners, Huber's ends, the anchor's switch
    z_anchor = np.where(rng.random(n) < 0.3, z, rng.normal(scale=0.8, size=n))
    z_anchor[50:80] = rng.choice([-0.5, 0.5], size=30)
    cells, v = rng.integers(0, n_cells, n), rng.uniform(0, 2, n)
    P, N = rng.uniform(0, 1, n_cells), rng.uniform(0, 1, n_cells)
    sums, dz = np.zeros((7, n_cells)), np.empty(n)
    value = _rate_rows(z, z_anchor, cells, v, P, N, 0.05, sums, dz)
    want_value, want_sums, want_dz = rate_rows_reference(z, z_anchor, cells, v, P, N, 0.05, n_cells)
    assert value == pytest.approx(want_value, rel=1e-12)
    np.testing.assert_allclose(sums, want_sums, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dz, want_dz, rtol=1e-12, atol=1e-15)


def test_huber_is_within_t_over_2_below_the_hinge():
    u = np.linspace(-1, 1, 2001)
    h = huber(u, 0.1)
    assert np.all(h <= np.maximum(u, 0) + 1e-15) and np.all(np.maximum(u, 0) - h <= 0.05 + 1e-15)


# ---------------------------------------------------------------------------------
# constrained fits on 1-d data: the optimum by enumeration over thresholds
# ---------------------------------------------------------------------------------
def _one_d(tmp_path, n=400, seed=0, groups=False):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    g = (rng.random(n) < 0.5).astype(np.int16)
    shift = 0.6 * g if groups else 0.0
    y = np.where(x + shift + 0.8 * rng.normal(size=n) > 0, 1, -1).astype(np.int8)
    kw = {"group": g, "groups": ["A", "B"]} if groups else {}
    path = write_store(tmp_path / f"oned{seed}.zarr", (x + shift)[:, None].astype(np.float32), y, [n // 2, n - n // 2], **kw)
    return path, x + shift, y, g


def _best_threshold(x, y, g, ok):
    """Lowest error of sign(x - t) over every t such that ok(pred) holds (positive direction: the 1-d optimum)."""
    best = None
    for t in np.concatenate([np.sort(x) - 1e-9, [np.max(x) + 1]]):
        pred = x > t
        if ok(pred):
            err = float(np.mean(pred != (y == 1)))
            best = err if best is None else min(best, err)
    return best


@pytest.mark.parametrize("constraint, ok", [
    ("recall >= 0.95", lambda pred, y, g: pred[y == 1].mean() >= 0.95),
    ("false_positive_rate <= 0.1", lambda pred, y, g: pred[y == -1].mean() <= 0.1),
    ("coverage <= 0.3", lambda pred, y, g: pred.mean() <= 0.3),
    ("precision >= 0.85", lambda pred, y, g: pred.sum() == 0 or (pred & (y == 1)).sum() / pred.sum() >= 0.85),
])
def test_one_d_constrained_error_reaches_the_enumerated_optimum(tmp_path, constraint, ok):
    path, x, y, g = _one_d(tmp_path)
    fit = fit_rates({"train": LocalDataset(path)}, resolve("error-rate", {"constraints": [rates.parse_constraint(constraint)]}, "test"), load_model=None)
    assert fit.coef[0] > 0
    pred = x * fit.coef[0] - fit.bias > 0
    assert ok(pred, y, g)
    assert fit.reports[1].satisfied and fit.reports[1].value <= 0
    best = _best_threshold(x, y, g, lambda p: ok(p, y, g))
    assert np.mean(pred != (y == 1)) == pytest.approx(best, abs=1e-12)
    assert fit.reports[0].value == pytest.approx(best, abs=1e-12)


def test_one_d_fairness_between_groups_reaches_the_enumerated_optimum(tmp_path):
    path, x, y, g = _one_d(tmp_path, groups=True)
    c = rates.parse_constraint("positive_rate(group=A) >= 0.8 * positive_rate(group=B)")
    fit = fit_rates({"train": LocalDataset(path)}, resolve("error-rate", {"constraints": [c]}, "test"), load_model=None)
    pred = x * fit.coef[0] - fit.bias > 0
    fair = lambda p: p[g == 0].mean() >= 0.8 * p[g == 1].mean()  # noqa: E731
    assert fair(pred) and fit.reports[1].satisfied
    unconstrained = _best_threshold(x, y, g, lambda p: True)
    best = _best_threshold(x, y, g, fair)
    assert best > unconstrained  # the constraint binds
    assert np.mean(pred != (y == 1)) == pytest.approx(best, abs=1e-12)


def test_an_unsatisfiable_constraint_is_reported_not_pretended(tmp_path):
    path, x, y, g = _one_d(tmp_path)
    fit = fit_rates({"train": LocalDataset(path)}, resolve("error-rate", {"constraints": ["recall >= 0.99", "false_positive_rate <= 0.01"]}, "test"),
                    load_model=None)
    assert not all(r.satisfied for r in fit.reports[1:])
    pred = x * fit.coef[0] - fit.bias > 0
    for r, achieved, bound, sign in zip(fit.reports[1:], (pred[y == 1].mean(), pred[y == -1].mean()), (0.99, 0.01), (-1, 1)):
        assert r.value == pytest.approx(sign * (achieved - bound), abs=1e-12)  # the achieved rate, as it is


# ---------------------------------------------------------------------------------
# one shard, many shards, a cluster: the same model
# ---------------------------------------------------------------------------------
def test_one_shard_many_shards_and_a_cluster_give_the_same_model(tmp_path, client):
    rng = np.random.default_rng(11)
    n = 3000
    X = rng.normal(size=(n, 4)).astype(np.float32)
    y = np.where(X @ np.array([1.0, -0.5, 0.3, 0.0]) + 0.7 * rng.normal(size=n) > 0, 1, -1).astype(np.int8)
    group = (X[:, 3] > 0.3).astype(np.int16)
    one = write_store(tmp_path / "one.zarr", X, y, [n], group=group, groups=["A", "B"])
    many = write_store(tmp_path / "many.zarr", X, y, [700, 800, 0, 1500], group=group, groups=["A", "B"])
    cs = [rates.parse_constraint("positive_rate(group=A) >= 0.8 * positive_rate(group=B)"), rates.parse_constraint("recall >= 0.8")]
    p = resolve("error-rate", {"constraints": cs}, "test")
    a = fit_rates({"train": LocalDataset(one)}, p, load_model=None)
    b = fit_rates({"train": LocalDataset(many)}, p, load_model=None)
    with ShardedDataset(many, client, cache="memory") as ds:
        c = fit_rates({"train": ds}, p, load_model=None)
    for other in (b, c):
        np.testing.assert_allclose(other.coef, a.coef, rtol=1e-8, atol=1e-10)
        assert other.bias == pytest.approx(a.bias, rel=1e-8, abs=1e-10)
    assert all(r.satisfied for r in a.reports)


# ---------------------------------------------------------------------------------
# the ROC-AUC surrogate under rate constraints (auc-rate)
# ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ranking_store(tmp_path_factory):
    rng = np.random.default_rng(3)
    n = 1500
    X = rng.standard_normal((n, 3)).astype(np.float32)
    group = (rng.random(n) < 0.4).astype(np.int16)
    X[:, 2] += group  # the group shifts one feature, so ranking by it favours group B
    y = np.where(X[:, 0] + 0.8 * X[:, 2] + 0.5 * rng.standard_normal(n) > 0.5, 1, -1).astype(np.int8)
    path = write_store(tmp_path_factory.mktemp("ranking") / "r.zarr", X, y, [600, 900], group=group, groups=["A", "B"])
    return path, X.astype(np.float64), y, group


def _auc(scores, y):
    """Brute-force ROC-AUC: the fraction of (positive, negative) pairs ordered right, ties half."""
    d = scores[y == 1][:, None] - scores[y != 1][None, :]
    return float(np.mean((d > 0) + 0.5 * (d == 0)))


def test_the_ranking_term_gradient_matches_finite_differences(ranking_store):
    from dpipe.solvers import RateProblem as _Problem

    path, *_ = ranking_store
    ds = LocalDataset(path)
    cs = [rates.parse_constraint("positive_rate(group=A) >= 0.9 * positive_rate(group=B)")]
    infos = {"train": DataInfo.of(ds)}
    plans = plan_stores(None, cs, infos, None)
    rows = compile_rows(None, cs, plans, {"train": ds.map_reduce(cell_weights, np.add, plans["train"].layout)})
    from dpipe.engine import RankPasses
    from dpipe.fit._smooth import SmoothedObjective
    from dpipe.objectives import SmoothedAUCRisk

    problem = _Problem({"train": ds}, plans, rows, 1e-3, 0.05, ranking=SmoothedObjective(RankPasses(ds), SmoothedAUCRisk(0.05)))
    anchor, v_full = np.array([0.3, 0.1, 0.2, -0.1]), np.array([1.0, 0.7])
    theta = np.array([0.6, -0.2, 0.4, 0.1])
    value, grad, *_ = problem.smoothed(theta, anchor, v_full)
    eps = 1e-6
    fd = np.array([(problem.smoothed(theta + eps * e, anchor, v_full)[0] - problem.smoothed(theta - eps * e, anchor, v_full)[0]) / (2 * eps)
                   for e in np.eye(4)])
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-7)
    assert grad[:3] @ grad[:3] > 0 and problem.ranking is not None


def test_auc_rate_met_by_a_threshold_is_the_unconstrained_ranking(ranking_store):
    """A constraint some threshold of the unconstrained ROC-AUC minimizer meets: that minimizer (auc-smooth's, at the
    same lam and width) with such a threshold is optimal; the exact constraint holds by direct count."""
    import dpipe

    path, X, y, group = ranking_store
    lam = 1.0 / X.shape[0]
    auc_smooth = dpipe.train(path, "auc-smooth", engine="local", lam=lam, smoothing=0.05, tol=1e-10, max_iter=2000, calibrate=False)
    model = dpipe.train(path, "auc-rate", engine="local", constraints=["positive_rate(group=A) >= 0.9 * positive_rate(group=B)"], tol=1e-10,
                        max_iter=2000)
    np.testing.assert_allclose(model.coef, auc_smooth.coef, rtol=1e-4, atol=1e-6)
    pred = X @ np.asarray(model.coef) + model.intercept > 0
    assert pred[group == 0].mean() >= 0.9 * pred[group == 1].mean()
    assert model.fit["success"] and model.fit["nit"] == 0
    assert model.fit["fun"] == pytest.approx(1 - _auc(X @ np.asarray(model.coef), y), abs=1e-12)


def test_auc_rate_turns_the_ranking_when_no_threshold_can(ranking_store):
    """With the selection ratio bound, a recall floor and a false-positive cap together, no threshold of the unconstrained
    ranking is feasible: the fit turns the direction, meets all three (direct counts) and gives up some ROC-AUC."""
    import dpipe

    path, X, y, group = ranking_store
    cs = ["positive_rate(group=A) >= 0.8 * positive_rate(group=B)", "recall >= 0.6", "false_positive_rate <= 0.3"]
    free = dpipe.train(path, "auc-rate", engine="local", constraints=[])
    s = X @ np.asarray(free.coef)

    def holds(pred):
        return pred[group == 0].mean() >= 0.8 * pred[group == 1].mean() and pred[y == 1].mean() >= 0.6 and pred[y != 1].mean() <= 0.3

    feasible_threshold = any(holds(s > t) for t in np.r_[np.unique(s), s.min() - 1])
    assert not feasible_threshold  # the test's premise: thresholding alone cannot do it
    model = dpipe.train(path, "auc-rate", engine="local", constraints=cs)
    assert holds(X @ np.asarray(model.coef) + model.intercept > 0)
    assert model.fit["success"] and model.fit["nit"] > 0
    constrained_auc = _auc(X @ np.asarray(model.coef), y)
    assert 0.75 < constrained_auc < _auc(s, y)


def test_parse_objective_builds_the_rate_expression_its_text_names():
    from dpipe.rates import parse_objective
    from dpipe.rates._expr import error_rate, false_positive_rate

    parsed = parse_objective("error_rate + 0.5 * false_positive_rate(group=a)")
    expected = error_rate() + 0.5 * false_positive_rate(group="a")
    assert parsed.terms == expected.terms and parsed.constant == expected.constant
    assert str(parsed) == "error_rate + 0.5 * false_positive_rate(group=a)"
    with pytest.raises(ParameterError, match=r"^rate objective 'recall >= 0.5': 'recall >= 0.5' is not a rate"):
        parse_objective("recall >= 0.5")
