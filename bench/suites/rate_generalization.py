"""rate-generalization: do rate constraints met in training hold on new rows? The training-rows rule against the validation rule.

Three constrained tasks, each on 5 seeded splits of its official training file into 80 %
training rows and 20 % test rows (the rows drawn i.i.d., so the test rows are "next week's
data" from the same distribution; the official test files differ in distribution, which no
rule can see):

* kdd99 (SVM-perf's preprocessing): Neyman-Pearson, ``false-negative-rate`` subject to
  ``false_positive_rate <= 0.01``;
* a9a (sex from its one-hot f72 / f73) and adult (raw columns, ``--group-col`` sex): the
  80 % rule, ``error-rate`` subject to ``positive_rate(group=Female) >= 0.8 *
  positive_rate(group=Male)``.

On each split, from the same 80 %:

* (a) dpipe, the training-rows rule (its defaults);
* (b) dpipe, the validation rule: the same with ``validation_fraction=0.25`` (seed = the
  split), i.e. 60 % of the rows fit the direction, 20 % set the threshold;
* (c) scikit-learn ``LogisticRegression(max_iter=1000)`` thresholded on the training rows
  (Neyman-Pearson: the score quantile with training FPR 1 %; the 80 % rule: the threshold
  of least training error among those with training ratio >= 0.8);
* (d) fairlearn ``ExponentiatedGradient(LogisticRegression, DemographicParity(ratio_bound=0.8))``,
  deterministic (a9a, adult).

Reported: the test constraint value (FPR; Female / Male selection-rate ratio) and the test
objective (FNR; error), mean and worst over the splits, with the acceptance checks of
issue 28 (the validation rule's worst test value within 0.005 of the bound; its mean test
objective within 10 % of the training-rows rule's).
"""

from __future__ import annotations

import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from .._harness import Config, dense, pyplot, table_head
from ..datasets import ingest_pair

SEEDS = (0, 1, 2, 3, 4)
#: share of the 80 % the validation rule holds out (20 % of all rows)
VALIDATION_FRACTION = 0.25
FAIR = "positive_rate(group=Female) >= 0.8 * positive_rate(group=Male)"
NP = "false_positive_rate <= 0.01"
#: how far over the bound the worst split may land (issue 28)
TOLERANCE = 0.005


def _pool(cfg: Config, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The official training rows of ``name``: X, y and (fairness tasks) Female as a boolean."""
    import dpipe

    if name == "a9a":
        from .fairness import _a9a_grouped

        store = _a9a_grouped(cfg)[0]
    else:
        store = ingest_pair(name, cfg.data_dir, cfg.work)[0]
    st = dpipe.open_store(store)
    sh = st.read_all()
    female = None if sh.group is None else sh.group == list(st.manifest.groups).index("Female")
    return dense(sh.X), sh.y, female


def _rates(pred: np.ndarray, y: np.ndarray, female: np.ndarray | None) -> dict[str, float]:
    """Test figures of 0/1 predictions: FPR and FNR, or error and the Female / Male selection-rate ratio."""
    pos, neg = y > 0, y < 0
    out = {"fpr": float(pred[neg].mean()), "fnr": float(1.0 - pred[pos].mean()), "error": float(np.mean(pred != pos))}
    if female is not None:
        male_rate = pred[~female].mean()
        out["ratio"] = float(pred[female].mean() / male_rate) if male_rate > 0 else float("nan")
    return out


def _lr_threshold(scores: np.ndarray, y: np.ndarray, female: np.ndarray | None) -> float:
    """LogisticRegression's threshold on its training scores: FPR 1 %, or the least training error at ratio >= 0.8."""
    if female is None:
        return float(np.quantile(scores[y < 0], 0.99))
    best, best_error = np.inf, np.inf
    for t in np.unique(np.quantile(scores, np.linspace(0.0, 1.0, 2001))):
        r = _rates(scores > t, y, female)
        if r["ratio"] >= 0.8 and r["error"] < best_error:
            best, best_error = float(t), r["error"]
    return best


def _split(folder: Path, name: str, seed: int, X: np.ndarray, y: np.ndarray, female: np.ndarray | None) -> dict[str, Any]:
    from sklearn.linear_model import LogisticRegression

    import dpipe
    from dpipe.testing import write_store

    rng = np.random.default_rng(1000 + seed)
    test = rng.random(y.size) < 0.2
    train = ~test
    Xa, ya, Xt, yt = X[train], y[train], X[test], y[test]
    fa, ft = (None, None) if female is None else (female[train], female[test])
    store = folder / f"{name}-{seed}.zarr"  # in this run's own temporary folder (see run)
    write_store(store, Xa, ya, None,
                **({} if fa is None else {"group": fa.astype(np.int16), "groups": ["Male", "Female"]}))
    objective, constraint = ("false-negative-rate", NP) if female is None else ("error-rate", FAIR)
    out: dict[str, Any] = {"seed": seed, "train_rows": int(ya.size), "test_rows": int(yt.size)}
    for key, extra in (("training", {}), ("validation", {"validation_fraction": VALIDATION_FRACTION, "validation_seed": seed})):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dpipe.ConvergenceWarning)
            model = dpipe.train(str(store), objective, engine="local", train_metrics=False, constraints=[constraint], **extra)
        out[key] = {"seconds": time.perf_counter() - t0, "test": _rates(model.predict(Xt) == 1, yt, ft),
                    "fit": model.fit["info"].get("constraints_validation", model.fit["info"]["constraints"])[0]["value"]}
    t0 = time.perf_counter()
    lr = LogisticRegression(max_iter=1000).fit(Xa.astype(np.float64), (ya > 0).astype(int))
    threshold = _lr_threshold(lr.decision_function(Xa), ya, fa)
    out["logistic"] = {"seconds": time.perf_counter() - t0, "test": _rates(lr.decision_function(Xt) > threshold, yt, ft)}
    if female is not None:
        from fairlearn.reductions import DemographicParity, ExponentiatedGradient

        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eg = ExponentiatedGradient(LogisticRegression(max_iter=1000), constraints=DemographicParity(ratio_bound=0.8))
            eg.fit(Xa.astype(np.float64), (ya > 0).astype(int), sensitive_features=fa)
        out["fairlearn"] = {"seconds": time.perf_counter() - t0, "test": _rates(eg._pmf_predict(Xt)[:, 1] >= 0.5, yt, ft)}
    shutil.rmtree(store)  # the split's store is not kept
    line = ", ".join(f"{k} {v['test'][_constraint_key(female)]:.4f} / {v['test'][_objective_key(female)]:.4f}"
                     for k, v in out.items() if isinstance(v, dict) and "test" in v)
    print(f"  {name} split {seed}: test constraint / objective: {line}", flush=True)
    return out


def _constraint_key(female: np.ndarray | None) -> str:
    return "fpr" if female is None else "ratio"


def _objective_key(female: np.ndarray | None) -> str:
    return "fnr" if female is None else "error"


def _summary(name: str, splits: list[dict[str, Any]], fair: bool) -> dict[str, Any]:
    ck, ok = ("ratio", "error") if fair else ("fpr", "fnr")
    worst = min if fair else max  # the ratio's worst is its smallest, the FPR's its largest
    out: dict[str, Any] = {}
    for method in ("training", "validation", "logistic", "fairlearn"):
        if method not in splits[0]:
            continue
        c = [s[method]["test"][ck] for s in splits]
        o = [s[method]["test"][ok] for s in splits]
        out[method] = {"constraint_mean": float(np.mean(c)), "constraint_worst": float(worst(c)), "objective_mean": float(np.mean(o)),
                       "seconds_mean": float(np.mean([s[method]["seconds"] for s in splits]))}
    bound = 0.8 if fair else 0.01
    v, t = out["validation"], out["training"]
    out["checks"] = {
        "validation_worst_within_0.005": bool(v["constraint_worst"] >= bound - TOLERANCE if fair else v["constraint_worst"] <= bound + TOLERANCE),
        "validation_objective_within_10pct": bool(v["objective_mean"] <= 1.1 * t["objective_mean"]),
    }
    return out


def _plot(results: dict[str, Any], path) -> str:
    plt = pyplot()
    fig, axes = plt.subplots(1, len(results), figsize=(5.2 * len(results), 4.0), squeeze=False)
    for ax, (name, res) in zip(axes[0], results.items()):
        fair = res["fair"]
        ck, ok = ("ratio", "error") if fair else ("fpr", "fnr")
        for method, marker in (("training", "o"), ("validation", "s"), ("logistic", "^"), ("fairlearn", "D")):
            if method in res["splits"][0]:
                ax.scatter([s[method]["test"][ck] for s in res["splits"]], [s[method]["test"][ok] for s in res["splits"]], marker=marker,
                           label={"training": "dpipe, training-rows rule", "validation": "dpipe, validation rule",
                                  "logistic": "LogisticRegression, training threshold", "fairlearn": "fairlearn EG"}[method])
        bound = 0.8 if fair else 0.01
        ax.axvline(bound, color="k", lw=0.8)
        ax.axvspan(bound - TOLERANCE, bound, color="0.85") if fair else ax.axvspan(bound, bound + TOLERANCE, color="0.85")
        ax.set_xlabel("test selection-rate ratio (Female / Male)" if fair else "test false-positive rate")
        ax.set_ylabel("test error" if fair else "test false-negative rate")
        ax.set_title(f"{name}: 5 splits")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    tasks = ("a9a",) if cfg.quick else ("kdd99", "a9a", "adult")
    seeds = SEEDS[:2] if cfg.quick else SEEDS
    results: dict[str, Any] = {}
    for name in tasks:
        X, y, female = _pool(cfg, name)
        with tempfile.TemporaryDirectory(dir=cfg.work, prefix="rate-generalization-") as folder:  # a concurrent run has its own
            splits = [_split(Path(folder), name, seed, X, y, female) for seed in seeds]
        results[name] = {"fair": female is not None, "rows": int(y.size), "splits": splits, "summary": _summary(name, splits, female is not None)}
    png = _plot(results, cfg.out_dir / "rate-generalization.png")
    lines = [
        f"{len(seeds)} seeded 80 / 20 splits of each official training file; test figures on the 20 %. kdd99: `false-negative-rate` "
        f"subject to `{NP}`; a9a, adult: `error-rate` subject to `{FAIR}`. The validation rule is `validation_fraction={VALIDATION_FRACTION}` "
        "(seed = the split) on the same 80 %. Worst: the largest test FPR, the smallest test ratio.",
        "",
        *table_head(["task", "method", "test constraint mean", "test constraint worst", "test objective mean", "fit s (mean)"]),
    ]
    names = {"training": "dpipe, training-rows rule", "validation": "dpipe, validation rule", "logistic": "LogisticRegression, training threshold",
             "fairlearn": "fairlearn EG (deterministic)"}
    for name, res in results.items():
        for method, s in res["summary"].items():
            if method == "checks":
                continue
            lines.append(f"| {name} | {names[method]} | {s['constraint_mean']:.4f} | {s['constraint_worst']:.4f} | {s['objective_mean']:.4f} | "
                         f"{s['seconds_mean']:.1f} |")
    lines += ["", *table_head(["task", "validation rule: worst test value within 0.005 of the bound", "its mean test objective within 10 % of the training-rows rule's"])]
    for name, res in results.items():
        c = res["summary"]["checks"]
        lines.append(f"| {name} | {'yes' if c['validation_worst_within_0.005'] else '**no**'} | {'yes' if c['validation_objective_within_10pct'] else '**no**'} |")
    lines += ["", f"![test objective against test constraint, every split]({png.rsplit('/', 1)[-1]})"]
    return {"results": results, "plot": png}, "\n".join(lines)
