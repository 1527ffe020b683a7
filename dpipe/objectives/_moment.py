"""Moment objectives of Ghanbari, Li and Scheinberg: expected ranking loss and 0-1 error.

Both assume that the score ``w.x`` of each class is normal with the moments that
the class means and covariances give; both are scale invariant and are optimized in
standardized coordinates ``z = (x - m) / s`` (pooled mean ``m`` and standard
deviation ``s``, from the same moments, so no extra data pass), which makes the
unit-norm penalty meaningful when raw features differ in scale by orders of
magnitude. Features with zero variance get weight 0.

Ranking loss (paper eq. 3.8 with its sign slip corrected, DESIGN.md)::

    F_nrank(w) = 1 - Phi( w.(mu+ - mu-) / sqrt(w.(S+ + S-) w) )

Expected error with a bias ``b`` (paper eq. 3.3)::

    F_n01(w, b) = pi+ (1 - Phi((w.mu+ + b) / sigma+)) + pi- Phi((w.mu- + b) / sigma-),
    sigma+- = sqrt(w.S+- w)

L-BFGS works on the logarithm of the loss (``-log Phi``, ``log F_n01``) so the
gradient does not vanish where ``Phi`` saturates; the minimizers are the same. The
penalty ``lam (1 - ||v||^2)^2`` (``v = w`` or ``(w, b)``) fixes the scale.
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr, ndtr

from ..exceptions import DPipeError
from ..reduce import ClassMoments, unit_scales

__all__ = ["StandardizedMoments", "AUCMomentObjective", "ErrorMomentObjective", "closed_form_auc_direction"]

_LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)

#: added to the diagonal of each standardized class covariance in F_n01 (features have unit pooled variance)
COVARIANCE_JITTER = 1e-12


def _log_pdf(z: np.ndarray | float) -> np.ndarray | float:
    return -0.5 * np.square(z) - _LOG_SQRT_2PI


class StandardizedMoments:
    """Class moments in standardized coordinates.

    Parameters
    ----------
    moments : ClassMoments
        Moments of the training data (both classes must be present).

    Attributes
    ----------
    shift, scale : ndarray of shape (d,)
        Pooled mean and standard deviation (1 for constant features).
    active : ndarray of shape (d,), bool
        Features with non-zero variance.
    mu : ndarray of shape (2, d)
        Standardized class means (row 0 negative, row 1 positive).
    cov : ndarray of shape (2, d, d)
        Standardized class covariances.
    prior : ndarray of shape (2,)
        Class weights pi-, pi+.
    """

    def __init__(self, moments: ClassMoments) -> None:
        if (moments.weight <= 0).any():
            missing = "positive" if moments.weight[1] <= 0 else "negative"
            raise DPipeError(f"the training data has no {missing} rows (class counts: {moments.count[0]} negative, {moments.count[1]} positive); moment objectives need both classes")
        W, m, M2 = moments.pooled()
        self.scale, self.active = unit_scales(m, np.diag(M2) / W)
        self.shift = m
        mask = self.active.astype(float)
        self.mu = (moments.mean - m) / self.scale * mask
        outer = np.outer(self.scale, self.scale)
        self.cov = np.stack([moments.covariance(c) / outer * np.outer(mask, mask) for c in (0, 1)])
        self.prior = moments.weight / moments.weight.sum()

    @property
    def n_features(self) -> int:
        """Dimension d."""
        return int(self.mu.shape[1])

    def to_raw(self, w_z: np.ndarray, b_z: float = 0.0) -> tuple[np.ndarray, float]:
        """Map a standardized model ``(w_z, b_z)`` to raw features: ``w = w_z / s``, ``b = b_z - w.m``."""
        w = np.where(self.active, w_z / self.scale, 0.0)
        return w, float(b_z - w @ self.shift)

    def to_standardized(self, w: np.ndarray, b: float = 0.0) -> tuple[np.ndarray, float]:
        """Inverse of :meth:`to_raw`."""
        return np.where(self.active, w * self.scale, 0.0), float(b + w @ self.shift)


def closed_form_auc_direction(std: StandardizedMoments, ridge: float = 1e-6) -> np.ndarray:
    """Minimizer direction of F_nrank in standardized coordinates, unit norm.

    ``w = (S+ + S- + ridge I)^{-1} (mu+ - mu-)``: one d x d solve.
    """
    import scipy.linalg

    a = std.mu[1] - std.mu[0]
    S = std.cov[0] + std.cov[1] + ridge * np.eye(std.n_features)
    try:
        w = scipy.linalg.solve(S, a, assume_a="pos")
    except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
        w = np.linalg.lstsq(S, a, rcond=None)[0]
    w = np.where(std.active, w, 0.0)
    norm = np.linalg.norm(w)
    if norm == 0:
        raise DPipeError("the class means coincide in every feature: no direction separates the classes")
    return w / norm


class AUCMomentObjective:
    """``-log Phi(z(w)) + lam (1 - ||w||^2)^2``, ``z = w.(mu+ - mu-) / sqrt(w.(S+ + S-) w)``.

    Parameters
    ----------
    std : StandardizedMoments
        Moments in standardized coordinates; ``w`` has shape (d,) and no intercept
        (the ranking loss does not depend on one).
    lam : float
        Weight of the unit-norm penalty.
    """

    def __init__(self, std: StandardizedMoments, lam: float = 1e-3) -> None:
        self.std = std
        self.lam = float(lam)
        self.a = std.mu[1] - std.mu[0]
        self.S = std.cov[0] + std.cov[1]

    def _z(self, w: np.ndarray) -> tuple[float, np.ndarray, float, float]:
        Sw = self.S @ w
        var = max(float(w @ Sw), 1e-300)
        sigma = np.sqrt(var)
        aw = float(self.a @ w)
        return aw / sigma, Sw, sigma, aw

    def rank_loss(self, w: np.ndarray) -> float:
        """F_nrank(w) = 1 - Phi(z), the modelled probability of a mis-ordered pair."""
        return float(ndtr(-self._z(w)[0]))

    def value_and_grad(self, w: np.ndarray) -> tuple[float, np.ndarray]:
        """Objective value and gradient, shape (d,)."""
        z, Sw, sigma, aw = self._z(w)
        f = -float(log_ndtr(z))
        dfdz = -np.exp(_log_pdf(z) - log_ndtr(z))
        dz = self.a / sigma - aw * Sw / sigma**3
        r = 1.0 - float(w @ w)
        value = f + self.lam * r * r
        grad = dfdz * dz - 4.0 * self.lam * r * w
        return value, grad


class ErrorMomentObjective:
    """``log F_n01(w, b) + lam (1 - ||(w, b)||^2)^2`` over ``v = (w, b)``, shape (d + 1,).

    Parameters
    ----------
    std : StandardizedMoments
        Moments in standardized coordinates; the intercept ``b`` is the last entry
        of ``v`` (the bias feature of the paper).
    lam : float
        Weight of the unit-norm penalty (paper: 1e-3).
    """

    def __init__(self, std: StandardizedMoments, lam: float = 1e-3) -> None:
        self.std = std
        self.lam = float(lam)
        self.log_prior = np.log(std.prior)

    def _parts(self, v: np.ndarray):
        w, b = v[:-1], float(v[-1])
        out = []
        for c in (0, 1):
            # a jitter keeps a class whose standardized covariance is singular (fewer rows than
            # features) at a finite z: without it its modelled error is exactly 0 and log F is -inf
            Sw = self.std.cov[c] @ w + COVARIANCE_JITTER * w
            sigma = np.sqrt(max(float(w @ Sw), 1e-300))
            mean = float(self.std.mu[c] @ w) + b
            out.append((mean / sigma, Sw, sigma, mean))
        return out

    def log_error(self, v: np.ndarray) -> float:
        """log F_n01(v)."""
        (zn, *_), (zp, *_) = self._parts(v)
        return float(np.logaddexp(self.log_prior[1] + log_ndtr(-zp), self.log_prior[0] + log_ndtr(zn)))

    def log_error_along(self, w: np.ndarray, intercepts: np.ndarray) -> np.ndarray:
        """``log F_n01((w, b))`` for every ``b`` in ``intercepts`` (the direction's parts computed once; the same
        values as :meth:`log_error` one intercept at a time)."""
        (zn, _, sn, mn), (zp, _, sp, mp) = self._parts(np.append(w, 0.0))
        b = np.asarray(intercepts, dtype=float)
        return np.logaddexp(self.log_prior[1] + log_ndtr(-((mp + b) / sp)), self.log_prior[0] + log_ndtr((mn + b) / sn))

    def error(self, v: np.ndarray) -> float:
        """F_n01(v), the modelled expected 0-1 error."""
        return float(np.exp(self.log_error(v)))

    def error_gradient_norm(self, v: np.ndarray) -> float:
        """``||grad F_n01(v)||``, the norm of the gradient of the modelled error itself.

        L-BFGS works on ``log F_n01``, whose gradient is ``1 / F_n01`` times larger, so
        its own tolerance means something else when the modelled error is small (on
        kdd99 it is 1e-11 and ``log F_n01`` keeps creeping down for hundreds of
        iterations). Stopping when this norm is below the paper's tolerance keeps
        the paper's meaning. The penalty is left out: it only fixes the scale of
        ``v``, to which the classifier and F_n01 are indifferent.
        """
        r = 1.0 - float(v @ v)
        _, g = self.value_and_grad(v)
        return float(self.error(v) * np.linalg.norm(g + 4.0 * self.lam * r * v))

    def value_and_grad(self, v: np.ndarray) -> tuple[float, np.ndarray]:
        """Objective value and gradient, shape (d + 1,)."""
        (zn, Swn, sn, mn), (zp, Swp, sp, mp) = self._parts(v)
        log_fp = self.log_prior[1] + log_ndtr(-zp)
        log_fn = self.log_prior[0] + log_ndtr(zn)
        log_f = float(np.logaddexp(log_fp, log_fn))
        dp = -np.exp(self.log_prior[1] + _log_pdf(zp) - log_f)  # d log F / d z+
        dn = np.exp(self.log_prior[0] + _log_pdf(zn) - log_f)  # d log F / d z-
        grad = np.empty_like(v, dtype=float)
        grad[:-1] = dp * (self.std.mu[1] / sp - mp * Swp / sp**3) + dn * (self.std.mu[0] / sn - mn * Swn / sn**3)
        grad[-1] = dp / sp + dn / sn
        r = 1.0 - float(v @ v)
        grad -= 4.0 * self.lam * r * v
        return log_f + self.lam * r * r, grad
