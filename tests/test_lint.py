"""The code's own checks, run by the test command (so by .ci/run): ruff with the rule set of pyproject.toml's [tool.ruff]."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing_in_the_tree():
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "dpipe", "tests", "bench", "workflows"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


def test_ruff_reports_a_planted_unused_import(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import os\n")
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "--config", str(ROOT / "pyproject.toml"), str(planted)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and "F401" in run.stdout


def test_ruff_reports_a_planted_function_beyond_the_complexity_limit(tmp_path):
    """C901 at 15: a function of 16 branches is reported, one of 15 is not."""
    def function(name: str, branches: int) -> str:
        return f"def {name}(x):\n" + "".join(f"    if x == {i}:\n        return {i}\n" for i in range(branches - 1)) + "    return -1\n"

    planted = tmp_path / "planted.py"
    planted.write_text(function("at_the_limit", 15) + "\n\n" + function("beyond_it", 16))
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "--config", str(ROOT / "pyproject.toml"), str(planted)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and "C901 `beyond_it` is too complex (16 > 15)" in run.stdout and "at_the_limit" not in run.stdout, run.stdout
