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

__all__ = [*_LAZY]
__getattr__, __dir__ = attach(__name__, _LAZY)
