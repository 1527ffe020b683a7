"""The fit layer: one declaration per parameter, every option honoured or refused (the layering of the whole package:
tests/test_architecture.py)."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import pathlib

import numpy as np
import pytest

import dpipe
from dpipe._options import options_of
from dpipe.cli.main import build_parser
from dpipe.exceptions import ParameterError
from dpipe.fit import OBJECTIVES, PARAMS, RECORDS, applicable, resolve
from dpipe.io._ingest_options import IngestOptions
from dpipe.testing import write_store

PACKAGE = pathlib.Path(dpipe.__file__).parent


def test_train_estimator_and_cli_agree_with_the_declaration():
    declared = set(PARAMS)
    train_params = set(inspect.signature(dpipe.train).parameters)
    run_options = {"store", "objective", "validation", "datasets", "constraint_validation", "engine", "client", "scheduler", "workers", "memory_limit", "cache",
                   "verify", "out", "overwrite", "train_metrics"}
    assert train_params == declared | run_options
    estimator_params = set(dpipe.DPipeClassifier().get_params())
    assert estimator_params == declared | {"objective", "unseen", "engine"}  # engine: where a dask collection is fitted
    train_parser = build_parser()._subparsers._group_actions[0].choices["train"]
    cli = {a.dest for a in train_parser._actions} - {"help", "help_all"}
    cli_run = {"store", "objective", "validation", "datasets", "constraint_validation", "constraints_file", "out", "train_metrics", "scheduler", "scheduler_file",
               "workers", "memory_limit", "cluster", "cache", "engine", "verify", "overwrite", "json", "plot"}
    source = {n for n, (_, opt) in options_of(IngestOptions).items() if "train" in opt.commands}  # STORE may be a source file (ingested into a cached store)
    assert cli == declared | cli_run | source
    for name in PARAMS:  # every parameter documented in both docstrings
        assert f"{name} : " in dpipe.train.__doc__ and f"{name} : " in dpipe.DPipeClassifier.__doc__


def test_each_parameter_name_is_declared_once_in_the_package():
    # a hyper-parameter is declared only in dpipe/fit/_params.py: train's and the estimator's keyword parameters of the
    # same names are the lines dpipe.fit._codegen generates from it (between its markers), written by no hand
    from dpipe.fit._codegen import BEGIN, END

    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name in ("_params.py", "_codegen.py", "_records.py"):
            continue
        lines = path.read_text().splitlines()
        begin = [i + 1 for i, line in enumerate(lines) if line.strip() == BEGIN]
        end = [i + 1 for i, line in enumerate(lines) if line.strip() == END]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for a in node.args.args + node.args.kwonlyargs:
                    generated = any(b < a.lineno < e for b, e in zip(begin, end))
                    public = node.name in ("train", "__init__", "fit") and path.name in ("_train.py", "_estimator.py")
                    if a.arg in set(PARAMS) - {"objective"} and not generated and public:
                        offenders.append(f"{path.name}:{node.name}:{a.arg}")
    assert offenders == []
    marked = sorted(p.name for p in PACKAGE.rglob("*.py") if (BEGIN + "\n") in p.read_text() and p.name != "_codegen.py")
    assert marked == ["_estimator.py", "_train.py"]  # train and the estimator


#: options that need another one to apply
COMPANIONS = {"continuation_factor": {"continuation": True}, "validation_seed": {"validation_fraction": 0.3}, "probability_folds": {"probability": "sigmoid"}}

#: a valid, non-default value of every parameter (and what to compare for objectives where it applies)
VALUES = {
    "solver": None,  # per objective below
    "lam": 3e-3, "C": 20.0, "ridge": 1e-2, "max_iter": 1, "tol": 1e-3, "memory": 3, "smoothing": 0.07, "epsilon": 5e-3, "mu_scale": 10.0,
    "continuation": True, "continuation_factor": 3.0, "standardize": True, "precondition": "diagonal", "init": "zeros", "eps": 1e-2, "k": 40, "k_fraction": 0.3,
    "bias": 2.0, "calibrate": False, "constraints": ["recall >= 0.5"], "mm_steps": 2, "multiplier_bound": 0.01, "threshold_rule": "ramp",
    "early_stopping_rounds": 1, "surrogate": "squared-hinge", "validation_fraction": 0.3, "validation_seed": 5, "slack": 0.01, "confidence": 0.9,
    "probability": "isotonic", "probability_folds": 3,
}


@pytest.mark.parametrize("objective", list(OBJECTIVES))
@pytest.mark.parametrize("name", [n for n in PARAMS if n != "solver"])
def test_every_option_either_applies_or_is_refused(objective, name):
    spec = OBJECTIVES[objective]
    solver = "lbfgs" if objective == "auc-moment" else spec.solvers[0]
    given = {"solver": solver, name: VALUES[name], **COMPANIONS.get(name, {})}
    if PARAMS[name].applies(spec, solver):
        record = resolve(objective, given, "train")
        expected = VALUES[name]
        if name == "constraints":
            expected = tuple(dpipe.rates.parse_constraint(c) for c in expected)
        assert getattr(record, name) == expected
        if name == "C":  # SVM-perf's C needs no row count (lam now); the others' lam is decided from the training weights
            assert record.lam == (1.0 / (100.0 * VALUES["C"]) if spec.c_means == "svm-perf" else None)
    else:
        with pytest.raises(ParameterError, match=f"'{name}' parameter of train does not apply to objective '{objective}'.*: it applies to "):
            resolve(objective, given, "train")


def test_an_option_that_needs_another_is_refused_alone():
    with pytest.raises(ParameterError, match="'continuation_factor' parameter of train applies only with continuation=True"):
        resolve("auc-smooth", {"continuation_factor": 3.0}, "train")
    with pytest.raises(ParameterError, match="'validation_seed' parameter of train applies only with validation_fraction"):
        resolve("error-rate", {"validation_seed": 3}, "train")
    with pytest.raises(ParameterError, match="'probability_folds' parameter of train applies only with 'probability'"):
        resolve("auc", {"probability_folds": 3}, "train")


def test_records_hold_exactly_the_family_parameters():
    for family, record in RECORDS.items():
        fields = {f.name for f in dataclasses.fields(record)} - {"objective", "solver", "given", "owner"}
        objectives = [o for o in OBJECTIVES.values() if o.family == family]
        expected = {p.name for o in objectives for s in o.solvers for p in applicable(o, s)} - {"solver"}
        assert fields == expected, family


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    rng = np.random.default_rng(3)  # balanced, overlapping classes: every loss has a non-trivial minimizer
    X = (rng.standard_normal((400, 4)) * [1.0, 3.0, 0.5, 1.0]).astype(np.float32)
    y = np.where(X @ np.array([1.0, 0.3, -2.0, 0.5]) + rng.standard_normal(400) > 0.3, 1, -1).astype(np.int8)
    return write_store(tmp_path_factory.mktemp("opt") / "s.zarr", X, y, [150, 250])


def _fingerprint(model):
    info = model.fit["info"]
    keys = ("preconditioner", "precondition", "slack", "init", "smoothing", "k", "bias", "standardized", "stages", "calibration", "early_stopping")
    return (np.round(model.coef, 12).tolist(), round(model.intercept, 12), model.fit["nit"], model.fit["nfev"], [str(info.get(k)) for k in keys],
            None if model.probability is None else str(model.probability.to_dict()))


@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_every_applicable_option_changes_the_fit(small_store, objective):
    """Honoured, not only accepted: each option that applies changes the model or its fit record."""
    spec = OBJECTIVES[objective]
    solver = "lbfgs" if objective == "auc-moment" else spec.solvers[0]
    base_kw = {"solver": solver, "engine": "local", "train_metrics": False}
    if spec.family == "smooth" and solver == "lbfgs":  # L-BFGS's default relative tol stops these small fits early: memory and
        base_kw["tol"] = 1e-7                            # the start must have iterations to change
    if spec.takes_k:
        base_kw["k_fraction"] = 0.5
    if spec.family == "rate":  # a binding constraint, so that every option (the multipliers' too) has something to change
        base_kw["constraints"] = {"false-positive-rate": ["recall >= 0.95"],  # auc-rate: more than a threshold can meet
                                  "auc-rate": ["positive_rate(label=-1) <= 0.1", "recall >= 0.8"]}.get(objective, ["positive_rate(label=-1) <= 0.05"])
    import warnings

    from dpipe.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        base = _fingerprint(dpipe.train(small_store, objective, **base_kw))
        for p in applicable(spec, solver):
            if p.name in ("solver",):
                continue
            value = (not p.default_for(spec)) if p.kind == "bool" else VALUES[p.name]
            if (p.name, solver) == ("precondition", "newton"):  # 'diagonal' is Newton's default: the other choice
                value = "none"
            kw = dict(base_kw, **{p.name: value})
            reference = base
            if p.kind == "bool" and p.default_for(spec) is None:  # auto: the data decides; True and False must differ
                reference = _fingerprint(dpipe.train(small_store, objective, **dict(base_kw, **{p.name: False})))
            if p.name in COMPANIONS:  # compared with the companion alone
                reference = _fingerprint(dpipe.train(small_store, objective, **dict(base_kw, **COMPANIONS[p.name])))
                kw.update(COMPANIONS[p.name])
            if p.name == "C":
                kw.pop("lam", None)
            if p.name == "k":
                kw.pop("k_fraction")
            if p.name == "smoothing":
                kw.pop("epsilon", None)
            if p.name == "early_stopping_rounds":  # needs a validation set
                kw["validation"] = small_store
            if p.name == "constraints":  # another constraint besides the base ones (for auc-rate, one that binds)
                kw["constraints"] = base_kw["constraints"] + (["recall >= 0.85"] if objective == "auc-rate" else VALUES["constraints"])
            model = dpipe.train(small_store, objective, **kw)
            assert _fingerprint(model) != reference, p.name


def test_the_use_instead_hint_fits_the_objective():
    with pytest.raises(ParameterError, match="the closed form does not iterate: use solver='lbfgs'"):
        resolve("auc-moment", {"tol": 1e-3}, "train")
    with pytest.raises(ParameterError, match="the cutting plane stops on its gap: use eps"):
        resolve("rocarea", {"tol": 1e-3}, "train")
    with pytest.raises(ParameterError, match="the moment objectives are not smoothed"):
        resolve("error-moment", {"mu_scale": 10.0}, "train")


def test_a_given_k_replaces_the_default_fraction():
    assert resolve("prec@k", {"k": 5}, "train").k_fraction is None
    assert resolve("prec@k", {}, "train").k_fraction == 0.5
    assert resolve("rec@k", {"k": 5}, "DPipeClassifier").given == ("k",)


def test_ridge_the_fit_does_not_use_is_refused(small_store):
    with pytest.raises(ParameterError, match="'ridge' parameter of train applies to auc-smooth only through the auc-moment direction"):
        dpipe.train(small_store, "auc-smooth", engine="local", ridge=1e-3, precondition="none")
    with pytest.raises(ParameterError, match="'ridge' parameter of train applies to auc-smooth only through"):
        dpipe.train(small_store, "auc-smooth", engine="local", ridge=1e-3, precondition="diagonal")
    model = dpipe.train(small_store, "auc-smooth", engine="local", ridge=1e-3, train_metrics=False)  # the default uses it
    assert model.params["ridge"] == 1e-3 and model.params["given"] == ["ridge"]


def test_the_moment_start_is_refused_above_the_feature_limit(small_store, monkeypatch):
    from dpipe.fit import _smooth

    monkeypatch.setattr(_smooth, "MOMENT_PRECONDITION_MAX_FEATURES", 3)
    with pytest.raises(ParameterError, match="init='auc-moment' needs the d x d class moments on the driver; this store has 4 features"):
        dpipe.train(small_store, "auc-smooth", engine="local", init="auc-moment", precondition="diagonal")
    model = dpipe.train(small_store, "auc-smooth", engine="local", train_metrics=False)  # auto: no moments above the limit
    assert model.fit["info"]["preconditioner"] == "diagonal" and model.fit["info"]["init"] == "zeros"


def test_k_is_the_same_count_with_whole_weights_and_without(tmp_path):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((300, 3)).astype(np.float32)
    y = np.where(X[:, 0] + rng.standard_normal(300) > 0.5, 1, -1).astype(np.int8)
    plain = write_store(tmp_path / "p.zarr", X, y, [300])
    ones = write_store(tmp_path / "w.zarr", X, y, [300], weight=np.ones(300, np.float32))
    a = dpipe.train(plain, "prec@k", engine="local", k_fraction=0.37, train_metrics=False)
    b = dpipe.train(ones, "prec@k", engine="local", k_fraction=0.37, train_metrics=False)
    assert a.fit["info"]["k"] == b.fit["info"]["k"] == round(0.37 * int((y > 0).sum()))
    np.testing.assert_allclose(a.coef, b.coef, rtol=1e-9, atol=1e-12)
    with pytest.raises(ParameterError, match="'k' parameter of train must be an int"):
        dpipe.train(ones, "rec@k", engine="local", k=2.5)


def test_the_readme_option_table_is_the_declaration():
    """docs/training.md's table of options is generated from PARAMS; a changed default must change it too."""
    from dpipe.fit._params import option_table

    page = (pathlib.Path(__file__).parents[2] / "docs" / "training.md").read_text()
    table = option_table()
    assert "| `mm_steps` |" in table and "| `solver` |" not in table
    assert table in page, "docs/training.md's option table is stale: paste dpipe.fit._params.option_table() over it"
