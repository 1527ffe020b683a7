"""What a store format does, and the lookup from a manifest's ``format`` to it.

A store format is the on-disk encoding of a store's arrays (Zarr v3 group, Parquet parts):
how they are checked when the store is opened, how one shard's columns are read, how a
writer lays shards down, and where the format keeps its own copy of the manifest. Everything
above this seam (:class:`~dpipe.io._store.Store`, :func:`~dpipe.io._store.read_shard`,
:class:`~dpipe.io._writer.ShardWriter`, ``dpipe verify``) is the same for every format: the
manifest, the checks of a shard's contents and checksums, the temporary directory and its
rename. Each format handles both feature layouts (``dense``, ``csr``; :mod:`dpipe.reduce._block`).

Formats are imported on first use (:func:`store_format`): a worker reading a Zarr store
never loads pyarrow.
"""

from __future__ import annotations

import abc
import functools
import importlib
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import numpy as np

from ..exceptions import StoreError

if TYPE_CHECKING:
    from ._manifest import Manifest

__all__ = ["ShardCheck", "ShardColumns", "ShardSink", "StoreFormat", "store_format"]

#: a shard's columns as a format reads them: X (dense float32 or CSR), y, group, weight
ShardColumns = tuple[Any, np.ndarray, "np.ndarray | None", "np.ndarray | None"]


class ShardCheck(NamedTuple):
    """What a shard must hold, from the manifest; travels with :meth:`~dpipe.io._store.Store.shard_args` to the workers.

    Attributes
    ----------
    class_counts : (n_negative, n_positive)
        The manifest's two counts.
    digests : dict or None
        Recorded content hashes (schema 2), compared in verify mode.
    has_group, has_weight : bool
        Which optional arrays the shard has.
    chunk_files : bool
        Whether every Zarr chunk must have a file (stores with checksums, written with ``write_empty_chunks``).
    labelled : bool
        False: the store has no labels and ``y`` must be all 0.
    nnz : int or None
        CSR stores: the shard's stored values (None: a dense store).
    layout : str
        The store's layout (a name in :data:`dpipe.reduce._block.LAYOUTS`): the block read must be of it.
    """

    class_counts: tuple[int, ...]
    digests: dict[str, str] | None
    has_group: bool
    has_weight: bool
    chunk_files: bool
    labelled: bool = True
    nnz: int | None = None
    layout: str = "dense"


#: manifest ``format`` -> (module, class), imported on first use
_FORMATS = {"zarr": ("._zarr_store", "ZarrFormat"), "parquet": ("._parquet_store", "ParquetFormat")}


class ShardSink(abc.ABC):
    """Writes the shards of one store, in order, into a temporary directory (:class:`~dpipe.io._writer.ShardWriter`).

    The writer checks the rows, hashes them and keeps the manifest; a sink only lays the
    arrays down. Rows come in the store's layout (float32 dense or CSR).
    """

    @abc.abstractmethod
    def write(self, index: int, start: int, stop: int, X: Any, y: np.ndarray, group: np.ndarray | None, weight: np.ndarray | None) -> None:
        """Write shard ``index``, rows ``start:stop`` of the store (it may be empty)."""

    @abc.abstractmethod
    def finish(self, manifest: Manifest) -> None:
        """Complete the arrays once every shard is written (before ``manifest.json`` is written and the directory renamed)."""

    @abc.abstractmethod
    def check_written(self, n_rows: int, nnz: int, where: str) -> None:
        """Before the rename: every file of the ``n_rows`` rows (``nnz`` values, CSR) written is still there and not
        empty; :class:`~dpipe.exceptions.StoreError` naming ``where`` and the first file missing."""


class StoreFormat(abc.ABC):
    """One on-disk encoding of a store; stateless (one instance per format, see :func:`store_format`)."""

    #: the manifest's ``format`` value
    name: ClassVar[str]

    @abc.abstractmethod
    def check_open(self, path: str, manifest: Manifest, raw_manifest: bytes, recording: bool) -> None:
        """The open-time checks: the arrays or parts exist and have the manifest's shapes.

        ``raw_manifest`` is ``manifest.json`` as read, for a format that keeps a second copy to
        compare; ``recording``: ``dpipe verify --record`` is about to rewrite both copies.

        Raises
        ------
        StoreError
            One line naming the store and what disagrees.
        """

    @abc.abstractmethod
    def read(self, path: str, index: int, start: int, stop: int, n_features: int, check: ShardCheck | None, where: str,
             mmap: bool) -> ShardColumns:
        """Shard ``index`` (rows ``start:stop``) as stored, with the format's own cheap checks when ``check`` is given.

        The caller checks the contents against the manifest (:func:`~dpipe.io._store.read_shard`);
        ``where`` names the shard in error messages; ``mmap``: a raw dense chunk may be returned
        memory-mapped.
        """

    @abc.abstractmethod
    def sink(self, tmp: str, n_features: int, shard_rows: int, layout: str, with_group: bool, with_weight: bool) -> ShardSink:
        """A writer of this format's arrays into the (empty) directory ``tmp``."""

    def record_manifest(self, path: str, manifest: Manifest) -> None:  # noqa: B027 - a format may keep no copy
        """Replace the format's own copy of the manifest (``dpipe verify --record``); ``manifest.json`` is written after it."""


def store_format(name: str, path: str = "") -> StoreFormat:
    """The :class:`StoreFormat` of a manifest's ``format`` (``"zarr"`` or ``"parquet"``).

    Raises
    ------
    StoreError
        An unknown format, naming ``path``.
    """
    try:
        module, cls = _FORMATS[name]
    except (KeyError, TypeError):
        raise StoreError(f"{path}: unknown store format {name!r}") from None
    return _instance(module, cls)


@functools.cache
def _instance(module: str, cls: str) -> StoreFormat:
    """The one (stateless) instance of a format class, imported on first use."""
    return getattr(importlib.import_module(module, __package__), cls)()
