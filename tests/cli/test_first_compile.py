"""The first run after an install says, in one log line, that it compiles dpipe's kernels; a run that finds them in
numba's cache says nothing (issue 43)."""

from __future__ import annotations

import os
import subprocess
import sys

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
    second = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert second.returncode == 0 and LINE not in second.stderr
