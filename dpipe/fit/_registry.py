"""The objective registry: one entry per objective, read by everything that lists or checks one."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from .._validation import check_choice

__all__ = ["Objective", "OBJECTIVES", "FAMILIES", "DEFAULT_OBJECTIVE", "MOMENT_MAX_FEATURES", "AUC_LBFGS_MIN_ROWS", "SolverChoice", "get_objective",
           "C_CONVENTIONS"]

#: the families of objectives, each with its own fit path (dpipe/fit/_moment.py, _smooth.py, _structural.py, _rates.py)
FAMILIES = ("moment", "smooth", "structural", "rate")

#: the most features an objective that builds d x d class moments on the driver fits (two float64 d x d
#: matrices per shard and on the driver: 268 MB at 4096); wider stores (sparse text) use the pass-based ones
MOMENT_MAX_FEATURES = 4096

#: auc's default solver (``solver`` not given) is L-BFGS in the class moments' metric from this many rows on (up to
#: :data:`MOMENT_MAX_FEATURES` features), trust-region Newton below. Measured (issue 40, 2 cores): at 2x10^6 x 50 L-BFGS
#: from the moment start made 10 data passes where Newton made 57 (solve 1.9 s against 5.8 s, test AUC .78301 both); on
#: the bundled tasks (3x10^4 to 4x10^5 rows) both solve in about a second, and Newton's gradient rule stops closer to
#: the minimum (kdd99 test AUC .99982 against .99949, kdd99-rare .99849 against .99807)
AUC_LBFGS_MIN_ROWS = 1_000_000

#: what a rate fit keeps per row on the workers between passes, streamed too (:class:`dpipe.reduce._rates._RowMemo`: cells
#: and anchor margins, 9-10 bytes; with Newton, curvature rows): the memory model's ``dpipe.engine._memory.ROW_BYTES``,
#: written out so that the registry loads without numpy (a test checks that the two agree)
RATE_WORKER_ROW_BYTES = 24


#: what ``C`` means for an objective (:attr:`Objective.c_means`): whose ``-c`` it is, and its ``lam``. ``n+``, ``n-``, ``n``: the
#: training rows' positive, negative and total weight (decided at fit time)
C_CONVENTIONS = {
    "pairs": "liblinear-ranksvm's: C weighs the loss summed over the positive-negative pairs, lam = 1 / (C n+ n-)",
    "rows": "LIBLINEAR's and scikit-learn's: C weighs the loss summed over the rows, lam = 1 / (C n)",
    "svm-perf": "SVM-perf's -c: its losses are in percent, lam = 1 / (100 C)",
}


@dataclasses.dataclass(frozen=True)
class SolverChoice:
    """A default solver chosen from the data's size: the solver and the reason, for the log and the fit record."""

    solver: str
    why: str


def _auc_solver(rows: float, features: int) -> SolverChoice:
    """auc's default solver for a store of ``rows`` x ``features``: see :data:`AUC_LBFGS_MIN_ROWS`."""
    if features > MOMENT_MAX_FEATURES:
        return SolverChoice("newton", f"{features} features, more than the moments metric's {MOMENT_MAX_FEATURES}")
    if rows < AUC_LBFGS_MIN_ROWS:
        return SolverChoice("newton", f"{rows:,.0f} rows, fewer than {AUC_LBFGS_MIN_ROWS:,}: every pass is cheap")
    return SolverChoice("lbfgs", f"{rows:,.0f} rows, at least {AUC_LBFGS_MIN_ROWS:,}, and {features} features: "
                                 "L-BFGS in the class moments' metric makes the fewest data passes")


@dataclasses.dataclass(frozen=True)
class Objective:
    """What dpipe knows about one objective.

    Attributes
    ----------
    name : str
        As users type it (``--objective``, ``DPipeClassifier(objective=...)``).
    family : {"moment", "smooth", "structural", "rate"}
        Moment objectives are fitted from one moments pass; smoothed ones by L-BFGS on
        a score pass and a gradient pass per evaluation; SVM-perf's structural losses
        by cutting planes (the same two passes per iteration); rate objectives under
        rate constraints by majorization-minimization (one pass per evaluation).
    solvers : tuple of str
        The solvers that train it; the first is the default.
    own_threshold : bool
        The fit sets the decision threshold itself (a bias feature), so threshold
        calibration is off by default; the ranking objectives' threshold is calibrated.
    summary : str
        One line: what it minimizes.
    takes_k : bool
        Prec@k / Rec@k: the fit needs the number of predicted positives.
    max_features : int or None
        The most features it fits (the moment objectives build d x d matrices); None: any
        ``d``, at O(nnz) per pass on a sparse store.
    solver_by_size : callable or None
        ``(rows, features) -> SolverChoice``: the default solver, chosen when the data is
        open (``solver`` not given: the record says ``"auto"`` until then); None: the
        first of ``solvers``.
    worker_row_bytes : int
        Bytes a row the fit keeps on the workers between passes where the shards are streamed (the memory
        check, :mod:`dpipe.engine._memory`): none for the passes whose row orders the driver keeps; the rate
        objectives' cells and anchor margins.
    c_means : {"pairs", "rows", "svm-perf"}
        What ``C`` means (:data:`C_CONVENTIONS`): the pairwise risks take liblinear-ranksvm's ``C``, the per-row risks
        LIBLINEAR's, SVM-perf's losses and their smoothings (auc-smooth, prbep-smooth) SVM-perf's.
    """

    name: str
    family: str
    solvers: tuple[str, ...]
    own_threshold: bool
    summary: str
    takes_k: bool = False
    max_features: int | None = None
    solver_by_size: Callable[[float, int], SolverChoice] | None = None
    worker_row_bytes: int = 0
    c_means: str = "svm-perf"


#: SVM-perf's losses, in the order users see them: name -> (summary, takes k). Declared here rather than read from
#: :data:`dpipe.objectives.STRUCTURAL_LOSSES` (the oracles, which load numba) so that listing the objectives (``dpipe
#: --help``) stays light; a test checks that the two name the same losses.
_STRUCTURAL = {
    "rocarea": ("SVM-perf's ROCArea loss (mean pairwise hinge)", False),
    "error": ("SVM-perf's error-rate loss (the mean hinge)", False),
    "prbep": ("SVM-perf's precision/recall break-even loss", False),
    "f1": ("SVM-perf's F1 loss", False),
    "prec@k": ("SVM-perf's Prec@k loss", True),
    "rec@k": ("SVM-perf's Rec@k loss", True),
}

#: objective name -> entry, in the order users see them
OBJECTIVES: dict[str, Objective] = {
    o.name: o
    for o in (
        Objective("auc", "smooth", ("newton", "lbfgs"), False,
                  "lam/2 ||w||^2 + mean Huber (or squared) pairwise hinge; Newton, or L-BFGS from the moments on large stores: the default",
                  solver_by_size=_auc_solver, c_means="pairs"),
        Objective("auc-moment", "moment", ("closed-form", "lbfgs"), False, "1 - AUC of the normal model of the class moments (Ghanbari et al.)",
                  max_features=MOMENT_MAX_FEATURES, c_means="pairs"),
        Objective("error-moment", "moment", ("lbfgs",), False, "expected 0-1 error of the normal model, with an intercept",
                  max_features=MOMENT_MAX_FEATURES, c_means="rows"),
        Objective("auc-smooth", "smooth", ("lbfgs",), False, "lam/2 ||w||^2 + Huber-smoothed pairwise hinge (Zhang et al.)"),
        Objective("prbep-smooth", "smooth", ("lbfgs",), False, "lam/2 ||w||^2 + smoothed PRBEP structural risk (Zhang et al.)"),
        *(
            Objective(loss, "structural", ("cutting-plane",), loss in ("error", "f1"), "lam/2 ||w||^2 + " + summary, takes_k=takes_k)
            for loss, (summary, takes_k) in _STRUCTURAL.items()
        ),
        *(
            Objective(name, "rate", ("mm",), True, f"{what} under rate constraints (Goh et al.): ramp rates, majorization-minimization",
                      c_means="rows", worker_row_bytes=RATE_WORKER_ROW_BYTES)
            for name, what in (("error-rate", "error rate"), ("false-negative-rate", "false-negative rate (Neyman-Pearson)"),
                               ("false-positive-rate", "false-positive rate"))
        ),
        Objective("auc-rate", "rate", ("mm",), True, "1 - ROC-AUC through auc-smooth's pairwise hinge, under rate constraints "
                  "(majorization-minimization of the constraints' ramps)", c_means="pairs", worker_row_bytes=RATE_WORKER_ROW_BYTES),
    )
}


#: what ``train``, ``dpipe train`` and ``DPipeClassifier`` fit when no objective is named: the fastest route to the best
#: test ROC-AUC measured on the bundled tasks (``python -m bench race``)
DEFAULT_OBJECTIVE = "auc"


def get_objective(name: str, owner: str) -> Objective:
    """The registry entry of ``name``, or a :class:`ParameterError` listing the objectives."""
    return OBJECTIVES[check_choice(name, "objective", owner, OBJECTIVES)]
