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
