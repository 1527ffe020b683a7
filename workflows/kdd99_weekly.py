"""Worked example: weekly retraining on kdd99 under a 2 % churn target, end to end from one command.

    python workflows/kdd99_weekly.py [--data ../shared/data/kddcup.data_10_percent.gz] [--rows N] [--out DIR]

It writes into ``--out`` (default: a new temporary folder, printed at the end), never over
the committed results unless asked: ``--out workflows/results`` regenerates them.

What it does, as a team's weekly job would (each retrain is a real ``dpipe retrain``
process, as cron or a CronJob would start it):

1. KDD Cup 1999's 10 % file (attack = positive) is shuffled (``RandomState(0)``) and cut
   into: the first model's rows (25 %), an unlabelled pool of current traffic (10 %,
   labels stripped), and three weekly batches (the remaining 65 %, in thirds), each
   split 70 / 30 into a training and a holdout file. The batches are written as
   CSV files - what arrives each week.
2. Week 0 ingests the first rows (``log1p`` on the heavy-tailed columns, min-max
   scaling: the transform every later batch is ingested with, ``like`` it) and
   retrains into an empty registry: the first champion.
3. Weeks 1-3 each run ``dpipe retrain week-N.yaml``: the batch's CSV files are
   ingested into the registry, a challenger is trained (error rate subject to recall
   no worse than the champion's and churn against the champion on the pool at most
   2 %), champion and challenger are compared on the week's holdout, and the
   decision is recorded.
4. The registry's history is copied to ``OUT/kdd99_weekly_history.jsonl``, with a table
   (``.md``) and a plot (``.png``) of AUC and churn per week.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CHURN_TARGET = 0.02
WEEKS = 3


def _default_data() -> Path:
    return Path(os.environ.get("DPIPE_SHARED_DATA", HERE.parents[1] / "shared" / "data")) / "kddcup.data_10_percent.gz"


def _write(path: Path, lines: list[str]) -> str:
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")
    return str(path)


def _split(lines: list[str], work: Path) -> dict[str, str]:
    """The parts as CSV files: ``first-train``, ``first-holdout``, ``pool`` and ``week-N-train`` / ``week-N-holdout``."""
    order = np.random.RandomState(0).permutation(len(lines))
    n = len(lines)
    first, pool, rest = order[: n // 4], order[n // 4: n // 4 + n // 10], order[n // 4 + n // 10:]
    files = {}

    def train_holdout(name: str, rows: np.ndarray) -> None:
        cut = int(0.7 * rows.size)
        files[f"{name}-train"] = _write(work / f"{name}-train.csv.gz", [lines[i] for i in rows[:cut]])
        files[f"{name}-holdout"] = _write(work / f"{name}-holdout.csv.gz", [lines[i] for i in rows[cut:]])

    train_holdout("first", first)
    files["pool"] = _write(work / "pool.csv.gz", [lines[i].rsplit(",", 1)[0] for i in pool])  # unlabelled: no label column
    for week, rows in enumerate(np.array_split(rest, WEEKS), 1):
        train_holdout(f"week-{week}", rows)
    return files


def _config(work: Path, name: str, train: str, holdout: str, ingest: dict) -> Path:
    import yaml

    cfg = {"registry": "registry", "objective": "error-rate",
           "data": {"train": train, "holdout": holdout, "pool": "pool.zarr", "ingest": ingest},
           "constraints": {"churn": CHURN_TARGET, "recall-no-worse": True}, "promote": {"metric": "roc_auc", "margin": 0.0},
           "cluster": {"engine": "local"}}
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _retrain(config: Path) -> tuple[int, float]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "dpipe", "-q", "retrain", str(config)], text=True, capture_output=True)
    print(r.stdout.rstrip(), flush=True)
    if r.returncode not in (0, 3):
        raise SystemExit(f"{config.name}: dpipe retrain failed (exit {r.returncode}): {r.stderr.strip().splitlines()[-1:]}")
    return r.returncode, time.perf_counter() - t0


#: the file that marks a scratch folder as this example's own (so a rerun may replace it)
WORK_MARKER = ".kdd99-weekly-work"


def _check_work(work: Path) -> None:
    """Refuse a scratch folder this example did not make: it would be replaced."""
    if work.exists() and not (work / WORK_MARKER).is_file():
        raise SystemExit(f"{work}: exists and was not made by this example (no {WORK_MARKER}); name another --work or remove it")


def _fresh_work(work: Path) -> None:
    """An empty scratch folder, marked as this example's (an earlier run's is replaced, anything else refused)."""
    _check_work(work)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    (work / WORK_MARKER).write_text("scratch folder of workflows/kdd99_weekly.py: replaced by its next run\n")


def run(data: Path, rows: int | None, out: Path, work: Path, command: str = "python workflows/kdd99_weekly.py") -> dict:
    """Run the whole example; returns the summary written to ``OUT/kdd99_weekly.json`` (``command``: what the table
    says made it)."""
    import dpipe
    from dpipe.plotting import plot_retrain_history
    from dpipe.registry import Registry

    with gzip.open(data, "rt") as f:
        lines = f.read().splitlines()
    if rows is not None:
        lines = [lines[i] for i in np.sort(np.random.RandomState(1).choice(len(lines), rows, replace=False))]
    _fresh_work(work)
    files = _split(lines, work)
    base = str(work / "first-train.zarr")
    dpipe.ingest(files["first-train"], base, label=41, negative=["normal."], log1p="auto", scale="minmax")
    dpipe.ingest(files["pool"], str(work / "pool.zarr"), like=base, unlabeled=True, unseen="ignore")
    like = {"like": base, "unseen": "ignore"}
    weeks = []
    for week in range(WEEKS + 1):
        name = "first" if week == 0 else f"week-{week}"
        config = _config(work, f"week-{week}", files[f"{name}-train"], files[f"{name}-holdout"], like)
        code, seconds = _retrain(config)
        weeks.append({"week": week, "exit_code": code, "seconds": round(seconds, 1)})
    reg = Registry(work / "registry")
    history = reg.history()
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "kdd99_weekly_history.jsonl", "w") as f:
        for record in history:
            f.write(json.dumps(record, sort_keys=True) + "\n")
    plot_retrain_history(history, out / "kdd99_weekly.png", title=f"kdd99 weekly retrains ({len(lines)} rows), churn target {CHURN_TARGET:.0%}")
    for w, r in zip(weeks, [r for r in history if r["action"] in ("promoted", "kept")]):
        w.update(action=r["action"], version=r["version"], champion_after=r["champion_after"], challenger_auc=r["challenger"]["roc_auc"],
                 champion_auc=(r["champion"] or {}).get("roc_auc"), holdout_churn=r.get("holdout_churn"))
    summary = {"rows": len(lines), "churn_target": CHURN_TARGET, "weeks": weeks, "champion": reg.champion(), "command": command}
    (out / "kdd99_weekly.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "kdd99_weekly.md").write_text(_table(summary))
    return summary


def _table(summary: dict) -> str:
    lines = [f"kdd99 (10 % file, {summary['rows']} rows) weekly retrains under churn <= {summary['churn_target']:.0%} against the champion "
             f"and recall >= the champion's; AUC and churn on each week's holdout. Made by `{summary['command']}`.", "",
             "| week | decision | challenger | champion after | challenger AUC | champion AUC | AUC gain | churn vs champion | exit code | seconds |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for w in summary["weeks"]:
        champ = "-" if w.get("champion_auc") is None else f"{w['champion_auc']:.6f}"
        gain = "-" if w.get("champion_auc") is None else f"{w['challenger_auc'] - w['champion_auc']:+.1e}"
        churn = "-" if w.get("holdout_churn") is None else f"{100 * w['holdout_churn']:.2f} %"
        lines.append(f"| {w['week']} | {w['action']} | {w['version']} | {w['champion_after']} | {w['challenger_auc']:.6f} | {champ} | {gain} | {churn} | "
                     f"{w['exit_code']} | {w['seconds']} |")
    return "\n".join(lines + ["", "![AUC and churn per week](kdd99_weekly.png)", ""])


def _command(a: argparse.Namespace) -> str:
    """The command as run, with what changes the results (``--rows``) and where they went (``--out``, as given)."""
    words = ["python", "workflows/kdd99_weekly.py"] + (["--rows", str(a.rows)] if a.rows is not None else []) + \
        (["--out", str(a.out)] if a.out is not None else [])
    return shlex.join(words)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=_default_data(), help="kddcup.data_10_percent.gz")
    ap.add_argument("--rows", type=int, help="use a random sample of this many rows (CI runs a small version)")
    ap.add_argument("--out", type=Path, help="where the history, table and plot go (default: a new temporary folder; "
                                               "workflows/results regenerates the committed ones)")
    ap.add_argument("--work", type=Path, help="scratch folder for the files, stores and registry (default OUT/work; replaced by the next run, "
                                                "and only when this example made it)")
    a = ap.parse_args(argv)
    if not a.data.exists():
        raise SystemExit(f"{a.data}: not found (pass --data PATH to kddcup.data_10_percent.gz)")
    out = (a.out if a.out is not None else Path(tempfile.mkdtemp(prefix="dpipe-kdd99-weekly-"))).resolve()  # the configs name absolute paths
    work = (a.work or out / "work").resolve()
    _check_work(work)  # before the data is read
    out.mkdir(parents=True, exist_ok=True)
    work.parent.mkdir(parents=True, exist_ok=True)
    from dpipe._locks import destination_lock

    with destination_lock(work, "scratch folder"):  # one run per scratch folder: a second one at once is refused, naming the first
        summary = run(a.data, a.rows, out, work, command=_command(a))
    print(_table(summary))
    print(f"results: {out}")


if __name__ == "__main__":
    main()
