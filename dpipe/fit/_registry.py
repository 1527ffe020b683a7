"""The objective registry: one entry per objective, read by everything that lists, checks or fits one.

An :class:`Objective` entry says all dpipe knows about an objective: its family (how it is fitted), its solvers, its
risk (a lazy :class:`~dpipe._registries.Ref` to the pure function the family's fit evaluates), the validation metric
that stops it early and chooses its ``lam="auto"``, its default smoothing width, its data-dependent default ``lam``. A
:class:`Family` entry says how the objectives of a family are fitted (its fit, and the solvers with a fit of their own).
Both registries are :class:`~dpipe._registries.Registry` tables; nothing else keeps a per-objective map.

This module loads no numpy: the CLI's parser lists the objectives from it (``dpipe --help`` stays light); the risks and
the fits are imported when a fit first loads them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._registries import Ref, Registry
from .._validation import check_choice

if TYPE_CHECKING:
    import numpy as np

    from ..engine._protocols import Dataset
    from ._outcome import FitOutcome
    from ._records import RateParams

    #: a one-dataset family's fit: ``(dataset, params, validate, warm=None) -> FitOutcome`` (``params``: the family's record)
    FamilyFit = Callable[..., FitOutcome]
    #: the rate family's fit on the stores its constraints name: ``(datasets by alias, params, validate, constraint validation)``
    DatasetsFit = Callable[[Mapping[str, Dataset], RateParams, Callable[[np.ndarray, float], dict[str, float]] | None,
                            Mapping[str, Dataset] | None], FitOutcome]

__all__ = ["Objective", "Family", "DataLam", "OBJECTIVES", "FAMILIES", "DEFAULT_OBJECTIVE", "MOMENT_MAX_FEATURES", "AUC_LBFGS_MIN_ROWS",
           "SolverChoice", "get_objective", "objective_table", "C_CONVENTIONS", "auc_lam", "AUC_LAM_FLOOR", "AUC_LAM_PER_FEATURE"]

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

#: auc's ridge when ``lam`` is not given: :data:`AUC_LAM_PER_FEATURE` times features per row, at least :data:`AUC_LAM_FLOOR`
AUC_LAM_FLOOR = 1e-6
AUC_LAM_PER_FEATURE = 1e-4


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


def auc_lam(n_rows: float, n_features: int) -> float:
    """auc's default ridge for ``n_rows`` rows (their total weight) of ``n_features`` features: ``max(1e-6, 1e-4 d / n)``.

    1e-6 (liblinear-ranksvm's best C on a9a and w8a) wherever there are more than 100 rows a
    feature, which covers every dense bundled task; more features a row (sparse text, d near n
    or above it) need a firmer ridge, in proportion: on Reuters money-fx (d / n = 1.07) test
    AUC is .98266 at 1e-6 and .98815 at 1e-4, and a generated 10^4 x 10^5 text store takes 128
    Newton iterations at 1e-6 against 10 at 1e-3 (separable rows: a tiny ridge only stretches w).
    """
    return max(AUC_LAM_FLOOR, AUC_LAM_PER_FEATURE * n_features / max(float(n_rows), 1.0))


def _rows_lam(n_rows: float, n_features: int) -> float:
    """The rate objectives' default ridge: ``1 / n`` (the paper's, LIBLINEAR's), ``n`` the training rows' total weight."""
    return 1.0 / max(n_rows, 1.0)


def _pairs_width(total_weight: float, epsilon: float, scale: float) -> float:
    """ROCArea's Huber width ``t = m mu = 2 epsilon`` (prox-function over the m pairs, D = m / 2), times ``scale``."""
    return 2.0 * epsilon * scale


def _rows_width(total_weight: float, epsilon: float, scale: float) -> float:
    """PRBEP's ``mu = 2 epsilon / n`` (D = n / 2, n the total sample weight), times ``scale``."""
    return 2.0 * epsilon / total_weight * scale


@dataclasses.dataclass(frozen=True)
class DataLam:
    """A default ``lam`` decided from the training data when the fit runs (:func:`dpipe.fit._params.default_lam`).

    Attributes
    ----------
    rule : callable
        ``(rows, features) -> lam``: ``rows`` the training rows' total weight.
    text : str
        How the option table in docs/training.md shows it.
    why : str
        The log's account of the value, formatted with ``rows`` and ``features``.
    """

    rule: Callable[[float, int], float]
    text: str
    why: str


_AUC_LAM = DataLam(auc_lam, "1e-4 d/n, at least 1e-6", "1e-4 x {features:d} features / {rows:.6g} rows, at least 1e-6")
_RATE_LAM = DataLam(_rows_lam, "1/n", "1 / {rows:.6g} rows")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Objective:
    """What dpipe knows about one objective.

    Attributes
    ----------
    name : str
        As users type it (``--objective``, ``DPipeClassifier(objective=...)``).
    family : str
        An entry of :data:`FAMILIES`. Moment objectives are fitted from one moments pass; smoothed ones by L-BFGS (or
        Newton) on a score pass and a gradient pass per evaluation; SVM-perf's structural losses by cutting planes (the
        same two passes per iteration); rate objectives under rate constraints by majorization-minimization (one pass
        per evaluation).
    solvers : tuple of str
        The solvers that train it; the first is the default.
    own_threshold : bool
        The fit sets the decision threshold itself (a bias feature), so threshold
        calibration is off by default; the ranking objectives' threshold is calibrated.
    summary : str
        One line: what it minimizes (``dpipe train --help``).
    doc : str
        What it minimizes, as the objective table of docs/training.md says it (:func:`objective_table`; Markdown).
    passes : str or None
        The data passes it makes, for that table (None: its family's, :attr:`Family.passes`).
    risk : Ref or None
        The pure function the family's fit evaluates, loaded when a fit first needs it; what it is depends on the family
        (:attr:`Family.risk`): moment, ``(ClassMoments, MomentParams, lam) -> FitOutcome``; smooth, ``(width or None) ->``
        a risk of the merged scores (``at``; with ``"newton"`` among the solvers also ``curvature``); structural,
        ``(loss name, k) ->`` the cutting plane's oracle; rate, the ranking risk ``(width) -> ScoreRisk`` the objective
        minimizes besides its rates (auc-rate), or None.
    rates : Ref or None
        Rate objectives: ``() -> RateExpression``, the rates minimized on the training store (None: the ranking risk alone).
    metric : str or None
        The validation metric (a key of :data:`dpipe.fit._early_stopping.METRICS`, higher is better) that matches its
        loss: what ``early_stopping_rounds`` watches and ``lam="auto"`` maximizes; None for the families that take no
        validation set.
    width : callable or None
        The smoothed family's default smoothing width ``(total weight, epsilon, mu_scale) -> width``: the paper's
        ``mu = epsilon / D`` in the risk's own unit; None where ``smoothing`` has a fixed default or does not apply.
    default_lam : DataLam or None
        ``lam`` when neither it nor ``C`` is given, decided from the data at fit time; None: :data:`dpipe.fit.PARAMS`'s
        default.
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
    doc: str
    risk: Ref[Any] | None
    metric: str | None
    passes: str | None = None
    rates: Ref[Any] | None = None
    width: Callable[[float, float, float], float] | None = None
    default_lam: DataLam | None = None
    takes_k: bool = False
    max_features: int | None = None
    solver_by_size: Callable[[float, int], SolverChoice] | None = None
    worker_row_bytes: int = 0
    c_means: str = "svm-perf"

    def load_risk(self) -> Any:
        """What :attr:`risk` points at (imported the first time); a ``ValueError`` for an objective that names none."""
        if self.risk is None:
            raise ValueError(f"objective {self.name!r} names no risk (Objective.risk)")
        return self.risk.load()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Family:
    """How the objectives of one family are fitted.

    Attributes
    ----------
    name : str
        As :attr:`Objective.family` names it.
    risk : str
        What its objectives' :attr:`Objective.risk` is (documentation; the test of the registry loads every one).
    fit : Ref or None
        Its fit on one opened dataset, ``(dataset, params, validate, warm=None) -> FitOutcome`` (``params``: the
        family's record, :data:`dpipe.fit._records.RECORDS`); imported when first used, so that a fit loads only its own
        solver's libraries (a Newton fit never imports scipy).
    fit_datasets : Ref or None
        Instead of ``fit``: its fit on every store its rate constraints name (``datasets=``, the rate family).
    solver_fits : mapping of str to Ref
        The solvers with a fit of their own (auc's Newton).
    validates : str or None
        None when its objectives take a validation set (``validation=``, ``eval_set``); else why not, for the error.
    lam_auto : str or None
        None when its ``lam`` may be ``"auto"`` (:mod:`dpipe.fit._lam_path`); else why not, for the error.
    passes : str
        The data passes its fit makes (the objective table of docs/training.md).
    warm_starts : bool
        Its fit takes ``warm=``, a start from another fit's solution (``lam="auto"``'s path); the cutting plane starts
        from its own planes.
    """

    name: str
    risk: str
    passes: str
    fit: Ref[FamilyFit] | None = None
    fit_datasets: Ref[DatasetsFit] | None = None
    solver_fits: Mapping[str, Ref[FamilyFit]] = dataclasses.field(default_factory=dict)
    validates: str | None = None
    lam_auto: str | None = None
    warm_starts: bool = True

    def fit_for(self, solver: str) -> FamilyFit:
        """The fit of ``solver`` (its own, or the family's)."""
        ref = self.solver_fits.get(solver, self.fit)
        if ref is None:
            raise ValueError(f"the {self.name} family fits on the datasets its constraints name (fit_datasets), not on one")
        return ref.load()


#: the families of objectives, each with its own fit path (dpipe/fit/_moment.py, _smooth.py, _structural.py, _rates.py)
FAMILIES: Registry[Family] = Registry("family", (
    Family(name="moment", risk="(ClassMoments, MomentParams, lam) -> FitOutcome: the fit from the class moments",
           passes="one moments pass", fit=Ref("dpipe.fit._moment:fit_moment"), validates="fitted from one moments pass",
           lam_auto="the moment objectives' lam weighs a unit-norm penalty, not a ridge whose strength trades bias for variance"),
    Family(name="smooth", risk="(width or None) -> a risk of the merged scores (at; curvature for Newton)", passes="two passes per evaluation",
           fit=Ref("dpipe.fit._smooth:fit_smoothed"), solver_fits={"newton": Ref("dpipe.fit._newton:fit_newton")}),
    Family(name="structural", risk="(loss name, k) -> the cutting plane's oracle", passes="two passes per iteration", fit=Ref("dpipe.fit._structural:fit_structural"),
           warm_starts=False),
    Family(name="rate", risk="(width) -> the ranking risk minimized besides the rates, or none", passes="one pass per evaluation, one per dataset",
           fit_datasets=Ref("dpipe.fit._rates:fit_rate_family"), validates="its steps are not comparable by a validation AUC",
           lam_auto="a rate fit's held-out choice needs its constraints checked per lam: not implemented yet"),
))

_STRUCTURAL_LOSS = Ref[Any]("dpipe.objectives:StructuralLoss")
_SMOOTHED_AUC = Ref[Any]("dpipe.objectives:SmoothedAUCRisk")


def _structural(name: str, summary: str, metric: str, own_threshold: bool = False, takes_k: bool = False) -> Objective:
    """An SVM-perf loss (its oracle: :data:`dpipe.objectives.STRUCTURAL_LOSSES`, which a test compares with these entries)."""
    return Objective(name=name, family="structural", solvers=("cutting-plane",), own_threshold=own_threshold, summary="lam/2 ||w||^2 + " + summary,
                     doc="lam/2 ||w||^2 + SVM-perf's structural risk for that loss (Joachims 2005)", risk=_STRUCTURAL_LOSS, metric=metric, takes_k=takes_k)


def _rate(name: str, what: str, rates: str) -> Objective:
    return Objective(name=name, family="rate", solvers=("mm",), own_threshold=True, risk=None, rates=Ref(rates), metric=None,
                     summary=f"{what} under rate constraints (Goh et al.): ramp rates, majorization-minimization",
                     doc="that rate subject to rate constraints (`--constraint`; Goh et al. 2016, [constraints.md](constraints.md))",
                     default_lam=_RATE_LAM, c_means="rows", worker_row_bytes=RATE_WORKER_ROW_BYTES)


#: objective name -> entry, in the order users see them
OBJECTIVES: Registry[Objective] = Registry("objective", (
    Objective(name="auc", family="smooth", solvers=("newton", "lbfgs"), own_threshold=False,
              summary="lam/2 ||w||^2 + mean Huber (or squared) pairwise hinge; Newton, or L-BFGS from the moments on large stores: the default",
              doc="lam/2 ||u||^2 + a pairwise surrogate of 1 - ROC-AUC (`surrogate`: the hinge Huberized over `smoothing` = 0.2, default; or "
                  "`squared-hinge`, liblinear-ranksvm's L2-loss RankSVM, whose `-c C` is lam = 1 / (C n+ n-)); `u` = w, or w times the column "
                  "scales when standardized",
              passes="Newton: one score pass per iteration, two passes per CG step in the kept order (no sort)",
              risk=Ref("dpipe.objectives:auc_risk"), metric="roc_auc", default_lam=_AUC_LAM, solver_by_size=_auc_solver, c_means="pairs"),
    Objective(name="auc-moment", family="moment", solvers=("closed-form", "lbfgs"), own_threshold=False,
              summary="1 - AUC of the normal model of the class moments (Ghanbari et al.)",
              doc="the ranking loss 1 - Phi(w.(mu+ - mu-) / sqrt(w.(S+ + S-) w)) (1 - AUC when scores are normal)",
              risk=Ref("dpipe.fit._moment:auc_moment_fit"), metric=None, max_features=MOMENT_MAX_FEATURES, c_means="pairs"),
    Objective(name="error-moment", family="moment", solvers=("lbfgs",), own_threshold=False,
              summary="expected 0-1 error of the normal model, with an intercept",
              doc="the expected 0-1 error pi+ (1 - Phi(z+)) + pi- Phi(z-) with an intercept",
              risk=Ref("dpipe.fit._moment:error_moment_fit"), metric=None, max_features=MOMENT_MAX_FEATURES, c_means="rows"),
    Objective(name="auc-smooth", family="smooth", solvers=("lbfgs",), own_threshold=False,
              summary="lam/2 ||w||^2 + Huber-smoothed pairwise hinge (Zhang et al.)",
              doc="lam/2 ||w||^2 + the Huber-smoothed pairwise hinge of SVM-perf's ROCArea loss (width t)", risk=_SMOOTHED_AUC, metric="roc_auc", width=_pairs_width),
    Objective(name="prbep-smooth", family="smooth", solvers=("lbfgs",), own_threshold=False,
              summary="lam/2 ||w||^2 + smoothed PRBEP structural risk (Zhang et al.)",
              doc="lam/2 ||w||^2 + the smoothed PRBEP structural risk (mu)", risk=Ref("dpipe.objectives:SmoothedPRBEPRisk"),
              metric="prbep", width=_rows_width),
    _structural("rocarea", "SVM-perf's ROCArea loss (mean pairwise hinge)", "roc_auc"),
    _structural("error", "SVM-perf's error-rate loss (the mean hinge)", "accuracy", own_threshold=True),
    _structural("prbep", "SVM-perf's precision/recall break-even loss", "prbep"),
    _structural("f1", "SVM-perf's F1 loss", "f1", own_threshold=True),
    _structural("prec@k", "SVM-perf's Prec@k loss", "prec_at_k", takes_k=True),
    _structural("rec@k", "SVM-perf's Rec@k loss", "rec_at_k", takes_k=True),
    _rate("error-rate", "error rate", "dpipe.rates._expr:error_rate"),
    _rate("false-negative-rate", "false-negative rate (Neyman-Pearson)", "dpipe.rates._expr:false_negative_rate"),
    _rate("false-positive-rate", "false-positive rate", "dpipe.rates._expr:false_positive_rate"),
    Objective(name="auc-rate", family="rate", solvers=("mm",), own_threshold=True,
              summary="1 - ROC-AUC through auc-smooth's pairwise hinge, under rate constraints (majorization-minimization of the constraints' ramps)",
              doc="1 - ROC-AUC through auc-smooth's pairwise hinge, subject to rate constraints",
              passes="one pass per dataset and evaluation, plus auc-smooth's two",
              risk=_SMOOTHED_AUC, metric=None, default_lam=_RATE_LAM, c_means="pairs", worker_row_bytes=RATE_WORKER_ROW_BYTES),
))


#: what ``train``, ``dpipe train`` and ``DPipeClassifier`` fit when no objective is named: the fastest route to the best
#: test ROC-AUC measured on the bundled tasks (``python -m bench race``)
DEFAULT_OBJECTIVE = "auc"


def get_objective(name: str, owner: str) -> Objective:
    """The registry entry of ``name``, or a :class:`ParameterError` listing the objectives."""
    return OBJECTIVES[check_choice(name, "objective", owner, OBJECTIVES)]


def objective_table() -> str:
    """The objective table of docs/training.md (Markdown), from :data:`OBJECTIVES`: the objectives that read alike (solvers,
    what they minimize, data passes) share a row, in the order of their first entry."""
    rows: dict[tuple[str, str, str], list[str]] = {}
    for o in OBJECTIVES.values():
        if o.solver_by_size is not None:
            solvers = ", ".join(f"`{s}`" for s in o.solvers) + " (default: by the store's size)"
        else:
            solvers = ", ".join(f"`{s}`" + (" (default)" if i == 0 and len(o.solvers) > 1 else "") for i, s in enumerate(o.solvers))
        passes = o.passes if o.passes is not None else FAMILIES[o.family].passes
        name = f"`{o.name}`" + (" (the default)" if o.name == DEFAULT_OBJECTIVE else "")
        rows.setdefault((solvers, o.doc.replace("|", "\\|"), passes), []).append(name)
    lines = ["| objective | solvers | what it minimizes | data passes |", "|---|---|---|---|"]
    lines += [f"| {', '.join(names)} | {solvers} | {doc} | {passes} |" for (solvers, doc, passes), names in rows.items()]
    return "\n".join(lines)
