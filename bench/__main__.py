"""``python -m bench SUITE [SUITE ...] [--quick] [--repeats N]``: run benchmark suites.

Each suite writes ``bench/results/<suite>.json`` (every figure, the machine, the
options and the suite's own running time), ``<suite>.md`` (its tables) and PNG plots.
``all`` runs every suite in turn. ``--quick`` runs smaller versions of every suite
(about 10 minutes for all of them on the 2-core reference machine) into
``bench/results/quick/`` unless ``--out`` says otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
import time
from pathlib import Path

from . import SUITES
from ._harness import HERE, Config, write_results
from .datasets import default_data_dir


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help without line breaks inside hyphenated names (``rate-goals``, ``cost-model``)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0], formatter_class=_HelpFormatter)
    ap.add_argument("suites", nargs="+", choices=[*SUITES, "all"], metavar="SUITE", help=f"one of {', '.join(SUITES)}, or all")
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer datasets (the first thing to run)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per timing (median, min and max are reported; default 3)")
    ap.add_argument("--data-dir", type=Path, default=default_data_dir(), help="folder of the bundled datasets (default ../shared/data)")
    ap.add_argument("--work", type=Path, default=HERE / "work", help="where ingested and generated stores are kept between runs")
    ap.add_argument("--out", type=Path, default=None, help="results folder (default bench/results, or bench/results/quick with --quick)")
    ap.add_argument("--tasks", default=None, help="race, stopping: a subset of their tasks; workers: of its objectives; spark: of its Spark estimators (comma-separated; default all)")
    ap.add_argument("--before", type=Path, default=None,
                    help="rate-speed: a checkout of dpipe before a change (e.g. git worktree add DIR HEAD), run as PYTHONPATH=DIR")
    a = ap.parse_args(argv)
    if a.repeats < 1:
        ap.error("--repeats must be at least 1")
    out = a.out or (HERE / "results" / "quick" if a.quick else HERE / "results")
    out.mkdir(parents=True, exist_ok=True)  # before any suite: some draw their plots there before write_results
    cfg = Config(quick=a.quick, repeats=a.repeats, data_dir=a.data_dir, work=a.work, out_dir=out,
                 tasks=tuple(a.tasks.split(",")) if a.tasks else None, before=a.before)
    names = list(SUITES) if "all" in a.suites else list(dict.fromkeys(a.suites))
    if any(n in ("convergence", "baselines", "race") for n in names) and not cfg.data_dir.is_dir():
        ap.error(f"--data-dir {cfg.data_dir} is not a folder: the convergence, baselines and race suites read the bundled datasets")
    t_all = time.perf_counter()
    for name in names:
        module = importlib.import_module(f".suites.{SUITES[name]}", __package__)
        print(f"== {name}{' (quick)' if cfg.quick else ''}", flush=True)
        t0 = time.perf_counter()
        payload, markdown = module.run(cfg)
        seconds = time.perf_counter() - t0
        markdown = f"# {name}{' (--quick)' if cfg.quick else ''}\n\nSuite running time: {seconds / 60:.1f} min ({cfg.repeats} runs per timing).\n\n{markdown}"
        for path in write_results(cfg, name, {"suite_seconds": seconds, **payload}, markdown):
            print(f"  wrote {path}", flush=True)
        print(f"== {name}: {seconds:.0f} s", flush=True)
    print(f"all done in {time.perf_counter() - t_all:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
