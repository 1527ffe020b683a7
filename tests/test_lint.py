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
