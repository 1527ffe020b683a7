"""dpipe: distributed training of linear classifiers for the measure you care about.

The public API is imported lazily, so that ``from dpipe.model import LinearModel``
(loading and scoring a model) needs numpy alone.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._version import __version__

_LAZY = {
    "ingest": "dpipe.io",
    "make_data": "dpipe.io",
    "open_store": "dpipe.io",
    "Store": "dpipe.io",
    "Manifest": "dpipe.io",
    "train": "dpipe.fit",
    "OBJECTIVES": "dpipe.fit",
    "evaluate": "dpipe._evaluate",
    "predict": "dpipe._evaluate",
    "LinearModel": "dpipe.model",
    "DPipeClassifier": "dpipe._estimator",
    "cluster_client": "dpipe.engine",
    "DPipeError": "dpipe.exceptions",
    "InputError": "dpipe.exceptions",
    "StoreError": "dpipe.exceptions",
    "ParameterError": "dpipe.exceptions",
    "ClusterError": "dpipe.exceptions",
    "RegistryError": "dpipe.exceptions",
    "ConvergenceWarning": "dpipe.exceptions",
    "DataWarning": "dpipe.exceptions",
}

__all__ = ["__version__", *_LAZY]


#: subpackages reachable as attributes (``dpipe.rates.recall()``) without importing them first
_SUBMODULES = ("rates", "engine", "io", "fit", "metrics", "model", "registry")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"dpipe.{name}")
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dpipe' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
