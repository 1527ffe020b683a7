"""Open a dataset store and read it shard by shard.

A store is a directory holding ``manifest.json`` and the arrays of one store format
(:mod:`dpipe.io._store_format`): a Zarr v3 group (:mod:`dpipe.io._zarr_store`) or one
Parquet file per shard (:mod:`dpipe.io._parquet_store`). Its features are a dense float32
block or, in a CSR store (manifest ``layout: csr``, schema 3), sparse rows, read as a
``scipy.sparse.csr_array`` (:mod:`dpipe.reduce._block`) whose indices are checked to lie in
``[0, d)`` on every read.

:func:`read_shard` is a pure function of (path, format, shard bounds, expected
contents): dask workers call it to load their shards.

Integrity checks
----------------
At open, always: the manifest decodes with its schema and is consistent (shard
bounds partition ``[0, n_rows)``, class counts add up, one entry per shard); a Zarr
store's attributes hold the same manifest as ``manifest.json``; the arrays have the
manifest's shape; every Parquet part is present, non-empty, and no part lies beyond
the manifest's shards.

On every shard read, always (cheap: a few ``stat`` calls and a count of ``y``,
which is read anyway): the shard's Zarr chunk files of ``X`` and ``y`` exist and
are non-empty (the writer writes every chunk, so a missing one is damage rather
than zeros); a Parquet part holds the rows of its own position (its ``dpipe.shard``
metadata); the row count; the class counts of ``y`` equal the manifest's.

By default, and in verify mode (``verify=True``, ``dpipe verify``, ``--verify``, the
dask config key ``dpipe.verify``): every array of the shard is re-hashed and compared
with the checksum recorded at write time (:mod:`dpipe.io._checksum`). Opting out:
``verify=False``, ``--no-verify``, ``dpipe.verify: false``.

A store written before checksums (manifest schema 1) is read unverified with a
:class:`~dpipe.exceptions.DataWarning` when verification is the default (``auto``), and
refused when it was asked for explicitly (see :class:`Store`).
"""

from __future__ import annotations

import copy
import dataclasses
import os
import warnings
from typing import Any

import numpy as np

from .._config import get_setting
from ..exceptions import DataWarning, ParameterError, StoreError
from ..reduce._block import LAYOUTS, FeatureBlock, as_block, concat_rows, empty_block
from ._checksum import shard_digests
from ._manifest import Manifest, decode_manifest, read_manifest_raw
from ._store_format import ShardCheck, store_format

__all__ = ["Shard", "ShardCheck", "Store", "as_store", "open_store", "read_shard", "resolve_verify", "OLD_STORE_MESSAGE"]

#: message of a store written before checksums (format with the store's path)
OLD_STORE_MESSAGE = "{path}: written by dpipe <= 0.1 without checksums; re-ingest it, or run `dpipe verify --record {path}` to add them"

_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def resolve_verify(verify: bool | str | None = None, owner: str = "open_store") -> bool | str:
    """The verify mode: ``True`` (asked for), ``False`` (opted out) or ``"auto"`` (the default).

    ``verify`` if given (a bool, or ``"auto"``), else the dask config key ``dpipe.verify``
    (default ``auto``, as is ``null``; also ``true`` / ``false``, or their spellings in an
    environment variable such as ``DASK_DPIPE__VERIFY=false``).

    Raises
    ------
    ParameterError
        One line naming the parameter or the setting, for any other value.
    """
    if verify is not None:
        if isinstance(verify, (bool, np.bool_)):
            return bool(verify)
        if isinstance(verify, str) and verify.strip().lower() == "auto":
            return "auto"
        raise ParameterError(f"The 'verify' parameter of {owner} must be True, False, 'auto' or None. Got {verify!r} instead.")
    value = get_setting("verify")
    if value is None:  # null in a config file: the default
        return "auto"
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    text = str(value).strip().lower() if isinstance(value, (str, int)) else None
    if text == "auto":
        return "auto"
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ParameterError(f"The dpipe.verify setting must be true, false or auto. Got {value!r} instead.")


@dataclasses.dataclass
class Shard:
    """Rows of one shard.

    Attributes
    ----------
    X : ndarray of shape (n, d), float32, or scipy.sparse.csr_array
        The features as the store's layout holds them (the native array of :attr:`block`: dense,
        or CSR in a sparse store); what users and the store formats read and write.
    y : ndarray of shape (n,), int8 in {-1, +1}
    group : ndarray of shape (n,), int16, or None
    weight : ndarray of shape (n,), float32, or None
    index : int
        Shard number in the store.
    """

    X: Any
    y: np.ndarray
    group: np.ndarray | None = None
    weight: np.ndarray | None = None
    index: int = 0

    @property
    def block(self) -> FeatureBlock:
        """The feature block over :attr:`X` (no copy): the products, sums and selections every pass calls, whatever the layout."""
        return as_block(self.X)

    @property
    def n_rows(self) -> int:
        """Number of rows."""
        return self.block.shape[0]

    @property
    def nbytes(self) -> int:
        """Bytes held by the arrays."""
        return self.block.nbytes + sum(a.nbytes for a in (self.y, self.group, self.weight) if a is not None)


def read_shard(path: str, format: str, index: int, start: int, stop: int, n_features: int,
               check: ShardCheck | None = None, verify: bool = False, *, mmap: bool = False) -> Shard:
    """Read shard ``index`` (rows ``start:stop``) of the store at ``path``.

    With ``check`` (from :meth:`Store.shard_args`) the cheap integrity checks run;
    with ``verify`` every array is re-hashed and compared with ``check.digests``.

    ``mmap``: a Zarr shard whose features are one raw chunk is a read-only memory map of its
    file (:meth:`~dpipe.io._zarr_store.ZarrFormat.read`; a streamed pass then reads the page
    cache at memory speed, and the kernel's readahead overlaps a disk read with the compute).
    A map stays valid while dpipe replaces the store (writers rename, never truncate);
    truncating the file under a running pass would crash its worker (SIGBUS).
    """
    where = f"{path}, shard {index} (rows {start}..{stop})"
    fmt = store_format(format, path)
    try:
        X, y, group, weight = fmt.read(path, index, start, stop, n_features, check, where, mmap)
    except StoreError:
        raise
    except Exception as exc:  # zarr / arrow errors: name the shard
        raise StoreError(f"{where}: cannot read ({type(exc).__name__}: {exc})") from exc
    if X.shape != (stop - start, n_features):
        raise StoreError(f"{where}: X has shape {X.shape}, manifest says ({stop - start}, {n_features})")
    block = as_block(X)
    if check is not None and block.layout != check.layout:
        raise StoreError(f"{where}: X is {block.layout}, the manifest says layout {check.layout}")
    problem = block.check_stored(n_features, None if check is None else check.nnz)
    if problem is not None:
        raise StoreError(f"{where}: {problem}")
    if check is not None:
        _check_contents(X, y, group, weight, check, index, start, stop, where, verify)
    return Shard(X=X, y=y, group=group, weight=weight, index=index)


def _check_contents(X, y, group, weight, check: ShardCheck, index: int, start: int, stop: int, where: str, verify: bool) -> None:  # noqa: ANN001
    n = stop - start
    for name, arr, want in (("y", y, True), ("group", group, check.has_group), ("weight", weight, check.has_weight)):
        if (arr is not None) != want:
            raise StoreError(f"{where}: array {name} is {'missing' if want else 'present but not in the manifest'}")
        if arr is not None and arr.shape != (n,):
            raise StoreError(f"{where}: {name} has shape {arr.shape}, manifest says ({n},)")
    if not check.labelled:
        if np.any(y != 0):
            row = int(np.argmax(y != 0))
            raise StoreError(f"{where}: the store is unlabelled, but y holds {int(y[row])} at row {start + row} (expected 0)")
    neg = int(np.count_nonzero(y == -1))
    pos = int(np.count_nonzero(y == 1))
    if check.labelled and neg + pos != n:
        row = int(np.argmax((y != -1) & (y != 1)))
        raise StoreError(f"{where}: {n - neg - pos} labels are neither -1 nor +1 (first: {int(y[row])} at row {start + row})")
    if (neg, pos) != tuple(check.class_counts):
        raise StoreError(f"{where}: y has {neg} negative / {pos} positive labels, the manifest says {check.class_counts[0]} / {check.class_counts[1]}")
    if verify:
        if check.digests is None:
            raise StoreError(f"{where}: no checksums recorded to verify against (store written by dpipe <= 0.1; run `dpipe verify --record`)")
        got = shard_digests(index, start, stop, X, y, group, weight)
        for name, h in check.digests.items():
            if got.get(name) != h:
                raise StoreError(f"{where}: content hash of {name} differs from the one recorded at write time "
                                 "(values changed, or chunks / parts swapped, copied or lost since)")


class Store:
    """A dataset store opened for reading.

    Parameters
    ----------
    path : str
        Directory of the store.
    verify : bool or "auto", optional
        Whether every shard read is re-hashed and compared with the checksums recorded
        at write time. ``None`` (default): the dask config key ``dpipe.verify``, whose
        default is ``auto``. See Notes.

    Attributes
    ----------
    path : str
    manifest : Manifest
    verify : bool
        Whether shard reads are re-hashed (what :meth:`shard_args` sends to the workers).
    verify_mode : bool or "auto"
        What was asked: ``True`` (``verify=True``, ``--verify``, ``dpipe.verify: true``),
        ``False`` (``verify=False``, ``--no-verify``, ``dpipe.verify: false``) or ``"auto"``
        (nothing said: the default).

    Notes
    -----
    Verification is on unless the user opts out: in the default mode (``"auto"``) and with
    ``True`` every shard read is re-hashed, in whichever process reads it (a dask worker
    gets the flag with :meth:`shard_args`), on every read (a streamed pass re-hashes each
    shard on every pass; a persisted one once, when it is loaded).

    The two modes differ only for a store without checksums (schema 1, written by dpipe
    <= 0.1): with ``"auto"`` and ``False`` it opens with a
    :class:`~dpipe.exceptions.DataWarning` saying how to add them, and is read with the
    checks that need no checksum. A warning, not an error: nothing says such a store is
    damaged, and refusing it by default would stop every job on existing data at the
    upgrade. With ``True`` it is refused (:class:`~dpipe.exceptions.StoreError`), since
    what was explicitly asked cannot be done. The default is a third value rather than
    ``true`` so that ``dpipe.verify: true`` set in a config file or an environment
    variable still counts as asked.
    """

    def __init__(self, path: str, verify: bool | str | None = None, *, _recording: bool = False) -> None:
        self.path = os.path.abspath(os.fspath(path))
        mode = resolve_verify(verify, "Store")
        raw = read_manifest_raw(self.path)
        self.manifest: Manifest = decode_manifest(raw, where=self.path, directory=self.path)
        m = self.manifest
        store_format(m.format, self.path).check_open(self.path, m, raw, _recording)
        self._set_verify(mode, _recording)
        if not m.has_checksums and not _recording:
            warnings.warn(OLD_STORE_MESSAGE.format(path=self.path), DataWarning, stacklevel=2)

    def _set_verify(self, mode: bool | str, recording: bool = False) -> None:
        """Set :attr:`verify_mode` and :attr:`verify`; refuse a store without checksums when verification was asked for."""
        has = self.manifest.has_checksums
        if mode is True and not has and not recording:
            raise StoreError(OLD_STORE_MESSAGE.format(path=self.path) + " (verification was asked for: verify=True or dpipe.verify: true; "
                             "verify=False reads it unverified)")
        self.verify_mode = mode
        self.verify = bool(has) and mode is not False

    def with_verify(self, verify: bool | str | None) -> Store:
        """This store read with ``verify`` (see :class:`Store`); ``None``: this store as it was opened.

        A copy sharing the manifest when the mode differs (the store is not opened again).
        """
        if verify is None:
            return self
        mode = resolve_verify(verify, "Store.with_verify")
        if mode == self.verify_mode:
            return self
        other = copy.copy(self)
        other._set_verify(mode)
        return other

    def __repr__(self) -> str:
        m = self.manifest
        return f"Store({self.path!r}, format={m.format!r}, rows={m.n_rows}, features={m.n_features}, shards={m.n_shards})"

    @property
    def n_shards(self) -> int:
        """Number of shards."""
        return self.manifest.n_shards

    @property
    def format(self) -> str:
        """Storage format, "zarr" or "parquet"."""
        return self.manifest.format

    def require_labels(self, what: str) -> None:
        """Raise a :class:`ParameterError` naming the store when it has no labels and ``what`` needs them."""
        if not self.manifest.labelled:
            raise ParameterError(f"{self.path}: an unlabelled store (ingested with unlabeled=True); {what} needs labels. It can be one of the datasets= "
                                 "of rate constraints that need none (churn, coverage / positive_rate), or be scored by predict.")

    def shard_check(self, index: int) -> ShardCheck:
        """What shard ``index`` must hold, for :func:`read_shard`."""
        m = self.manifest
        return ShardCheck(
            class_counts=tuple(m.class_counts[index]),
            digests=dict(m.shards[index].digests) if m.shards is not None else None,
            has_group=m.group_counts is not None,
            has_weight=bool(m.has_weight),
            chunk_files=m.has_checksums,
            labelled=m.labelled,
            nnz=None if m.shard_nnz is None else int(m.shard_nnz[index]),
            layout=m.layout,
        )

    def shard_args(self, index: int, verify: bool | None = None) -> tuple:
        """Arguments of :func:`read_shard` for shard ``index`` (with the store's checks and verify mode)."""
        start, stop = self.manifest.shard_bounds[index]
        return (self.path, self.format, index, start, stop, self.manifest.n_features, self.shard_check(index),
                self.verify if verify is None else bool(verify))

    def read_shard(self, index: int, verify: bool | None = None, *, mmap: bool = False) -> Shard:
        """Read one shard in this process (``mmap``: see :func:`read_shard`)."""
        return read_shard(*self.shard_args(index, verify), mmap=mmap)

    def iter_shards(self, *, mmap: bool = False):
        """Yield every shard in order, in this process (``mmap``: see :func:`read_shard`)."""
        for i in range(self.n_shards):
            yield self.read_shard(i, mmap=mmap)

    def read_all(self) -> Shard:
        """Read the whole store into memory (for small stores and tests)."""
        shards = list(self.iter_shards())
        cat = lambda key: None if getattr(shards[0], key, None) is None else np.concatenate([getattr(s, key) for s in shards])  # noqa: E731
        if not shards:
            return Shard(X=empty_block(self.manifest.n_features, self.manifest.layout), y=np.zeros(0, np.int8))
        return Shard(X=concat_rows([s.X for s in shards], self.manifest.n_features, self.manifest.layout), y=np.concatenate([s.y for s in shards]), group=cat("group"), weight=cat("weight"), index=-1)

    @property
    def nbytes(self) -> int:
        """Uncompressed bytes of all shards in memory."""
        m = self.manifest
        per_row = 1 + (2 if m.groups is not None else 0) + (4 if m.has_weight else 0)
        return LAYOUTS[m.layout].block.feature_bytes(m.n_rows, m.n_features, m.nnz) + m.n_rows * per_row

    @property
    def layout(self) -> str:
        """How the features are stored: ``"dense"`` or ``"csr"``."""
        return self.manifest.layout


def open_store(path: str | os.PathLike, verify: bool | str | None = None) -> Store:
    """Open the dataset store at ``path`` (Zarr or Parquet, told by its manifest).

    Parameters
    ----------
    path : str or path-like
        Directory of the store.
    verify : bool or "auto", optional
        Re-hash every shard read and compare with the recorded checksums; ``False`` opts
        out. Default: the dask config key ``dpipe.verify`` (``auto``: on; see :class:`Store`).

    Raises
    ------
    StoreError
        The path is not a store, its manifest is malformed, or its arrays disagree with its
        manifest; or ``verify=True`` and the store has no checksums.
    """
    return Store(os.fspath(path), verify=None if verify is None else resolve_verify(verify, "open_store"))


def as_store(store: str | os.PathLike | Store, verify: bool | str | None = None, owner: str = "open_store") -> Store:
    """``store`` opened (:func:`open_store`), or an open :class:`Store` read with ``verify`` (:meth:`Store.with_verify`).

    ``owner`` names the function whose ``verify`` parameter a bad value is reported against.
    """
    mode = None if verify is None else resolve_verify(verify, owner)
    return store.with_verify(mode) if isinstance(store, Store) else Store(os.fspath(store), verify=mode)
