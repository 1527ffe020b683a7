"""What ``dpipe COMMAND --json`` prints: one JSON document on stdout, its fields in ``docs/json-output.md``.

Every document is marked like the files dpipe writes (the model's ``"format"`` /
``"format_version"``): ``"format": "dpipe-<command>"`` (``dpipe-registry-<verb>`` for the
registry's verbs; ``evaluate`` keeps its metrics file's ``"dpipe-metrics"``) and
``"format_version": 1``, raised only when a field changes meaning or goes away (a new
field does not raise it). ``info --json`` prints the store's manifest as it is stored
(its ``"format"`` is the store's, ``zarr`` or ``parquet``, and ``schema_version`` its version).

While a command runs with ``--json`` (or writes a file to stdout, ``--out -``), ``main``
points ``sys.stdout`` at stderr, so a stray ``print`` of a library or of a command's progress
cannot land between the document's lines; the command writes its one document (or file)
to the real stdout, handed to it as ``a.stdout``, as its last step.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from typing import TYPE_CHECKING, Any, TextIO

from .._jsonable import jsonable

if TYPE_CHECKING:
    from ..rates import ConstraintReport

__all__ = [
    "DOCUMENT_VERSION", "STDOUT", "document", "emit", "emit_model", "real_stdout", "emit_file", "store_summary", "train_summary", "check_binary_stdout", "disk_bytes",
]

#: ``"format_version"`` of every ``--json`` document
DOCUMENT_VERSION = 1
#: the path that means "stdout" where a command writes a file (``--out -``)
STDOUT = "-"


def document(kind: str, **fields: Any) -> dict[str, Any]:
    """``{"format": "dpipe-<kind>", "format_version": 1, **fields}``."""
    return {"format": f"dpipe-{kind}", "format_version": DOCUMENT_VERSION, **fields}


def real_stdout(a: argparse.Namespace) -> TextIO:
    """The real stdout of the command (``main`` hands it over as ``a.stdout``; ``sys.stdout`` when run without ``main``)."""
    return getattr(a, "stdout", None) or sys.stdout


def emit(a: argparse.Namespace, doc: dict[str, Any]) -> None:
    """Print ``doc`` on the command's stdout: strict JSON (no NaN), indented, one trailing newline."""
    out = real_stdout(a)
    out.write(json.dumps(jsonable(doc, finite=True), indent=1, allow_nan=False) + "\n")
    out.flush()


def emit_model(a: argparse.Namespace, model: Any) -> None:
    """Print a model on the command's stdout, as :meth:`dpipe.LinearModel.save` writes its file (``train --out -``)."""
    out = real_stdout(a)
    out.write(json.dumps(model.to_dict(), indent=1, allow_nan=False) + "\n")
    out.flush()


def check_binary_stdout(a: argparse.Namespace, flag: str, what: str) -> None:
    """Refuse to write a binary file (``what``) to a terminal: ``flag -`` is for a pipe or a redirection.

    Raises
    ------
    ParameterError
        stdout is a terminal.
    """
    from ..exceptions import ParameterError

    out = real_stdout(a)
    if out.isatty():
        raise ParameterError(f"{flag} -: {what} is binary; not written to a terminal (redirect stdout to a file or a pipe)")


def emit_file(a: argparse.Namespace, path: str) -> None:
    """Copy the finished file ``path`` to the command's stdout, as bytes."""
    out = real_stdout(a)
    out.flush()
    with open(path, "rb") as f:
        shutil.copyfileobj(f, out.buffer)
    out.buffer.flush()


def disk_bytes(path: str) -> int:
    """Bytes of the files under ``path`` (a store's folder), as stored."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:  # a lock file released meanwhile
                pass
    return total


def store_summary(path: str | os.PathLike, m: Any) -> dict[str, Any]:
    """The summary of a store (``ingest``, ``make-data``, ``split``): its manifest's counts, not its per-shard lists.

    Parameters
    ----------
    path : path
        The store's folder.
    m : Manifest
        Its manifest.
    """
    from ..io._stored_transform import describe, stored_transform

    t = stored_transform(m, "")
    groups = None
    if m.groups is not None:
        totals = [sum(c[i] for c in m.group_counts) for i in range(len(m.groups))] if m.group_counts else [None] * len(m.groups)
        groups = dict(zip(m.groups, totals))
    path = os.path.abspath(os.fspath(path))
    return {
        "path": path,
        "store_format": m.format,
        "layout": m.layout,
        "rows": m.n_rows,
        "features": m.n_features,
        "shards": m.n_shards,
        "nnz": m.nnz,
        "labelled": m.labelled,
        "positive": m.n_positive if m.labelled else None,
        "negative": m.n_negative if m.labelled else None,
        "group_column": m.group_column,
        "groups": groups,
        "weighted": bool(m.has_weight),
        "transform": describe(t) if t is not None else None,
        "checksums": m.checksum_algorithm,
        "bytes": disk_bytes(path),
    }


def _constraint(c: ConstraintReport, on: str) -> dict[str, Any]:
    """One measured constraint of a fit: what it says, whether it holds, its value and the 95 % verdict."""
    return {"text": c.text, "on": on, "holds": c.holds, "value": c.value, "verdict": c.verdict, "interval": list(c.interval)}


def lam_path_summary(info: dict[str, Any]) -> dict[str, Any] | None:
    """A fit's ``lam="auto"`` path (``info["lam_path"]``): ``lam`` values, held-out measures, the choice; None without one."""
    path = info.get("lam_path")
    if path is None:
        return None
    out = {k: path[k] for k in ("metric", "held_out", "lams", "scores", "iterations", "chosen", "chosen_score", "why", "refit")}
    # the folds, their measures and the fixed default: models written before the folds (one held-out share) have none
    out.update({k: path.get(k) for k in ("folds", "fold_scores", "score_se", "refined", "fixed_default", "best")})
    return out


def model_info(model: Any, path: str) -> dict[str, Any]:
    """``dpipe info MODEL --json``: what the model is and how its fit went (the ``lam="auto"`` path with it)."""
    fit = model.fit
    info = fit.get("info", {})
    return document("model-info", path=os.path.abspath(path), objective=model.objective, n_features=model.n_features, params=model.params,
                    fit={"iterations": fit.get("nit"), "converged": bool(fit.get("success", True)), "message": fit.get("message"),
                         "objective_value": fit.get("fun"), "solver": info.get("solver"), "lam": info.get("lam")},
                    lam_path=lam_path_summary(info), training=model.training)


def train_summary(model: Any, out: str) -> dict[str, Any]:
    """``dpipe train --json``: where the model went, what was fitted, how the fit went, its constraints' verdicts.

    Parameters
    ----------
    model : LinearModel
        The trained model.
    out : str
        The model file written.
    """
    fit = model.fit
    info = fit.get("info", {})
    constraints = [_constraint(c, "training") for c in model.constraint_reports]
    constraints += [_constraint(c, "validation") for c in model.validation_constraint_reports or []]
    time_data, time_solve = fit.get("time_data"), fit.get("time_solve")
    return document(
        "train",
        path=os.path.abspath(out),
        objective=model.objective,
        n_features=model.n_features,
        intercept=model.intercept,
        fit={
            "iterations": fit.get("nit"),
            "evaluations": fit.get("nfev"),
            "converged": bool(fit.get("success", True)),
            "status": fit.get("status"),
            "message": fit.get("message"),
            "objective_value": fit.get("fun"),
            "time": (time_data or 0.0) + (time_solve or 0.0),
            "time_data": time_data,
            "time_solve": time_solve,
            "solver": info.get("solver"),
            "data_passes": info.get("data_passes"),
            "data_passes_total": info.get("data_passes_total"),
            "pass_traffic": info.get("pass_traffic"),
        },
        lam_path=lam_path_summary(info),
        train_metrics=model.metrics.get("train") or None,
        constraints=constraints,
        constraints_met=None if "constraints" not in info else bool(fit.get("success", True)),
    )
