"""Rate expressions made concrete for given stores: each term becomes a coefficient per cell.

A cell (:class:`~dpipe.reduce._rates.CellLayout`) is the set of a store's rows with one
label, one group value and one prediction of each deployed model. Every rate term is
the (weighted) mean over a dataset of ``1[s z > 0]`` with a sign ``s`` that is constant
on a cell; with ``1[-z > 0] = 1 - 1[z > 0]`` (likewise for the ramp), a term is a
coefficient on ``1[z > 0]`` per unit of weight in each cell of its dataset plus a
constant. A *row* of the compiled problem (the objective, then each constraint) is
``sum_cells C[cell] * S[cell] + constant`` where ``S[cell]`` is the cell's weighted sum of
``1[z > 0]`` (or of the ramp, or of its bounds).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np

from ..exceptions import ParameterError
from ..reduce._rates import CellLayout
from ._expr import Constraint, Dataset, RateExpression, Term

__all__ = ["DataInfo", "StorePlan", "plan_stores", "CompiledRows", "compile_rows", "decode_cell"]


@dataclasses.dataclass(frozen=True)
class StorePlan:
    """One store of a rate fit: its alias, path, group names and cell layout.

    Attributes
    ----------
    baseline_paths : tuple of str
        The deployed models (in the layout's order) whose predictions split its rows.
    """

    alias: str
    path: str
    group_names: tuple[str, ...] | None
    layout: CellLayout
    baseline_paths: tuple[str, ...] = ()


def decode_cell(cell: int, layout: CellLayout) -> tuple[int, int, tuple[int, ...]]:
    """``(label, group code, deployed predictions)`` of ``cell`` (the inverse of :meth:`CellLayout.cell`)."""
    label = 1 if cell % 2 else -1
    group = (cell // 2) % layout.n_groups
    bits = cell // (2 * layout.n_groups)
    return label, group, tuple(1 if (bits >> k) & 1 else -1 for k in range(len(layout.baselines)))


def _all_terms(objective: RateExpression | None, constraints: Sequence[Constraint]) -> list[tuple[str, Term]]:
    out = [("objective", t) for t in (objective.terms if objective is not None else ())]
    for c in constraints:
        out += [(str(c), t) for t in c.expression.terms]
    return out


class _Opened(Protocol):
    """What :meth:`DataInfo.of` reads of an opened dataset (an engine dataset; optional ``store`` and ``group_names``
    are read with ``getattr``)."""

    @property
    def n_features(self) -> int: ...


@dataclasses.dataclass(frozen=True)
class DataInfo:
    """What a rate fit needs to know of a dataset before any pass: where it is, its width, its group names and
    whether it has labels."""

    path: str
    n_features: int
    group_names: tuple[str, ...] | None
    labelled: bool = True

    @classmethod
    def of(cls, dataset: _Opened) -> DataInfo:
        """From an opened dataset: its store's manifest, or (in-memory shards) its ``group_names``."""
        store = getattr(dataset, "store", None)
        if store is not None:
            m = store.manifest
            return cls(store.path, m.n_features, tuple(m.groups) if m.groups is not None else None, bool(m.labelled))
        names = getattr(dataset, "group_names", None)
        return cls("the data given to fit", int(dataset.n_features), tuple(names) if names is not None else None)


def plan_stores(objective: RateExpression | None, constraints: Sequence[Constraint], stores: Mapping[str, DataInfo],
                load_model: Callable[[str], tuple[np.ndarray, float]]) -> dict[str, StorePlan]:
    """The cell layout of every dataset the expressions use.

    Parameters
    ----------
    stores : mapping of alias to DataInfo
        The datasets (``"train"`` the training data).
    load_model : callable
        ``path -> (coef, intercept)`` of a deployed model, its prediction being ``X coef + intercept > 0``.
    """
    baselines: dict[str, list[str]] = {}
    for where, term in _all_terms(objective, constraints):
        alias = term.dataset.on
        if alias not in stores:
            raise ParameterError(f"constraint {where!r}: no dataset {alias!r}; known: {', '.join(sorted(stores))} (name its store with datasets=, alias {alias!r})")
        if (term.dataset.label is not None or term.side == "error") and not stores[alias].labelled:
            raise ParameterError(f"constraint {where!r}: {stores[alias].path} ({alias!r}) has no labels, and this rate needs them; "
                                 "on an unlabelled store use positive_rate / coverage or churn")
        for path in (term.baseline, term.dataset.baseline):
            if path is not None and path not in baselines.setdefault(alias, []):
                baselines[alias].append(path)
    plans = {}
    for alias, info in stores.items():
        paths = tuple(baselines.get(alias, ()))
        models = tuple(load_model(p) for p in paths)
        for p, (coef, _) in zip(paths, models):
            if len(coef) != info.n_features:
                raise ParameterError(f"deployed model {p}: {len(coef)} coefficients, but {info.path} has {info.n_features} features")
        groups = info.group_names
        plans[alias] = StorePlan(alias, info.path, groups, CellLayout(len(groups) if groups else 1, models), paths)
    return plans


def _cells_of(dataset: Dataset, plan: StorePlan, where: str) -> list[int]:
    layout = plan.layout
    group = None
    if dataset.group is not None:
        if plan.group_names is None:
            raise ParameterError(f"constraint {where!r}: {plan.path} has no group column (ingest one with group_col=; DPipeClassifier.fit takes the groups itself)")
        if dataset.group not in plan.group_names:
            raise ParameterError(f"constraint {where!r}: unknown group {dataset.group!r} in {plan.path}; its groups are {', '.join(plan.group_names)}")
        group = plan.group_names.index(dataset.group)
    k = plan.baseline_paths.index(dataset.baseline) if dataset.baseline_label is not None else None
    cells = []
    for cell in range(layout.n_cells):
        label, g, predictions = decode_cell(cell, layout)
        if dataset.label is not None and label != dataset.label:
            continue
        if group is not None and g != group:
            continue
        if k is not None and predictions[k] != dataset.baseline_label:
            continue
        cells.append(cell)
    return cells


def _sign(term: Term, cell: int, plan: StorePlan) -> int:
    label, _, predictions = decode_cell(cell, plan.layout)
    if term.side == "positive":
        return 1
    if term.side == "negative":
        return -1
    if term.side == "error":
        return -label
    return -predictions[plan.baseline_paths.index(term.baseline)]  # churn: differ from the deployed model


@dataclasses.dataclass(frozen=True)
class CompiledRows:
    """The objective (row 0) and the constraints (rows 1..m) as per-cell coefficients.

    Attributes
    ----------
    coef : dict of alias to ndarray of shape (1 + m, n_cells)
        Coefficient on each cell's weighted sum of ``1[z > 0]``.
    constant : ndarray of shape (1 + m,)
        What the rows add regardless of the model; a constraint holds when its row is ``<= 0``.
    texts : list of str
        ``"objective"``, then each constraint as written.
    """

    coef: dict[str, np.ndarray]
    constant: np.ndarray
    texts: list[str]

    def evaluate(self, sums: Mapping[str, np.ndarray]) -> np.ndarray:
        """Every row's value for per-cell weighted sums ``sums[alias]`` of ``1[z > 0]`` (or of the ramp)."""
        return self.constant + sum(self.coef[a] @ s for a, s in sums.items() if a in self.coef)


def compile_rows(objective: RateExpression | None, constraints: Sequence[Constraint], plans: Mapping[str, StorePlan],
                 weights: Mapping[str, np.ndarray]) -> CompiledRows:
    """Per-cell coefficients of every row, given each store's per-cell total weight ``weights[alias]``."""
    rows = [("objective", objective)] + [(str(c), c.expression) for c in constraints]
    coef = {alias: np.zeros((len(rows), plan.layout.n_cells)) for alias, plan in plans.items()}
    constant = np.zeros(len(rows))
    for j, (where, expression) in enumerate(rows):
        if expression is None:
            continue
        constant[j] += expression.constant
        for term in expression.terms:
            plan = plans[term.dataset.on]
            w = weights[plan.alias]
            cells = _cells_of(term.dataset, plan, where)
            size = float(w.sum()) if term.count else float(w[cells].sum())  # counts are scaled by the store's total weight
            if size <= 0:
                raise ParameterError(f"constraint {where!r}: the dataset {term.side}({term.dataset.describe()}) of {plan.path} has no rows")
            for cell in cells:
                a = term.coef / size
                if _sign(term, cell, plan) > 0:
                    coef[plan.alias][j, cell] += a
                else:  # a * 1[-z > 0] = a - a * 1[z > 0]
                    coef[plan.alias][j, cell] -= a
                    constant[j] += a * w[cell]
    return CompiledRows(coef, constant, [where for where, _ in rows])
