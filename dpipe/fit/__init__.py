"""The fit layer: the objective registry, the parameter declarations, and ``train``.

* :data:`OBJECTIVES` — one :class:`Objective` entry per objective: its family and solvers, its
  risk (a lazy reference), its validation metric, default width and data-dependent ``lam``; the
  families' fits are :data:`FAMILIES`' entries (:mod:`._registry`, one registry idiom:
  :mod:`dpipe._registries`).
* :data:`PARAMS` — one :class:`Param` per hyper-parameter; :func:`resolve` turns what a
  user gave into the family's frozen record, refusing any option that does not apply.
* :func:`train` — a store in, a :class:`~dpipe.model.LinearModel` out; the estimator and
  the CLI are built on the same declarations.
* :func:`smoothed_objective`, :class:`StructuralRisk` — what the smoothed family's L-BFGS
  and the cutting plane evaluate, over an opened dataset's :class:`~dpipe.engine.RankPasses`
  (for tests and benchmarks that time one evaluation).
"""

from typing import TYPE_CHECKING

from .._lazy import attach

#: exported name -> the private module that defines it, imported on first use: the CLI's parser
#: reads OBJECTIVES and PARAMS without loading the engine, the solvers or numba
_LAZY = {
    "OBJECTIVES": "._registry",
    "FAMILIES": "._registry",
    "DEFAULT_OBJECTIVE": "._registry",
    "Objective": "._registry",
    "get_objective": "._registry",
    "PARAMS": "._params",
    "Param": "._params",
    "RECORDS": "._params",
    "applicable": "._params",
    "resolve": "._params",
    "FitOutcome": "._outcome",
    "fit_dataset": "._train",
    "finish_fit": "._train",
    "fit_probability": "._train",
    "model_params": "._train",
    "train": "._train",
    "smoothed_objective": "._smooth",
    "StructuralRisk": "._structural",
}

if TYPE_CHECKING:  # what the lazy names are, for mypy (which would otherwise see __getattr__'s Any)
    from ._outcome import FitOutcome as FitOutcome
    from ._params import PARAMS as PARAMS
    from ._params import RECORDS as RECORDS
    from ._params import Param as Param
    from ._params import applicable as applicable
    from ._params import resolve as resolve
    from ._registry import DEFAULT_OBJECTIVE as DEFAULT_OBJECTIVE
    from ._registry import FAMILIES as FAMILIES
    from ._registry import OBJECTIVES as OBJECTIVES
    from ._registry import Objective as Objective
    from ._registry import get_objective as get_objective
    from ._smooth import smoothed_objective as smoothed_objective
    from ._structural import StructuralRisk as StructuralRisk
    from ._train import finish_fit as finish_fit
    from ._train import fit_dataset as fit_dataset
    from ._train import fit_probability as fit_probability
    from ._train import model_params as model_params
    from ._train import train as train

__all__ = [*_LAZY]
__getattr__, __dir__ = attach(__name__, _LAZY)
