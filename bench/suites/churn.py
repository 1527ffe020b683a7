"""churn: retraining under a churn and a recall constraint (Goh et al. section 4.2, on public data).

a9a's training file is shuffled (``RandomState(0)``) and cut in three equal parts:

* **A**, on which the *deployed* model was trained (dpipe ``error-rate``, no constraint);
* **D1**, new labelled data, the retrain's training store;
* **D3**, an unlabelled pool (its labels are never read): the rows whose decisions
  should not flip.

The retrain minimizes the error rate on D1 subject to ``recall >= r`` on D1, ``r`` the
deployed model's recall there, and ``churn(deployed, on=pool) <= target`` on D3, for
each target. (The paper splits the new labelled data in two, D1 for the error and D2
for the recall and false-positive terms; one store for both keeps the experiment to
the CLI's shapes.) The baseline is the unconstrained retrain on D1 with its threshold
moved to the lowest-error bias whose recall on D1 is at least ``r``: what a team does
without a churn constraint. Each retrain is also compared with the baseline thresholded at
that retrain's own training recall (equal recall).

Reported for both, on the training side (error and recall on D1, churn on D3) and on
a9a's official test file (error, recall, churn against the deployed model's test
decisions), with fit seconds. The PNG plots churn and error against the target.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np

from .._harness import Config, dense, pyplot, table_head
from ..datasets import ingest_pair

TARGETS = (0.005, 0.01, 0.02, 0.05, 0.10)


def _parts(cfg: Config) -> dict[str, Any]:
    """The three parts of a9a's training file as stores, and the test arrays."""
    import dpipe
    from dpipe.testing import write_store

    train, test = ingest_pair("a9a", cfg.data_dir, cfg.work)
    sh = dpipe.open_store(train).read_all()
    X = dense(sh.X)
    order = np.random.RandomState(0).permutation(sh.n_rows)
    thirds = np.array_split(order, 3)
    out: dict[str, Any] = {}
    for name, rows in zip(("deployed-data", "new", "pool"), thirds):
        path = cfg.work / f"a9a-churn-{name}.zarr"
        if not path.exists():  # the pool is written without its labels
            write_store(path, X[rows], None if name == "pool" else sh.y[rows])
        out[name] = str(path)
        out[f"{name}-arrays"] = (X[rows].astype(np.float64), sh.y[rows])
    st = dpipe.open_store(test).read_all()
    out["test-arrays"] = (dense(st.X).astype(np.float64), st.y)
    return out


def _decisions(coef: np.ndarray, intercept: float, X: np.ndarray) -> np.ndarray:
    return X @ coef + intercept > 0


def _row(pred: dict[str, np.ndarray], arrays: dict[str, Any], deployed: dict[str, np.ndarray]) -> dict[str, float]:
    y_new, y_test = arrays["new"][1] == 1, arrays["test"][1] == 1
    return {
        "train_error": float(np.mean(pred["new"] != y_new)), "train_recall": float(pred["new"][y_new].mean()),
        "train_churn": float(np.mean(pred["pool"] != deployed["pool"])),
        "test_error": float(np.mean(pred["test"] != y_test)), "test_recall": float(pred["test"][y_test].mean()),
        "test_churn": float(np.mean(pred["test"] != deployed["test"])),
    }


def _threshold_for_recall(scores: np.ndarray, y: np.ndarray, recall: float) -> float:
    """The intercept shift with the lowest error on ``(scores, y)`` among those with recall >= ``recall``."""
    order = np.argsort(-scores, kind="stable")
    s, pos = scores[order], (y[order] == 1)
    tp = np.cumsum(pos)  # the top k+1 rows positive
    fp = np.cumsum(~pos)
    ok = tp / pos.sum() >= recall - 1e-12
    ends = np.r_[s[:-1] > s[1:], True]  # a cut only between distinct scores
    errors = np.where(ok & ends, (pos.sum() - tp) + fp, np.inf)
    k = int(np.argmin(errors))
    nxt = s[k + 1] if k + 1 < s.size else s[k] - 1.0
    return -0.5 * (s[k] + nxt)  # positive iff score + shift > 0: the top k+1 rows


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    import dpipe

    targets = (0.01, 0.05) if cfg.quick else TARGETS
    parts = _parts(cfg)
    arrays = {k[:-7]: v for k, v in parts.items() if k.endswith("-arrays")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpipe.ConvergenceWarning)
        t0 = time.perf_counter()
        deployed = dpipe.train(parts["deployed-data"], "error-rate", engine="local", train_metrics=False)
        deployed_seconds = time.perf_counter() - t0
    deployed_path = cfg.work / "a9a-churn-deployed.json"
    deployed.save(deployed_path)
    coef0, b0 = np.asarray(deployed.coef), float(deployed.intercept)
    deployed_pred = {k: _decisions(coef0, b0, X) for k, (X, _) in arrays.items()}
    recall = float(deployed_pred["new"][arrays["new"][1] == 1].mean())
    results: dict[str, Any] = {"deployed": {"seconds": deployed_seconds, **_row(deployed_pred, arrays, deployed_pred)},
                               "rows": {k: int(X.shape[0]) for k, (X, _) in arrays.items()}, "runs": []}
    print(f"  deployed: recall on the new data {recall:.4f}, test error {results['deployed']['test_error']:.4f}", flush=True)

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpipe.ConvergenceWarning)
        retrain = dpipe.train(parts["new"], "error-rate", engine="local", train_metrics=False)
    base_seconds = time.perf_counter() - t0
    coef1 = np.asarray(retrain.coef)
    shift = _threshold_for_recall(arrays["new"][0] @ coef1, arrays["new"][1], recall)
    base = _row({k: _decisions(coef1, shift, X) for k, (X, _) in arrays.items()}, arrays, deployed_pred)
    results["baseline"] = {"seconds": base_seconds, **base}
    print(f"  baseline: train churn {base['train_churn']:.4f} error {base['train_error']:.4f}; "
          f"test churn {base['test_churn']:.4f} error {base['test_error']:.4f}", flush=True)

    for target in targets:
        constraints = [f"recall >= {recall!r}", f"churn('{deployed_path}', on=pool) <= {target!r}"]
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dpipe.ConvergenceWarning)
            model = dpipe.train(parts["new"], "error-rate", engine="local", train_metrics=False, constraints=constraints,
                                datasets={"pool": parts["pool"]})
        seconds = time.perf_counter() - t0
        coef, b = np.asarray(model.coef), float(model.intercept)
        row = _row({k: _decisions(coef, b, X) for k, (X, _) in arrays.items()}, arrays, deployed_pred)
        # the baseline at this model's recall: the comparison at equal recall
        same = _threshold_for_recall(arrays["new"][0] @ coef1, arrays["new"][1], row["train_recall"])
        at_recall = _row({k: _decisions(coef1, same, X) for k, (X, _) in arrays.items()}, arrays, deployed_pred)
        results["runs"].append({"target": target, "seconds": seconds, "satisfied": model.fit["success"], **row,
                                "baseline_at_recall": at_recall})
        print(f"  target {target:.3f}: train churn {row['train_churn']:.4f} error {row['train_error']:.4f} recall "
              f"{row['train_recall']:.4f}; test churn {row['test_churn']:.4f} error {row['test_error']:.4f} ({seconds:.1f} s)", flush=True)

    png = _plot(results, cfg.out_dir / "churn.png")
    b, d0 = results["baseline"], results["deployed"]
    lines = [
        "a9a's training file in three shuffled thirds: the deployed model's data, the new labelled data (D1) and an unlabelled "
        f"pool (D3); the official test file. Deployed model: dpipe error-rate on the first third; its recall on D1 is {recall:.4f} "
        f"and its test error {results['deployed']['test_error']:.4f}. Retrain: error rate on D1 subject to `recall >= {recall:.4f}` "
        "on D1 and `churn(deployed.json, on=pool) <= target` on D3. Baseline: the unconstrained retrain on D1, thresholded at the "
        "lowest-error bias with recall >= the deployed model's. Churn: fraction of rows whose decision differs from the deployed "
        "model's.",
        "",
        *table_head(["model", "target", "train churn (D3)", "train error (D1)", "train recall (D1)", "test churn", "test error",
                     "test recall", "seconds", "constraints hold", "baseline at this recall: train / test error, train churn"]),
        f"| deployed model (trained on the first third) | - | 0 | {d0['train_error']:.4f} | {d0['train_recall']:.4f} | 0 | "
        f"{d0['test_error']:.4f} | {d0['test_recall']:.4f} | {d0['seconds']:.1f} | - | - |",
        f"| baseline | - | {b['train_churn']:.4f} | {b['train_error']:.4f} | {b['train_recall']:.4f} | {b['test_churn']:.4f} | "
        f"{b['test_error']:.4f} | {b['test_recall']:.4f} | {b['seconds']:.1f} | - | - |",
    ]
    for r in results["runs"]:
        lines.append(f"| dpipe | {r['target']:.3f} | {r['train_churn']:.4f} | {r['train_error']:.4f} | {r['train_recall']:.4f} | "
                     f"{r['test_churn']:.4f} | {r['test_error']:.4f} | {r['test_recall']:.4f} | {r['seconds']:.1f} | {r['satisfied']} | "
                     f"{r['baseline_at_recall']['train_error']:.4f} / {r['baseline_at_recall']['test_error']:.4f}, "
                     f"{r['baseline_at_recall']['train_churn']:.4f} |")
    lines += ["", f"![churn and error against the churn target]({png.rsplit('/', 1)[-1]})"]
    return {"results": results, "plot": png}, "\n".join(lines)


def _plot(results: dict[str, Any], path) -> str:
    plt = pyplot()
    runs, base = results["runs"], results["baseline"]
    t = [100 * r["target"] for r in runs]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for key, label, marker in (("train_churn", "train churn (pool)", "o"), ("test_churn", "test churn", "s")):
        left.plot(t, [100 * r[key] for r in runs], marker=marker, label=f"dpipe {label}")
        left.axhline(100 * base[key], ls="--", color="grey" if key == "train_churn" else "black", lw=1, label=f"baseline {label}")
    left.plot(t, t, ":", color="red", label="target")
    left.set_xlabel("churn target (%)")
    left.set_ylabel("churn (%)")
    for key, label, marker in (("train_error", "train error", "o"), ("test_error", "test error", "s")):
        right.plot(t, [100 * r[key] for r in runs], marker=marker, label=f"dpipe {label}")
        right.axhline(100 * base[key], ls="--", color="grey" if key == "train_error" else "black", lw=1, label=f"baseline {label}")
    right.set_xlabel("churn target (%)")
    right.set_ylabel("error (%)")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("a9a: retraining under recall >= deployed's and churn <= target")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)
