"""``lam="auto"``: the ridge chosen on held-out rows by a regularization path, strong to weak, each fit warm-started.

LIBLINEAR's ``-C`` (Chu et al. 2015) and scikit-learn's ``LogisticRegressionCV`` answer the same need by cross-validation,
and so does this path when the training rows are few in their smaller class:

1. the held-out rows are the validation set when the fit has one (one path, on every training row); else the training rows
   are dealt into :data:`FOLDS` folds, stratified by class and seeded (:class:`FoldSplit`: in each shard, each class's rows
   in the order of the rate family's validation-rule draw, :class:`~dpipe.engine._split.RowSplit`'s, dealt in turn: a pure
   function of the shard and its labels, no rows written). Every fold is held out once, each with a path of its own, when a
   fold holds fewer than :data:`ONE_FOLD_MINORITY` rows of the smaller class (w8a, Reuters: a held-out fifth of a few hundred
   positives cannot tell neighbouring ``lam`` apart); one fold otherwise (its thousands of rows of each class measure an AUC
   to a few 1e-4, and the cost stays one path);
2. ``lam`` runs from :data:`PATH_START` down by :data:`PATH_FACTOR` a step: each fold's first fit from the family's own start
   (the moment start where the L-BFGS route uses it; Newton from ``w = 0``), each next one from that fold's last solution,
   stopping relative to its first, cold fit's reference gradient (LIBLINEAR's rule with an initial solution: a warm start's
   own gradient is small already, and PRBEP's at ``w = 0`` too, so either would ask for far more iterations than a cold fit
   makes; under the moments preconditioner the coordinates change with ``lam``, so the reference is approximate there). The
   path ends :data:`PATH_PATIENCE` steps after the best mean held-out measure (the weak end costs the most iterations), but
   not before the fixed default ``lam`` or :data:`PATH_REACHES`, whichever is stronger, and at :data:`PATH_END` at the
   latest; then the half-step (factor ``sqrt(PATH_FACTOR)``) from the best toward its better neighbour (both half-steps when
   a neighbour is missing or level: :func:`half_steps`), each fold warm-started from its solution at the best. The path's fits
   stop :data:`PATH_LOOSER` times looser than the fit's own rule (:func:`path_params`): they only rank the ``lam``;
3. the measure is the objective's own (:func:`~dpipe.fit._early_stopping.stopping_metric`: ROC-AUC for the AUC objectives
   and rocarea, PRBEP, accuracy and F1 at the fit's threshold, Prec@k, Rec@k), averaged over the folds; with one fold the best
   wins (a tie: the stronger ``lam``); with several, of the ``lam`` within one paired standard error of the best mean, the one
   nearest the fixed default (:func:`choose`: the classic one-standard-error rule's strongest ``lam`` tested worse on the
   races' test sets, which reward the weaker ones; the fixed default is what they measured);
4. without a validation set, one more fit on all the rows at the chosen ``lam``, warm-started from the folds' mean solution
   there.

The model's fit record keeps it all in ``info["lam_path"]`` (per fold too).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine._split import DatasetPart, RowSplit
from ..exceptions import ParameterError
from ._early_stopping import METRICS, make_validator, stopping_metric
from ._outcome import FitOutcome, WarmStart

if TYPE_CHECKING:
    from ..engine._protocols import Dataset

__all__ = ["FOLDS", "FOLD_SEED", "ONE_FOLD_MINORITY", "PATH_START", "PATH_FACTOR", "PATH_END", "PATH_PATIENCE", "PATH_REACHES", "PATH_LOOSER", "FoldSplit",
           "fit_lam_path", "choose", "path_lams", "path_params", "half_steps", "folds_used", "fixed_default"]

log = logging.getLogger("dpipe.fit")

#: the folds the training rows are dealt into when the fit has no validation set
FOLDS = 3
#: the seed of their draw
FOLD_SEED = 0
#: the rows of the smaller class (its total weight) a fold must hold for one fold to measure the path; fewer: every fold does
#: (the AUC's standard error goes as one over the root of the smaller class's count: 2000 rows, a few 1e-4 apart of 0.9)
ONE_FOLD_MINORITY = 2000.0
#: the path's strongest ``lam``: where every objective's solution is (nearly) the direction of its gradient at 0, whose ranking
#: no stronger ridge changes (1e-1 measured below 1e-2 or level with it on every bundled task; the half-step above the best
#: reaches 3.16e-2)
PATH_START = 1e-2
#: the factor between two ``lam`` of the path (the half-steps around the best: its square root)
PATH_FACTOR = 10.0
#: the path's weakest ``lam``
PATH_END = 1e-8
#: steps past the best held-out measure before the path ends
PATH_PATIENCE = 1
#: ... and not before the fixed default ``lam`` or this one, whichever is stronger: the strong end can be level (PRBEP on
#: Reuters money-fx, five folds: the same from 1e-1 to 3e-3), and the path measures the fixed default wherever it is 1e-4
#: or stronger (sparse text; the dense tasks' 1e-6 is weaker: the path goes there when the measure still rises)
PATH_REACHES = 1e-4
#: the path's fits stop this many times looser than the fit's own rule (Newton's ``eps``, L-BFGS's ``tol``; the cutting plane's
#: gap is kept): they only rank the ``lam`` on the held-out rows, and the refit at the chosen ``lam`` keeps the fit's own rule.
#: Measured (``python -m bench lam-auto``, w8a, Reuters money-fx, the text store): Newton 3x keeps the held-out measures within
#: 5e-4 of the converged path's and every choice but the text store's (1e-4 for 3.16e-5, test AUC 0.9621 against 0.9622);
#: 10x and more stop warm fits at weak ``lam`` near their start (0 iterations on w8a at 30x), the held-out measure flattens
#: and the choice moves to stronger ``lam``. L-BFGS 3x (prbep-smooth on Reuters: 5049 to about 1000 passes) chooses the
#: same ``lam``.
PATH_LOOSER = {"newton": 3.0, "lbfgs": 3.0}


def path_lams() -> list[float]:
    """The path's ``lam`` values, strong to weak: ``PATH_START``, ``/ PATH_FACTOR``, ... down to ``PATH_END``."""
    count = int(round(math.log(PATH_START / PATH_END) / math.log(PATH_FACTOR))) + 1
    return [_round(PATH_START / PATH_FACTOR**i) for i in range(count)]


def path_params(p: Any, lam: float) -> Any:
    """``p`` at ``lam`` with the path's stopping rule (:data:`PATH_LOOSER` times the fit's own, on the routes that have one)."""
    factor = PATH_LOOSER.get(p.solver, 1.0)
    changes: dict[str, Any] = {"lam": lam, "C": None}
    if factor != 1.0 and p.solver == "newton" and p.eps is not None:
        changes["eps"] = p.eps * factor
    elif factor != 1.0 and p.solver == "lbfgs" and p.tol is not None:
        changes["tol"] = min(p.tol * factor, 0.5)
    return dataclasses.replace(p, **changes)


def half_steps(centre: float, scores: dict[float, float]) -> list[float]:
    """The half-steps (factor ``sqrt(PATH_FACTOR)``) the path measures beside its best tenfold step ``centre``, given the
    measures so far by ``lam``: only the one toward the better of its two neighbours when both were measured, finite and
    unequal (the curve's other side falls there: measured on every bundled task, the other half-step never won); else both."""
    half = math.sqrt(PATH_FACTOR)
    stronger, weaker = scores.get(_round(centre * PATH_FACTOR), math.nan), scores.get(_round(centre / PATH_FACTOR), math.nan)
    if math.isfinite(stronger) and math.isfinite(weaker) and stronger != weaker:
        return [_round(centre * half) if stronger > weaker else _round(centre / half)]
    return [_round(centre * half), _round(centre / half)]


def _round(lam: float) -> float:
    return float(f"{lam:.3g}")


#: the folds dealt in this process: (seed, folds, shard, digest of its labels) -> each row's fold
_DEALT: dict[tuple[int, int, int, bytes], np.ndarray] = {}
#: ... at most this many rows (bytes) of them, then forgotten
_DEALT_BYTES = 1 << 28


@dataclasses.dataclass(frozen=True)
class FoldSplit(RowSplit):
    """Fold ``fold`` of ``folds`` as the validation part, stratified by class: in each shard, each class's rows, in the order of
    their :class:`~dpipe.engine._split.RowSplit` draw (``numpy.random.default_rng([seed, shard])``), are dealt to the folds in
    turn, the first to fold ``shard mod folds``. A pure function of the seed, the shard and its labels: every engine, worker
    and rerun deals the same folds, each shard's classes split to within one row, and no rows are written."""

    folds: int = FOLDS
    fold: int = 0

    def fold_of(self, shard: Any) -> np.ndarray:
        """Each row's fold (int8 array of the shard's rows); remembered in this process (a pass at a few milliseconds a shard
        would otherwise spend most of them drawing and sorting again)."""
        y = np.ascontiguousarray(shard.y)
        key = (int(self.seed), int(self.folds), int(shard.index), hashlib.blake2b(y.tobytes(), digest_size=16).digest())
        out = _DEALT.get(key)
        if out is None:
            u = np.random.default_rng([int(self.seed), int(shard.index)]).random(shard.n_rows)
            out = np.empty(shard.n_rows, dtype=np.int8)
            positive = y > 0
            for rows in (np.flatnonzero(positive), np.flatnonzero(~positive)):
                dealt = rows[np.argsort(u[rows], kind="stable")]
                out[dealt] = (np.arange(dealt.size) + int(shard.index)) % self.folds
            if sum(v.size for v in _DEALT.values()) + out.size > _DEALT_BYTES:
                _DEALT.clear()
            _DEALT[key] = out
        return out

    def validation_rows(self, shard: Any) -> np.ndarray:
        """Boolean mask of the shard's rows in fold ``fold``."""
        mask: np.ndarray = self.fold_of(shard) == self.fold
        return mask


def folds_used(smaller_class: float) -> int:
    """How many of the :data:`FOLDS` folds measure the path when the training rows' smaller class weighs ``smaller_class``."""
    return 1 if smaller_class / FOLDS >= ONE_FOLD_MINORITY else FOLDS


def fixed_default(ds: Dataset, p: Any) -> float:
    """The ``lam`` a number-less fit of ``p``'s objective would use on ``ds`` (auc's is decided by the store's size)."""
    from ..engine import class_totals
    from ._params import PARAMS, auc_lam
    from ._registry import OBJECTIVES

    value = PARAMS["lam"].default_for(OBJECTIVES[p.objective])
    if value is not None:
        return float(value)
    totals = class_totals(ds)
    return auc_lam(totals.positive + totals.negative, int(ds.n_features))


FitFunction = Callable[..., FitOutcome]
Measure = Callable[[np.ndarray, float], dict[str, float]]


@dataclasses.dataclass
class _Fold:
    """One held-out part's path: where its fits run, how they are measured, its warm start and its solution at the best."""

    fit_on: Any
    measure: Measure
    warm: WarmStart | None = None
    reference: float | None = None
    best: FitOutcome | None = None
    last: FitOutcome | None = None
    #: its solution at each ``lam`` of the path (the refit starts from the folds' mean at the chosen one)
    solutions: dict[float, np.ndarray] = dataclasses.field(default_factory=dict)


def _folds(ds: Dataset, p: Any) -> tuple[list[_Fold], str]:
    """The held-out parts of the training rows (:class:`FoldSplit`), each with its fitting part, and how the record names them."""
    from ..engine import class_totals

    totals = class_totals(ds)
    used = folds_used(min(totals.positive, totals.negative))
    held_out = (f"{FOLDS} folds of the training rows, stratified (seed {FOLD_SEED}), each held out once" if used > 1 else
                f"1 of {FOLDS} folds of the training rows, stratified (seed {FOLD_SEED}): its smaller class holds {ONE_FOLD_MINORITY:.0f} "
                "rows or more")
    folds = []
    for j in range(used):
        split = FoldSplit(1.0 / FOLDS, FOLD_SEED, folds=FOLDS, fold=j)
        held = DatasetPart(ds, split, "validation")
        t = class_totals(held)
        if t.positive <= 0 or t.negative <= 0:
            missing = "positive" if t.positive <= 0 else "negative"
            raise ParameterError(f"The 'lam' parameter of {p.owner} is 'auto', and fold {j + 1} of the {FOLDS} stratified folds of the training "
                                 f"rows (seed {FOLD_SEED}) holds no {missing} row to measure a lam by; give a validation set (validation=, "
                                 "eval_set) or a number for lam.")
        folds.append(_Fold(DatasetPart(ds, split, "fit"), make_validator(held, p)))
    return folds, held_out


def choose(path: list[dict[str, Any]], best: dict[str, Any], default: float) -> tuple[dict[str, Any], str]:
    """The entry of ``path`` the fit takes, and why: with one fold (or a fixed default of 0) the ``best``; with several, of the
    entries whose mean is within one paired standard error of the best's (the standard error of their per-fold differences
    from it: the folds' own levels cancel), the one nearest the fixed ``default`` (on a log scale; the better of two as near).

    The fixed default is the prior the races measured; the held-out folds move away from it only as far as they can tell
    ``lam`` apart. Measured (test AUC, ``python -m bench lam-auto``): w8a 0.97827 (the best mean, 1e-4) to 0.97937 (1e-5,
    within one paired standard error of it; the fixed default 1e-6: 0.97976); Reuters money-fx 0.98787 (1e-3) to 0.98828
    (3.16e-4); the text store and prbep-smooth on Reuters unchanged (their neighbours fall by more than one standard error)."""
    if best["score_se"] is None or default <= 0:
        return best, f"the best {'mean ' if best['score_se'] is not None else ''}held-out"
    near = []
    for e in path:
        if not math.isfinite(e["score"]):
            continue
        diffs = np.subtract(e["fold_scores"], best["fold_scores"])
        if e["score"] >= best["score"] - float(np.std(diffs, ddof=1) / math.sqrt(diffs.size)):
            near.append(e)
    chosen = min(near, key=lambda e: (round(abs(math.log(e["lam"] / default)), 9), -e["score"]))
    if chosen is best:
        return best, "the best mean held-out"
    return chosen, (f"the lam nearest the fixed default ({default:.3g}) within one paired standard error of the best mean held-out "
                    f"({best['score']:.6f} at lam {best['lam']:.3g}); its mean held-out")


def _chosen_fit(ds: Dataset, p: Any, fit: FitFunction, folds: list[_Fold], lam: float, refit: bool, warm_starts: bool) -> FitOutcome:
    """The model at the chosen ``lam``: with ``refit`` one more fit on all the rows, from the folds' mean solution there;
    else (the path measured on a validation set, fitted on every training row) the path's own fit (the best: one fold)."""
    if not refit:
        assert folds[0].best is not None
        return folds[0].best
    start = np.mean([f.solutions[lam] for f in folds], axis=0)
    kw = {"warm": WarmStart(start, folds[0].reference)} if warm_starts else {}
    return fit(ds, dataclasses.replace(p, lam=lam, C=None), None, **kw)


def fit_lam_path(ds: Dataset, p: Any, fit: FitFunction, validate: Measure | None = None, warm_starts: bool = True) -> FitOutcome:
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
    t0 = time.perf_counter()
    metric = stopping_metric(p.objective)
    key, label = METRICS[metric]
    if validate is None:
        folds, held_out = _folds(ds, p)
    else:
        folds, held_out = [_Fold(ds, validate)], "the validation set"
    path: list[dict[str, Any]] = []
    best: dict[str, Any] | None = None

    def step(lam: float, refine: bool) -> dict[str, Any]:
        """Every fold's fit at ``lam`` (from its warm start), measured; the path's entry."""
        nonlocal best
        q = path_params(p, lam)
        t = time.perf_counter()
        scores, iterations, evaluations, solutions = [], 0, 0, []
        for f in folds:
            kw = {"warm": f.warm} if warm_starts and f.warm is not None else {}
            outcome = fit(f.fit_on, q, None, **kw)
            scores.append(float(f.measure(outcome.coef, outcome.intercept)[key]))
            iterations += int(outcome.result.nit)
            evaluations += int(outcome.result.nfev)
            if f.reference is None:  # the first fit started cold: its reference (Newton: ||g(0)||; L-BFGS: the largest gradient of its run)
                f.reference = outcome.result.info.get("grad_norm_max", outcome.result.info.get("grad_norm0"))
            f.last = outcome
            f.solutions[lam] = outcome.coef
            solutions.append(outcome)
        finite = [s for s in scores if math.isfinite(s)]
        score = float(np.mean(finite)) if len(finite) == len(scores) else math.nan
        entry = {"lam": lam, "score": score, "fold_scores": scores,
                 "score_se": float(np.std(scores, ddof=1) / math.sqrt(len(scores))) if len(scores) > 1 and math.isfinite(score) else None,
                 "iterations": iterations, "evaluations": evaluations, "seconds": time.perf_counter() - t, "refined": refine}
        path.append(entry)
        log.info("%s: lam=auto: lam %.3g: held-out %s %.6f%s (%d iterations%s)", p.objective, lam, label, score,
                 f" (folds {', '.join(f'{s:.6f}' for s in scores)})" if len(scores) > 1 else "", iterations, ", refined" if refine else "")
        if math.isfinite(score) and (best is None or score > best["score"] or (score == best["score"] and lam > best["lam"])):
            best = entry
            for f, outcome in zip(folds, solutions):
                f.best = outcome
        return entry

    lams, default = path_lams(), fixed_default(ds, p)
    for i, lam in enumerate(lams):
        step(lam, refine=False)
        for f in folds:
            assert f.last is not None
            f.warm = WarmStart(f.last.coef, f.reference)
        if best is not None and i - lams.index(best["lam"]) >= PATH_PATIENCE and lam <= max(default, PATH_REACHES) * (1 + 1e-9):
            break
    if best is None:  # every measure NaN (a held-out part without both classes): the strongest, said
        best = path[0]
        for f in folds:
            f.best = f.last if f.best is None else f.best
        log.warning("%s: lam=auto: no finite held-out %s on %s; keeping the strongest lam", p.objective, label, held_out)
    else:  # the half-steps beside the best (toward its better neighbour), each fold from its solution there
        centre, starts = best["lam"], [f.best for f in folds]
        for lam in half_steps(centre, {e["lam"]: e["score"] for e in path}):
            if lam >= PATH_END:
                for f, start in zip(folds, starts):
                    assert start is not None
                    f.warm = WarmStart(start.coef, f.reference)
                step(lam, refine=True)
    assert best is not None
    chosen, rule = choose(path, best, default)
    lam, score = chosen["lam"], chosen["score"]
    path.sort(key=lambda e: -e["lam"])
    why = (f"{rule} {label} ({score:.6f}) of {len(path)} lam values from {path[0]['lam']:.3g} "
           f"to {path[-1]['lam']:.3g} on {held_out}")
    log.info("%s: lam=auto chose lam=%.3g: %s", p.objective, lam, why)
    outcome = _chosen_fit(ds, p, fit, folds, lam, refit=validate is None, warm_starts=warm_starts)
    outcome.result.info["lam_path"] = {
        "metric": metric, "held_out": held_out, "folds": len(folds), "lams": [e["lam"] for e in path],
        "scores": [e["score"] for e in path], "fold_scores": [e["fold_scores"] for e in path], "score_se": [e["score_se"] for e in path],
        "refined": [e["refined"] for e in path], "iterations": [e["iterations"] for e in path], "seconds": [e["seconds"] for e in path],
        "fixed_default": default, "best": best["lam"], "chosen": lam, "chosen_score": score, "why": why, "refit": validate is None, "seconds_total": time.perf_counter() - t0,
    }
    return outcome

