"""Solvers that run on the coordinator and return a :class:`FitResult`.

The names are imported from their modules on first use (scipy loads with the first
solver, not with the package). To export a new solver, add one line to :data:`_LAZY`:
``"fit_tron": "._tron"``.
"""

from .._lazy import attach

#: exported name -> the private module that defines it
_LAZY = {
    "FitResult": "._result",
    "Candidate": "._result",
    "minimize_lbfgs": "._lbfgs",
    "fit_auc_moment": "._moment_fit",
    "fit_error_moment": "._moment_fit",
    "best_moment_intercept": "._moment_fit",
    "fit_smooth": "._smooth_fit",
    "minimize_tron": "._tron",
    "NewtonObjective": "._tron",
    "CONTINUATION_START": "._smooth_fit",
    "fit_cutting_plane": "._cutting_plane",
    "solve_simplex_qp": "._master_qp",
    "moment_preconditioner": "._precondition",
    "pairwise_second_moment": "._precondition",
    "MOMENT_PRECONDITION_MAX_FEATURES": "._precondition",
    "RateProblem": "._rate_problem",
    "InnerObjective": "._rate_problem",
    "solve_rates": "._rate_solver",
    "RateSolution": "._rate_solver",
}

__all__ = [*_LAZY]
__getattr__, __dir__ = attach(__name__, _LAZY)
