"""The one registry idiom: a typed, ordered table of named entries, and lazy references to what they point at.

zarr keeps its codecs, buffers and chunk grids in one kind of registry (``zarr.registry.Registry``: a typed mapping filled
by ``register`` calls, whose entries load their implementations on first use); dpipe does the same for its objectives and
their families (:data:`dpipe.fit.OBJECTIVES`, :data:`dpipe.fit._registry.FAMILIES`):

* :class:`Registry` ``[E]``: name -> entry, in registration order (what users see listed), typed by its entries; a
  duplicate name is an error, and a test may :meth:`~Registry.register` an entry for its own duration
  (:meth:`~Registry.registered`);
* :class:`Ref` ``[T]``: ``"package.module:attribute"``, imported the first time it is :meth:`~Ref.load`-ed (so that listing
  the entries, ``dpipe --help``, loads no fit, solver or numba kernel) and kept; typed by what it points at, which a test
  checks by loading every reference of the registries.

Layer 0: nothing of dpipe is imported here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Generic, Protocol, TypeVar

__all__ = ["Ref", "Registry", "Named"]

T = TypeVar("T")


class Named(Protocol):
    """What a registry's entries have: the name they are registered under."""

    @property
    def name(self) -> str: ...


E = TypeVar("E", bound=Named)


@dataclasses.dataclass(frozen=True)
class Ref(Generic[T]):
    """A lazy reference to ``attribute`` of ``package.module``, written ``"package.module:attribute"``.

    Parameters
    ----------
    where : str
        The absolute module path and the attribute, separated by a colon.
    """

    where: str
    _loaded: list[T] = dataclasses.field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        module, _, attribute = self.where.partition(":")
        if not module or not attribute or module.startswith("."):
            raise ValueError(f"a reference is 'package.module:attribute' (absolute); got {self.where!r}")

    @property
    def module(self) -> str:
        """The module the reference imports."""
        return self.where.partition(":")[0]

    def load(self) -> T:
        """What the reference points at (its module imported the first time, the object kept)."""
        if not self._loaded:
            module, _, attribute = self.where.partition(":")
            try:
                value = getattr(importlib.import_module(module), attribute)
            except AttributeError:
                raise ImportError(f"the reference {self.where!r}: module {module} has no {attribute!r}") from None
            self._loaded.append(value)
        return self._loaded[0]


class Registry(Mapping[str, E]):
    """Named entries of one kind, in registration order: a read-only mapping with :meth:`register`.

    Parameters
    ----------
    what : str
        What an entry is, for messages (``"objective"``).
    entries : iterable of entries
        Registered in order.
    """

    def __init__(self, what: str, entries: Iterable[E] = ()) -> None:
        self.what = what
        self._entries: dict[str, E] = {}
        for entry in entries:
            self.register(entry)

    def register(self, entry: E) -> E:
        """Add ``entry`` under its name (a name taken is a ``ValueError``); returns it."""
        if entry.name in self._entries:
            raise ValueError(f"the {self.what} {entry.name!r} is registered already")
        self._entries[entry.name] = entry
        return entry

    def unregister(self, name: str) -> E:
        """Remove the entry ``name``; returns it."""
        return self._entries.pop(name)

    @contextlib.contextmanager
    def registered(self, entry: E) -> Iterator[E]:
        """``with registry.registered(entry):`` the entry is registered inside the block only (for tests)."""
        self.register(entry)
        try:
            yield entry
        finally:
            self.unregister(entry.name)

    def __getitem__(self, name: str) -> E:
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(f"unknown {self.what} {name!r}; one of {', '.join(self._entries)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {list(self._entries)})"

