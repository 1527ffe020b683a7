"""dpipe's architecture, checked: every package on its layer (:data:`dpipe._layers.LAYERS`), no import of a higher layer,
no import cycle, and ARCHITECTURE.md showing that table and naming files that exist.

The import graph is read from the source (every ``import`` in ``dpipe/``, function bodies included, and the packages'
lazy exports), not from what a run happens to import.
"""

from __future__ import annotations

import ast
import importlib.util
import pathlib
import re

import dpipe
from dpipe._layers import LAYERS, layer_of, layer_table

PACKAGE = pathlib.Path(dpipe.__file__).parent
ROOT = PACKAGE.parent
ARCHITECTURE = ROOT / "ARCHITECTURE.md"


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _lazy_exports(files: dict[str, pathlib.Path]) -> dict[str, dict[str, str]]:
    """Package -> its ``_LAZY`` map (exported name -> absolute module name: :mod:`dpipe._lazy`)."""
    out = {}
    for mod, path in files.items():
        if path.name != "__init__.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets):
                out[mod] = {k: importlib.util.resolve_name(v, mod) for k, v in ast.literal_eval(node.value).items()}
    return out


def _import_graph() -> dict[str, set[str]]:
    """Module -> the dpipe modules it imports (anywhere in the file, functions included), through the packages' lazy
    exports: ``from dpipe.engine import LocalDataset`` imports :mod:`dpipe.engine._dataset` when the name is first used."""
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    lazy = _lazy_exports(files)
    graph: dict[str, set[str]] = {m: set() for m in files}
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = mod.split(".")
                if node.level:
                    base = base[: len(base) - node.level + (1 if is_pkg else 0)]
                    name = ".".join(base + ([node.module] if node.module else []))
                else:
                    name = node.module or ""
                targets = [name] + [lazy.get(name, {}).get(a.name, f"{name}.{a.name}") for a in node.names]
            graph[mod].update(t for t in targets if t in files and t != mod)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _package(module: str) -> str:
    """The name under ``dpipe`` of the package or top-level module ``module`` belongs to, as :data:`LAYERS` names it:
    ``dpipe.fit._train`` -> ``fit``, ``dpipe._output`` -> ``_output``, ``dpipe`` (the root facade) -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed onto dpipe's packages and top-level modules (an import inside a function counts)."""
    out: dict[str, set[str]] = {}
    for a, targets in graph.items():
        out.setdefault(_package(a), set()).update(_package(b) for b in targets if _package(b) != _package(a))
    for targets in list(out.values()):
        for b in targets:
            out.setdefault(b, set())
    return out


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module on a higher layer than the importer's, as ``importer (layer) -> imported (layer)``."""
    return sorted(f"{a} ({layer_of(_package(a))}) -> {b} ({layer_of(_package(b))})"
                  for a, targets in graph.items() for b in targets if layer_of(_package(b)) > layer_of(_package(a)))


# -- the layers --------------------------------------------------------------------------------------------------------
def test_every_package_and_module_is_on_exactly_one_layer():
    present = {_package(m) for m in _import_graph()}
    declared = [name for layer in LAYERS.values() for name in layer.names]
    assert len(declared) == len(set(declared)), "a name on two layers"
    assert present - set(declared) == set(), "place these in dpipe/_layers.py's LAYERS"
    assert set(declared) - present == set(), "LAYERS names what is not in dpipe/ any more"
    assert list(LAYERS) == list(range(len(LAYERS)))


def test_no_module_imports_a_higher_layer():
    graph = _import_graph()
    assert "dpipe.engine._dataset" in graph["dpipe.fit._train"] or "dpipe.engine" in graph["dpipe.fit._train"]  # the walk sees real edges
    assert _upward(graph) == []


def test_a_planted_upward_import_is_found_though_it_makes_no_cycle():
    graph = _import_graph()
    graph["dpipe.reduce._block"] = graph["dpipe.reduce._block"] | {"dpipe.plotting"}  # layer 1 reaching up to layer 2, in a function say
    assert _cycles(graph) == [] and _cycles(_package_graph(graph)) == []  # no cycle: the layers alone catch it
    assert _upward(graph) == ["dpipe.reduce._block (1) -> dpipe.plotting (2)"]


def test_nothing_in_the_package_imports_the_root_facade():
    """``dpipe/__init__.py`` re-exports the public API; a module importing it (``from .. import __version__``) would
    load it and hide a real dependency (``dpipe.train`` from ``dpipe.testing``): the version is ``dpipe._version``'s."""
    graph = _import_graph()
    assert sorted(m for m, targets in graph.items() if "dpipe" in targets) == []


# -- no cycles ---------------------------------------------------------------------------------------------------------
def test_no_import_cycle_anywhere_in_dpipe():
    graph = _import_graph()
    assert "dpipe.fit._train" in graph and "dpipe._evaluate" in graph["dpipe.fit._train"]  # the walk sees real edges
    # ... and the edges through the lazy exports: fit._train imports open_dataset from dpipe.engine, cluster_client in a function
    assert {"dpipe.engine", "dpipe.engine._open", "dpipe.engine._client"} <= graph["dpipe.fit._train"]
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_two_way_dependency_between_packages():
    """No package imports, even in a function, a package that imports it back: evaluation below fit, outputs below io."""
    packages = _package_graph(_import_graph())
    assert "_evaluate" in packages["fit"] and "_output" in packages["io"]  # the walk sees the layers' real edges
    assert _cycles(packages) == []


def test_a_planted_cycle_between_packages_is_found():
    graph = _import_graph()
    graph["dpipe.io._manifest"] = graph["dpipe.io._manifest"] | {"dpipe.fit._params"}  # io reaching up into fit, in a function say
    assert any({"fit", "io"} <= set(cycle) for cycle in _cycles(_package_graph(graph)))
    assert "dpipe.io._manifest (3) -> dpipe.fit._params (6)" in _upward(graph)


# -- ARCHITECTURE.md ---------------------------------------------------------------------------------------------------
def test_architecture_md_shows_the_layers():
    assert layer_table() in ARCHITECTURE.read_text(encoding="utf-8"), \
        "ARCHITECTURE.md's layer table is stale: paste dpipe._layers.layer_table() over it"


#: a repository path in backquotes: `dpipe/io/_ingest.py`, `tests/test_architecture.py`, `docs/training.md`
_PATH = re.compile(r"`((?:dpipe|tests|docs|bench|workflows|deploy)/[\w./-]*\w)`")


def test_every_file_architecture_md_names_exists():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    named = set(_PATH.findall(text))
    assert len(named) >= 40  # the "where to add" lists name files
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert missing == [], f"ARCHITECTURE.md names files that do not exist: {missing}"


def test_architecture_md_runs_this_file():
    """The command ARCHITECTURE.md gives for the layering test runs this file (its blocks run in the checkout, where this
    test, tests/test_lint.py and tests/test_types.py run the same commands; tests/test_docs.py runs README.md's and docs/'s)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    assert "python -m pytest tests/test_architecture.py" in text
    assert "python -m mypy dpipe" in text and "python -m ruff check dpipe tests bench workflows" in text
