"""The first run after an install says, in one log line, that it compiles dpipe's kernels; a run that finds them in
numba's cache says nothing (issue 43)."""

from __future__ import annotations

import os
import subprocess
import sys

from dpipe._compiles import COMPILE_ESTIMATE, COMPILE_ESTIMATE_WITH_PARSER
from dpipe.testing import classification_data, write_store

LINE = "compiling dpipe's kernels once, about"


def test_the_first_compile_is_one_log_line_and_a_cached_run_has_none(tmp_path):
    X, y = classification_data(400, 4, seed=1, scales=False)
    store = write_store(tmp_path / "s.zarr", X, y, [200, 200])
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}  # an empty cache: as after an install
    argv = [sys.executable, "-m", "dpipe", "train", str(store), "--objective", "auc-moment", "--out", str(tmp_path / "m.json"), "--overwrite"]
    first = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    assert sum(LINE in line for line in first.stderr.splitlines()) == 1
    assert f"{LINE} {COMPILE_ESTIMATE} s" in first.stderr
    second = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert second.returncode == 0 and LINE not in second.stderr


def test_a_first_run_on_a_svmlight_file_says_the_parser_compiles_too(tmp_path):
    X, y = classification_data(300, 4, seed=2, scales=False)
    src = tmp_path / "train.svm"
    src.write_text("".join(f"{int(t)} " + " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(row)) + "\n" for t, row in zip(y, X)))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache"), "DASK_DPIPE__INGEST_CACHE": str(tmp_path / "stores")}
    argv = [sys.executable, "-m", "dpipe", "train", str(src), "--objective", "auc-moment", "--out", str(tmp_path / "m.json"), "--engine", "local"]
    first = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "stores").is_dir()  # the source was ingested where the configuration says
    assert [line for line in first.stderr.splitlines() if LINE in line] == [
        line for line in first.stderr.splitlines() if f"{LINE} {COMPILE_ESTIMATE_WITH_PARSER} s" in line] != []
