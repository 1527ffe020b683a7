"""Start-up: what ``dpipe --version``, ``--help`` and a local ``train`` import, the lazy packages, and the
global options after the command.

The import checks run the command in a fresh interpreter and read ``sys.modules`` at its
exit: which modules were loaded, never how long it took (the figures are in the report of
issue 26, measured with ``time.perf_counter`` around whole processes).
"""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import subprocess
import sys

import pytest

import dpipe
from dpipe.cli import build_parser, main

PACKAGE = pathlib.Path(dpipe.__file__).parent

#: what the parser must not load (the cluster, the solvers' scipy, the kernels' numba, the stores' readers, plots, sklearn)
HEAVY = ("dask.array", "distributed", "scipy", "numba", "zarr", "pyarrow", "matplotlib", "sklearn")

#: runs ``dpipe ARGS...`` as ``python -m dpipe`` does and writes the modules loaded at exit (as JSON) to argv[1]
_PROBE = """
import atexit, json, runpy, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["dpipe", *sys.argv[2:]]
runpy.run_module("dpipe", run_name="__main__", alter_sys=True)
"""


def _run(tmp_path: pathlib.Path, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run ``dpipe ARGS`` in a fresh interpreter: the finished process and the modules it had loaded at exit."""
    out = tmp_path / "modules.json"
    out.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "DPIPE_SCHEDULER"}  # engine auto must not see a named cluster
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(out), *args], capture_output=True, text=True, env=env, timeout=300, check=False)
    return proc, set(json.loads(out.read_text()))


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The packages of ``names`` that are among ``modules`` (a package counts when it or any submodule is loaded)."""
    return [n for n in names if any(m == n or m.startswith(n + ".") for m in modules)]


def test_loaded_finds_a_package_by_any_of_its_modules():
    assert _loaded({"numpy", "scipy.sparse", "dask", "dask.config"}, HEAVY) == ["scipy"]
    assert _loaded({"dask.array.core"}, ("dask.array",)) == ["dask.array"]
    assert _loaded({"dask", "dask.arrayish"}, ("dask.array",)) == []


@pytest.mark.parametrize("args", [
    ("--version",),
    ("--help",),
    ("train", "--help"),
    ("evaluate", "--help"),
    ("ingest", "--help"),
    ("registry", "list", "--help"),
])
def test_version_and_help_load_neither_dask_nor_scipy_nor_numba(tmp_path, args):
    proc, modules = _run(tmp_path, *args)
    assert proc.returncode == 0, proc.stderr
    assert "dpipe.cli.main" in modules and "dpipe.fit._params" in modules  # the probe saw the parser being built
    assert _loaded(modules, HEAVY) == []
    if args == ("--version",):
        assert proc.stdout.strip() == f"dpipe {dpipe.__version__}"
    else:
        assert "usage: dpipe" in proc.stdout
    if args == ("train", "--help"):
        assert "--objective" in proc.stdout and "auc-smooth" in proc.stdout and "--lam" in proc.stdout


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> str:
    from dpipe.io import make_data

    path = tmp_path_factory.mktemp("startup") / "small.zarr"
    make_data(path, rows=3000, features=8, seed=3, shard_rows=1000)
    return str(path)


@pytest.mark.parametrize("engine", ["local", "auto"])
def test_a_local_train_loads_neither_distributed_nor_dask_array(tmp_path, small_store, engine):
    model = tmp_path / "m.json"
    proc, modules = _run(tmp_path, "train", small_store, "--objective", "auc-smooth", "--engine", engine, "--out", str(model), "-q")
    assert proc.returncode == 0, proc.stderr
    assert model.is_file() and "auc-smooth: objective" in proc.stdout
    assert "dpipe.fit._smooth" in modules and "dpipe.engine._local" in modules  # the probe saw the fit
    assert _loaded(modules, ("distributed", "dask.array")) == []
    assert "dpipe.engine._dataset" not in modules and "dpipe.engine._memory" not in modules  # nor the cluster's dataset


def test_a_killed_worker_is_still_one_cluster_error_line():
    # distributed's KilledWorker is looked up when an error is caught (the local engine never imports distributed)
    from distributed.scheduler import KilledWorker

    from dpipe.engine._waits import killed_workers_as_cluster_errors
    from dpipe.exceptions import ClusterError

    with pytest.raises(ClusterError, match=r"^STORE: a task killed every worker that ran it \(task-1, last on \?\)"), \
            killed_workers_as_cluster_errors("STORE"):
        raise KilledWorker("task-1", None, 3)
    with pytest.raises(ValueError, match="not a cluster error"), killed_workers_as_cluster_errors("STORE"):
        raise ValueError("not a cluster error")


# -- global options after the command ------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, verbose, quiet", [
    (["train", "s.zarr", "--out", "m.json"], 0, False),
    (["-q", "train", "s.zarr", "--out", "m.json"], 0, True),
    (["train", "s.zarr", "--out", "m.json", "-q"], 0, True),
    (["train", "s.zarr", "-q", "--out", "m.json"], 0, True),
    (["train", "s.zarr", "--out", "m.json", "--quiet"], 0, True),
    (["ingest", "a", "b", "-v"], 1, False),
    (["ingest", "-v", "a", "b"], 1, False),
    (["ingest", "a", "-v", "b"], 1, False),
    (["-v", "ingest", "a", "b"], 1, False),
    (["-v", "ingest", "a", "b", "-vv"], 3, False),
    (["ingest", "a", "b", "--verbose", "-v"], 2, False),
    (["registry", "list", "reg", "-q"], 0, True),
])
def test_global_options_before_or_after_the_command(argv, verbose, quiet):
    a = build_parser().parse_args(argv)
    assert (a.verbose, a.quiet) == (verbose, quiet)
    assert a.command == argv[1] if argv[0].startswith("-") else a.command == argv[0]
    if a.command == "ingest":
        assert (a.src, a.dest) == ("a", "b")


def test_other_unknown_options_are_still_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["train", "s.zarr", "--out", "m.json", "-q", "--bogus"])
    assert exit_.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_the_subcommand_help_says_global_options_may_follow():
    train = build_parser()._subparsers._group_actions[0].choices["train"]
    assert "-v / -q" in train.format_help()


def test_quiet_after_the_command_silences_the_log(tmp_path, capsys):
    assert main(["make-data", str(tmp_path / "a.zarr"), "--rows", "500", "--features", "4"]) == 0
    assert "dpipe.io make-data" in capsys.readouterr().err  # the progress line, at INFO
    assert main(["make-data", str(tmp_path / "b.zarr"), "--rows", "500", "--features", "4", "-q"]) == 0
    assert "dpipe.io" not in capsys.readouterr().err


def test_verbose_after_the_command_shows_the_traceback(tmp_path, capsys):
    missing = str(tmp_path / "missing.zarr")
    assert main(["info", missing]) == 1
    assert "Traceback" not in capsys.readouterr().err
    assert main(["info", missing, "-v"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "dpipe info: error:" in err


# -- lazy packages --------------------------------------------------------------------------------------------------

LAZY_PACKAGES = ("dpipe.fit", "dpipe.engine", "dpipe.solvers", "dpipe.objectives", "dpipe.reduce")


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_every_lazy_export_resolves(name):
    pkg = importlib.import_module(name)
    assert list(pkg.__all__) == list(pkg._LAZY) and len(set(pkg.__all__)) == len(pkg.__all__)
    for export in pkg.__all__:
        value = getattr(pkg, export)
        module = importlib.import_module(pkg._LAZY[export], name)
        assert value is getattr(module, export)
        assert vars(pkg)[export] is value  # kept: the next access is a plain attribute
    assert dir(pkg) == sorted(pkg.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        pkg.no_such_name  # noqa: B018


def test_from_import_of_a_lazy_name_works():
    from dpipe.engine import LocalDataset, resolve_engine
    from dpipe.fit import OBJECTIVES, train
    from dpipe.solvers import FitResult

    assert LocalDataset.__module__ == "dpipe.engine._local" and resolve_engine.__module__ == "dpipe.engine._open"
    assert "auc-smooth" in OBJECTIVES and train.__module__ == "dpipe.fit._train" and FitResult.__module__ == "dpipe.solvers._result"


def test_the_registry_lists_the_structural_losses_the_oracles_implement():
    from dpipe.fit import OBJECTIVES
    from dpipe.objectives import STRUCTURAL_LOSSES

    declared = [(o.name, o.takes_k) for o in OBJECTIVES.values() if o.family == "structural"]
    assert declared == [(name, takes_k) for name, (_, takes_k) in STRUCTURAL_LOSSES.items()]
