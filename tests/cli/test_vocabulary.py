"""One vocabulary per interface: Python errors name parameters, the CLI's name its flags (the same error, both ways)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dpipe
from dpipe.cli._vocabulary import cli_flags, every_cli_flag, in_cli_terms
from dpipe.cli.main import build_parser, main
from dpipe.exceptions import ConvergenceWarning, ParameterError
from dpipe.testing import classification_data, one_error_line, write_store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    X, y = classification_data(600, 4, seed=2)
    return str(write_store(tmp_path_factory.mktemp("vocab") / "s.zarr", X, y, [300, 300]))


def _cli_error(capsys, *argv: str) -> str:
    assert main(list(argv)) == 1
    return one_error_line(capsys.readouterr().err, argv[0])


def test_a_bad_value_names_the_parameter_in_python_and_the_flag_on_the_command_line(store, tmp_path, capsys):
    with pytest.raises(ParameterError, match=r"^The 'lam' parameter of train must be a float in the range \[0.0, inf\), or 'auto'\. Got -1.0 instead\.$"):
        dpipe.train(store, lam=-1.0, engine="local")
    line = _cli_error(capsys, "train", store, "--out", str(tmp_path / "m.json"), "--lam", "-1", "--engine", "local")
    assert line == "dpipe train: error: --lam must be a float in the range [0.0, inf), or 'auto'. Got -1.0 instead."


def test_an_option_that_needs_another_and_a_negatable_flag(store, tmp_path, capsys):
    line = _cli_error(capsys, "train", store, "--out", str(tmp_path / "m.json"), "--probability-folds", "3", "--engine", "local")
    assert line == "dpipe train: error: --probability-folds applies only with --probability ('sigmoid' or 'isotonic')."
    flags = cli_flags(build_parser()._subparsers._group_actions[0].choices["train"])
    assert in_cli_terms("with calibrate=False and train_metrics=False", flags) == "with --no-calibrate and --no-train-metrics"
    assert in_cli_terms("evaluate it with by_group= and 'bins'", flags) == "evaluate it with by_group= and 'bins'"  # not train's options
    # ... but a bare keyword is a Python spelling wherever it comes from: any command's flag
    everywhere = every_cli_flag(build_parser())
    assert in_cli_terms("evaluate it with by_group= and 'bins'", flags, everywhere) == "evaluate it with --by-group and 'bins'"
    assert in_cli_terms("check positive=/negative= (x=1, lam=auto); an unlabeled=True store", flags, everywhere) == \
        "check --positive/--negative (x=1, lam=auto); an --unlabeled store"
    assert in_cli_terms("use objective='error-rate' (or another *-rate)", flags) == "use --objective error-rate (or another *-rate)"


def test_an_existing_output_asks_for_overwrite_in_each_interface(store, tmp_path, capsys):
    out = tmp_path / "m.json"
    dpipe.train(store, engine="local", out=out)
    with pytest.raises(dpipe.exceptions.OutputExistsError, match=r"exists; pass overwrite=True to replace the model$"):
        dpipe.train(store, engine="local", out=out)
    line = _cli_error(capsys, "train", store, "--out", str(out), "--engine", "local")
    assert line == f"dpipe train: error: {out}: exists; pass --overwrite to replace the model"


def test_a_solver_warning_names_the_remedy_in_each_interface(store, tmp_path, capsys):
    with pytest.warns(ConvergenceWarning, match=r"raise 'max_iter' or loosen 'tol'\."):
        dpipe.train(store, "auc-smooth", max_iter=1, engine="local")
    with warnings.catch_warnings():  # shown by the command, as a user sees it (pytest turns warnings into errors)
        warnings.simplefilter("always", ConvergenceWarning)
        assert main(["-q", "train", store, "--objective", "auc-smooth", "--max-iter", "1", "--out", str(tmp_path / "w.json"), "--engine", "local"]) == 0
    (warning,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("dpipe: warning:")]
    assert warning.endswith("raise --max-iter or loosen --tol.") and "'max_iter'" not in warning
    assert np.isfinite(dpipe.LinearModel.load(tmp_path / "w.json").intercept)


def test_a_hint_about_another_step_is_in_each_interfaces_spelling(tmp_path, capsys):
    # ingest's label rule (the command: its flags) and a store without the training store's features (train from Python: like=)
    src = tmp_path / "d.csv"
    src.write_text("a,b,target\n" + "".join(f"{i},{i % 3},{'xyz'[i % 3]}\n" for i in range(30)))
    line = _cli_error(capsys, "ingest", str(src), str(tmp_path / "s.zarr"), "--label", "target")
    assert line.endswith("pass --positive or --negative") and "positive=" not in line
    with pytest.raises(ValueError, match=r"pass positive= or negative=$"):
        dpipe.ingest(str(src), str(tmp_path / "t.zarr"), label="target")
    X, y = classification_data(200, 4, seed=1)
    small = write_store(tmp_path / "small.zarr", X, y, [200])
    model = dpipe.train(small, engine="local")
    X4, y4 = classification_data(200, 5, seed=1)
    wide = write_store(tmp_path / "wide.zarr", X4, y4, [200])
    with pytest.raises(ValueError, match=r"ingest it with like= the training store$") as python:
        dpipe.evaluate(model, wide, engine="local")
    assert "--like" not in str(python.value)
    model.save(tmp_path / "m.json")
    line = _cli_error(capsys, "evaluate", str(tmp_path / "m.json"), str(wide), "--engine", "local")
    assert line.endswith("ingest it with --like the training store")
