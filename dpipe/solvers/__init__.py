"""Solvers that run on the coordinator and return a :class:`FitResult`."""

from ._cutting_plane import fit_cutting_plane
from ._lbfgs import minimize_lbfgs
from ._master_qp import solve_simplex_qp
from ._moment_fit import best_moment_intercept, fit_auc_moment, fit_error_moment
from ._precondition import MOMENT_PRECONDITION_MAX_FEATURES, moment_preconditioner, pairwise_second_moment
from ._result import Candidate, FitResult
from ._smooth_fit import CONTINUATION_START, fit_smooth

__all__ = ["FitResult", "Candidate", "minimize_lbfgs", "fit_auc_moment", "fit_error_moment", "best_moment_intercept", "fit_smooth", "CONTINUATION_START", "fit_cutting_plane", "solve_simplex_qp",
           "moment_preconditioner", "pairwise_second_moment", "MOMENT_PRECONDITION_MAX_FEATURES"]
