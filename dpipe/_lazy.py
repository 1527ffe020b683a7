"""Lazy exports of a package: names imported from their private modules on first use.

A package ``__init__`` declares what it exports and where each name lives, and
imports nothing heavy itself::

    from .._lazy import attach

    #: exported name -> the private module that defines it
    _LAZY = {
        "fit_smooth": "._smooth_fit",
    }

    __all__ = [*_LAZY]
    __getattr__, __dir__ = attach(__name__, _LAZY)

``package.fit_smooth`` and ``from package import fit_smooth`` import ``._smooth_fit``
then (PEP 562), and keep the value in the package's namespace, so the next access is a
plain attribute. This is what keeps ``dpipe --help`` free of dask's cluster, scipy and
numba: a package on the parser's path costs only its own small ``__init__``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["attach"]


def attach(package: str, lazy: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of a package with lazy exports.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    lazy : mapping of str to str
        Exported name -> the module that defines it, relative to the package
        (``"._client"``) or absolute.

    Returns
    -------
    __getattr__ : callable
        Imports the name's module on first access and caches the value in the package.
    __dir__ : callable
        The package's ``__all__`` (or its lazy names), sorted.
    """

    def __getattr__(name: str) -> Any:
        where = lazy.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(getattr(sys.modules[package], "__all__", lazy))

    return __getattr__, __dir__
