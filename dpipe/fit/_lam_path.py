"""``lam="auto"``: the ridge chosen on held-out rows by a regularization path, strong to weak, each fit warm-started.

LIBLINEAR's ``-C`` (Chu et al. 2015) and scikit-learn's ``LogisticRegressionCV`` answer the same need by cross-validation; a
path on one held-out part costs one fit per ``lam`` and no more, and the warm starts make the strong end nearly free:

1. the held-out rows are the validation set when the fit has one, else a seeded share (:data:`HELD_OUT_FRACTION`, seed
   :data:`HELD_OUT_SEED`) of the training rows, drawn as the rate family's validation rule draws them
   (:class:`~dpipe.engine._split.RowSplit`: a pure function of the shard and the row, no rows written);
2. ``lam`` runs from :data:`PATH_START` down by :data:`PATH_FACTOR` a step: the first fit from the family's own start (the
   moment start where the L-BFGS route uses it; Newton from ``w = 0``), each next one from the last solution, stopping
   relative to the first, cold fit's reference gradient (LIBLINEAR's rule with an initial solution: a warm start's own
   gradient is small already, and PRBEP's at ``w = 0`` too, so either would ask for far more iterations than a cold fit
   makes; under the moments preconditioner the coordinates change with ``lam``, so the reference is approximate there). The path ends :data:`PATH_PATIENCE`
   steps after the best held-out measure (the weak end costs the most iterations), at :data:`PATH_END` at the latest;
3. the measure is the objective's own (:func:`~dpipe.fit._early_stopping.stopping_metric`: ROC-AUC for the AUC objectives
   and rocarea, PRBEP, accuracy and F1 at the fit's threshold, Prec@k, Rec@k); the best wins, a tie goes to the stronger
   ``lam``;
4. without a validation set, one more fit on all the rows at the chosen ``lam``, warm-started from its path solution.

The model's fit record keeps it all in ``info["lam_path"]``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..exceptions import ParameterError
from ._early_stopping import METRICS, make_validator, stopping_metric
from ._outcome import FitOutcome, WarmStart

if TYPE_CHECKING:
    from ..engine._protocols import Dataset

__all__ = ["HELD_OUT_FRACTION", "HELD_OUT_SEED", "PATH_START", "PATH_FACTOR", "PATH_END", "PATH_PATIENCE", "fit_lam_path", "path_lams"]

log = logging.getLogger("dpipe.fit")

#: the share of the training rows held out to choose ``lam`` when the fit has no validation set
HELD_OUT_FRACTION = 0.2
#: the seed of that draw
HELD_OUT_SEED = 0
#: the path's strongest ``lam``: where every objective's solution is (nearly) the direction of its gradient at 0, whose ranking
#: no stronger ridge changes
PATH_START = 1e-1
#: the factor between two ``lam`` of the path
PATH_FACTOR = 10.0
#: the path's weakest ``lam``
PATH_END = 1e-8
#: steps past the best held-out measure before the path ends
PATH_PATIENCE = 2


def path_lams() -> list[float]:
    """The path's ``lam`` values, strong to weak: ``PATH_START``, ``/ PATH_FACTOR``, ... down to ``PATH_END``."""
    count = int(round(math.log(PATH_START / PATH_END) / math.log(PATH_FACTOR))) + 1
    return [float(f"{PATH_START / PATH_FACTOR**i:.3g}") for i in range(count)]


FitFunction = Callable[..., FitOutcome]


def fit_lam_path(ds: Dataset, p: Any, fit: FitFunction, validate: Callable[[np.ndarray, float], dict[str, float]] | None = None,
                 warm_starts: bool = True) -> FitOutcome:
    """Fit ``p`` (``lam="auto"``) on the opened dataset ``ds``: the path on the held-out rows, then the chosen ``lam``.

    Parameters
    ----------
    ds : Dataset
        The training rows.
    p : record
        The resolved parameters (``lam == "auto"``).
    fit : callable
        The family's fit, ``(ds, params, validate, warm=WarmStart | None) -> FitOutcome`` (``warm`` only with ``warm_starts``).
    validate : callable, optional
        The validation set's validator (:func:`make_validator`): the held-out rows are then that set's, and the path's fits
        use every training row (no refit).
    warm_starts : bool
        Whether ``fit`` takes ``warm`` (the cutting plane starts from its own planes).
    """
    from ..engine import class_totals
    from ..engine._split import DatasetPart, RowSplit

    t0 = time.perf_counter()
    metric = stopping_metric(p.objective)
    key, label = METRICS[metric]
    if validate is None:
        split = RowSplit(HELD_OUT_FRACTION, HELD_OUT_SEED)
        fit_on: Any = DatasetPart(ds, split, "fit")
        held = DatasetPart(ds, split, "validation")
        held_out = f"{HELD_OUT_FRACTION:.0%} of the training rows (seed {HELD_OUT_SEED})"
        totals = class_totals(held)
        if totals.positive <= 0 or totals.negative <= 0:
            missing = "positive" if totals.positive <= 0 else "negative"
            raise ParameterError(f"The 'lam' parameter of {p.owner} is 'auto', and the held-out {held_out} hold no {missing} row to "
                                 f"measure a lam by; give a validation set (validation=, eval_set) or a number for lam.")
        measure = make_validator(held, p)
    else:
        fit_on, measure, held_out = ds, validate, "the validation set"
    path: list[dict[str, Any]] = []
    best: tuple[float, int, FitOutcome] | None = None
    warm: WarmStart | None = None
    reference: float | None = None
    first: FitOutcome | None = None
    for lam in path_lams():
        q = dataclasses.replace(p, lam=lam, C=None)
        kw = {"warm": warm} if warm_starts and warm is not None else {}
        t = time.perf_counter()
        outcome = fit(fit_on, q, None, **kw)
        score = float(measure(outcome.coef, outcome.intercept)[key])
        r = outcome.result
        first = first or outcome
        path.append({"lam": lam, "score": score, "iterations": int(r.nit), "evaluations": int(r.nfev), "seconds": time.perf_counter() - t,
                     "warm": warm is not None})
        log.info("%s: lam=auto: lam %.3g: held-out %s %.6f (%d iterations%s)", p.objective, lam, label, score, r.nit, ", warm" if warm is not None else "")
        if reference is None:  # the first fit started cold: its reference (Newton: ||g(0)||; L-BFGS: the largest gradient of its run) is every fit's
            reference = r.info.get("grad_norm_max", r.info.get("grad_norm0"))
        if math.isfinite(score) and (best is None or score > best[0]):
            best = (score, len(path) - 1, outcome)
        warm = WarmStart(outcome.coef, reference)
        if best is not None and len(path) - 1 - best[1] >= PATH_PATIENCE:
            break
    if best is None:  # every measure NaN (a held-out part without both classes): the strongest, said
        assert first is not None  # the path has at least one lam
        best = (math.nan, 0, first)
        log.warning("%s: lam=auto: no finite held-out %s on %s; keeping the strongest lam", p.objective, label, held_out)
    score, index, chosen = best
    lam = path[index]["lam"]
    why = (f"the best held-out {label} ({score:.6f}) of {len(path)} lam values from {path[0]['lam']:.3g} to {path[-1]['lam']:.3g} "
           f"on {held_out}")
    log.info("%s: lam=auto chose lam=%.3g: %s", p.objective, lam, why)
    final = dataclasses.replace(p, lam=lam, C=None)
    if validate is None:  # one more fit on all the rows, from the chosen path solution
        kw = {"warm": WarmStart(chosen.coef, reference)} if warm_starts else {}
        chosen = fit(ds, final, None, **kw)
    chosen.result.info["lam_path"] = {
        "metric": metric, "held_out": held_out, "lams": [e["lam"] for e in path], "scores": [e["score"] for e in path],
        "iterations": [e["iterations"] for e in path], "seconds": [e["seconds"] for e in path], "chosen": lam, "chosen_score": score,
        "why": why, "refit": validate is None, "seconds_total": time.perf_counter() - t0,
    }
    return chosen
