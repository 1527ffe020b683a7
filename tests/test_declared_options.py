"""The cluster options (:class:`dpipe.engine.ClusterSpec`) and the ingest options (:class:`dpipe.io.IngestOptions`) are
declared once: the public signatures agree with the declarations, the ``dpipe`` commands' flags and the retrain
configuration are generated from them, and nothing else in the package lists them again."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import pathlib
import re

import pytest

import dpipe
from dpipe._options import flag_of, options_of
from dpipe.cli import build_parser
from dpipe.engine import ClusterSpec
from dpipe.engine._cluster_spec import cluster_keywords
from dpipe.exceptions import ParameterError
from dpipe.io import IngestOptions
from dpipe.io._ingest_options import TRANSFORM_OPTIONS, ingest_defaults
from dpipe.io._transform_store import transform_store
from dpipe.registry import load_config

PACKAGE = pathlib.Path(dpipe.__file__).parent


def _keywords(function) -> dict[str, object]:
    return {name: p.default for name, p in inspect.signature(function).parameters.items() if p.default is not inspect.Parameter.empty}


@pytest.mark.parametrize("owner, function", [("train", dpipe.train), ("evaluate", dpipe.evaluate), ("predict", dpipe.predict)])
def test_the_public_cluster_keywords_are_the_declared_ones_with_their_defaults(owner, function):
    declared = cluster_keywords(owner)
    assert set(declared) == {"engine", "client", "scheduler", "workers", "memory_limit", "cache"}
    given = _keywords(function)
    assert {name: given.get(name, "missing") for name in declared} == declared
    assert declared["cache"] == (None if owner == "train" else "stream")  # one pass: evaluate and predict stream their shards


def test_cluster_client_takes_declared_options_with_their_defaults():
    fields = {name: f.default for name, (f, _) in options_of(ClusterSpec).items()}
    given = _keywords(dpipe.cluster_client)
    assert set(given) - set(fields) == {"threads_per_worker"}  # the embedded cluster's own (dask config dpipe.threads-per-worker)
    assert {name: fields[name] for name in given if name in fields} == {name: v for name, v in given.items() if name in fields}
    assert set(given) & set(fields) == {"client", "scheduler", "workers", "memory_limit", "cluster"}


def test_ingest_and_split_take_the_declared_ingest_options_with_their_defaults():
    given = _keywords(dpipe.ingest)
    assert given == ingest_defaults()  # every option of ingest is declared, each with ingest's default, and no other
    for function in (dpipe.io.split_store, transform_store):  # the transform's options, also of a store already written
        keywords = _keywords(function)
        assert {name: keywords[name] for name in TRANSFORM_OPTIONS} == ingest_defaults(TRANSFORM_OPTIONS)


def _commands() -> dict[str, argparse.ArgumentParser]:
    return build_parser()._subparsers._group_actions[0].choices


@pytest.mark.parametrize("declaration", [ClusterSpec, IngestOptions])
def test_every_declared_option_is_a_flag_of_exactly_its_commands(declaration):
    commands = _commands()
    checked = 0
    for name, (field, opt) in options_of(declaration).items():
        for command, parser in commands.items():
            actions = {a.dest: a for a in parser._actions}
            if command not in opt.commands:
                assert name not in actions or declaration is IngestOptions and name == "overwrite", (name, command)  # overwrite: each command's own
                continue
            action = actions[name]
            assert flag_of(name, opt) in action.option_strings
            assert action.default == opt.defaults.get(command, field.default), (name, command)
            assert list(action.choices or []) == list(opt.choices), (name, command)
            checked += 1
    assert checked >= (25 if declaration is ClusterSpec else 30)


def test_a_command_default_differs_where_declared():
    commands = _commands()
    cache = {c: next(a for a in commands[c]._actions if a.dest == "cache").default for c in ("train", "evaluate", "predict", "demo")}
    assert cache == {"train": None, "evaluate": "stream", "predict": "stream", "demo": None}
    engine = {c: next(a for a in commands[c]._actions if a.dest == "engine").default for c in ("train", "demo")}
    assert engine == {"train": "auto", "demo": "auto"}


def test_the_flags_parse_into_the_declaration():
    parser = build_parser()
    a = parser.parse_args(["predict", "m.json", "s.zarr", "--out", "p.parquet", "--scheduler-file", "sched.json", "--workers", "3", "--cache", "memory"])
    spec = ClusterSpec.from_arguments(a)
    assert spec == ClusterSpec(scheduler_file="sched.json", workers=3, cache="memory")
    assert spec.keywords() == {"scheduler": "sched.json", "workers": 3, "cache": "memory"}  # the file is the scheduler; defaults left out
    a = parser.parse_args(["ingest", "in.csv", "out.zarr", "--label", "2", "--positive", "a,b", "--header", "no", "--scale", "maxabs"])
    options = IngestOptions.from_arguments(a)
    assert (options.label, options.positive, options.header, options.scale) == (2, ["a", "b"], False, "maxabs")
    assert sorted(options.given("ingest")) == ["header", "label", "positive", "scale"]
    assert options.keywords("split") == {"log1p": None, "scale": "maxabs"}
    with pytest.raises(SystemExit):
        parser.parse_args(["ingest", "in.csv", "out.zarr", "--header", "perhaps"])


def _config(tmp_path: pathlib.Path, extra: str) -> pathlib.Path:
    path = tmp_path / "retrain.yaml"
    path.write_text(f"registry: reg\ndata: {{train: w.svm, holdout: h.svm{extra}}}\n" if extra.startswith(",") else
                    f"registry: reg\ndata: {{train: w.svm, holdout: h.svm}}\n{extra}\n")
    return path


@pytest.mark.parametrize("extra, field, problem", [
    ("cluster: {engine: gpu}", "cluster.engine", "must be one of 'auto', 'dask', 'local'. Got 'gpu' instead."),
    ("cluster: {cluster: pbs}", "cluster.cluster", "must be one of 'local', 'slurm'. Got 'pbs' instead."),
    ("cluster: {cache: disk}", "cluster.cache", "must be one of 'auto', 'memory', 'stream'. Got 'disk' instead."),
    ("cluster: {workers: two}", "cluster.workers", "Expected `int | null`, got `str`"),
    ("cluster: {memory_limit: 4GiB}", "cluster", "Object contains unknown field `memory_limit`"),  # the file's names are kebab-case
    (", ingest: {unseen: maybe}", "data.ingest.unseen", "must be one of 'error', 'ignore'. Got 'maybe' instead."),
    (", ingest: {skip_rows: many}", "data.ingest.skip_rows", "Expected `int`, got `str`"),
    (", ingest: {n_feature: 4}", "data.ingest.n_feature", "not an ingest option"),
])
def test_a_wrong_cluster_or_ingest_field_is_one_line_naming_the_file_and_field(tmp_path, extra, field, problem):
    path = _config(tmp_path, extra)
    with pytest.raises(ParameterError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: {field}"), message
    assert problem in message


def test_the_cluster_section_decodes_into_a_cluster_spec(tmp_path):
    cfg = load_config(_config(tmp_path, "cluster: {engine: dask, scheduler-file: s.json, memory-limit: 4GiB, cluster: local}"))
    spec = cfg.cluster.options()
    assert spec == ClusterSpec(engine="dask", scheduler_file="s.json", memory_limit="4GiB", cluster="local")
    assert spec.keywords() == {"engine": "dask", "scheduler": "s.json", "memory_limit": "4GiB"}  # cluster: the dpipe.cluster setting
    assert load_config(_config(tmp_path, ", ingest: {unseen: ignore, header: true}")).data.ingest == {"unseen": "ignore", "header": True}


#: the functions whose signatures spell the declared keywords out for their users (checked above)
_PUBLIC = {"train", "evaluate", "predict", "ingest", "split_store", "transform_store", "cluster_client"}


def test_no_other_function_lists_the_declared_options_again():
    # a second list of three or more declared options as keyword parameters with defaults is a copy that can drift from the
    # declaration (internal functions take the options without defaults, or the declaration itself)
    declared = {ClusterSpec: set(options_of(ClusterSpec)) - {"client"}, IngestOptions: set(options_of(IngestOptions)) - {"overwrite"}}
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in _PUBLIC:
                positional = node.args.args[len(node.args.args) - len(node.args.defaults):]
                names = {a.arg for a in positional} | {a.arg for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None}
                for cls, options in declared.items():
                    if len(names & options) >= 3:
                        offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({cls.__name__})")
    assert offenders == []


def test_the_declarations_are_frozen_records():
    spec = ClusterSpec(workers=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.workers = 3  # type: ignore[misc]
    assert spec.replace(workers=3).workers == 3 and spec.workers == 2
    assert re.fullmatch(r"--[a-z0-9-]+", flag_of("memory_limit", options_of(ClusterSpec)["memory_limit"][1])) is not None


def test_a_cluster_or_ingest_option_error_names_the_parameter_in_python_and_the_flag_on_the_command_line(tmp_path, capsys):
    from dpipe.cli import main
    from dpipe.testing import classification_data, one_error_line, write_store

    X, y = classification_data(300, 4, seed=4)
    store = str(write_store(tmp_path / "s.zarr", X, y, [300]))
    model = dpipe.train(store, "auc-moment", engine="local", out=str(tmp_path / "m.json"))
    with pytest.raises(ParameterError, match=r"^The 'workers' parameter of evaluate chooses a dask cluster; engine='local' runs in this process\. Drop it or the engine\.$"):
        dpipe.evaluate(model, store, engine="local", workers=2)
    assert main(["evaluate", str(tmp_path / "m.json"), store, "--engine", "local", "--workers", "2"]) == 1
    line = one_error_line(capsys.readouterr().err, "evaluate")
    assert line == "dpipe evaluate: error: --workers chooses a dask cluster; --engine local runs in this process. Drop it or the engine."
    source = tmp_path / "s.csv"
    source.write_text("a,b,label\n1,x,1\n2,y,0\n")
    with pytest.raises(ParameterError, match=r"^The 'hash_features' parameter of ingest writes a sparse store .*drop layout='dense'\.$"):
        dpipe.ingest(str(source), str(tmp_path / "h.zarr"), hash_features=8, layout="dense")
    assert main(["ingest", str(source), str(tmp_path / "h.zarr"), "--hash-features", "8", "--layout", "dense"]) == 1
    line = one_error_line(capsys.readouterr().err, "ingest")
    assert line.startswith("dpipe ingest: error: --hash-features writes a sparse store") and line.endswith("drop --layout dense."), line
