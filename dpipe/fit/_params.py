"""Every hyper-parameter of a fit, declared once.

:data:`PARAMS` is the one table. Each :class:`Param` says what the option is (type,
range or choices, documentation), which objectives and solvers it applies to, and its
default (one value, or one per family or objective). Everything else is built from it:

* :func:`resolve` validates what a user gave for an objective and returns the family's
  frozen record (:data:`RECORDS`, generated into :mod:`._records` by :mod:`._codegen`) with the defaults filled in; an option that does not
  apply to the objective is a :class:`ParameterError` naming the option, the objective
  and what to use instead — never silently dropped;
* ``dpipe.train``'s and ``DPipeClassifier``'s signatures and docstrings
  (:func:`signature_parameters`, :func:`numpydoc`), and the ``dpipe train`` options
  (:func:`add_arguments`).

Adding an option is one :class:`Param` entry here plus its use in the family's fit.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any

from .._validation import check_choice, check_int, check_number
from ..exceptions import ParameterError
from ._records import RECORDS
from ._registry import FAMILIES, OBJECTIVES, Objective, get_objective

__all__ = ["Param", "PARAMS", "RECORDS", "resolve", "signature_parameters", "numpydoc", "add_arguments", "applicable", "option_table", "auc_lam",
           "AUC_LAM_FLOOR", "AUC_LAM_PER_FEATURE"]


@dataclasses.dataclass(frozen=True)
class Param:
    """One hyper-parameter.

    Attributes
    ----------
    name : str
        Python name (the CLI flag is ``--name`` with dashes).
    kind : {"float", "int", "bool", "choice"}
    doc : str
        numpydoc description (also the CLI help).
    scope : tuple of str
        Families and objective names it applies to.
    solvers : tuple of str, optional
        It applies only with these solvers (empty: any).
    default : value, mapping or callable
        The value when not given: a constant; a mapping from objective name or family
        to value (the objective's own entry first); or ``f(objective) -> value``.
    low, high, closed : for numbers, the valid range.
    choices : for ``choice``, the valid values.
    excludes : tuple of str
        ``"objective/solver"`` pairs within the scope where it does not apply.
    aliases : mapping
        Other spellings of a choice (``precondition=True`` is ``"diagonal"``).
    instead : str or mapping
        What to use instead, for the error when it does not apply: one text, or one
        per objective name or family (looked up in that order).
    cli : dict
        argparse overrides (``nargs``, ``const``, ``help``).
    """

    name: str
    kind: str
    doc: str
    scope: tuple[str, ...]
    default: Any = None
    solvers: tuple[str, ...] = ()
    low: float = -math.inf
    high: float = math.inf
    closed: str = "neither"
    choices: tuple[Any, ...] = ()
    excludes: tuple[str, ...] = ()
    aliases: Mapping[Any, Any] = dataclasses.field(default_factory=dict)
    instead: str | Mapping[str, str] = ""
    cli: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def applies(self, objective: Objective, solver: str) -> bool:
        """Whether the option means something for ``objective`` trained by ``solver``."""
        in_scope = objective.name in self.scope or objective.family in self.scope
        return in_scope and (not self.solvers or solver in self.solvers) and f"{objective.name}/{solver}" not in self.excludes

    def default_for(self, objective: Objective) -> Any:
        """The value used for ``objective`` when the option is not given."""
        if callable(self.default):
            return self.default(objective)
        if isinstance(self.default, Mapping):
            return self.default.get(objective.name, self.default.get(objective.family))
        return self.default

    def check(self, value: Any, owner: str) -> Any:
        """``value`` validated and converted, or a :class:`ParameterError`."""
        import numpy as np  # here, not at the top: the CLI's parser reads this module (dpipe --help stays light)

        if self.kind == "float":
            return check_number(value, self.name, owner, self.low, self.high, self.closed)
        if self.kind == "int":
            return check_int(value, self.name, owner, low=int(self.low) if math.isfinite(self.low) else 0)
        if self.kind == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise ParameterError(f"The {self.name!r} parameter of {owner} must be True or False. Got {value!r} instead.")
            return bool(value)
        if self.kind == "constraints":
            return _check_constraints(value, self.name, owner)
        if isinstance(value, (bool, np.bool_)) and bool(value) in self.aliases:
            value = self.aliases[bool(value)]
        return check_choice(value, self.name, owner, self.choices)

    def hint_for(self, objective: Objective) -> str:
        """What to use instead of this option for ``objective``."""
        if isinstance(self.instead, Mapping):
            return self.instead.get(objective.name, self.instead.get(objective.family, ""))
        return self.instead

    @property
    def where(self) -> str:
        """The objectives it applies to, for messages and documentation."""
        names = []
        for o in OBJECTIVES.values():
            solvers = [s for s in o.solvers if self.applies(o, s)]
            if solvers:
                names.append(o.name if len(solvers) == len(o.solvers) else f"{o.name} (solver {' or '.join(solvers)})")
        return ", ".join(names)


def _check_constraints(value: Any, name: str, owner: str) -> tuple[Any, ...]:
    """:func:`dpipe.rates.check_constraints` (imported when a constraint is given: the CLI's parser reads this module)."""
    from ..rates._parse import check_constraints

    return check_constraints(value, name, owner)


def _calibrate_default(objective: Objective) -> bool:
    return not objective.own_threshold


#: the objectives with a cut-off k, and the structural losses whose bias feature sets the threshold (from the registry)
_NOT_SMOOTHED = {"structural": "SVM-perf's losses are not smoothed: use auc-smooth or prbep-smooth", "moment": "the moment objectives are not smoothed",
                 "auc": "auc's Huber width is smoothing itself (surrogate='huber-hinge'); the squared hinge is smooth already"}
#: the smoothed family's options that do not apply to auc (not smoothed), with either solver
_SQUARED_BOTH = ("auc/newton", "auc/lbfgs")
#: ... and those that are L-BFGS's only (its coordinates and start)
_NEWTON = ("auc/newton",)
_TAKES_K = tuple(o.name for o in OBJECTIVES.values() if o.takes_k)
_BIAS_FEATURE = tuple(o.name for o in OBJECTIVES.values() if o.family == "structural" and o.own_threshold)


PARAMS: dict[str, Param] = {
    p.name: p
    for p in (
        Param("solver", "choice", "Solver for the objective (default: the objective's first; see ``dpipe.fit.OBJECTIVES``).",
              FAMILIES, choices=("closed-form", "lbfgs", "newton", "cutting-plane", "mm")),
        Param("lam", "float", "Moment objectives: weight of the unit-norm penalty ``lam (1 - ||w||^2)^2`` (default 1e-3). Smoothed "
              "objectives and SVM-perf's losses: the ridge ``lam/2 ||w||^2`` (default 1e-4, SVM-perf's C = 100; auc: "
              "1e-4 d / n, at least 1e-6, decided at fit time from the store's features d and rows n (weighted: their total "
              "weight); liblinear-ranksvm's C = 1 / (lam n+ n-); 1e-6 chosen by test AUC on a9a and w8a, the growth with d / n "
              "on sparse text, where d is close to n or above it). Rate objectives: "
              "the ridge ``lam/2 (||w||^2 + b^2)``, the bias as lightly as w (default 1 / n, the paper's).",
              FAMILIES, {"auc": None, "moment": 1e-3, "smooth": 1e-4, "structural": 1e-4}, solvers=("lbfgs", "newton", "cutting-plane", "mm"),
              low=0.0, closed="left",
              instead="the closed form has no penalty: use solver='lbfgs'"),
        Param("constraints", "constraints", "Rate objectives: rate constraints, as strings (``\"recall >= 0.9\"``, "
              "``\"positive_rate(group=Female) >= 0.8 * positive_rate(group=Male)\"``) or :class:`dpipe.rates.Constraint` objects; "
              "all must hold on the training datasets (reported per constraint in the model).",
              ("rate",), (), instead="constraints are trained by the rate objectives: use objective='error-rate' (or another *-rate)",
              cli={"flag": "--constraint", "action": "append", "metavar": "CONSTRAINT"}),
        Param("mm_steps", "int", "Rate objectives: majorization-minimization steps at most (default 20); MM stops earlier, when a "
              "step lowers the dual estimate by at most ``eps`` relative (the rate commands of docs/constraints.md: 3-11 steps), and warns "
              "when it reaches this limit first.",
              ("rate",), 20, low=1,
              instead="only the rate objectives majorize"),
        Param("multiplier_bound", "float", "Rate objectives: V, the bound on every Lagrange multiplier (default 100); a constraint "
              "whose multiplier reaches it is traded against the objective at that price and may end unsatisfied (reported).",
              ("rate",), 100.0, low=0.0, instead="only the rate objectives have multipliers"),
        Param("threshold_rule", "choice", "Rate objectives: ``'exact'`` (default) keeps the direction found on ramp rates and sets "
              "the bias that minimizes the exact objective subject to the exact constraints on the training data (O(n log n), "
              "20 bytes a row to the driver); ``'ramp'`` keeps the ramp solution's bias; ``'randomized'`` makes the ramp solution the "
              "paper's randomized classifier: a row is predicted positive with probability ``clip(1/2 + score, 0, 1)`` (constraints "
              "hold in expectation; ``predict`` draws, ``evaluate`` reports expected rates).", ("rate",), "exact",
              choices=("exact", "ramp", "randomized"),
              instead="the other objectives set their threshold by calibrate"),
        Param("validation_fraction", "float", "Rate objectives: the validation rule (Cotter et al. 2019). A seeded share of the rows of every "
              "dataset the constraints use (``validation_seed``; a row's draw depends on its shard and place only) is held out: the "
              "direction and the multipliers are fitted on the rest, and the exact threshold so that the constraints hold on the held-out "
              "rows, which new rows resemble more than the rows a model was fitted to. A dataset with its own validation store "
              "(``constraint_validation``) keeps all its rows. The model records the rates on both parts, with intervals. Default: "
              "off (the constraints hold on the training rows).", ("rate",), low=0.0, high=1.0,
              instead="only the rate objectives have constraints to validate"),
        Param("validation_seed", "int", "Rate objectives: the seed of ``validation_fraction``'s draw (default 0).", ("rate",), 0, low=0,
              instead="only the rate objectives hold rows out"),
        Param("slack", "float", "Rate objectives: the exact threshold meets every constraint with this much to spare, on the rows that "
              "set it (the validation rows, or the training rows): ``recall >= 0.9`` with slack 0.01 is held at 0.91, ``false_positive_rate "
              "<= 0.02`` with slack 0.005 at 0.015 (default 0). The price is objective: a threshold further inside the feasible set.",
              ("rate",), 0.0, low=0.0, closed="left", instead="only the rate objectives have constraints"),
        Param("confidence", "float", "Rate objectives: the exact threshold meets every constraint at this one-sided confidence on the "
              "rows that set it: ``value + z se <= -slack``, ``z`` the standard normal quantile (0.95: 1.64) and ``se`` the constraint's "
              "standard error by the delta method over its cells (as ``evaluate``'s intervals). Default: 0.95 under the validation rule "
              "(``validation_fraction``, ``constraint_validation``), else 0.5, the point value (``z = 0``).",
              ("rate",), None, low=0.5, high=1.0, closed="left", instead="only the rate objectives have constraints"),
        Param("C", "float", "SVM-perf's ``-c`` instead of ``lam``: ``lam = 1 / (100 C)`` (SVM-perf's losses are in percent).",
              ("smooth", "structural"), low=0.0, excludes=_SQUARED_BOTH,
              instead={"auc": "use lam: liblinear-ranksvm's -c C is lam = 1 / (C n+ n-)", "smooth": "use lam", "structural": "use lam",
                       "moment": "use lam", "rate": "use lam"}),
        Param("ridge", "float", "Ridge added to the standardized covariance in the auc-moment direction "
              "``(S+ + S- + ridge I)^-1 (mu+ - mu-)``: auc-moment, error-moment's start, and the smoothed objectives' moment start "
              "and preconditioner (default 1e-6).", ("moment", "smooth"), 1e-6, low=0.0, closed="left", excludes=("auc-moment/lbfgs", *_NEWTON),
              instead={"auc": "Newton starts at w = 0 and needs no preconditioner: use solver='lbfgs' for the moment start",
                       "moment": "the L-BFGS route does not use the closed-form direction: use solver='closed-form'",
                       "structural": "SVM-perf's losses do not use the auc-moment direction"}),
        Param("max_iter", "int", "Iteration limit (default 500 L-BFGS or Newton iterations; 1000 cutting-plane iterations; rate "
              "objectives: 200 L-BFGS iterations per inner problem).", FAMILIES,
              {"moment": 500, "smooth": 500, "structural": 1000, "rate": 200}, solvers=("lbfgs", "newton", "cutting-plane", "mm"), low=1,
              instead="the closed form does not iterate: use solver='lbfgs'"),
        Param("tol", "float", "L-BFGS stopping rule. Smoothed objectives: stop when ``||g|| <= tol max ||g||`` (relative to the "
              "largest gradient norm of the run, usually the start's: LIBLINEAR's rule; default 0.03, the largest whose test AUC, and the next "
              "smaller one's, were within 1e-4 of the converged fit's on every bundled task: ``python -m bench stopping``). Moment objectives (a d-dimensional problem on the driver, no data "
              "passes): when the largest gradient component is below ``tol`` (default 1e-4). Rate objectives' inner problems: "
              "stop when ``max|g| <= tol (1 + sum v) max|g_0|`` (column-scaled coordinates, ``v`` the multipliers, ``g_0`` the "
              "gradient at the fit's start; default 3e-4, the largest of 1e-3, 5e-4, 3e-4 whose fits of docs/constraints.md's rate "
              "commands were no worse than the previous solver's with a margin: ``python -m bench rate-speed``).",
              ("moment", "smooth", "rate"), {"moment": 1e-4, "smooth": 0.03, "rate": 3e-4}, solvers=("lbfgs", "mm"), low=0.0,
              instead={"moment": "the closed form does not iterate: use solver='lbfgs'", "structural": "the cutting plane stops on its gap: use eps"}),
        Param("memory", "int", "L-BFGS memory (default 20 for the moment objectives, 6 for the smoothed ones, as the papers).",
              ("moment", "smooth"), {"moment": 20, "smooth": 6}, solvers=("lbfgs",), low=1,
              instead={"moment": "the closed form does not iterate: use solver='lbfgs'", "structural": "only L-BFGS keeps correction pairs"}),
        Param("smoothing", "float", "Huber width t (auc-smooth) or mu (prbep-smooth); default the paper's ``mu = epsilon / D`` "
              "times ``mu_scale``. auc (surrogate='huber-hinge'): the Huber width of the pairwise hinge (default 0.2: with Newton, "
              "the test AUC of the narrow widths at a tenth of their Newton iterations; ``python -m bench race``). Rate objectives: "
              "the Huber width of the inner problems' hinges, and of auc-rate's pairwise hinge (default 0.05; the ramp is 1 wide).",
              ("smooth", "rate"), {"auc": 0.2, "rate": 0.05}, low=0.0, instead=_NOT_SMOOTHED),
        Param("surrogate", "choice", "auc: the pairwise loss that stands for 1 - ROC-AUC. ``'huber-hinge'`` (default): the "
              "hinge ``max(0, 1 - (s_i - s_j))`` Huberized over ``smoothing`` (auc-smooth's loss at a width Newton handles well: "
              "the best test AUC per second measured on the bundled tasks). ``'squared-hinge'``: ``max(0, 1 - (s_i - s_j))^2``, "
              "liblinear-ranksvm's L2-loss RankSVM (its ``-c C`` is ``lam = 1 / (C n+ n-)``).", ("auc",), "huber-hinge",
              choices=("huber-hinge", "squared-hinge"), instead="only auc takes a surrogate: auc-smooth is the Huber hinge, "
              "prbep-smooth and the structural losses are their own"),
        Param("epsilon", "float", "The paper's accuracy epsilon of the default smoothing ``mu = epsilon / D`` (default 1e-3).",
              ("smooth",), 1e-3, low=0.0, excludes=_SQUARED_BOTH,
              instead={"auc": "auc's Huber width is smoothing itself (no paper default to scale); Newton stops on eps",
                       "structural": "use eps, the cutting plane's tolerance", "moment": "the moment objectives are not smoothed"}),
        Param("mu_scale", "float", "Factor on the default smoothing (the paper studies 1, 100 and 1000; default 1).",
              ("smooth",), 1.0, low=0.0, excludes=_SQUARED_BOTH, instead=_NOT_SMOOTHED),
        Param("continuation", "bool", "Start with a 1000 times wider smoothing and shrink it by ``continuation_factor`` per stage, "
              "warm-starting.", ("smooth",), False, excludes=_SQUARED_BOTH, instead=_NOT_SMOOTHED),
        Param("continuation_factor", "float", "With ``continuation``: the factor the smoothing shrinks by per stage (default 10).",
              ("smooth",), 10.0, low=1.0, excludes=_SQUARED_BOTH, instead=_NOT_SMOOTHED),
        Param("standardize", "bool", "Fit on features scaled to unit standard deviation (one extra pass). The ridge then applies to "
              "the scaled weights, so the objective is not SVM-perf's on raw features; the model keeps raw-feature weights. auc "
              "(Newton): default - (auto): standardize when some column's root mean square exceeds 1.5 (counts, amounts, raw "
              "measurements), else raw (binary, min-max scaled or standardized columns); the fit record says which.",
              ("smooth", "structural", "rate"), {"auc": None, "smooth": False, "structural": False, "rate": False},
              instead={"moment": "the moment objectives are fitted in standardized coordinates already"}),
        Param("precondition", "choice", "Smoothed objectives: keep the objective and its minimizer, change only the coordinates L-BFGS "
              "runs in. ``'moments'`` whitens the Hessian modelled from the class moments ``c M + lam diag(p)`` (one moments pass and "
              "one score pass, a d x d factorization on the driver, d <= 4096); ``'diagonal'`` (or True) scales each feature by its "
              "standard deviation (one extra pass; excludes ``standardize``); ``'none'`` (or False). Default ``'auto'``: "
              "``'moments'`` up to 4096 features, else ``'diagonal'`` (``'none'`` with ``standardize``). auc (Newton): "
              "``'diagonal'`` (the default; ``'auto'`` is the same) preconditions the CG steps by the generalized Hessian's "
              "diagonal, taken in the gradient pass (no extra pass; 21-31 % fewer CG steps on a9a, w8a and covtype); ``'none'`` "
              "plain CG; ``'moments'`` is L-BFGS's.",
              ("smooth",), "auto", choices=("auto", "none", "diagonal", "moments"), aliases={True: "diagonal", False: "none"},
              instead={**dict.fromkeys(FAMILIES, "the cutting plane's dual QP does not need it and the moment objectives are "
                                                 "standardized already")},
              cli={"nargs": "?", "const": "diagonal"}),
        Param("init", "choice", "Smoothed objectives: L-BFGS's start. ``'zeros'``: w = 0; ``'auc-moment'``: the auc-moment direction "
              "scaled to the objective's minimum along it (one moments pass and one score pass, shared with "
              "``precondition='moments'``). Default ``'auto'``: ``'auc-moment'`` whenever the moments preconditioner is used, "
              "else ``'zeros'``.", ("smooth",), "auto", choices=("auto", "zeros", "auc-moment"), excludes=_NEWTON,
              instead={"auc": "Newton starts at w = 0 (use solver='lbfgs' for the moment start)",
                       "structural": "the cutting plane starts from its planes", "moment": "the moment objectives have their own starts",
                       "rate": "the rate objectives start from their own fits"}),
        Param("eps", "float", "Cutting plane: stop when the best ``J`` is within ``eps`` of the lower bound (default 1e-3 = SVM-perf's "
              "default ``-e 0.1``, which is in percent). Rate objectives: the multipliers' cutting plane stops when its bounds on the "
              "dual ``D`` meet within ``eps max(1, |D|)``, majorization-minimization when a step lowers ``D`` by at most "
              "``eps |D|`` (default 1e-3). Newton (auc): stop when ``||g|| <= eps ||g(0)||`` "
              "(LIBLINEAR's rule; default 3e-4, the largest whose test AUC, and the next smaller one's, were within 1e-4 of the "
              "converged fit's on every bundled task: ``python -m bench stopping``; LIBLINEAR's 1e-3 was 1.2e-4 short on kdd99).",
              ("structural", "rate", "auc"), {"structural": 1e-3, "rate": 1e-3, "auc": 3e-4}, low=0.0, excludes=("auc/lbfgs",),
              instead="L-BFGS stops on tol"),
        Param("k", "float", "Prec@k / Rec@k: the number of rows predicted positive (counted in weight units with sample weights; a "
              "whole number unless some weight is fractional). "
              "Excludes ``k_fraction``.", _TAKES_K, low=0.0, instead="only Prec@k and Rec@k have a cut-off"),
        Param("k_fraction", "float", "Prec@k / Rec@k: k as a fraction of the training positives (SVM-perf's ``--p``; default 0.5 "
              "for prec@k, 2 for rec@k).", _TAKES_K, {"prec@k": 0.5, "rec@k": 2.0}, low=0.0,
              instead="only Prec@k and Rec@k have a cut-off"),
        Param("bias", "float", "error and f1: SVM-perf's ``--b``, the value of a regularized constant feature that sets the threshold "
              "(default 1; 0: none, the threshold is then 0).", _BIAS_FEATURE, 1.0, low=0.0, closed="left",
              instead="the ranking losses ignore a constant feature; their threshold is calibrated"),
        Param("calibrate", "bool", "After the fit, one score pass sets the intercept to the threshold with the fewest (weighted) "
              "training errors; error-moment also keeps, among its candidate models, the one with the fewest. Default on, except "
              "for error and f1, whose bias feature sets their threshold.", ("moment", "smooth", "structural"), _calibrate_default,
              instead="the rate objectives set their threshold to meet the constraints (threshold_rule)"),
        Param("early_stopping_rounds", "int", "With a validation set (``validation=``, ``--validation``, ``DPipeClassifier.fit``'s "
              "``eval_set``): stop when the validation metric has not strictly improved for this many iterations, and keep the best "
              "iterate, also when the solver stops first (default: off). The metric: ROC-AUC for the AUC objectives and rocarea; PRBEP "
              "for prbep-smooth and prbep; for error and f1 the accuracy and F1 at the fit's own threshold, for prec@k and rec@k "
              "Prec@k and Rec@k at the fit's ``k_fraction`` (or ``k``) on the validation set. The model's fit record keeps "
              "``info['early_stopping']``: metric, early_stopping_rounds, best_iteration, best_score, stopped.",
              ("smooth", "structural"), low=1,
              instead={"moment": "the moment objectives take no validation set (fitted from one moments pass)",
                       "rate": "the rate objectives take no validation set (their steps are not comparable by a validation metric)"}),
        Param("probability", "choice", "Fit a map from scores to probabilities on held-out rows, kept in the model "
              "(``LinearModel.predict_proba``, ``DPipeClassifier.predict_proba``): ``'sigmoid'`` (Platt scaling) or ``'isotonic'``. "
              "The held-out rows are the validation set when there is one, else ``probability_folds`` cross-fitted folds of the "
              "training rows (that many more fits, as scikit-learn's ``CalibratedClassifierCV``). Default: none (no probabilities).",
              ("moment", "smooth", "structural"), choices=("sigmoid", "isotonic"),
              instead="the rate objectives' thresholds meet their constraints; calibrate their scores with CalibratedClassifierCV"),
        Param("probability_folds", "int", "With ``probability`` and no validation set: the folds the training rows are dealt into "
              "(seeded), each scored by a model fitted on the others (default 5).", ("moment", "smooth", "structural"), low=2,
              instead="the rate objectives take no probability calibration"),
    )
}


def applicable(objective: Objective, solver: str) -> list[Param]:
    """The parameters that apply to ``objective`` with ``solver``, in declaration order."""
    return [p for p in PARAMS.values() if p.applies(objective, solver)]


def record_fields(family: str) -> list[str]:
    """The parameters a ``family`` fit's record holds after ``objective``: ``solver``, then every parameter in scope of
    the family or one of its objectives, in declaration order (``C`` is ``lam``'s other name, resolved into it)."""
    names = [p.name for p in PARAMS.values() if p.name != "C" and (family in p.scope or any(OBJECTIVES[o].family == family for o in p.scope if o in OBJECTIVES))]
    return ["solver"] + [n for n in names if n != "solver"]


def resolve(objective: str, given: Mapping[str, Any], owner: str) -> Any:
    """Validate the options ``given`` for ``objective``; the family's record with the defaults filled in.

    ``None`` means "not given". Every option given must apply to the objective (and its
    solver); otherwise the :class:`ParameterError` names it, the objective, where it
    applies and what to use instead.
    """
    spec = get_objective(objective, owner)
    unknown = sorted(set(given) - set(PARAMS))
    if unknown:
        raise ParameterError(f"{owner} got unknown parameter(s) {', '.join(map(repr, unknown))}; valid: {', '.join(PARAMS)}")
    solver = given.get("solver")
    if solver is None:
        solver = spec.solvers[0]
    elif solver not in spec.solvers:
        pairs = "; ".join(f"{o.name}: {', '.join(o.solvers)}" for o in OBJECTIVES.values())
        raise ParameterError(f"The 'solver' parameter of {owner} cannot be {solver!r} for objective {objective!r}. Valid pairs: {pairs}.")
    values: dict[str, Any] = {"objective": objective, "solver": solver}
    for name, value in given.items():
        if value is None or name == "solver":
            continue
        p = PARAMS[name]
        if not p.applies(spec, solver):
            hint = f"; {p.hint_for(spec)}" if p.hint_for(spec) else ""
            with_solver = (p.solvers or p.excludes) and (spec.family in p.scope or spec.name in p.scope)
            raise ParameterError(f"The {name!r} parameter of {owner} does not apply to objective {objective!r}"
                                 f"{' with solver ' + repr(solver) if with_solver else ''}: it applies to {p.where}{hint}.")
        values[name] = p.check(value, owner)
    given_names = tuple(sorted(set(values) - {"objective", "solver"}))
    if "C" in values:
        if "lam" in values:
            raise ParameterError(f"The 'C' and 'lam' parameters of {owner} are two names for one weight (lam = 1 / (100 C)); give one.")
        values["lam"] = 1.0 / (100.0 * values.pop("C"))
    _check_combinations(values, owner)
    record = RECORDS[spec.family]
    for f in dataclasses.fields(record):
        if f.name in ("given", "owner"):
            continue
        if f.name not in values:
            p = PARAMS[f.name]
            values[f.name] = p.default_for(spec) if p.applies(spec, solver) else None
    if "k" in given_names:  # the count replaces the default fraction
        values["k_fraction"] = None
    if values.get("surrogate") == "squared-hinge":  # not smoothed: no width
        if "smoothing" in given_names:
            raise ParameterError(f"The 'smoothing' parameter of {owner} applies to auc's surrogate 'huber-hinge', not to "
                                 "'squared-hinge' (smooth already).")
        values["smoothing"] = None
    if spec.family == "structural" and values["lam"] == 0:
        raise ParameterError(f"The 'lam' parameter of {owner} must be a float in the range (0, inf) for the cutting plane. Got 0 instead.")
    return record(**values, given=given_names, owner=owner)


def _check_combinations(given: dict[str, Any], owner: str) -> None:
    """Options that exclude each other or need another one (``given``: the options set, validated)."""
    def both(a: str, b: str, why: str) -> None:
        if a in given and b in given:
            raise ParameterError(f"The {a!r} and {b!r} parameters of {owner} exclude each other: {why}.")

    both("k", "k_fraction", "give the count or the fraction of positives")
    both("smoothing", "epsilon", "smoothing sets the width itself, epsilon and mu_scale set the default one")
    both("smoothing", "mu_scale", "smoothing sets the width itself, epsilon and mu_scale set the default one")
    if "continuation_factor" in given and not given.get("continuation"):
        raise ParameterError(f"The 'continuation_factor' parameter of {owner} applies only with continuation=True.")
    if "probability_folds" in given and "probability" not in given:
        raise ParameterError(f"The 'probability_folds' parameter of {owner} applies only with 'probability' ('sigmoid' or 'isotonic').")
    if "validation_seed" in given and "validation_fraction" not in given:
        raise ParameterError(f"The 'validation_seed' parameter of {owner} applies only with validation_fraction (the share it draws).")
    newton = given.get("solver") == "newton"
    if newton and given.get("precondition") == "moments":
        raise ParameterError(f"The 'precondition' parameter of {owner} cannot be 'moments' with Newton (auc's default solver): the moments "
                             "preconditioner is L-BFGS's. Use 'diagonal' (the default) or 'none', or solver='lbfgs'.")
    if not newton and given.get("standardize") and given.get("precondition") == "diagonal":
        raise ParameterError(
            f"The 'standardize' and 'precondition=\"diagonal\"' parameters of {owner} exclude each other: standardize changes the objective "
            "(ridge on scaled weights) and already solves it in scaled coordinates; precondition='diagonal' keeps the objective and only "
            "rescales the coordinates. Choose one, or precondition='moments', which goes with either."
        )


def signature_parameters() -> list[inspect.Parameter]:
    """Keyword-only parameters, all defaulting to None ("the objective's default"), for generated signatures."""
    return [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None) for name in PARAMS]


def numpydoc() -> str:
    """The numpydoc entries of every parameter (for generated docstrings)."""
    lines = []
    for p in PARAMS.values():
        kind = {"float": "float", "int": "int", "bool": "bool", "constraints": "list of str or Constraint",
                "choice": "{" + ", ".join(map(repr, p.choices)) + "}"}[p.kind]
        lines.append(f"{p.name} : {kind}, optional")
        lines.append(f"    {p.doc} Applies to: {p.where}.")
    return "\n".join(lines)


def add_arguments(parser: argparse._ActionsContainer) -> None:
    """``--name`` options of every parameter, defaulting to None (not given)."""
    types: dict[str, Callable[[str], Any]] = {"float": float, "int": int, "choice": str, "constraints": str}
    for p in PARAMS.values():
        cli = dict(p.cli)
        flag = cli.pop("flag", "--" + p.name.replace("_", "-"))
        kw: dict[str, Any] = {"dest": p.name, "default": None, "help": f"{p.doc} [{p.where}]".replace("%", "%%")}
        if p.kind == "bool":
            kw["action"] = argparse.BooleanOptionalAction
        else:
            kw["type"] = types[p.kind]
            if p.choices:
                kw["choices"] = list(p.choices)
        kw.update(cli)
        parser.add_argument(flag, **kw)


#: how a default that is decided at fit time reads in the table: (option, objective or family) -> text
_DECIDED_AT_FIT = {("lam", "auc"): "1e-4 d/n, at least 1e-6", ("lam", "rate"): "1/n", ("confidence", "rate"): "0.95 with validation, else 0.5",
                   **{("probability_folds", f): "5 without a validation set" for f in ("moment", "smooth", "structural")}}

#: auc's ridge when ``lam`` is not given: :data:`AUC_LAM_PER_FEATURE` times features per row, at least :data:`AUC_LAM_FLOOR`
AUC_LAM_FLOOR = 1e-6
AUC_LAM_PER_FEATURE = 1e-4


def auc_lam(n_rows: float, n_features: int) -> float:
    """auc's default ridge for ``n_rows`` rows (their total weight) of ``n_features`` features: ``max(1e-6, 1e-4 d / n)``.

    1e-6 (liblinear-ranksvm's best C on a9a and w8a) wherever there are more than 100 rows a
    feature, which covers every dense bundled task; more features a row (sparse text, d near n
    or above it) need a firmer ridge, in proportion: on Reuters money-fx (d / n = 1.07) test
    AUC is .98266 at 1e-6 and .98815 at 1e-4, and a generated 10^4 x 10^5 text store takes 128
    Newton iterations at 1e-6 against 10 at 1e-3 (separable rows: a tiny ridge only stretches w).
    """
    return max(AUC_LAM_FLOOR, AUC_LAM_PER_FEATURE * n_features / max(float(n_rows), 1.0))


def _shown(name: str, value: Any, objective: Objective | None = None) -> str:
    if value is None:
        if objective is not None:
            return _DECIDED_AT_FIT.get((name, objective.name), _DECIDED_AT_FIT.get((name, objective.family), "-"))
        return "-"
    if value == ():
        return "none"
    if callable(value):
        return getattr(value, "__doc__", None) or "-"
    return str(value)


def option_table() -> str:
    """The table of options in docs/training.md (Markdown): where each applies and its default, from :data:`PARAMS` (``solver`` has its own section)."""
    lines = ["| option | applies to | default |", "|---|---|---|"]
    for p in PARAMS.values():
        if p.name == "solver":
            continue
        applicable = [o for o in OBJECTIVES.values() if any(p.applies(o, s) for s in o.solvers)]
        groups: dict[str, list[str]] = {}
        for o in applicable:
            groups.setdefault(_shown(p.name, p.default_for(o), o), []).append(o.name)
        default = next(iter(groups)) if len(groups) == 1 else "; ".join(f"{v} ({', '.join(names)})" for v, names in groups.items())
        lines.append(f"| `{p.name}` | {p.where} | {default} |")
    return "\n".join(lines)
