"""How sure a measured rate constraint is: confidence intervals for the rates and a verdict for each constraint.

A rate over a set of rows is a proportion of their weight. Its interval is
**Clopper-Pearson** (exact binomial, from the beta quantiles): it never covers less than
its level, also for the rates near 0 or 1 that constraints bound (an FPR of 1 % on a few
thousand negatives), where the Wald interval undercovers and Wilson's, though shorter,
can too. With sample weights the count is the **effective sample size** (Kish):
``n_eff = (sum v)^2 / sum v^2`` rows, ``k_eff = rate * n_eff`` successes (unweighted: the
row counts themselves).

A constraint is ``value = constant + sum_terms coef_t rate_t <= 0``. With one rate the
constraint's interval is that rate's, mapped through ``coef_t`` (exact). With several
(fairness ratios, differences, churn against a pool) the rates may share rows, so the
interval is the normal one of the delta method over the cells the rows fall in
(label x group x deployed prediction, :mod:`._cells`), which are disjoint: ``var(value) =
sum_cells C_c^2 p_c (1 - p_c) sum_{rows in c} v^2`` with ``C_c`` the constraint's
coefficient on the cell's predicted-positive weight and ``p_c`` the cell's positive share.

The verdict at level 95 %: **holds** when the whole interval is at or below 0,
**violated** when it is above 0, **not significant** otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ._cells import CompiledRows, StorePlan, _cells_of, _sign
from ._report import LEVEL, ConstraintReport, RateMeasure, verdict_of

__all__ = ["clopper_pearson", "effective_size", "constraint_report", "LEVEL"]


def effective_size(weight: float, square: float) -> float:
    """Kish's effective sample size ``(sum v)^2 / sum v^2`` of rows of total weight ``weight`` and squared weights ``square``."""
    return weight * weight / square if square > 0 else 0.0


def clopper_pearson(successes: float, n: float, level: float = LEVEL) -> tuple[float, float]:
    """The Clopper-Pearson interval of a proportion ``successes / n`` (both may be effective, non-integer counts)."""
    from scipy.stats import beta

    if n <= 0:
        return 0.0, 1.0
    k = min(max(float(successes), 0.0), float(n))
    alpha = 1.0 - level
    lo = 0.0 if k <= 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k >= n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def _term_rate(term: Any, plan: StorePlan, where: str, sums: np.ndarray) -> RateMeasure:
    """One term's rate (share of its rows' weight on its side), with the effective rows and its interval."""
    weight, positive, square = sums
    cells = _cells_of(term.dataset, plan, where)
    total = float(weight[cells].sum())
    hit = sum(float(positive[c]) if _sign(term, c, plan) > 0 else float(weight[c] - positive[c]) for c in cells)
    rate = hit / total if total > 0 else float("nan")
    n_eff = effective_size(total, float(square[cells].sum()))
    lo, hi = clopper_pearson(rate * n_eff, n_eff) if total > 0 else (float("nan"), float("nan"))
    return RateMeasure(f"{term.side}({term.dataset.describe()})", rate, n_eff, (lo, hi))


def constraint_report(constraints: Sequence[Any], rows: CompiledRows, plans: Mapping[str, StorePlan],
                      sums: Mapping[str, np.ndarray], level: float = LEVEL) -> list[ConstraintReport]:
    """Every constraint's value with its interval, verdict and rates (row ``j + 1`` of ``rows`` is ``constraints[j]``).

    ``sums[alias]``: per cell of that dataset, the weight, the predicted-positive weight and the squared weights (shape (3,
    n_cells); :func:`dpipe.reduce._rates.cell_predictions`).
    """
    from scipy.stats import norm

    values = rows.evaluate({a: s[1] for a, s in sums.items()})
    z = float(norm.ppf(0.5 + level / 2))
    out = []
    for j, constraint in enumerate(constraints, start=1):
        text = rows.texts[j]
        terms = constraint.expression.terms
        rates = tuple(_term_rate(t, plans[t.dataset.on], text, sums[t.dataset.on]) for t in terms)
        value = float(values[j])
        if len(rates) == 1 and not terms[0].count:  # value = coef * rate + (value - coef * rate): the rate's exact interval
            r = rates[0]
            ends = sorted(value + float(terms[0].coef) * (e - r.value) for e in r.interval)
            method = "clopper-pearson"
        else:  # the delta method over the disjoint cells
            var = 0.0
            for alias, (weight, positive, square) in sums.items():
                if alias not in rows.coef:
                    continue
                p = np.divide(positive, weight, out=np.zeros_like(positive), where=weight > 0)
                var += float((rows.coef[alias][j] ** 2 * p * (1 - p) * square).sum())
            half = z * np.sqrt(var)
            ends = [value - half, value + half]
            method = "normal (delta method)"
        interval = (float(ends[0]), float(ends[1]))
        out.append(ConstraintReport(text, value, interval, level, verdict_of(interval), method, rates))
    return out
