"""auc-moment and error-moment on the bundled datasets, next to scikit-learn's LogisticRegression.

Usage::

    python bench/moment_baselines.py [--data-dir ../shared/data] [--work bench/work] [--datasets kdd99,a9a]

Ingests each dataset (train, and test ``--like`` train), trains both moment objectives on a
2-worker LocalCluster, evaluates on the test store, and fits LogisticRegression (lbfgs,
default C) on the same ingested features, raw and standardized. Also checks that 1 worker
and the in-process NumPy path give the same weights. Writes
``bench/results/moment_baselines.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import dense  # noqa: E402
from datasets import DATASETS, default_data_dir, ingest_pair  # noqa: E402


def logistic(X, y, Xt, yt, scale: bool) -> dict:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    lr = LogisticRegression(max_iter=1000)
    model = make_pipeline(StandardScaler(), lr) if scale else lr
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(X, y)
    seconds = time.perf_counter() - t0
    s = model.decision_function(Xt)
    from dpipe.metrics import prbep_score

    return {"auc": roc_auc_score(yt, s), "accuracy": float(np.mean(np.where(s > 0, 1, -1) == yt)), "prbep": float(prbep_score(yt, s)),
            "seconds": seconds, "nit": int(lr.n_iter_[0]), "converged": not caught}


def main() -> None:
    from distributed import Client, LocalCluster

    import dpipe

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, default=default_data_dir())
    ap.add_argument("--work", type=Path, default=Path(__file__).resolve().parent / "work")
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "moment_baselines")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    rows = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c2, Client(c2) as client2, \
            LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0") as c1, Client(c1) as client1:
        for name in a.datasets.split(","):
            t0 = time.perf_counter()
            train, test = ingest_pair(name, a.data_dir, a.work)
            t_ingest = time.perf_counter() - t0
            st, stt = dpipe.open_store(train), dpipe.open_store(test)
            row = {"dataset": name, "n_train": st.manifest.n_rows, "n_test": stt.manifest.n_rows, "d": st.manifest.n_features,
                   "positive_rate": st.manifest.n_positive / st.manifest.n_rows, "ingest_seconds": t_ingest}
            for objective in ("auc-moment", "error-moment"):
                t0 = time.perf_counter()
                m = dpipe.train(train, objective, client=client2)
                seconds = time.perf_counter() - t0
                ev = dpipe.evaluate(m, test, client=client2)
                m1 = dpipe.train(train, objective, client=client1, train_metrics=False)
                ml = dpipe.train(train, objective, engine="local", train_metrics=False)
                rel = max(np.abs(m.coef - o.coef).max() / np.abs(m.coef).max() for o in (m1, ml))
                row[objective] = {"auc": ev["roc_auc"], "accuracy": ev["accuracy"], "prbep": ev["prbep"], "f1": ev["f1"], "seconds": seconds,
                                  "moments_seconds": m.fit["time_data"], "solve_seconds": m.fit["time_solve"], "nit": m.fit["nit"],
                                  "parity_rel": float(rel), "calibration": m.fit["info"].get("calibration")}
            full, full_t = st.read_all(), stt.read_all()
            X, y, Xt = dense(full.X), full.y, dense(full_t.X)
            row["logreg"] = logistic(X, y, Xt, full_t.y, scale=False)
            row["logreg_scaled"] = logistic(X, y, Xt, full_t.y, scale=True)
            rows.append(row)
            print(json.dumps({k: row[k] for k in ("dataset", "auc-moment", "error-moment", "logreg", "logreg_scaled")}, default=float), flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with open(a.out.with_suffix(".json"), "w") as f:
        json.dump(rows, f, indent=1, default=float)
    lines = [
        "| dataset | n train / test | d | pos. rate | auc-moment test AUC | LR test AUC (raw / std.) | error-moment test acc. | LR test acc. (raw / std.) | auc-moment s | error-moment s | parity 1w/local |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        am, em, lr, ls = r["auc-moment"], r["error-moment"], r["logreg"], r["logreg_scaled"]
        flag = "" if lr["converged"] else "*"
        lines.append(
            f"| {r['dataset']} | {r['n_train']} / {r['n_test']} | {r['d']} | {r['positive_rate']:.4f} | {am['auc']:.4f} | {lr['auc']:.4f}{flag} / {ls['auc']:.4f} | "
            f"{em['accuracy']:.4f} | {lr['accuracy']:.4f}{flag} / {ls['accuracy']:.4f} | {am['seconds']:.2f} | {em['seconds']:.2f} | {max(am['parity_rel'], em['parity_rel']):.1e} |"
        )
    lines.append("")
    lines.append("`*` LogisticRegression did not converge in 1000 lbfgs iterations on the raw features. Times include the moments pass on a 2-worker LocalCluster, the fit, the threshold calibration pass(es) and the training metrics.")
    with open(a.out.with_suffix(".md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
