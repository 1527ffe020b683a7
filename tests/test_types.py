"""The code's type check, run by the test command (so by .ci/run): mypy on dpipe/ at the strictness of pyproject.toml's [tool.mypy].

mypy keeps its cache in the checkout's ``.mypy_cache`` (it writes a ``.gitignore`` there): a fresh clone checks
every module (about 20 s on two cores), a second run only what changed (a few seconds).
"""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

needs_mypy = pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed (it is in the test extra: pip install '.[test]')")


@needs_mypy
def test_mypy_finds_nothing_in_dpipe():
    run = subprocess.run([sys.executable, "-m", "mypy", "--no-color-output", "--no-error-summary", "dpipe"],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr


@needs_mypy
def test_mypy_reports_planted_errors_at_the_configured_strictness(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('count: int = "three"\n'
                       "ok = 1  # type: ignore\n"  # an ignore without a code, and with nothing to ignore
                       'def f():\n    n: int = "one"\n    return n\n')  # the body of an unannotated function: checked (check_untyped_defs)
    run = subprocess.run([sys.executable, "-m", "mypy", "--no-color-output", "--config-file", str(ROOT / "pyproject.toml"),
                          "--cache-dir", str(tmp_path / "cache"), str(planted)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "planted.py:1:" in run.stdout and "[unused-ignore]" in run.stdout and "planted.py:4:" in run.stdout, run.stdout


@needs_mypy
@pytest.mark.parametrize("package, module", [("fit", "_planted"), ("engine", "_protocols")])
def test_the_fit_layer_and_the_engine_protocols_return_no_any(tmp_path, package, module):
    """warn_return_any is on for dpipe.fit and dpipe.engine._protocols (pyproject.toml's override): a planted module there
    returning an Any is an error."""
    directory = tmp_path / "dpipe" / package
    directory.mkdir(parents=True)
    (tmp_path / "dpipe" / "__init__.py").write_text("")
    (directory / "__init__.py").write_text("")
    (directory / f"{module}.py").write_text("from typing import Any\n\n\ndef f(x: Any) -> float:\n    return x\n")
    run = subprocess.run([sys.executable, "-m", "mypy", "--no-color-output", "--config-file", str(ROOT / "pyproject.toml"),
                          "--cache-dir", str(tmp_path / "cache"), "-p", f"dpipe.{package}"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and f"{module}.py:5:" in run.stdout and "[no-any-return]" in run.stdout, run.stdout + run.stderr


@needs_mypy
def test_the_engine_returns_any_outside_its_protocols(tmp_path):
    """... and only there in the engine: the same module beside the protocols is not checked for it (the control of the test above)."""
    directory = tmp_path / "dpipe" / "engine"
    directory.mkdir(parents=True)
    (tmp_path / "dpipe" / "__init__.py").write_text("")
    (directory / "__init__.py").write_text("")
    (directory / "_planted.py").write_text("from typing import Any\n\n\ndef f(x: Any) -> float:\n    return x\n")
    run = subprocess.run([sys.executable, "-m", "mypy", "--no-color-output", "--config-file", str(ROOT / "pyproject.toml"),
                          "--cache-dir", str(tmp_path / "cache"), "-p", "dpipe.engine"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


def _type_checking_imports(init: pathlib.Path) -> dict[str, str] | None:
    """``name -> module`` of the ``if TYPE_CHECKING:`` imports of a package ``__init__`` (None without that block)."""
    import ast

    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return {alias.name: "." * stmt.level + (stmt.module or "") for stmt in node.body if isinstance(stmt, ast.ImportFrom)
                    for alias in stmt.names}
    return None


@pytest.mark.parametrize("package", ["dpipe.fit", "dpipe.objectives", "dpipe.solvers"])
def test_a_lazy_packages_type_checking_imports_are_its_lazy_exports(package):
    """mypy sees a lazy package's names through its ``if TYPE_CHECKING:`` imports (else through ``__getattr__``, as Any):
    they must be the lazy table's, name for name and module for module."""
    module = importlib.import_module(package)
    declared = _type_checking_imports(pathlib.Path(module.__file__))
    assert declared == dict(module._LAZY)
