"""``--json`` on every command: one JSON document on stdout, its fields as docs/json-output.md names them (issue 29).

Every command runs in this process through :func:`dpipe.cli.main.main` on small real
stores; stdout must parse as exactly one JSON document (a second document or a log line
fails ``json.loads``), and its values are checked against what the files and
:mod:`dpipe.metrics` say. The module fixture runs each command once (stdout and stderr
captured apart); the tests that need capsys run their own commands.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import re
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import dpipe
from dpipe.cli.main import build_parser, main
from dpipe.io import open_store
from dpipe.metrics import roc_auc_score
from dpipe.testing import classification_data, one_error_line, write_store

DOC = Path(__file__).resolve().parents[2] / "docs" / "json-output.md"


# ---------------------------------------------------------------------------------
# the document on stdout, and the doc's tables
# ---------------------------------------------------------------------------------
def only_document(stdout: str) -> dict[str, Any]:
    """The one JSON object that is all of ``stdout`` (json.loads refuses a second document, or a log line before or after it)."""
    doc = json.loads(stdout)
    assert isinstance(doc, dict), stdout
    return doc


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def doc(self) -> dict[str, Any]:
        return only_document(self.out)


def run(*argv: str) -> Run:
    """``main(argv)`` in this process, its stdout and stderr captured apart."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return Run(code, out.getvalue(), err.getvalue())


@dataclass
class Field:
    name: str
    optional: bool


def documented() -> dict[str, list[Field]]:
    """Every table of docs/json-output.md by its command (``"train"``, ``"registry list"``, ``"store summary"``): its rows' fields,
    a row linking to the store summary standing for that table's fields."""
    tables: dict[str, list[Field]] = {}
    current = None
    for line in DOC.read_text().splitlines():
        heading = re.fullmatch(r"## `dpipe ([a-z -]+?) --json`", line) or re.fullmatch(r"## (Store summary)", line)
        if heading:
            current = heading.group(1).lower()
            tables[current] = []
        elif line.startswith("## "):
            current = None
        elif current and line.startswith("| ") and not line.startswith("| field") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            name = re.fullmatch(r"`([a-z0-9_\[\].]+)`", cells[0])
            if name:
                tables[current].append(Field(name.group(1), "optional" in cells[1]))
            elif "(#store-summary)" in cells[2]:
                tables[current] += tables["store summary"]
    return tables


def check_documented(command: str, doc: dict[str, Any]) -> None:
    """``doc``'s top-level fields are the ones the doc's table for ``command`` names (optional ones may be absent); so are the
    fields of its documented objects (``a.b``) and of the objects in its documented lists (``a[].b``)."""
    fields = documented()[command]
    top = {f.name for f in fields if "." not in f.name}
    required = {f.name for f in fields if "." not in f.name and not f.optional}
    assert required <= set(doc) <= top, f"{command}: printed {sorted(doc)}; documented {sorted(top)}"
    children: dict[str, set[str]] = {}
    for f in fields:
        if "." in f.name:
            parent, child = f.name.rsplit(".", 1)
            children.setdefault(parent, set()).add(child)
    for parent, names in children.items():
        values = doc[parent[:-2]] if parent.endswith("[]") else [doc[parent]]
        for value in values:
            assert set(value) == names, f"{command}: {parent} has {sorted(value)}; documented {sorted(names)}"


def check_store_summary(summary: dict[str, Any], path: str | os.PathLike) -> None:
    """A store summary says what the store's manifest says."""
    m = open_store(path).manifest
    assert summary["path"] == os.path.abspath(path) and os.path.isdir(summary["path"])
    assert (summary["rows"], summary["features"], summary["shards"]) == (m.n_rows, m.n_features, m.n_shards)
    assert (summary["positive"], summary["negative"]) == ((m.n_positive, m.n_negative) if m.labelled else (None, None))
    assert summary["positive"] is None or summary["positive"] + summary["negative"] == summary["rows"]
    assert summary["store_format"] == m.format and summary["layout"] == m.layout and summary["checksums"] == m.checksum_algorithm
    assert summary["bytes"] == sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


# ---------------------------------------------------------------------------------
# every command, once
# ---------------------------------------------------------------------------------
ROWS = 900


@pytest.fixture(scope="module")
def runs(tmp_path_factory, retrain_stores) -> dict[str, Any]:
    """Every command with --json on small real stores: ``{command: Run}`` and the paths it used."""
    d = tmp_path_factory.mktemp("json-output")
    X, y = classification_data(ROWS, 5, seed=3, scales=False)
    group = (np.arange(ROWS) % 3 == 0).astype(np.int16)
    store = write_store(d / "s.zarr", X, y, [300, 300, 300], group=group, groups=["a", "b"])
    src = d / "a.svm"
    src.write_text("".join(f"{1 if i % 3 else -1} 1:{i % 5} 3:{(i * 7) % 11 / 10}\n" for i in range(60)))
    model, metrics, pred = d / "m.json", d / "metrics.json", d / "p.parquet"
    r = {"dir": d, "store": store, "X": X, "y": y, "src": src, "model": model, "metrics": metrics, "pred": pred}
    r["make-data"] = run("make-data", str(d / "made.zarr"), "--rows", "700", "--features", "4", "--shard-rows", "300", "--json")
    r["ingest"] = run("ingest", str(src), str(d / "in.zarr"), "--json")
    r["split"] = run("split", store, str(d / "train.zarr"), str(d / "test.zarr"), "--json")
    r["info"] = run("info", "--json", store)  # the flag before the positional
    r["verify"] = run("verify", store, "--json")
    r["train"] = run("train", store, "--objective", "auc-smooth", "--out", str(model), "--engine", "local", "--json")
    r["evaluate"] = run("evaluate", str(model), store, "--engine", "local", "--json", "--out", str(metrics))
    r["predict"] = run("predict", str(model), store, "--out", str(pred), "--engine", "local", "--json")
    shared = d / "shared"  # a shared data folder holding adult's two files (three rows each)
    shared.mkdir()
    for name, suffix in (("adult.data.gz", ""), ("adult.test.gz", ".")):
        rows = "".join(f"{39 + i}, Private, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, Male, 0, 0, 40, "
                       f"United-States, {'>50K' if i else '<=50K'}{suffix}\n" for i in range(3))
        with gzip.open(shared / name, "wt") as f:
            f.write(("|1x3 Cross validator\n" if suffix else "") + rows)
    r["datasets"] = run("datasets", "adult", "--from", str(shared), "--dir", str(d / "datasets"), "--json")
    r["demo"] = run("demo", "--workdir", str(d / "demo"), "--rows", "3000", "--features", "5", "--engine", "local", "--json")
    # a registry: two retrains, then every verb
    work = d / "work"
    shutil.copytree(retrain_stores, work)
    for name, train in (("w1.yaml", "w1.zarr"), ("w2.yaml", "w2.zarr")):
        (work / name).write_text(f"registry: {work / 'reg'}\ndata: {{train: {work / train}, holdout: {work / 'hold.zarr'}, pool: {work / 'pool.zarr'}}}\n"
                                 "constraints: {churn: 0.1}\npromote: {metric: accuracy}\ncluster: {engine: local}\n")
    reg = str(work / "reg")
    r["reg"] = reg
    r["retrain"] = run("retrain", str(work / "w1.yaml"), "--json")
    r["retrain 2"] = run("retrain", str(work / "w2.yaml"), "--json")
    r["retrain repeated"] = run("-q", "retrain", str(work / "w2.yaml"), "--json")  # the same inputs: decided before, nothing changes
    r["registry list"] = run("registry", "list", reg, "--json")
    r["registry show"] = run("registry", "show", reg, "--json")
    r["registry history"] = run("registry", "history", reg, "--json")
    r["registry plot"] = run("registry", "plot", reg, "--out", str(d / "retrains.png"), "--json")
    r["registry rollback"] = run("registry", "rollback", reg, "--json")
    r["registry promote"] = run("registry", "promote", reg, r["retrain 2"].doc["version"], "--json")
    r["registry repair"] = run("registry", "repair", reg, "--json")
    return r


COMMANDS = ["make-data", "ingest", "split", "info", "verify", "train", "evaluate", "predict", "datasets", "demo", "retrain",
            "registry list", "registry show", "registry history", "registry plot", "registry rollback", "registry promote", "registry repair"]


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_prints_one_json_document_and_logs_only_on_stderr(runs, command):
    r = runs[command]
    assert r.code == 0, r.err
    doc = r.doc  # the whole of stdout
    assert r.out.endswith("}\n") and r.out.count("\n}\n") == 1
    if command != "info":
        assert doc["format"] == ("dpipe-metrics" if command == "evaluate" else f"dpipe-{command.replace(' ', '-')}") and doc["format_version"] == 1
    assert not re.search(r"^\d\d:\d\d:\d\d dpipe", r.out, re.M)  # no log line on stdout


def test_the_doc_names_every_field_each_command_prints(runs):
    tables = documented()
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices  # noqa: SLF001
    verbs = next(a for a in commands["registry"]._actions if a.dest == "verb").choices  # noqa: SLF001
    every = {c for c in commands if c != "registry"} | {f"registry {v}" for v in verbs}
    assert every == set(tables) - {"store summary"}  # a table for every command, and only for commands
    assert every == set(COMMANDS)  # and each one run here
    for command in COMMANDS:
        check_documented(command, runs[command].doc)
    for name in ("train", "test"):
        check_documented("store summary", runs["split"].doc[name])


def test_a_second_document_or_a_log_line_on_stdout_fails_the_check():
    doc = json.dumps({"format": "dpipe-x", "format_version": 1}, indent=1) + "\n"
    assert only_document(doc)["format"] == "dpipe-x"
    for text in (doc + doc, "08:00:00 dpipe.train fitting\n" + doc, doc + "08:00:00 dpipe.train done\n", doc.replace("\n}", "\n}\n[]")):
        with pytest.raises(json.JSONDecodeError):
            only_document(text)


# ---------------------------------------------------------------------------------
# each document's values
# ---------------------------------------------------------------------------------
def test_store_commands_summarize_the_stores_they_wrote(runs):
    d = runs["dir"]
    made = runs["make-data"].doc
    check_store_summary(made, d / "made.zarr")
    assert made["rows"] == 700 and made["features"] == 4 and made["shards"] == 3 and set(made["groups"]) == {"g0", "g1"}
    assert sum(made["groups"].values()) == 700 and made["group_column"] == "group" and made["nnz"] == 700 * 4
    ingested = runs["ingest"].doc
    check_store_summary(ingested, d / "in.zarr")
    assert ingested["rows"] == 60 and ingested["positive"] == 40 and ingested["source"] == str(runs["src"])
    assert ingested["groups"] is None and ingested["weighted"] is False and ingested["transform"] is None
    split = runs["split"].doc
    check_store_summary(split["train"], d / "train.zarr")
    check_store_summary(split["test"], d / "test.zarr")
    assert split["train"]["rows"] + split["test"]["rows"] == ROWS and split["train"]["rows"] == int(0.75 * ROWS)
    assert split["source"] == runs["store"]
    assert runs["info"].doc == open_store(runs["store"]).manifest.to_dict()


def test_verify_reports_the_store_and_then_its_damaged_shards(runs, tmp_path):
    doc = runs["verify"].doc
    assert doc["ok"] and doc["damaged"] == [] and doc["recorded"] is False
    assert (doc["shards"], doc["rows"], doc["path"], doc["checksums"]) == (3, ROWS, runs["store"], "xxh3_128")
    damaged = shutil.copytree(runs["store"], tmp_path / "damaged.zarr")
    for shard in (0, 2):
        os.remove(damaged / "X" / "c" / str(shard) / "0")
    r = run("-q", "verify", str(damaged), "--json")
    assert r.code == 1
    doc = r.doc  # printed for a damaged store too, then the error line
    check_documented("verify", doc)
    assert doc["ok"] is False and [x["shard"] for x in doc["damaged"]] == [0, 2] and doc["damaged"][1]["rows"] == [600, 900]
    assert all("is missing" in x["error"] and str(damaged) in x["error"] for x in doc["damaged"])
    line = one_error_line(r.err, "verify")
    assert "shard 0" in line and "(and 1 more damaged shard: 2)" in line


def test_train_prints_the_model_and_its_fit(runs):
    r = runs["train"]
    doc = r.doc
    model = dpipe.LinearModel.load(runs["model"])
    assert doc["path"] == str(runs["model"]) and os.path.isfile(doc["path"])
    assert (doc["objective"], doc["n_features"], doc["intercept"]) == ("auc-smooth", 5, model.intercept)
    fit = doc["fit"]
    assert (fit["iterations"], fit["evaluations"], fit["converged"], fit["message"]) == (model.fit["nit"], model.fit["nfev"], model.fit["success"], model.fit["message"])
    assert fit["converged"] and fit["objective_value"] == model.fit["fun"] and fit["time"] == pytest.approx(fit["time_data"] + fit["time_solve"])
    X, y = runs["X"], runs["y"]
    assert doc["train_metrics"] == model.metrics["train"]
    assert doc["train_metrics"]["roc_auc"] == pytest.approx(roc_auc_score(y, model.decision_function(X.astype(np.float64))), abs=1e-12)
    assert doc["constraints"] == [] and doc["constraints_met"] is None
    assert "dpipe.train" in r.err  # the log went to stderr


def test_evaluate_prints_the_metrics_document_it_writes(runs):
    doc = runs["evaluate"].doc
    model = dpipe.LinearModel.load(runs["model"])
    X, y = runs["X"], runs["y"]
    assert doc["n"] == ROWS and doc["n_positive"] == int((y == 1).sum())
    assert doc["roc_auc"] == pytest.approx(roc_auc_score(y, model.decision_function(X.astype(np.float64))), abs=1e-12)
    assert json.loads(runs["metrics"].read_text()) == doc  # --out FILE: the same document


def test_predict_prints_where_it_wrote(runs):
    doc = runs["predict"].doc
    assert doc["path"] == str(runs["pred"]) and pq.read_table(doc["path"]).num_rows == doc["rows"] == ROWS
    assert (doc["model"], doc["store"], doc["threshold"]) == (str(runs["model"]), runs["store"], 0.0)


def test_demo_prints_its_models_metrics_and_report(runs):
    doc = runs["demo"].doc
    report = json.loads(Path(doc["report"]).read_text())
    assert report["format"] == "dpipe-demo-report" and doc["workdir"] == str(runs["dir"] / "demo") and os.path.isfile(doc["roc_png"])
    assert [m["objective"] for m in doc["models"]] == [r["objective"] for r in report["results"]]
    for m, r in zip(doc["models"], report["results"]):
        assert m["test"] == r["test"] and os.path.isfile(m["path"]) and dpipe.LinearModel.load(m["path"]).objective == m["objective"]


def test_retrain_and_the_registry_verbs_print_records_and_listings(runs):
    first, second = runs["retrain"].doc, runs["retrain 2"].doc
    assert first["action"] == "promoted" and first["version"] == "v0001" and not first["repeated"]
    assert second["version"] == "v0002" and second["champion_before"] == "v0001"
    assert runs["retrain 2"].code == (0 if second["action"] == "promoted" else 3)
    from dpipe.registry import Registry

    reg = Registry(runs["reg"])
    history = reg.history()
    assert {k: v for k, v in first.items() if k not in ("format", "format_version", "repeated")} == history[0]
    listing = runs["registry list"].doc
    assert [v["version"] for v in listing["versions"]] == ["v0001", "v0002"] and listing["registry"] == runs["reg"]
    assert listing["champion"] == second["champion_after"] and [v["champion"] for v in listing["versions"]].count(True) == 1
    assert listing["versions"][1]["value"] == second["challenger"][second["metric"]]
    shown = runs["registry show"].doc
    assert shown["version"] == second["champion_after"] and shown["champion"] is True
    assert runs["registry history"].doc["decisions"] == history[:2]
    assert os.path.isfile(runs["registry plot"].doc["path"])
    rollback, promote = runs["registry rollback"].doc, runs["registry promote"].doc
    assert rollback["action"] == "rollback" and promote["action"] == "promote" and promote["champion_after"] == "v0002"
    assert history[2:] == [{k: v for k, v in d.items() if k not in ("format", "format_version")} for d in (rollback, promote)]
    repair = runs["registry repair"].doc
    assert repair["repaired"] is False and repair["changes"] == [] and (repair["decisions"], repair["versions"], repair["champion"]) == (4, 2, "v0002")
    repeated = runs["retrain repeated"].doc
    assert repeated["repeated"] is True and {k: v for k, v in repeated.items() if k != "repeated"} == {k: v for k, v in second.items() if k != "repeated"}


# ---------------------------------------------------------------------------------
# '-' means stdout; the old spelling; conflicts; capsys
# ---------------------------------------------------------------------------------
def test_json_goes_to_stdout_and_the_log_to_stderr(runs, tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["train", runs["store"], "--objective", "auc-moment", "--out", str(out), "--engine", "local", "--json"]) == 0
    cap = capsys.readouterr()
    assert only_document(cap.out)["path"] == str(out) and "dpipe.train" in cap.err and "auc-moment: objective" not in cap.err
    assert main(["-v", "info", runs["store"], "--json"]) == 0
    assert only_document(capsys.readouterr().out)["n_rows"] == ROWS


def test_a_dash_means_stdout_where_a_file_is_written(runs, tmp_path, capsysbinary):
    assert main(["-q", "train", runs["store"], "--objective", "auc-smooth", "--out", "-", "--engine", "local"]) == 0
    cap = capsysbinary.readouterr()
    printed = dpipe.LinearModel.from_dict(json.loads(cap.out))  # the model file, on stdout
    assert printed.objective == "auc-smooth" and np.array_equal(printed.coef, dpipe.LinearModel.load(runs["model"]).coef)
    assert b"auc-smooth: objective" in cap.err and b"-> stdout" in cap.err  # the summary went to stderr
    assert main(["-q", "predict", str(runs["model"]), runs["store"], "--out", "-", "--engine", "local"]) == 0
    cap = capsysbinary.readouterr()
    assert cap.out == runs["pred"].read_bytes() and pq.read_table(io.BytesIO(cap.out)).num_rows == ROWS  # the Parquet file, whole
    assert main(["-q", "evaluate", str(runs["model"]), runs["store"], "--out", "-", "--engine", "local"]) == 0
    assert json.loads(capsysbinary.readouterr().out) == json.loads(runs["metrics"].read_text())
    assert main(["-q", "registry", "plot", runs["reg"], "--out", "-"]) == 0
    assert capsysbinary.readouterr().out.startswith(b"\x89PNG\r\n\x1a\n")
    assert not os.path.exists("-") and not (tmp_path / "-").exists()


@pytest.mark.parametrize("command, argv, name", [
    ("ingest", ["ingest", "{src}", "-"], "DEST '-': a store is a folder"),
    ("make-data", ["make-data", "-", "--rows", "100"], "DEST '-': a store is a folder"),
    ("split", ["split", "{store}", "{tmp}/train.zarr", "-"], "TEST '-': a store is a folder"),
    ("demo", ["demo", "--workdir", "-", "--engine", "local"], "--workdir '-': the demo's output is a folder"),
])
def test_a_dash_is_refused_where_a_folder_is_written(runs, tmp_path, monkeypatch, capsys, command, argv, name):
    monkeypatch.chdir(tmp_path)
    argv = [x.format(src=runs["src"], store=runs["store"], tmp=tmp_path) for x in argv]
    assert main(["-q", *argv, "--json"]) == 1
    cap = capsys.readouterr()
    assert name in one_error_line(cap.err, command) and cap.out == "" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["train", "predict", "registry plot"])
def test_out_dash_and_json_together_are_refused_before_any_work(runs, capsys, command):
    argv = {"train": ["train", runs["store"], "--engine", "local"], "predict": ["predict", str(runs["model"]), runs["store"], "--engine", "local"],
            "registry plot": ["registry", "plot", runs["reg"]]}[command]
    assert main(["-q", *argv, "--out", "-", "--json"]) == 1
    cap = capsys.readouterr()
    line = one_error_line(cap.err, command.split()[0])
    assert "--out - and --json both print on stdout" in line and cap.out == ""


def test_evaluate_json_with_a_file_says_what_to_write_instead(runs, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["evaluate", str(runs["model"]), runs["store"], "--json", "metrics.json"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: metrics.json" in err and "--out FILE" in err and not os.path.exists("metrics.json")


def test_train_exit_4_still_prints_its_document_with_the_verdicts(runs, tmp_path, capsys):
    out = tmp_path / "m.json"
    argv = ["-q", "train", runs["store"], "--objective", "error-rate", "--constraint", "recall >= 0.999", "--constraint",
            "false_positive_rate <= 0.001", "--out", str(out), "--engine", "local", "--json"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpipe.ConvergenceWarning)
        assert main(argv) == 4
    cap = capsys.readouterr()
    doc = only_document(cap.out)
    check_documented("train", doc)
    assert doc["constraints_met"] is False and doc["fit"]["converged"] is False and os.path.isfile(doc["path"])
    assert [(c["text"], c["on"]) for c in doc["constraints"]] == [("recall >= 0.999", "training"), ("false_positive_rate <= 0.001", "training")]
    assert not all(c["holds"] for c in doc["constraints"]) and all(c["verdict"] in ("holds", "violated", "not significant") for c in doc["constraints"])
    assert "exit status 4" in cap.err


def test_an_error_prints_nothing_on_stdout(tmp_path, capsys):
    assert main(["-q", "info", str(tmp_path / "missing.zarr"), "--json"]) == 1
    cap = capsys.readouterr()
    assert cap.out == "" and "no such store" in one_error_line(cap.err, "info")


def test_datasets_lists_the_files_it_wrote(runs):
    doc = runs["datasets"].doc
    d = runs["dir"] / "datasets"
    assert doc["files"] == [{"path": str(d / "adult.csv"), "state": "written"}, {"path": str(d / "adult-test.csv"), "state": "written"}]
