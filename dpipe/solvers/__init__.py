"""Solvers that run on the coordinator and return a :class:`FitResult`.

The names are imported from their modules on first use (scipy loads with the first
solver, not with the package). To export a new solver, add one line to :data:`_LAZY`:
``"fit_tron": "._tron"``.
"""

from typing import TYPE_CHECKING

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

if TYPE_CHECKING:  # what the lazy names are, for mypy (which would otherwise see __getattr__'s Any)
    from ._cutting_plane import fit_cutting_plane as fit_cutting_plane
    from ._lbfgs import minimize_lbfgs as minimize_lbfgs
    from ._master_qp import solve_simplex_qp as solve_simplex_qp
    from ._moment_fit import best_moment_intercept as best_moment_intercept
    from ._moment_fit import fit_auc_moment as fit_auc_moment
    from ._moment_fit import fit_error_moment as fit_error_moment
    from ._precondition import MOMENT_PRECONDITION_MAX_FEATURES as MOMENT_PRECONDITION_MAX_FEATURES
    from ._precondition import moment_preconditioner as moment_preconditioner
    from ._precondition import pairwise_second_moment as pairwise_second_moment
    from ._rate_problem import InnerObjective as InnerObjective
    from ._rate_problem import RateProblem as RateProblem
    from ._rate_solver import RateSolution as RateSolution
    from ._rate_solver import solve_rates as solve_rates
    from ._result import Candidate as Candidate
    from ._result import FitResult as FitResult
    from ._smooth_fit import CONTINUATION_START as CONTINUATION_START
    from ._smooth_fit import fit_smooth as fit_smooth
    from ._tron import NewtonObjective as NewtonObjective
    from ._tron import minimize_tron as minimize_tron

__all__ = [*_LAZY]
__getattr__, __dir__ = attach(__name__, _LAZY)
