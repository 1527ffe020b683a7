"""The cutting-plane master problem: a small QP over the simplex of plane weights.

With planes ``R(w) >= a_t . w + b_t`` (t = 1..T), the regularized model
``min_w lam/2 ||w||^2 + max_t (a_t . w + b_t)`` has the dual

    max over alpha in the simplex of  b . alpha - (1 / (2 lam)) alpha' G alpha,   G = A A',

whose value is the cutting-plane lower bound and whose solution gives
``w = -(1/lam) A' alpha``. T is small (one plane per solver iteration), so the dual is
solved on the driver, to about 1e-12 relative duality gap, by a primal-dual interior
point method (Mehrotra's predictor-corrector). G has rank at most d and repeated or
dependent planes make it singular; an interior point method does not care (its Newton
matrix ``G + X^-1 Z`` stays positive definite on the interior, and a tiny primal
regularization covers the last iterations), where an active-set method has to follow
zero-curvature directions and can cycle on such degenerate faces.

Any ``alpha`` in the simplex gives a valid lower bound ``b . alpha - alpha' G alpha /
(2 lam)``, so the bound the cutting-plane solver reports never depends on how exactly
this QP was solved; only its tightness does.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

__all__ = ["solve_simplex_qp"]


def _factor(M: np.ndarray) -> tuple[np.ndarray, bool]:
    """Cholesky factor of ``M`` (positive definite up to rounding), regularizing as needed."""
    delta = 0.0
    scale = max(float(np.abs(np.diag(M)).max()), 1.0)
    for _ in range(12):
        try:
            return scipy.linalg.cho_factor(M + delta * np.eye(M.shape[0]) if delta else M, check_finite=False)
        except np.linalg.LinAlgError:
            delta = scale * 1e-14 if delta == 0.0 else delta * 100.0
    raise np.linalg.LinAlgError("the master QP's Newton matrix is not positive definite")


def _max_step(v: np.ndarray, dv: np.ndarray) -> float:
    """The largest step in [0, 1] keeping ``v + step * dv >= 0``."""
    neg = dv < 0
    if not neg.any():
        return 1.0
    return float(min(1.0, np.min(-v[neg] / dv[neg])))


def solve_simplex_qp(H: np.ndarray, c: np.ndarray, *, tol: float = 1e-12, max_iter: int = 200) -> np.ndarray:
    """Minimize ``1/2 x' H x - c' x`` over the simplex ``{x >= 0, sum x = 1}``.

    Parameters
    ----------
    H : ndarray of shape (T, T)
        Symmetric positive semi-definite (possibly singular).
    c : ndarray of shape (T,)
        Linear term.
    tol : float
        Relative tolerance: the duality gap against ``x'Hx/2 + |c'x|``, and the
        residuals on the problem scaled to ``max(|H|, |c|) = 1``.
    max_iter : int
        Bound on interior-point iterations (typically 15 to 60 are used); the best iterate
        so far is returned if the tolerance is not met.

    Returns
    -------
    ndarray of shape (T,)
        A point of the simplex (exactly: clipped at 0 and renormalized) within ``tol``
        of the minimum.
    """
    H = np.asarray(H, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    T = c.size
    if T == 1:
        return np.ones(1)
    H = 0.5 * (H + H.T)
    c = c - c.max()  # a constant on the simplex: only the multiplier of sum x = 1 changes
    scale = max(float(np.abs(H).max()), float(np.abs(c).max()), np.finfo(float).tiny)
    H, c = H / scale, c / scale
    x = np.full(T, 1.0 / T)
    g = H @ x - c
    y = float(g.min()) - 1.0
    z = g - y  # >= 1: dual feasible start
    ones = np.ones(T)
    best_x, best_gap = x, np.inf
    for _ in range(int(max_iter)):
        Hx = H @ x
        rd = Hx - c - y - z
        rp = float(x.sum()) - 1.0
        gap = float(x @ z)
        # relative to the size of the terms at x (the optimum can be tiny next to max |H|)
        size = max(0.5 * float(x @ Hx) + abs(float(c @ x)), 1e-280)
        if gap < best_gap and abs(rp) <= tol:
            best_x, best_gap = x, gap
        if gap <= tol * size and float(np.abs(rd).max()) <= tol and abs(rp) <= tol:
            break
        factor = _factor(H + np.diag(z / x))
        v = scipy.linalg.cho_solve(factor, ones, check_finite=False)

        def newton(rc: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
            """Direction for complementarity target ``Z dx + X dz = rc``."""
            u = scipy.linalg.cho_solve(factor, -rd + rc / x, check_finite=False)
            dy = (-rp - float(u.sum())) / float(v.sum())
            dx = u + dy * v
            dz = (rc - z * dx) / x
            return dx, dy, dz

        # predictor (affine scaling), then Mehrotra's centring-corrector
        dx, dy, dz = newton(-x * z)
        ap, ad = _max_step(x, dx), _max_step(z, dz)
        mu = gap / T
        mu_aff = float((x + ap * dx) @ (z + ad * dz)) / T
        sigma = (mu_aff / mu) ** 3 if mu > 0 else 0.0
        dx, dy, dz = newton(-x * z - dx * dz + sigma * mu)
        ap, ad = _max_step(x, dx), _max_step(z, dz)
        ap, ad = min(1.0, 0.995 * ap), min(1.0, 0.995 * ad)
        x = x + ap * dx
        y = y + ad * dy
        z = z + ad * dz
        x = np.maximum(x, np.finfo(float).tiny)
        z = np.maximum(z, np.finfo(float).tiny)
    else:
        x = best_x
    x = np.maximum(x, 0.0)
    return x / x.sum()
