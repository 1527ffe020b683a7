"""The Lagrange multipliers of a rate fit's majorization step (Goh et al., Algorithm 2; the maximization-based CutChooser
of their appendix E), kept in a trust region.

The dual ``F(v) = min_theta L(theta, v)`` over ``v`` in ``[0, V]^m`` is concave. A *cut* at ``v_s`` is
``u_s + g_s.(v - v_s)``: ``u_s`` the smoothed Lagrangian at the inner solution ``theta_s``,
``g_s`` the smoothed bounded constraint values there. It is an upper bound on ``F``
whatever the inner solution's accuracy (``L(theta_s, v) >= F(v)`` and ``L`` is linear in
``v``); ``u_s`` itself estimates ``F(v_s)`` from above, by the inner problem's remaining
gap. The next ``v`` maximizes the cuts' minimum (a small linear program,
:func:`scipy.optimize.linprog`) within a trust region around the best multipliers so far
(:class:`TrustRegion`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["Cut", "next_multipliers", "TrustRegion", "choose_cut", "TRUST_RADIUS"]

#: the first trust region's radius around the best multipliers (:class:`TrustRegion`)
TRUST_RADIUS = 0.1


@dataclasses.dataclass
class Cut:
    """One inner solution of a majorization step.

    Attributes
    ----------
    v : ndarray of shape (m,)
        The multipliers it was solved at.
    value : float
        The smoothed Lagrangian there (``u_s``; the dual's estimate at ``v``).
    slope : ndarray of shape (m,)
        ``g_s``: the smoothed bounded constraint values there.
    violation : float
        The largest exact-hinge bounded constraint value there (-inf without constraints).
    theta : ndarray of shape (d + 1,)
        The inner solution ``(u, b)``.
    objective : float
        The bounded objective row there (plus the exact ranking risk for auc-rate).
    """

    v: np.ndarray
    value: float
    slope: np.ndarray
    violation: float
    theta: np.ndarray
    objective: float


def next_multipliers(cuts: list[Cut], low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, float]:
    """``argmax_v min_s (u_s + g_s.(v - v_s))`` over the box ``[low, high]``, and that maximum."""
    from scipy.optimize import linprog

    m = cuts[0].v.size
    # variables (v, z): maximize z s.t. z - g_s.v <= u_s - g_s.v_s
    A = np.array([np.concatenate([-c.slope, [1.0]]) for c in cuts])
    b = np.array([c.value - c.slope @ c.v for c in cuts])
    res = linprog(np.concatenate([np.zeros(m), [-1.0]]), A_ub=A, b_ub=b, bounds=[*zip(low, high), (None, None)], method="highs")
    if res.status != 0:  # pragma: no cover - the box keeps it bounded and feasible
        raise RuntimeError(f"multiplier LP failed: {res.message}")
    return np.asarray(res.x[:m]), float(-res.fun)


class TrustRegion:
    """Where the next multipliers may go: a box of radius ``radius`` around the best dual point so far, in ``[0, V]^m``.

    Plain Kelley cutting planes jump to a corner of ``[0, V]^m`` whenever one cut's slope
    points there (at the first cut of every step, and whenever the current multipliers
    violate or over-satisfy a constraint). An inner problem at ``v = V`` is far from every
    other and costs about twice the evaluations of a nearby one (a9a: 230 against 100), and
    its cut says little. The box (a trust-region bundle method) keeps each step near the
    best point; it doubles whenever the step reaches its edge, so ``[0, V]^m`` is still
    searched, and the stopping test uses the cuts' maximum over the whole of ``[0, V]^m``,
    an upper bound on the dual whatever the box.
    """

    def __init__(self, start: np.ndarray, bound: float, radius: float = TRUST_RADIUS) -> None:
        self.bound, self.radius = bound, np.maximum(radius, 0.5 * start)

    def step(self, cuts: list[Cut]) -> tuple[np.ndarray, float]:
        """The next multipliers, and the cuts' maximum over ``[0, V]^m``."""
        zero, top = np.zeros_like(self.radius), np.full_like(self.radius, self.bound)
        _, upper = next_multipliers(cuts, zero, top)
        center = max(cuts, key=lambda c: c.value).v
        low, high = np.maximum(center - self.radius, 0.0), np.minimum(center + self.radius, self.bound)
        v, _ = next_multipliers(cuts, low, high)
        edge = ((v <= low + 1e-12) & (low > 0.0)) | ((v >= high - 1e-12) & (high < self.bound))
        self.radius = np.where(edge, 2.0 * self.radius, self.radius)
        return v, upper


def choose_cut(cuts: list[Cut], feasibility_tol: float) -> Cut:
    """The step's solution: the last inner solution (at the multipliers the cutting plane converged to) when its
    bounded constraints hold; else, as Algorithm 2 returns, the feasible one with the highest dual value; else the
    least violating. Not "the best objective among all visited": that depends on the path the cuts took, and two
    runs whose sums differ in the last bit (a weighted store and its repeated rows) would part ways."""
    if cuts[-1].violation <= feasibility_tol:
        return cuts[-1]
    feasible = [c for c in cuts if c.violation <= feasibility_tol]
    if feasible:
        return max(feasible, key=lambda c: c.value)
    return min(cuts, key=lambda c: c.violation)
