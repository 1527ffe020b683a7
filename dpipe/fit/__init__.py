"""The fit layer: the objective registry, the parameter declarations, and ``train``.

* :data:`OBJECTIVES` — one :class:`Objective` entry per objective (family, solvers,
  whether it keeps its own threshold).
* :data:`PARAMS` — one :class:`Param` per hyper-parameter; :func:`resolve` turns what a
  user gave into the family's frozen record, refusing any option that does not apply.
* :func:`train` — a store in, a :class:`~dpipe.model.LinearModel` out; the estimator and
  the CLI are built on the same declarations.
* :func:`smoothed_objective`, :class:`StructuralRisk` — what the smoothed family's L-BFGS
  and the cutting plane evaluate, over an opened dataset's :class:`~dpipe.engine.RankPasses`
  (for tests and benchmarks that time one evaluation).
"""

from ._outcome import FitOutcome
from ._params import PARAMS, RECORDS, Param, applicable, resolve
from ._registry import FAMILIES, OBJECTIVES, Objective, get_objective
from ._smooth import smoothed_objective
from ._structural import StructuralRisk
from ._train import finish_fit, fit_dataset, model_params, train

__all__ = [
    "OBJECTIVES",
    "FAMILIES",
    "Objective",
    "get_objective",
    "PARAMS",
    "Param",
    "RECORDS",
    "applicable",
    "resolve",
    "FitOutcome",
    "fit_dataset",
    "finish_fit",
    "model_params",
    "train",
    "smoothed_objective",
    "StructuralRisk",
]
