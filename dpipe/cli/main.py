"""The ``dpipe`` command: ingest | split | info | make-data | train | evaluate | predict | verify | demo | retrain | registry.

Every command takes ``--json``: one JSON document on stdout (:mod:`dpipe.cli._json`, ``docs/json-output.md``).

Building the parser imports only the declarations it lists (:mod:`dpipe.fit._registry`,
:mod:`dpipe.fit._params`): ``dpipe --version`` and ``dpipe --help`` load neither dask nor
scipy nor numba. Each command imports what it runs inside its own function.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import signal
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._interrupts import Interrupted, check_interrupted, install_handlers, received_signal, restore_handlers
from .._log import level_for
from ..exceptions import DPipeError, ParameterError, StoreError
from ._parser import build_parser
from ._registry_commands import COMMANDS as _REGISTRY_COMMANDS
from ._vocabulary import cli_flags, every_cli_flag, in_cli_terms

if TYPE_CHECKING:
    from ..io import Store
    from ..rates import ConstraintReport

__all__ = ["main", "build_parser"]

log = logging.getLogger("dpipe.cli")


def _cluster_keywords(a: argparse.Namespace) -> dict[str, Any]:
    """The cluster keywords of ``dpipe.train`` / ``evaluate`` / ``predict`` the command's flags set."""
    from ..engine._cluster_spec import ClusterSpec

    return ClusterSpec.from_arguments(a).keywords()


def _prestart_workers(a: argparse.Namespace) -> None:
    """With ``--engine dask`` and no cluster named, start warming the embedded cluster's workers before this process imports
    the fit layer and opens the store (:func:`dpipe.engine._forkserver.prestart_workers`)."""
    from ..engine._cluster_spec import ClusterSpec
    from ..engine._forkserver import prestart_workers

    prestart_workers(ClusterSpec.from_arguments(a))


def _with_verify(cmd: Any) -> Any:
    """Run ``cmd`` with the dask config key ``dpipe.verify`` set by ``--verify`` (true) or ``--no-verify`` (false), and
    ``dpipe.cluster`` by ``--cluster``; neither given: the config as it is (``dpipe.verify`` default ``auto``)."""
    def run(a: argparse.Namespace) -> None:
        verify = getattr(a, "verify", None)
        settings: dict[str, Any] = {} if verify is None else {"dpipe.verify": bool(verify)}
        if getattr(a, "cluster", None):  # read where the cluster starts (cluster_client, resolve_engine)
            settings["dpipe.cluster"] = a.cluster
        if not settings:
            return cmd(a)
        import dask.config

        with dask.config.set(settings):
            return cmd(a)
    return run


def _verify_shards(path: str, progress: Callable[[int, int, int], None]) -> tuple[Any, list[tuple[int, StoreError]]]:
    """Read every shard of the store with the checks of verify mode (as :func:`dpipe.io.verify_store` does), going on past
    a damaged shard; returns the manifest and each damaged shard's index with its error. A store that cannot be opened
    (no checksums, a damaged manifest) raises as ``verify_store`` does."""
    from ..io import Store

    st = Store(os.fspath(path), verify=True)
    damaged: list[tuple[int, StoreError]] = []
    rows = 0
    for i in range(st.n_shards):
        try:
            rows += st.read_shard(i, verify=True).n_rows
        except StoreError as exc:
            damaged.append((i, exc))
        progress(i + 1, st.n_shards, rows)
    return st.manifest, damaged


def _cmd_verify(a: argparse.Namespace) -> None:
    import time

    from ..io import record_checksums
    from ._json import document, emit

    t0 = time.perf_counter()
    tty = sys.stderr.isatty()

    def progress(done: int, total: int, rows: int) -> None:
        if tty:
            print(f"\r{a.store}: shard {done}/{total}, {rows} rows {'hashed' if a.record else 'verified'}", end="", file=sys.stderr, flush=True)

    try:
        m, damaged = (record_checksums(a.store, progress), []) if a.record else _verify_shards(a.store, progress)
    finally:
        if tty:
            print(file=sys.stderr)
    seconds = time.perf_counter() - t0
    if a.json:  # printed for a damaged store too (ok false), before the error line and exit status 1
        emit(a, document("verify", path=os.path.abspath(a.store), ok=not damaged, recorded=bool(a.record), shards=m.n_shards, rows=m.n_rows,
                         checksums=m.checksum_algorithm, damaged=[{"shard": i, "rows": m.shard_bounds[i], "error": _one_line(exc)} for i, exc in damaged],
                         seconds=seconds))
    if damaged:
        exc, more = damaged[0][1], [i for i, _ in damaged[1:]]
        if not more:
            raise exc
        raise StoreError(f"{_one_line(exc)} (and {len(more)} more damaged shard{'s' if len(more) > 1 else ''}: {', '.join(map(str, more))})") from exc
    if not a.json:
        what = "checksums recorded (manifest schema 2)" if a.record else f"every shard matches its {m.checksum_algorithm} checksums"
        print(f"{a.store}: ok, {m.n_shards} shards, {m.n_rows} rows: {what} ({seconds:.2f} s)")


def _setup_logging(verbose: int, quiet: bool) -> Callable[[], None]:
    """Send dpipe's log to this stderr at the chosen level; returns what puts the loggers back as they were (``main``
    may run inside a longer-lived process: a notebook, a test, a workflow)."""
    from .._progress import BarAwareHandler

    level = level_for(verbose, quiet)
    handler = BarAwareHandler(sys.stderr)  # clears a progress bar before a log line
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s", "%H:%M:%S"))
    root, dist = logging.getLogger("dpipe"), logging.getLogger("distributed")
    saved = (root.handlers[:], root.level, root.propagate, dist.level)
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
    dist.setLevel(logging.WARNING if verbose < 3 else logging.INFO)

    def restore() -> None:
        root.handlers[:], root.propagate = saved[0], saved[2]
        root.setLevel(saved[1])
        dist.setLevel(saved[3])

    return restore


def _print_metrics(metrics: dict[str, Any]) -> None:
    for key, value in metrics.items():
        if key in ("by_group", "constraints"):
            continue
        print(f"{key:>10}  {value:.6f}" if isinstance(value, float) else f"{key:>10}  {'undefined' if value is None else value}")
    if "by_group" in metrics:
        summary = metrics["by_group"]
        print(f"\n{'group':>16}  {'weight':>10}  {'positive':>9}  {'TPR':>9}  {'FPR':>9}  {'error':>9}")
        fmt = lambda v: f"{v:>9.4f}" if v is not None else f"{'-':>9}"  # noqa: E731
        for name, r in summary["groups"].items():
            print(f"{name:>16}  {r['n']:>10g}  {fmt(r['positive_rate'])}  {fmt(r['true_positive_rate'])}  {fmt(r['false_positive_rate'])}  {fmt(r['error_rate'])}")
        print(f"selection-rate ratio (smallest / largest) {fmt(summary['selection_rate_ratio']).strip()}, TPR gap "
              f"{fmt(summary['true_positive_rate_gap']).strip()}, FPR gap {fmt(summary['false_positive_rate_gap']).strip()}")
    from ..rates._report import reports_from_records

    for c in reports_from_records(metrics.get("constraints")):
        _print_constraint(c, "")


def _print_constraint(c: ConstraintReport, where: str) -> None:
    """A measured constraint: its value with the 95 % interval and verdict, then each rate with its interval."""
    verdict = {"holds": "holds", "violated": "VIOLATED", "not significant": "not significant"}[c.verdict]
    lo, hi = c.interval
    print(f"constraint {c.text}{where}: {verdict} at {100 * c.level:.0f} % (lhs - rhs {c.value:+.6g}, interval "
          f"[{lo:+.4g}, {hi:+.4g}], {c.method}; the point value {'holds' if c.holds else 'does NOT hold'})")
    for r in c.rates:
        print(f"    {r.rate} = {r.value:.6g}  [{r.interval[0]:.4g}, {r.interval[1]:.4g}]  ({r.effective_rows:.6g} effective rows)")


def _print_lam_path(info: dict[str, Any]) -> None:
    """The ``lam="auto"`` path of a fit, one line a ``lam``, the chosen one marked."""
    path = info.get("lam_path")
    if path is None:
        return
    print(f"lam=auto: {path['chosen']:.3g}, {path['why']}")
    folds = path.get("fold_scores") or [None] * len(path["lams"])  # a model written before the folds has none
    for lam, score, nit, each in zip(path["lams"], path["scores"], path["iterations"], folds):
        per_fold = f" (folds {', '.join(f'{s:.6f}' for s in each)})" if each is not None and len(each) > 1 else ""
        default = "  (the fixed default)" if lam == path.get("fixed_default") else ""
        print(f"  lam {lam:<8.3g} held-out {path['metric']} {score:.6f}{per_fold}  {nit} iterations{'  <- chosen' if lam == path['chosen'] else ''}{default}")


def _cmd_info_model(a: argparse.Namespace) -> None:
    from ..model import LinearModel
    from ._json import emit, model_info

    model = LinearModel.load(a.store)
    if a.json:
        emit(a, model_info(model, a.store))
        return
    fit = model.fit
    info = fit.get("info", {})
    print(f"model     {os.path.abspath(a.store)}")
    print(f"objective {model.objective} ({info.get('solver', '-')}), {model.n_features} features")
    print(f"fit       {fit.get('nit')} iterations, {fit.get('message')}; lam {info.get('lam', '-')}")
    _print_lam_path(info)


def _cmd_info(a: argparse.Namespace) -> None:
    from ..io import open_store

    if os.path.isfile(a.store):  # a model file, not a store (a folder, or a Parquet store's folder)
        _cmd_info_model(a)
        return
    st = open_store(a.store)
    m = st.manifest
    if a.json:  # the manifest as stored (its own "format" and "schema_version")
        from ._json import emit

        emit(a, m.to_dict())
        return
    n = max(1, m.n_rows)
    print(f"store     {st.path} ({m.format}, schema {m.schema_version}, dpipe {m.dpipe_version}, created {m.created})")
    print(f"rows      {m.n_rows}")
    print(f"features  {m.n_features}")
    sizes = [b - a for a, b in m.shard_bounds]
    print(f"shards    {m.n_shards} (rows per shard {min(sizes, default=0)}..{max(sizes, default=0)})")
    print(f"layout    {_layout(m, st.nbytes)}")
    if m.labelled:
        print(f"classes   +1: {m.n_positive} ({100 * m.n_positive / n:.2f} %), -1: {m.n_negative} ({100 * m.n_negative / n:.2f} %)")
    else:
        print("classes   none (an unlabelled store)")
    if m.groups is not None:
        totals = [sum(c[i] for c in m.group_counts) for i in range(len(m.groups))] if m.group_counts else []
        print(f"groups    {m.group_column}: " + ", ".join(f"{g} {c}" for g, c in zip(m.groups, totals)))
    print(f"weights   {'yes' if m.has_weight else 'no'}")
    _print_transform(m)
    src = m.source
    if src:
        print(f"source    {src.get('path', '')} ({src.get('format', '')}{', sha256 ' + src['sha256'][:16] + '...' if src.get('sha256') else ''})")


def _layout(m: Any, nbytes: int) -> str:
    """How the features are stored: ``sparse (CSR), 451,592 non-zeros (11.28 % of the cells), 3.6 MB in memory`` or ``dense, ...``."""
    cells = max(1, m.n_rows * m.n_features)
    where = f"{nbytes / 1e6:.1f} MB in memory (float32 values)"
    if m.layout == "csr":
        return f"sparse (CSR: row offsets, column indices, values), {m.nnz:,} non-zeros ({100 * m.nnz / cells:.2f} % of the cells), {where}"
    return f"dense (rows x features), {where}"


#: ``dpipe train``'s exit status when the model is written but a rate constraint does not hold on the rows that set its
#: threshold (the training rows, or the validation rows): a batch job must not read it as success, and it is not an
#: error either (the model and its fit record, which names the constraint, are there to inspect)
EXIT_CONSTRAINT_NOT_MET = 4


def _check_one_stdout_document(a: argparse.Namespace, what: str) -> None:
    """``--out -`` and ``--json`` would both print on stdout: refused before any work."""
    from ._json import STDOUT

    if a.json and a.out == STDOUT:
        raise ParameterError(f"--out - and --json both print on stdout; write the {what} to a file with --out FILE to print --json's document")


def _store_of(a: argparse.Namespace, path: str, command: str, *, like: str | None = None, model: str | None = None) -> str:
    """``path`` when it is a store; a source file's store in the ingest cache otherwise (ingested now, or reused: one log
    line says which), read with the command's ingest options, ``--like`` defaulting to ``like`` or to ``model``'s training
    store. Ingest options given with a store are an error."""
    from .._written import is_dpipe_store
    from ..io._ingest_options import IngestOptions
    from ..io._source_cache import cached_store, ingest_cache_folder

    options = IngestOptions.from_arguments(a)
    given = options.given(command)
    if os.path.isdir(path) and (is_dpipe_store(path) or not given):
        if given:
            flags = ", ".join("--" + n.replace("_", "-") for n in given)
            raise ParameterError(f"{flags} appl{'ies' if len(given) == 1 else 'y'} to a source file; {path} is a store (made by dpipe ingest)")
        return path  # a store, or a folder the store reader names the problem of
    if not os.path.isfile(path):
        raise ParameterError(f"{path}: no such store or source file (a store is made by dpipe ingest; a source file is svmlight, CSV or Parquet)")
    keywords = options.keywords(command)
    if keywords.get("like") is None and model is not None:
        from ..model import LinearModel

        like = LinearModel.load(model).training.get("store")
        if not like or not is_dpipe_store(like):
            raise ParameterError(f"{path} is a source file to ingest like {model}'s training store, which is gone ({like}); name the training store "
                                 "with --like STORE, or ingest the file with dpipe ingest --like")
    if keywords.get("like") is None and like is not None:
        keywords["like"] = like
    unlabeled = bool(keywords.pop("unlabeled", False))
    return cached_store(path, ingest_cache_folder(), keywords, unlabeled=unlabeled, who=command)[0]


def _without_ingest_options(a: argparse.Namespace) -> argparse.Namespace:
    """``a`` with its ingest options at their defaults: a validation source is read ``--like`` the training store."""
    from ..io._ingest_options import IngestOptions

    return argparse.Namespace(**{**vars(a), **{name: getattr(IngestOptions(), name) for name in IngestOptions.from_arguments(a).given()}})


def _cmd_train(a: argparse.Namespace) -> int | None:
    from .._output import locked_output
    from ._json import STDOUT, emit, emit_model, train_summary

    _check_one_stdout_document(a, "model")
    out = None if a.out == STDOUT else a.out  # '-': the model on stdout, after the fit (nothing half-written)
    if a.plot is not None and a.lam != "auto":
        lam = a.lam if a.lam is not None else "set by --C" if getattr(a, "C", None) is not None else "the default"
        raise ParameterError(f"--plot draws the path of --lam auto (the held-out measure per lam); this fit's lam is {lam}: "
                             "give --lam auto, or leave --plot out")
    # one writer of --out (and --plot), fit included; taken before the fit layer is imported, so that a refused --out fails at once
    with contextlib.ExitStack() as outputs:
        if out:
            outputs.enter_context(locked_output(out, overwrite=a.overwrite, what="model"))
        if a.plot is not None:
            outputs.enter_context(locked_output(a.plot, overwrite=a.overwrite, what="plot"))
        _prestart_workers(a)
        from ..fit import PARAMS, train

        given = {name: getattr(a, name) for name in PARAMS if getattr(a, name) is not None}
        if a.constraints_file:
            given["constraints"] = [*given.get("constraints", []), *_read_constraints_file(a.constraints_file)]
        store = _store_of(a, a.store, "train")
        validation = None if a.validation is None else _store_of(_without_ingest_options(a), a.validation, "train", like=store)
        model = train(store, a.objective, validation=validation, datasets=_parse_datasets(a.datasets), out=out, overwrite=a.overwrite,
                      train_metrics=a.train_metrics, constraint_validation=_parse_validation(a.constraint_validation), **given, **_cluster_keywords(a))
        if a.plot is not None:
            from ..plotting import plot_lam_path

            plot_lam_path({a.objective: model.fit["info"]["lam_path"]}, a.plot)
    fit = model.fit
    info = fit.get("info", {})
    if a.json:
        assert out is not None  # --json with --out - was refused above
        emit(a, train_summary(model, out))
    else:
        if out is None:
            emit_model(a, model)
        _print_train_summary(a, model, "stdout" if out is None else out)  # on stderr when the model is on stdout
    if "constraints" in info and not fit.get("success", True):
        print(f"{a.objective}: {fit.get('message')} (exit status {EXIT_CONSTRAINT_NOT_MET}; the model is written)", file=sys.stderr)
        return EXIT_CONSTRAINT_NOT_MET
    return None


def _print_train_summary(a: argparse.Namespace, model: Any, where: str) -> None:
    """The human summary of a fit (on stderr when stdout carries the model: ``main`` points stdout there)."""
    fit = model.fit
    for c in model.constraint_reports:
        print(f"constraint {c.text}: {'holds' if c.holds else 'NOT satisfied'} on the training data "
              f"(lhs - rhs {c.value:+.6g}, multiplier {c.multiplier:.4g}; {c.verdict} at 95 %, interval "
              f"[{c.interval[0]:+.4g}, {c.interval[1]:+.4g}])")
    for c in model.validation_constraint_reports or []:
        _print_constraint(c, " on the validation rows")
    info = fit.get("info", {})
    solver = f" ({info['solver']})" if "solver" in info else ""
    passes = f", {info['data_passes']} data passes ({info['data_passes_total']} in all)" if "data_passes_total" in info else ""
    print(f"{a.objective}: objective {fit['fun']:.8g}, {fit['nit']} iterations{solver}, {fit['nfev']} evaluations{passes}, "
          f"data loading/setup passes {fit['time_data']:.2f} s, solve {fit['time_solve']:.2f} s -> {where}")
    if "gap" in fit.get("info", {}):
        print(f"cutting plane: lower bound {fit['info']['lower_bound']:.8g}, gap {fit['info']['gap']:.3g} (eps {model.params['eps']:g})")
    _print_lam_path(info)
    if model.metrics.get("train"):
        t = model.metrics["train"]
        print(f"training ROC-AUC {t['roc_auc']:.6f}, PRBEP {t['prbep']:.6f}, F1 {t['f1']:.6f}, accuracy {t['accuracy']:.6f}")


def _parse_aliases(items: list[str] | None, flag: str, bare: str | None = None) -> dict[str, str] | None:
    """``["pool=pool.zarr", ...]`` as ``{"pool": "pool.zarr"}`` (a value without ``=`` is ``bare``'s, when given); a
    malformed or repeated alias is a ParameterError naming ``flag``."""
    if not items:
        return None
    out: dict[str, str] = {}
    for item in items:
        alias, sep, path = item.partition("=")
        alias, path = (alias.strip(), path.strip()) if sep or bare is None else (bare, item.strip())
        if not alias or not path:
            raise ParameterError(f"{flag} {item!r}: expected {'STORE or ' if bare else ''}ALIAS=STORE, e.g. unlabeled=pool.zarr")
        if alias in out:
            raise ParameterError(f"{flag} {item!r}: the alias {alias!r} is given twice")
        out[alias] = path
    return out


def _parse_datasets(items: list[str] | None) -> dict[str, str | os.PathLike | Store] | None:
    """``--dataset`` values: ``ALIAS=STORE``, as a dict by alias."""
    aliases = _parse_aliases(items, "--dataset")
    return None if aliases is None else dict(aliases)  # typed as the library's datasets= (whose values may be stores too)


def _parse_validation(items: list[str] | None) -> dict[str, str] | None:
    """``--constraint-validation`` values: ``STORE`` (the training store's) or ``ALIAS=STORE``, as a dict by alias."""
    return _parse_aliases(items, "--constraint-validation", bare="train")


def _read_constraints_file(path: str) -> list[str]:
    """The constraint strings of a YAML (or JSON, which YAML reads) file holding a list of strings."""
    import yaml

    with open(path) as f:
        try:
            items = yaml.safe_load(f)
        except yaml.YAMLError as error:
            raise ParameterError(f"{path}: not YAML or JSON ({str(error).splitlines()[0]})") from None
    if isinstance(items, dict) and "constraints" in items:
        items = items["constraints"]
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ParameterError(f"{path}: expected a list of constraint strings (or a mapping with a 'constraints' list)")
    return items


def _cmd_evaluate(a: argparse.Namespace) -> None:
    from .._evaluate import evaluate, metrics_document, write_metrics
    from .._output import locked_output
    from ._json import STDOUT, emit

    k: float | None = a.k
    if k is not None and float(k).is_integer():
        k = int(k)
    file = None if a.out == STDOUT else a.out  # '-': the metrics document on stdout, as --json prints it (no file named '-')
    # --out FILE: checked before the pass, one writer of it until the rename
    with locked_output(file, overwrite=a.overwrite, what="metrics") if file else contextlib.nullcontext():
        metrics = evaluate(a.model, _store_of(a, a.store, "evaluate", model=a.model), k=k, k_fraction=a.k_fraction, threshold=a.threshold, by_group=a.by_group, constraints=a.constraints,
                           datasets=_parse_datasets(a.datasets), **_cluster_keywords(a))
        if file:
            write_metrics(file, metrics, overwrite=a.overwrite)
    if a.json or a.out == STDOUT:  # the document alone (a scheduler parses it); the table is left out
        emit(a, metrics_document(metrics))
    else:
        _print_metrics(metrics)


def _cmd_predict(a: argparse.Namespace) -> None:
    import tempfile

    from .._evaluate import predict
    from ._json import STDOUT, check_binary_stdout, document, emit, emit_file

    _check_one_stdout_document(a, "predictions")
    kwargs = dict(threshold=a.threshold, seed=a.seed, overwrite=a.overwrite, **_cluster_keywords(a))
    store = _store_of(a, a.store, "predict", model=a.model)
    if a.out == STDOUT:  # written whole to a temporary folder, then copied to stdout: nothing half-written on a failure
        check_binary_stdout(a, "--out", "a Parquet file")
        with tempfile.TemporaryDirectory(prefix="dpipe-predict-") as tmp:
            emit_file(a, predict(a.model, store, os.path.join(tmp, "predictions.parquet"), **kwargs))
        return
    path = predict(a.model, store, a.out, **kwargs)
    if a.json:
        import pyarrow.parquet as pq

        emit(a, document("predict", path=path, rows=pq.read_metadata(path).num_rows, model=os.path.abspath(a.model), store=os.path.abspath(store),
                         threshold=a.threshold))
    else:
        print(path)


def _check_store_destination(path: str, name: str, what: str = "a store") -> None:
    """A store is a folder: ``-`` (stdout, where a file is written) is refused for it, before any work."""
    from ._json import STDOUT

    if path == STDOUT:
        raise ParameterError(f"{name} '-': {what} is a folder and cannot be written to stdout; name a folder (--json prints a summary on stdout)")


def _cmd_ingest(a: argparse.Namespace) -> None:
    from .._output import check_output_path
    from ..io import ingest
    from ._json import document, emit, store_summary

    _check_store_destination(a.dest, "DEST")
    check_output_path(a.dest, overwrite=True, what="store", directory=True)  # an existing DEST is the writer's to judge (--overwrite)
    from ..io._ingest_options import IngestOptions

    m = ingest(a.src, a.dest, overwrite=a.overwrite, **IngestOptions.from_arguments(a).keywords("ingest"))
    if a.json:
        emit(a, document("ingest", **store_summary(a.dest, m), source=os.path.abspath(a.src)))
        return
    labels = f"{m.n_positive} positive / {m.n_negative} negative" if m.labelled else "unlabelled"
    layout = f", sparse ({m.nnz} non-zeros)" if m.layout == "csr" else ""
    print(f"{a.dest}: {m.n_rows} rows, {m.n_features} features{layout}, {m.n_shards} shards, {labels}")
    _print_transform(m)


def _print_transform(m: Any) -> None:
    from ..io._stored_transform import describe, stored_transform

    t = stored_transform(m, "")
    if t is None:
        return
    print(f"transform {describe(t)}, fitted on {m.encoding['transform'].get('fitted_on', {}).get('path', '?')}")
    from .._log import VERBOSE

    for name, f in m.encoding["transform"].get("auto", {}).get("features", {}).items():
        log.log(VERBOSE, "log1p auto: %s: min %.6g, max %.6g, octaves of 1 + x: median %d, max %d -> %s (%s)", name, f["min"], f["max"],
                 f["median_octave"], f["max_octave"], "log1p" if f["log1p"] else "kept", f["why"])


def _cmd_split(a: argparse.Namespace) -> None:
    from .._output import check_output_path
    from ..io import split_store
    from ._json import document, emit, store_summary

    for dest, name in ((a.train, "TRAIN"), (a.test, "TEST")):
        _check_store_destination(dest, name)
    for dest in (a.train, a.test):
        check_output_path(dest, overwrite=True, what="store", directory=True)
    from ..io._ingest_options import IngestOptions

    tr, te = split_store(a.store, a.train, a.test, train_fraction=a.fraction, seed=a.seed, method=a.method, overwrite=a.overwrite,
                         **IngestOptions.from_arguments(a).keywords("split"))
    if a.json:
        emit(a, document("split", source=os.path.abspath(a.store), train=store_summary(a.train, tr), test=store_summary(a.test, te)))
        return
    for path, m in ((a.train, tr), (a.test, te)):
        print(f"{path}: {m.n_rows} rows, {m.n_shards} shards" + (f", {m.n_positive} positive / {m.n_negative} negative" if m.labelled else ""))
    _print_transform(tr)


def _cmd_make_data(a: argparse.Namespace) -> None:
    from .._output import check_output_path
    from ..io import make_data
    from ._json import document, emit, store_summary

    _check_store_destination(a.dest, "DEST")
    check_output_path(a.dest, overwrite=True, what="store", directory=True)
    m = make_data(
        a.dest, rows=a.rows, features=a.features, positive_rate=a.positive_rate, seed=a.seed, model_seed=a.model_seed,
        label_noise=a.label_noise, n_groups=a.n_groups, shard_rows=a.shard_rows, format=a.format, overwrite=a.overwrite,
    )
    if a.json:
        emit(a, document("make-data", **store_summary(a.dest, m)))
        return
    print(f"{a.dest}: {m.n_rows} rows, {m.n_features} features, {m.n_shards} shards, {m.n_positive} positive / {m.n_negative} negative")


def _cmd_demo(a: argparse.Namespace) -> None:
    from ._demo import run_demo
    from ._json import document, emit

    if a.workdir is not None:
        _check_store_destination(a.workdir, "--workdir", "the demo's output")
    from ..engine._cluster_spec import ClusterSpec
    from ..io._ingest_options import IngestOptions

    report = run_demo(a, IngestOptions.from_arguments(a), ClusterSpec.from_arguments(a))  # its progress lines: on stderr with --json (main points stdout there)
    if a.json:
        models = [{"name": r["name"], "objective": r["objective"], "constraints": r["constraints"], "path": os.path.abspath(r["model"]),
                   "train_seconds": r["train_seconds"], "test": r["test"]} for r in report["results"]]
        emit(a, document("demo", workdir=report["workdir"], data=report["data"], report=report["report"], roc_png=os.path.abspath(report["roc_png"]),
                         models=models))


def _cmd_datasets(a: argparse.Namespace) -> None:
    from ..io._bundled import write_datasets
    from ._json import document, emit

    done = write_datasets(a.names, a.dir, source=a.source, overwrite=a.overwrite)
    if a.json:
        emit(a, document("datasets", files=[{"path": os.path.abspath(path), "state": state} for path, state in done]))
        return
    for path, state in done:
        print(f"{path}: {state}")


_COMMANDS = {
    "ingest": _cmd_ingest,
    "split": _with_verify(_cmd_split),
    "info": _cmd_info,
    "make-data": _cmd_make_data,
    "train": _with_verify(_cmd_train),
    "evaluate": _with_verify(_cmd_evaluate),
    "predict": _with_verify(_cmd_predict),
    "verify": _cmd_verify,
    "datasets": _cmd_datasets,
    "demo": _with_verify(_cmd_demo),
    **_REGISTRY_COMMANDS,
    "retrain": _with_verify(_REGISTRY_COMMANDS["retrain"]),
}


def _one_line(exc: BaseException) -> str:
    """The error as one line naming its path: ``PATH: No space left on device`` for an OSError from the system."""
    if isinstance(exc, OSError) and not isinstance(exc, DPipeError) and exc.strerror:
        where = ": ".join(os.fsdecode(f) for f in (exc.filename, exc.filename2) if f is not None)
        return f"{where}: {exc.strerror}" if where else exc.strerror
    return " ".join(str(exc).split("\n")) or type(exc).__name__


def _command_parser(parser: argparse.ArgumentParser, a: argparse.Namespace) -> argparse.ArgumentParser:
    """The parser of the command (and verb, as ``registry plot``) that parsed ``a``."""
    while parser._subparsers is not None:
        chosen = next((sub.choices.get(getattr(a, sub.dest, None) or "") for sub in parser._subparsers._group_actions
                       if isinstance(sub, argparse._SubParsersAction)), None)
        if chosen is None:
            break
        parser = chosen
    return parser


def _error_status(a: argparse.Namespace, exc: BaseException, terms: Callable[[str], str], asyncio: Any) -> int:
    """Exit status 1 and one line on stderr for an error of a command that no signal interrupted (re-raises what is not an error)."""
    if not isinstance(exc, (Exception, asyncio.CancelledError)):
        raise exc  # SystemExit, GeneratorExit: not an error of the command
    if a.verbose:
        traceback.print_exception(exc, file=sys.stderr)
    if isinstance(exc, (DPipeError, ValueError, OSError)):  # OSError: a read-only file system, a full disk, a permission
        print(f"dpipe {a.command}: error: {terms(_one_line(exc))}", file=sys.stderr)
        return 1
    # anything else (distributed's, a library's): one line too, named by its type
    text = terms(_one_line(exc))
    text = text if text == type(exc).__name__ else f"{type(exc).__name__}: {text}"
    print(f"dpipe {a.command}: error: {text}{'' if a.verbose else ' (-v shows the traceback)'}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``dpipe`` command; returns the exit status (0 ok, 1 error, 2 usage error, 141 stdout closed early; train: 4 when a rate
    constraint does not hold, the model written; retrain: 3 kept).

    With ``--json`` a command prints one JSON document on stdout and nothing else there (fields:
    ``docs/json-output.md``; :mod:`dpipe.cli._json`); with ``--out -`` the file it writes goes to stdout instead.
    Logs, progress and warnings are on stderr; an error is one line ``dpipe COMMAND: error: ...`` on stderr.
    """
    try:
        return _main(argv)
    except BrokenPipeError:  # stdout closed early (dpipe ... | head): end quietly, as cat does, with 128 + SIGPIPE
        _quiet_stdout()
        return EXIT_BROKEN_PIPE


#: the exit status when stdout's reader went away (``dpipe ... | head``): 128 + SIGPIPE, as a shell reports ``cat``'s
EXIT_BROKEN_PIPE = 128 + 13


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of a closed pipe prints nothing."""
    with contextlib.suppress(OSError, ValueError, AttributeError, io.UnsupportedOperation):
        fd = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    a = parser.parse_args(argv)
    import asyncio  # past the parser, as every import a command needs: --help and --version stay light

    from .._progress import terminal_bar

    restore_logging = _setup_logging(a.verbose, a.quiet)
    if a.command in ("train", "evaluate", "predict", "demo", "retrain", "ingest", "split"):  # the commands that run dpipe's kernels
        from .._compiles import watch_compiles

        watch_compiles()  # one log line at the first compile after an install

    # the library's messages name Python parameters; this command's name its flags (dpipe.cli._vocabulary)
    flags, elsewhere = cli_flags(_command_parser(parser, a)), every_cli_flag(parser)

    def terms(text: str) -> str:
        return in_cli_terms(text, flags, elsewhere)

    def _show_warning(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        print(f"dpipe: warning: {terms(str(message))}", file=sys.stderr)

    # --json, --out -: stdout carries one document (or file), written by the command as its last step to a.stdout; anything
    # else printed meanwhile (a progress line, a library's print) goes to stderr
    a.stdout = sys.stdout
    reserved = bool(getattr(a, "json", False)) or getattr(a, "out", None) == "-"
    previous = install_handlers()
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            try:
                # ingest, make-data: a progress bar on a terminal, a progress line every dpipe.progress-interval otherwise
                with terminal_bar(sys.stderr) if sys.stderr.isatty() and not a.quiet else contextlib.nullcontext(), \
                        contextlib.redirect_stdout(sys.stderr) if reserved else contextlib.nullcontext():
                    status = _COMMANDS[a.command](a)  # None: 0; retrain returns its decision's exit code
                    check_interrupted()  # a signal whose raise was dropped (in a gc callback) and that met no safe point since
            except BaseException as exc:  # after a signal, any exception is the signal's: numba's SystemError around it, a half-closed cluster's error
                signum = received_signal()
                if signum is None and isinstance(exc, BrokenPipeError):
                    raise  # stdout's reader went away: main ends quietly
                if signum is None and not isinstance(exc, KeyboardInterrupt):
                    return _error_status(a, exc, terms, asyncio)
                if a.verbose and not isinstance(exc, KeyboardInterrupt):
                    traceback.print_exc(file=sys.stderr)
                signum = signum or (exc.signum if isinstance(exc, Interrupted) else signal.SIGINT)  # the temporary being written was removed while unwinding
                print(f"dpipe {a.command}: interrupted by {signal.Signals(signum).name}", file=sys.stderr)
                return 128 + signum
    finally:
        restore_handlers(previous)
        restore_logging()
    return status or 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
