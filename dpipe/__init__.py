"""dpipe: distributed training of linear classifiers for the measure you care about."""

__version__ = "0.1.0"

from . import _config  # noqa: F401  (registers dask.config defaults)
from .exceptions import ConvergenceWarning, DataWarning, DPipeError, InputError, ParameterError, StoreError
from .io import Manifest, Store, open_store

__all__ = [
    "__version__",
    "open_store",
    "Store",
    "Manifest",
    "DPipeError",
    "InputError",
    "StoreError",
    "ParameterError",
    "ConvergenceWarning",
    "DataWarning",
]
