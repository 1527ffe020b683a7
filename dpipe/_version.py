"""dpipe's version, in a module of its own: what writes it (store manifests, model files, ``dpipe --version``) imports
it from here, never from the root facade :mod:`dpipe`, which no module of the package imports."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
