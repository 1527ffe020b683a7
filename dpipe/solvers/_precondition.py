"""A full-matrix preconditioner for L-BFGS on the smoothed rank objectives, from class moments.

The smoothed pairwise risks are sums over positive-negative pairs of a function of
``w.(x_i - x_j)``; their Hessian is ``sum over pairs of h''(.) (x_i - x_j)(x_i - x_j)^T``.
Modelling ``h''`` by one number ``c`` over the pairs gives

    H  ~  c M + lam diag(p),    M = S+ + S- + (mu+ - mu-)(mu+ - mu-)^T,

with ``M`` the mean of ``(x_i - x_j)(x_i - x_j)^T`` over all pairs: a d x d matrix the
moments pass already gives (the same class moments as auc-moment), and ``c`` the
curvature the start's line search measures along one ray. L-BFGS then runs in the
coordinates ``u`` with ``w = T u`` and ``T^T H T = I``. On kdd99 (raw features span 0
to 7e8 and several columns are collinear) this is what a diagonal scaling cannot do;
see ``bench/results/`` and issue 3's note for the iteration counts.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ..exceptions import DPipeError
from ..reduce import ClassMoments

__all__ = ["pairwise_second_moment", "moment_preconditioner", "MOMENT_PRECONDITION_MAX_FEATURES"]

#: ``precondition="moments"`` holds and factors d x d matrices on the driver; above this
#: many features it is refused (``"diagonal"`` has no such limit)
MOMENT_PRECONDITION_MAX_FEATURES = 4096


def pairwise_second_moment(moments: ClassMoments) -> np.ndarray:
    """``S+ + S- + (mu+ - mu-)(mu+ - mu-)^T``: the mean of ``(x_i - x_j)(x_i - x_j)^T`` over pairs.

    Parameters
    ----------
    moments : ClassMoments
        Class moments of the training data (weighted, if it has weights).

    Returns
    -------
    ndarray of shape (d, d)
    """
    gap = moments.mean[1] - moments.mean[0]
    return moments.covariance(1) + moments.covariance(0) + np.outer(gap, gap)


def moment_preconditioner(moments: ClassMoments, scale: np.ndarray, penalty: np.ndarray, lam: float, curvature: float) -> np.ndarray:
    """The change of variables ``T`` (``w = T u``) that whitens the modelled Hessian.

    Parameters
    ----------
    moments : ClassMoments
        Class moments of the training data.
    scale : ndarray of shape (d,)
        Per-feature standard deviations (1 for constant columns): the factorization is
        done on the standardized matrix, so columns of any scale are treated alike.
    penalty : ndarray of shape (d,)
        Per-feature weights ``p`` of the ridge ``lam/2 sum p_j w_j^2``.
    lam : float
        Ridge weight.
    curvature : float
        ``c``, the smoothed risk's curvature per unit of ``M`` (> 0).

    Returns
    -------
    ndarray of shape (d, d)
        ``T = diag(1/scale) L^-T`` with ``L L^T`` the standardized ``c M + lam diag(p)``,
        so that ``T^T (c M + lam diag(p)) T = I``. A relative jitter of 1e-10 times
        the mean diagonal, raised tenfold while needed, keeps the factorization of a
        singular model (collinear columns and ``lam = 0``) defined.
    """
    inv = 1.0 / np.asarray(scale, dtype=float)
    hessian = curvature * (inv[:, None] * pairwise_second_moment(moments) * inv[None, :])
    hessian[np.diag_indices_from(hessian)] += lam * np.asarray(penalty, dtype=float) * inv * inv
    if not np.all(np.isfinite(hessian)):
        raise DPipeError("precondition='moments': the class moments or the measured curvature are not finite; use precondition='diagonal'")
    level = float(np.mean(np.diag(hessian)))
    jitter = 1e-10 * (level if level > 0 else 1.0)
    eye = np.eye(len(inv))
    while True:
        try:
            lower = np.linalg.cholesky(hessian + jitter * eye)
            break
        except np.linalg.LinAlgError:
            jitter *= 10.0
    return inv[:, None] * scipy.linalg.solve_triangular(lower, eye, lower=True).T
