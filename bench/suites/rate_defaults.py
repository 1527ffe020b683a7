"""rate-defaults: the rate family's options whose best value could differ by dataset, measured on the rate commands of docs/constraints.md.

Each of the rate commands of docs/constraints.md (:data:`bench.suites.rate_speed.COMMANDS`: kdd99
Neyman-Pearson, adult's 80 % rule, a9a churn + recall, adult auc-rate with three
constraints, a9a coverage) is trained with ``standardize`` off (the default) and on, in
this process, and evaluated on the official test file (churn on the unlabelled pool it
was trained against): the test objective (the objective's rate; 1 - ROC-AUC for
auc-rate), every constraint's test value (left minus right side: it holds at <= 0), and
the fit's seconds, and which value had the lower test objective on how many commands (issue
28 chose the defaults from this table: see docs/constraints.md).
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from .._harness import Config, table_head
from ..datasets import ingest_pair
from .rate_speed import COMMANDS, _stores

#: the option values compared
VARIANTS = {"standardize off": {"standardize": False}, "standardize on": {"standardize": True}}
#: the objective's test figure: lower is better
OBJECTIVE_ON_TEST = {"false-negative-rate": lambda m: 1.0 - m["recall"], "error-rate": lambda m: 1.0 - m["accuracy"],
                     "auc-rate": lambda m: 1.0 - m["roc_auc"]}


def _one(name: str, stores: dict[str, str], tests: dict[str, str], options: dict[str, Any]) -> dict[str, Any]:
    import dpipe

    _, train, objective, constraints, extra = COMMANDS[name]
    constraints = [c.replace("DEPLOYED", stores["deployed"]) for c in constraints]
    datasets = {alias: stores[key] for alias, key in extra.items()} or None
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpipe.ConvergenceWarning)
        model = dpipe.train(stores[train], objective, engine="local", train_metrics=False, constraints=constraints, datasets=datasets, **options)
    seconds = time.perf_counter() - t0
    got = dpipe.evaluate(model, tests[train], engine="local", constraints=constraints, datasets=datasets)
    return {"seconds": seconds, "train_objective": float(model.fit["fun"]), "test_objective": float(OBJECTIVE_ON_TEST[objective](got)),
            "test_constraints": [float(c["value"]) for c in got["constraints"]],
            "train_constraints": [float(c["value"]) for c in model.fit["info"]["constraints"]]}


def run(cfg: Config) -> tuple[dict[str, Any], str]:
    stores = _stores(cfg)
    tests = {k: ingest_pair(k, cfg.data_dir, cfg.work)[1] for k in ("kdd99", "adult", "a9a")}
    names = ("adult-80-rule", "a9a-coverage") if cfg.quick else tuple(COMMANDS)
    results: dict[str, Any] = {}
    for name in names:
        results[name] = {v: _one(name, stores, tests, opts) for v, opts in VARIANTS.items()}
        line = "; ".join(f"{v}: test objective {r['test_objective']:.5f}, test constraints {[round(c, 4) for c in r['test_constraints']]}, "
                         f"{r['seconds']:.1f} s" for v, r in results[name].items())
        print(f"  {name}: {line}", flush=True)
    wins = {v: 0 for v in VARIANTS}
    for res in results.values():
        best = min(VARIANTS, key=lambda v: res[v]["test_objective"])
        wins[best] += 1
    lines = ["The rate commands of docs/constraints.md, each trained with the rate family's `standardize` off and on (other options at their "
             "defaults), in this process; test figures on the official test file (churn: on the pool it was trained against). "
             "Constraint values are left minus right side (holds at <= 0).", "",
             *table_head(["command", "variant", "test objective", "test constraints", "training constraints", "training objective", "fit s"])]
    for name, res in results.items():
        for v, r in res.items():
            lines.append(f"| {COMMANDS[name][0]} | {v} | {r['test_objective']:.5f} | {', '.join(f'{c:+.4f}' for c in r['test_constraints'])} | "
                         f"{', '.join(f'{c:+.4f}' for c in r['train_constraints'])} | {r['train_objective']:.6g} | {r['seconds']:.1f} |")
    lines += ["", "Lower test objective: " + ", ".join(f"{v} on {n} of {len(results)} commands" for v, n in wins.items()) + "."]
    return {"results": results, "wins": wins}, "\n".join(lines)
