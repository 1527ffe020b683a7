"""Whole-process time of the first-ever ``dpipe train`` (numba compiles every kernel the run needs) and of a warm one.

Usage::

    python bench/first_run.py STORE [--repeats 3] [--before DIR] [--out FILE.json]

Each round runs, per tree (this one, and ``--before``: a checkout run with ``PYTHONPATH=DIR``),
``python -m dpipe -q train STORE --out TMP`` twice: first with ``NUMBA_CACHE_DIR`` an empty
folder (numba compiles every kernel the run needs, as after a fresh install), then again with
that folder as it was left (numba loads the kernels from it). Rounds alternate the trees' order,
so load falls on both alike. Printed per tree and kind: the median (min-max) wall seconds from
launch to exit, with the load averages before and after; ``--out`` saves every run as JSON.
The seconds numba spends compiling are counted in-process by ``python bench/first_run.py
--kernels STORE``: each compiled function, its signature and its seconds, slowest first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent


def _run(tree: Path | None, store: Path, cache: Path, work: Path) -> float:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    out = work / "m.json"
    out.unlink(missing_ok=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dpipe", "-q", "train", str(store), "--out", str(out)], env=env, cwd=work, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _kernels(store: Path) -> None:
    """Train once in this process with an empty numba cache; print every compile (outermost ones counted)."""
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="dpipe-numba-")
    from numba.core import event

    rows: list[tuple[int, str, float]] = []
    starts: list[float] = []

    class _Listener(event.Listener):
        def on_start(self, ev: Any) -> None:
            starts.append(time.perf_counter())

        def on_end(self, ev: Any) -> None:
            t0 = starts.pop()
            f = getattr((ev.data or {}).get("dispatcher"), "py_func", None)
            rows.append((len(starts), f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', '?')}", time.perf_counter() - t0))

    event.register("numba:compile", _Listener())
    from dpipe.cli.main import main

    with tempfile.TemporaryDirectory() as work:
        t0 = time.perf_counter()
        main(["-q", "train", str(store), "--out", str(Path(work) / "m.json")])
        total = time.perf_counter() - t0
    outer = sorted((r for r in rows if r[0] == 0), key=lambda r: -r[2])
    for _, name, s in outer:
        print(f"{s:6.2f} s  {name}")
    print(f"{len(outer)} kernels compiled in {sum(r[2] for r in outer):.2f} s of the command's {total:.2f} s; load {os.getloadavg()}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--before", type=Path, default=None, help="a checkout of an earlier dpipe, run with PYTHONPATH=DIR")
    ap.add_argument("--out", type=Path, default=None, help="save every run here (JSON)")
    ap.add_argument("--kernels", action="store_true", help="list the kernels one first run compiles, with their seconds")
    a = ap.parse_args(argv)
    store = a.store.resolve()
    if a.kernels:
        _kernels(store)
        return 0
    trees: dict[str, Path | None] = {"after": None}
    if a.before is not None:
        trees["before"] = a.before.resolve()
    runs: dict[str, dict[str, list[float]]] = {name: {"first": [], "warm": []} for name in trees}
    loads = [os.getloadavg()]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.repeats):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for name in order:
                cache = Path(tmp) / f"numba-{name}-{r}"
                cache.mkdir()
                runs[name]["first"].append(_run(trees[name], store, cache, Path(tmp)))
                runs[name]["warm"].append(_run(trees[name], store, cache, Path(tmp)))
            loads.append(os.getloadavg())
    for name, kinds in runs.items():
        for kind, times in kinds.items():
            print(f"{name:6s} {kind:5s} {np.median(times):5.2f} s ({min(times):.2f}-{max(times):.2f}), runs {', '.join(f'{t:.2f}' for t in times)}")
    print("load averages (1, 5, 15 min) before and after each round: " + "; ".join(" ".join(f"{x:.2f}" for x in ld) for ld in loads))
    if a.out:
        a.out.write_text(json.dumps({"store": str(store), "runs": runs, "loads": loads}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
