"""dpipe's layers, declared once: which package or top-level module sits on which layer.

A module imports only modules of its own layer or of lower ones (at module level and inside functions
alike), and never in a cycle. ``tests/test_architecture.py`` walks every ``import`` of ``dpipe/`` and
checks both against :data:`LAYERS`; ARCHITECTURE.md's layer table is :func:`layer_table`'s output
(the same test compares them). A package or module missing from :data:`LAYERS` fails that test, so a
new one is placed here first.

This module imports nothing (it is on layer 0 itself).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Layer", "LAYERS", "layer_of", "layer_table"]


class Layer(NamedTuple):
    """One layer: its packages and top-level modules (names under ``dpipe``; ``__init__`` is the root facade) and what it is."""

    names: tuple[str, ...]
    what: str


#: layer number -> :class:`Layer`, from the bottom
LAYERS: dict[int, Layer] = {
    0: Layer(("exceptions", "_version", "_layers", "_formats", "_modes", "_lazy", "_log", "_compiles", "_runs", "_ramp", "_wide", "_jsonable",
              "_transform", "_interrupts", "_faults", "_options", "_registries"),
             "errors, the version, this table, file markers, small shared helpers; the machinery of option sets declared once; "
             "the typed registry idiom (`dpipe/_registries.py`: entries by name, lazy references)"),
    1: Layer(("_config", "_validation", "_written", "_locks", "_output", "_worker_logs", "reduce"),
             "settings, argument checks; what dpipe wrote, one writer per destination, where an output may go; "
             "the pure worker-side kernels (numba) and the feature-block functions (`dpipe/reduce/_block.py`)"),
    2: Layer(("metrics", "objectives", "rates", "plotting", "_progress"),
             "exact metrics, pure risks (scores in, value and per-row weights out), the rate expressions and their parser, figures"),
    3: Layer(("io",),
             "sources (svmlight, CSV, Parquet) and ingest, its options declared once (`dpipe/io/_ingest_options.py`), "
             "the store formats behind one seam (`dpipe/io/_store_format.py`), their readers, writers and manifests"),
    4: Layer(("engine", "model"),
             "where the passes run, declared once (`dpipe/engine/_cluster_spec.py`); datasets and the passes every fit is made of "
             "(local or on dask); the model file"),
    5: Layer(("solvers", "_evaluate"),
             "L-BFGS, TRON, the cutting plane, the rate solver; evaluation, prediction, constraint values"),
    6: Layer(("fit",),
             "the objective registry, every hyper-parameter declared once (`dpipe/fit/_params.py`), `train`, one module per family"),
    7: Layer(("_estimator", "registry", "testing"),
             "`DPipeClassifier`; the model registry and `retrain`; test references and the cluster helpers that run fits"),
    8: Layer(("cli", "__main__", "__init__"),
             "the `dpipe` command; the root facade `dpipe` (its names are imported on first use; no module of the package imports it)"),
}


def layer_of(name: str) -> int:
    """The layer of ``name``, a package or top-level module under ``dpipe`` (``"io"``, ``"_output"``, ``"__init__"``).

    Raises
    ------
    KeyError
        ``name`` is on no layer.
    """
    for n, layer in LAYERS.items():
        if name in layer.names:
            return n
    raise KeyError(f"dpipe.{name} is on no layer of dpipe._layers.LAYERS: place it there")


def layer_table() -> str:
    """ARCHITECTURE.md's layer table (Markdown), from :data:`LAYERS`."""
    rows = ["| layer | packages and modules | what it is | may import |", "|---|---|---|---|"]
    for n, layer in LAYERS.items():
        names = ", ".join(f"`{name}`" for name in layer.names)
        below = "its own layer only" if n == 0 else f"layers 0-{n}"
        rows.append(f"| {n} | {names} | {layer.what} | {below} |")
    return "\n".join(rows) + "\n"
